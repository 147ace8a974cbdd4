"""Checked access of the command processors (PM4, SDMA, AQL) to GPU virtual memory.

GPU VA == host VA in the mock, so a packet that writes a fence at address A stores to host address A, but only after
the address was checked against the ranges mapped to this GPU (the emulator's GPUMemory): an access outside every
mapping is a GPUFault carrying the address, never a segfault of the host.
"""
from __future__ import annotations

import ctypes
from array import array

from ...errors import GPUFault

_u32, _u64 = ctypes.c_uint32, ctypes.c_uint64


class DeviceMemory:
  def __init__(self, ranges):
    self.ranges = ranges      # mockgpu.amd.emu.GPUMemory: add_range/remove_range/check_scalar

  def check(self, addr: int, size: int, what: str) -> None:
    if addr < 0 or addr + size > 1 << 64: raise GPUFault(f"{what}: address out of range", address=addr, kind="page fault")
    if size: self.ranges.check_scalar(addr, size, what)

  def read32(self, addr: int, what: str = "read") -> int:
    self.check(addr, 4, what)
    return ctypes.c_uint32.from_address(addr).value

  def read64(self, addr: int, what: str = "read") -> int:
    self.check(addr, 8, what)
    return ctypes.c_uint64.from_address(addr).value

  def write32(self, addr: int, value: int, what: str = "write") -> None:
    lo, hi = self.ranges._last      # the range of the last successful check (fences land in one range): no calls
    if not lo <= addr <= hi - 4: self.check(addr, 4, what)
    _u32.from_address(addr).value = value & 0xFFFFFFFF

  def write64(self, addr: int, value: int, what: str = "write") -> None:
    lo, hi = self.ranges._last
    if not lo <= addr <= hi - 8: self.check(addr, 8, what)
    _u64.from_address(addr).value = value & 0xFFFFFFFFFFFFFFFF

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
