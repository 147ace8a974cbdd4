"""Register windows and doorbell pages tinygrad maps: hcq's mock models them as MMIOView objects whose accesses call
the device model (mockgpu/mmio.py), not as memory. The adapter gives each such window an address range (a PROT_NONE
reservation of the MockOS, so that nothing else lands there and a stray direct access faults loudly) and tinygrad's
MMIOInterface -- the class through which all of tinygrad's drivers touch mapped device memory
(tinygrad/runtime/support/hcq.py) -- is replaced by RoutedMMIOInterface, which sends accesses inside such a range to
the window and behaves as tinygrad's own class everywhere else."""
from __future__ import annotations

import bisect
import struct
import threading

_WIDTH = {"B": 1, "H": 2, "I": 4, "Q": 8}


class Windows:
  """address range -> MMIOView of the windows mapped so far."""

  def __init__(self):
    self._lock = threading.Lock()
    self._starts: list[int] = []
    self._win: dict[int, tuple[int, object]] = {}    # start -> (size, view)

  def add(self, start: int, size: int, view) -> None:
    with self._lock:
      bisect.insort(self._starts, start)
      self._win[start] = (size, view)

  def remove(self, start: int) -> object | None:
    with self._lock:
      if start not in self._win: return None
      self._starts.remove(start)
      return self._win.pop(start)[1]

  def find(self, addr: int):
    """(start, size, view) of the window holding addr, or None."""
    with self._lock:
      i = bisect.bisect_right(self._starts, addr) - 1
      if i < 0: return None
      start = self._starts[i]
      size, view = self._win[start]
      return (start, size, view) if addr < start + size else None


WINDOWS = Windows()


def routed_mmio_class(base):
  """A subclass of tinygrad's MMIOInterface (`base`) whose instances over a mock window call the window."""

  class RoutedMMIOInterface(base):
    def __init__(self, addr: int, nbytes: int, fmt="B"):
      found = WINDOWS.find(addr)
      if found is None:
        self.window = None
        super().__init__(addr, nbytes, fmt)
        return
      start, size, view = found
      if addr + nbytes > start + size:
        raise RuntimeError(f"{view.name}: a view of {nbytes:#x} bytes at {addr:#x} runs past the window's end "
                           f"({start:#x}+{size:#x})")
      self.window, self.offset = view, addr - start
      self.addr, self.nbytes, self.fmt, self.width = addr, nbytes, fmt, _WIDTH[fmt]

    def __len__(self): return self.nbytes // (_WIDTH[self.fmt] if self.window is not None else struct.calcsize(self.fmt))

    def _read(self, i: int) -> int:
      off, w = self.offset + i * self.width, self.width
      if w == 4: return self.window.read32(off)
      if w == 8: return self.window.read64(off)
      word = self.window.read32(off & ~3)     # a narrow load: the bytes of the dword that holds it
      return (word >> (8 * (off & 3))) & ((1 << (8 * w)) - 1)

    def _write(self, i: int, v: int) -> None:
      off, w = self.offset + i * self.width, self.width
      if w == 4: return self.window.write32(off, v)
      if w == 8: return self.window.write64(off, v)
      raise RuntimeError(f"{self.window.name}: {8 * w}-bit store at offset {off:#x}: register windows take 32- and "
                         f"64-bit stores only")

    def __getitem__(self, k):
      if self.window is None: return super().__getitem__(k)
      if isinstance(k, slice):
        vals = [self._read(i) for i in range(*k.indices(len(self)))]
        return bytes(vals) if self.fmt == "B" else vals
      if k < 0: k += len(self)
      if not 0 <= k < len(self): raise IndexError(f"{self.window.name}: index {k} of a {len(self)}-element view")
      return self._read(k)

    def __setitem__(self, k, v):
      if self.window is None: return super().__setitem__(k, v)
      if isinstance(k, slice):
        idx = range(*k.indices(len(self)))
        vals = list(v) if not isinstance(v, (bytes, bytearray, memoryview)) else list(memoryview(v).cast(self.fmt))
        if len(vals) != len(idx): raise ValueError(f"{self.window.name}: {len(vals)} values for {len(idx)} elements")
        for i, x in zip(idx, vals): self._write(i, x)
        return
      if k < 0: k += len(self)
      if not 0 <= k < len(self): raise IndexError(f"{self.window.name}: index {k} of a {len(self)}-element view")
      self._write(k, int(v))

    def view(self, offset: int = 0, size: int | None = None, fmt=None):
      return RoutedMMIOInterface(self.addr + offset, (self.nbytes - offset) if size is None else size, fmt=fmt or self.fmt)

  return RoutedMMIOInterface
