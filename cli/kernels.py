"""`hcq kernels`: run the compiler's acceptance kernels (hcq.compiler.examples) on a device and check them against
numpy; --show prints a kernel's lowered LINEAR form or its C source instead."""
from __future__ import annotations

import time

from . import UsageError, device_spec


def _run_one(dev, ex) -> tuple[bool, float]:
  import numpy as np
  bufs = []
  for a in ex.args:
    if isinstance(a, np.ndarray):
      b = dev.alloc(max(a.nbytes, 1)); dev.copyin(b, a); bufs.append(b)
    else: bufs.append(a)
  prog = dev.compile(ex.sink)
  t = prog(*bufs, global_size=ex.global_size, local_size=ex.local_size, wait=True)
  ok = True
  for slot, want in ex.expected.items():
    got = np.frombuffer(dev.copyout(bufs[slot]), want.dtype).reshape(want.shape)
    ok &= bool(np.allclose(got, want, rtol=1e-5, atol=1e-5) if want.dtype.kind == "f" else np.array_equal(got, want))
  return ok, t


def run(args) -> int:
  import hcq
  from ..compiler import examples
  makers = {f.__name__: f for f in examples.ALL}
  names = args.names or list(makers)
  unknown = [n for n in names if n not in makers]
  if unknown: raise UsageError(f"unknown kernels: {', '.join(unknown)} (known: {', '.join(makers)})")
  if args.show:
    from ..compiler import compile as compile_kernel
    from ..compiler.lower import lower
    for n in names:
      sink = makers[n]().sink
      if args.show == "c": print(compile_kernel(sink, "c").source)
      else:
        lin = lower(sink)
        at = {u: i for i, u in enumerate(lin.src)}
        for i, u in enumerate(lin.src):
          srcs = " ".join(f"%{at[s]}" for s in u.src)
          print(f"%{i:<4d} {u.op.name:10s} {str(u.dtype):40s} {srcs:16s} {u.arg if u.arg is not None else ''}")
    return 0
  failed = 0
  with hcq.open(args.device) as dev:
    print(f"device: {dev.name}")
    for n in names:
      t0 = time.perf_counter()
      try: ok, t = _run_one(dev, makers[n]())
      except Exception as e:  # noqa: BLE001 - report and go on with the next kernel
        print(f"  {n:22s} ERROR {type(e).__name__}: {e}")
        failed += 1
        continue
      failed += not ok
      print(f"  {n:22s} {'ok  ' if ok else 'FAIL'} kernel {t * 1e3:8.3f} ms (with compile {(time.perf_counter() - t0) * 1e3:8.1f} ms)")
  return 1 if failed else 0


def register(sub) -> None:
  p = sub.add_parser("kernels", help="run the compiler's acceptance kernels on a device and check them against numpy")
  p.add_argument("names", nargs="*", help="kernels to run (default: all)")
  p.add_argument("--device", type=device_spec, default="CPU", help="device spec (default CPU)")
  p.add_argument("--show", choices=("linear", "c"), help="print the lowered LINEAR form or the C source instead")
  p.set_defaults(func=run)
