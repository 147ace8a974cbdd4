"""The runtime is generic: a fake vendor (fake_vendor.py: its own queue format, an in-process engine per queue, ~150
lines) runs launches, copies, cross-engine waits, timeouts and a fault through drivers/hcq alone."""
import ctypes
import struct
import time

import numpy as np
import pytest

from hcq import DeviceError, GPUFault, Timeout
from hcq.config import Config
from hcq.drivers.hcq.runtime import HCQDevice

import fake_vendor as fv


class _OS:
  """The OS interface the runtime itself uses: clock, sleep, memory barrier."""
  monotonic, sleep = staticmethod(time.monotonic), staticmethod(time.sleep)
  def memory_barrier(self): pass


def _args(a, n): return struct.unpack(f"<{n}Q", ctypes.string_at(a, 8 * n))
def _f32(va, n): return np.frombuffer((ctypes.c_float * n).from_address(va), np.float32)


def vadd(dev, a):            # c = a + b over 1024 floats, after a pause (so that a copy issued after it must wait)
  x, y, out = _args(a, 3)
  time.sleep(0.05)
  _f32(out, 1024)[:] = _f32(x, 1024) + _f32(y, 1024)


def hang(dev, a):
  while not dev.compute.stop: time.sleep(1e-3)


def fault(dev, a): raise GPUFault("fake: load from an unmapped page", address=0xBAD000, kind="page not present")


fv.KERNELS.update({1: vadd, 2: hang, 3: fault})


@pytest.fixture
def dev():
  d = fv.FakeDevice(_OS(), Config(timeout_s=0.5))
  yield d
  d.close()


def test_it_is_a_runtime_device_and_imports_no_other_vendor():
  assert issubclass(fv.FakeDevice, HCQDevice)
  src = open(fv.__file__).read()
  assert "drivers.amd" not in src and "mockgpu" not in src


def test_launches_and_staged_copies_give_numpys_result(dev):
  a, b, c = (dev.alloc(4096) for _ in range(3))           # device memory: the CPU cannot see it (staged copies)
  assert a.cpu_view is None
  x, y = np.arange(1024, dtype=np.float32), np.full(1024, 0.5, np.float32)
  dev.copyin(a, x)
  dev.copyin(b, y)
  prog = dev.load(struct.pack("<II", 1, 3), "vadd")
  assert prog(a, b, c, global_size=1, local_size=1, wait=True) > 0
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(c), np.float32), x + y)


def test_a_copy_after_a_launch_waits_for_it_on_the_device(dev):
  """The copy engine runs in its own thread: without the runtime's cross-engine wait, the copy-out (issued at once,
  wait=False launch) would read c before the 50 ms kernel wrote it."""
  a, b, c = (dev.alloc(4096) for _ in range(3))
  dev.copyin(a, np.ones(1024, np.float32))
  dev.copyin(b, np.ones(1024, np.float32))
  prog = dev.load(struct.pack("<II", 1, 3), "vadd")
  for i in range(3):
    prog(a, b, c, global_size=1, local_size=1)
    assert (np.frombuffer(dev.copyout(c), np.float32) == 2).all()
    dev.copyin(c, np.zeros(1024, np.float32))


def test_a_launch_that_never_ends_times_out_and_the_device_still_closes(dev):
  prog = dev.load(struct.pack("<II", 2, 0), "hang")
  with pytest.raises(Timeout) as e: prog(global_size=1, local_size=1, wait=True)
  assert e.value.timeout_s == dev.timeout_s == 0.5 and e.value.expected == dev.timeline.value
  waits = []
  dev.wait_value = lambda value: waits.append(value)      # counted, not timed (no test asserts a duration)
  dev.close()                              # does not wait again for the work that timed out
  assert waits == [] and dev.closed


def test_a_fault_is_raised_once_with_its_address_then_work_is_refused(dev):
  prog = dev.load(struct.pack("<II", 3, 0), "fault")
  with pytest.raises(GPUFault) as e: prog(global_size=1, local_size=1, wait=True)
  assert e.value.address == 0xBAD000 and "FAKE:0" in str(e.value)
  before = dev.timeline.value
  with pytest.raises(DeviceError, match="faulted earlier"): prog(global_size=1, local_size=1)
  with pytest.raises(DeviceError, match="faulted earlier"): dev.copyout(dev.alloc(64))
  assert dev.timeline.value == before      # nothing was submitted


def test_a_submission_interrupted_before_commit_leaves_nothing_behind(dev, monkeypatch):
  """A Ctrl-C (or any error) between the words and the doorbell: the words are rolled back, the timeline value and the
  launch data given back, and the device works on."""
  a, b, c = (dev.alloc(4096) for _ in range(3))
  prog = dev.load(struct.pack("<II", 1, 3), "vadd")
  prog(a, b, c, global_size=1, local_size=1, wait=True)
  before = (dev.timeline.value, list(dev.launch_data._inflight))
  real = dev.compute.write
  def interrupted(words):
    real(words)
    raise KeyboardInterrupt
  monkeypatch.setattr(dev.compute, "write", interrupted)
  with pytest.raises(KeyboardInterrupt): prog(a, b, c, global_size=1, local_size=1)
  monkeypatch.undo()
  assert (dev.timeline.value, list(dev.launch_data._inflight)) == before and dev.compute.pending == []
  dev.copyin(a, np.ones(1024, np.float32))
  dev.copyin(b, np.ones(1024, np.float32))
  prog(a, b, c, global_size=1, local_size=1, wait=True)
  assert (np.frombuffer(dev.copyout(c), np.float32) == 2).all()


def test_a_timeout_names_the_submission_the_device_is_stuck_at(dev):
  hang_prog = dev.load(struct.pack("<II", 2, 0), "hang")
  a = dev.alloc(64)
  dev.copyin(a, b"x" * 64)
  hang_prog(global_size=1, local_size=1)
  with pytest.raises(Timeout, match=r"the device is at timeline value 2: kernel hang on the compute engine"):
    dev.copyout(a)
