"""What a MOCK+QCOM launch keeps from one launch to the next (issue 33, P9) still gives what building it afresh gives:
the per-shape launch data with the buffers' addresses patched in, the CP's checked packet headers, and the CP's
checked compute state (kept by the values of the registers it reads: a changed register is checked again)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import hcq
from hcq.autogen.qcom import a6xx
from hcq.config import Config
from hcq.drivers.qcom import cp
from hcq.errors import GPUFault

from .test_dispatch_state import VADD, mutate, rewrite, vadd
from .test_programs import PROGRAMS


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM", config=Config(timeout_s=10.0)) as d: yield d


@pytest.mark.parametrize("name", ["vadd", "atomics"])
def test_the_shapes_launch_data_with_addresses_patched_is_the_data_built_afresh(dev, name):
  """Constants (a buffer's address in its (cR.c) register, the work-group count) and IBO descriptors: the per-shape
  template patched at launch equals QCOMProgram.launch_data built for those addresses (as bound launches build it)."""
  prog = dev.load((PROGRAMS / f"{name}.asm").read_bytes(), name)
  if name == "atomics": assert any(c is not None for _, c in prog.kernel.bufs)      # a buffer address in a constant
  for grid in ((1, 1, 1), (3, 2, 1)):
    shape = prog.shape(grid, prog.kernel.local_size, False)
    for addrs in ([0x1000 * (i + 1) for i in range(len(prog.kernel.bufs))],
                  [0x7F12_3456_7000 + 0x40000 * i for i in range(len(prog.kernel.bufs))]):
      explicit = struct.pack(f"<{len(addrs)}Q", *addrs)
      view = memoryview(bytearray(shape.data_size))
      view[:] = shape.data
      prog.patch_addresses(view, explicit)
      assert bytes(view) == prog.launch_data(explicit, shape.grid)


def test_repeat_launches_with_other_buffers_compute_with_those_buffers(dev):
  prog = dev.load(VADD, "vadd")
  for k in range(3):
    a, b = np.arange(256, dtype=np.float32) * (k + 1), np.full(256, k, np.float32)
    bufs = [dev.alloc(1024) for _ in range(3)]
    dev.copyin(bufs[0], a)
    dev.copyin(bufs[1], b)
    prog(*bufs, global_size=(4,), local_size=(64, 1, 1), wait=True)
    np.testing.assert_array_equal(np.frombuffer(dev.copyout(bufs[2]), np.float32), a + b)


def test_a_register_changed_after_a_checked_dispatch_is_checked_again(dev, monkeypatch):
  """The CP keeps a dispatch's checked state by the register values it read: a later dispatch whose THREADSIZEs
  disagree is refused, not run with the state checked before."""
  got, want = vadd(dev)
  np.testing.assert_array_equal(got[:64], want)
  mutate(monkeypatch, lambda w: rewrite(w, a6xx.REG_A6XX_HLSQ_CS_CNTL_1, lambda v: v | a6xx.A6XX_HLSQ_CS_CNTL_1_THREADSIZE(1)))
  with pytest.raises(GPUFault, match=r"HLSQ_CS_CNTL_1.THREADSIZE \(1\) differs from SP_CS_CTRL_REG0.THREADSIZE \(0\)"):
    vadd(dev)


def test_a_bad_header_is_refused_after_good_ones_with_the_same_opcode(dev):
  """Headers are checked once and kept; a header with the same opcode and a wrong parity bit is another header,
  checked (and refused) when it comes."""
  got, want = vadd(dev)
  np.testing.assert_array_equal(got[:64], want)
  words = cp.wait_for_idle()
  dev.submit_cp(words)
  dev.synchronize()
  bad = [words[0] ^ (1 << 23)] + words[1:]                     # CP_WAIT_FOR_IDLE's opcode parity flipped
  with pytest.raises(GPUFault, match="bad parity"):
    dev.submit_cp(bad)
    dev.synchronize()
