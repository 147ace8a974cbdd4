#!/usr/bin/env python3
"""P9 (issue 33): MOCK+QCOM launch plus wait of an empty ir3 program (one fiber), per launch: each launch waits for
its own completion (the timeline, IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID when it blocks). Prints the best and the
median of --repeat runs of --launches launches each, by the wall clock and by the calling thread's CPU time (on a
loaded machine the wall clock counts the time other processes had the CPU). The results are checked: every launch's
timeline value reached the timeline signal, and a vadd launched with the same path matches numpy. --calls also
counts the Python calls and bytecodes of a repeat launch by tracing the interpreter (sys.settrace with opcode
events, as bench/launch_calls.py does for MOCK+AMD): a figure the machine's load does not change.

    .venv/bin/python bench/qcom_launch.py [--device MOCK+QCOM] [--launches 200] [--repeat 7] [--calls] [--json]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time

EMPTY = b"@localsize 1, 1, 1\nend\nnop\n"
TARGET_US = 50.0


def check_vadd(dev) -> None:
  """A vadd (tests/qcom/programs/vadd.asm) through the same launch path, checked against numpy."""
  import numpy as np
  here = os.path.dirname(os.path.abspath(__file__))
  text = open(os.path.join(here, "..", "tests", "qcom", "programs", "vadd.asm"), "rb").read()
  prog = dev.load(text, "vadd")
  a, b = np.arange(256, dtype=np.float32), np.linspace(-1, 1, 256, dtype=np.float32)
  bufs = [dev.alloc(1024) for _ in range(3)]
  dev.copyin(bufs[0], a)
  dev.copyin(bufs[1], b)
  for _ in range(3): prog(*bufs, global_size=(4,), local_size=(64, 1, 1), wait=True)
  got = np.frombuffer(dev.copyout(bufs[2]), np.float32)
  if not np.array_equal(got, a + b): raise SystemExit(f"{dev.name}: vadd differs from numpy")


def count_calls(prog, n: int = 50) -> tuple[float, float]:
  """(Python calls, bytecodes) per launch and wait of prog, counted over n traced launches."""
  calls, ops = collections.Counter(), collections.Counter()

  def local(frame, event, arg):
    if event == "opcode": ops[frame.f_code] += 1
    return local

  def start(frame, event, arg):
    frame.f_trace_opcodes = True
    calls[frame.f_code] += 1
    return local

  sys.settrace(start)
  try:
    for _ in range(n): prog(global_size=(1,), local_size=(1,), wait=True)
  finally: sys.settrace(None)
  return sum(calls.values()) / n, sum(ops.values()) / n


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--device", default="MOCK+QCOM")
  ap.add_argument("--launches", type=int, default=200)
  ap.add_argument("--repeat", type=int, default=7)
  ap.add_argument("--calls", action="store_true", help="also count Python calls and bytecodes per launch")
  ap.add_argument("--json", action="store_true")
  a = ap.parse_args(argv)
  import hcq
  with hcq.open(a.device) as dev:
    prog = dev.load(EMPTY, "empty")
    for _ in range(20): prog(global_size=(1,), local_size=(1,), wait=True)        # the shape, the decoder
    walls, cpus = [], []
    for _ in range(a.repeat):
      # CPU time of this thread, where the driver and the mock both run (MOCK+QCOM has no worker thread): the
      # process's CPU time also counts numpy's OpenBLAS threads, which spin for a while after numpy's import
      # (53.7 us "per launch" against 33.1 us of wall clock here; 32.2 us for both with OPENBLAS_NUM_THREADS=1)
      w0, c0 = time.perf_counter(), time.thread_time()
      for _ in range(a.launches): prog(global_size=(1,), local_size=(1,), wait=True)
      walls.append((time.perf_counter() - w0) / a.launches)
      cpus.append((time.thread_time() - c0) / a.launches)
      if dev.timeline.signal.value != dev.timeline.value:
        raise SystemExit(f"{dev.name}: the timeline signal is at {dev.timeline.signal.value}, {dev.timeline.value} submitted")
    counted = count_calls(prog) if a.calls else None
    if dev.timeline.signal.value != dev.timeline.value:
      raise SystemExit(f"{dev.name}: the timeline signal is at {dev.timeline.signal.value}, {dev.timeline.value} submitted")
    check_vadd(dev)
    name = dev.name
  r = {"device": name, "launches": a.launches, "repeat": a.repeat, "wait_best_s": min(walls),
       "wait_median_s": statistics.median(walls), "wait_cpu_best_s": min(cpus), "wait_cpu_median_s": statistics.median(cpus),
       "target_s": TARGET_US * 1e-6, "checked": True}
  if counted: r["python_calls"], r["bytecodes"] = counted
  if a.json:
    print(json.dumps(r))
    return 0
  print(f"{name}: launch + wait of an empty program, per launch ({a.launches} launches, {a.repeat} runs; vadd checked)")
  print(f"  wall clock: best {r['wait_best_s'] * 1e6:.1f} us, median {r['wait_median_s'] * 1e6:.1f} us")
  print(f"  CPU time:   best {r['wait_cpu_best_s'] * 1e6:.1f} us, median {r['wait_cpu_median_s'] * 1e6:.1f} us")
  if counted: print(f"  traced:     {counted[0]:.1f} Python calls, {counted[1]:.0f} bytecodes per launch and wait")
  print(f"  target <= {TARGET_US:.0f} us: {'met' if r['wait_best_s'] * 1e6 <= TARGET_US else 'not met'} "
        f"(load average {os.getloadavg()[0]:.1f})")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
