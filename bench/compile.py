"""Compile time of the tiled matmul: DSL -> lowered -> C source (no C compiler run). Target: < 50 ms after warm-up.

  .venv/bin/python bench/compile.py [--runs N] [--deep N] [--targets c,gfx1100,...] [--chain N]
Each run builds the kernel from the DSL anew (new UOps: the hash-consing cache is dropped between runs) and
compiles it; it prints the median and the best time, and the per-pass split of the median run. Then the CPU time
to compile a chain --deep links long and one a quarter of that (linear growth: about 4x). Last, the speed of the
lowering pipeline alone (lower(), thread CPU time, best of 3) on 10,000-node ALU chains, against the target of issue #20:
>= 50,000 ALU nodes/s, i.e. a 10,000-node chain lowered in < 0.2 s.
End to end per target (issue #30): DSL -> machine code (gfx1100/gfx1200/gfx942: an HSA code object through lowering,
instruction selection, register allocation, waits/hazards, encoding and the code-object writer; sm_90: PTX text; c: C
source; a630: ir3 words and their dispatch metadata) for the --chain-node ALU chain (default 20,000) and for the tiled matmul, in ALU nodes/s against the target of
>= 50,000, and the time ratio of a chain twice as long (linear growth: about 2.0).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.c import render_c
from hcq.compiler.examples import matmul_tiled_kernel
from hcq.compiler.lower import PIPELINE, TARGETS, gc_paused, launch_dims, linearize, lower

LOWERING_TARGET = 50_000   # ALU nodes/s (issue #20)
END_TO_END_TARGET = 50_000  # ALU nodes/s, DSL -> machine code per target (issue #30)
TARGETS_E2E = ("c", "gfx1100", "gfx1200", "gfx942", "sm_90", "a630")


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


def deep_chain(n: int) -> float:
  """CPU seconds to compile out[0] = f(f(...f(x)...)), f(v) = (v ^ i) + 1, n deep (2n ALU nodes), DSL -> C source."""
  from hcq.compiler import KernelInfo, UOp, dtypes
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(n): v = (v ^ i) + 1
  sink = UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"deep{n}"))
  t0 = time.process_time()
  compile_kernel(sink, "c")
  return time.process_time() - t0


def alu_chain(nodes: int, step) -> object:
  """A kernel storing a chain of `nodes` ALU nodes (two per step) on a loaded int32."""
  from hcq.compiler import KernelInfo, UOp, dtypes
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(nodes // 2): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{nodes}"))


CHAINS = {"x * 3 + 1": lambda v, i: v * 3 + 1, "(x ^ i) + 1": lambda v, i: (v ^ i) + 1}


def lowering_seconds(make, runs: int = 3) -> float:
  """Thread CPU seconds lower(sink, "c") takes (the pipeline up to LINEAR, no rendering), the best of `runs` on a
  kernel built anew each time (on a shared machine one run may pay for another process's cache traffic)."""
  best = float("inf")
  for _ in range(runs):
    sink = make()
    t0 = time.thread_time()
    lower(sink, "c")
    best = min(best, time.thread_time() - t0)
  return best


def end_to_end_seconds(make, target: str, runs: int = 2) -> float:
  """Thread CPU seconds of hcq.compiler.compile(sink, target), the best of `runs` on a kernel built anew each time."""
  best = float("inf")
  for _ in range(runs):
    sink = make()
    gc.collect()
    t0 = time.thread_time()
    compile_kernel(sink, target)
    best = min(best, time.thread_time() - t0)
  return best


def end_to_end(targets, chain: int, runs: int = 2) -> list[tuple]:
  """Per target: (target, chain seconds, nodes/s, ratio for 2x nodes, matmul seconds)."""
  step = CHAINS["(x ^ i) + 1"]
  rows = []
  for target in targets:
    t1 = end_to_end_seconds(lambda: alu_chain(chain, step), target, runs)
    t2 = end_to_end_seconds(lambda: alu_chain(2 * chain, step), target, runs)   # best of as many runs as t1
    tm = end_to_end_seconds(lambda: matmul_tiled_kernel(64, 8), target, runs)
    rows.append((target, t1, chain / t1, t2 / t1, tm))
  return rows


def load_average() -> str:
  """The 1-, 5- and 15-minute load averages (Linux /proc/loadavg), or "?" elsewhere."""
  try:
    with open("/proc/loadavg") as f: return " ".join(f.read().split()[:3])
  except OSError: return "?"


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=30)
  ap.add_argument("--deep", type=int, default=10000, help="length of the deep chain (0: skip it)")
  ap.add_argument("--targets", default=",".join(TARGETS_E2E), help="end-to-end targets (empty: skip)")
  ap.add_argument("--chain", type=int, default=20_000, help="ALU nodes of the end-to-end chain")
  args = ap.parse_args()
  for _ in range(3): one_run()   # warm-up
  runs = []
  for _ in range(args.runs):
    gc.collect()
    runs.append(one_run())
  med = statistics.median(runs)
  print(f"tiled matmul 64x64 (8x8 tiles), DSL -> C source: median {med * 1e3:.2f} ms, best {min(runs) * 1e3:.2f} ms "
        f"over {args.runs} runs (target < 50 ms): {'OK' if med < 0.050 else 'TOO SLOW'}")
  with gc_paused(): split = per_pass()   # as lower() runs them: without the cyclic collector's pauses
  for name, t in split.items(): print(f"  {name:16s} {t * 1e3:7.2f} ms")
  if args.deep:   # compile time grows linearly with the graph: the per-node cost of a chain 4x longer is the same
    short, long_ = deep_chain(args.deep // 4), deep_chain(args.deep)
    print(f"deep chain, DSL -> C source (CPU time): {args.deep // 4} deep {short:.2f} s, {args.deep} deep {long_:.2f} s "
          f"({long_ / short:.1f}x for 4x; {long_ / (2 * args.deep) * 1e6:.0f} us per ALU node)")
  for what, step in CHAINS.items():
    t = lowering_seconds(lambda: alu_chain(10_000, step))
    rate = 10_000 / t
    print(f"lowering: {rate:,.0f} ALU nodes/s (chain of 10,000, x = {what}: {t:.2f} s); target >= {LOWERING_TARGET:,} "
          f"nodes/s: {'MET' if rate >= LOWERING_TARGET else 'NOT MET'}")
  targets = [t for t in args.targets.split(",") if t]
  if targets:
    print(f"end to end, DSL -> machine code (thread CPU time, best of 2): chain of {args.chain:,} ALU nodes "
          f"(x = (x ^ i) + 1) and the tiled matmul 64x64 (8x8 tiles); target >= {END_TO_END_TARGET:,} nodes/s; "
          f"load average {load_average()} (CPU time grows with the load of a shared machine)")
    for target, t1, rate, ratio, tm in end_to_end(targets, args.chain):
      print(f"  {target:8s} chain {t1:6.2f} s = {rate:>9,.0f} nodes/s ({'MET' if rate >= END_TO_END_TARGET else 'NOT MET'}),"
            f" 2x nodes: {ratio:.2f}x time; tiled matmul {tm * 1e3:7.1f} ms")


if __name__ == "__main__":
  main()
