"""The ASM24xx bridge's memories the GPU behind it reaches as system memory (its windows), and the host's byte-exact
access to the 512 KiB SRAM through the bridge's DMA engine (asm24.py's 0xF2 request: whole 512-byte sectors from a
16 KiB slot boundary)."""
from __future__ import annotations

import dataclasses

from ...errors import DeviceError
from . import asm24

SYSMEM_SIZE = 256 << 10                            # SRAM below this: alloc_sysmem; above: copy staging buffers


@dataclasses.dataclass(frozen=True)
class Window:
  """A bridge memory the GPU reaches as system memory: `xdata` its controller address, `bus` the address the GPU
  uses for it, `size` bytes. 0xF000 (SRAM) is reached from the host through the DMA engine, the others by XDATA."""
  name: str
  xdata: int
  bus: int
  size: int


WINDOWS = {w.name: w for w in (Window("sram", 0xF000, 0x200000, 512 << 10), Window("a000", 0xA000, 0x820000, 4 << 10),
                               Window("b000", 0xB000, 0x800000, 512), Window("b800", 0xB800, 0x822000, 4 << 10))}



class SRAM:
  """The bridge's 512 KiB SRAM (GPU bus address WINDOWS['sram'].bus) from the host: byte-exact reads and writes at
  any offset through the DMA engine, which moves whole 512-byte sectors from a 16 KiB slot boundary (a write that
  does not cover whole sectors reads the sectors it touches first, so that the bytes around it are kept)."""

  def __init__(self, bridge: asm24.ASM24Bridge):
    self.bridge, self.window = bridge, WINDOWS["sram"]

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.window.size:
      raise DeviceError(f"{self.bridge.name}: SRAM access of {size} bytes at {offset:#x} is outside its {self.window.size:#x} bytes")

  def read(self, offset: int, size: int) -> bytes:
    self._range(offset, size)
    if size == 0: return b""
    slot = offset // asm24.SLOT
    start = slot * asm24.SLOT
    return self.bridge.sram_read(slot, offset + size - start)[offset - start:]

  def write(self, offset: int, data: bytes) -> None:
    data = bytes(data)
    self._range(offset, len(data))
    if not data: return
    slot = offset // asm24.SLOT
    start, end = slot * asm24.SLOT, offset + len(data)
    if offset != start or (end % asm24.SECTOR and end < self.window.size):
      # partial sectors at either end: keep the bytes around the write
      old = self.bridge.sram_read(slot, -(-(end - start) // asm24.SECTOR) * asm24.SECTOR)
      data = old[:offset - start] + data + old[end - start:]
    self.bridge.sram_write(slot, data)


@dataclasses.dataclass
class SRAMBuffer:
  """System memory for the GPU in the bridge's SRAM: `bus` is its GPU address; the host reaches it with read/write
  (over USB: there is no CPU mapping of it)."""
  sram: "SRAM"
  offset: int
  size: int
  bus: int

  def read(self, offset: int = 0, size: int | None = None) -> bytes:
    size = self.size - offset if size is None else size
    self._range(offset, size)
    return self.sram.read(self.offset + offset, size)

  def write(self, offset: int, data: bytes) -> None:
    self._range(offset, len(data))
    self.sram.write(self.offset + offset, data)

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"SRAM buffer at GPU address {self.bus:#x}: {size} bytes at {offset:#x} is outside its {self.size:#x}")

