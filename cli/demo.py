"""`hcq demo`: the main job. Opens a device (HCQ_DEV, else the first real one, else the embedded mock), runs a
vector add and a matmul from the code objects shipped with hcq, checks them against numpy and prints timings."""
from __future__ import annotations

import sys
import time

from . import device_spec


def run(args) -> int:
  t_start = time.perf_counter()
  from .. import open as open_device
  dev = open_device(args.device)
  t_open = time.perf_counter()
  with dev:
    print(f"device: {dev.name} ({type(dev.os).__name__})")
    if _is_nic(dev): ok = _nic_demo(dev, args.n, on_mock=_on_mock(args.device))
    else: ok = _gpu_demo(dev, args.n, args.m)
  t_end = time.perf_counter()
  print(f"total {(t_end - t_start) * 1e3:.0f} ms (import and open {(t_open - t_start) * 1e3:.0f} ms)")
  if not ok: print("hcq demo: results differ from numpy", file=sys.stderr)
  return 0 if ok else 1


def _gpu_demo(dev, n: int, m: int) -> bool:
  import numpy as np
  ok = True
  vadd, matmul = _demo_programs(dev, n, m)
  rng = np.random.default_rng(0)

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
  return ok


def _driver(dev) -> str:
  """The driver package a device comes from: "amd", "nv", "cpu", "bnxt", ..."""
  parts = type(dev).__module__.split(".")
  return parts[parts.index("drivers") + 1] if "drivers" in parts else ""


def _is_nic(dev) -> bool: return _driver(dev) == "bnxt"


def _on_mock(spec: str | None) -> bool:
  from .. import parse_spec
  return spec is not None and (parse_spec(spec).iface or "").startswith("MOCK")


def _nic_demo(dev, n: int, on_mock: bool) -> bool:
  """An RDMA NIC runs no kernels: its demo is the vector (n floats) written by RDMA WRITE from one queue pair to
  another through the port's PHY loopback, checked byte for byte (as `hcq rdma loopback`, which has more options)."""
  import numpy as np
  from ..drivers.bnxt import BNXTQP
  from .rdma import MOCK_IPS
  a = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
  dev.set_ip(MOCK_IPS[0])      # the GID of this end; in PHY loopback nothing leaves the port
  src_qp, dst_qp = BNXTQP(dev), BNXTQP(dev)
  src_qp.connect(dst_qp.qpn, dev.gid, dev.mac)
  dst_qp.connect(src_qp.qpn, dev.gid, dev.mac)
  dev.set_loopback(True, settle_s=0.0 if on_mock else 1.0)     # a real PHY takes a moment to loop (cli/rdma.py)
  try:
    src, dst = dev.alloc(a.nbytes), dev.alloc(a.nbytes)
    lkey, rkey = dev.register_mr(src), dev.register_mr(dst)
    src.write(0, a.tobytes())
    t0 = time.perf_counter()
    src_qp.rdma_write(dst.va, rkey, src.va, lkey, a.nbytes, timeout_s=dev.timeout_s)
    t1 = time.perf_counter()
    good = np.array_equal(np.frombuffer(dst.read(0, a.nbytes), np.float32), a)
  finally: dev.set_loopback(False)
  errors = dev.device_errors()
  for e in errors: print(f"hcq demo: the device reports a driver bug: {e}", file=sys.stderr)
  print(f"rdma write   {n:>7} floats: {'ok  ' if good else 'FAIL'}  QP {src_qp.qpn:#x} -> QP {dst_qp.qpn:#x} through PHY "
        f"loopback in {(t1 - t0) * 1e3:6.2f} ms (an RDMA NIC runs no kernels: no vector add or matmul)")
  return good and not errors


def _demo_programs(dev, n: int, m: int):
  """(vadd, matmul) for the device's driver: NV's PTX (drivers/nv/demo.py), the CPU's C kernels built from the DSL
  for these sizes (drivers/cpu/demo.py), AMD's demo code object on gfx1100, and on other AMD targets and Adreno (the ir3
  backend) the same kernels compiled from the DSL (compiler/demo.py)."""
  driver = _driver(dev)
  if driver == "nv":
    from ..drivers.nv.demo import MATMUL_PTX, VADD_PTX
    return dev.load(VADD_PTX, "vadd"), dev.load(MATMUL_PTX, "matmul")
  if driver == "cpu":
    from ..drivers.cpu import demo
    return dev.compile(demo.vadd(n)), dev.compile(demo.matmul(m))
  if driver == "qcom" or (driver == "amd" and getattr(dev, "arch", None) != "gfx1100"):
    # no shipped code object: the DSL's kernels (on QCOM through the ir3 backend)
    from ..compiler.demo import matmul_sink, vadd_sink
    return dev.compile(vadd_sink()), dev.compile(matmul_sink())
  from ..drivers.amd.kernels import demo_code_object
  code = demo_code_object()
  return dev.load(code, "vadd"), dev.load(code, "matmul")


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
