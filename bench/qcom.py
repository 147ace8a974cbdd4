#!/usr/bin/env python3
"""MOCK+QCOM (or a real Adreno with --device KGSL+QCOM): launch overhead of an empty ir3 program and the ir3
emulator's speed.

    .venv/bin/python bench/qcom.py [--device MOCK+QCOM] [--launches 200] [--iterations 2000] [--groups 16]

- launch overhead: an empty program (end) launched back to back and waited for once at the end (host-side
  microseconds per launch: packets patched, the indirect buffer written, IOCTL_KGSL_GPU_COMMAND), and launched with a
  wait each time (the round trip through the timeline and IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID);
- emulator speed: a loop of ALU instructions run by groups x 64 fibers; fiber-instructions are counted from the
  program's shape (every fiber runs the same instructions), so the rate is fiber-instructions per second of the whole
  launch, as a user sees it (the ISA decoding of a new program is excluded by a warm-up launch).
"""
from __future__ import annotations

import argparse
import statistics
import time

import hcq

EMPTY = b"@localsize 1, 1, 1\nend\nnop\n"
BODY = 9                      # ALU instructions in the loop body, besides the counter, the compare and the branch
# scheduled as Mesa's ir3_legalize would: an ALU result is read 3 cycles after it is written (alu_to_alu), p0 6
# cycles after the compare (non_alu) -- the mock's strict sync mode holds the program to it
LOOP = b"""@localsize 64, 1, 1
@const(c0.x) %d, 0, 0, 0
@invocationid(r0.x)
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, c0.x
mov.f32f32 r2.x, (1.0)
mov.u32u32 r3.x, r0.x
(rpt2)nop
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
end
"""
SETUP, PER_ITERATION, TAIL = 5, BODY + 3, 1


def launch_overhead(dev, launches: int) -> dict:
  prog = dev.load(EMPTY, "empty")
  prog(global_size=(1,), local_size=(1,), wait=True)          # warm-up: the shape's command buffer, the decoder
  t0 = time.perf_counter()
  for _ in range(launches): prog(global_size=(1,), local_size=(1,))
  dev.synchronize()
  queued = (time.perf_counter() - t0) / launches
  waits = []
  for _ in range(max(launches // 4, 5)):
    t0 = time.perf_counter()
    prog(global_size=(1,), local_size=(1,), wait=True)
    waits.append(time.perf_counter() - t0)
  return {"queued_us": queued * 1e6, "waited_us": statistics.median(waits) * 1e6}


def emulator_rate(dev, iterations: int, groups: int, runs: int = 3) -> dict:
  prog = dev.load(LOOP % iterations, "alu_loop")
  prog(global_size=(1,), local_size=(64, 1, 1), wait=True)    # warm-up: decodes the program
  times = []
  for _ in range(runs):
    t0 = time.perf_counter()
    prog(global_size=(groups,), local_size=(64, 1, 1), wait=True)
    times.append(time.perf_counter() - t0)
  count = groups * 64 * (SETUP + iterations * PER_ITERATION + TAIL)
  best = min(times)
  return {"fiber_instructions": count, "best_s": best, "rate": count / best}


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--device", default="MOCK+QCOM")
  ap.add_argument("--launches", type=int, default=200)
  ap.add_argument("--iterations", type=int, default=2000)
  ap.add_argument("--groups", type=int, default=16)
  a = ap.parse_args()
  with hcq.open(a.device) as dev:
    lo = launch_overhead(dev, a.launches)
    print(f"{dev.name}: empty program: {lo['queued_us']:.1f} us per launch queued back to back, "
          f"{lo['waited_us']:.1f} us launch + wait")
    r = emulator_rate(dev, a.iterations, a.groups)
    print(f"ALU loop, {a.groups} x 64 fibers x {a.iterations} iterations: {r['fiber_instructions'] / 1e6:.1f}M "
          f"fiber-instructions in {r['best_s']:.3f} s = {r['rate'] / 1e6:.1f}M fiber-instructions/s")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
