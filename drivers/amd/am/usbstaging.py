"""Copies between the host and the VRAM of a GPU behind an ASM24xx bridge, bounced through the bridge's SRAM
(SRAMStaging): the AMD USB path's copy pipeline (drivers/amd/am/usb.py gives it its SDMA work). The bridge side is
drivers/system: the SRAM's DMA engine (asm24.py), its windows (bridgemem.py), the fence polls (usbpci.py
wait_signal)."""
from __future__ import annotations

import collections
import copy

from ....errors import DeviceError, Timeout
from ...system import asm24
from ...system.usbasync import COMPLETED
from ...system.bridgemem import SYSMEM_SIZE, WINDOWS


def _reworded(e: Exception, message: str) -> Exception:
  """The same error (class and attributes: a USBGone stays one) with a message that says how far a copy got."""
  err = copy.copy(e)
  err.args = (message,)
  return err


class SRAMStaging:
  """Copies between the host and memory only the GPU reaches (VRAM), bounced through the bridge's SRAM: the SRAM is
  split into `halves` buffers used in turn; the GPU copies each chunk with an engine of the vendor's
  (gpu_copy(src_bus, dst_bus, size, fence_bus, value): copy, then store `value` (u32) at fence_bus) and the host
  polls the fence over USB. Copy-in pipelines: chunk i+1 goes into the other buffer while the GPU copies chunk i; a
  buffer is refilled only after the fence says the copy out of it is done. Copy-out: the GPU fills one buffer while
  the host reads the other. Sizes and offsets are any; the fence is a u32 in the a000 window.

  sentinels=True (copyin_queued): the last sector of each half belongs to the copy-in sentinels, which nothing else
  writes (copy-out chunks are a sector shorter too); they are cleared here, so that what the SRAM held before (at
  power-on, or numbers of an earlier run) cannot release a chunk early."""

  def __init__(self, dev: "USBPCIDevice", gpu_copy, chunk: int = 128 << 10, halves: int = 2, fence_offset: int = 0,
               base: int = SYSMEM_SIZE, sentinels: bool = False, release_offset: int = 0x10):
    if chunk % asm24.SLOT or base % asm24.SLOT or base + chunk * halves > WINDOWS["sram"].size:
      raise DeviceError(f"{dev.name}: staging of {halves} x {chunk:#x} bytes at {base:#x} does not fit the SRAM in 16 KiB slots")
    self.dev, self.gpu_copy, self.chunk, self.halves, self.fence_offset = dev, gpu_copy, chunk, halves, fence_offset
    self.base = base
    self.room = chunk - asm24.SECTOR if sentinels else chunk     # copy-out's bytes per chunk
    self.fence_bus, self.release_offset = WINDOWS["a000"].bus + fence_offset, release_offset
    # the fence and copyout_queued's release counter start at 0: the GPU compares them unsigned (>=), so whatever the
    # window held (power-on contents, an earlier run's count near 2^32) would wrap and release chunks early
    for at in (fence_offset, release_offset): self._clear(at)
    self.seq = self.released = 0
    self.owed = 0      # the fence value that ends the GPU work of a failed copy (still queued: it uses the halves)
    if sentinels:
      for h in range(halves): self._write_sentinel(base + (h + 1) * chunk - asm24.SECTOR, 0)

  def _write_sentinel(self, sector: int, seq: int) -> None:
    """The sentinel sector at SRAM offset `sector` (its last dword = seq; the DMA engine writes from a slot's start)."""
    lead = sector % asm24.SLOT
    self.dev.bridge.sram_write(sector // asm24.SLOT, bytes(lead + asm24.SECTOR - 4) + seq.to_bytes(4, "little"))

  def _clear(self, offset: int) -> None:
    """Zero the u32 at a000 + offset (one read, a write per nonzero byte: none as a rule)."""
    for k, b in enumerate(self.dev.read_window("a000", offset, 4)):
      if b: self.dev.write_window("a000", offset + k, b"\0")

  def _next(self) -> int:
    if self.seq >= 0xFFFFFFFF:     # unsigned compares on the GPU: a wrapped fence would release chunks early
      raise DeviceError(f"{self.dev.name}: the bridge copy fence reached 2^32 chunks; reopen the device")
    self.seq += 1
    return self.seq

  def _wait(self, value: int, what: str) -> None:
    self.dev.wait_signal("a000", self.fence_offset, value, what=f"{self.dev.name}: {what}: copy fence "
                         f"(GPU address {self.fence_bus:#x})")

  def _settle(self) -> None:
    """Before a copy touches the halves: the GPU work a failed copy left queued is done (a copy-out's would write
    the halves over the next copy-in's chunks, which its sentinels then release: wrong data)."""
    if self.owed:
      self._wait(self.owed, "the GPU work of an earlier failed copy, which still uses the SRAM")
      self.owed = 0

  def _failed(self, last: int | None) -> None:
    """A copy failed after handing the GPU work that ends with fence value `last` (None: nothing)."""
    if last: self.owed = max(self.owed, last)

  def copyin(self, dst_bus: int, data) -> None:
    data = memoryview(bytes(data))
    issued: list[int] = []          # fence value of each chunk's copy, in order
    done = 0                        # bytes the GPU is known to have copied
    try:
      self._settle()
      for i, off in enumerate(range(0, len(data), self.chunk)):
        n = min(self.chunk, len(data) - off)
        if len(issued) >= self.halves:     # this buffer's previous chunk must be out of it
          self._wait(issued[-self.halves], f"copy-in to {dst_bus:#x}, chunk {i}")
          done = (i - self.halves + 1) * self.chunk
        buf = self.base + i % self.halves * self.chunk
        self.dev.sram.write(buf, data[off:off + n])
        value = self._next()
        self.gpu_copy(WINDOWS["sram"].bus + buf, dst_bus + off, n, self.fence_bus, value)
        issued.append(value)
      if issued: self._wait(issued[-1], f"copy-in to {dst_bus:#x}, last chunk")
    except BaseException as e:
      self._failed(issued[-1] if issued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-in of {len(data)} bytes to {dst_bus:#x} failed after {done} bytes: {e}") from None

  def copyin_queued(self, dst_bus: int, data, gpu_queue, group: int = 128) -> None:
    """Copy-in with the sentinel scheme: the GPU's work for up to `group` chunks is queued up front (one submission,
    one doorbell: gpu_queue([(sentinel_bus, seq, src_bus, dst_bus, size), ...], fence_bus)), each chunk's part
    being: wait until the sentinel (the last dword of the chunk's half, written in the same bulk transfer as the
    chunk, after its data) reaches seq, copy, store seq at the fence. The host writes chunk i into half i % halves
    once the fence says the copy out of that half is done: per chunk one DMA-engine write (arm + bulk) and the fence
    reads it waits for. Halves hold chunk - 512 bytes of data (the sentinel's sector). Sequence numbers only grow
    (the fence's), so a stale sentinel or stale data never releases a chunk early. After a failure the chunks the
    GPU still waits for are released (their halves' sentinels written alone), so that its queue does not stay
    blocked; the copy's destination is then undefined, and the error says how far it got."""
    data = memoryview(bytes(data))
    room = self.chunk - asm24.SECTOR
    if self.room == self.chunk:
      raise DeviceError(f"{self.dev.name}: copyin_queued needs a staging made with sentinels=True (the halves' last sectors)")
    sram = WINDOWS["sram"].bus
    chunks = [(off, min(room, len(data) - off)) for off in range(0, len(data), room)]
    steps = []
    for i, (off, n) in enumerate(chunks):
      half = self.base + i % self.halves * self.chunk
      steps.append((sram + half + self.chunk - 4, self._next(), sram + half, dst_bus + off, n))
    queued = written = 0
    if self.dev.bridge.in_flight > 1 and len(chunks) > 1:
      return self._copyin_pipelined(dst_bus, data, chunks, steps, gpu_queue, group)
    try:
      self._settle()
      for i, (off, n) in enumerate(chunks):
        if i == queued:
          gpu_queue(steps[queued:queued + group], self.fence_bus)
          queued = min(queued + group, len(steps))
        if i >= self.halves: self._wait(steps[i - self.halves][1], f"copy-in to {dst_bus:#x}, chunk {i}")
        buf = bytearray(self.chunk)
        buf[:n] = data[off:off + n]
        buf[-4:] = steps[i][1].to_bytes(4, "little")
        self.dev.bridge.sram_write((self.base + i % self.halves * self.chunk) // asm24.SLOT, buf)
        written = i + 1
      if steps: self._wait(steps[-1][1], f"copy-in to {dst_bus:#x}, last chunk")
    except BaseException as e:       # an error, or Ctrl-C: the GPU's queued chunks must not stay blocked
      self._release(steps[written:queued])
      self._failed(steps[queued - 1][1] if queued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      done = max(written - self.halves, 0) * room
      raise _reworded(e, f"copy-in of {len(data)} bytes to {dst_bus:#x} failed after {min(done, len(data))} bytes: {e}") from None

  def _copyin_pipelined(self, dst_bus: int, data, chunks, steps, gpu_queue, group: int) -> None:
    """copyin_queued's loop with the bridge's bulk transfers in flight (asm24.BULK_IN_FLIGHT, usbpipeline.py), as
    the hardware-proven client does it (tinygrad 0.14 runtime/ops_amd.py, USB copy-in): per chunk, the 0xF2 arm of
    its half and two reads of the fence go out together (one round trip: two reads that agree, as poll's torn rule
    asks, since the controller reads XDATA byte by byte), then its bulk OUT goes without waiting. The arm may go
    before the half is free: the DMA engine writes the SRAM only when the bulk data comes, which is sent once the
    fence says the GPU's copy out of that half is done (or, when the reads say it is not yet, after the fence
    polls of the synchronous path)."""
    bridge, room = self.dev.bridge, self.chunk - asm24.SECTOR
    fence_xdata = WINDOWS["a000"].xdata + self.fence_offset
    queued = written = acked = 0
    sent = collections.deque()     # burst entries (usbpipeline: [announce, bulk, data]) of chunks not known moved
    def moved() -> int:            # the leading chunks whose data is known to have gone
      nonlocal acked
      while sent and sent[0][1] is not None and sent[0][1].status == COMPLETED:
        sent.popleft()
        acked += 1
      return acked
    try:
      self._settle()
      with bridge.pipeline() as p:
        for i, (off, n) in enumerate(chunks):
          if i == queued:
            gpu_queue(steps[queued:queued + group], self.fence_bus)
            queued = min(queued + group, len(steps))
          buf = bytearray(self.chunk)
          buf[:n] = data[off:off + n]
          buf[-4:] = steps[i][1].to_bytes(4, "little")
          entry = p.announce(*bridge.sram_arm_request((self.base + i % self.halves * self.chunk) // asm24.SLOT,
                                                      self.chunk, False), buf)
          sent.append(entry)
          if i >= self.halves:
            need = steps[i - self.halves][1]
            reads = [p.control_in(asm24.REQ_XDATA_READ, fence_xdata, 0, 4) for _ in range(2)]
            p.wait_for(reads[-1])
            seen = {int.from_bytes(r.data, "little") for r in reads}
            if len(seen) != 1 or min(seen) < need: self._wait(need, f"copy-in to {dst_bus:#x}, chunk {i}")
          p.send(entry)
          written = i + 1
          moved()
      if steps: self._wait(steps[-1][1], f"copy-in to {dst_bus:#x}, last chunk")
    except BaseException as e:       # an error, or Ctrl-C: the GPU's queued chunks must not stay blocked
      # the chunks whose data is known to have gone (those the pipeline moved after the error are released again)
      written = moved()
      self._release(steps[written:queued])
      self._failed(steps[queued - 1][1] if queued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      done = max(written - self.halves, 0) * room
      raise _reworded(e, f"copy-in of {len(data)} bytes to {dst_bus:#x} failed after {min(done, len(data))} bytes: {e}") from None

  def _release(self, waiting) -> None:
    """Write the sentinels the GPU still waits for (the last one of each half: they compare >=); best effort."""
    last = {}
    for sentinel, seq, *_ in waiting: last[sentinel] = seq
    for sentinel, seq in last.items():
      try: self._write_sentinel(sentinel - WINDOWS["sram"].bus - (asm24.SECTOR - 4), seq)
      except (DeviceError, Timeout): return

  def copyout_queued(self, src_bus: int, size: int, gpu_queue, group: int = 128) -> bytes:
    """Copy-out with the GPU's work queued up front (gpu_queue([(release_bus, release, src_bus, dst_bus, size, seq),
    ...], fence_bus); release_bus None for the first `halves` chunks): chunk i's part waits until the u32 release
    counter (a000 window + release_offset) reaches `release` (the host has read the chunk that used the half
    before), copies into half i % halves, stores seq at the fence. The host waits for the fence, reads the half (arm
    + bulk) and counts the release up, writing only the counter's bytes that change, lowest first (one XDATA write,
    as a rule: a GPU read between two byte writes sees a smaller value, never a larger one)."""
    room, sram, release_offset = self.room, WINDOWS["sram"].bus, self.release_offset
    release_bus = WINDOWS["a000"].bus + release_offset
    released = start = self.released
    chunks = [(off, min(room, size - off)) for off in range(0, size, room)]
    steps = []
    for i, (off, n) in enumerate(chunks):
      rel = None if i < self.halves else (start + i - self.halves + 1) & 0xFFFFFFFF
      steps.append((None if rel is None else release_bus, rel, src_bus + off, sram + self.base + i % self.halves * self.chunk,
                    n, self._next()))
    out, queued = bytearray(), 0
    try:
      self._settle()
      for i, (off, n) in enumerate(chunks):
        if i == queued:
          gpu_queue(steps[queued:queued + group], self.fence_bus)
          queued = min(queued + group, len(steps))
        self._wait(steps[i][5], f"copy-out from {src_bus:#x}, chunk {i}")
        out += self.dev.sram.read(self.base + i % self.halves * self.chunk, n)
        released = self.released = self._count_up(release_offset, released)
    except BaseException as e:       # an error, or Ctrl-C
      try:   # let the GPU's queued chunks run on (they copy into halves nobody reads any more)
        if queued:
          self.dev.write_window("a000", release_offset, ((start + queued) & 0xFFFFFFFF).to_bytes(4, "little"))
          self.released = (start + queued) & 0xFFFFFFFF
      except (DeviceError, Timeout): pass
      self._failed(steps[queued - 1][5] if queued else None)
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-out of {size} bytes from {src_bus:#x} failed after {len(out)} bytes: {e}") from None
    return bytes(out)

  def _count_up(self, offset: int, value: int) -> int:
    new = (value + 1) & 0xFFFFFFFF
    old_b, new_b = value.to_bytes(4, "little"), new.to_bytes(4, "little")
    for k in range(4):
      if old_b[k] != new_b[k]: self.dev.write_window("a000", offset + k, new_b[k:k + 1])
    return new

  def copyout(self, src_bus: int, size: int) -> bytes:
    out = bytearray()
    chunks = [(i, off, min(self.room, size - off)) for i, off in enumerate(range(0, size, self.room))]
    fences: dict[int, int] = {}
    def issue(i, off, n):
      fences[i] = self._next()
      self.gpu_copy(src_bus + off, WINDOWS["sram"].bus + self.base + i % self.halves * self.chunk, n, self.fence_bus, fences[i])
    try:
      self._settle()
      for c in chunks[:self.halves]: issue(*c)
      for i, off, n in chunks:
        self._wait(fences[i], f"copy-out from {src_bus:#x}, chunk {i}")
        out += self.dev.sram.read(self.base + i % self.halves * self.chunk, n)
        if i + self.halves < len(chunks): issue(*chunks[i + self.halves])
    except BaseException as e:
      self._failed(max(fences.values(), default=None))
      if not isinstance(e, (DeviceError, Timeout)): raise
      raise _reworded(e, f"copy-out of {size} bytes from {src_bus:#x} failed after {len(out)} bytes: {e}") from None
    return bytes(out)

