"""User pointers an ioctl hands a device model: whether the memory behind one is readable, checked as the kernel's
copy_from_user would fail (EFAULT) instead of touching it from Python. Used by the KFD model (amd/kfd.py) and the RM
model (nv/rm.py)."""
from __future__ import annotations

import ctypes
import os as _os


def readable(addr: int, size: int) -> bool:
  """Whether [addr, addr+size) is readable process memory, without touching it from Python: the kernel copies it into
  a pipe and answers EFAULT for a bad pointer (a user pointer in an ioctl must never crash the host)."""
  if addr <= 0 or size < 0: return False
  if size == 0: return True
  r, w = _os.pipe()
  try:
    done = 0
    while done < size:
      n = min(size - done, 32768)
      buf = (ctypes.c_char * n).from_address(addr + done)
      try: _os.write(w, memoryview(buf))   # the kernel copies from user memory: EFAULT for a bad pointer
      except OSError: return False
      _os.read(r, n)
      done += n
    return True
  finally:
    _os.close(r)
    _os.close(w)
