#!/usr/bin/env python3
"""Speed of the mock NV GPU's PTX interpreter: thread-instructions per second on clang-19's vector add over 65,536
floats (256 threads per CTA, 256 CTAs), run directly (no driver: the subject is the interpreter itself).

    .venv/bin/python bench/ptx_interp.py [--runs 7] [--n 65536]

    .venv/bin/python bench/ptx_interp.py --corpus [--runs 3] [--threads 65536 262144]
                                                # every kernel of the CUDA corpus (tests/fixtures/cuda) at the
                                                # fixture's size, then grown to each --threads (0: fixture only)
    .venv/bin/python bench/ptx_interp.py --parse                # parse time against statement length (issue 29 item 4)
    .venv/bin/python bench/ptx_interp.py --json                 # issue 33 P6's figures as one JSON line (bench/all.py)

A thread-instruction is one PTX instruction executed by one thread (the interpreter's count: every instruction of a
basic block times the threads that ran it). Prints the count, the run time (median and best of the runs, after one
warm-up run that also compiles the kernel) and the rate. The targets: issue 16, >= 30M thread-instructions/s; issue 33
P6, >= 300M (TARGET_P6). Every result is checked (the vector add against numpy's a + b, each corpus kernel against its
numpy reference). bench/nv.py imports vector_add_rate() for its report.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct

import numpy as np

from hcq.mockgpu.gpumem import GPUMemory
from hcq.mockgpu.nv.ptx import parse, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VADD_PTX = os.path.join(ROOT, "tests", "fixtures", "cuda", "ptx", "vadd.ptx")
TARGET = 30e6
TARGET_P6 = 300e6


def _buffer(mem: GPUMemory, arr: np.ndarray, keep: list) -> tuple[int, np.ndarray]:
  raw = np.zeros(arr.nbytes + 256, np.uint8)
  pad = (-raw.ctypes.data) % 256
  view = raw[pad:pad + arr.nbytes].view(arr.dtype)
  view[:] = arr
  mem.add_range(raw.ctypes.data + pad, arr.nbytes)
  keep.append(raw)
  return raw.ctypes.data + pad, view


def vector_add_rate(n: int = 65536, runs: int = 7, block: int = 256) -> dict:
  """{"thread_instructions", "median_s", "best_s", "rate" (thread-instructions/s at the median), "ok"}."""
  with open(VADD_PTX) as f: k = parse(f.read()).kernels["vadd"]
  mem, keep = GPUMemory(), []
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  pa, _ = _buffer(mem, a, keep)
  pb, _ = _buffer(mem, b, keep)
  pc, c = _buffer(mem, np.zeros(n, np.float32), keep)
  params = struct.pack("<QQQi", pa, pb, pc, n)
  grid = ((n + block - 1) // block, 1, 1)
  run(k, grid, (block, 1, 1), params, mem)   # warm-up: compiles the kernel
  times, count = [], 0
  for _ in range(runs):
    c[:] = 0
    st = run(k, grid, (block, 1, 1), params, mem)
    times.append(st["seconds"])
    count = st["thread_instructions"]
  med = statistics.median(times)
  return {"thread_instructions": count, "median_s": med, "best_s": min(times), "rate": count / med,
          "ok": bool(np.array_equal(c, a + b))}


def corpus_rates(runs: int = 3, threads: int | None = None) -> list[dict]:
  """Each corpus kernel (clang-19 -O2 PTX of tests/fixtures/cuda) on its own inputs: thread-instructions, the best
  of `runs` run times (after a warm-up that compiles it), the rate, and whether numpy's check passed.
  threads: None for the fixture's launch (256 to 4,096 threads: a test's size, dominated by per-instruction set-up),
  else each kernel grown to about that many threads (tests/nv/ptx/corpus_scale.py: the sizes a user launches).
  The warm-up run is checked against numpy; every timed run must write the same bytes as the checked one."""
  import sys
  sys.path.insert(0, ROOT)
  sys.path.insert(0, os.path.join(ROOT, "tests", "nv", "ptx"))
  from tests.fixtures.cuda.kernels import KERNELS
  from tests.nv.ptx.corpus_scale import scaled, threads_of
  from tests.nv.ptx.ptx_launch import run_corpus_kernel
  out = []
  for name in sorted(KERNELS):
    spec = KERNELS[name] if threads is None else scaled(KERNELS[name], threads)
    outs, data, stats = run_corpus_kernel(spec)
    try:
      spec.check(outs, data)
      ok = True
    except AssertionError: ok = False
    times, cpu = [], []
    for _ in range(runs):
      again, _, st = run_corpus_kernel(spec)
      times.append(st["seconds"])
      cpu.append(st["cpu_seconds"])
      ok = ok and all(again[k].tobytes() == v.tobytes() for k, v in outs.items())
    best = min(times)
    n = stats["thread_instructions"]
    out.append({"kernel": name, "threads": threads_of(spec), "thread_instructions": n, "best_s": best,
                "rate": n / best if best else 0.0, "best_cpu_s": min(cpu), "ok": ok})
  return out


def _corpus_table(rows: list[dict], title: str) -> None:
  print(title)
  for r in rows:
    print(f"  {r['kernel']:<16} {r['threads']:>8} threads {r['thread_instructions']:>11} thread-instr  "
          f"{r['best_s'] * 1e3:8.2f} ms  {r['rate'] / 1e6:7.1f}M/s  (CPU {r['best_cpu_s'] * 1e3:8.2f} ms)  "
          f"{'ok' if r['ok'] else 'WRONG'}")
  total_n, total_s = sum(r["thread_instructions"] for r in rows), sum(r["best_s"] for r in rows)
  total_c = sum(r["best_cpu_s"] for r in rows)
  print(f"  all: {total_n} thread-instructions in {total_s * 1e3:.1f} ms: {total_n / total_s / 1e6:.1f}M/s "
        f"(by CPU time {total_c * 1e3:.1f} ms: {total_n / total_c / 1e6:.1f}M/s; target >= {TARGET_P6 / 1e6:.0f}M)")


def parse_times(sizes=(10_000, 100_000, 1_000_000)) -> list[tuple[int, float]]:
  """Seconds to parse a module whose one statement (a .global initializer) has about `size` characters."""
  import time
  head = ".version 8.0\n.target sm_90\n.address_size 64\n"
  out = []
  for size in sizes:
    n = size // 7
    text = head + f".global .align 4 .u32 tab[{n}] = {{{', '.join(str(100000 + i) for i in range(n))}}};\n" + \
      ".visible .entry k() { ret; }\n"
    t0 = time.perf_counter()
    parse(text)
    out.append((len(text), time.perf_counter() - t0))
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=7)
  ap.add_argument("--n", type=int, default=65536)
  ap.add_argument("--corpus", action="store_true", help="every corpus kernel instead of the vector add")
  ap.add_argument("--parse", action="store_true", help="parse time against statement length")
  ap.add_argument("--threads", type=int, nargs="*", default=[65536],
                  help="corpus sizes (threads per kernel) besides the fixture's own; 0: none")
  ap.add_argument("--json", action="store_true", help="P6's figures (vector add at 65,536 and 1M floats, the corpus)")
  args = ap.parse_args()
  sizes_c = [t for t in args.threads if t > 0]
  if args.json:   # "corpus"/"corpus_rate": the fixture's sizes (what bench/all.py prints); "corpus_sizes": the rest
    import json
    sizes = {str(n): vector_add_rate(n, args.runs) for n in (65536, 1 << 20)}
    rows = corpus_rates(min(args.runs, 3))
    grown = {str(t): corpus_rates(min(args.runs, 3), t) for t in sizes_c}
    def rate(v, key="best_s"): return sum(r["thread_instructions"] for r in v) / sum(r[key] for r in v)
    print(json.dumps({"vadd": sizes, "corpus": rows, "corpus_rate": rate(rows),
                      "corpus_sizes": {t: {"rows": v, "rate": rate(v), "cpu_rate": rate(v, "best_cpu_s")}
                                       for t, v in grown.items()},
                      "target": TARGET_P6, "ok": all(v["ok"] for v in sizes.values()) and
                      all(r["ok"] for v in [rows, *grown.values()] for r in v)}))
    return
  if args.parse:
    for chars, secs in parse_times():
      print(f"  one statement of {chars:>9} characters: parsed in {secs * 1e3:8.1f} ms ({chars / secs / 1e6:.1f} MB/s)")
    return
  if args.corpus:
    runs = min(args.runs, 3)
    _corpus_table(corpus_rates(runs), f"PTX interpreter on the CUDA corpus (22 kernels, clang-19 -O2 PTX) at the "
                                      f"fixture's sizes; best of {runs} runs")
    for t in sizes_c:
      _corpus_table(corpus_rates(runs, t), f"the same kernels grown to about {t} threads each; best of {runs} runs")
    return
  r = vector_add_rate(args.n, args.runs)
  print(f"PTX interpreter, vector add of {args.n} floats (clang-19 PTX, 256 threads per CTA)")
  print(f"  thread-instructions per run: {r['thread_instructions']}")
  print(f"  run time: median {r['median_s'] * 1e3:.2f} ms, best {r['best_s'] * 1e3:.2f} ms ({args.runs} runs)")
  print(f"  rate: {r['rate'] / 1e6:.1f}M thread-instructions/s (target >= {TARGET / 1e6:.0f}M): "
        f"{'met' if r['rate'] >= TARGET else 'NOT met'}; result {'correct' if r['ok'] else 'WRONG'}")


if __name__ == "__main__":
  main()
