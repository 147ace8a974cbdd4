"""The synchronous doorbell path's shortcuts keep what the general path did.

A doorbell store goes straight to its queue (DoorbellMMIO.route), MockOS.tick_kicked polls the rung GPU alone while
every other engine is idle, DISPATCH_DIRECT reuses the converted launch state until an SH register outside the user
data changes, and DeviceMemory/ring reads reuse what they checked until the GPU's mappings change. Each test below
drives a case where a shortcut must give way: a fault raised from the doorbell write, a queue waiting on memory
another queue (or another GPU) writes, an engine that is not idle, register and mapping changes between launches."""
import ctypes

import pytest

from hcq.autogen import kfd
from hcq.config import Config
from hcq.errors import DeviceError, GPUFault, QueueError
from hcq.mockgpu.mockos import MockOS
from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.mmio import DoorbellMMIO
from mock_kfd_harness import Harness, pm4

WRITE_DATA, WAIT_REG_MEM, DISPATCH_DIRECT, RELEASE_MEM, SET_SH_REG = 0x37, 0x3C, 0x15, 0x49, 0x76


def write_data(addr, *values): return pm4(WRITE_DATA, 5 << 8, addr, addr >> 32, *values)    # dst_sel 5: memory
def wait_ge(addr, ref): return pm4(WAIT_REG_MEM, 0x15, addr, addr >> 32, ref, 0xFFFFFFFF, 4)  # memory, >=
def fence(addr, value): return pm4(RELEASE_MEM, 0x514, 2 << 29, addr, addr >> 32, value, 0, 0)


@pytest.fixture
def h():
  har = Harness(Config(mock_threaded=False, timeout_s=2))
  yield har
  har.os.close()


# ---- DoorbellMMIO routes
def test_routed_doorbell_stores_call_the_route_and_the_rest_still_ring():
  rung, routed = [], []
  page = DoorbellMMIO("doorbells", 0x2000, lambda off, v: rung.append((off, v)))
  page.route(0x10, routed.append)
  page.write64(0x10, (1 << 64) + 5)        # stored and routed as a 64-bit value
  page.write64(0x18, 7)                    # no route: the page's ring()
  page.write32(0x10, 9)                    # 32-bit stores are not routed
  assert routed == [5] and rung == [(0x18, 7), (0x10, 9)]
  assert page.read64(0x10) == 9 and page.read64(0x18) == 7
  page.route(0x10, None)
  page.write64(0x10, 11)
  assert routed == [5] and rung[-1] == (0x10, 11)
  with pytest.raises(DeviceError): page.route(0x2000, routed.append)
  with pytest.raises(DeviceError): page.route(0x14, routed.append)
  with pytest.raises(DeviceError): page.write64(0x2000, 1)     # unrouted offsets are still checked


def test_a_destroyed_queue_leaves_no_route(h):
  q = h.queue("compute")
  assert q.doorbell_offset in h.doorbells.routes
  kfd.AMDKFD_IOC_DESTROY_QUEUE(h.kfd, queue_id=q.queue_id)
  assert q.doorbell_offset not in h.doorbells.routes
  h.doorbells.write64(q.doorbell_offset, 4)   # a store to a doorbell without a queue does nothing


def test_a_queue_created_after_the_doorbell_mapping_is_routed(h):
  q1 = h.queue("compute")
  q2 = h.queue("sdma")
  assert {q1.doorbell_offset, q2.doorbell_offset} <= set(h.doorbells.routes)
  q2.submit([0] * 8)                         # SDMA NOPs: the routed doorbell ran the queue
  assert q2.rptr == 32


# ---- errors and faults are raised from the doorbell write
def test_a_fault_surfaces_at_the_doorbell_write_after_fast_launches(h):
  q = h.queue("compute")
  sig = h.signals
  for value in (1, 2, 3): q.submit(fence(sig.va, value))
  assert sig.u64()[0] == 3                   # ran inside each doorbell write
  bad = 0x7F0000002000
  with pytest.raises(GPUFault) as e: q.submit(fence(bad, 4))
  assert e.value.address == bad
  assert h.wait(timeout_ms=10)[1][1].memory_exception_data.va == bad


def test_a_fence_address_checked_before_faults_once_unmapped(h):
  q = h.queue("compute")
  target = h.alloc(0x1000, "gtt")
  q.submit(fence(target.va, 1))
  assert target.u64()[0] == 1
  kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(h.kfd, handle=target.handle, device_ids_array_ptr=ctypes.addressof(h.ids),
                                       n_devices=1)
  with pytest.raises(GPUFault) as e: q.submit(fence(target.va, 2))
  assert e.value.address == target.va and target.u64()[0] == 1


def test_a_ring_unmapped_after_launches_faults_at_the_doorbell(h):
  q = h.queue("compute")
  sig = h.signals
  q.submit(fence(sig.va, 1))
  h.alloc(0x1000, "gtt")                     # a mapping change: the ring's view is checked again, still fine
  q.submit(fence(sig.va, 2))
  assert sig.u64()[0] == 2
  kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(h.kfd, handle=q.ring.handle, device_ids_array_ptr=ctypes.addressof(h.ids),
                                       n_devices=1)
  with pytest.raises(GPUFault) as e: q.submit(fence(sig.va, 3))
  assert e.value.address is not None and q.ring.va <= e.value.address < q.ring.va + q.ring.size
  assert "ring" in str(e.value) and sig.u64()[0] == 2


# ---- waits on memory another queue or GPU writes
def test_a_queue_waiting_on_another_queue_runs_within_that_queues_doorbell_write(h):
  waiter, writer = h.queue("compute"), h.queue("compute")
  sig = h.signals
  waiter.submit(wait_ge(sig.va + 128, 5) + fence(sig.va, 1))
  (blocked, _) = h.gpu.queues.values()
  assert blocked.blocked and sig.u64()[0] == 0
  writer.submit(write_data(sig.va + 128, 5))     # no sleep, no clock read after it: the doorbell write alone
  assert sig.u64()[0] == 1 and not blocked.blocked and waiter.rptr == waiter.put


def test_an_sdma_queue_polling_memory_the_compute_queue_writes(h):
  sdma, compute = h.queue("sdma"), h.queue("compute")
  sig = h.signals
  addr = sig.va + 256
  # sdma_v6_0_0_pkt_open.h: POLL_REGMEM (op 8, mem_poll bit 31, function 5 ">=" in bits 30:28) and FENCE (op 5)
  poll = [0x8 | (5 << 28) | (1 << 31), addr, addr >> 32, 9, 0xFFFFFFFF, 0x0FFF0004]
  sdma_fence = [0x5 | (3 << 16), sig.va + 8, (sig.va + 8) >> 32, 42]
  sdma.submit(poll + sdma_fence)
  assert sig.u32()[2] == 0
  compute.submit(write_data(addr, 9))
  assert sig.u32()[2] == 42


def test_a_gpu_waiting_on_memory_another_gpu_writes_runs_within_that_doorbell_write():
  h0 = Harness(Config(mock_threaded=False, timeout_s=2), gpus=2)
  h1 = Harness(os=h0.os, gpu_index=1, parent=h0)
  try:
    shared = h0.signals
    kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(h1.kfd, handle=shared.handle, device_ids_array_ptr=ctypes.addressof(h1.ids),
                                     n_devices=1)
    q0, q1 = h0.queue("compute"), h1.queue("compute")
    q0.submit(wait_ge(shared.va + 128, 1) + fence(shared.va, 7))
    assert shared.u64()[0] == 0
    q1.submit(write_data(shared.va + 128, 1))   # GPU 1's doorbell: GPU 0 is not idle, the full tick polls it too
    assert shared.u64()[0] == 7
    q1.submit(fence(shared.va + 8, 8))          # GPU 0 idle again: GPU 1 alone
    assert shared.u64()[1] == 8
  finally: h0.os.close()


# ---- MockOS.tick_kicked with other engines
class Engine:
  """An engine with `work` polls of progress left; may_progress optional (None: the attribute is absent)."""

  def __init__(self, work=0, may_progress=None):
    self.work, self.polls = work, 0
    if may_progress is not None: self.may_progress = may_progress

  blocked = False

  def poll(self):
    self.polls += 1
    if not self.work: return False
    self.work -= 1
    return True


def test_tick_kicked_polls_the_kicked_engine_alone_while_the_others_are_idle():
  with MockOS() as mos:
    kicked, idle = Engine(work=3, may_progress=True), Engine(may_progress=False)
    mos.register_engine(idle)
    mos.register_engine(kicked)
    mos.tick_kicked(kicked)
    assert kicked.work == 0 and kicked.polls == 4 and idle.polls == 0


def test_tick_kicked_gives_way_to_the_full_tick_when_another_engine_may_progress():
  with MockOS() as mos:
    kicked, busy, plain = Engine(work=1, may_progress=True), Engine(work=2, may_progress=True), Engine(work=2)
    for e in (busy, kicked): mos.register_engine(e)
    mos.tick_kicked(kicked)
    assert busy.work == 0 and kicked.work == 0
    mos.register_engine(plain)                 # an engine without may_progress may always progress
    kicked.work = 1
    mos.tick_kicked(kicked)
    assert plain.work == 0 and kicked.work == 0


def test_tick_kicked_takes_in_an_engine_rung_while_it_polls():
  with MockOS() as mos:
    other = Engine(work=2, may_progress=False)

    class Ringing(Engine):
      def poll(self):               # another thread rings `other` while this engine runs
        other.may_progress = True
        return super().poll()
    kicked = Ringing(work=1, may_progress=True)
    for e in (kicked, other): mos.register_engine(e)
    mos.tick_kicked(kicked)
    assert other.work == 0


def test_tick_kicked_does_nothing_in_threaded_mode_or_inside_a_tick():
  with MockOS(Config(mock_threaded=True)) as mos:
    e = Engine(work=1, may_progress=True)
    mos.register_engine(e)
    mos.tick_kicked(e)
    assert e.polls == 0
  with MockOS() as mos:
    inner = Engine(work=1, may_progress=True)

    class Outer(Engine):
      def poll(self):
        mos.tick_kicked(inner)      # re-entrant: returns at once, the outer tick polls `inner` itself
        return super().poll()
    outer = Outer(work=1, may_progress=True)
    for e in (outer, inner): mos.register_engine(e)
    mos.tick()
    assert inner.work == 0 and outer.work == 0


# ---- DISPATCH_DIRECT's launch state across launches
class FakeEmu:
  """Stands in for the wave emulator: records the arguments of each dispatch (started by the GPU with emu.start,
  ended within its first time slice)."""

  from hcq.mockgpu.amd.emu import ScratchSetup

  def __init__(self): self.calls = []

  def start(self, memory, **kw):
    self.calls.append(kw)
    return (1, 1, 0.0)


def sh(reg, *values): return pm4(SET_SH_REG, reg, *values)


def program_regs(pgm: int, block=(1, 1, 1), rsrc2: int = 0):
  return (sh(R.COMPUTE_PGM_LO, (pgm >> 8) & 0xFFFFFFFF, pgm >> 40) + sh(R.COMPUTE_PGM_RSRC1, 0x60000, rsrc2) +
          sh(R.COMPUTE_NUM_THREAD_X, *block))


def dispatch_packet(groups=(1, 1, 1)):
  return pm4(DISPATCH_DIRECT, *groups, R.DISPATCH_COMPUTE_SHADER_EN | R.DISPATCH_CS_W32_EN)


def test_dispatch_sees_every_register_change_between_launches(h):
  emu = h.gpu._emu = FakeEmu()
  q = h.queue("compute")
  a, b = 0x7000_0000_1000, 0x7000_0000_2000
  q.submit(program_regs(a) + sh(R.COMPUTE_USER_DATA_0, 11, 12) + dispatch_packet())
  q.submit(sh(R.COMPUTE_USER_DATA_0, 21, 22) + dispatch_packet((2, 1, 1)))             # user data only
  q.submit(dispatch_packet())                                                         # nothing written
  q.submit(sh(R.COMPUTE_PGM_LO, (b >> 8) & 0xFFFFFFFF) + dispatch_packet())              # the program
  q.submit(sh(R.COMPUTE_NUM_THREAD_X, 64, 2) + dispatch_packet())                       # the work-group size
  # one run across two registers below the user data and the first two user data registers
  q.submit(sh(R.COMPUTE_USER_DATA_0 - 2, 0, 0, 31, 32) + dispatch_packet())
  q.submit(sh(R.COMPUTE_USER_DATA_0 + 15, 99) + dispatch_packet())                     # the last user data register
  got = [(c["pgm_addr"], c["block"], c["grid"], c["user_sgprs"][:2], c["user_sgprs"][15]) for c in emu.calls]
  assert got == [(a, (1, 1, 1), (1, 1, 1), [11, 12], 0), (a, (1, 1, 1), (2, 1, 1), [21, 22], 0),
                 (a, (1, 1, 1), (1, 1, 1), [21, 22], 0), (b, (1, 1, 1), (1, 1, 1), [21, 22], 0),
                 (b, (64, 2, 1), (1, 1, 1), [21, 22], 0), (b, (64, 2, 1), (1, 1, 1), [31, 32], 0),
                 (b, (64, 2, 1), (1, 1, 1), [31, 32], 99)]
  assert all(len(c["user_sgprs"]) == R.NUM_USER_DATA for c in emu.calls)
  assert emu.calls[0]["user_sgprs"] is not emu.calls[1]["user_sgprs"]     # each dispatch gets its own list


def test_only_the_registers_dispatch_direct_converts_drop_its_launch_state(h):
  """COMPUTE_RESTART_X/Y/Z (sent with every launch by the driver) and the user data keep the converted launch state;
  a write to any register DISPATCH_DIRECT converts drops it, whatever packet run it comes in."""
  h.gpu._emu = FakeEmu()
  q = h.queue("compute")
  engine = h.gpu.queues[q.queue_id].engine
  q.submit(program_regs(0x7000_0000_1000) + dispatch_packet())
  state = engine.launch_state
  assert state is not None
  q.submit(sh(R.COMPUTE_RESTART_X, 0, 0, 0) + sh(R.COMPUTE_USER_DATA_0, 7) + dispatch_packet())
  assert engine.launch_state is state
  for reg in R.LAUNCH_STATE_REGS:
    q.submit(sh(reg - 1, engine.sh.get(reg - 1, 0), engine.sh.get(reg, 0)))      # a run ending at reg, same values
    assert engine.launch_state is None, hex(reg)
    q.submit(dispatch_packet())
    assert engine.launch_state == state


def test_a_bad_launch_state_is_a_queue_error_each_time_until_fixed(h):
  emu = h.gpu._emu = FakeEmu()
  q = h.queue("compute")
  q.submit(program_regs(0x7000_0000_1000) + dispatch_packet())
  with pytest.raises(QueueError, match="COMPUTE_NUM_THREAD"):
    q.submit(sh(R.COMPUTE_NUM_THREAD_X, 0) + dispatch_packet())
  q2 = h.queue("compute")               # the failed queue stopped; a new queue with the same registers fails too
  with pytest.raises(QueueError, match="COMPUTE_NUM_THREAD"):
    q2.submit(program_regs(0x7000_0000_1000, block=(0, 1, 1)) + dispatch_packet())
  q3 = h.queue("compute")
  q3.submit(program_regs(0x7000_0000_1000, block=(8, 1, 1)) + dispatch_packet())
  assert [c["block"] for c in emu.calls] == [(1, 1, 1), (8, 1, 1)]


def test_observers_see_the_sh_state_of_reused_launch_states(h):
  h.gpu._emu = FakeEmu()
  seen = []
  h.gpu.dispatch_observers.append(lambda queue, launch: seen.append((launch["sh"], launch["user_sgprs"][:1])))
  q = h.queue("compute")
  q.submit(program_regs(0x7000_0000_1000) + sh(R.COMPUTE_USER_DATA_0, 5) + dispatch_packet())
  q.submit(sh(R.COMPUTE_USER_DATA_0, 6) + dispatch_packet())
  assert [s[R.COMPUTE_USER_DATA_0] for s, _ in seen] == [5, 6] and [u for _, u in seen] == [[5], [6]]
  assert seen[0][0] is not seen[1][0]


def test_an_engine_rung_while_the_doorbells_queue_runs_alone_is_polled_in_that_doorbell_write(h):
  """The GPU polls the rung queue itself while every other engine is idle; an engine that becomes busy meanwhile (rung
  by another thread: here by the dispatch) is still polled before the doorbell write returns."""
  other = Engine(may_progress=False)
  h.os.register_engine(other)
  fake = h.gpu._emu = FakeEmu()

  def dispatch(memory, **kw):
    other.work, other.may_progress = 2, True
    return FakeEmu.start(fake, memory, **kw)
  fake.start = dispatch
  q = h.queue("compute")
  q.submit(fence(h.signals.va, 1))       # the queue's creation kicked the GPU: this doorbell goes the general way
  assert h.gpu._to_poll == {} and not h.gpu.may_progress
  q.submit(program_regs(0x7000_0000_1000) + dispatch_packet() + fence(h.signals.va, 2))   # the GPU's own polls
  assert other.work == 0 and h.signals.u64()[0] == 2
  q2 = h.queue("compute")                # again through tick_kicked (the creation kick)
  q2.submit(program_regs(0x7000_0000_1000) + dispatch_packet() + fence(h.signals.va, 3))
  assert other.work == 0 and h.signals.u64()[0] == 3


def test_a_queue_left_blocked_by_its_doorbell_runs_on_when_the_host_writes(h):
  q = h.queue("compute")
  sig = h.signals
  q.submit(fence(sig.va + 8, 1))         # past the creation kick: the next doorbell is polled by the GPU alone
  q.submit(wait_ge(sig.va + 128, 1) + fence(sig.va, 1))
  (queue,) = h.gpu.queues.values()
  assert queue.blocked and h.gpu.may_progress and h.os.monotonic() and sig.u64()[0] == 0
  sig.u32()[32] = 1
  h.os.monotonic()                       # a clock read while a queue is blocked ticks the engines
  assert sig.u64()[0] == 1 and not queue.blocked and not h.gpu.may_progress


def test_gpu_stats_count_every_dispatch_across_folds(h):
  fake = h.gpu._emu = FakeEmu()
  fake.start = lambda memory, **kw: (3, 7, 0.5)        # waves, wave instructions, seconds
  q = h.queue("compute")
  q.submit(program_regs(0x7000_0000_1000))
  for _ in range(300): q.submit(dispatch_packet())       # more than one fold of the running sums
  assert h.gpu.stats == {"dispatches": 300, "waves": 900, "wave_instructions": 2100, "emu_seconds": 150.0}


def test_a_queue_that_never_runs_dry_does_not_hang_its_doorbell_write(h, monkeypatch):
  """The rung queue is polled alone inside the doorbell write for a bounded number of rounds (ALONE_ROUNDS, as a
  tick): a queue that keeps making progress with work left returns control to the writer and stays queued."""
  from hcq.mockgpu.amd import gpu as G
  q = h.queue("compute")
  mq = h.gpu.queues[q.queue_id]
  polls = []
  monkeypatch.setattr(type(mq), "poll", lambda self: polls.append(1) or True)
  monkeypatch.setattr(type(mq), "pending", property(lambda self: True))
  h.doorbells.write64(q.doorbell_offset, 4)
  assert len(polls) == G.ALONE_ROUNDS
  assert mq in h.gpu._to_poll and h.gpu.may_progress     # the next tick goes on with it


def test_threaded_doorbells_keep_no_queue_list_and_wake_the_worker():
  """Threaded mode: the worker polls every queue, so a doorbell only stores the write pointer and wakes it; the
  synchronous mode's list of queues to poll stays empty (it would keep destroyed queues alive)."""
  import time
  har = Harness(Config(mock_threaded=True, timeout_s=2))
  try:
    q = har.queue("compute")
    sig = har.signals
    for value in (1, 2, 3): q.submit(fence(sig.va, value))
    deadline = time.monotonic() + 2
    while sig.u64()[0] != 3 and time.monotonic() < deadline: time.sleep(0.001)
    assert sig.u64()[0] == 3 and har.gpu._to_poll == {}
  finally: har.os.close()
