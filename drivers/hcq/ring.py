"""A hardware command ring: dwords written at the write pointer, the write pointer published, the doorbell rung.

The ring never overwrites commands the device has not read: before writing it waits (with a timeout) until the
read pointer the device reports leaves room. Where the read pointer lives in memory the CPU cannot map (VRAM behind
a USB bridge), `rptr` is a CPU shadow and `refresh()` reads the device's value into it: called only while waiting
for space (the shadow lags, so the inline check errs towards waiting), never per write. Two ways to cross the ring's end:
  - "split": the stream continues at offset 0 (the engine reads the ring modulo its size; PM4 compute rings);
  - "pad":   packets must not straddle the end, so the tail is filled with zero dwords (NOPs on SDMA) first.
"""
from __future__ import annotations

from typing import Callable

from ...errors import DeviceError, Timeout


class Ring:
  def __init__(self, name: str, ring: memoryview, wptr: memoryview, rptr: memoryview, doorbell: Callable[[int], None],
               ptr_unit: int, cross: str, barrier: Callable[[], None], clock: Callable[[], float],
               sleep: Callable[[float], None], timeout_s: float, idle: Callable[[float], None] | None = None,
               refresh: Callable[[], None] | None = None):
    """ring: u32 view of the ring buffer; wptr/rptr: u64 views (one element) of the pointers the engine shares;
    ptr_unit: bytes per pointer unit (4 for PM4 rings counted in dwords, 1 for SDMA rings counted in bytes);
    doorbell(value) rings the doorbell with the new write pointer."""
    if ring.format != "I": raise ValueError(f"{name}: the ring is viewed as u32 words")
    if cross not in ("split", "pad"): raise ValueError(f"{name}: unknown wrap mode {cross!r}")
    self.name, self.ring, self.wptr, self.rptr = name, ring, wptr, rptr
    self.size_dw = len(ring)
    if self.size_dw & (self.size_dw - 1): raise ValueError(f"{name}: ring of {self.size_dw} dwords is not a power of two")
    self.doorbell, self.ptr_unit, self.cross = doorbell, ptr_unit, cross
    self._dw_per_unit = 4 // ptr_unit if ptr_unit <= 4 else None
    self.barrier, self.clock, self.sleep, self.timeout_s, self.idle = barrier, clock, sleep, timeout_s, idle
    self.refresh = refresh or _nothing
    self.put_dw = 0        # dwords written since creation (the ring position is put_dw % size_dw)
    # the read pointer last seen plus the ring's size: writing up to here is known not to overwrite unread commands
    # (the read pointer only moves forwards), so the common write reads the engine's pointer only when it gets there
    self.room_dw = 0
    self.published_dw = 0  # dwords published to the engine (the write pointer it was last given)
    self.submits = 0

  # pointer values are in the engine's unit (dwords or bytes)
  def _rptr_dw(self) -> int: return self.rptr[0] * self.ptr_unit // 4

  def _wait_space(self, need_dw: int) -> None:
    if need_dw > self.size_dw:
      raise DeviceError(f"{self.name}: a submission of {need_dw} dwords exceeds the ring of {self.size_dw} dwords")
    self.room_dw = self._rptr_dw() + self.size_dw
    if self.put_dw + need_dw <= self.room_dw: return
    start, pause = self.clock(), 20e-6
    while True:
      self.refresh()
      rp = self._rptr_dw()
      self.room_dw = rp + self.size_dw
      if self.put_dw + need_dw - rp <= self.size_dw: return
      if self.clock() - start > self.timeout_s:
        raise Timeout(f"{self.name} ring space for {need_dw} dwords (write pointer {self.put_dw})",
                      expected=self.put_dw + need_dw - self.size_dw, last_seen=rp, timeout_s=self.timeout_s)
      (self.idle or self.sleep)(pause)
      pause = min(pause * 2, 2e-3)

  def make_room(self, need_dw: int) -> None:
    """Wait (with the timeout) until need_dw dwords can be written at the write pointer: the commands there have been
    read. For engines that reuse memory tied to a ring position (the indirect buffers of an AQL queue's slots)."""
    self._wait_space(need_dw)

  def write(self, words) -> None:
    """Copy a u32 sequence (array('I'), memoryview 'I' or list) into the ring at the write pointer; does not
    publish it."""
    n = len(words)
    put, size = self.put_dw, self.size_dw
    pos = put & (size - 1)
    tail = size - pos
    if n <= tail:
      # the common case, checked inline: room up to the read pointer the engine reports (else wait for it)
      if put + n > self.room_dw: self._wait_space(n)
      self.ring[pos:pos + n] = words if not isinstance(words, list) else memoryview(_u32(words))
      self.put_dw = put + n
      return
    if self.cross == "pad":
      self._wait_space(tail + n)
      self.ring[pos:] = memoryview(_ZEROS[:tail]) if tail <= len(_ZEROS) else memoryview(_u32([0] * tail))
      self.ring[:n] = words if not isinstance(words, list) else memoryview(_u32(words))
      self.put_dw += tail + n
      return
    self._wait_space(n)
    mv = words if not isinstance(words, list) else memoryview(_u32(words))
    self.ring[pos:] = mv[:tail]
    self.ring[:n - tail] = mv[tail:]
    self.put_dw += n

  def write_cmd(self, cmd, values) -> None:
    """Write command buffer `cmd` patched with `values` at the write pointer: the same words as
    write(cmd.fill(values)), but in the common case (it fits before the ring's end, the engine left room) its
    template is copied into the ring and patched there (no intermediate array, one call less per launch). The patch
    entries are cmdbuf.CommandBuffer._flat's (key, add, position, shift; shift -1 = a 64-bit value's two dwords).
    Does not publish the words; a failed look-up leaves the write pointer where it was."""
    template = cmd.template
    n = len(template)
    put, size = self.put_dw, self.size_dw
    pos = put & (size - 1)
    if n > size - pos or put + n > self.room_dw:
      self.write(cmd.fill(values))   # across the ring's end, or room not yet seen: the general path
      return
    ring = self.ring
    ring[pos:pos + n] = template
    for key, add, i, shift in cmd._flat:
      v = values[key] + add
      i += pos
      if shift < 0:
        ring[i] = v & 0xFFFFFFFF
        ring[i + 1] = (v >> 32) & 0xFFFFFFFF
      else: ring[i] = (v >> shift) & 0xFFFFFFFF
    self.put_dw = put + n

  def rollback(self, put_dw: int) -> None:
    """Forget the words written since put_dw (a submission abandoned before commit: nothing after the last
    published write pointer has reached the engine)."""
    if not self.published_dw <= put_dw <= self.put_dw:
      raise DeviceError(f"{self.name}: cannot roll back to {put_dw} (published {self.published_dw}, written {self.put_dw})")
    self.put_dw = put_dw

  def commit(self) -> None:
    """Publish the write pointer and ring the doorbell."""
    put = self.published_dw = self.put_dw
    value = put * 4 // self.ptr_unit
    self.wptr[0] = value
    # one full fence: the ring contents and the write pointer are visible before the doorbell write makes the
    # engine read them (the engine reads the write pointer only when its doorbell rings)
    self.barrier()
    self.submits += 1
    self.doorbell(value)

  def submit(self, words) -> None:
    self.write(words)
    self.commit()


def _nothing() -> None: pass


def _u32(seq):
  from array import array
  return array("I", seq)


_ZEROS = _u32([0] * 4096)
