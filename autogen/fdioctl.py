"""ioctl on a plain int file descriptor, for scripts that hold one (drivers pass the OS interface's open files,
which have their own .ioctl()). A ctypes struct is passed as a mutable buffer and filled in place."""
from __future__ import annotations

import ctypes
import fcntl


def ioctl(fd: int, request: int, arg):
  if isinstance(arg, (ctypes.Structure, ctypes.Union, ctypes.Array)):
    return fcntl.ioctl(fd, request, memoryview(arg).cast("B"), True)
  return fcntl.ioctl(fd, request, arg)
