"""Compile time of the tiled matmul: DSL -> lowered -> C source (no C compiler run). Target: < 50 ms after warm-up.

  .venv/bin/python bench/compile.py [--runs N]
Each run builds the kernel from the DSL anew (new UOps: the hash-consing cache is dropped between runs) and
compiles it; it prints the median and the best time, and the per-pass split of the median run.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.c import render_c
from hcq.compiler.examples import matmul_tiled_kernel
from hcq.compiler.lower import PIPELINE, TARGETS, launch_dims, linearize


def one_run() -> float:
  t0 = time.perf_counter()
  art = compile_kernel(matmul_tiled_kernel(64, 8), "c")
  dt = time.perf_counter() - t0
  assert "hcq_launch" in art.source
  return dt


def per_pass() -> dict:
  import dataclasses
  times = {}
  t = time.perf_counter()
  sink = matmul_tiled_kernel(64, 8)
  times["build (DSL)"] = time.perf_counter() - t
  target = TARGETS["c"]
  for name, fn in PIPELINE:
    t = time.perf_counter(); sink = fn(sink, target); times[name] = time.perf_counter() - t
  gs, ls = launch_dims(sink)
  sink = sink.replace(arg=dataclasses.replace(sink.arg, global_size=gs, local_size=ls))
  t = time.perf_counter(); lin = linearize(sink); times["linearize"] = time.perf_counter() - t
  t = time.perf_counter(); render_c(lin); times["render_c"] = time.perf_counter() - t
  return times


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=30)
  args = ap.parse_args()
  for _ in range(3): one_run()   # warm-up
  runs = []
  for _ in range(args.runs):
    gc.collect()
    runs.append(one_run())
  med = statistics.median(runs)
  print(f"tiled matmul 64x64 (8x8 tiles), DSL -> C source: median {med * 1e3:.2f} ms, best {min(runs) * 1e3:.2f} ms "
        f"over {args.runs} runs (target < 50 ms): {'OK' if med < 0.050 else 'TOO SLOW'}")
  for name, t in per_pass().items(): print(f"  {name:16s} {t * 1e3:7.2f} ms")


if __name__ == "__main__":
  main()
