"""VRAM of an AM device: one allocator over the usable VRAM (all of it below the discovery binary at the top), and
CPU access through the VRAM BAR.

Two kinds of allocation come from the same free list:
  alloc(size, what, align)       boot-lifetime memory of the driver (page tables, rings, PSP buffers, the TMR),
                                 zero-filled, lowest address first, never freed (gone when the driver instance goes)
  alloc_user(size, what, align)  memory of the runtime (user buffers, code, scratch), highest address first so that
                                 the driver's own tables stay low and free space stays in one piece; given back with
                                 free(buf). Not cleared: its contents are what the last user left, this process's or
                                 (on a reused GPU) a previous one's. Unlike KFD, which wipes VRAM on release and clears
                                 it on allocation, clearing here would protect nothing: a process that opens the GPU
                                 maps the whole VRAM BAR and can read any of it. (A BAR fill costs about as much as the
                                 allocation itself on the mock, far more over a USB bridge; an SDMA constant fill is
                                 the way, should the runtime want zeroed buffers.)
Freed ranges merge with their free neighbours. The free list is kept under the device lock (dev.lock). Sizes are rounded up to 4 KiB pages, alignments are powers of two of
at least a page. An exhausted VRAM is a DeviceError naming the device, the size asked for and what is left.

An allocation (VRAMBuf) knows its VRAM offset and its MC address (fb_base + offset), the address the GPU's engines
and firmware use for it, and the page tables map GPU VAs to (gmc.GMC.map with system=False). Nothing here assumes the
CPU maps VRAM: every CPU access goes through the VRAM BAR view's read/write (MappedMMIO on a mapped BAR, TLPMMIO over
a USB bridge where there is no CPU mapping), never a memoryview of the BAR's address. A CPU mapping of a buffer at a
fixed address is the PCI path's business (AMPCI.map_vram)."""
from __future__ import annotations

import bisect
import dataclasses

from ....errors import DeviceError

PAGE = 0x1000
CLEAR_CHUNK = 1 << 20      # zero-fill in pieces: no buffer of the whole size is built


@dataclasses.dataclass(frozen=True)
class VRAMBuf:
  offset: int
  size: int
  mc: int
  what: str


def _mib(n: int) -> str: return f"{n:#x} bytes ({n / (1 << 20):.1f} MiB)"


class VRAM:
  def __init__(self, dev, size: int, reserved_top: int, reserved_bottom: int = 0):
    """reserved_bottom: bytes at the start of VRAM that nothing is allocated in (an SR-IOV VF's message area)."""
    self.dev, self.size = dev, size
    self.fb_base = 0
    self.end = size - reserved_top       # the top holds the discovery binary (and firmware reservations)
    if not 0 <= reserved_bottom < self.end:
      raise DeviceError(f"{dev.label}: {reserved_bottom:#x} bytes reserved at the bottom of {self.end:#x} usable VRAM")
    # (offset, size), sorted by offset, never adjacent
    self._free: list[tuple[int, int]] = [(reserved_bottom, self.end - reserved_bottom)]
    self.allocs: list[VRAMBuf] = []      # the boot-lifetime ones, in allocation order
    self.user: dict[int, VRAMBuf] = {}   # offset -> a runtime allocation not yet freed
    bar = dev.pci.vram
    if bar.size < size:
      raise DeviceError(f"{dev.label}: the VRAM BAR shows {bar.size >> 20} MiB of {size >> 20} MiB VRAM: AM needs the "
                        f"whole VRAM visible (enable resizable BAR / Above 4G decoding in the firmware setup)")
    self.bar = bar

  # ---- allocation
  def alloc(self, size: int, what: str, align: int = PAGE, zero: bool = True) -> VRAMBuf:
    """Boot-lifetime VRAM for the driver at the lowest offset that fits, zero-filled (zero=False: as it is, e.g. what
    a previous boot left there)."""
    with self.dev.lock:
      buf = self._take(size, what, align, top=False)
      self.allocs.append(buf)
    if zero: self.fill(buf.offset, buf.size)
    return buf

  def reserve(self, offset: int, size: int, what: str) -> VRAMBuf:
    """Take [offset, offset + size) as it is, where a previous boot put something still in use (the PSP's TMR of a
    reused GPU); the range must be free."""
    size = (size + PAGE - 1) & ~(PAGE - 1)
    with self.dev.lock:
      i = self._free_index(offset, size)
      if i is not None:
        start, free = self._free[i]
        pieces = [(p, s) for p, s in ((start, offset - start), (offset + size, start + free - offset - size)) if s]
        self._free[i:i + 1] = pieces
        buf = VRAMBuf(offset, size, self.fb_base + offset, what)
        self.allocs.append(buf)
        return buf
    raise DeviceError(f"{self.dev.label}: cannot keep {what} at VRAM {offset:#x}+{size:#x}: not free (boot allocations "
                      f"reach {self.next:#x}, usable up to {self.end:#x})")

  def is_free(self, offset: int, size: int) -> bool:
    """Whether [offset, offset + size) (size > 0) lies in free VRAM: inside the usable VRAM, clear of every
    allocation (what reserve() takes)."""
    with self.dev.lock: return size > 0 and self._free_index(offset, size) is not None

  def _free_index(self, offset: int, size: int) -> int | None:
    """The index of the free range holding [offset, offset + size), or None."""
    for i, (start, free) in enumerate(self._free):
      if start <= offset and offset + size <= start + free: return i
    return None

  @property
  def next(self) -> int:
    """Where the boot-lifetime allocations end (the highest end of any of them; 0 before the first)."""
    return max((b.offset + b.size for b in self.allocs), default=0)

  def alloc_user(self, size: int, what: str, align: int = PAGE) -> VRAMBuf:
    """VRAM for the runtime (a buffer), not cleared, at the highest offset that fits; free(buf) gives it back."""
    with self.dev.lock:
      buf = self._take(size, what, align, top=True)
      self.user[buf.offset] = buf
    return buf

  def free(self, buf: VRAMBuf) -> None:
    """Give back a buffer alloc_user made (merged with its free neighbours). Anything else is a DeviceError."""
    with self.dev.lock:
      if self.user.get(buf.offset) != buf:
        raise DeviceError(f"{self.dev.label}: free of VRAM {buf.offset:#x}+{buf.size:#x} ({buf.what}), which is not a "
                          f"live runtime allocation")
      del self.user[buf.offset]
      self._give(buf.offset, buf.size)

  @property
  def free_bytes(self) -> int: return sum(size for _, size in self._free)

  @property
  def largest_free(self) -> int: return max((size for _, size in self._free), default=0)

  def _take(self, size: int, what: str, align: int, top: bool) -> VRAMBuf:
    if size <= 0: raise DeviceError(f"{self.dev.label}: VRAM allocation of {size} bytes for {what}")
    if align < PAGE or align & (align - 1):
      raise DeviceError(f"{self.dev.label}: VRAM alignment {align:#x} for {what} is not a power of two of at least a page")
    size = (size + PAGE - 1) & ~(PAGE - 1)
    order = range(len(self._free) - 1, -1, -1) if top else range(len(self._free))
    for i in order:
      start, free = self._free[i]
      off = ((start + free - size) & ~(align - 1)) if top else ((start + align - 1) & ~(align - 1))
      if off < start or off + size > start + free: continue
      pieces = [(p, s) for p, s in ((start, off - start), (off + size, start + free - off - size)) if s]
      self._free[i:i + 1] = pieces
      return VRAMBuf(off, size, self.fb_base + off, what)
    raise DeviceError(f"{self.dev.label}: VRAM exhausted: {what} needs {_mib(size)} aligned to {align:#x}; "
                      f"{_mib(self.free_bytes)} free of {_mib(self.end)} usable, the largest free block "
                      f"{_mib(self.largest_free)}")

  def _give(self, off: int, size: int) -> None:
    i = bisect.bisect(self._free, (off, 0))
    if i < len(self._free) and self._free[i][0] == off + size:        # merge with the next free range
      size += self._free.pop(i)[1]
    if i > 0 and sum(self._free[i - 1]) == off:                        # and with the previous one
      self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + size)
    else: self._free.insert(i, (off, size))

  # ---- addresses and CPU access (through the BAR view)
  def mc(self, offset: int) -> int: return self.fb_base + offset

  def write(self, offset: int, data: bytes) -> None: self.bar.write(offset, data)
  def read(self, offset: int, size: int) -> bytes: return self.bar.read(offset, size)

  def fill(self, offset: int, size: int, byte: int = 0) -> None:
    chunk = bytes([byte]) * min(size, CLEAR_CHUNK)
    for pos in range(0, size, CLEAR_CHUNK):
      n = min(CLEAR_CHUNK, size - pos)
      self.bar.write(offset + pos, chunk if n == len(chunk) else chunk[:n])

  def close(self) -> None: self.bar = None
