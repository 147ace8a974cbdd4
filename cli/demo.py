"""`hcq demo`: the main job. Opens a device (HCQ_DEV, else the first real one, else the embedded mock), runs a
vector add and a matmul from the code objects shipped with hcq, checks them against numpy and prints timings."""
from __future__ import annotations

import sys
import time

from . import device_spec


def run(args) -> int:
  t_start = time.perf_counter()
  import numpy as np
  from .. import open as open_device
  dev = open_device(args.device)
  t_open = time.perf_counter()
  ok = True
  with dev:
    print(f"device: {dev.name} ({type(dev.os).__name__})")
    vadd, matmul = _demo_programs(dev)
    rng = np.random.default_rng(0)

    n = args.n
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    da, db, dc = dev.alloc(a.nbytes), dev.alloc(b.nbytes), dev.alloc(a.nbytes)
    t0 = time.perf_counter()
    dev.copyin(da, a); dev.copyin(db, b)
    t1 = time.perf_counter()
    k = vadd(da, db, dc, n, global_size=((n + 255) // 256,), local_size=(256,), wait=True)
    t2 = time.perf_counter()
    c = np.frombuffer(dev.copyout(dc), np.float32)
    t3 = time.perf_counter()
    good = np.array_equal(c, a + b)
    ok &= good
    print(f"vector add   {n:>7} floats: {'ok  ' if good else 'FAIL'}  copy in {(t1 - t0) * 1e3:6.2f} ms, "
          f"kernel {k * 1e3:6.2f} ms (launch+wait {(t2 - t1) * 1e3:6.2f} ms), copy out {(t3 - t2) * 1e3:6.2f} ms")

    m = args.m
    x, y = rng.standard_normal((m, m), dtype=np.float32), rng.standard_normal((m, m), dtype=np.float32)
    dx, dy, dz = dev.alloc(x.nbytes), dev.alloc(y.nbytes), dev.alloc(x.nbytes)
    dev.copyin(dx, x); dev.copyin(dy, y)
    t0 = time.perf_counter()
    k = matmul(dx, dy, dz, m, m, m, global_size=((m + 15) // 16, (m + 15) // 16), local_size=(16, 16), wait=True)
    t1 = time.perf_counter()
    z = np.frombuffer(dev.copyout(dz), np.float32).reshape(m, m)
    ref = x.astype(np.float64) @ y.astype(np.float64)
    good = np.allclose(z, ref, rtol=1e-4, atol=1e-4)
    ok &= good
    print(f"matmul      {m}x{m}x{m}: {'ok  ' if good else 'FAIL'}  kernel {k * 1e3:6.2f} ms "
          f"(launch+wait {(t1 - t0) * 1e3:6.2f} ms), max error {np.abs(z - ref).max():.2e}")
  t_end = time.perf_counter()
  print(f"total {(t_end - t_start) * 1e3:.0f} ms (import and open {(t_open - t_start) * 1e3:.0f} ms)")
  if not ok: print("hcq demo: results differ from numpy", file=sys.stderr)
  return 0 if ok else 1


def _demo_programs(dev):
  """(vadd, matmul) for the device's vendor: AMD's demo code object, or NV's PTX (drivers/nv/demo.py); a device with
  no code object of its own (an AMD target other than the shipped gfx1100's, the CPU) compiles the same kernels from
  the DSL (compiler/demo.py)."""
  if type(dev).__module__.startswith("hcq.drivers.nv."):
    from ..drivers.nv.demo import MATMUL_PTX, VADD_PTX
    return dev.load(VADD_PTX, "vadd"), dev.load(MATMUL_PTX, "matmul")
  if type(dev).__module__.startswith("hcq.drivers.amd.") and getattr(dev, "arch", None) == "gfx1100":
    from ..drivers.amd.kernels import demo_code_object
    code = demo_code_object()
    return dev.load(code, "vadd"), dev.load(code, "matmul")
  from ..compiler.demo import matmul_sink, vadd_sink
  return dev.compile(vadd_sink()), dev.compile(matmul_sink())


def _positive(text: str) -> int:
  import argparse
  try: v = int(text)
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
  if v <= 0: raise argparse.ArgumentTypeError(f"{v} is not a positive size")
  return v


def register(sub) -> None:
  p = sub.add_parser("demo", help="run a vector add and a matmul on a GPU (or the embedded mock) and check them")
  p.add_argument("--device", type=device_spec, default=None, help="device spec, e.g. MOCK+AMD or KFD+AMD:1 (default: HCQ_DEV, else "
                                                "the first real GPU, else MOCK+AMD)")
  p.add_argument("-n", type=_positive, default=65536, help="vector length (default 65536)")
  p.add_argument("-m", type=_positive, default=64, help="matrix size (default 64)")
  p.set_defaults(func=run)
