"""GPU memory as the emulators see it (the AMD wave emulator, the PTX interpreter of the NV mock): the host address space
itself, guarded by a list of mapped ranges.

In the mock, GPU virtual address == host virtual address (DESIGN.md §3), so a load from GPU address A reads the host
byte at A. The emulator reads and writes through numpy arrays that span the whole user address space (built with
__array_interface__, no copy, no allocation); every access is first checked, vectorised, against the ranges the KFD
model registered with add_range(), so that an access outside every mapping raises GPUFault instead of crashing the
host process.
"""
from __future__ import annotations

import threading

import numpy as np

from ..drivers.system import libc
from ..errors import GPUFault
from .intervals import RangeTable

# The numpy views start at this address (numpy treats a NULL data pointer as "allocate"), so element i of the u32 view
# is the dword at host address _VIEW_BASE + 4*i. x86-64 user space ends at 2**47.
_VIEW_BASE = 1 << 12
_VIEW_END = 1 << 47


class _Span:
  """Provides __array_interface__ for a raw host address range (no ownership)."""

  def __init__(self, address: int, nbytes: int, dtype):
    dt = np.dtype(dtype)
    self.__array_interface__ = {"data": (address, False), "shape": (nbytes // dt.itemsize,), "typestr": dt.str,
                                "version": 3}


def host_view(address: int, nbytes: int, dtype=np.uint8) -> np.ndarray:
  """A writable numpy view of host memory [address, address + nbytes) (no check: callers check first)."""
  return np.asarray(_Span(address, nbytes, dtype))


class GPUMemory:
  """The set of GPU-visible ranges of one device (GPU VA == host VA).

  The KFD model calls add_range() on map and remove_range() on unmap/free. Overlapping ranges are rejected.
  u8/u16/u32/u64 are numpy views of the whole address space (index = (address - VIEW_BASE) // itemsize); use them
  only after check() accepted the addresses.
  """
  VIEW_BASE = _VIEW_BASE

  def __init__(self):
    # the emulator's numpy temporaries (a few hundred KiB per operation on wide dispatches) stay in the heap instead
    # of being mapped and faulted in afresh each time (see libc.keep_large_temporaries_in_the_heap)
    libc.keep_large_temporaries_in_the_heap()
    # the mapping table is replaced as a whole (never edited in place), so that a dispatch running on another
    # thread (the mock's threaded mode) always sees a consistent snapshot; writers serialise on a lock
    self._lock = threading.Lock()
    # a RangeTable (mockgpu/intervals.py): a change costs O(sqrt-ish) and shares the rest, not a copy of every range;
    # its numpy arrays (the vectorised check of a many-range access) are made on first use, once per table
    self._table = RangeTable()
    span = _VIEW_END - _VIEW_BASE
    self.u8 = host_view(_VIEW_BASE, span, np.uint8)
    self.u16 = host_view(_VIEW_BASE, span, np.uint16)
    self.u32 = host_view(_VIEW_BASE, span, np.uint32)
    self.u64 = host_view(_VIEW_BASE, span, np.uint64)
    self._last = (0, 0)  # the range that satisfied the last check (fast path)
    # bumped whenever the mapping table changes: a check made against the table (e.g. "the code of this block lies in
    # a mapped range", engine._code_unchanged) stays valid while the generation is the same
    self.generation = 0
    self._views: dict = {}
    # translated code blocks by (pc, float mode), owned by the engine; checked against the code bytes per dispatch
    self.block_cache: dict = {}
    # the engine's per-shape dispatch set-ups of small dispatches (engine._Shape): by batch shape, and by whole launch
    # (the fast path); a dispatch takes its entry out while it runs
    self.dispatch_shapes: dict = {}
    self.dispatch_launches: dict = {}

  # ---- the mapping list ----
  def add_range(self, start: int, size: int) -> None:
    """Make [start, start + size) GPU-accessible. Raises ValueError on an empty or overlapping range."""
    if size <= 0: raise ValueError(f"GPU memory range at {start:#x}: size {size} must be positive")
    if start < _VIEW_BASE or start + size > _VIEW_END:
      raise ValueError(f"GPU memory range {start:#x}+{size:#x} lies outside the user address space")
    with self._lock:
      if self._table.meets(start, start + size):
        raise ValueError(f"GPU memory range {start:#x}+{size:#x} overlaps a mapped range")
      self._install(self._table.with_range(start, start + size))

  def remove_range(self, start: int) -> None:
    """Unmap the range that starts at `start`. Raises KeyError naming the address when there is none."""
    with self._lock:
      table = self._table.without(start)
      if table is None: raise KeyError(f"no GPU memory range starts at {start:#x}")
      self._install(table)

  def ranges(self) -> list[tuple[int, int]]:
    """[(start, size)] in address order."""
    return [(s, e - s) for s, e in self._table.items()]

  def _install(self, table) -> None:
    self._last = (0, 0)
    self._views = {}
    self._table = table   # one atomic swap
    # after the swap: a reader that reads the generation, then the table, and sees the new generation also sees the
    # new table (one that sees the old generation records it, and checks again next time)
    self.generation += 1

  def arrays(self) -> tuple[np.ndarray, np.ndarray]:
    """The current table's starts and ends as numpy arrays, made once per table (two threads making them at once
    make equal ones; the table itself is never changed, only replaced)."""
    table = self._table
    cell = table.cache
    if not cell:
      pairs = list(table.items())
      cell[:] = [(np.array([s for s, _ in pairs], np.uint64), np.array([e for _, e in pairs], np.uint64))]
    return cell[0]

  def range_of(self, address: int) -> tuple[int, int] | None:
    """(start, end) of the range holding `address`, or None."""
    return self._table.range_of(address)

  # ---- checks ----
  def check(self, addresses: np.ndarray, nbytes: int, what: str = "access") -> tuple[int, int] | None:
    """Raise GPUFault (kind 'page fault') unless every [a, a + nbytes) for a in `addresses` lies inside a mapping.

    `addresses` is an integer array (any shape) of byte addresses. Vectorised: min/max against the last range hit,
    then a searchsorted over all ranges. Returns (start, end) of the one range holding them all, else None."""
    if addresses.size == 0: return None
    lo, hi = int(addresses.min()), int(addresses.max()) + nbytes
    last_lo, last_hi = self._last
    if last_lo <= lo and hi <= last_hi: return self._last
    rng = self.range_of(lo)
    if rng is not None and hi <= rng[1]:
      self._last = rng
      return rng
    self._check_each(addresses.reshape(-1), nbytes, what)
    return None

  def view(self, start: int, dtype) -> np.ndarray:
    """A cached numpy view of the mapped range that starts at `start` (indexing it, unlike the whole-address-space
    views, never makes numpy suspect an overlap with the index arrays)."""
    key = (start, np.dtype(dtype).str)
    v = self._views.get(key)
    if v is None:
      rng = self.range_of(start)
      if rng is None or rng[0] != start: raise KeyError(f"no GPU memory range starts at {start:#x}")
      end = rng[1]
      v = host_view(start, end - start, dtype)
      self._views[key] = v
    return v

  def check_scalar(self, address: int, nbytes: int, what: str = "access") -> None:
    last_lo, last_hi = self._last
    if last_lo <= address and address + nbytes <= last_hi: return
    rng = self.range_of(address)
    if rng is None or address + nbytes > rng[1]:
      raise GPUFault(f"{what} of {nbytes} bytes outside every mapped range", address=address, kind="page fault")
    self._last = rng

  def _check_each(self, addresses: np.ndarray, nbytes: int, what: str) -> None:
    a = addresses.astype(np.uint64)
    np_starts, np_ends = self.arrays()
    if len(np_starts) == 0:
      raise GPUFault(f"{what} with no memory mapped", address=int(a[0]), kind="page fault")
    i = np.searchsorted(np_starts, a, side="right").astype(np.int64) - 1
    ok = i >= 0
    ic = np.where(ok, i, 0)
    ok &= (a + np.uint64(nbytes)) <= np_ends[ic]
    ok &= a >= np_starts[ic]
    if not ok.all():
      bad = int(a[np.argmin(ok)])
      raise GPUFault(f"{what} of {nbytes} bytes outside every mapped range", address=bad, kind="page fault")
