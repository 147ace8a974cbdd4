"""DMA memory for the NIC and the page tables (PBLs) that describe it.

Memory comes from the OS interface (anonymous pages, their physical addresses from phys_addrs); the driver never assumes
that two pages are physically contiguous. Page-table bits: roce_hsi.h (PTU_PTE_VALID 0x1,
PTU_PTE_LAST 0x2, PTU_PTE_NEXT_TO_LAST 0x4, PTU_PDE_VALID 0x1); levels: 0 = the base is the page itself, 1 = a table of
up to 512 PTEs, 2 = a table of PDEs pointing at PTE tables.
"""
from __future__ import annotations

import struct

from ...errors import DeviceError

PAGE = 4096
PTE_VALID, PTE_LAST, PTE_NEXT_TO_LAST = 0x1, 0x2, 0x4
PDE_VALID = 0x1
PTES_PER_PAGE = PAGE // 8


class DMABuffer:
  """Page-aligned memory the device reaches by physical address: .va, .size, .view (a memoryview), .paddrs (one per
  4 KiB page)."""

  def __init__(self, os, size: int, what: str = "DMA buffer"):
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
      raise DeviceError(f"{what}: size {size!r} is not a positive number of bytes")
    self.os, self.what = os, what
    self.size = max(PAGE, (size + PAGE - 1) // PAGE * PAGE)
    self.va = os.alloc_anon(self.size)
    self.view = os.memview(self.va, self.size)
    self.paddrs = list(os.phys_addrs(self.va, self.size))
    if len(self.paddrs) != self.size // PAGE or any(p % PAGE for p in self.paddrs):
      raise DeviceError(f"{what}: phys_addrs returned {len(self.paddrs)} addresses for {self.size // PAGE} pages")

  def zero(self) -> None: self.view[:] = bytes(self.size)

  def _span(self, op: str, offset: int, size: int) -> slice:
    """The slice [offset, offset+size) of the buffer; a DeviceError naming the buffer when it is not inside it
    (a slice of the view would silently shorten it, a negative offset count from the end)."""
    if not self.va: raise DeviceError(f"{self.what}: {op} after the buffer was freed")
    for name, v in (("offset", offset), ("size", size)):
      if isinstance(v, bool) or not isinstance(v, int):
        raise DeviceError(f"{self.what}: {op} {name} {v!r} is not an integer")
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"{self.what}: {op} of {size} bytes at offset {offset} is outside the buffer "
                        f"[0, {self.size}) at {self.va:#x}")
    return slice(offset, offset + size)

  def write(self, offset: int, data: bytes) -> None: self.view[self._span("write", offset, len(data))] = data

  def read(self, offset: int, size: int) -> bytes: return bytes(self.view[self._span("read", offset, size)])

  def paddr(self, offset: int) -> int:
    self._span("paddr", offset, 1)
    return self.paddrs[offset // PAGE] + offset % PAGE

  def free(self) -> None:
    if self.va:
      self.view.release()
      self.os.free_anon(self.va, self.size)
      self.va = 0


class PageTable:
  """Describes a list of pages to the NIC: .level and .base for the command that takes it. queue=True marks the last
  PTE LAST and the one before NEXT_TO_LAST, as the kernel does for queue memory (qplib_res.c
  bnxt_qplib_alloc_init_hwq)."""

  def __init__(self, os, pages: list[int], queue: bool = False, what: str = "page table"):
    self.tables: list[DMABuffer] = []
    if not pages: raise DeviceError(f"{what}: no pages to describe")
    if len(pages) == 1:
      self.level, self.base = 0, pages[0]
      return
    ptes = [p | PTE_VALID for p in pages]
    if queue:
      ptes[-1] |= PTE_LAST
      if len(ptes) > 1: ptes[-2] |= PTE_NEXT_TO_LAST
    leaf_pages = [ptes[i:i + PTES_PER_PAGE] for i in range(0, len(ptes), PTES_PER_PAGE)]
    leaves = []
    for chunk in leaf_pages:
      t = DMABuffer(os, PAGE, f"{what} PTE table")
      t.write(0, struct.pack(f"<{len(chunk)}Q", *chunk))
      leaves.append(t)
    self.tables += leaves
    if len(leaves) == 1:
      self.level, self.base = 1, leaves[0].paddrs[0]
      return
    if len(leaves) > PTES_PER_PAGE: raise DeviceError(f"{what}: {len(pages)} pages need more than 2 levels")
    top = DMABuffer(os, PAGE, f"{what} PDE table")
    top.write(0, struct.pack(f"<{len(leaves)}Q", *[t.paddrs[0] | PDE_VALID for t in leaves]))
    self.tables.append(top)
    self.level, self.base = 2, top.paddrs[0]

  def free(self) -> None:
    for t in self.tables: t.free()
    self.tables = []
