"""A PCIe endpoint to put behind the mock bridge until the AM driver's mock Navi 31 plugs in there: a mockgpu.pci
PCIFunction with the BAR layout of a Navi 31 (BAR0 VRAM 64-bit prefetchable and resizable, BAR2 doorbells 64-bit
prefetchable, BAR5 registers 32-bit) and, in BAR5, a small copy engine and a timer that stand in for the GPU's
engines in the bridge tests. It is not a model of any GPU.

VRAM is sparse (64 KiB pages made on first write): the Resizable BAR capability (PCIe 4.0 §7.8.6) offers 256 MiB
to 32 GiB, and a test may touch any of it.

BAR5 registers (32-bit):
  0x00/0x04 COPY_SRC lo/hi  0x08/0x0C COPY_DST lo/hi  0x10 COPY_LEN  0x14/0x18 FENCE_ADDR lo/hi  0x1C FENCE_VALUE
  0x20 COPY_GO: copy COPY_LEN bytes from bus address SRC to DST (the bridge's windows or this VRAM BAR), then
       write FENCE_VALUE (u32) at FENCE_ADDR
  0x40/0x44 TIMER_ADDR lo/hi  0x48 TIMER_VALUE  0x4C TIMER_DELAY_US  0x50 TIMER_GO: TIMER_DELAY_US after the go,
       write TIMER_VALUE at TIMER_ADDR (a signal the host waits for)
"""
from __future__ import annotations

import struct
import time

from ...autogen import pci as regs
from ..mmio import DoorbellMMIO, RegisterMMIO
from ..pci import PCIFunction
from ...drivers.system.interface import MMIOView

PAGE = 64 << 10
VRAM_MIN, VRAM_MAX = 256 << 20, 32 << 30
REBAR_OFFSET = 0x100
COPY_SRC, COPY_DST, COPY_LEN, FENCE_ADDR, FENCE_VALUE, COPY_GO = 0x00, 0x08, 0x10, 0x14, 0x1C, 0x20
TIMER_ADDR, TIMER_VALUE, TIMER_DELAY_US, TIMER_GO = 0x40, 0x48, 0x4C, 0x50


def copy_engine(regs):
  """The endpoint's copy engine driven through its register BAR view `regs` (BAR5 as the host maps it), as the
  `gpu_copy(src, dst, size, fence, value)` of SRAMStaging: nine posted register writes."""
  def gpu_copy(src: int, dst: int, size: int, fence: int, value: int) -> None:
    for off, v in ((COPY_SRC, src), (COPY_DST, dst), (FENCE_ADDR, fence)):
      regs.write32(off, v & 0xFFFFFFFF)
      regs.write32(off + 4, v >> 32)
    regs.write32(COPY_LEN, size)
    regs.write32(FENCE_VALUE, value)
    regs.write32(COPY_GO, 1)
  return gpu_copy


class SparseMemory(MMIOView):
  """A large memory BAR whose pages exist once written (reads of untouched memory give zeros)."""

  def __init__(self, name: str, size: int):
    self.name, self.size = name, size
    self.pages: dict[int, bytearray] = {}

  def read_block(self, off: int, size: int) -> bytes:
    out = bytearray()
    while size > 0:
      page, po = divmod(off, PAGE)
      n = min(size, PAGE - po)
      mem = self.pages.get(page)
      out += mem[po:po + n] if mem is not None else bytes(n)
      off, size = off + n, size - n
    return bytes(out)

  def write_block(self, off: int, data: bytes) -> None:
    pos = 0
    while pos < len(data):
      page, po = divmod(off + pos, PAGE)
      n = min(len(data) - pos, PAGE - po)
      self.pages.setdefault(page, bytearray(PAGE))[po:po + n] = data[pos:pos + n]
      pos += n

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    return struct.unpack("<I", self.read_block(offset, 4))[0]

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    self.write_block(offset, struct.pack("<I", value & 0xFFFFFFFF))


class MockUSBEndpoint(PCIFunction):
  """The endpoint at bus 4: ids of a 7900 XTX (1002:744c), class 0x030000."""

  def __init__(self, vram_size: int = VRAM_MIN, monotonic=time.monotonic):
    super().__init__("0000:04:00.0", 0x1002, 0x744C, 0x030000)
    self.monotonic = monotonic
    self.vram = SparseMemory("mock endpoint VRAM", VRAM_MAX)
    self.doorbells = DoorbellMMIO("mock endpoint doorbells", 2 << 20, self._ring)
    self.regs = RegisterMMIO("mock endpoint registers", 1 << 20, write_hook=self._reg_write)
    self.add_bar(0, self.vram, is_64=True, prefetchable=True)
    self.bars[0].size = vram_size
    self.add_bar(2, self.doorbells, is_64=True, prefetchable=True)
    self.add_bar(5, self.regs, is_64=False)
    self._add_rebar(vram_size)
    self.rings: list[tuple[int, int]] = []
    self.timer: tuple | None = None
    self.bridge = None

  def attach_bridge(self, bridge) -> None: self.bridge = bridge

  # ---- Resizable BAR (extended capability at 0x100: header, then capability and control of BAR0)
  def _add_rebar(self, size: int) -> None:
    sizes = sum(1 << (4 + n) for n in range(20) if VRAM_MIN <= 1 << (20 + n) <= VRAM_MAX)
    struct.pack_into("<III", self.config, REBAR_OFFSET, regs.PCI_EXT_CAP_ID_REBAR | 1 << 16, sizes,
                     0 | 1 << regs.PCI_REBAR_CTRL_NBAR_SHIFT | (size.bit_length() - 21) << regs.PCI_REBAR_CTRL_BAR_SHIFT)

  def on_config_write(self, offset: int, data: bytes) -> None:
    ctrl = REBAR_OFFSET + regs.PCI_REBAR_CTRL
    if offset <= ctrl + 1 < offset + len(data):
      enc = struct.unpack_from("<I", self.config, ctrl)[0] >> regs.PCI_REBAR_CTRL_BAR_SHIFT & 0x3F
      self.bars[0].size = 1 << (20 + enc)
      self._write_bar_register(0, 0)
      struct.pack_into("<I", self.config, regs.PCI_BASE_ADDRESS_0 + 4, 0)

  # ---- engines
  def _ring(self, offset: int, value: int) -> None: self.rings.append((offset, value))

  def _u64(self, off: int) -> int: return self.regs.regs.get(off, 0) | self.regs.regs.get(off + 4, 0) << 32

  def _reg_write(self, offset: int, value: int) -> None:
    if offset == COPY_GO and value:
      n = self.regs.regs.get(COPY_LEN, 0)
      self._bus_write(self._u64(COPY_DST), self._bus_read(self._u64(COPY_SRC), n))
      self._bus_write(self._u64(FENCE_ADDR), struct.pack("<I", self.regs.regs.get(FENCE_VALUE, 0)))
    elif offset == TIMER_GO and value:
      deadline = self.monotonic() + self.regs.regs.get(TIMER_DELAY_US, 0) / 1e6
      self.timer = (deadline, self._u64(TIMER_ADDR), self.regs.regs.get(TIMER_VALUE, 0))

  def tick(self) -> None:
    if self.timer is not None and self.monotonic() >= self.timer[0]:
      _, addr, value = self.timer
      self.timer = None
      self._bus_write(addr, struct.pack("<I", value))

  def _vram_offset(self, addr: int, size: int) -> int | None:
    reg = regs.PCI_BASE_ADDRESS_0
    base = (struct.unpack_from("<I", self.config, reg)[0] & 0xFFFFFFF0) | struct.unpack_from("<I", self.config, reg + 4)[0] << 32
    return addr - base if base and base <= addr and addr + size <= base + self.bars[0].size else None

  def _bus_read(self, addr: int, size: int) -> bytes:
    off = self._vram_offset(addr, size)
    return self.vram.read_block(off, size) if off is not None else self.bridge.dma_read(addr, size)

  def _bus_write(self, addr: int, data: bytes) -> None:
    off = self._vram_offset(addr, len(data))
    if off is not None: self.vram.write_block(off, data)
    else: self.bridge.dma_write(addr, data)
