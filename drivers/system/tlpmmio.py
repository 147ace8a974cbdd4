"""A BAR of a PCI function behind an ASM24xx bridge as an MMIOView built on TLPs (asm24.py's vendor requests): the
register view usbpci.py's map_bar returns.

Access costs, in USB transfers (the figure that matters on hardware, ~100 us each): a 32-bit MMIO write 1 (posted
MWr, no completion), a read 2 (request + completion), a 64-bit write 2 (one 2-DW MWr: request + bulk data, so the
device sees a single write), a 64-bit read 3 (request, bulk data, completion), a bulk copy of N bytes through a BAR
2 per 4 MiB written (streaming), 3 per 4 MiB read, plus partial edge dwords.
"""
from __future__ import annotations

import struct

from ...errors import DeviceError
from . import asm24, pcie
from .interface import MMIOView

STREAM_MIN = 16                                    # bytes from which a BAR write streams instead of single TLPs
STREAM_READ_MIN = 8                                # and a read: 3 transfers (request, data, completion), 2 per dword


class TLPMMIO(MMIOView):
  """An MMIO view of a BAR built on TLPs: 32-bit accesses are one TLP each, bulk ones stream, sub-dword ones use
  byte enables. `read(offset, size)` / `write(offset, data)` take any offset and size, byte-exact."""

  def __init__(self, bridge: asm24.ASM24Bridge, base: int, size: int, name: str):
    self.bridge, self.base, self.size, self.name = bridge, base, size, name

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"{self.name}: access of {size} bytes at {offset:#x} is outside the {self.size:#x}-byte BAR")

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    return self.bridge.tlp(pcie.MRD64, self.base + offset)

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    self.bridge.tlp(pcie.MWR64, self.base + offset, value)

  def read64(self, offset: int) -> int:
    """One 2-DW MRd (a signal's u64 in one read: request + completion, not two 32-bit reads)."""
    self._check(offset, 8)
    return int.from_bytes(self.bridge.stream_read(self.base + offset, 8), "little")

  def write64(self, offset: int, value: int) -> None:
    """One 2-DW MWr (a doorbell must see one 64-bit write, not two halves)."""
    self._check(offset, 8)
    self.bridge.stream_write(self.base + offset, struct.pack("<Q", value & (1 << 64) - 1))

  def _sub_read(self, offset: int, n: int) -> bytes:
    be = pcie.byte_enables(offset, n)
    value = self.bridge.tlp(pcie.MRD64, self.base + (offset & ~3), byte_enables=be)
    return value.to_bytes(4, "little")[offset & 3:(offset & 3) + n]

  def _sub_write(self, offset: int, data: bytes) -> None:
    be = pcie.byte_enables(offset, len(data))
    value = int.from_bytes(data, "little") << 8 * (offset & 3)
    self.bridge.tlp(pcie.MWR64, self.base + (offset & ~3), value, byte_enables=be)

  def _pieces(self, offset: int, size: int):
    """(offset, size, whole) pieces: a partial head dword, whole dwords, a partial tail dword."""
    end = offset + size
    head = min(end, (offset + 3) & ~3)
    if head > offset: yield offset, head - offset, False
    body = end & ~3
    if body > head: yield head, body - head, True
    if end > max(body, head): yield max(body, head), end - max(body, head), False

  def read(self, offset: int, size: int) -> bytes:
    self._range(offset, size)
    out = bytearray()
    for off, n, whole in self._pieces(offset, size):
      if not whole: out += self._sub_read(off, n)
      elif n >= STREAM_READ_MIN: out += self.bridge.stream_read(self.base + off, n)
      else: out += b"".join(self.read32(off + i).to_bytes(4, "little") for i in range(0, n, 4))
    return bytes(out)

  def write(self, offset: int, data: bytes) -> None:
    data = bytes(data)
    self._range(offset, len(data))
    for off, n, whole in self._pieces(offset, len(data)):
      piece = data[off - offset:off - offset + n]
      if not whole: self._sub_write(off, piece)
      elif n >= STREAM_MIN: self.bridge.stream_write(self.base + off, piece)
      else:
        for i in range(0, n, 4): self.write32(off + i, int.from_bytes(piece[i:i + 4], "little"))

  def read_bytes(self, offset: int, size: int) -> bytes: return self.read(offset, size)
  def write_bytes(self, offset: int, data: bytes) -> None: self.write(offset, data)

