"""Bounds the QCOM path holds: a hang timeout that a short program over many
work-groups never reached, CP packets with short bodies, header values that do not fit their register fields, IBO
accesses past the buffer, and a wait for a submission older than the kept timestamps."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.hangguard import ends

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
  with pytest.raises(GPUFault, match="after the hang timeout"):
    ends(prog, global_size=(1 << 24, 1, 1), local_size=(64, 1, 1), wait=True)


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


def test_an_ibo_access_past_its_buffer_is_bounds_checked_not_written_into_the_next_object(dev):
  """An IBO access is bounds-checked against the descriptor's element count as the hardware does for buffers (issue
  28): a store past it is dropped (it never lands in the rest of the memory object or the next one), a load past
  it returns 0, an atomic past it changes nothing and returns 0 -- no fault."""
  text = b"""@localsize 1, 1, 1
@buf 4
@buf 4
mov.u32u32 r0.x, 4
mov.u32u32 r0.y, 7
mov.u32u32 r0.z, 1024
mov.u32u32 r0.w, 0
mov.u32u32 r1.x, 5
mov.u32u32 r1.y, 1
mov.u32u32 r1.z, 1
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r0.y, r0.x, 0
stib.b.untyped.1d.u32.1.imm r0.y, r0.z, 0
atomic.b.add.untyped.1d.u32.1.imm r1.x, r0.z, 0
ldib.b.untyped.1d.u32.1.imm r2.x, r0.x, 1
(sy)nop
stib.b.untyped.1d.u32.1.imm r2.x, r0.w, 0
stib.b.untyped.1d.u32.1.imm r1.x, r1.z, 0
end
nop
"""
  prog = dev.load(text, "past")
  buf, other = dev.alloc(4096), dev.alloc(4096)          # memory past the 4 elements the descriptors give
  dev.copyin(buf, np.full(1024, 0x11, np.uint32))
  dev.copyin(other, np.full(1024, 0xAB, np.uint32))
  prog(buf, other, global_size=(1,), local_size=(1,), wait=True)
  got = np.frombuffer(dev.copyout(buf), np.uint32)
  assert got[0] == 0                    # other's element 4 is past its 4: 0, not the 0xAB in memory
  assert got[1] == 0                    # the atomic past the end returned 0 (r1.x held 5)
  assert (got[4:] == 0x11).all()        # the store to element 4 (and 1024) was dropped
  assert (np.frombuffer(dev.copyout(other), np.uint32) == 0xAB).all()


def test_a_value_older_than_the_kept_timestamps_has_none():
  from hcq.drivers.qcom.device import KGSLEngine
  eng = KGSLEngine.__new__(KGSLEngine)
  from collections import deque
  eng.submitted = deque([(5000 + i, 100 + i) for i in range(4)], maxlen=4)
  assert eng.timestamp_for(10) is None           # was the timestamp of submission 5000: a newer one than awaited
  assert eng.timestamp_for(5001) == 101 and eng.timestamp_for(9999) is None
