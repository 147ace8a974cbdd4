"""Python calls and bytecodes per repeat launch of an empty kernel (s_endpgm on MOCK+AMD, a PTX `ret` on MOCK+NV),
counted by tracing the interpreter (sys.settrace with opcode events): a figure that does not depend on the machine's
load, unlike the times of bench/launch.py and bench/nv.py. Builtins and C calls are not counted (the tracer sees Python
frames only).

    .venv/bin/python bench/launch_calls.py [--launches 50] [--device MOCK+AMD|MOCK+NV] [-v]

-v lists the functions, the most bytecodes first."""
from __future__ import annotations

import argparse
import collections
import os
import sys


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--launches", type=int, default=50)
  ap.add_argument("--device", default="MOCK+AMD", choices=("MOCK+AMD", "MOCK+NV"))
  ap.add_argument("-v", action="store_true", help="per function: calls and bytecodes per launch")
  args = ap.parse_args(argv)
  import hcq
  root = os.path.dirname(os.path.abspath(hcq.__file__)) + os.sep
  calls, ops = collections.Counter(), collections.Counter()

  def name(code) -> str:
    return f"{code.co_filename.removeprefix(root)}:{code.co_name}"

  def local(frame, event, arg):
    if event == "opcode": ops[name(frame.f_code)] += 1
    return local

  def start(frame, event, arg):
    frame.f_trace_opcodes = True
    calls[name(frame.f_code)] += 1
    return local

  n = args.launches
  with hcq.open(args.device) as dev:
    if args.device == "MOCK+NV":
      sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
      from nv import EMPTY_PTX          # bench/nv.py's kernel: the one it times
      prog = dev.load(EMPTY_PTX, "empty")
    else:
      from hcq.drivers.amd.kernels import demo_code_object
      prog = dev.load(demo_code_object(), "empty")
    for _ in range(20): prog(global_size=(1,), local_size=(1,))    # caches warm: the repeat launch is counted
    dev.synchronize()
    sys.settrace(start)
    try:
      for _ in range(n): prog(global_size=(1,), local_size=(1,))
    finally: sys.settrace(None)
    dev.synchronize()
    if dev.timeline.signal.value != dev.timeline.value:
      raise SystemExit(f"{dev.name}: the timeline signal holds {dev.timeline.signal.value}, {dev.timeline.value} submitted")
  print(f"{dev.name}: per repeat launch of an empty kernel: {sum(calls.values()) / n:.1f} Python calls, "
        f"{sum(ops.values()) / n:.0f} bytecodes")
  if args.v:
    for k in sorted(calls, key=lambda k: -ops[k]): print(f"  {calls[k] / n:5.2f} calls {ops[k] / n:7.1f} bytecodes  {k}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
