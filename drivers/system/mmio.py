"""An MMIO window over memory mapped into this process: 32- and 64-bit loads and stores at byte offsets, bounds
checked. LinuxOS uses it for BARs mmapped from sysfs resource files; the mock uses it for BARs backed by host memory."""
from __future__ import annotations

import ctypes

from ...errors import DeviceError
from .interface import MMIOView


class MappedMMIO(MMIOView):
  def __init__(self, addr: int, size: int, name: str):
    self.addr, self.size, self.name = addr, size, name
    self._u32 = (ctypes.c_uint32 * (size // 4)).from_address(addr)

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    return self._u32[offset >> 2]

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    self._u32[offset >> 2] = value & 0xFFFFFFFF

  def read64(self, offset: int) -> int:
    self._check(offset, 8)
    return ctypes.c_uint64.from_address(self.addr + offset).value

  def write64(self, offset: int, value: int) -> None:
    self._check(offset, 8)
    ctypes.c_uint64.from_address(self.addr + offset).value = value & 0xFFFFFFFFFFFFFFFF

  def read(self, offset: int, size: int) -> bytes:
    """Bytes at any offset and size (a memory BAR such as VRAM): the same call as TLPMMIO.read over a USB bridge."""
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"{self.name}: access of {size} bytes at {offset:#x} is outside the {self.size:#x}-byte window")
    return ctypes.string_at(self.addr + offset, size)

  def write(self, offset: int, data: bytes) -> None:
    data = bytes(data)
    if offset < 0 or offset + len(data) > self.size:
      raise DeviceError(f"{self.name}: access of {len(data)} bytes at {offset:#x} is outside the {self.size:#x}-byte window")
    ctypes.memmove(self.addr + offset, data, len(data))
