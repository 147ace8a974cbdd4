#!/usr/bin/env python3
"""Throughput of the mock Adreno's ir3 emulator (mockgpu/qcom/ir3) on MOCK+QCOM, in fiber-instructions per second.

    .venv/bin/python bench/ir3_emu.py [--runs 5] [--json] [--profile]

Kernels (every result checked against numpy):
  - vadd (tests/qcom/programs/vadd.asm, with its @buf sizes raised to the grid) at 65,536 and 1,048,576 fibers
    (work-groups of 64): the issue 33 P9 target is >= 100M fiber-instructions/s at 65,536;
  - loop (tests/qcom/programs/loop.asm: a loop whose trip count differs per fiber, so the fibers diverge) over
    1,024 work-groups, out[lid] = 0 + 1 + ... + lid;
  - reduce (tests/qcom/programs/reduce.asm: a work-group sum through local memory, a barrier per level) over 1,024
    work-groups;
  - the ALU loop of bench/qcom.py (uniform control flow, 12 ALU instructions per iteration), 64 groups x 200
    iterations, its registers checked through a store of the final values.

A fiber-instruction is one instruction run by one fiber, as the mock's command processor counts them
(mockgpu/qcom/cp.py `instructions`: an (rptN) ALU instruction counts N + 1, a nop with (rptN) one). The time is the
launch with its wait (prog(..., wait=True)), as a user sees it, best of --runs after a warm-up launch (which
decodes the program). --profile prints cProfile's top functions of one vadd launch at 65,536 fibers.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

import numpy as np

import hcq

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "qcom" / "programs"

ALU_LOOP = b"""@localsize 64, 1, 1
@buf %d
@const(c0.x) %d, 0, 0, 0
@invocationid(r0.x)
@wgid(r48.x)
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, c0.x
mov.f32f32 r2.x, (1.0)
mov.u32u32 r3.x, r0.x
shl.b r4.x, r48.x, 6
(rpt2)nop
add.u r4.x, r4.x, r0.x
loop:
add.u r1.x, r1.x, 1
mul.f r2.y, r2.x, r2.x
xor.b r3.y, r3.x, r0.x
shl.b r3.z, r0.x, 1
cmps.u.lt p0.x, r1.x, r1.y
add.f r2.z, r2.y, (0.5)
max.u r3.w, r3.y, r0.x
and.b r3.x, r3.z, r0.x
or.b r1.z, r1.y, r0.x
mad.f32 r2.w, r2.z, r2.x, r2.y
add.u r3.y, r3.w, 1
br p0.x, #loop
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r3.y, r4.x, 0
end
nop
"""


def _sized(text: bytes, *dwords: int) -> bytes:
  """The program with its @buf headers' sizes replaced, in order (the corpus programs name the sizes their tests
  use); one size applies to every @buf."""
  out, k = [], 0
  for line in text.splitlines():
    if line.startswith(b"@buf"):
      line = b"@buf %d" % dwords[min(k, len(dwords) - 1)]
      k += 1
    out.append(line)
  return b"\n".join(out) + b"\n"


def _launch(dev, cp, prog, bufs, groups, runs):
  prog(*bufs, global_size=(groups,), local_size=prog.kernel.local_size, wait=True)      # warm-up: decodes
  times, cpu, count = [], [], 0
  for _ in range(runs):
    before = cp.instructions
    t0, c0 = time.perf_counter(), time.process_time()
    prog(*bufs, global_size=(groups,), local_size=prog.kernel.local_size, wait=True)
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    count = cp.instructions - before
  best = min(times)
  return {"fiber_instructions": count, "best_s": best, "median_s": statistics.median(times),
          "cpu_median_s": statistics.median(cpu), "mfips": count / best / 1e6,
          "mfips_median": count / statistics.median(times) / 1e6}


def vadd(dev, cp, fibers: int, runs: int, launch=None) -> dict:
  prog = dev.load(_sized((PROGRAMS / "vadd.asm").read_bytes(), fibers), "vadd")
  rng = np.random.default_rng(fibers)
  a, b = rng.standard_normal(fibers).astype(np.float32), rng.standard_normal(fibers).astype(np.float32)
  bufs = [dev.alloc(fibers * 4) for _ in range(3)]
  dev.copyin(bufs[0], a)
  dev.copyin(bufs[1], b)
  dev.copyin(bufs[2], np.zeros(fibers, np.float32))
  r = (launch or _launch)(dev, cp, prog, bufs, fibers // 64, runs)
  got = np.frombuffer(dev.copyout(bufs[2]), np.float32)
  np.testing.assert_array_equal(got, a + b)
  for x in bufs: dev.free(x)
  return dict(r, kernel="vadd", fibers=fibers)


def loop(dev, cp, groups: int, runs: int) -> dict:
  prog = dev.load((PROGRAMS / "loop.asm").read_bytes(), "loop")
  buf = dev.alloc(64 * 4)
  r = _launch(dev, cp, prog, [buf], groups, runs)
  lid = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(buf), np.uint32), lid * (lid + 1) // 2)
  dev.free(buf)
  return dict(r, kernel="loop", fibers=groups * 64)


def reduce(dev, cp, groups: int, runs: int) -> dict:
  prog = dev.load(_sized((PROGRAMS / "reduce.asm").read_bytes(), groups * 64, groups), "reduce")
  inp = np.random.default_rng(groups).integers(0, 1 << 32, groups * 64, dtype=np.uint64).astype(np.uint32)
  bufs = [dev.alloc(groups * 64 * 4), dev.alloc(groups * 4)]
  dev.copyin(bufs[0], inp)
  r = _launch(dev, cp, prog, bufs, groups, runs)
  want = (inp.reshape(groups, 64).astype(np.uint64).sum(1) & 0xFFFFFFFF).astype(np.uint32)
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(bufs[1]), np.uint32), want)
  for x in bufs: dev.free(x)
  return dict(r, kernel="reduce", fibers=groups * 64)


def alu_loop(dev, cp, groups: int, iterations: int, runs: int) -> dict:
  n = groups * 64
  prog = dev.load(ALU_LOOP % (n, iterations), "alu_loop")
  buf = dev.alloc(n * 4)
  r = _launch(dev, cp, prog, [buf], groups, runs)
  lid = np.arange(n, dtype=np.uint32) % 64
  # the last iteration: r3.x = (lid << 1) & lid from the one before (or lid before the first), r3.y = (r3.x ^ lid)
  # max lid, + 1; for iterations >= 2, r3.x = (2 lid) & lid
  x = ((lid << 1) & lid) if iterations >= 2 else lid
  want = np.maximum(x ^ lid, lid) + 1
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(buf), np.uint32), want)
  dev.free(buf)
  return dict(r, kernel=f"alu_loop x{iterations}", fibers=n)


def collect(runs: int) -> dict:
  with hcq.open("MOCK+QCOM") as dev:
    cp = dev.owned_os.devices[0].cp             # the mock's command processor counts the fiber-instructions it ran
    out = [vadd(dev, cp, 65536, runs), vadd(dev, cp, 1 << 20, max(2, runs // 2)), loop(dev, cp, 1024, runs),
           reduce(dev, cp, 1024, runs), alu_loop(dev, cp, 64, 200, max(2, runs // 2))]
  try: load = open("/proc/loadavg").read().split()[:3]
  except OSError: load = []
  return {"kernels": out, "loadavg": load, "target_mfips": 100.0}


def profile() -> None:
  import cProfile
  import pstats
  with hcq.open("MOCK+QCOM") as dev:
    cp = dev.owned_os.devices[0].cp
    pr = cProfile.Profile()
    def launch(*args):
      prog, bufs, groups = args[2:5]
      prog(*bufs, global_size=(groups,), local_size=prog.kernel.local_size, wait=True)      # warm-up: decodes
      pr.enable()
      r = _launch(*args)
      pr.disable()
      return r
    vadd(dev, cp, 65536, 3, launch)
  pstats.Stats(pr).sort_stats("tottime").print_stats(25)


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--runs", type=int, default=5)
  ap.add_argument("--json", action="store_true")
  ap.add_argument("--profile", action="store_true")
  a = ap.parse_args()
  if a.profile:
    profile()
    return 0
  r = collect(a.runs)
  if a.json:
    print(json.dumps(r))
    return 0
  for k in r["kernels"]:
    print(f"{k['kernel']:<14} {k['fibers']:>9,} fibers: {k['fiber_instructions'] / 1e6:8.2f}M fiber-instructions, "
          f"best {k['best_s'] * 1e3:8.2f} ms ({k['mfips']:6.1f}M/s), median {k['median_s'] * 1e3:8.2f} ms "
          f"({k['mfips_median']:6.1f}M/s), CPU {k['cpu_median_s'] * 1e3:8.2f} ms")
  print(f"(results checked against numpy; target >= {r['target_mfips']:.0f}M fiber-instructions/s on vadd at 65,536 "
        f"fibers; /proc/loadavg {' '.join(r['loadavg'])} on {os.cpu_count()} CPUs)")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
