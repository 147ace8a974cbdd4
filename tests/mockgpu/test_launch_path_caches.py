"""issue 33 P1: what the MOCK+AMD launch path keeps from one launch to the next, checked against doing it afresh,
and dropped when what it was taken from changes: the emulator's start function (kept per emulator object), the read
pointer's and the fence's checked memory cells (per mapping generation), the doorbell store's nested Ctrl-C span,
and the mock OS's memory barrier (no foreign call, the engines still run)."""
import ctypes

import pytest

from hcq.autogen import kfd
from hcq.config import Config
from hcq.drivers.system import libc
from hcq.drivers.system.interrupts import held
from hcq.errors import GPUFault
from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.mmio import DoorbellMMIO
from hcq.mockgpu.mockos import MockOS
from mock_kfd_harness import Harness
from test_mock_doorbell_path import FakeEmu, dispatch_packet, fence, program_regs, sh


@pytest.fixture
def h():
  har = Harness(Config(mock_threaded=False, timeout_s=2))
  yield har
  har.os.close()


class StarterEmu(FakeEmu):
  """A stand-in with emu.starter's positional function: records what it is given, named as start() names it."""

  NAMES = ("pgm_addr", "rsrc1", "rsrc2", "rsrc3", "user_sgprs", "grid", "block", "lds_bytes", "scratch",
           "instruction_budget", "sliced", "bits")

  def starter(self, arch, wave_size):
    self.target = (arch, wave_size)

    def run(memory, *args):
      self.calls.append(dict(zip(self.NAMES, args)))
      return (1, 1, 0.0)
    return run, 7


def test_the_kept_start_function_follows_the_emulator_object(h):
  """The GPU looks the start function up once per emulator object: a new one (another emulator, a stand-in) gets
  the next dispatch, with the arguments start() would get."""
  q = h.queue("compute")
  first, second = FakeEmu(), StarterEmu()
  h.gpu._emu = first
  q.submit(program_regs(0x7000_0000_1000) + sh(R.COMPUTE_USER_DATA_0, 5) + dispatch_packet((2, 1, 1)))
  h.gpu._emu = second
  q.submit(dispatch_packet((2, 1, 1)))
  q.submit(dispatch_packet((3, 1, 1)))
  assert len(first.calls) == 1 and len(second.calls) == 2 and second.target == ("gfx1100", 32)
  kw = first.calls[0]
  pos = second.calls[0]
  assert pos["bits"] == 7 and pos["sliced"] is True and pos["instruction_budget"] == h.gpu.instruction_budget
  assert {k: pos[k] for k in kw if k not in ("arch", "wave_size")} == {k: v for k, v in kw.items() if k not in ("arch", "wave_size")}
  assert second.calls[1]["grid"] == (3, 1, 1) and second.calls[1]["user_sgprs"][0] == 5
  h.gpu._emu = first                          # and back
  q.submit(dispatch_packet())
  assert len(first.calls) == 2 and len(second.calls) == 2


def test_busy_spans_last_the_time_the_emulator_measured(h):
  q = h.queue("compute")
  fake = h.gpu._emu = FakeEmu()
  fake.start = lambda memory, **kw: (1, 1, 0.25)
  q.submit(program_regs(0x7000_0000_1000) + dispatch_packet())
  start, end = h.gpu._busy[-1]
  assert end - start == pytest.approx(0.25)


def test_the_read_pointer_store_faults_once_its_memory_is_unmapped(h):
  """The read pointer is stored through the cell checked for the current mappings: unmapped, the store faults with
  its address instead of writing memory the GPU no longer maps."""
  q = h.queue("compute")
  sig = h.signals
  for value in (1, 2): q.submit(fence(sig.va, value))
  assert q.rptr == q.put
  kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(h.kfd, handle=q.gart.handle, device_ids_array_ptr=ctypes.addressof(h.ids),
                                       n_devices=1)
  before = q.rptr
  with pytest.raises(GPUFault) as e: q.submit(fence(sig.va, 3))
  assert e.value.address == q.gart.va + 128 and "read pointer" in str(e.value)
  assert sig.u64()[0] == 3 and q.rptr == before         # the fence ran; the pointer's memory was not written


def test_a_doorbell_store_in_a_held_span_nests_in_it():
  """Inside the main thread's held span (a submission) the doorbell store adds nothing to it (the span defers Ctrl-C
  already); outside any span it holds and releases; a Ctrl-C recorded meanwhile is raised at the outermost release."""
  depths = []
  page = DoorbellMMIO("doorbells", 0x1000, lambda off, v: depths.append(("ring", held.depth)))
  page.route(0x8, lambda v: depths.append(("route", held.depth)))
  assert held.depth == 0
  page.write64(0x8, 1)
  page.write64(0x10, 1)
  held.hold()
  try:
    page.write64(0x8, 2)
    page.write64(0x10, 2)
    assert held.depth == 1
  finally: held.release()
  assert depths == [("route", 1), ("ring", 1), ("route", 1), ("ring", 1)] and held.depth == 0
  calls = []

  def interrupted(v):
    calls.append(v)
    raise KeyboardInterrupt
  page.route(0x8, interrupted)
  held.hold()
  with pytest.raises(KeyboardInterrupt): page.write64(0x8, 3)
  assert held.depth == 1            # the outer span's, still held
  held.release()
  assert held.depth == 0 and calls == [3]


def test_the_mock_memory_barrier_makes_no_foreign_call_and_still_ticks(monkeypatch):
  def foreign():
    raise AssertionError("the mock's barrier called the hardware fence")
  monkeypatch.setattr(libc, "memory_barrier", foreign)

  class Engine:
    may_progress, polls, blocked = True, 0, False

    def poll(self):
      self.polls += 1
      progress, self.may_progress = self.may_progress, False
      return progress
  with MockOS() as mos:
    e = Engine()
    mos.register_engine(e)
    mos.memory_barrier()             # a tick: a round with progress, then one without
    assert e.polls == 2
    mos.memory_barrier()             # idle: nothing to run
    assert e.polls == 2


def test_others_idle_follows_the_registered_engines():
  """MockOS.others_idle answers at once for the only registered engine; a second engine (busy or idle), and its
  going, are seen at the next call."""
  class Engine:
    blocked = False
    def __init__(self, may_progress): self.may_progress = may_progress
    def poll(self): return False
  with MockOS() as mos:
    a, b = Engine(True), Engine(True)       # both may progress
    mos.register_engine(a)
    assert mos.others_idle(a) and not mos.others_idle(b)     # a is the only one; for b, a is busy
    mos.register_engine(b)
    assert not mos.others_idle(a) and not mos.others_idle(b)
    b.may_progress = False
    assert mos.others_idle(a)
    b.may_progress = True
    mos.unregister_engine(b)
    assert mos.others_idle(a)
    mos.unregister_engine(a)
    mos.register_engine(b)
    assert mos.others_idle(b) and not mos.others_idle(a)
