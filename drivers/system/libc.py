"""Thin ctypes wrappers over the libc calls Python's os/mmap modules do not offer (mmap at a fixed address,
mlock, madvise), plus raw views of process memory by address. Used by LinuxOS and by mocks that hand out
host memory as device memory (GPU VA == host VA)."""
from __future__ import annotations

import ctypes
import errno
import mmap as _mmap
import os
import platform

from ...errors import OSCallError

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mremap.restype = ctypes.c_void_p
_libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
_libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

# glibc malloc.h mallopt parameters
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
_tuned = False


def keep_large_temporaries_in_the_heap(mmap_threshold: int = 32 << 20, trim_threshold: int = 128 << 20) -> None:
  """Let glibc serve allocations below mmap_threshold from the heap and keep up to trim_threshold of freed heap.

  By default glibc maps every block over 128 KiB afresh (and trims the heap when the top is free), raising both limits
  only once a process happens to free a large mapped block: whether numpy's per-operation temporaries of a few
  hundred KiB fault fresh pages in on every use then depends on what the process did before (measured: the RDNA3
  emulator ran at half speed after an import order change, with twice the page faults). Fixed limits make it
  deterministic. Process-wide and once; the limits are glibc's own maximum mmap threshold (32 MiB on 64-bit)."""
  global _tuned
  if _tuned: return
  _tuned = True
  try:
    _libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    _libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
  except AttributeError: pass     # not glibc: its allocator has its own policy


PAGE_SIZE = _mmap.PAGESIZE
PROT_NONE, PROT_READ, PROT_WRITE, PROT_EXEC = 0, _mmap.PROT_READ, _mmap.PROT_WRITE, _mmap.PROT_EXEC
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = _mmap.MAP_SHARED, _mmap.MAP_PRIVATE, _mmap.MAP_ANONYMOUS
# Linux uapi asm-generic/mman-common.h: MAP_FIXED 0x10, MAP_NORESERVE 0x4000 (x86: asm/mman.h), MAP_FIXED_NOREPLACE 0x100000
MAP_FIXED, MAP_NORESERVE, MAP_FIXED_NOREPLACE = 0x10, 0x4000, 0x100000
MAP_FAILED = ctypes.c_void_p(-1).value


def mmap(addr: int | None, size: int, prot: int, flags: int, fd: int = -1, offset: int = 0, what: str = "anonymous memory") -> int:
  """mmap(2); returns the address. With MAP_FIXED_NOREPLACE a mapping placed elsewhere (old kernels) is an error.
  A fixed mapping needs an address: at 0 (NULL, which a privileged process may map) it is refused before the call."""
  if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) and not addr:
    raise OSCallError("mmap", what, errno.EINVAL, f"a fixed mapping of {size:#x} bytes needs an address, not {addr!r}")
  # ctypes truncates what does not fit the C types without a word (an address of 1 << 70 becomes NULL, a size of
  # 1 << 64 + 4096 one page): such values are refused here, never passed on
  if not 0 < size < 1 << 64 or not 0 <= (addr or 0) <= (1 << 64) - size or not 0 <= offset < 1 << 63:
    raise OSCallError("mmap", what, errno.EINVAL, f"addr={addr if addr is None else hex(addr)} size={size:#x} "
                      f"offset={offset:#x} do not fit the call")
  res = _libc.mmap(addr or None, size, prot, flags, fd, offset)
  if res in (None, MAP_FAILED):
    err = ctypes.get_errno()
    raise OSCallError("mmap", what, err, f"addr={addr if addr is None else hex(addr)} size={size:#x} offset={offset:#x}")
  if addr and (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) and res != addr:
    _libc.munmap(res, size)
    raise OSCallError("mmap", what, None, f"asked for {addr:#x}, kernel placed it at {res:#x}")
  return res


def munmap(addr: int, size: int) -> None:
  if _libc.munmap(addr, size) != 0: raise OSCallError("munmap", f"{addr:#x}+{size:#x}", ctypes.get_errno())


MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2     # linux/mman.h


def mremap_duplicate(src: int, dst: int, size: int, what: str = "shared memory") -> None:
  """A second mapping at dst of the same pages as the shared mapping at [src, src+size), replacing what is at dst:
  mremap(2) with old_size 0 ("if old_size is zero and old_address refers to a shareable mapping, mremap() creates a new
  mapping of the same pages"; EINVAL for a private mapping)."""
  if not src or not dst or (src | dst | size) % PAGE_SIZE or size <= 0:
    raise OSCallError("mremap", what, errno.EINVAL, f"{src:#x} -> {dst:#x} +{size:#x}: page-aligned, non-zero")
  res = _libc.mremap(src, 0, size, MREMAP_MAYMOVE | MREMAP_FIXED, dst)
  if res in (None, MAP_FAILED) or res != dst:
    raise OSCallError("mremap", what, ctypes.get_errno(), f"{src:#x} -> {dst:#x} +{size:#x}")


def mlock(addr: int, size: int) -> None:
  if _libc.mlock(addr, size) != 0: raise OSCallError("mlock", f"{addr:#x}+{size:#x}", ctypes.get_errno())


def mprotect(addr: int, size: int, prot: int) -> None:
  if _libc.mprotect(addr, size, prot) != 0: raise OSCallError("mprotect", f"{addr:#x}+{size:#x}", ctypes.get_errno())


def view(addr: int, size: int) -> memoryview:
  """A writable byte view of process memory at addr (no copy). The caller keeps the mapping alive."""
  return memoryview((ctypes.c_ubyte * size).from_address(addr)).cast("B")


def _make_fence():
  # A real hardware fence, not just a Python-level one: a 2-instruction function in an executable page.
  #   x86-64: mfence (0F AE F0); ret (C3)  -- Intel SDM vol. 2B, MFENCE
  #   aarch64: dmb sy (D5033FBF); ret (D65F03C0)  -- Arm ARM C6.2, DMB
  code = {"x86_64": b"\x0f\xae\xf0\xc3", "amd64": b"\x0f\xae\xf0\xc3",
          "aarch64": (0xD5033FBF).to_bytes(4, "little") + (0xD65F03C0).to_bytes(4, "little")}.get(platform.machine().lower())
  if code is None: return lambda: os.sched_yield()  # a syscall: the kernel entry serialises on every supported arch
  page = mmap(None, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, what="fence page")
  ctypes.memmove(page, code, len(code))
  mprotect(page, PAGE_SIZE, PROT_READ | PROT_EXEC)
  return ctypes.CFUNCTYPE(None)(page)


memory_barrier = _make_fence()
