"""Allocators of the generic runtime: virtual address ranges, and a wrapping ring for per-launch data (kernargs)."""
from __future__ import annotations

import bisect
from collections import deque
from typing import Callable

from ...errors import DeviceError


def round_up(x: int, a: int) -> int: return (x + a - 1) // a * a


class VARanges:
  """First-fit allocator of [base, base+size) with coalescing frees. Used for device virtual address space and for
  sub-allocating one big device allocation."""

  def __init__(self, base: int, size: int, name: str = "va"):
    if size <= 0: raise ValueError(f"{name}: empty range")
    self.base, self.size, self.name = base, size, name
    self._starts: list[int] = [base]   # free ranges, sorted by start
    self._sizes: dict[int, int] = {base: size}
    self._used: dict[int, int] = {}

  def alloc(self, size: int, align: int = 0x1000) -> int:
    if size <= 0: raise ValueError(f"{self.name}: allocation of {size} bytes")
    if align & (align - 1): raise ValueError(f"{self.name}: alignment {align:#x} is not a power of two")
    for start in self._starts:
      fsize = self._sizes[start]
      addr = round_up(start, align)
      if addr + size > start + fsize: continue
      self._take(start, fsize, addr, size)
      self._used[addr] = size
      return addr
    raise DeviceError(f"{self.name}: out of address space for {size:#x} bytes aligned to {align:#x} "
                      f"(range {self.base:#x}+{self.size:#x}, {self.free_bytes:#x} bytes free in {len(self._starts)} pieces)")

  def _take(self, start: int, fsize: int, addr: int, size: int) -> None:
    i = bisect.bisect_left(self._starts, start)
    del self._starts[i]
    del self._sizes[start]
    if addr > start: self._insert(start, addr - start)
    end, fend = addr + size, start + fsize
    if fend > end: self._insert(end, fend - end)

  def _insert(self, start: int, size: int) -> None:
    bisect.insort(self._starts, start)
    self._sizes[start] = size

  def free(self, addr: int) -> None:
    size = self._used.pop(addr, None)
    if size is None: raise DeviceError(f"{self.name}: free of {addr:#x}, which is not allocated")
    i = bisect.bisect_left(self._starts, addr)
    # merge with the following free range
    if i < len(self._starts) and self._starts[i] == addr + size:
      nxt = self._starts.pop(i)
      size += self._sizes.pop(nxt)
    # merge with the preceding free range
    if i > 0:
      prev = self._starts[i - 1]
      if prev + self._sizes[prev] == addr:
        self._sizes[prev] += size
        return
    self._insert(addr, size)

  @property
  def free_bytes(self) -> int: return sum(self._sizes.values())

  def allocated(self) -> dict[int, int]: return dict(self._used)


class LaunchRing:
  """A wrapping bump allocator over one host-visible device buffer (kernargs, dispatch packets).

  Each allocation is tagged with the timeline value after which the device no longer reads it. Before a region is
  handed out again, the ring waits (wait_for(value)) until the device is done with everything in it, so that data of
  a launch still in flight is never overwritten."""

  def __init__(self, va: int, size: int, wait_for: Callable[[int], None], name: str = "kernargs"):
    self.va, self.size, self.name = va, size, name
    self._wait_for = wait_for
    self._off = 0
    self._inflight: deque[tuple[int, int, int]] = deque()  # (start, end, timeline value), in allocation order

  def alloc(self, size: int, done_value: int, align: int = 64) -> int:
    """Address of `size` bytes that stay untouched until the timeline reaches done_value."""
    if size > self.size: raise DeviceError(f"{self.name}: {size} bytes do not fit the {self.size}-byte ring")
    start = (self._off + align - 1) & -align      # align: a power of two
    wrapped = start + size > self.size
    if wrapped: start = 0
    end = start + max(size, 1)
    # The deque is in allocation order. Its front holds the oldest allocations of the previous lap, at or after the
    # current position: pop those that the new region overlaps (and, on a wrap, those in the skipped tail), then wait
    # for the newest of them. Timeline values grow with allocation order, so that one wait covers them all.
    q, need = self._inflight, None
    while q:
      s, e, v = q[0]
      if (s < end and start < e) or (wrapped and s >= self._off):
        need = v
        q.popleft()
      else: break
    if need is not None: self._wait_for(need)
    q.append((start, end, done_value))
    self._off = end
    return self.va + start

  def newest(self) -> tuple[int, int]:
    """(offset, size) of the newest allocation (a device whose ring memory is a CPU shadow pushes it)."""
    start, end, _ = self._inflight[-1]
    return start, end - start

  def cancel(self, done_value: int) -> None:
    """Forget the newest allocation if it was made for done_value (its submission never happened)."""
    if self._inflight and self._inflight[-1][2] == done_value:
      start, _, _ = self._inflight.pop()
      self._off = start
