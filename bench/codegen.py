#!/usr/bin/env python3
"""Code quality and compile time of hcq's RDNA3 backend: a 256x256 f32 tiled matmul (16x16 tiles in LDS) compiled by
hcq and the equivalent OpenCL kernel compiled by clang-19 -O2, both run on MOCK+AMD (the wave emulator behind
hcq.open), comparing the wave-instructions each executes.

    .venv/bin/python bench/codegen.py [--n 256] [--tile 16] [--runs 5]

Prints both counts and their ratio (target: hcq <= 2x clang), the same kernel's PTX next to clang-19's CUDA-style
source after NVIDIA's ptxas (bench/ptx_sass.py: registers and SASS size, target hcq <= 1.5x clang), and the compile time DSL -> code object (median of
--runs compiles after one warm-up that loads the ISA tables; target < 200 ms), as the process's CPU time (what an
idle machine would take) and as wall-clock time. Results are checked against numpy. The machine is shared by several
jobs: wall-clock times are noisy.

The emulator is reached only through the public API (dev.load/alloc/copyin, prog(...)), so the wave-instructions are
counted from each kernel's code with hcq's disassembler (bench/wavecount.py): the instructions one wave executes,
following the loop whose trip count scalar registers set (clang keeps the tile loop, unrolled by 2; hcq's kernel is
straight-line), times the number of waves. Every wave of these kernels runs the same instructions. The device time of
each run (prog(..., wait=True): the mock's timestamps around the dispatch) is printed too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import hcq
from hcq.compiler import compile as hcq_compile, examples
from ptx_sass import report as ptx_report
from wavecount import kernel_waves, wave_instructions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.emu import clbuild  # noqa: E402   (clang-19 + the Debian device libraries: a build tool, no device)

OPENCL = """kernel void matmul_tiled(global const float *A, global const float *B, global float *C) {
  local float As[T][T], Bs[T][T];
  int lx = get_local_id(0), ly = get_local_id(1);
  int row = get_group_id(1) * T + ly, col = get_group_id(0) * T + lx;
  float acc = 0.0f;
  for (int kt = 0; kt < N / T; kt++) {
    As[ly][lx] = A[row * N + kt * T + lx];
    Bs[ly][lx] = B[(kt * T + ly) * N + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < T; k++) acc += As[ly][k] * Bs[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  C[row * N + col] = acc;
}
"""


def run(dev, blob: bytes, a: np.ndarray, b: np.ndarray, n: int, tile: int) -> tuple[int, int, float]:
  """Run the matmul on dev, check it; return (waves, wave-instructions, device seconds)."""
  prog = dev.load(blob)
  da, db, dc = dev.alloc(a.nbytes), dev.alloc(b.nbytes), dev.alloc(a.nbytes)
  dev.copyin(da, a)
  dev.copyin(db, b)
  seconds = prog(da, db, dc, global_size=(n // tile, n // tile), local_size=(tile, tile), wait=True)
  c = np.frombuffer(dev.copyout(dc), np.float32).reshape(n, n)
  np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
  for buf in (da, db, dc): dev.free(buf)
  waves = kernel_waves(blob, None, (n // tile) ** 2, tile * tile)
  return waves, wave_instructions(blob) * waves, seconds


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=256)
  ap.add_argument("--tile", type=int, default=16)
  ap.add_argument("--runs", type=int, default=5)
  args = ap.parse_args()
  n, tile = args.n, args.tile
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)

  hcq_compile(examples.elementwise_add().sink, "gfx1100")   # warm-up: ISA tables, imports
  times, cpu = [], []
  for _ in range(args.runs):
    t0, c0 = time.perf_counter(), time.process_time()
    sink = examples.matmul_tiled_kernel(n, tile)            # DSL construction is part of the measured path
    blob = hcq_compile(sink, "gfx1100")
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
  clang_blob = clbuild.build(OPENCL, (f"-DN={n}", f"-DT={tile}"))
  with hcq.open("MOCK+AMD") as dev:
    waves, ours, ours_s = run(dev, blob, a, b, n, tile)
    clang_waves, theirs, theirs_s = run(dev, clang_blob, a, b, n, tile)

  ratio = ours / theirs
  med, med_cpu = statistics.median(times), statistics.median(cpu)
  print(f"matmul {n}x{n} f32, {tile}x{tile} tiles, {waves} waves")
  print(f"hcq gfx1100 backend: {ours} wave-instructions ({ours / waves:.0f} per wave), code object {len(blob)} bytes; "
        f"device time {ours_s * 1e3:.1f} ms (first run: includes translation)")
  print(f"clang-19 -O2 OpenCL: {theirs} wave-instructions ({theirs / clang_waves:.0f} per wave); "
        f"device time {theirs_s * 1e3:.1f} ms (first run: includes translation)")
  print(f"ratio hcq / clang: {ratio:.2f} (target <= 2): {'MET' if ratio <= 2 else 'NOT MET'}")
  print(f"compile DSL -> code object: CPU time median {med_cpu * 1e3:.1f} ms (target < 200 ms): "
        f"{'MET' if med_cpu < 0.2 else 'NOT MET'}; wall clock median {med * 1e3:.1f} ms, best {min(times) * 1e3:.1f} ms "
        f"over {args.runs} (os.getloadavg() = {os.getloadavg()[0]:.1f}: the wall clock includes waiting for a CPU)")
  ptx_report(n, tile, "sm_90", args.runs)


if __name__ == "__main__":
  main()
