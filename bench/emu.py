#!/usr/bin/env python3
"""Throughput of the RDNA3 wave emulator on a clang-19 vector add over 65,536 floats (local size 64: 2,048 waves).

    .venv/bin/python bench/emu.py [--runs 15]
    .venv/bin/python bench/emu.py --small     # fixed per-dispatch cost: device time of tiny dispatches (issue 6)
    .venv/bin/python bench/emu.py --waves     # wave64 (gfx942) next to wave32 (gfx1100, gfx1200), same kernel
    .venv/bin/python bench/emu.py --sizes     # 65,536, 1M and 4M floats in one run (issue 33: ratios to 65,536)

The emulator is measured from outside, as any user sees it: hcq.open("MOCK+AMD"), dev.load, dev.alloc/copyin and
prog(..., wait=True), whose return value is the kernel's device time (the mock GPU's timestamps written before and
after the dispatch: the emulator's run plus the few PM4 packets between them). The work of a dispatch is counted from
the kernel's code with hcq's disassembler (bench/wavecount.py: the instructions one wave executes, s_endpgm
included; vadd is straight-line code) times the number of waves; wave-instructions/s = that count / device time.

Prints the wave-instruction count, the dispatch time (median and best of the runs, after one warm-up dispatch that
also translates the code), the process CPU time per dispatch and wave-instructions per second. The target (issue 5):
>= 3.5M wave-instructions/s, i.e. the whole dispatch in <= 18 ms on the project's 2-core machine. The machine is
shared: expect noise.

--sizes (issue 33): the same vadd over 65,536, 1,048,576 and 4,194,304 floats in one process (--runs dispatches of each after a warm-up
dispatch of each: translation, and the native build of the block where a C compiler is at hand, see
mockgpu/amd/emu/native.py), every result checked against numpy; per size the best and median device time and
wave-instructions/s, and the ratio of each size's throughput to 65,536's. Targets: >= 100M wave-instructions/s at
65,536 floats, and >= 0.9x that at 1M and 4M.

--waves (issue 19): the same OpenCL vadd, compiled by clang-19 for gfx1100 and gfx1200 (wave32) and gfx942 (wave64;
the committed fixtures), each launched on MOCK+AMD posing as that target (Config.mock_gpu) over the same 65,536
floats in work-groups of 64. Per target: waves, wave-instructions per dispatch (counted from the code as above), the
device time (median and best of the runs after a warm-up), the process CPU time of a launch (median), and
wave-instructions/s and lane-operations/s (= wave-instructions x wave size / device time: every lane of every wave of
vadd is active). Target: wave64 at least as many lane-operations/s as wave32. The machine is shared: a device time
includes any time the process was not running (the best of the runs is the least disturbed), the CPU time does not.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

import numpy as np

import hcq
from wavecount import kernel_waves, wave_instructions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HSACO = os.path.join(ROOT, "tests", "fixtures", "opencl", "hsaco")
VADD = """kernel void vadd(global const float *a, global const float *b, global float *c) {
  int i = get_global_id(0);
  c[i] = a[i] + b[i];
}
"""
FIXTURE = os.path.join(HSACO, "vadd.hsaco")


def vadd_code_object() -> tuple[bytes, str]:
  if os.path.exists(FIXTURE):
    with open(FIXTURE, "rb") as f: return f.read(), os.path.relpath(FIXTURE, ROOT)
  sys.path.insert(0, ROOT)
  from tests.emu import clbuild   # builds with clang-19 (the fixture is committed: this is a fallback)
  return clbuild.build(VADD), "built with clang-19 from the source in bench/emu.py"


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=15)
  ap.add_argument("--small", action="store_true", help="per-dispatch device time of tiny dispatches instead")
  ap.add_argument("--waves", action="store_true", help="wave64 (gfx942) next to wave32 (gfx1100, gfx1200) instead")
  ap.add_argument("--sizes", action="store_true", help="65,536, 1M and 4M floats in one run instead")
  ap.add_argument("--json", action="store_true", help="--sizes: print the figures as one JSON object")
  ap.add_argument("--n", type=int, default=65536, help="--waves: floats in the vector add (default 65,536)")
  args = ap.parse_args()
  if args.waves: return wave_sizes(args.runs, args.n)
  if args.sizes: return sizes(args.runs, args.json)
  with hcq.open("MOCK+AMD") as dev:
    if args.small: return small_dispatches(dev)
    vadd(dev, args.runs)


def vadd(dev, runs: int) -> None:
  blob, origin = vadd_code_object()
  n, local = 65536, 64
  prog = dev.load(blob, "vadd")
  rng = np.random.default_rng(0)
  a = rng.random(n, dtype=np.float32)
  b = rng.random(n, dtype=np.float32)
  da, db, dc = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
  dev.copyin(da, a)
  dev.copyin(db, b)
  zeros = np.zeros(n, np.float32)

  def run() -> float:
    dev.copyin(dc, zeros)
    seconds = prog(da, db, dc, global_size=(n // local,), local_size=(local,), wait=True)
    if not np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b): raise SystemExit("vadd result differs from numpy")
    return seconds

  t0 = time.perf_counter()
  run()
  cold = time.perf_counter() - t0
  times, cpu = [], []
  for _ in range(runs):
    c0 = time.process_time()
    times.append(run())
    cpu.append(time.process_time() - c0)
  med, best = statistics.median(times), min(times)
  waves = kernel_waves(blob, "vadd", n // local, local)
  count = wave_instructions(blob, "vadd") * waves
  print(f"code object: {origin}")
  print(f"waves: {waves}, wave-instructions per dispatch: {count} ({count / waves:.0f} per wave, counted from the code)")
  print(f"first dispatch (incl. translation): {cold * 1e3:.2f} ms")
  print(f"dispatch over {runs} runs (device timestamps): median {med * 1e3:.2f} ms, best {best * 1e3:.2f} ms")
  print(f"process CPU time per dispatch (launch, wait, zeroing and checking the output): median "
        f"{statistics.median(cpu) * 1e3:.2f} ms (wall and CPU differ when other processes load the machine: check `uptime`)")
  print(f"throughput: median {count / med / 1e6:.2f}M, best {count / best / 1e6:.2f}M wave-instructions/s "
        f"(target >= 3.5M/s, dispatch <= 18 ms): {'MET' if med <= 0.018 else 'NOT MET'} at the median")


SIZES = (65536, 1 << 20, 1 << 22)


def sizes(runs: int, as_json: bool = False) -> dict:
  """vadd at each of SIZES in one process (see the module docstring); returns {n: figures}."""
  import json
  blob, origin = vadd_code_object()
  local, rng, out = 64, np.random.default_rng(0), {}
  per_wave = wave_instructions(blob, "vadd")
  with hcq.open("MOCK+AMD") as dev:
    prog = dev.load(blob, "vadd")
    for n in SIZES:
      a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
      da, db, dc = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
      dev.copyin(da, a)
      dev.copyin(db, b)
      times, cpu = [], []
      for i in range(1 + max(3, runs)):
        dev.copyin(dc, np.zeros(n, np.float32))
        c0 = time.process_time()
        t = prog(da, db, dc, global_size=(n // local,), local_size=(local,), wait=True)
        c1 = time.process_time()
        if not np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b):
          raise SystemExit(f"vadd over {n} floats differs from numpy")
        if i: times.append(t), cpu.append(c1 - c0)
      for d in (da, db, dc): dev.free(d)
      count = per_wave * kernel_waves(blob, "vadd", n // local, local)
      out[n] = {"floats": n, "wave_instructions": count, "best_ms": min(times) * 1e3,
                "median_ms": statistics.median(times) * 1e3, "best_mwips": count / min(times) / 1e6,
                "median_mwips": count / statistics.median(times) / 1e6,
                # the process CPU time of the whole launch (driver, mock, emulator): what a loaded machine's
                # scheduling does not stretch (a long dispatch is preempted more often than a short one)
                "cpu_best_ms": min(cpu) * 1e3, "cpu_mwips": count / max(min(cpu), 1e-9) / 1e6}
  base = out[SIZES[0]]["best_mwips"]
  for r in out.values():
    r["ratio_to_65536"] = r["best_mwips"] / base
    r["cpu_ratio_to_65536"] = r["cpu_mwips"] / out[SIZES[0]]["cpu_mwips"]
  if as_json:
    print(json.dumps({"code_object": origin, "sizes": list(out.values())}))
    return out
  print(f"vadd, code object {origin}, work-groups of {local}; device time after a warm-up, results checked")
  print(f"{'floats':>9} {'wave-insts':>10} {'best':>9} {'median':>9} {'best M/s':>9} {'median M/s':>10} {'x 65,536':>8}"
        f" | {'CPU best':>9} {'CPU M/s':>8} {'x 65,536':>8}")
  for r in out.values():
    print(f"{r['floats']:>9} {r['wave_instructions']:>10} {r['best_ms']:7.2f}ms {r['median_ms']:7.2f}ms "
          f"{r['best_mwips']:9.1f} {r['median_mwips']:10.1f} {r['ratio_to_65536']:8.2f} | {r['cpu_best_ms']:7.2f}ms "
          f"{r['cpu_mwips']:8.1f} {r['cpu_ratio_to_65536']:8.2f}")
  ok = base >= 100 and all(r["ratio_to_65536"] >= 0.9 for r in out.values())
  cpu_ok = out[SIZES[0]]["cpu_mwips"] >= 100 and all(r["cpu_ratio_to_65536"] >= 0.9 for r in out.values())
  print(f"targets (>= 100M wave-instructions/s at 65,536 floats; >= 0.9x at 1M and 4M; best of the runs): "
        f"{'MET' if ok else 'NOT MET'} by device time, {'MET' if cpu_ok else 'NOT MET'} by CPU time of the launch")
  return out


def wave_sizes(runs: int, n: int = 65536) -> None:
  """The same vadd on each target. n sets the size: at 65,536 floats a dispatch's fixed cost (set-up, the block's
  translation lookup, copies of the register files) is a visible share of its time, and gfx942's code is shorter (20
  instructions per wave against 28), so its lane-operations per second weigh that cost more; a larger n measures the
  instruction throughput itself."""
  from hcq.config import from_env
  local = 64
  rng = np.random.default_rng(0)
  a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  rows = []
  for mcpu in ("gfx1100", "gfx1200", "gfx942"):
    path = FIXTURE if mcpu == "gfx1100" else os.path.join(HSACO, mcpu, "vadd.hsaco")
    with open(path, "rb") as f: blob = f.read()
    with hcq.open("MOCK+AMD", dataclasses.replace(from_env(), mock_gpu=mcpu)) as dev:
      prog = dev.load(blob, "vadd")
      da, db, dc = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
      dev.copyin(da, a)
      dev.copyin(db, b)
      zeros = np.zeros(n, np.float32)

      def run():
        dev.copyin(dc, zeros)
        c0 = time.process_time()
        seconds = prog(da, db, dc, global_size=(n // local,), local_size=(local,), wait=True)
        cpu = time.process_time() - c0
        if not np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b):
          raise SystemExit(f"{mcpu} vadd result differs from numpy")
        return seconds, cpu
      run()
      results = [run() for _ in range(runs)]
    device = [t for t, _ in results]
    cpu = statistics.median(c for _, c in results)
    lanes = 64 if mcpu == "gfx942" else 32
    waves = n // lanes
    count = wave_instructions(blob, "vadd") * waves
    rows.append((mcpu, lanes, waves, count, statistics.median(device), min(device), cpu))
  print(f"vadd over {n} floats, work-groups of {local}, MOCK+AMD posing as each target, {runs} runs after a warm-up")
  print(f"{'target':<8} {'wave':>4} {'waves':>6} {'wave-insts':>10} {'device median':>13} {'best':>7} "
        f"{'CPU/launch':>10}  {'wave-insts/s':>12} {'lane-ops/s':>10} (per median; per best)")
  for mcpu, lanes, waves, count, med, best, cpu in rows:
    print(f"{mcpu:<8} {lanes:>4} {waves:>6} {count:>10} {med * 1e3:10.2f} ms {best * 1e3:4.2f} ms {cpu * 1e3:7.2f} ms"
          f"  {count / med / 1e6:11.2f}M {count * lanes / med / 1e6:9.0f}M ({count / best / 1e6:.2f}M; "
          f"{count * lanes / best / 1e6:.0f}M)")
  for label, col in (("median", 4), ("best", 5)):
    w32 = max(r[3] * r[1] / r[col] for r in rows if r[1] == 32)
    w64 = rows[-1][3] * 64 / rows[-1][col]
    print(f"wave64 (gfx942) / best wave32 lane-operations per second ({label} device time): {w64 / w32:.2f} "
          f"({'MET' if w64 >= w32 else 'NOT MET'}: target >= 1)")


def small_dispatches(dev, repeat: int = 7, count: int = 300) -> None:
  """The emulator's fixed cost per dispatch (what a launch of a small kernel pays): device time of a dispatch (the
  mock's timestamps around it: wall-clock time, hence the median of `count` timed launches, best of `repeat`), for the s_endpgm-only kernel (1
  thread), a vector add of 64 floats (2 waves; one block) and a bounded copy of 40 of 64 words (2 waves; the bounds
  check makes it several blocks), all from the committed fixtures, repeated with the same shape (as a launch loop
  does). Also the process CPU time of a whole launch (driver, mock command processor, emulator) for comparison."""
  def load(name):
    with open(os.path.join(HSACO, f"{name}.hsaco"), "rb") as f: return dev.load(f.read(), name)
  empty, vadd, copy = load("empty"), load("vadd"), load("copy_u32")
  a = np.arange(64, dtype=np.float32)
  da, db, dc, dd = (dev.alloc(256) for _ in range(4))
  dev.copyin(da, a)
  dev.copyin(db, 2 * a)
  dev.copyin(dd, np.zeros(64, np.uint32))
  launches = [("empty kernel, 1 thread", lambda wait: empty(global_size=(1,), local_size=(1,), wait=wait)),
              ("vadd, 64 floats (2 waves)", lambda wait: vadd(da, db, dc, global_size=(1,), local_size=(64,), wait=wait)),
              ("copy_u32, 40 of 64 (2 waves)",
               lambda wait: copy(da, dd, 40, global_size=(1,), local_size=(64,), wait=wait))]
  for name, launch in launches:
    launch(True)   # translation
    device = min(statistics.median([launch(True) for _ in range(count)]) for _ in range(repeat))
    cpu = min(_cpu_loop(dev, launch, count) for _ in range(repeat))
    print(f"{name:<28} {device * 1e6:8.1f} us device time per dispatch, {cpu * 1e6:8.1f} us CPU per whole launch "
          f"(device: median of {count} launches, CPU: mean of {count}; best of {repeat})")
  if not np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), 3 * a): raise SystemExit("vadd result differs from numpy")
  d = np.frombuffer(dev.copyout(dd), np.uint32)
  if not np.array_equal(d, np.where(np.arange(64) < 40, a.view(np.uint32), 0)): raise SystemExit("copy_u32 differs")


def _cpu_loop(dev, launch, count: int) -> float:
  """CPU time per launch of `count` asynchronous launches and one synchronize."""
  t0 = time.process_time()
  for _ in range(count): launch(False)
  dev.synchronize()
  return (time.process_time() - t0) / count


if __name__ == "__main__":
  main()
