"""VRAM of an AM device: a bump allocator over the boot region (page tables, rings, PSP buffers, the TMR: memory that
lives as long as the driver instance) and CPU access through the VRAM BAR. An allocation knows its VRAM offset and
its MC address (fb_base + offset), the address the GPU's engines and firmware use for it.

Every CPU access goes through the VRAM BAR view's read/write (MappedMMIO on a mapped BAR, TLPMMIO over a USB bridge
where there is no CPU mapping), never a memoryview of the BAR's address."""
from __future__ import annotations

import dataclasses

from ....errors import DeviceError


@dataclasses.dataclass(frozen=True)
class VRAMBuf:
  offset: int
  size: int
  mc: int
  what: str


class VRAM:
  def __init__(self, dev, size: int, reserved_top: int):
    self.dev, self.size = dev, size
    self.fb_base = 0
    self.end = size - reserved_top       # the top holds the discovery binary (and firmware reservations)
    self.next = 0
    self.allocs: list[VRAMBuf] = []
    bar = dev.pci.vram
    if bar.size < size:
      raise DeviceError(f"{dev.label}: the VRAM BAR shows {bar.size >> 20} MiB of {size >> 20} MiB VRAM: AM needs the "
                        f"whole VRAM visible (enable resizable BAR / Above 4G decoding in the firmware setup)")
    self.bar = bar

  def alloc(self, size: int, what: str, align: int = 0x1000, zero: bool = True) -> VRAMBuf:
    """The next `size` bytes at `align`, zeroed (zero=False: as they are, e.g. what a previous boot left there)."""
    off = (self.next + align - 1) & ~(align - 1)
    size = (size + 0xFFF) & ~0xFFF
    if off + size > self.end:
      raise DeviceError(f"{self.dev.label}: VRAM exhausted allocating {size:#x} bytes for {what} (at {off:#x}, "
                        f"usable up to {self.end:#x})")
    self.next = off + size
    buf = VRAMBuf(off, size, self.fb_base + off, what)
    self.allocs.append(buf)
    if zero: self.bar.write(off, bytes(size))
    return buf

  def reserve(self, offset: int, size: int, what: str) -> VRAMBuf:
    """Take [offset, offset + size) as it is, where a previous boot put something still in use (the PSP's TMR of a
    reused GPU); nothing allocated so far may reach into it."""
    if offset < self.next or offset + size > self.end:
      raise DeviceError(f"{self.dev.label}: cannot keep {what} at VRAM {offset:#x}+{size:#x}: allocations reach "
                        f"{self.next:#x}, usable up to {self.end:#x}")
    self.next = offset + size
    buf = VRAMBuf(offset, size, self.fb_base + offset, what)
    self.allocs.append(buf)
    return buf

  def mc(self, offset: int) -> int: return self.fb_base + offset

  def write(self, offset: int, data: bytes) -> None: self.bar.write(offset, data)
  def read(self, offset: int, size: int) -> bytes: return self.bar.read(offset, size)
  def fill(self, offset: int, size: int, byte: int = 0) -> None: self.bar.write(offset, bytes([byte]) * size)

  def close(self) -> None: self.bar = None
