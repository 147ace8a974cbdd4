"""File objects handed out by MockOS.open(): the FileHandle protocol of drivers/system/interface.py.

MockFile is the base of every device model's file (an open /dev/kfd, a render node): each operation a model does
not support fails the way Linux does (ENOTTY for ioctl, ENODEV for mmap) with an error naming the path.
"""
from __future__ import annotations

import errno
import itertools
import struct
import threading

from ..errors import OSCallError, Timeout

_fds = itertools.count(1000)


def next_fd() -> int:
  """Fake descriptor numbers (never real ones: a driver that bypasses the OS interface with them fails loudly)."""
  return next(_fds)


class MockFile:
  """An open file of the mock. Subclasses override what their device supports."""

  def __init__(self, path: str, flags: int = 0):
    self.path, self.flags, self.fd = path, flags, next_fd()
    self.pos = 0
    self.closed = False

  def _check_open(self, call: str) -> None:
    if self.closed: raise OSCallError(call, self.path, errno.EBADF, "file is closed")

  def ioctl(self, request: int, arg) -> int:
    self._check_open("ioctl")
    raise OSCallError("ioctl", self.path, errno.ENOTTY, f"request {request:#x}: this file takes no ioctls")

  def mmap(self, size: int, offset: int = 0, prot=None, flags=None, addr=None) -> int:
    self._check_open("mmap")
    raise OSCallError("mmap", self.path, errno.ENODEV, f"size={size:#x} offset={offset:#x}: not mappable")

  def read(self, size: int = -1, offset: int | None = None) -> bytes:
    self._check_open("read")
    raise OSCallError("read", self.path, errno.EINVAL)

  def write(self, data, offset: int | None = None) -> int:
    self._check_open("write")
    raise OSCallError("write", self.path, errno.EINVAL)

  def close(self) -> None:
    self.closed = True

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
  def __repr__(self): return f"{type(self).__name__}({self.path!r}, fd={self.fd})"


class DataFileHandle(MockFile):
  """An open sysfs/proc file: reads see the content at open time (like sysfs, which renders on read; reopen to
  refresh), writes go to the node's write hook. Binary attributes (read_at/write_at) are positioned."""

  def __init__(self, path: str, node, flags: int = 0):
    super().__init__(path, flags)
    self.node = node

  def read(self, size: int = -1, offset: int | None = None) -> bytes:
    self._check_open("read")
    pos = self.pos if offset is None else offset
    if self.node.read_at is not None:
      data = self.node.read_at(size if size >= 0 else 1 << 20, pos)
    else:
      content = self.node.content()
      data = content[pos:] if size < 0 else content[pos:pos + size]
    if offset is None: self.pos += len(data)
    return data

  def write(self, data, offset: int | None = None) -> int:
    self._check_open("write")
    data = bytes(data)
    if self.node.write_at is not None:
      pos = self.pos if offset is None else offset
      n = self.node.write_at(data, pos)
      if offset is None: self.pos += n
      return n
    self.node.write(self.path, data)
    return len(data)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None) -> int:
    self._check_open("mmap")
    if self.node.mmio is None: return super().mmap(size, offset, prot, flags, addr)
    return self.node.mmio(size, offset, self.path).mmap_address(addr)


class EventFD(MockFile):
  """eventfd(2) in memory: an 8-byte counter. write adds, read returns the counter and clears it; a read of a zero
  counter blocks (up to `timeout_s`, then Timeout) until a device model signals it from another thread."""

  def __init__(self, initval: int = 0, timeout_s: float = 10.0):
    super().__init__("eventfd")
    self.counter = initval
    self.timeout_s = timeout_s
    self._cond = threading.Condition()

  def signal(self, value: int = 1) -> None:
    with self._cond:
      if self.counter + value > 0xFFFFFFFFFFFFFFFE:
        raise OSCallError("write", self.path, errno.EAGAIN, "eventfd counter would overflow")
      self.counter += value
      self._cond.notify_all()

  def write(self, data, offset=None) -> int:
    self._check_open("write")
    if len(data) != 8: raise OSCallError("write", self.path, errno.EINVAL, f"eventfd writes are 8 bytes, not {len(data)}")
    (value,) = struct.unpack("<Q", bytes(data))
    if value == 0xFFFFFFFFFFFFFFFF: raise OSCallError("write", self.path, errno.EINVAL, "0xffffffffffffffff")
    self.signal(value)
    return 8

  def read(self, size=8, offset=None) -> bytes:
    self._check_open("read")
    if size < 8: raise OSCallError("read", self.path, errno.EINVAL, f"eventfd reads are 8 bytes, not {size}")
    with self._cond:
      if not self._cond.wait_for(lambda: self.counter > 0, timeout=self.timeout_s):
        raise Timeout("eventfd to be signalled", expected=">0", last_seen=0, timeout_s=self.timeout_s)
      value, self.counter = self.counter, 0
    return struct.pack("<Q", value)

  def wait_value(self) -> int: return struct.unpack("<Q", self.read(8))[0]


class DmaBufFile(MockFile):
  """A dma-buf exporting a BAR window (MockOS.export_bar_dmabuf): .mmio is the window (an MMIOView of the BAR),
  .size its length. It takes no ioctls and cannot be mapped by the CPU here (the exporter's BAR is mapped through its
  resource file); an importer (the mock KFD's AMDKFD_IOC_IMPORT_DMABUF) looks it up by descriptor."""

  def __init__(self, path: str, mmio, size: int):
    super().__init__(path)
    self.mmio, self.size = mmio, size
