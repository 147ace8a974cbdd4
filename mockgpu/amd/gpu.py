"""One mock AMD GPU (gfx1100, gfx1200 or gfx942: GPUProperties.for_target): its properties, the memory mapped to it,
its queues, and dispatch to the wave emulator (with the target and the wave size).

By default the GPU is synchronous: a doorbell write runs the queue (and every other queue of the MockOS that can
make progress) before it returns. With config.mock_threaded a worker thread runs the queues in the background
(missing waits in a driver then show up as races). In both modes a queue error or GPU fault reaches the driver the
way a real GPU reports it: through KFD events, at the driver's next wait (never from the doorbell write).

Dispatches run in time slices (emu.start, engine.SLICE_SECONDS): a kernel that has not ended after its slice stays
its queue's current work (the queue's read pointer at its packet) and is resumed by the next polls of the queue. So a
doorbell write returns after about a slice however long the kernel runs, the host's later waits (their ticks) run it
slice by slice, and the worker thread releases the GPU's lock between slices: destroying the queue (close()) drops
a dispatch that would never end.
"""
from __future__ import annotations

import functools
import struct
import threading
import time
from _thread import get_ident
from collections import deque
from dataclasses import dataclass, field

from ...drivers.system.interrupts import held as held_interrupt
from ...errors import GPUFault, HCQError, QueueError
from . import regs as R
from .access import DeviceMemory
from .queues import QUEUE_CLASSES


@dataclass
class GPUProperties:
  """What topology, AMDGPU_INFO and ip_discovery report; the defaults are a Radeon RX 7900 XTX (Navi 31, gfx1100).
  for_target() gives the other targets the mock can pose as (config.mock_gpu, HCQ_MOCK_GPU)."""
  gfx_target_version: int = 110000
  device_id: int = 0x744C
  vendor_id: int = 0x1002
  revision: int = 0xC8
  simd_count: int = 192            # 96 CUs x 2 SIMDs
  simd_per_cu: int = 2
  array_count: int = 12            # shader arrays (simd_arrays_per_engine x engines)
  simd_arrays_per_engine: int = 2
  cu_per_simd_array: int = 8
  max_waves_per_simd: int = 16
  lds_size_in_kb: int = 64
  wave_front_size: int = 32
  max_slots_scratch_cu: int = 32
  num_xcc: int = 1
  vram_size: int = 24 << 30
  local_mem_size: int = 24 << 30
  max_engine_clk_fcompute: int = 2500
  ip_versions: dict = field(default_factory=lambda: {"GC": (11, 0, 0), "SDMA0": (6, 0, 0), "NBIO": (4, 3, 0)})
  # the GC register segment bases IP discovery reports (regs.py): gfx11 and gfx12 share them
  gc_base_segments: tuple = R.GC_BASE_SEGMENTS

  @property
  def cu_count(self) -> int: return self.simd_count // self.simd_per_cu

  @property
  def num_shader_engines(self) -> int: return self.array_count // self.simd_arrays_per_engine

  @property
  def target(self) -> str:
    """The ISA target name, as KFD names the node: gfx<major><minor:x><stepping:x>."""
    v = self.gfx_target_version
    return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"

  @classmethod
  def for_target(cls, target: str) -> "GPUProperties":
    try: return cls(**TARGETS[target])
    except KeyError: raise ValueError(f"mock GPU target {target!r}: the mock poses as {', '.join(TARGETS)}") from None


# The targets the mock poses as, with the figures the KFD topology of such a part shows (kfd_topology.c node_show;
# kfd_crat.c and amdgpu's gfx_v*_0 cu_info fill them). Shader-array geometry and CU counts are what rocminfo prints for
# the part (Compute Unit, SIMDs per CU, Shader Engines, Shader Arrs. per Eng., Max Waves Per CU = simd_per_cu x
# max_waves_per_simd, Chip ID = device_id); LDS is 64 KiB a work-group on all three (AMDGPUUsage "Memory Spaces",
# LDS size per target); the IP versions are amdgpu's IP discovery of the part (amdgpu_discovery.c: GC, SDMA0, NBIO
# per asic in the ip_versions tables of linux 6.12).
TARGETS = {
  # Radeon RX 7900 XTX (Navi 31): 96 CUs in 6 SEs x 2 SAs x 8; the GPUProperties defaults
  "gfx1100": {},
  # Radeon RX 9060 XT (Navi 44, gfx1200): 32 CUs in 2 SEs x 2 SAs x 8, 16 waves a SIMD (rocminfo: Chip ID 0x7590,
  # Max Waves Per CU 32), 16 GiB GDDR6; GC 12.0.0, SDMA 7.0.0, NBIF 6.3.1 (the gc_12_0_0/nbif_6_3_1 headers' part)
  "gfx1200": dict(gfx_target_version=120000, device_id=0x7590, revision=0xC0, simd_count=64, array_count=4,
                  cu_per_simd_array=8, vram_size=16 << 30, local_mem_size=16 << 30, max_engine_clk_fcompute=3130,
                  ip_versions={"GC": (12, 0, 0), "SDMA0": (7, 0, 0), "NBIO": (6, 3, 1)}),
  # Instinct MI300X (gfx942, CDNA3): 8 XCCs, 304 CUs of 4 SIMDs (1216), 32 SEs of 1 SA with 10 CU slots (38 of 40
  # enabled per XCC), 8 waves a SIMD (rocminfo: Max Waves Per CU 32), wave64, Chip ID 0x74A1, 192 GiB HBM3, 2100 MHz;
  # GC 9.4.3, SDMA 4.4.2, NBIO 7.9.0 (aqua_vanjaram)
  "gfx942": dict(gfx_target_version=90402, device_id=0x74A1, revision=0x00, simd_count=1216, simd_per_cu=4,
                 array_count=32, simd_arrays_per_engine=1, cu_per_simd_array=10, max_waves_per_simd=8,
                 wave_front_size=64, num_xcc=8, vram_size=192 << 30, local_mem_size=192 << 30,
                 max_engine_clk_fcompute=2100, ip_versions={"GC": (9, 4, 3), "SDMA0": (4, 4, 2), "NBIO": (7, 9, 0)},
                 gc_base_segments=R.GC9_BASE_SEGMENTS),
}


_USER_DATA = tuple(R.COMPUTE_USER_DATA_0 + i for i in range(R.NUM_USER_DATA))
_ZEROS = (0,) * R.NUM_USER_DATA
_monotonic = time.monotonic
_STATS_FOLD = 256


def _fold(state: tuple) -> tuple:
  """Totals (dispatches, waves, wave instructions, seconds) of a stats state: the folded totals plus the recent
  DispatchStats (NamedTuples: waves, wave_instructions, seconds)."""
  (dispatches, waves, instructions, seconds), recent = state[0], list(state[1])
  return (dispatches + len(recent), waves + sum(r[0] for r in recent), instructions + sum(r[1] for r in recent),
          seconds + sum(r[2] for r in recent))


MAX_WORKGROUPS = 1 << 22     # per dispatch: a bigger grid is a queue error rather than hours of emulation
ALONE_ROUNDS = 1000          # polls of a rung queue inside its doorbell write, as MockOS.tick's max_rounds; work left
                             # after them stays queued for the next tick (a wait's)


class MockAMDGPU:
  def __init__(self, os, index: int, gpu_id: int, props: GPUProperties | None = None):
    from . import emu       # the emulator (numpy) loads with the first GPU, not with this module
    self._emu = emu
    self.os, self.index, self.gpu_id = os, index, gpu_id
    self.props = props or GPUProperties()
    self.name = f"mock {self.props.target} #{index}"
    # what differs per target in a dispatch: gfx9 (gfx942) runs wave64 only, has no DISPATCH_INITIATOR.CS_W32_EN,
    # keeps COMPUTE_PGM_RSRC3 at another SH offset and counts TMPRING WAVESIZE in 1 KiB units (regs.py)
    self.gfx9 = self.props.gfx_target_version // 10000 == 9
    self._target = self.props.target     # the emulator's arch, named once (not formatted per dispatch)
    self._static_regs = R.LAUNCH_STATE_REGS_GFX9 if self.gfx9 else R.LAUNCH_STATE_REGS
    self._initiator_needs = R.DISPATCH_COMPUTE_SHADER_EN | (0 if self.gfx9 else R.DISPATCH_CS_W32_EN)
    self.ranges = emu.GPUMemory()
    self.mem = DeviceMemory(self.ranges)
    self.regs: dict[int, int] = {}
    self.queues: dict[int, object] = {}
    self.listener = None          # the KFD model: interrupt(gpu, queue, ctxid), queue_failed(gpu, queue, error)
    self.lock = threading.RLock()
    self.threaded = bool(os.config.mock_threaded)
    self.instruction_budget = int(os.config.mock_instruction_budget)
    # dispatch statistics (see `stats`): (totals folded so far, DispatchStats of the dispatches since), swapped whole
    self._stats_state: tuple = ((0, 0, 0, 0.0), [])
    # callables(queue, launch: dict) told of every dispatch before it runs (tests inspect register state with them):
    # launch = the emulator's arguments (pgm_addr, rsrc1/2/3, user_sgprs, grid, block, lds_bytes, scratch) plus
    # "sh" (a copy of the queue's SET_SH_REG state, PM4 only) or "packet" (the AQL packet address)
    self.dispatch_observers: list = []
    self._scratch_setups: dict[int, object] = {}   # bytes per lane -> emu.ScratchSetup (immutable: shared)
    self._launch_states: dict[tuple, tuple] = {}    # static COMPUTE_* register values -> checked launch state
    self._busy: deque[tuple[float, float]] = deque(maxlen=1000)   # (start, end) of recent dispatches, for gpu_busy_percent
    self._wake = threading.Condition(threading.Lock())   # doorbells wake the worker without waiting for it
    self._kicked = False
    # synchronous mode: True while a queue may make progress (a doorbell since the last poll, or a queue left with
    # work after it: blocked on memory or out of its packet budget). False means every poll would return False, so
    # poll() returns at once and a tick that ran a submission to its end needs no second round over the queues.
    self.may_progress = False
    self._to_poll: dict = {}      # synchronous mode: the queues poll() looks at (an ordered set)
    self._stop = False
    self._worker = None
    self._clock_base = time.monotonic_ns()
    self._start = self._start_emu = None   # the emulator's start() as one positional function (_starter), the
                                           # emulator it came from, and this target's bits
    self._target_bits = 0
    if self.threaded:
      self._worker = threading.Thread(target=self._run_worker, name=f"{self.name} worker", daemon=True)
      self._worker.start()
    else: os.register_engine(self)

  # ---- registers (absolute dword addresses) for WAIT_REG_MEM/WRITE_DATA/COPY_DATA register forms
  def read_reg(self, reg: int) -> int: return self.regs.get(reg, 0)

  def write_reg(self, reg: int, value: int) -> None:
    self.regs[reg] = value & 0xFFFFFFFF

  def request_reg(self, request: int, done: int, value: int) -> None:
    """A request/done register pair such as the HDP flush (BIF_BX_PF0_GPU_HDP_FLUSH_REQ/DONE): the mock has no HDP
    cache, so the request completes at once and the done register shows the requested bits."""
    self.write_reg(request, value)
    self.write_reg(done, value)

  def clock(self) -> int:
    """The GPU clock counter: 100 MHz since the GPU was created."""
    return (time.monotonic_ns() - self._clock_base) // (1_000_000_000 // R.GPU_CLOCK_HZ)

  # ---- what amdgpu's sysfs attributes report
  def vram_used(self) -> int:
    return self.listener.vram_used(self) if self.listener is not None and hasattr(self.listener, "vram_used") else 0

  def busy_percent(self) -> int:
    """Share of the last second the emulator ran dispatches of this GPU."""
    now = time.monotonic()
    busy = sum(min(end, now) - max(start, now - 1.0) for start, end in list(self._busy) if end > now - 1.0)
    return max(0, min(100, round(100 * busy)))

  # ---- memory mapped to this GPU (GPU VA == host VA)
  def map_range(self, va: int, size: int) -> None:
    with self.lock: self.ranges.add_range(va, size)

  def unmap_range(self, va: int) -> None:
    with self.lock: self.ranges.remove_range(va)

  def map_peer(self, va: int, size: int, mmio, name: str) -> None:
    """Another PCI function's BAR window (an MMIOView) at va: the engines' stores there reach its model (peer.py).
    A ValueError when it overlaps memory or another window."""
    with self.lock:
      rng = self.ranges.range_of(va) or self.ranges.range_of(va + size - 1)
      if rng is not None: raise ValueError(f"peer window {va:#x}+{size:#x} overlaps GPU memory at {rng[0]:#x}")
      self.mem.peers.add(va, size, mmio, 0, name)

  def unmap_peer(self, va: int) -> None:
    with self.lock: self.mem.peers.remove(va)

  # ---- queues
  def create_queue(self, kind: int, qid: int, ring_base: int, ring_size: int, rptr_addr: int, wptr_addr: int,
                   doorbell_offset: int):
    cls = QUEUE_CLASSES.get(kind)
    if cls is None: raise ValueError(f"queue type {kind}")
    with self.lock:
      q = self.queues[qid] = cls(self, qid, ring_base, ring_size, rptr_addr, wptr_addr, doorbell_offset)
      self.kick(q)
      return q

  def destroy_queue(self, qid: int) -> None:
    with self.lock:
      q = self.queues.pop(qid)
      q.active = False
      q.drop_work()       # a dispatch suspended between time slices ends here

  def doorbell_of(self, queue):
    """fn(value) that rings `queue`'s doorbell (the KFD model routes the doorbell page's stores to it)."""
    return functools.partial(self.ring_doorbell, queue)

  def ring_doorbell(self, queue, value: int) -> None:
    """The driver wrote `value` to the queue's doorbell."""
    if self.threaded:
      queue.doorbell_value = value
      self.kick(queue)             # the worker may be busy with a dispatch: the host does not wait for it
      return
    os, lock = self.os, self.lock
    lock.acquire()        # (as `with self.lock`, without the with statement's special-method look-ups)
    try:
      queue.doorbell_value = value
      try:
        # the doorbell of every launch: when no other queue of this GPU has work and every other engine is idle, a
        # tick would poll only this queue, round after round while it progresses and has work left (blocked on
        # memory): that is done here, without the tick's and poll()'s bookkeeping, when this thread is not inside a
        # tick (MockOS.ticking) and every other engine is idle; this thread then counts as ticking, with Ctrl-C held
        # back. (The OS is not threaded either: it follows the same config.mock_threaded as this GPU.)
        ticking, me = os.ticking, get_ident()
        alone = not self._to_poll and me not in ticking and os.others_idle(self)
        if alone:
          # Ctrl-C held back while this thread counts as ticking; nested in the main thread's held span (the
          # doorbell store's) there is nothing to add: that span defers it already (HeldInterrupt.hold)
          held = held_interrupt
          nested = held.depth and me == held.main
          if not nested: held.hold()
          ticking.add(me)
          try:
            rounds = ALONE_ROUNDS      # bounded as tick() is: an IB that chains to itself must not hang here
            while True:                # (a counted loop without a range object: the first poll usually ends it)
              progress, pending = queue.poll_pending()
              if not os.others_idle(self):        # another engine was rung meanwhile: the full tick takes over
                alone = False
                break
              if not progress or not pending: break
              rounds -= 1
              if not rounds: break
            if pending:
              self._to_poll[queue] = None
              self.may_progress = True
          finally:
            ticking.discard(me)
            if not nested: held.release()
        else:                          # queue.doorbell(value) and kick(queue), inlined
          self._to_poll[queue] = None
          self.may_progress = True
      except BaseException:            # Ctrl-C in the host's thread (outside the queue's poll): the next tick still
        if queue.pending:              # looks at the queue
          self._to_poll[queue] = None
          self.may_progress = True
        raise
    finally: lock.release()
    if not alone: os.tick_kicked(self)

  # ---- the engine interface of MockOS (synchronous mode)
  @property
  def blocked(self) -> bool:
    return self.may_progress and any(q.blocked for q in list(self.queues.values()))

  def poll(self) -> bool:
    if not self.may_progress: return False
    # cleared before the queues run, so that a doorbell rung meanwhile (by another thread) is never lost
    self.may_progress = False
    with self.lock:
      # only the queues that may progress (rung since the last poll, or left with work), in creation order
      todo, self._to_poll = self._to_poll, {}
      if len(todo) == 1:           # the usual case: one queue rang
        queues = [q for q in todo if q.active]
      else: queues = [q for q in self.queues.values() if q in todo]
      progress = False
      try:
        for q in queues:
          if q.poll(): progress = True
      finally:      # also when an exception of the host's thread (Ctrl-C) stops the polls: no queue is forgotten
        for q in queues:
          if q.pending:
            self._to_poll[q] = None
            self.may_progress = True
    return progress

  def kick(self, queue) -> None:
    """A queue may progress (its doorbell rang): the next poll looks at it (threaded mode: the worker, which polls
    every queue, wakes up)."""
    self.may_progress = True
    if self.threaded:
      with self._wake:
        self._kicked = True
        self._wake.notify_all()
    else: self._to_poll[queue] = None

  def _run_worker(self) -> None:
    while not self._stop:
      # a queue whose dispatch ran out of its time slice reports no progress: the worker then waits (briefly, the
      # queue counts as blocked) without the lock, so that the host's calls (destroy_queue) get in between slices
      with self.lock: progress = any([q.poll() for q in list(self.queues.values())])
      if progress: continue
      with self._wake:
        # a blocked queue waits on memory the host may write at any time: look again soon
        if not self._kicked and not self._stop: self._wake.wait(timeout=0.0002 if self.blocked else 0.05)
        self._kicked = False

  def close(self) -> None:
    if self._worker is not None:
      with self._wake:
        self._stop = True
        self._wake.notify_all()
      self._worker.join(timeout=5)
      self._worker = None
    else: self.os.unregister_engine(self)
    with self.lock:
      for q in self.queues.values(): q.drop_work()

  # ---- events to the KFD model
  def interrupt(self, queue, ctxid: int) -> None:
    if self.listener is not None: self.listener.interrupt(self, queue, ctxid)

  def queue_failed(self, queue, error: HCQError) -> None:
    if isinstance(error, GPUFault) and error.address is not None:
      # a VM fault: KFD evicts the process's queues on this GPU, for good (linux 6.12 kfd_debug.c
      # kfd_set_dbg_ev_from_interrupt, without a debugger: kfd_dqm_evict_pasid, then kfd_signal_vm_fault_event).
      # An evicted queue is not active (kfd_device_queue_manager.c evict_process_queues_cpsch): its doorbell does
      # nothing, and a wait on it ends only with the memory-exception event or its timeout.
      for q in self.queues.values():
        q.active = False
        q.drop_work()     # an evicted queue never resumes a dispatch it had suspended: its state goes now
    if self.listener is not None: self.listener.queue_failed(self, queue, error)

  # ---- dispatch
  def _run_emulator(self, queue=None, extra=None, **kw):
    """extra: what observers see besides the emulator's arguments, or a callable that builds it (only when there
    are observers). Returns None, or the dispatch suspended after its first time slice (see resume)."""
    if self.dispatch_observers: self._observe(queue, kw, extra)
    return self._dispatch(**kw)

  def _wave_size(self, queue, wave32: bool, fail) -> int:
    """The wave size of a dispatch: a wave64 target (gfx942) runs wave64 only, an RDNA one here wave32 only (the
    emulator runs RDNA code in wave32). fail(message) makes the queue error."""
    if self.props.wave_front_size == 64:
      if wave32: raise fail(f"a wave32 dispatch, which {self.props.target} cannot run")
      return 64
    if not wave32: raise fail(f"a wave64 dispatch on {self.props.target} is not modelled")
    return 32

  def _observe(self, queue, kw: dict, extra) -> None:
    more = (extra() if callable(extra) else extra) or {}
    for observe in self.dispatch_observers: observe(queue, {**kw, **more})

  def _dispatch(self, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, grid, block, lds_bytes, scratch, wave_size):
    """Run the emulator's first time slice of a dispatch (observers were told already), keep the statistics.
    Returns None when the dispatch ended, else the suspended dispatch (its queue keeps it and calls resume())."""
    start = _monotonic()
    # busy_percent() looks at the last second only: a bounded deque keeps the recent dispatches without a scan here
    try:
      stats = self._emu.start(self.ranges, pgm_addr=pgm_addr, rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=rsrc3,
                              user_sgprs=user_sgprs, grid=grid, block=block, lds_bytes=lds_bytes, scratch=scratch,
                              instruction_budget=self.instruction_budget, arch=self._target,
                              wave_size=wave_size)
    finally: self._busy.append((start, _monotonic()))
    if not isinstance(stats, tuple): return stats      # suspended (DispatchStats is a NamedTuple)
    recent = self._stats_state[1]                      # _record(stats), inlined: once per dispatch
    recent.append(stats)
    if len(recent) >= _STATS_FOLD: self._stats_state = (_fold(self._stats_state), [])
    return None

  def _record(self, stats) -> None:
    """Keep an ended dispatch's statistics: one append per dispatch; the sums are taken every _STATS_FOLD."""
    recent = self._stats_state[1]
    recent.append(stats)
    if len(recent) >= _STATS_FOLD: self._stats_state = (_fold(self._stats_state), [])

  def resume(self, running) -> bool:
    """The next time slice of a dispatch a queue keeps suspended: True when it ended (a GPUFault of the dispatch
    is raised as an unsliced dispatch raises it)."""
    start = _monotonic()
    try: stats = running.resume()
    finally: self._busy.append((start, _monotonic()))
    if stats is None: return False
    self._record(stats)
    return True

  @property
  def stats(self) -> dict:
    """What the emulator did for this GPU: dispatches, waves, wave_instructions, emu_seconds (totals)."""
    dispatches, waves, instructions, seconds = _fold(self._stats_state)
    return {"dispatches": dispatches, "waves": waves, "wave_instructions": instructions, "emu_seconds": seconds}

  def dispatch_direct(self, queue, sh: dict, grid: tuple, initiator: int, static: tuple | None = None,
                      user_data: list | None = None) -> tuple:
    """DISPATCH_DIRECT with the queue's COMPUTE_* registers (Linux gfx_v11_0.c and nvd.h PACKET3_DISPATCH_DIRECT; AMD's RDNA3 ISA guide, "Initial wave state").

    static: the launch state this returned for an earlier dispatch of the queue when no SH register but the user
    data was written since (the PM4 engine keeps it), else None; user_data: the 16 COMPUTE_USER_DATA values when
    the caller keeps them (else read from sh). Returns (the launch state (program, resources, work-group size),
    None or the dispatch suspended after its first time slice, for the caller to resume())."""
    needs = self._initiator_needs
    if initiator & needs != needs:
      if not initiator & R.DISPATCH_COMPUTE_SHADER_EN:
        raise QueueError(queue.name, f"DISPATCH_INITIATOR {initiator:#x} lacks COMPUTE_SHADER_EN")
      raise QueueError(queue.name, f"DISPATCH_INITIATOR {initiator:#x}: wave64 dispatch is not modelled (set CS_W32_EN)")
    if static is None:
      # the launch state that does not change from one launch of a kernel to the next (program, resources,
      # work-group size), checked and converted once per distinct register values
      get = sh.get
      key = tuple(map(get, self._static_regs))
      static = self._launch_states.get(key)
      if static is None: static = self._launch_state(queue, get, key)
    groups = grid[0] * grid[1] * grid[2]
    if not groups: return static, None           # (the dimensions are u32s: none is negative)
    if groups > MAX_WORKGROUPS:
      raise QueueError(queue.name, f"DISPATCH_DIRECT of {grid} work-groups exceeds the mock's {MAX_WORKGROUPS}")
    pgm, rsrc1, rsrc2, rsrc3, block, lds_bytes, scratch = static
    user = list(user_data) if user_data is not None else list(map(sh.get, _USER_DATA, _ZEROS))
    if self.dispatch_observers:
      self._observe(queue, {"pgm_addr": pgm, "rsrc1": rsrc1, "rsrc2": rsrc2, "rsrc3": rsrc3, "user_sgprs": user,
                            "grid": grid, "block": block, "lds_bytes": lds_bytes, "scratch": scratch,
                            "wave_size": 64 if self.gfx9 else 32}, {"sh": dict(sh)})
    # _dispatch inlined (every launch), with the emulator's start() called as its engine function (_starter)
    start = self._start if self._start_emu is self._emu else self._starter()
    t0 = _monotonic()
    try: stats = start(self.ranges, pgm, rsrc1, rsrc2, rsrc3, user, grid, block, lds_bytes, scratch,
                       self.instruction_budget, True, self._target_bits)
    except BaseException:
      self._busy.append((t0, _monotonic()))
      raise
    # the busy span ends after the time the emulator measured for its slice (one clock read less than reading the
    # clock again: busy_percent() needs no better)
    if not isinstance(stats, tuple):                   # suspended (DispatchStats is a NamedTuple)
      self._busy.append((t0, t0 + stats.seconds))
      return static, stats
    self._busy.append((t0, t0 + stats[2]))
    recent = self._stats_state[1]                      # _record(stats), inlined
    recent.append(stats)
    if len(recent) >= _STATS_FOLD: self._stats_state = (_fold(self._stats_state), [])
    return static, None

  def _starter(self):
    """The emulator's start() for this GPU's target as one positional function: run(memory, pgm_addr, rsrc1, rsrc2,
    rsrc3, user_sgprs, grid, block, lds_bytes, scratch, budget, sliced, bits) (emu.starter: its engine function,
    looked up on the first DISPATCH_DIRECT, which loads the engine and numpy, and kept while `_emu` is the same).
    An emulator object that offers start() alone (a stand-in that records dispatches) is called through it."""
    emu = self._emu
    starter = getattr(emu, "starter", None)
    if starter is not None: self._start, self._target_bits = starter(self._target, 64 if self.gfx9 else 32)
    else:
      arch, wave_size = self._target, 64 if self.gfx9 else 32
      def start(memory, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, grid, block, lds_bytes, scratch, budget, sliced,
                bits, _start=emu.start):
        return _start(memory, pgm_addr=pgm_addr, rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=rsrc3, user_sgprs=user_sgprs,
                      grid=grid, block=block, lds_bytes=lds_bytes, scratch=scratch, instruction_budget=budget,
                      arch=arch, wave_size=wave_size)
      self._start = start
    self._start_emu = emu
    return self._start

  def _launch_state(self, queue, get, key: tuple) -> tuple:
    """(pgm, rsrc1, rsrc2, rsrc3, block, lds_bytes, scratch) from the COMPUTE_* registers, checked; cached by `key`."""
    starts = [get(R.COMPUTE_START_X, 0), get(R.COMPUTE_START_X + 1, 0), get(R.COMPUTE_START_X + 2, 0)]
    if any(starts): raise QueueError(queue.name, f"COMPUTE_START_X/Y/Z = {starts}: dispatch offsets are not modelled")
    mask = R.NUM_THREAD_FULL_MASK
    block = (get(R.COMPUTE_NUM_THREAD_X, 0) & mask, get(R.COMPUTE_NUM_THREAD_X + 1, 0) & mask,
             get(R.COMPUTE_NUM_THREAD_X + 2, 0) & mask)
    if min(block) < 1 or block[0] * block[1] * block[2] > 1024:
      raise QueueError(queue.name, f"COMPUTE_NUM_THREAD_X/Y/Z = {block}: a work-group has 1 to 1024 threads")
    pgm = ((get(R.COMPUTE_PGM_LO, 0) | (get(R.COMPUTE_PGM_HI, 0) << 32)) << 8) & ((1 << 64) - 1)
    rsrc2 = get(R.COMPUTE_PGM_RSRC2, 0)
    wavesize = (get(R.COMPUTE_TMPRING_SIZE, 0) >> R.TMPRING_WAVESIZE_SHIFT) & R.TMPRING_WAVESIZE_MASK
    # bytes per lane: WAVESIZE units per wave over the lanes of a wave (gfx11 counts 256 bytes for wave32 here, as
    # before: the driver sizes for 64 lanes, so a wave32 lane gets twice what it asked for)
    per_lane = wavesize * R.TMPRING_GRANULE_GFX9 // 64 if self.gfx9 else wavesize * R.TMPRING_GRANULE // 32
    rsrc3 = get(R.COMPUTE_PGM_RSRC3_GFX9 if self.gfx9 else R.COMPUTE_PGM_RSRC3, 0)
    state = (pgm, get(R.COMPUTE_PGM_RSRC1, 0), rsrc2, rsrc3, block,
             ((rsrc2 >> R.RSRC2_LDS_SHIFT) & R.RSRC2_LDS_MASK) * R.LDS_GRANULE, self._scratch_setup(per_lane))
    if len(self._launch_states) >= 256: self._launch_states.clear()
    self._launch_states[key] = state
    return state

  def _scratch_setup(self, bytes_per_lane: int):
    setup = self._scratch_setups.get(bytes_per_lane)
    if setup is None: setup = self._scratch_setups[bytes_per_lane] = self._emu.ScratchSetup(None, bytes_per_lane)
    return setup

  def dispatch_aql(self, queue, pkt: int):
    """An hsa_kernel_dispatch_packet_t at pkt (hsa.h): sizes, kernel descriptor, kernarg address. Returns None, or
    the dispatch suspended after its first time slice (see resume)."""
    ScratchSetup = self._emu.ScratchSetup
    mem, where = self.mem, f"{queue.name} dispatch packet"
    raw = mem.read_bytes(pkt, 64, where)
    _, setup, wx, wy, wz, _, gx, gy, gz, private, group, kobj, kernarg, _, _ = struct.unpack("<HHHHHHIIIIIQQQQ", raw)
    offset = (pkt - queue.ring_base) % queue.ring_size

    def fail(msg): return QueueError(queue.name, msg, opcode=R.AQL_TYPE_KERNEL_DISPATCH, offset=offset)
    dims = setup & 3
    wg, gs = (wx, wy, wz), (gx, gy, gz)
    if not 1 <= dims <= 3: raise fail(f"dispatch packet with {dims} dimensions")
    if min(wg) < 1 or wx * wy * wz > 1024: raise fail(f"work-group size {wg} is not 1 to 1024 threads")
    if (gx // wx) * (gy // wy) * (gz // wz) > MAX_WORKGROUPS: raise fail(f"grid {gs} exceeds the mock's {MAX_WORKGROUPS} work-groups")
    if any(g % w for g, w in zip(gs, wg)): raise fail(f"grid {gs} is not a multiple of the work-group {wg} (partial work-groups are not modelled)")
    kd = mem.read_bytes(kobj, 64, f"{queue.name} kernel descriptor")
    group_fixed, private_fixed = struct.unpack_from("<II", kd, R.KD_GROUP_SEGMENT)
    (entry,) = struct.unpack_from("<q", kd, R.KD_ENTRY_OFFSET)
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", kd, R.KD_RSRC3)
    (props,) = struct.unpack_from("<H", kd, R.KD_CODE_PROPERTIES)
    wave_size = self._wave_size(queue, bool(props & R.KCP_WAVE32), fail)
    values = {0: [0, 0, 0, 0], 1: [pkt & 0xFFFFFFFF, pkt >> 32],
              2: [queue.amd_queue_address & 0xFFFFFFFF, queue.amd_queue_address >> 32],
              3: [kernarg & 0xFFFFFFFF, kernarg >> 32], 4: [queue.read_index & 0xFFFFFFFF, queue.read_index >> 32],
              5: [0, 0], 6: [private]}
    user = [v for bit, n in R.KCP_USER_SGPRS if props & (1 << bit) for v in values[bit]]
    return self._run_emulator(queue, {"packet": pkt}, pgm_addr=(kobj + entry) & ((1 << 64) - 1), rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=rsrc3,
                       user_sgprs=(user + [0] * R.NUM_USER_DATA)[:R.NUM_USER_DATA],
                       grid=tuple(g // w for g, w in zip(gs, wg)), block=wg, lds_bytes=max(group, group_fixed),
                       scratch=ScratchSetup(None, max(private, private_fixed)), wave_size=wave_size)
