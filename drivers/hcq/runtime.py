"""HCQDevice: the runtime every queue-driven device stands on (the role of the reference lineage's HCQCompiled).

What it owns, the same for every vendor:
  - the timeline: a signal in host memory that each submission's last command sets to that submission's number;
    the host waits for numbers (wait_value), never for engines;
  - submissions: `with Submission(dev, engine) as sub:` reserves the next timeline value, writes the vendor's words,
    appends the engine's timeline store, then commits (doorbell); an exception before the commit abandons it: the
    words are rolled back, the timeline value and the launch-data space are given back. Every submit goes through it;
  - cross-engine ordering: a submission on one engine that follows one on another engine that is not known to be
    done first waits for the previous timeline value on the device (the engine's cached wait command);
  - per-launch data (kernel arguments) in a wrapping ring (LaunchRing) and staging copies for memory the CPU cannot
    see (host buffers copied by the copy engine, pipelined);
  - the fault latch: a device fault (hcq.GPUFault, QueueError) is raised once, at the wait that sees it; afterwards
    every call says the device faulted and submits nothing;
  - the completion hook: a wait that is not done after its busy polls calls _block(seconds), which a vendor overrides
    to sleep in the kernel until an interrupt (KFD events); the default sleeps;
  - bound launches (bound.py) replayed without rebuilding anything;
  - thread safety: one re-entrant lock per device serializes submissions, waits and memory management: a device may
    be used from several threads; each call is atomic, and calls from different threads run in some order.

Memory the CPU cannot map (a GPU behind a USB bridge, README "Memory the CPU cannot map"): a vendor chooses, once,
signals that read through the device (signal_type, _signal_page), smaller rings where they only cost device memory
and transfers (launch_data_size, staging_size/count), and pushes what it wrote at the hand-over points (its doorbell
function, its launch words); nothing here checks per launch.

What a vendor provides (see drivers/hcq/README.md): _host_memory, _make_engines, _launch_words, _record/_replay_words,
_load and _alloc/_free of device memory, optionally _block and _release_hardware."""
from __future__ import annotations

import threading
from collections import deque

from ...compiler import queue as Q
from ...errors import DeviceError, GPUFault, QueueError, Timeout
from .alloc import LaunchRing
from ..system.interrupts import held as held_interrupt
from .device import Buffer, Device, Timeline
from .engine import (COPY_DST, COPY_SRC, P_DST, P_SRC, T_END, T_START, TIMELINE, TIMELINE_VALUE, V_PREV, V_TIMELINE,
                     Engine)
from .signal import Signal, SignalPool
from . import trace

LAUNCH_DATA_SIZE = 16 << 20            # the per-launch data ring (kernel arguments)
STAGING_SIZE, STAGING_COUNT = 2 << 20, 4
TIMELINE_LIMIT = 2**32 - 1             # engines compare 32-bit values (their wait packets)
RECENT_MASK = 255                      # how many of the latest submissions a timeout can name


class _Staging:
  __slots__ = ("va", "cpu", "busy_until")
  def __init__(self, va: int, cpu: memoryview): self.va, self.cpu, self.busy_until = va, cpu, 0


class Submission:
  """One submission on one engine (a context manager): `value` is its timeline value; add() writes words; the
  engine's timeline store is appended at the end unless the words already set the timeline (`signalled`). The
  sequence itself (begin, commit, abandon) is HCQDevice's _begin/_commit/_abandon, which the launch path calls
  directly (no object per launch)."""
  __slots__ = ("device", "engine", "value", "signalled", "_mark", "what")

  def __init__(self, device: "HCQDevice", engine: Engine, what=None):
    """what: what the submission does, for a timeout's message (a str, or (format, *args) formatted only then)."""
    self.device, self.engine, self.signalled, self.what = device, engine, False, what

  def __enter__(self) -> "Submission":
    self.value, self._mark = self.device._begin(self.engine)
    return self

  def add(self, words) -> None: self.engine.write(words)

  def __exit__(self, exc_type, exc, tb) -> None:
    dev = self.device
    if exc_type is not None: dev._abandon(self.engine, self.value, self._mark)
    else: dev._commit(self.engine, self.value, self._mark, self.signalled, self.what)


class _OpenLock:
  __slots__ = ("device",)
  def __init__(self, device): self.device = device

  def __enter__(self):
    dev = self.device
    dev.lock.acquire()
    if dev.closed:
      dev.lock.release()
      dev._check_open()

  def __exit__(self, *exc): self.device.lock.release()


class HCQDevice(Device):
  """A device with engines fed by submissions and a timeline (see the module docstring)."""
  compute: Engine
  copy: Engine
  # sizes a vendor may lower where they only cost device memory and transfers (a GPU behind a USB bridge)
  launch_data_size, staging_size, staging_count = LAUNCH_DATA_SIZE, STAGING_SIZE, STAGING_COUNT
  tracer = None              # trace.DeviceTrace while a timeline is recorded
  signal_type = Signal       # or a factory of DeviceSignals for signals in memory the CPU cannot map (signal.py)
  # True where the class's untimed launch takes _launch_cmd's (command buffer, values) and has the engine patch them
  # where it writes them (Engine.write_cmd); set by __init_subclass__, so that a subclass that overrides only
  # _launch_words (to do more around it, e.g. drivers/amd/am/usb.py) gets the general path and its override runs
  _launch_direct = False

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    if "_launch_cmd" in cls.__dict__: cls._launch_direct = True
    elif "_launch_words" in cls.__dict__: cls._launch_direct = False

  def __init__(self, os, config):
    super().__init__(os, config)
    self.lock = threading.RLock()
    self.fault: GPUFault | QueueError | None = None
    self._stuck = False          # the last wait did not end normally (timed out, interrupted): the work may still run
    self._last_engine: Engine | None = None
    self._awaited: int | None = None   # the timeline value a wait is blocked on (for the completion hook)
    self._copies: dict[int, object] = {}
    self._images: dict[bytes, object] = {}   # code images loaded (_loaded_image)
    self._recent: list = [None] * (RECENT_MASK + 1)   # (value, engine, what) of the latest submissions

  # ---- set-up
  def _set_up(self, session, setup) -> None:
    """Run the vendor's set-up on an open session; when it fails (an unsupported part, a queue that cannot be made,
    Ctrl-C) the session (its device file, VM, PCI lock) is closed before the error goes on."""
    try: setup()
    except BaseException:
      try: session.close()
      finally: raise

  def _start_runtime(self) -> None:
    """Called by the vendor's set-up once its interface is up."""
    self.signals = SignalPool(self._signal_page, name=f"{self.name} signals", ticks_per_us=self.ticks_per_us,
                              make=self.signal_type)
    self.timeline = Timeline(self.signals.alloc(0, name=f"{self.name} timeline signal"))
    self.timer_start = self.signals.alloc(0, name=f"{self.name} launch start timestamp")
    self.timer_end = self.signals.alloc(0, name=f"{self.name} launch end timestamp")
    va, self._launch_view = self._host_memory(self.launch_data_size)
    self.launch_data = LaunchRing(va, self.launch_data_size, self.wait_value, name=f"{self.name} launch data ring")
    links = {("param", 0): self.timeline.signal.va, ("param", 1): self.timer_start.va, ("param", 2): self.timer_end.va}
    links.update(self._vendor_links())
    self.engines: dict[str, Engine] = self._make_engines(links)
    self.compute, self.copy = self.engines["compute"], self.engines["copy"]
    self._staging = [_Staging(*self._host_memory(self.staging_size)) for _ in range(self.staging_count)]
    self._staging_next = 0
    self.tracer = trace.for_device(self, self.config)   # HCQ_TRACE / --trace FILE: a timeline (trace.py), else None

  ticks_per_us: float    # the vendor's device clock of timestamps, in ticks per microsecond

  # ---- for vendors
  def _host_memory(self, size: int) -> tuple[int, memoryview]:
    """(device address, CPU view) of host memory the device reads and writes uncached; freed at close."""
    raise NotImplementedError

  def _signal_page(self) -> tuple[int, memoryview]:
    """(device address, CPU view) of memory for more signals (the first page holds the timeline signal)."""
    return self._host_memory(0x1000)

  def _vendor_links(self) -> dict:
    """{("param", slot): address} of the vendor's own placeholders (slots from engine.FIRST_VENDOR_SLOT on), resolved
    in every command buffer the engines build; called once the signal pool exists."""
    return {}

  def _make_engines(self, links: dict) -> dict[str, Engine]:
    """{"compute": Engine, "copy": Engine, ...} with the device's links resolved in their command buffers."""
    raise NotImplementedError

  def _launch_words(self, prog, shape, explicit: bytes, value: int):
    """The words of one launch whose submission has timeline value `value`, ending with the timeline store."""
    raise NotImplementedError

  def _launch_cmd(self, prog, shape, explicit: bytes, value: int):
    """Optional: (command buffer, values) whose cmd.fill(values) are _launch_words' words, with the same side effects
    (launch data written, queue state tracked). A vendor that defines it gets untimed launches written by
    engine.write_cmd (patched in the ring, no array in between)."""
    raise NotImplementedError

  def _abandoned(self, engine: Engine) -> None:
    """A submission on `engine` was rolled back before its commit (_abandon): forget any engine state the vendor
    assumed its words would leave."""

  def _record(self, planned: list):
    """Bound launches (bound.py): record [(program, shape, explicit kernargs)] once; returns what _replay_words
    takes."""
    raise DeviceError(f"{self.name}: bound launches are not supported on this device")

  def _replay_words(self, recording):
    """The words that run a recording (without the timeline store)."""
    raise NotImplementedError

  def _replayed(self, recording) -> None:
    """The words of _replay_words are on the engine (the submission is about to commit)."""

  def _block(self, seconds: float) -> None:
    """The completion hook: a wait that is not done after its busy polls; `self._awaited` is the value it waits for.
    Returns after at most about `seconds`; raises hcq.GPUFault for a device fault."""
    self.os.sleep(seconds)

  def _release_hardware(self) -> None:
    """Destroy the queues and free the memory (close, after the last wait)."""

  # ---- the submission sequence (Submission, and launch() directly)
  def _begin(self, engine: Engine) -> tuple[int, object]:
    """Take the device lock (held until _commit or _abandon), refuse a closed or faulted device, reserve the next
    timeline value; after work on another engine that is not known done, the engine first waits for it. Returns
    (timeline value, the engine's position to roll back to). Ctrl-C is held back from here to the end of _commit or
    _abandon (drivers/system/interrupts.py): a submission stopped between its timeline value and its doorbell would
    leave work the timeline counts on that no engine ever sees. (launch() has this and _commit inline: a change here
    goes there too.)"""
    held_interrupt.hold()
    try: self.lock.acquire()
    except BaseException:
      held_interrupt.release()
      raise
    try:
      if self.closed or self.fault is not None: self._refuse()
      timeline = self.timeline
      prev = timeline.value
      if prev >= TIMELINE_LIMIT:
        raise DeviceError(f"{self.name}: the timeline reached 2^32 submissions; reopen the device")
      mark = engine.mark()
      value = timeline.value = prev + 1
      last = self._last_engine
      if last is not engine and last is not None and timeline.signal.value < prev:
        try: engine.write(engine.wait_cmd.fill({V_PREV: prev}))
        except BaseException:
          self._abandon(engine, value, mark, release=False)
          raise
    except BaseException:
      self.lock.release()
      held_interrupt.release()
      raise
    return value, mark

  def _commit(self, engine: Engine, value: int, mark, signalled: bool, what) -> None:
    """End a submission: the timeline store (unless the words set it), then the doorbell; releases the lock."""
    try:
      try:
        if not signalled: engine.write(engine.signal_cmd.fill({V_TIMELINE: value}))
      except BaseException:
        self._abandon(engine, value, mark, release=False)
        raise
      self._last_engine = engine
      self._recent[value & RECENT_MASK] = (value, engine, what)    # for a timeout's message (_describe)
      try: engine.commit()
      except BaseException:      # interrupted at the doorbell (Ctrl-C): the work was handed over and may never end
        self._stuck = True
        raise
    finally:
      self.lock.release()
      held_interrupt.release()     # a Ctrl-C that came meanwhile is raised here, with the submission on its engine

  def _abandon(self, engine: Engine, value: int, mark, release: bool = True) -> None:
    """Nothing of a submission reaches the engine: its words are rolled back, its timeline value and launch data
    given back (later waits do not wait for work that never ran); releases the lock."""
    try:
      engine.rollback(mark)
      self._abandoned(engine)
      if self.timeline.value == value:
        self.timeline.value = value - 1
        self.launch_data.cancel(value)
    finally:
      if release:
        self.lock.release()
        held_interrupt.release()

  # ---- waiting
  def wait_value(self, value: int) -> None:
    """Wait until the timeline reaches value; bounded by the device's timeout (which restarts while the timeline
    moves). A fault seen here is latched; a wait that times out or is interrupted leaves the device closable."""
    with self.lock:
      if self.fault is not None:
        raise DeviceError(f"{self.name}: the device faulted earlier and its queues stopped ({self.fault})")
      self._awaited = value
      t0 = trace.now_us() if self.tracer is not None else 0.0
      try: self.timeline.signal.wait(value, self.timeout_s, self.os.monotonic, self.os.sleep, self._block)
      except (GPUFault, QueueError) as e:
        self._remember_fault(e)
        raise
      except Timeout as e:        # the work may still be running
        self._stuck = True
        stuck = self._describe(e.last_seen)
        if stuck: e.args = (f"{self.name}: {e.args[0]}; the device is at {stuck}",)
        raise
      except BaseException:      # KeyboardInterrupt: the work may still be running
        self._stuck = True
        raise
      finally: self._awaited = None
      self._stuck = False
      if self.tracer is not None: self.tracer.wait(value, t0, trace.now_us())

  def _open_lock(self) -> "_OpenLock":
    """`with self._open_lock():` holds the device lock, with the device checked open under it (a close from another
    thread may have come first)."""
    return _OpenLock(self)

  def _refuse(self) -> None:
    """Raise why nothing is submitted: the device is closed, or faulted earlier."""
    self._check_open()
    raise DeviceError(f"{self.name}: the device faulted earlier and its queues stopped ({self.fault}); nothing more "
                      f"is submitted")

  def _describe(self, done) -> str:
    """The first submission after timeline value `done` (the one the device has not finished), if still known."""
    if done is None: return ""
    entry = self._recent[(done + 1) & RECENT_MASK]
    if entry is None or entry[0] != done + 1: return ""
    value, engine, what = entry
    if isinstance(what, tuple): what = what[0].format(*what[1:])
    elif hasattr(what, "name"): what = f"kernel {what.name}"    # a launch: the program
    elif what is not None: what = str(what)
    return f"timeline value {value}: {what or 'a submission'} on the {engine.name} engine"

  def _remember_fault(self, e: GPUFault | QueueError) -> None:
    """Keep the fault (the queues stopped) and make its message name this device when the layer below did not."""
    self.fault = e
    if e.args and isinstance(e.args[0], str) and self.name not in e.args[0] and self.label not in e.args[0]:
      e.args = (f"{self.name}: {e.args[0]}",) + e.args[1:]

  label = ""   # the interface's name for the device (errors from below name it instead of self.name)

  def _synchronize(self) -> None:
    with self._open_lock():
      if self.timeline.value: self.wait_value(self.timeline.value)

  # ---- launches
  def launch_cmdbuf(self, name: str, handle, grid, block, timed: bool):
    """The command buffer of one launch on the compute engine, lowered once per launch shape from the launch queue
    program: barrier; [timestamp(start)]; call(program); [timestamp(end)]; store(timeline). handle: what the
    vendor's lowering of the call takes (the Program, or a vendor's variant of it)."""
    els = [Q.barrier()]
    if timed: els.append(Q.timestamp(T_START))
    els.append(Q.call(Q.program(name, handle, grid, block)))
    if timed: els.append(Q.timestamp(T_END))
    els.append(Q.store(TIMELINE, TIMELINE_VALUE))
    return self.compute.build(Q.queue(self.compute.name, *els))

  def _loaded_image(self, key: bytes, upload):
    """The code image `key` (its bytes) loaded once per device: upload() (which puts it in device memory and returns
    what the vendor's programs need of it) runs on the first load only, under the device lock; later loads of the
    same image, by any of its kernels, get the same result."""
    with self._open_lock():
      loaded = self._images.get(key)
      if loaded is None: loaded = self._images[key] = upload()
      return loaded

  def launch(self, prog, shape, explicit: bytes, timed: bool):
    """One launch (Program.__call__ checked its arguments): returns the kernel's seconds when timed, else None."""
    if timed or self.tracer is not None:   # traced: every launch is timed (its GPU timestamps go to the trace)
      with self.lock:
        seconds = self._timed_launch(prog, shape, explicit)
        return seconds if timed else None
    engine = self.compute
    # _begin(engine) inlined (every launch): the same steps, errors and clean-up
    held_interrupt.hold()
    lock = self.lock
    try: lock.acquire()
    except BaseException:
      held_interrupt.release()
      raise
    try:
      if self.closed or self.fault is not None: self._refuse()
      timeline = self.timeline
      prev = timeline.value
      if prev >= TIMELINE_LIMIT:
        raise DeviceError(f"{self.name}: the timeline reached 2^32 submissions; reopen the device")
      mark = engine.mark()
      value = timeline.value = prev + 1
      last = self._last_engine
      if last is not engine and last is not None and timeline.signal.value < prev:
        try: engine.write(engine.wait_cmd.fill({V_PREV: prev}))
        except BaseException:
          self._abandon(engine, value, mark, release=False)
          raise
    except BaseException:
      lock.release()
      held_interrupt.release()
      raise
    try:
      if self._launch_direct:
        cmd, values = self._launch_cmd(prog, shape, explicit, value)
        engine.write_cmd(cmd, values)
      else: engine.write(self._launch_words(prog, shape, explicit, value))
    except BaseException:
      self._abandon(engine, value, mark)
      raise
    prog.launches += 1
    # _commit(engine, value, mark, True, prog) inlined (every launch): its words set the timeline, so the doorbell
    # follows at once; the lock and the held Ctrl-C span are released as _commit releases them
    try:
      self._last_engine = engine
      self._recent[value & RECENT_MASK] = (value, engine, prog)    # for a timeout's message (_describe)
      try: engine.commit()
      except BaseException:      # interrupted at the doorbell (Ctrl-C): the work was handed over and may never end
        self._stuck = True
        raise
    finally:
      lock.release()
      held_interrupt.release()
    return None

  def _timed_launch(self, prog, shape, explicit: bytes) -> float:
    """A launch that clears the timer signals, waits, and reads them: under the device lock from the clear to the read
    (the timer signals are every timed launch's: another thread's would clear or overwrite them in between)."""
    engine = self.compute
    value, mark = self._begin(engine)
    try:
      words = self._launch_words(prog, shape, explicit, value)
      self.timer_start.timestamp = self.timer_end.timestamp = 0
      t0 = self.os.monotonic()
      h0 = 0.0
      if self.tracer is not None:
        h0 = trace.now_us()
        self.tracer.seen(self.timeline.signal.value, h0)
      engine.write(words)
    except BaseException:
      self._abandon(engine, value, mark)
      raise
    prog.launches += 1
    self._commit(engine, value, mark, True, prog)
    h1 = trace.now_us() if self.tracer is not None else 0.0
    self.wait_value(value)
    t1 = self.os.monotonic()
    start, end = self.timer_start.timestamp, self.timer_end.timestamp
    if self.tracer is not None:
      self.tracer.submit(f"launch {prog.name}", h0, h1, value)
      self.tracer.launch(prog, value, h0, trace.now_us(), start, end, self.ticks_per_us)
    if start and end >= start: return (end - start) / (self.ticks_per_us * 1e6)
    return t1 - t0  # no device clock: the host's view of the launch

  def launch_data_slot(self, size: int, value: int) -> tuple[int, memoryview]:
    """(device address, CPU view) of `size` bytes of launch data that stay untouched until the timeline reaches
    value."""
    va = self.launch_data.alloc(size, value)
    off = va - self.launch_data.va
    return va, self._launch_view[off:off + size]

  def bind(self, prog, *args, global_size=(1, 1, 1), local_size=(1, 1, 1)):
    """Record a launch once (arguments included) for cheap repeats: see bound.BoundLaunch."""
    from .bound import BoundLaunch
    return BoundLaunch(self, [(prog, args, global_size, local_size)])

  def bind_many(self, launches):
    """Record several launches [(program, args, global_size, local_size), ...] as one bound command buffer."""
    from .bound import BoundLaunch
    return BoundLaunch(self, list(launches))

  # ---- copies
  def _copy_cmdbuf(self, nbytes: int):
    cb = self._copies.get(nbytes)
    if cb is None:
      prog = Q.queue(self.copy.name, Q.copy(Q.buffer(COPY_DST, nbytes), Q.buffer(COPY_SRC, nbytes), nbytes),
                     Q.store(TIMELINE, TIMELINE_VALUE))
      cb = self._copies[nbytes] = self.copy.build(prog)
    return cb

  def copy_async(self, dst_va: int, src_va: int, nbytes: int, staging: "_Staging | None" = None) -> int:
    """A copy between device addresses on the copy engine; returns the timeline value that marks its completion.
    staging: the staging slot the copy reads or writes, marked busy until then inside the submission (so that a
    Ctrl-C after the doorbell cannot leave a slot in use that looks free)."""
    cb = self._copy_cmdbuf(nbytes)
    h0 = 0.0
    if self.tracer is not None:
      h0 = trace.now_us()
      self.tracer.seen(self.timeline.signal.value, h0)
    with Submission(self, self.copy, ("a copy of {} bytes to {:#x}", nbytes, dst_va)) as sub:
      sub.add(cb.fill({P_DST: dst_va, P_SRC: src_va, V_TIMELINE: sub.value}))
      sub.signalled = True
      if staging is not None: staging.busy_until = sub.value
    if self.tracer is not None:
      self.tracer.submit(f"copy {nbytes} B", h0, trace.now_us(), sub.value)
      self.tracer.copy(sub.value, h0, nbytes, dst_va)
    return sub.value

  def _staging_slot(self) -> _Staging:
    st = self._staging[self._staging_next]
    self._staging_next = (self._staging_next + 1) % len(self._staging)
    if st.busy_until: self.wait_value(st.busy_until)
    return st

  def _copyin(self, buf: Buffer, src: memoryview, offset: int) -> None:
    n = len(src)
    with self._open_lock():
      # host memory: the CPU writes it once the device is done with it. (CPU-visible device memory is written by
      # the copy engine too: CPU writes through a BAR would need a flush before the device reads them.)
      if buf.kind == "host":
        self._synchronize()
        buf.cpu_view[offset:offset + n] = src
        return
      for pos in range(0, n, self.staging_size):
        chunk = min(self.staging_size, n - pos)
        st = self._staging_slot()
        st.cpu[:chunk] = src[pos:pos + chunk]
        self.copy_async(buf.va + offset + pos, st.va, chunk, st)

  def _copyout(self, buf: Buffer, size: int, offset: int) -> bytes:
    with self._open_lock():
      if buf.kind == "host":
        self._synchronize()
        return bytes(buf.cpu_view[offset:offset + size])
      # every staging slot gets a chunk in flight: the copy engine copies the next chunks while the CPU reads this one
      parts, in_flight, pos = [], deque(), 0
      while pos < size or in_flight:
        while pos < size and len(in_flight) < len(self._staging):
          chunk = min(self.staging_size, size - pos)
          st = self._staging_slot()
          tv = self.copy_async(st.va, buf.va + offset + pos, chunk, st)
          in_flight.append((st, tv, chunk))
          pos += chunk
        st, tv, chunk = in_flight.popleft()
        self.wait_value(tv)
        parts.append(bytes(st.cpu[:chunk]))
      return parts[0] if len(parts) == 1 else b"".join(parts)

  def _free(self, buf: Buffer) -> None:
    with self._open_lock():
      self._synchronize()
      buf.cpu_view = None      # the memory goes away: a view kept would read unmapped memory
      self._free_memory(buf)

  def _free_memory(self, buf: Buffer) -> None: raise NotImplementedError

  def _close(self) -> None:
    with self.lock:
      if self.closed: return       # another thread closed it while this one waited for the lock
      # after a fault the queues are stopped; after a timeout or an interrupted wait the work may never end: waiting
      # again would only time out. Releasing the hardware destroys the queues (which stops them) before freeing memory
      try:
        if self.fault is None and not self._stuck and self.timeline.value: self.wait_value(self.timeline.value)
      finally:
        self.closed = True         # under the lock: a thread waiting for it finds the device closed
        held_interrupt.restore()   # SIGINT's handler as the application had it (interrupts.py)
        for engine in self.engines.values(): engine.close()
        self.signals.close()       # signal views raise from now on instead of reading unmapped memory
        try: self._release_hardware()
        finally:
          if self.tracer is not None:
            try: self.tracer.close()
            except OSError as e:
              raise DeviceError(f"{self.name}: cannot write the trace {self.tracer.file.path}: {e.strerror}") from None
