"""AMDDevice: the public API of DESIGN.md §4 on an AMD GPU, over an iface (iface.py: KFD now; PCI/USB later) that gives
it memory, queues with doorbells and fault events.

Queues: one PM4 compute queue (kernels, signals, timestamps, barriers) and one SDMA queue (copies). Both end each
submission by writing the device timeline value and interrupting through the KFD signal event; a submission on one
queue that follows one on the other first waits for the timeline (WAIT_REG_MEM / POLL_REGMEM)."""
from __future__ import annotations

import dataclasses
from array import array
from collections import deque

from ...compiler import queue as Q
from ...compiler.ir import UOp
from ...errors import DeviceError, GPUFault, QueueError, Timeout
from ..hcq import Buffer, Device, LaunchRing, Ring, SignalPool, Timeline, round_up
from . import lower, pm4
from .cmdbuf import link
from ...compiler.backend.amd.codeobject import CodeObject
from ...compiler.backend.amd.errors import ISAError
from .program import AMDProgram, RepeatDispatch, image_at

# placeholders of the device's queue programs: PARAM slots bound when the device links them, variables at submit
TIMELINE, T_START, T_END = Q.signal(0, "timeline"), Q.signal(1, "launch start"), Q.signal(2, "launch end")
COPY_DST, COPY_SRC = 3, 4
IRQ_SLOT = 5
IRQ = Q.signal(IRQ_SLOT, "interrupt request")
TIMELINE_VALUE = UOp.variable("timeline", 0, 2**32 - 1)
PREVIOUS_VALUE = UOp.variable("prev", 0, 2**32 - 1)
V_TIMELINE, V_PREV, V_KERNARG, V_DISPATCH = ("var", "timeline"), ("var", "prev"), ("var", "kernarg"), ("var", "dispatch")
P_DST, P_SRC = ("param", COPY_DST), ("param", COPY_SRC)

RING_SIZE = 1 << 20
KERNARG_RING = 16 << 20
STAGING_SIZE, STAGING_COUNT = 2 << 20, 4


@dataclasses.dataclass
class Scratch:
  va: int
  size: int
  per_thread: int
  tmpring: int


class _Staging:
  __slots__ = ("mem", "busy_until")
  def __init__(self, mem): self.mem, self.busy_until = mem, 0


class AMDDevice(Device):
  buffer_type = Buffer

  def __init__(self, iface, os, config):
    super().__init__(os, config)
    self.iface = iface
    self.arch, self.props = iface.arch, iface.props
    self.name = f"{self.arch} on {iface.label}"
    self._mems = []
    try: self._setup()
    except BaseException:
      try: iface.close()
      finally: raise

  # ---- set-up
  def _host_mem(self, size: int):
    mem = self.iface.alloc(size, kind="gtt")
    self._mems.append(mem)
    return mem

  def _setup(self) -> None:
    iface = self.iface

    def new_signal_page():
      mem = self._host_mem(0x1000)
      return mem.va, mem.cpu
    self.signals = SignalPool(new_signal_page, name=f"{self.name} signals")
    self.timeline = Timeline(self.signals.alloc(0, name=f"{self.name} timeline signal"))
    self.timer_start = self.signals.alloc(0, name="launch start timestamp")
    self.timer_end = self.signals.alloc(0, name="launch end timestamp")
    ka = self._host_mem(KERNARG_RING)
    self._kernarg_view = ka.cpu
    self.kernargs = LaunchRing(ka.va, ka.size, self._wait_value, name=f"{self.name} kernarg ring")
    qd = self._host_mem(0x1000)            # a zeroed amd_queue_t for kernels that ask for the queue pointer
    self.queue_desc_va = qd.va
    self.compute = self._make_ring("compute", "split", 4)
    self.copy = self._make_ring("sdma", "pad", 1)
    self._staging = [_Staging(self._host_mem(STAGING_SIZE)) for _ in range(STAGING_COUNT)]
    self._staging_next = 0
    self._last_ring = None
    self.fault: GPUFault | QueueError | None = None
    # submissions do not interrupt; a host that blocks on a value asks for one interrupt at that value (_arm)
    self.lower_ctx = lower.LowerCtx(iface.event_id, iface.mailbox_va, interrupts=False)
    self.irq_signal = self.signals.alloc(0, name=f"{self.name} interrupt request signal")
    self._links = {("param", 0): self.timeline.signal.va, ("param", 1): self.timer_start.va, ("param", 2): self.timer_end.va,
                   ("param", IRQ_SLOT): self.irq_signal.va}
    irq_ctx = lower.LowerCtx(iface.event_id, iface.mailbox_va, interrupts=True)
    # wait for the timeline, then store the value elsewhere (the timeline itself may be ahead by then) and interrupt
    self._arms = {e: self._build(Q.queue(n, Q.wait(TIMELINE, PREVIOUS_VALUE), Q.store(IRQ, PREVIOUS_VALUE)), e, irq_ctx)
                  for e, n in (("pm4", "COMPUTE:0"), ("sdma", "COPY:0"))}
    self._armed = 0            # the highest timeline value an interrupt was asked for
    self._awaited = None       # the timeline value _wait_value is blocked on
    self._stuck = False        # the last wait timed out
    self._waits = {e: self._build(Q.queue(n, Q.wait(TIMELINE, PREVIOUS_VALUE)), e) for e, n in (("pm4", "COMPUTE:0"), ("sdma", "COPY:0"))}
    self._signals = {e: self._build(Q.queue(n, Q.store(TIMELINE, TIMELINE_VALUE)), e) for e, n in (("pm4", "COMPUTE:0"), ("sdma", "COPY:0"))}
    self._copies: dict[int, object] = {}
    # Register state of the compute queue. SET_SH_REG state stays on a queue from one dispatch to the next (and across
    # preemption: the queue's MQD saves COMPUTE_PGM_*, COMPUTE_USER_DATA_*, COMPUTE_NUM_THREAD_* ..., v11_structs.h
    # struct v11_compute_mqd), so a launch whose shape left its static registers on the queue last time sends only
    # the registers that change per launch (LaunchShape.cmd_repeat). _registers is the register_state key of the
    # launch that set them last, None when unknown (at start, after raw PM4 from submit_pm4).
    self._registers = None
    self._register_keys: dict[tuple, tuple] = {}
    self._images: dict[bytes, tuple[int, int]] = {}
    self.scratch: Scratch | None = None
    self._old_scratch = []   # scratch areas that programs loaded earlier still point at

  def _make_ring(self, kind: str, cross: str, unit: int) -> Ring:
    """A hardware queue from the iface and the Ring that writes it; unit: bytes per write-pointer step."""
    hwq = self.iface.create_queue(kind, RING_SIZE)
    u64 = hwq.gart.cpu.cast("B").cast("Q")
    wptr, rptr = u64[hwq.wptr_offset // 8:hwq.wptr_offset // 8 + 1], u64[hwq.rptr_offset // 8:hwq.rptr_offset // 8 + 1]
    ring = Ring(f"{self.name} {kind} queue {hwq.queue_id}", hwq.ring.cpu.cast("I"), wptr, rptr, self.iface.doorbell(hwq),
                unit, cross, self.os.memory_barrier, self.os.monotonic, self.os.sleep, self.timeout_s, idle=self._idle)
    ring.hwq = hwq
    return ring

  # ---- waiting
  def _idle(self, seconds: float) -> None:
    """Called by waits that are not done after their busy polls: block in KFD (which also reports GPU faults), after
    asking for an interrupt at the awaited timeline value."""
    if self._awaited is not None and self._armed < self._awaited: self._arm(self._awaited)
    t0 = self.os.monotonic()
    fired = self.iface.wait_events(max(int(seconds * 1000), 0))
    if not fired and self.os.monotonic() - t0 < seconds / 2: self.os.sleep(seconds)

  def _wait_value(self, value: int) -> None:
    if self.fault is not None:
      raise DeviceError(f"{self.name}: the device faulted earlier and its queues stopped ({self.fault})")
    self._awaited = value
    try: self.timeline.signal.wait(value, self.timeout_s, self.os.monotonic, self.os.sleep, self._idle)
    except (GPUFault, QueueError) as e:
      self._remember_fault(e)
      raise
    except Timeout:
      self._stuck = True
      raise
    finally: self._awaited = None
    self._stuck = False

  def _arm(self, value: int) -> None:
    """Ask for an interrupt once the timeline reaches value: on the ring of the latest submission (which reaches it
    no later than the timeline does), a wait for the value, then a store to the interrupt request signal with the
    KFD event interrupt. Nothing else waits for it: it takes no timeline value."""
    ring = self._last_ring
    if ring is None: return
    self._armed = value      # first: a ring-space wait inside the write below must not arm again
    ring.write(self._arms["pm4" if ring is self.compute else "sdma"].fill({V_PREV: value}))
    self._commit(ring)

  def _commit(self, ring: Ring) -> None:
    """Publish a ring's new commands. A device that runs them inside the doorbell write (the synchronous mock) may
    report a fault right here; it is remembered like one seen while waiting."""
    try: ring.commit()
    except (GPUFault, QueueError) as e:
      self._remember_fault(e)
      raise

  def _remember_fault(self, e: GPUFault | QueueError) -> None:
    """Keep the fault (the queues stopped) and make its message name this device when the layer below did not."""
    self.fault = e
    label = self.iface.label
    if e.args and isinstance(e.args[0], str) and label not in e.args[0]: e.args = (f"{self.name}: {e.args[0]}",) + e.args[1:]

  def _synchronize(self) -> None:
    if self.timeline.value: self._wait_value(self.timeline.value)

  # ---- queue programs -> command buffers
  def _build(self, program, engine: str, ctx: lower.LowerCtx | None = None):
    """Lower a queue program once and link the device's own addresses into it."""
    return link(lower.build(program, engine, ctx or self.lower_ctx), self._links)

  def launch_cmdbuf(self, prog: AMDProgram, grid, block, timed: bool, repeat: bool = False):
    """The command buffer of one launch; repeat: without the registers that are the same at every launch of this
    shape (for a queue that holds them already)."""
    els = [Q.barrier()]
    if timed: els.append(Q.timestamp(T_START))
    els.append(Q.call(Q.program(prog.name, RepeatDispatch(prog) if repeat else prog, grid, block)))
    if timed: els.append(Q.timestamp(T_END))
    els.append(Q.store(TIMELINE, TIMELINE_VALUE))
    return self._build(Q.queue("COMPUTE:0", *els), "pm4")

  def register_state_key(self, key: tuple) -> tuple:
    """One object per distinct register state, so that launch() compares keys by identity."""
    return self._register_keys.setdefault(key, key)

  def _copy_cmdbuf(self, nbytes: int):
    cb = self._copies.get(nbytes)
    if cb is None:
      prog = Q.queue("COPY:0", Q.copy(Q.buffer(COPY_DST, nbytes), Q.buffer(COPY_SRC, nbytes), nbytes),
                     Q.store(TIMELINE, TIMELINE_VALUE))
      cb = self._copies[nbytes] = self._build(prog, "sdma")
    return cb

  # ---- submission
  def _begin(self, ring: Ring, engine: str) -> int:
    """Start a submission on ring: returns its timeline value. Work on one ring runs in order; when the previous
    submission went to the other ring and is not known to be done, this one first waits for it on the device."""
    if self.fault is not None:
      raise DeviceError(f"{self.name}: the device faulted earlier and its queues stopped ({self.fault}); nothing more "
                        f"is submitted")
    prev = self.timeline.value
    if prev >= 2**32 - 1:  # the engines compare 32 bits (WAIT_REG_MEM, POLL_REGMEM, SDMA FENCE)
      raise DeviceError(f"{self.name}: the timeline reached 2^32 submissions; reopen the device")
    tv = self.timeline.next()
    if self._last_ring is not ring and self._last_ring is not None and self.timeline.signal.value < prev:
      ring.write(self._waits[engine].fill({V_PREV: prev}))
    self._last_ring = ring
    return tv

  def _abandon(self, tv: int) -> None:
    """A submission failed before its commands reached the ring (no ring space, no kernarg space): give its
    timeline value back so that later waits do not wait for work that never ran."""
    if self.timeline.value == tv:
      self.timeline.value = tv - 1
      self.kernargs.cancel(tv)

  def launch(self, prog: AMDProgram, shape, explicit: bytes, timed: bool):
    tv = self._begin(self.compute, "pm4")
    try:
      if shape.alloc_size:        # a kernel without arguments or dispatch packet needs no kernarg space
        ka = self.kernargs.alloc(shape.alloc_size, tv)
        off = ka - self.kernargs.va
        args = explicit + shape.hidden if shape.hidden else explicit
        self._kernarg_view[off:off + len(args)] = args
        dp = ka + prog.layout.segment_size
        if prog.dispatch_ptr: self._kernarg_view[dp - self.kernargs.va:dp - self.kernargs.va + 64] = prog.dispatch_packet(shape, ka)
      else: ka = dp = 0
      registers = shape.registers
      cmd = (shape.cmd_repeat if self._registers is registers else shape.cmd).fill({V_KERNARG: ka, V_DISPATCH: dp, V_TIMELINE: tv})
      if timed:
        self.timer_start.timestamp = self.timer_end.timestamp = 0
        t0 = self.os.monotonic()
      self.compute.write(cmd)
    except BaseException:
      self._abandon(tv)
      raise
    self._registers = registers
    prog.launches += 1
    self._commit(self.compute)
    if not timed: return None
    self._wait_value(tv)
    t1 = self.os.monotonic()
    start, end = self.timer_start.timestamp, self.timer_end.timestamp
    if start and end >= start: return (end - start) / (self.timer_start.ticks_per_us * 1e6)
    return t1 - t0  # no device clock: the host's view of the launch

  def bind(self, prog: AMDProgram, *args, global_size=(1, 1, 1), local_size=(1, 1, 1)) -> "BoundLaunch":
    """Record a launch once (arguments included) for cheap repeats: see BoundLaunch."""
    return BoundLaunch(self, [(prog, args, global_size, local_size)])

  def bind_many(self, launches) -> "BoundLaunch":
    """Record several launches [(program, args, global_size, local_size), ...] as one bound command buffer."""
    return BoundLaunch(self, list(launches))

  def submit_pm4(self, words) -> int:
    """Run raw PM4 dwords on the compute queue, then signal the timeline. Returns the timeline value."""
    tv = self._begin(self.compute, "pm4")
    try: self.compute.write(array("I", list(words)) + self._signals["pm4"].fill({V_TIMELINE: tv}))
    except BaseException:
      self._abandon(tv)
      raise
    self._registers = None      # raw packets may have set any register
    self._commit(self.compute)
    return tv

  def copy_async(self, dst_va: int, src_va: int, nbytes: int) -> int:
    """An SDMA copy between device addresses; returns the timeline value that marks its completion."""
    cb = self._copy_cmdbuf(nbytes)
    tv = self._begin(self.copy, "sdma")
    try: self.copy.write(cb.fill({P_DST: dst_va, P_SRC: src_va, V_TIMELINE: tv}))
    except BaseException:
      self._abandon(tv)
      raise
    self._commit(self.copy)
    return tv

  # ---- memory
  def _alloc(self, nbytes: int, host: bool = False, cpu_access: bool = False) -> Buffer:
    mem = self.iface.alloc(nbytes, kind="gtt" if host else "vram", cpu_access=cpu_access)
    return Buffer(self, mem.va, nbytes, handle=mem, cpu_view=mem.cpu, kind="host" if host else "device")

  def _free(self, buf: Buffer) -> None:
    self.synchronize()
    self.iface.free(buf.handle)

  def _staging_slot(self) -> _Staging:
    st = self._staging[self._staging_next]
    self._staging_next = (self._staging_next + 1) % len(self._staging)
    if st.busy_until: self._wait_value(st.busy_until)
    return st

  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None:
    n = len(src)
    # host memory: the CPU writes it once the device is done with it. (CPU-visible VRAM is written through SDMA:
    # CPU writes through the BAR would need an HDP flush before the GPU reads them.)
    if buf.kind == "host":
      self._synchronize()
      buf.cpu_view[offset:offset + n] = src
      return
    for pos in range(0, n, STAGING_SIZE):
      chunk = min(STAGING_SIZE, n - pos)
      st = self._staging_slot()
      st.mem.cpu[:chunk] = src[pos:pos + chunk]
      st.busy_until = self.copy_async(buf.va + offset + pos, st.mem.va, chunk)

  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes:
    if buf.kind == "host":
      self._synchronize()
      return bytes(buf.cpu_view[offset:offset + size])
    # every staging slot gets a chunk in flight: the SDMA engine copies the next chunks while the CPU reads this one
    parts, in_flight, pos = [], deque(), 0
    while pos < size or in_flight:
      while pos < size and len(in_flight) < len(self._staging):
        chunk = min(STAGING_SIZE, size - pos)
        st = self._staging_slot()
        st.busy_until = tv = self.copy_async(st.mem.va, buf.va + offset + pos, chunk)
        in_flight.append((st, tv, chunk))
        pos += chunk
      st, tv, chunk = in_flight.popleft()
      self._wait_value(tv)
      parts.append(bytes(st.mem.cpu[:chunk]))
    return parts[0] if len(parts) == 1 else b"".join(parts)

  # ---- programs
  def _load(self, image: bytes, name: str | None):
    try: co = CodeObject.parse(image)
    except ISAError as e: raise DeviceError(f"{self.name}: not a loadable code object: {e}") from None
    target = co.target.rsplit("-", 1)[-1].split(":")[0]   # "amdgcn-amd-amdhsa--gfx1100[:xnack-]" -> "gfx1100"
    if target != self.arch:
      raise DeviceError(f"{self.name}: the code object is for {target}, this device is {self.arch}")
    if not co.kernels: raise DeviceError(f"{self.name}: the code object has no kernels")
    missing = co.undefined_symbols
    if missing:
      raise DeviceError(f"{self.name}: the code object needs {', '.join(missing)}, which it does not define (link it "
                        f"with what defines them, e.g. the ROCm device libraries, or remove the calls)")
    if name is None:
      if len(co.kernels) > 1:
        raise DeviceError(f"{self.name}: the code object has {len(co.kernels)} kernels ({', '.join(co.kernels)}); name one")
      name = next(iter(co.kernels))
    if name not in co.kernels:
      raise DeviceError(f"{self.name}: no kernel {name!r} in the code object (it has {', '.join(co.kernels)})")
    key = bytes(image)
    loaded = self._images.get(key)        # one upload per code object (keyed by its bytes), shared by its kernels
    if loaded is None:
      size = round_up(len(co.image), 0x1000)
      mem = self.iface.alloc(size, kind="vram")
      self._mems.append(mem)
      self.copyin(Buffer(self, mem.va, size, handle=mem, kind="code"), image_at(co, mem.va))
      loaded = self._images[key] = (mem.va, size)
    return AMDProgram(self, co.kernels[name], *loaded)

  def scratch_for(self, private_bytes: int) -> Scratch:
    """Scratch (architected flat scratch) big enough for private_bytes per lane on every wave slot; grown on demand.
    WAVESIZE counts 256-byte units per wave (64 lanes assumed), WAVES the waves per shader engine."""
    per_thread = round_up(private_bytes, 4)
    if self.scratch and self.scratch.per_thread >= per_thread: return self.scratch
    p = self.props
    se = max(p.get("array_count", 1) // max(p.get("simd_arrays_per_engine", 1), 1), 1)
    cu = max(p.get("simd_count", 2) // max(p.get("simd_per_cu", 2), 1), 1)
    slots = p.get("max_slots_scratch_cu", 32)
    wavesize = (64 * per_thread + 255) // 256
    waves = min(cu * slots // se, 0xFFF)
    size = wavesize * 256 * waves * se
    mem = self.iface.alloc(size, kind="vram")
    if self.scratch: self._old_scratch.append(self.scratch)
    self._mems.append(mem)
    self.scratch = Scratch(mem.va, size, per_thread, (waves & 0xFFF) | ((wavesize & 0x7FFF) << 12))
    return self.scratch

  def _compile(self, sink):
    try: from ...compiler.backend.amd import compile_kernel  # the RDNA3 backend, when present
    except ImportError as e: raise DeviceError(f"{self.name}: the RDNA3 compiler backend is not available ({e})") from None
    return self.load(compile_kernel(sink, self.arch))

  def _close(self) -> None:
    # after a fault the queues are stopped, after a timeout they are stuck: waiting for them again would only time
    # out; the iface destroys the queues (which stops them) before it frees the memory
    try:
      if self.fault is None and not self._stuck: self._synchronize()
    finally: self.iface.close()

  def __repr__(self): return f"AMDDevice({self.name})"


class BoundLaunch:
  """Launches recorded once: their kernargs and one command buffer (barrier + dispatch per launch, lowered from a
  queue program) live in device memory, and each run writes only an INDIRECT_BUFFER packet and the timeline signal to
  the ring. Nothing in the bound buffer changes between runs, so a run never has to wait for the previous one.

  launches: [(program, args, global_size, local_size), ...], run in order (each after the previous one finished)."""

  def __init__(self, dev: AMDDevice, launches):
    if not launches: raise DeviceError(f"{dev.name}: nothing to bind")
    self.dev = dev
    planned, offset = [], 0
    for prog, args, global_size, local_size in launches:   # check everything before allocating anything
      gs = tuple(global_size) if not isinstance(global_size, int) else (global_size,)
      ls = tuple(local_size) if not isinstance(local_size, int) else (local_size,)
      explicit = prog.layout.check_and_pack(args, dev.buffer_type, dev)
      shape = prog.shape(gs, ls, False, prog.layout.lds_layout(args)[1] if prog.layout.dynamic_lds else None)
      planned.append((prog, shape, explicit, offset))
      offset = round_up(offset + shape.alloc_size, 64)
    self._keep = [a for _, args, _, _ in launches for a in args if isinstance(a, Buffer)]
    ka = self.kernargs = dev.iface.alloc(offset, kind="gtt")
    dev._mems.append(ka)
    values = {}
    for i, (prog, shape, explicit, off) in enumerate(planned):
      view = ka.cpu[off:off + shape.alloc_size]
      view[:len(explicit)] = explicit
      view[len(explicit):len(explicit) + len(shape.hidden)] = shape.hidden
      seg = prog.layout.segment_size
      if prog.dispatch_ptr: view[seg:seg + 64] = prog.dispatch_packet(shape, ka.va + off)
      # each launch gets its own kernarg/dispatch variables: ("var", "kernarg.i") etc.
      values[("var", f"kernarg.{i}")], values[("var", f"dispatch.{i}")] = ka.va + off, ka.va + off + seg
    # A launch that follows one with the same static registers sends only those that change (see AMDDevice.launch).
    # Two buffers: one for a queue in any state, and, when it is shorter, one for a queue that already holds the first
    # launch's registers (a bound launch run again, or run after a launch of the same shape).
    full = self._words(dev, planned, values, first_repeats=False)
    repeat = self._words(dev, planned, values, first_repeats=True)
    if len(repeat) == len(full): repeat = full
    ib = self.ib = dev.iface.alloc((len(full) + (len(repeat) if repeat is not full else 0)) * 4, kind="gtt")
    dev._mems.append(ib)
    ib.cpu.cast("I")[:len(full)] = full
    self.ib_words = pm4.indirect_buffer(ib.va, len(full))
    self.ib_repeat_words = self.ib_words
    if repeat is not full:
      ib.cpu.cast("I")[len(full):len(full) + len(repeat)] = repeat
      self.ib_repeat_words = pm4.indirect_buffer(ib.va + 4 * len(full), len(repeat))
    self.first_registers = planned[0][1].registers
    # after a run the queue holds the last launch's registers
    self.registers = planned[-1][1].registers
    self.runs = 0

  @staticmethod
  def _words(dev: AMDDevice, planned, values, first_repeats: bool):
    elements, before = [], None
    for i, (prog, shape, _, _) in enumerate(planned):
      kv, dv = UOp.variable(f"kernarg.{i}", 0, 2**64 - 1), UOp.variable(f"dispatch.{i}", 0, 2**64 - 1)
      handle = prog.with_lds(shape.lds)
      if shape.registers is before or (i == 0 and first_repeats): handle = RepeatDispatch(handle)
      elements += [Q.barrier(), Q.call(Q.program(prog.name, (handle, kv, dv), shape.grid, shape.block))]
      before = shape.registers
    return dev._build(Q.queue("COMPUTE:0", *elements), "pm4").fill(values)

  def __call__(self, wait: bool = False) -> int:
    """Run the bound launch; returns its timeline value (waits for it when wait=True)."""
    dev = self.dev
    dev._check_open()
    tv = dev._begin(dev.compute, "pm4")
    ib = self.ib_repeat_words if dev._registers is self.first_registers else self.ib_words
    try: dev.compute.write(array("I", ib) + dev._signals["pm4"].fill({V_TIMELINE: tv}))
    except BaseException:
      dev._abandon(tv)
      raise
    dev._registers = self.registers
    dev._commit(dev.compute)
    self.runs += 1
    if wait: dev._wait_value(tv)
    return tv
