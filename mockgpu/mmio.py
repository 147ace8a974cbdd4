"""MMIO views of the mock: register windows whose accesses call a device model, doorbell pages, and windows over
plain host memory (a VRAM BAR). All implement drivers.system.interface.MMIOView."""
from __future__ import annotations

import errno
import threading
from _thread import get_ident
from typing import Callable

from ..drivers.system.interrupts import held as held_interrupt
from ..drivers.system.interface import MMIOView
from ..drivers.system.mmio import MappedMMIO
from ..errors import OSCallError


class RegisterMMIO(MMIOView):
  """A register window: 32-bit registers held in a dict, with per-register hooks.

  read_hook(offset) -> int | None overrides the stored value (None: use it); write_hook(offset, value) runs after
  the value is stored. 64-bit accesses are two 32-bit ones, low dword first."""

  def __init__(self, name: str, size: int, read_hook: Callable[[int], int | None] | None = None,
               write_hook: Callable[[int, int], None] | None = None):
    self.name, self.size = name, size
    self.regs: dict[int, int] = {}
    self.read_hook, self.write_hook = read_hook, write_hook
    self.lock = threading.RLock()

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    with self.lock:
      value = self.read_hook(offset) if self.read_hook is not None else None
      return self.regs.get(offset, 0) if value is None else value & 0xFFFFFFFF

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    with self.lock:
      self.regs[offset] = value & 0xFFFFFFFF
      if self.write_hook is not None: self.write_hook(offset, value & 0xFFFFFFFF)

  def mmap_address(self, addr=None) -> int:
    raise OSCallError("mmap", self.name, errno.ENODEV, "a mock register window cannot be mapped as memory: use "
                      "os.map_mmio(), whose writes reach the device model")


class DoorbellMMIO(MMIOView):
  """A doorbell page: a 64-bit store (or a 32-bit one) at a doorbell's offset calls ring(offset, value) with the
  whole value; reads return the last value written.

  A model may route a doorbell (route(offset, fn)): a 64-bit store at that offset then calls fn(value) directly,
  the page's ring() is not called for it (the doorbell write of every launch: no lookup in the model)."""

  def __init__(self, name: str, size: int, ring: Callable[[int, int], None]):
    self.name, self.size, self.ring = name, size, ring
    self.values: dict[int, int] = {}
    self.routes: dict[int, Callable[[int], None]] = {}     # 8-byte aligned offset -> fn(value)

  def route(self, offset: int, fn: Callable[[int], None] | None) -> None:
    """64-bit stores at `offset` call fn(value) instead of ring(offset, value); fn None removes the route."""
    self._check(offset, 8)
    if fn is None: self.routes.pop(offset, None)
    else: self.routes[offset] = fn

  def read32(self, offset: int) -> int:
    self._check(offset, 4)
    base = offset & ~7
    return (self.values.get(base, 0) >> (8 * (offset - base))) & 0xFFFFFFFF

  def read64(self, offset: int) -> int:
    self._check(offset, 8)
    return self.values.get(offset, 0)

  def write32(self, offset: int, value: int) -> None:
    self._check(offset, 4)
    base = offset & ~7
    old = self.values.get(base, 0)
    shift = 8 * (offset - base)
    held_interrupt.hold()        # one store on hardware (see write64)
    try:
      self.values[base] = (old & ~(0xFFFFFFFF << shift)) | ((value & 0xFFFFFFFF) << shift)
      self.ring(offset, value & 0xFFFFFFFF)
    finally: held_interrupt.release()

  def write64(self, offset: int, value: int) -> None:
    value &= 0xFFFFFFFFFFFFFFFF
    fn = self.routes.get(offset)
    # a doorbell write is one store on hardware: a Ctrl-C cannot land halfway through it (drivers/system/interrupts.py).
    # Inside the main thread's held span (a driver's submission) there is nothing to add: that span defers it already
    held = held_interrupt
    nested = held.depth and get_ident() == held.main
    if not nested: held.hold()
    try:
      if fn is not None:           # a routed doorbell: its offset was checked by route()
        self.values[offset] = value
        fn(value)
        return
      self._check(offset, 8)
      self.values[offset] = value
      self.ring(offset, value)
    finally:
      if not nested: held.release()

  def mmap_address(self, addr=None) -> int:
    raise OSCallError("mmap", self.name, errno.ENODEV, "mock doorbells are not memory: map them with os.map_mmio() "
                      "so that a doorbell write reaches the device model")


class MemoryMMIO(MappedMMIO):
  """A window over plain host memory at `addr` (a VRAM BAR backed by host memory): accesses are loads and stores,
  no model is called."""

  def __init__(self, name: str, addr: int, size: int):
    super().__init__(addr, size, name)

  def mmap_address(self, addr=None) -> int:
    if addr is not None and addr != self.addr:
      raise OSCallError("mmap", self.name, errno.EINVAL, f"mock memory window lives at {self.addr:#x}, not {addr:#x}")
    return self.addr


class FileMemoryMMIO(MemoryMMIO):
  """A window over a memory file (HostMemory.alloc_file: a VRAM BAR backed by a memfd mapped at `addr`): accesses are
  loads and stores as MemoryMMIO's, and map_view() maps part of it at another address as a view of the same bytes
  (MockOS.map_pci_resource: a BAR window mapped at a fixed address)."""

  def __init__(self, name: str, addr: int, size: int, fd: int):
    super().__init__(name, addr, size)
    self.fd = fd

  def map_view(self, memory, addr: int, offset: int, size: int, holder, what: str, kind: str = "") -> None:
    if offset < 0 or size <= 0 or offset + size > self.size:
      raise OSCallError("mmap", what, errno.EINVAL, f"{offset:#x}+{size:#x} is outside {self.name} ({self.size:#x} bytes)")
    memory.map_view(self.fd, offset, addr, size, holder, what, kind)
