"""Checked access of the command processors (PM4, SDMA, AQL) to GPU virtual memory.

GPU VA == host VA in the mock, so a packet that writes a fence at address A stores to host address A, but only after
the address was checked against the ranges mapped to this GPU (the emulator's GPUMemory): an access outside every
mapping is a GPUFault carrying the address, never a segfault of the host.
"""
from __future__ import annotations

import ctypes
from array import array

from ...drivers.system import libc
from ...errors import GPUFault
from ..peer import PeerWindows

_u32, _u64 = ctypes.c_uint32, ctypes.c_uint64


_MAX_CELLS = 256      # per width: fences, read pointers, mailboxes a command processor writes over and over


class DeviceMemory:
  """Checked loads and stores. 32/64-bit stores and loads keep the ctypes cell of each address they checked, for as
  long as the GPU's mappings are the same (GPUMemory.generation, bumped on every map and unmap), so that the fence
  and read-pointer writes of every launch cost no range lookup. Not locked itself: its users (the queues' engines,
  and map/unmap) run under the GPU's lock, so a mapping cannot change between a cell's check and its use."""

  def __init__(self, ranges):
    self.ranges = ranges      # mockgpu.amd.emu.GPUMemory: add_range/remove_range/check_scalar/range_of, generation
    # peer MMIO mapped into this GPU's address space (another PCI function's BAR page, peer.PeerWindows): a store
    # there is a posted write across the fabric to that function's model, a load a read of its register
    self.peers = PeerWindows()
    # (mapping generation the cells were checked in, addr -> ctypes cell), per width: a caller may use a cell it finds
    # for the current generation as write64/write32 would (the PM4 queue's read pointer and fence stores do)
    self.cells32 = self.cells64 = (-1, {})

  def version(self) -> int:
    """A number that changes whenever the GPU's mappings change."""
    return self.ranges.generation

  def mapped(self, addr: int, size: int) -> bool:
    """Whether [addr, addr + size) lies inside one mapped range (no exception)."""
    rng = self.ranges.range_of(addr)
    return rng is not None and addr + size <= rng[1]

  def u32_view(self, addr: int, count: int, what: str) -> memoryview:
    """A u32 memoryview of [addr, addr + 4 * count), checked now: valid while version() is the same."""
    self.check(addr, 4 * count, what)
    return libc.view(addr, 4 * count).cast("I")

  def _cell(self, addr: int, width: int, what: str):
    generation = self.ranges.generation     # read before the check: a change meanwhile drops the cell next time
    cells = self.cells64 if width == 8 else self.cells32
    if cells[0] != generation:
      cells = (generation, {})
      if width == 8: self.cells64 = cells
      else: self.cells32 = cells
    cell = cells[1].get(addr)
    if cell is None:
      self.check(addr, width, what)
      if len(cells[1]) >= _MAX_CELLS: cells[1].clear()
      cell = cells[1][addr] = (_u64 if width == 8 else _u32).from_address(addr)
    return cell

  def check(self, addr: int, size: int, what: str) -> None:
    if addr < 0 or addr + size > 1 << 64: raise GPUFault(f"{what}: address out of range", address=addr, kind="page fault")
    if self.peers.windows: self.peers.refuse_bulk(addr, size, what)
    if size: self.ranges.check_scalar(addr, size, what)

  def read32(self, addr: int, what: str = "read") -> int:
    cells = self.cells32
    cell = cells[1].get(addr) if cells[0] == self.ranges.generation else None
    if cell is None and self.peers.windows:
      window = self.peers.find(addr, 4)
      if window is not None: return window.read(addr, 4, what)
    return (cell if cell is not None else self._cell(addr, 4, what)).value

  def read64(self, addr: int, what: str = "read") -> int:
    cells = self.cells64
    cell = cells[1].get(addr) if cells[0] == self.ranges.generation else None
    if cell is None and self.peers.windows:
      window = self.peers.find(addr, 8)
      if window is not None: return window.read(addr, 8, what)
    return (cell if cell is not None else self._cell(addr, 8, what)).value

  def write32(self, addr: int, value: int, what: str = "write") -> None:
    cells = self.cells32
    cell = cells[1].get(addr) if cells[0] == self.ranges.generation else None
    if cell is None and self.peers.windows:
      window = self.peers.find(addr, 4)
      if window is not None: return window.write(addr, 4, value, what)
    (cell if cell is not None else self._cell(addr, 4, what)).value = value & 0xFFFFFFFF

  def write64(self, addr: int, value: int, what: str = "write") -> None:
    cells = self.cells64
    cell = cells[1].get(addr) if cells[0] == self.ranges.generation else None
    if cell is None and self.peers.windows:
      window = self.peers.find(addr, 8)
      if window is not None: return window.write(addr, 8, value, what)
    (cell if cell is not None else self._cell(addr, 8, what)).value = value & 0xFFFFFFFFFFFFFFFF

  def read_dwords(self, addr: int, count: int, what: str = "read") -> list[int]:
    self.check(addr, 4 * count, what)
    if not count: return []
    words = array("I")             # one copy out of host memory, no ctypes array type per size
    words.frombytes(ctypes.string_at(addr, 4 * count))
    return words.tolist()

  def read_bytes(self, addr: int, size: int, what: str = "read") -> bytes:
    self.check(addr, size, what)
    return ctypes.string_at(addr, size) if size else b""

  def write_bytes(self, addr: int, data: bytes, what: str = "write") -> None:
    self.check(addr, len(data), what)
    if data: ctypes.memmove(addr, data, len(data))

  def copy(self, dst: int, src: int, size: int, what: str = "copy") -> None:
    self.check(src, size, what + " source")
    self.check(dst, size, what + " destination")
    if size: ctypes.memmove(dst, src, size)

  def fill(self, dst: int, pattern: bytes, size: int, what: str = "fill") -> None:
    self.check(dst, size, what)
    if size: ctypes.memmove(dst, (pattern * (size // len(pattern) + 1))[:size], size)
