"""What the final review of the QCOM path found, each held by a test: a hang timeout that a short program over many
work-groups never reached, CP packets with short bodies, header values that do not fit their register fields, IBO
accesses past the buffer, and a wait for a submission older than the kept timestamps."""
from __future__ import annotations

import struct
import time

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.qcom import cp
from hcq.drivers.qcom.program import Kernel
from hcq.errors import DeviceError, GPUFault

END = 0x0300000000000000


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM", config=Config(timeout_s=10.0)) as d: yield d


def test_a_short_program_over_many_work_groups_still_meets_the_hang_timeout(dev):
  """Each batch of work-groups ran fewer than 1024 steps, where the deadline was checked: 2^24 groups of `end` ran on
  for minutes. Now the deadline is also checked per batch."""
  dev.owned_os.devices[0].hang_timeout_s = 0.2
  prog = dev.load_code(Kernel(local_size=(64, 1, 1)), struct.pack("<2Q", END, 0), "many")
  t0 = time.monotonic()
  with pytest.raises(GPUFault, match="after the hang timeout"):
    prog(global_size=(1 << 24, 1, 1), local_size=(64, 1, 1), wait=True)
  assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("name", ["CP_MEM_WRITE", "CP_REG_TO_MEM", "CP_LOAD_STATE6_FRAG", "CP_EXEC_CS",
                                  "CP_INDIRECT_BUFFER", "CP_WAIT_REG_MEM"])
def test_a_packet_with_a_short_body_is_an_illegal_packet_not_a_traceback(dev, name):
  value = dev.submit_cp(cp.pkt7(cp.op(name), 1))
  with pytest.raises(GPUFault, match=f"{name} with a body of 1 dwords"): dev.wait_value(value)


@pytest.mark.parametrize("header, match", [
  ("@invocationid(r99.x)", "past r62.w"), ("@wgid(r99.x)", "past r62.w"),
  ("@branchstack 9999", "does not fit SP_CS_CTRL_REG0.BRANCHSTACK")])
def test_header_values_that_do_not_fit_their_fields_are_errors(dev, header, match):
  with pytest.raises(DeviceError, match=match): dev.load(f"@localsize 1, 1, 1\n{header}\nend\nnop\n".encode(), "p")


def test_the_branchstack_limit_is_the_fields_width():
  from hcq.autogen.qcom import a6xx
  from hcq.drivers.qcom.program import BRANCHSTACK_MAX
  f = a6xx.FIELDS["A6XX_SP_CS_CTRL_REG0_BRANCHSTACK"]
  assert BRANCHSTACK_MAX == (1 << (f.high - f.low + 1)) - 1


def test_an_ibo_store_past_its_buffer_faults_instead_of_writing_the_next_object(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 4
mov.u32u32 r0.y, 7
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r0.y, r0.x, 0
end
nop
"""
  prog = dev.load(text, "past")
  buf, neighbour = dev.alloc(16), dev.alloc(16)
  dev.copyin(neighbour, np.zeros(4, np.uint32))
  with pytest.raises(GPUFault, match="element 4 is outside its IBO of 4 elements"):
    prog(buf, global_size=(1,), local_size=(1,), wait=True)


def test_a_value_older_than_the_kept_timestamps_has_none():
  from hcq.drivers.qcom.device import KGSLEngine
  eng = KGSLEngine.__new__(KGSLEngine)
  from collections import deque
  eng.submitted = deque([(5000 + i, 100 + i) for i in range(4)], maxlen=4)
  assert eng.timestamp_for(10) is None           # was the timestamp of submission 5000: a newer one than awaited
  assert eng.timestamp_for(5001) == 101 and eng.timestamp_for(9999) is None
