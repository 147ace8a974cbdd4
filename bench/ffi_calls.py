#!/usr/bin/env python3
"""ctypes against cffi's ABI mode on the C calls of hcq's launch path (issue 33, P1), one process, one run.

    .venv/bin/python bench/ffi_calls.py [--calls 200000] [--repeat 5] [--json]

The calls (drivers/system): the memory barrier before every doorbell write (libc.memory_barrier: a 2-instruction
mfence; ret function in an executable page, called through ctypes.CFUNCTYPE; on MOCK+AMD the mock's OS object
replaces it with a Python method, so a mock launch makes no foreign call at all), and an ioctl with a pointer
argument (linux.py: the KFD/RM ioctls of a wait or an allocation; here FIONREAD on /dev/null, which the kernel
refuses at once with ENOTTY, so that the system call costs the least). Each is timed through ctypes (as hcq calls
it) and through cffi's ABI mode (ffi.cast of the same page; ffi.dlopen(None).ioctl), per call, best of --repeat
loops of --calls calls (a loop's own cost, an empty Python call, is measured and shown apart). cffi is not a
dependency of hcq: without it the bench prints the ctypes figures alone.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import time


def _per_call(fn, calls: int, repeat: int) -> float:
  best = float("inf")
  for _ in range(repeat):
    t0 = time.perf_counter()
    for _ in range(calls): fn()
    best = min(best, (time.perf_counter() - t0) / calls)
  return best


def measure(calls: int, repeat: int) -> dict:
  from hcq.drivers.system import libc
  out: dict = {}
  out["python_empty_call_us"] = _per_call(lambda: None, calls, repeat) * 1e6
  fence_ct = libc.memory_barrier
  out["fence_ctypes_us"] = _per_call(fence_ct, calls, repeat) * 1e6
  fd = os.open("/dev/null", os.O_RDONLY)
  try:
    cl = ctypes.CDLL(None, use_errno=True)
    cl.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    arg = ctypes.c_int(0)
    ptr = ctypes.addressof(arg)
    fionread = 0x541B   # include/uapi/asm-generic/ioctls.h FIONREAD
    out["ioctl_ctypes_us"] = _per_call(lambda: cl.ioctl(fd, fionread, ptr), calls // 4, repeat) * 1e6
    try:
      import cffi
    except ImportError:
      out["cffi"] = None
      return out
    ffi = cffi.FFI()
    ffi.cdef("int ioctl(int fd, unsigned long request, void *arg);")
    lib = ffi.dlopen(None)
    page = ctypes.cast(fence_ct, ctypes.c_void_p).value
    fence_cf = ffi.cast("void (*)(void)", page)
    out["cffi"] = cffi.__version__
    out["fence_cffi_us"] = _per_call(fence_cf, calls, repeat) * 1e6
    cptr = ffi.cast("void *", ptr)
    ioctl = lib.ioctl
    out["ioctl_cffi_us"] = _per_call(lambda: ioctl(fd, fionread, cptr), calls // 4, repeat) * 1e6
    # the pointer as an int (what hcq's ioctl helper has: ctypes.addressof): cffi converts it per call
    out["ioctl_cffi_int_arg_us"] = _per_call(lambda: ioctl(fd, fionread, ffi.cast("void *", ptr)), calls // 4,
                                             repeat) * 1e6
  finally:
    os.close(fd)
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--calls", type=int, default=200_000)
  ap.add_argument("--repeat", type=int, default=5)
  ap.add_argument("--json", action="store_true")
  args = ap.parse_args()
  r = measure(args.calls, args.repeat)
  if args.json: return print(json.dumps(r))
  print(f"per call, best of {args.repeat} loops (a loop's empty Python call: {r['python_empty_call_us']:.3f} us)")
  print(f"  memory barrier (mfence page)  ctypes {r['fence_ctypes_us']:.3f} us"
        + (f"   cffi ABI {r['fence_cffi_us']:.3f} us ({r['fence_ctypes_us'] / r['fence_cffi_us']:.2f}x)"
           if r.get("cffi") else "   (cffi not installed)"))
  print(f"  ioctl (ENOTTY on /dev/null)   ctypes {r['ioctl_ctypes_us']:.3f} us"
        + (f"   cffi ABI {r['ioctl_cffi_us']:.3f} us ({r['ioctl_ctypes_us'] / r['ioctl_cffi_us']:.2f}x); "
           f"int pointer cast per call {r['ioctl_cffi_int_arg_us']:.3f} us" if r.get("cffi") else ""))


if __name__ == "__main__":
  main()
