"""Hardware queues of the mock GPU: a PM4 compute queue, an SDMA queue and an AQL queue.

Each holds its ring (base, size), the addresses where it reports its read pointer, and the write pointer the
driver last rang the doorbell with. poll() executes what it can: it stops at the write pointer or at a packet that
waits on memory (blocked: polled again later), and stops for good at an error (`error`: a QueueError or GPUFault),
which the GPU reports to the KFD model as an exception event. A dispatch that runs out of its time slice (see gpu.py)
stays the queue's current work: poll() then reports no progress (the caller moves on: the host's thread, or the
worker releasing the GPU's lock) while the queue stays pending and blocked on it, so later polls resume it.

Pointer units (Linux amdkfd kfd_queue.c / kfd_mqd_manager_v11.c, and the HSA AQL queue of hsa.h): PM4 rings count dwords, SDMA rings bytes, AQL
queues 64-byte packets, and an AQL doorbell carries the index of the last packet written (put - 1).
"""
from __future__ import annotations

from ...errors import GPUFault, HCQError, QueueError
from . import regs as R
from .pm4 import Frame, PM4Engine
from .sdma import SDMAEngine

COMPUTE, SDMA, COMPUTE_AQL = 0, 1, 2     # kfd_ioctl.h KFD_IOC_QUEUE_TYPE_COMPUTE / _SDMA / _COMPUTE_AQL
KIND_NAMES = {COMPUTE: "compute", SDMA: "sdma", COMPUTE_AQL: "aql"}


class Queue:
  kind = -1

  def __init__(self, gpu, qid: int, ring_base: int, ring_size: int, rptr_addr: int, wptr_addr: int,
               doorbell_offset: int):
    if ring_size <= 0 or ring_size & (ring_size - 1):
      raise ValueError(f"ring size {ring_size:#x} is not a power of two")
    self.gpu, self.qid = gpu, qid
    self.ring_base, self.ring_size, self.rptr_addr, self.wptr_addr = ring_base, ring_size, rptr_addr, wptr_addr
    self.doorbell_offset = doorbell_offset
    self.name = f"{gpu.name} {KIND_NAMES[self.kind]} queue {qid}"
    self.doorbell_value = 0
    self.error: HCQError | None = None
    self.active = True

  # ---- driver side
  def doorbell(self, value: int) -> None:
    self.doorbell_value = value
    self.gpu.kick(self)

  # ---- engine side
  @property
  def blocked(self) -> bool:
    return self.active and self.error is None and self._blocked_on() is not None

  @property
  def blocked_on(self) -> str | None: return self._blocked_on()

  @property
  def pending(self) -> bool:
    """Whether a poll could make progress: there is work (the ring is behind the doorbell, an IB or packet is in
    flight), blocked or not. A queue that is not pending stays idle until its doorbell rings."""
    return self.active and self.error is None and self._has_work()

  def poll(self) -> bool:
    if not self.active or self.error is not None: return False
    try: return self._poll()
    except BaseException as e: return self._failed(e)

  def poll_pending(self) -> tuple[bool, bool]:
    """(poll(), pending) in one call (the GPU's doorbell asks both)."""
    return self.poll(), self.pending

  def _failed(self, e: BaseException) -> bool:
    """An exception out of _poll: a queue error or GPU fault stops this queue (reported to the KFD model); so does
    any other exception (a bug of the model: named, the other queues run on); one of the host's thread (a
    KeyboardInterrupt in synchronous mode) stops it and is raised on. Returns True (poll()'s progress)."""
    if isinstance(e, (QueueError, GPUFault)):
      self.error = e
      self.gpu.queue_failed(self, e)
    elif isinstance(e, Exception): self._stopped_by(e, "the mock's queue model failed")
    else:
      self._stopped_by(e, "interrupted by an exception in the host's thread")
      raise e
    return True

  def _stopped_by(self, e: BaseException, why: str) -> None:
    """An exception other than a queue error arrived while this queue ran, maybe halfway through a block of a
    dispatch or a packet: that work cannot be resumed exactly, so it is dropped and the queue stops with an error
    naming the exception (reported as any queue error: at the driver's next wait). The queue is left consistent:
    destroying it (close()) works at once."""
    self.drop_work()
    self.error = QueueError(self.name, f"{why} ({type(e).__name__}: {e}) while it ran the queue: its current work "
                                       f"was dropped and the queue stopped")
    self.gpu.queue_failed(self, self.error)

  def drop_work(self) -> None:
    """Abandon a dispatch suspended between time slices (the queue is destroyed or stopped)."""

  def _poll(self) -> bool: raise NotImplementedError
  def _blocked_on(self) -> str | None: raise NotImplementedError
  def _has_work(self) -> bool: raise NotImplementedError


class PM4Queue(Queue):
  kind = COMPUTE

  def __init__(self, *args):
    super().__init__(*args)
    self.engine = PM4Engine(self.gpu, self)
    self.ring = Frame(self.ring_base, self.ring_size // 4, 0, 0, True, 0, "ring")
    self.engine.frames.append(self.ring)
    self._rptr_what = f"{self.name} read pointer"
    self._mem = self.gpu.mem

  def _has_work(self) -> bool:
    return self.doorbell_value != self.ring.pos or len(self.engine.frames) > 1 or self.engine.running is not None

  @property
  def pending(self) -> bool:
    """Queue.pending with _has_work inlined (the GPU asks after each poll of a launch's doorbell)."""
    engine = self.engine
    return self.active and self.error is None and (self.doorbell_value != self.ring.pos or len(engine.frames) > 1
                                                   or engine.running is not None)

  def drop_work(self) -> None: self.engine.drop()

  def poll_pending(self) -> tuple[bool, bool]:
    """(poll(), pending) in one call (the GPU's doorbell asks both on every launch): Queue.poll with the pending
    property inlined."""
    if not self.active or self.error is not None: return False, False
    engine, ring = self.engine, self.ring
    try:
      wptr = self.doorbell_value
      if wptr <= ring.pos: progress = self._poll()     # nothing new, or a pointer behind: _poll's checks
      else:
        # _poll's common case inlined (new packets: every launch's doorbell), the same steps
        ring.end = wptr
        progress = engine.run()
        if progress:
          mem = self._mem
          cells = mem.cells64
          cell = cells[1].get(self.rptr_addr) if cells[0] == mem.ranges.generation else None
          if cell is not None: cell.value = ring.pos
          else: mem.write64(self.rptr_addr, ring.pos, self._rptr_what)
          progress = engine.running is None
    except BaseException as e: return self._failed(e), False       # (a stopped queue is not pending)
    return progress, (self.active and self.error is None and (self.doorbell_value != ring.pos
                                                              or len(engine.frames) > 1 or engine.running is not None))

  def _poll(self) -> bool:
    engine, ring = self.engine, self.ring
    wptr = self.doorbell_value
    if wptr <= ring.pos:            # (new packets, the common case, need neither check)
      if wptr == ring.pos and len(engine.frames) == 1 and engine.running is None: return False
      if wptr < ring.pos and len(engine.frames) <= 1:
        raise QueueError(self.name, f"write pointer {wptr} is behind the read pointer {ring.pos}",
                         offset=(ring.pos % ring.size_dw) * 4)
    ring.end = wptr
    progress = engine.run()
    if progress:
      # DeviceMemory.write64's kept-cell case inlined: the read pointer's address was checked for these mappings
      mem = self._mem
      cells = mem.cells64
      cell = cells[1].get(self.rptr_addr) if cells[0] == mem.ranges.generation else None
      if cell is not None: cell.value = ring.pos
      else: mem.write64(self.rptr_addr, ring.pos, self._rptr_what)
    return progress and engine.running is None     # a dispatch out of its slice: see the module docstring

  def _blocked_on(self): return self.engine.blocked_on


class SDMAQueue(Queue):
  kind = SDMA

  def __init__(self, *args):
    super().__init__(*args)
    self.engine = SDMAEngine(self.gpu, self)
    self.ring = Frame(self.ring_base, self.ring_size // 4, 0, 0, True, 0, "ring")
    self.engine.frames.append(self.ring)

  def _has_work(self) -> bool: return self.doorbell_value != 4 * self.ring.pos or len(self.engine.frames) > 1

  def _poll(self) -> bool:
    if self.doorbell_value % 4:
      raise QueueError(self.name, f"write pointer {self.doorbell_value:#x} is not dword aligned",
                       offset=(self.ring.pos % self.ring.size_dw) * 4)
    if self.doorbell_value // 4 == self.ring.pos and len(self.engine.frames) == 1: return False   # idle
    self.ring.end = self.doorbell_value // 4
    progress = self.engine.run()
    if progress: self.gpu.mem.write64(self.rptr_addr, 4 * self.ring.pos, f"{self.name} read pointer")
    return progress

  def _blocked_on(self): return self.engine.blocked_on


class AQLQueue(Queue):
  """AQL packets (hsa.h): KERNEL_DISPATCH, BARRIER_AND/OR, and the AMD vendor packet carrying a PM4 indirect buffer
  (amd_aql_pm4_ib_packet_t). rptr_addr is amd_queue_t.read_dispatch_id; the queue pointer handed to kernels is
  the amd_queue_t itself (rptr_addr - 128)."""
  kind = COMPUTE_AQL

  def __init__(self, *args):
    super().__init__(*args)
    self.engine = PM4Engine(self.gpu, self)     # runs the PM4 of vendor packets
    self.read_index = 0
    self.packets = self.ring_size // R.AQL_PACKET_SIZE
    self.current: int | None = None            # address of the vendor packet whose PM4 is running
    self.running = None                        # a kernel dispatch suspended between time slices (the current packet)
    self._waiting: str | None = None
    self.doorbell_value = -1                   # an AQL doorbell carries the last packet index: none rung yet

  @property
  def amd_queue_address(self) -> int: return self.rptr_addr - R.AMD_QUEUE_READ_DISPATCH_ID

  def _offset(self, index: int) -> int: return (index % self.packets) * R.AQL_PACKET_SIZE

  def _has_work(self) -> bool:
    return self.current is not None or self.running is not None or self.read_index <= self.doorbell_value

  def drop_work(self) -> None:
    running, self.running = self.running, None
    if running is not None: running.drop()
    self.engine.drop()

  def _poll(self) -> bool:
    progress = False
    mem = self.gpu.mem
    if self.running is not None:      # the kernel dispatch packet at the read index, suspended: its next slice
      running = self.running
      try: ended = self.gpu.resume(running)
      except BaseException:
        self.running = None
        raise
      if not ended: return False
      self.running = None
      self._finish(self.ring_base + self._offset(self.read_index))
      progress = True
    while True:
      if self.current is not None:
        progress |= self.engine.run()
        if self.engine.frames: return progress and self.engine.running is None    # the PM4 waits
        self._finish(self.current)
        self.current = None
        progress = True
      if self.read_index > self.doorbell_value: break
      addr = self.ring_base + self._offset(self.read_index)
      header = mem.read32(addr, f"{self.name} packet header")
      ptype = header & 0xFF
      if ptype == R.AQL_TYPE_INVALID:
        self._waiting = "an AQL packet header to become valid"
        break
      if ptype == R.AQL_TYPE_KERNEL_DISPATCH:
        running = self.gpu.dispatch_aql(self, addr)
        if running is not None:    # not ended within its time slice: the packet stays current
          self.running = running
          return False
        self._finish(addr)
      elif ptype in (R.AQL_TYPE_BARRIER_AND, R.AQL_TYPE_BARRIER_OR):
        deps = [mem.read64(addr + 8 + 8 * i, f"{self.name} barrier dependency") for i in range(5)]
        values = [mem.read64(d + R.AMD_SIGNAL_VALUE, f"{self.name} barrier signal") for d in deps if d]
        done = all(v == 0 for v in values) if ptype == R.AQL_TYPE_BARRIER_AND else (not values or any(v == 0 for v in values))
        if not done:
          self._waiting = f"barrier packet {self.read_index}: dependency signals {values}"
          break
        self._finish(addr)
      elif ptype == R.AQL_TYPE_VENDOR:
        fmt = header >> 16
        if fmt != R.AQL_VENDOR_FORMAT_PM4_IB:
          raise QueueError(self.name, f"vendor-specific AQL packet format {fmt:#x} is not supported", opcode=ptype,
                           offset=self._offset(self.read_index))
        self.engine.frames.append(Frame(addr + 4, 4, 0, 4, False, self._offset(self.read_index), "AQL PM4-IB packet"))
        self.current = addr
        self._waiting = None
        continue
      else:
        raise QueueError(self.name, f"AQL packet type {ptype} is not supported (header {header:#010x})", opcode=ptype,
                         offset=self._offset(self.read_index))
      progress = True
    return progress

  def _finish(self, addr: int) -> None:
    """Complete the packet at addr: decrement its completion signal, write its mailbox, advance the read index."""
    mem = self.gpu.mem
    signal = mem.read64(addr + 56, f"{self.name} completion signal")
    if signal:
      value = mem.read64(signal + R.AMD_SIGNAL_VALUE, f"{self.name} completion signal")
      mem.write64(signal + R.AMD_SIGNAL_VALUE, value - 1, f"{self.name} completion signal")
      mailbox = mem.read64(signal + R.AMD_SIGNAL_MAILBOX, f"{self.name} signal mailbox")
      if mailbox:
        event_id = mem.read32(signal + R.AMD_SIGNAL_EVENT_ID, f"{self.name} signal event id")
        mem.write64(mailbox, event_id, f"{self.name} signal mailbox")
        self.gpu.interrupt(self, event_id)
    self.read_index += 1
    self._waiting = None
    mem.write64(self.rptr_addr, self.read_index, f"{self.name} read dispatch id")

  def _blocked_on(self):
    if self.running is not None:
      return f"kernel dispatch packet {self.read_index}: its dispatch is running (suspended between time slices)"
    if self.current is not None: return self.engine.blocked_on
    return self._waiting if self.read_index <= self.doorbell_value else None


QUEUE_CLASSES = {COMPUTE: PM4Queue, SDMA: SDMAQueue, COMPUTE_AQL: AQLQueue}
