"""The GPU virtual addresses AM hands out, one range for the whole process.

AM keeps GPU VA == CPU VA: each allocation is mapped at a fixed address in this process (MAP_FIXED_NOREPLACE), so two
AM devices of one process must never pick the same address. Every AMSession takes its addresses from the one VASpace
below (first fit over a sorted free list, neighbours merged on free, under a lock: devices and threads share it).
"""
from __future__ import annotations

import bisect
import threading

from ....errors import DeviceError
from .gmc import VM_BASE, VM_SIZE

PAGE = 0x1000


class VASpace:
  def __init__(self, start: int, end: int):
    self.start, self.end = start, end
    self._free: list[tuple[int, int]] = [(start, end - start)]     # (address, size), sorted by address
    self._lock = threading.Lock()

  def alloc(self, size: int, label: str) -> int:
    """size bytes (page-rounded) followed by a guard page that no allocation gets."""
    need = ((size + PAGE - 1) & ~(PAGE - 1)) + PAGE
    with self._lock:
      for i, (addr, free) in enumerate(self._free):
        if free >= need:
          if free == need: del self._free[i]
          else: self._free[i] = (addr + need, free - need)
          return addr
    raise DeviceError(f"{label}: GPU VA range {self.start:#x}..{self.end:#x} exhausted ({size:#x} bytes asked)")

  def free(self, addr: int, size: int) -> None:
    size = ((size + PAGE - 1) & ~(PAGE - 1)) + PAGE
    with self._lock:
      i = bisect.bisect(self._free, (addr, 0))
      if i < len(self._free) and self._free[i][0] == addr + size:       # merge with the next free range
        size += self._free.pop(i)[1]
      if i > 0 and sum(self._free[i - 1]) == addr:                       # and with the previous one
        addr, size = self._free[i - 1][0], self._free[i - 1][1] + size
        self._free[i - 1] = (addr, size)
      else: self._free.insert(i, (addr, size))


# the low 4 GiB of the VM range stay free (32-bit addresses are never handed out as buffers)
PROCESS_VA = VASpace(VM_BASE + (1 << 32), VM_BASE + VM_SIZE)
