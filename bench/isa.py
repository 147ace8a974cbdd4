"""Decoder throughput: decode every kernel of the OpenCL corpus repeatedly and print instructions per second.

    .venv/bin/python bench/isa.py [--seconds 2]
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> int:
  from hcq.compiler.isa.amd.codeobject import CodeObject
  from hcq.compiler.isa.amd.decode import decode_all
  ap = argparse.ArgumentParser()
  ap.add_argument("--seconds", type=float, default=2.0)
  args = ap.parse_args()
  here = os.path.dirname(os.path.abspath(__file__))
  codes = []
  for f in sorted(glob.glob(os.path.join(here, "..", "tests", "fixtures", "opencl", "hsaco", "*.hsaco"))):
    with open(f, "rb") as fh:
      codes += [k.code for k in CodeObject.parse(fh.read()).kernels.values()]
  if not codes: raise SystemExit("no code objects found in tests/fixtures/opencl/hsaco")
  blob = b"".join(codes)
  n = len(decode_all(blob))  # warm-up (tables)
  total, t0 = 0, time.perf_counter()
  while time.perf_counter() - t0 < args.seconds:
    total += len(decode_all(blob))
  dt = time.perf_counter() - t0
  print(f"decode: {total} instructions in {dt:.2f} s = {total / dt:,.0f} instructions/s ({n} per pass, {len(codes)} kernels)")
  t0 = time.perf_counter()
  text = [str(i) for i in decode_all(blob)]
  dt = time.perf_counter() - t0
  print(f"decode+format: {len(text) / dt:,.0f} instructions/s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
