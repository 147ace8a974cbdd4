"""Non-overlapping address ranges of a device model (its allocations, its mapped ranges), each with a value, found by
binary search: adding, removing and finding the ranges that meet [lo, hi) cost O(log n) and the ranges found, never a
walk over every range. The mocks model thousands of buffers; a scan per allocation made n of them quadratic."""
from __future__ import annotations

import bisect


class Intervals:
  """start -> (end, value) for half-open ranges [start, end) that do not overlap one another."""

  def __init__(self):
    self._starts: list[int] = []
    self._entries: dict[int, tuple[int, object]] = {}

  def __len__(self) -> int: return len(self._starts)

  def overlapping(self, lo: int, hi: int) -> list:
    """The values of the ranges that meet [lo, hi), in address order."""
    out = []
    i = bisect.bisect_left(self._starts, hi) - 1
    while i >= 0:      # ranges do not overlap: their ends rise with their starts, so walk down until one ends by lo
      start = self._starts[i]
      end, value = self._entries[start]
      if end <= lo: break
      out.append(value)
      i -= 1
    out.reverse()
    return out

  def containing(self, addr: int):
    """The value of the range holding addr, None when none does."""
    i = bisect.bisect_right(self._starts, addr) - 1
    if i < 0: return None
    end, value = self._entries[self._starts[i]]
    return value if addr < end else None

  def add(self, start: int, end: int, value) -> None:
    """Add [start, end); a ValueError naming both ranges when it meets one already there."""
    if end <= start: raise ValueError(f"empty range {start:#x}..{end:#x}")
    hit = self.overlapping(start, end)
    if hit: raise ValueError(f"range {start:#x}..{end:#x} overlaps {hit[0]!r}")
    bisect.insort(self._starts, start)
    self._entries[start] = (end, value)

  def remove(self, start: int):
    """Remove the range that starts at start; returns its value (a KeyError when none starts there)."""
    end, value = self._entries.pop(start)
    del self._starts[bisect.bisect_left(self._starts, start)]
    return value


class RangeTable:
  """An immutable sorted table of non-overlapping [start, end) ranges, in blocks of at most 2 * BLOCK: a change makes
  a new table that shares every block but the one it touches, so it costs O(BLOCK + n / BLOCK), not O(n), while a
  reader holding the old table still sees one consistent snapshot (the emulator's threads read it without a lock)."""
  BLOCK = 128
  __slots__ = ("firsts", "blocks", "count", "cache")

  def __init__(self, firsts: tuple = (), blocks: tuple = (), count: int = 0):
    self.firsts, self.blocks, self.count = firsts, blocks, count   # blocks: ((starts...), (ends...)) each
    self.cache: list = []      # what a user derives from this table once (the emulator's numpy arrays)

  def __len__(self) -> int: return self.count

  def _block_of(self, addr: int) -> int:
    return max(bisect.bisect_right(self.firsts, addr) - 1, 0)

  def range_of(self, addr: int) -> tuple[int, int] | None:
    """(start, end) of the range holding addr, or None."""
    if not self.count: return None
    starts, ends = self.blocks[self._block_of(addr)]
    i = bisect.bisect_right(starts, addr) - 1
    if i >= 0 and addr < ends[i]: return starts[i], ends[i]
    return None

  def meets(self, start: int, end: int) -> bool:
    """Whether any range meets [start, end)."""
    if not self.count: return False
    b = bisect.bisect_left(self.firsts, end) - 1     # the last block starting before end
    if b < 0: return False
    starts, ends = self.blocks[b]
    i = bisect.bisect_left(starts, end) - 1           # the last range starting before end: ends rise with starts
    return i >= 0 and ends[i] > start

  def items(self):
    for starts, ends in self.blocks: yield from zip(starts, ends)

  def with_range(self, start: int, end: int) -> "RangeTable":
    if not self.count: return RangeTable((start,), (((start,), (end,)),), 1)
    b = self._block_of(start)
    starts, ends = self.blocks[b]
    i = bisect.bisect_right(starts, start)
    starts, ends = starts[:i] + (start,) + starts[i:], ends[:i] + (end,) + ends[i:]
    if len(starts) > 2 * self.BLOCK:
      h = len(starts) // 2
      new = ((starts[:h], ends[:h]), (starts[h:], ends[h:]))
      firsts = self.firsts[:b] + (starts[0], starts[h]) + self.firsts[b + 1:]
    else:
      new = ((starts, ends),)
      firsts = self.firsts[:b] + (starts[0],) + self.firsts[b + 1:]
    return RangeTable(firsts, self.blocks[:b] + new + self.blocks[b + 1:], self.count + 1)

  def without(self, start: int) -> "RangeTable | None":
    """The table without the range that starts at start; None when no range starts there."""
    if not self.count: return None
    b = self._block_of(start)
    starts, ends = self.blocks[b]
    i = bisect.bisect_left(starts, start)
    if i == len(starts) or starts[i] != start: return None
    starts, ends = starts[:i] + starts[i + 1:], ends[:i] + ends[i + 1:]
    if starts:
      return RangeTable(self.firsts[:b] + (starts[0],) + self.firsts[b + 1:],
                        self.blocks[:b] + ((starts, ends),) + self.blocks[b + 1:], self.count - 1)
    return RangeTable(self.firsts[:b] + self.firsts[b + 1:], self.blocks[:b] + self.blocks[b + 1:], self.count - 1)
