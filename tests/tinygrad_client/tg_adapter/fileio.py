"""MockFileIOInterface: tinygrad's FileIOInterface (tinygrad/runtime/support/hcq.py) over hcq's MockOS.

Every file tinygrad's drivers open (device nodes, sysfs and procfs files, directories they list), every ioctl, mmap,
read, write, and its anonymous mmaps and munmaps go to the MockOS of this process (tg_adapter.mock_os()): the same
object hcq's own drivers use in the mock. Errors of the mock (OSCallError, naming the call, path and errno) become
the OSError tinygrad expects from the kernel, with the mock's message kept."""
from __future__ import annotations

import errno
import mmap as mmap_mod
import os

from hcq.errors import OSCallError
from hcq.mockgpu.vfs import DataFile, Dir

from . import mock_os
from .mmio import WINDOWS

MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE = 0x10, 0x100000, 0x4000   # <asm-generic/mman-common.h>, <linux/mman.h>


def os_error(e: OSCallError) -> OSError:
  err = OSError(e.errno or errno.EIO, str(e))
  err.__cause__ = e
  return err


def make_class(base):
  """MockFileIOInterface as a subclass of tinygrad's FileIOInterface (`base`), so that tinygrad's isinstance checks
  (its ioctl helper, tinygrad/runtime/support/c.py) take it for its own."""

  class MockFileIOInterface(base):
    def __init__(self, path: str = "", flags: int = os.O_RDONLY, fd=None):
      self.path, self.file = path, None
      mos = mock_os()
      if fd is not None:          # a file handed out by the mock itself (an eventfd, a VFIO device fd)
        self.file = fd if not isinstance(fd, int) else _by_fd[fd]
        self.path = self.file.path
      else:
        try:
          node = mos.vfs.lookup(path)
          if not isinstance(node, Dir): self.file = mos.open(path, flags)
        except OSCallError as e: raise os_error(e) from None
      self.fd = self.file.fd if self.file is not None else -1
      if self.file is not None: _by_fd[self.fd] = self.file

    def __del__(self):
      # tinygrad's own __del__ os.close()s self.fd: here a mock descriptor, never a real one
      pass

    def _f(self, call: str):
      if self.file is None: raise OSError(errno.EISDIR, f"{call} on {self.path}: a directory")
      return self.file

    def ioctl(self, request, arg):
      f = self._f("ioctl")
      try: return f.ioctl(request, arg) or 0
      except OSCallError as e:
        if e.errno != errno.ENOTTY or not hasattr(f, "ioctl_fd"): raise os_error(e) from None
      # an ioctl whose result is a new descriptor (VFIO_GROUP_GET_DEVICE_FD): the mock hands out its file object;
      # tinygrad gets its number, and FileIOInterface(fd=...) finds the object again
      try: new = f.ioctl_fd(request, arg, f"{self.path} (device fd)")
      except OSCallError as e: raise os_error(e) from None
      _by_fd[new.fd] = new
      return new.fd

    def mmap(self, start, sz, prot, flags, offset):
      f, mos = self._f("mmap"), mock_os()
      addr = start if (start and flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) else None
      try:
        node = mos.vfs.lookup(self.path) if self.path.startswith("/") else None
        if isinstance(node, DataFile) and node.mmio is not None:     # a BAR resource file of a mock PCI function
          window = node.mmio(round_page(sz), offset, self.path)
          if not hasattr(window, "map_view"): return _map_window(mos, window, addr, round_page(sz))   # registers
          if addr is None: return window.mmap_address(None)       # memory behind the BAR (VRAM): its bytes
          return mos.map_pci_resource(self.path, addr, round_page(sz), offset).addr
        try: return f.mmap(sz, offset, prot, flags, addr)
        except OSCallError as e:     # a device file's register/doorbell page: not memory in the mock (mockgpu/mmio.py)
          mmio = getattr(node, "mmio", None) or getattr(f, "mmio", None)
          if e.errno != errno.ENODEV or mmio is None: raise
          return _map_window(mos, mmio(round_page(sz), offset, self.path), addr, round_page(sz))
      except OSCallError as e: raise os_error(e) from None

    def read(self, size=None, binary=False, offset=None):
      try: data = self._f("read").read(-1 if size is None else size, offset)
      except OSCallError as e: raise os_error(e) from None
      return bytes(data) if binary else bytes(data).decode()

    def write(self, content, binary=False, offset=None):
      try: self._f("write").write(content if isinstance(content, (bytes, bytearray, memoryview)) else str(content).encode(), offset)
      except OSCallError as e: raise os_error(e) from None

    def listdir(self):
      try: return mock_os().listdir(self.path)
      except OSCallError as e: raise os_error(e) from None

    def seek(self, offset): self._f("seek").pos = offset

    @staticmethod
    def anon_mmap(start, sz, prot, flags, offset):
      mos = mock_os()
      shared = bool(flags & mmap_mod.MAP_SHARED)
      try:
        if start and flags & MAP_FIXED and not flags & MAP_FIXED_NOREPLACE and mos.memory.overlaps(start, round_page(sz)):
          mos.free_anon(start, round_page(sz))     # MAP_FIXED replaces what was there (a part of a reservation), as mmap(2)
        reserve = prot == 0
        return mos.alloc_anon(sz, addr=start or None, prot=prot, shared=shared, reserve_only=reserve)
      except OSCallError as e: raise os_error(e) from None

    @staticmethod
    def munmap(buf, sz):
      mos = mock_os()
      view = WINDOWS.remove(buf)
      if view is not None: view.close()
      try: mos.free_anon(buf, round_page(sz))
      except OSCallError as e: raise os_error(e) from None
      return 0

    @staticmethod
    def exists(path): return mock_os().exists(path)

    @staticmethod
    def readlink(path):
      try: return mock_os().vfs.readlink(path)
      except OSCallError as e: raise os_error(e) from None

    @staticmethod
    def eventfd(initval, flags=None): return MockFileIOInterface(fd=mock_os().eventfd(initval))

  return MockFileIOInterface


_by_fd: dict = {}


def round_page(n: int) -> int: return (n + mmap_mod.PAGESIZE - 1) & ~(mmap_mod.PAGESIZE - 1)


def _map_window(mos, window, addr, size: int) -> int:
  """A register window or doorbell page (no memory behind it): an address range reserved for it, whose accesses
  through tinygrad's MMIOInterface reach the window (tg_adapter.mmio)."""
  va = mos.alloc_anon(size, addr=addr, reserve_only=True)
  WINDOWS.add(va, size, window)
  return va
