"""Host memory of a MockOS: anonymous mappings (real host memory; a mock GPU's engines use GPU VAs as host addresses,
and its MMU makes each VA reach what the page tables map there: see views), memory files (a device
model's VRAM: a memfd mapped shared, so that other mappings of it are views of the same bytes), views of such a file
at fixed addresses, and fake physical addresses.

A view (map_view) is a shared mapping of part of a memory file at a fixed address, held by one or more holders (the
driver's CPU mapping of a BAR window through MockOS.map_pci_resource, a mock GPU's MMU making a VA reach VRAM for its
engines): a page is mapped when its first holder asks and unmapped when its last one lets go, so that the two can come
and go in any order without pulling the memory from under the other. A view has no physical address (Linux's pagemap
shows none for a BAR mapping either).

A view may also be of host memory itself (fd None, the offset a host address): the same pages of a shared mapping at
another address (mremap(2) with old_size 0), how a mock GPU's MMU makes a VA whose page-table entries hold the
physical (bus) addresses of host pages elsewhere reach those pages for its engines, as DMA through the IOMMU does.

A GPU's MMU may lay its views over a PROT_NONE reservation of the process (over_reserved): a driver that keeps its
GPU's whole VA range reserved (tinygrad's _System.reserve_va) and never maps VRAM buffers there for the CPU still has
its GPU reach them at those VAs (in the mock, GPU VA == host VA). Such a page goes back to the reservation (PROT_NONE,
no memory) when the last holder lets go, and goes with the reservation when the process unmaps it.

phys_addrs() hands out physical page addresses that a device model translates back to host addresses for DMA.
They are deliberately not contiguous (every page is followed by a hole) so that a driver which assumes contiguity
across pages is caught; they start at 0x1_0000_0000, above any address a driver could mistake for a VA.
"""
from __future__ import annotations

import bisect
import ctypes
import os as _os
import threading

from ..drivers.system import libc
from ..errors import DeviceError, OSCallError

PAGE = libc.PAGE_SIZE
PHYS_BASE = 0x1_0000_0000


class HostMemory:
  """The mappings a MockOS made or was told about, and the physical-address table for DMA."""

  def __init__(self):
    self._lock = threading.RLock()
    self._starts: list[int] = []        # sorted starts of known ranges
    self._ranges: dict[int, tuple[int, str]] = {}   # start -> (size, what)
    self._owned: set[int] = set()       # ranges this object mmapped (and munmaps on close)
    self._page_phys: dict[int, int] = {}
    self._phys_page: dict[int, int] = {}
    self._next_phys = PHYS_BASE
    self._files: dict[int, int] = {}    # start of a memory file's own mapping -> its fd
    self._views: dict[int, list] = {}   # page address -> [fd, file offset, set of (kind, holder id)]
    # peer-to-peer DMA: bus address -> host address of a memory BAR (a GPU's VRAM aperture), or None; set by MockOS
    self.bus_to_host = None

  # ---- ranges
  def _add(self, start: int, size: int, what: str) -> None:
    with self._lock:
      i = bisect.bisect_right(self._starts, start)
      if i and self._starts[i - 1] + self._ranges[self._starts[i - 1]][0] > start or \
         i < len(self._starts) and self._starts[i] < start + size:
        raise DeviceError(f"mock memory: {what} at {start:#x}+{size:#x} overlaps a known mapping")
      self._starts.insert(i, start)
      self._ranges[start] = (size, what)

  def _remove(self, start: int) -> tuple[int, str]:
    with self._lock:
      if start not in self._ranges: raise DeviceError(f"mock memory: no mapping starts at {start:#x}")
      del self._starts[bisect.bisect_left(self._starts, start)]
      self._owned.discard(start)
      return self._ranges.pop(start)

  def _drop_phys(self, addr: int, size: int) -> None:
    if not self._page_phys: return
    start, end = addr & ~(PAGE - 1), addr + size
    pages = range(start, end, PAGE)
    if len(pages) > len(self._page_phys):     # a big range (a VRAM reservation): look only at the pages handed out
      pages = [p for p in self._page_phys if start <= p < end]
    for page in pages:
      phys = self._page_phys.pop(page, None)
      if phys is not None: del self._phys_page[phys]

  def find(self, addr: int) -> tuple[int, int, str] | None:
    """(start, size, what) of the known mapping holding addr."""
    with self._lock:
      i = bisect.bisect_right(self._starts, addr) - 1
      if i < 0: return None
      start = self._starts[i]
      size, what = self._ranges[start]
      return (start, size, what) if addr < start + size else None

  def register(self, start: int, size: int, what: str) -> None:
    """Record memory mapped by someone else (a device model's VRAM) so that phys_addrs() works on it."""
    self._add(start, size, what)

  def unregister(self, start: int) -> None:
    with self._lock:
      size, _ = self._remove(start)
      self._drop_phys(start, size)

  # ---- anonymous memory
  def alloc(self, size: int, addr: int | None = None, prot: int | None = None, shared: bool = False,
            reserve_only: bool = False, what: str = "anonymous memory") -> int:
    if size <= 0: raise OSCallError("mmap", what, 22, f"size {size} must be positive")
    size = (size + PAGE - 1) & ~(PAGE - 1)
    if reserve_only: prot = libc.PROT_NONE
    elif prot is None: prot = libc.PROT_READ | libc.PROT_WRITE
    flags = libc.MAP_ANONYMOUS | (libc.MAP_SHARED if shared else libc.MAP_PRIVATE)
    if reserve_only: flags |= libc.MAP_NORESERVE
    if addr is not None: flags |= libc.MAP_FIXED_NOREPLACE
    va = libc.mmap(addr, size, prot, flags, what=what)
    try: self._add(va, size, what + (" (reserved)" if reserve_only else ""))
    except DeviceError:
      libc.munmap(va, size)
      raise
    self._owned.add(va)
    return va

  # ---- memory files and views of them
  def alloc_file(self, size: int, what: str) -> tuple[int, int]:
    """A memory file (memfd) of size bytes mapped shared somewhere in this process: (address, fd). free_file() or
    close() unmaps it and closes the fd."""
    size = (size + PAGE - 1) & ~(PAGE - 1)
    fd = _os.memfd_create(what[:200], _os.MFD_CLOEXEC)
    try:
      _os.ftruncate(fd, size)
      va = libc.mmap(None, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, fd, 0, what=what)
    except BaseException:
      _os.close(fd)
      raise
    with self._lock:
      self._add(va, size, what)
      self._owned.add(va)
      self._files[va] = fd
    return va, fd

  def free_file(self, addr: int) -> None:
    with self._lock:
      fd = self._files.pop(addr)
      size, _ = self._ranges[addr]
      self._remove(addr)
      self._drop_phys(addr, size)
      libc.munmap(addr, size)
      pages = sorted(p for p, v in self._views.items() if v[0] == fd)     # the file's views go with it
      for over in (False, True):
        for start, n in _runs([p for p in pages if self._views[p][3] == over]): self._let_go(start, n, over)
      for page in pages: del self._views[page]
      _os.close(fd)

  def map_view(self, fd: int | None, offset: int, addr: int, size: int, holder: object, what: str, kind: str = "",
               over_reserved: bool = False) -> None:
    """Hold [addr, addr+size) as a shared view of memory file fd from offset. Pages already viewed the same way get
    one more holder, unless a holder of the same kind holds one (kind "cpu": two CPU mappings at one address, which
    mmap(MAP_FIXED_NOREPLACE) refuses too); a page viewed otherwise, or an address some other mapping of this MockOS
    uses, is a DeviceError naming it (nothing is mapped then). New pages are mapped with MAP_FIXED_NOREPLACE: memory
    this object does not know about is never replaced. With over_reserved, pages inside a PROT_NONE reservation are
    replaced by the view (MAP_FIXED) and given back to the reservation later (see the module's docstring)."""
    if (addr | offset | size) % PAGE or size <= 0:
      raise DeviceError(f"mock memory: view of {what} at {addr:#x}+{size:#x} (file offset {offset:#x}) is not page-aligned")
    with self._lock:
      if fd is None: self._check_alias_source(offset, size, what)
      hit = self._overlapping(addr, size)
      if hit and not (over_reserved and all(self._ranges[h][1].endswith("(reserved)") for h in hit)):
        raise DeviceError(f"mock memory: view of {what} at {addr:#x}+{size:#x} overlaps {self._ranges[hit[0]][1]}")
      reserved = lambda page: bool(hit) and self._overlapping(page, PAGE) != []
      fresh = []
      for i in range(0, size, PAGE):
        v = self._views.get(addr + i)
        if v is None: fresh.append(i)
        elif v[0] != fd or v[1] != offset + i:
          raise DeviceError(f"mock memory: view of {what} at {addr + i:#x} (file offset {offset + i:#x}) meets another "
                            f"view there (file offset {v[1]:#x})")
        elif (kind, id(holder)) in v[2] or kind and any(k == kind for k, _ in v[2]):
          raise DeviceError(f"mock memory: view of {what} at {addr + i:#x} is already held by a {kind or 'same'} holder")
      done = []
      try:
        for over in (False, True):       # pages nothing maps, then pages of a reservation (replaced: MAP_FIXED)
          for start, n in _runs([i for i in fresh if reserved(addr + i) == over]):
            if fd is None: self._alias(offset + start, addr + start, n, over, what)
            else:
              libc.mmap(addr + start, n, libc.PROT_READ | libc.PROT_WRITE,
                        libc.MAP_SHARED | (libc.MAP_FIXED if over else libc.MAP_FIXED_NOREPLACE), fd, offset + start, what=what)
            done.append((start, n, over))
      except BaseException:
        for start, n, over in done: self._let_go(addr + start, n, over)
        raise
      for i in fresh: self._views[addr + i] = [fd, offset + i, set(), reserved(addr + i)]
      for i in range(0, size, PAGE): self._views[addr + i][2].add((kind, id(holder)))

  def unmap_view(self, addr: int, size: int, holder: object, kind: str = "") -> None:
    """Let go of the holder's hold on [addr, addr+size); pages nobody holds any more are unmapped."""
    with self._lock:
      gone = []
      for i in range(0, size, PAGE):
        v = self._views.get(addr + i)
        if v is None or (kind, id(holder)) not in v[2]: continue
        v[2].discard((kind, id(holder)))
        if not v[2]:
          del self._views[addr + i]
          gone.append((i, v[3]))
      for over in (False, True):
        for start, n in _runs([i for i, o in gone if o == over]): self._let_go(addr + start, n, over)

  def _check_alias_source(self, host: int, size: int, what: str) -> None:
    """A view of host memory must be of memory this object mapped, whole pages of one mapping that is not a bare
    reservation."""
    found = self.find(host)
    if found is None or host + size > found[0] + found[1] or found[2].endswith("(reserved)"):
      raise DeviceError(f"mock memory: view of {what}: host memory {host:#x}+{size:#x} is not one mapping of this process")

  def _alias(self, host: int, addr: int, size: int, over: bool, what: str) -> None:
    """Map the pages of the shared mapping at host again at addr (over a reservation, or where nothing is mapped: a
    placeholder taken with MAP_FIXED_NOREPLACE first, so that mremap's MREMAP_FIXED replaces only that)."""
    if not over:
      libc.mmap(addr, size, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE |
                libc.MAP_FIXED_NOREPLACE, what=what)
    try: libc.mremap_duplicate(host, addr, size, what=what)
    except BaseException:
      self._let_go(addr, size, over)
      raise

  @staticmethod
  def _let_go(addr: int, size: int, reserved: bool) -> None:
    """Unmap view pages; those laid over a reservation become reserved address space again (PROT_NONE, no memory)."""
    if not reserved: return libc.munmap(addr, size)
    libc.mmap(addr, size, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE | libc.MAP_FIXED,
              what="reservation under a view")

  def view_of(self, addr: int) -> tuple[int, int, int] | None:
    """(fd, file offset, number of holders) of the view holding the page of addr, None where there is none (fd None:
    a view of host memory, the offset its host address)."""
    with self._lock:
      v = self._views.get(addr & ~(PAGE - 1))
      return None if v is None else (v[0], v[1] + (addr & (PAGE - 1)), len(v[2]))

  def replace(self, addr: int, size: int, what: str, prot: int | None = None) -> int:
    """Map fresh read/write memory over [addr, addr+size) (MAP_FIXED), e.g. over a PROT_NONE reservation; the range
    must lie inside one known mapping."""
    found = self.find(addr)
    if found is None or addr + size > found[0] + found[1]:
      raise DeviceError(f"mock memory: {what} at {addr:#x}+{size:#x} is not inside a reserved mapping")
    prot = libc.PROT_READ | libc.PROT_WRITE if prot is None else prot
    libc.mmap(addr, size, prot, libc.MAP_ANONYMOUS | libc.MAP_SHARED | libc.MAP_FIXED, what=what)
    if found[0] == addr and found[1] == size:
      with self._lock: self._ranges[addr] = (size, what)
    return addr

  def free(self, addr: int, size: int) -> None:
    """munmap(2) semantics: any page-aligned part of known mappings (a reservation can be freed piecewise)."""
    if addr % PAGE or size <= 0:
      raise OSCallError("munmap", f"{addr:#x}+{size:#x}", 22, "address not page aligned or size not positive")
    size = (size + PAGE - 1) & ~(PAGE - 1)
    with self._lock:
      if not self._overlapping(addr, size):
        raise OSCallError("munmap", f"{addr:#x}+{size:#x}", 22, "not a mapping made through this MockOS")
      libc.munmap(addr, size)
      self._carve(addr, size)
      self._drop_phys(addr, size)
      # views laid over a reservation go with it (their holders find nothing to let go)
      pages = range(addr, addr + size, PAGE)
      if len(pages) > len(self._views): pages = [p for p in self._views if addr <= p < addr + size]
      for page in [p for p in pages if p in self._views and self._views[p][3]]: del self._views[page]

  def overlaps(self, addr: int, size: int) -> bool:
    """Whether any known mapping meets [addr, addr+size)."""
    with self._lock: return bool(self._overlapping(addr, size))

  def _overlapping(self, addr: int, size: int) -> list[int]:
    """The starts of the known ranges that meet [addr, addr+size), in address order: a binary search, then a walk
    down over those ranges only (known ranges never overlap, so their ends rise with their starts)."""
    out = []
    i = bisect.bisect_left(self._starts, addr + size) - 1
    while i >= 0:
      start = self._starts[i]
      if start + self._ranges[start][0] <= addr: break
      out.append(start)
      i -= 1
    out.reverse()
    return out

  def _carve(self, addr: int, size: int) -> None:
    """Forget [addr, addr+size): records that overlap it keep only their parts outside."""
    end = addr + size
    for start in self._overlapping(addr, size):
      rsize, what = self._ranges[start]
      owned = start in self._owned
      self._remove(start)
      for lo, hi in ((start, min(addr, start + rsize)), (max(end, start), start + rsize)):
        if hi > lo:
          self._add(lo, hi - lo, what)
          if owned: self._owned.add(lo)

  def close(self) -> None:
    with self._lock:
      for start, n in _runs(sorted(self._views)): libc.munmap(start, n)
      self._views.clear()
      for start in list(self._files): self.free_file(start)
      for start in list(self._owned):
        size = self._ranges[start][0]
        self._remove(start)
        self._drop_phys(start, size)
        libc.munmap(start, size)

  # ---- physical addresses
  def phys_addrs(self, addr: int, size: int) -> list[int]:
    """Fake physical address of each page of [addr, addr+size), stable for the life of the mapping."""
    start, end = addr & ~(PAGE - 1), (addr + size + PAGE - 1) & ~(PAGE - 1)
    out = []
    with self._lock:
      for page in range(start, end, PAGE):
        found = self.find(page)
        if found is None or "(reserved)" in found[2]:
          raise DeviceError(f"mock /proc/self/pagemap: page {page:#x} has no physical address (not mapped memory)")
        phys = self._page_phys.get(page)
        if phys is None:
          phys = self._next_phys
          self._next_phys += 2 * PAGE     # a hole after every page: physical memory is not contiguous
          self._page_phys[page], self._phys_page[phys] = phys, page
        out.append(phys)
    return out

  def phys_to_host(self, phys: int, size: int = 1) -> int:
    """Host address of a physical address handed out by phys_addrs, or of a bus address inside another function's
    memory BAR (peer-to-peer DMA into a GPU's VRAM aperture: MockOS.bar_to_host); the access must stay inside one
    page."""
    page = self._phys_page.get(phys & ~(PAGE - 1))
    if page is None and self.bus_to_host is not None and (phys & (PAGE - 1)) + size <= PAGE:
      host = self.bus_to_host(phys, size)
      if host is not None: return host
    if page is None or (phys & (PAGE - 1)) + size > PAGE:
      from ..errors import GPUFault
      raise GPUFault(f"DMA of {size} bytes to a physical address no pagemap lookup handed out", address=phys,
                     kind="DMA fault")
    return page + (phys & (PAGE - 1))

  def dma_read(self, phys: int, size: int) -> bytes:
    out = bytearray()
    while size > 0:
      n = min(size, PAGE - (phys & (PAGE - 1)))
      out += ctypes.string_at(self.phys_to_host(phys, n), n)
      phys, size = phys + n, size - n
    return bytes(out)

  def dma_write(self, phys: int, data: bytes) -> None:
    data, pos = bytes(data), 0
    while pos < len(data):
      n = min(len(data) - pos, PAGE - (phys & (PAGE - 1)))
      ctypes.memmove(self.phys_to_host(phys, n), data[pos:pos + n], n)
      phys, pos = phys + n, pos + n


def _runs(pages) -> list[tuple[int, int]]:
  """Sorted page offsets (or addresses) as (start, bytes) runs of consecutive pages."""
  out: list[list[int]] = []
  for p in pages:
    if out and out[-1][0] + out[-1][1] == p: out[-1][1] += PAGE
    else: out.append([p, PAGE])
  return [tuple(r) for r in out]
