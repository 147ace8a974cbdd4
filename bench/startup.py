"""Start-up latency of a fresh process (the figures tests/amd/test_mock_amd.py and tests/test_registry.py asserted
before the rule that no test asserts a duration): the best of three runs, after one that writes the bytecode caches.

    .venv/bin/python bench/startup.py [--runs 3]

  open        `import hcq; hcq.open()` with no spec on a machine without GPUs (an empty device root): the mock, target 0.5 s
  vector add  import, open MOCK+AMD, load the demo code object, one 64-element vector add checked: target 0.5 s
  hcq demo    the whole `hcq demo` on MOCK+AMD (vector add and matmul, checked): target 1 s
The targets are the project's; a loaded machine misses them (the load average is printed with the figures)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

VECTOR_ADD = """
import numpy as np, hcq
from hcq.drivers.amd.kernels import demo_code_object
dev = hcq.open("MOCK+AMD")
p = dev.load(demo_code_object(), "vadd")
a = np.arange(64, dtype=np.float32); b = np.ones(64, np.float32)
da, db, dc = dev.alloc(256), dev.alloc(256), dev.alloc(256)
dev.copyin(da, a); dev.copyin(db, b)
p(da, db, dc, 64, global_size=(1,), local_size=(64,))
assert np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b)
"""
DEMO = "import sys; from hcq.cli import main; sys.exit(main(['demo', '--device', 'MOCK+AMD']))"
# no spec, on a machine without GPUs: a device root with nothing in it (argv[1]), given as a Config, not a variable
OPEN = "import sys, hcq; from hcq.config import Config; hcq.open(config=Config(dev_root=sys.argv[1])).close()"


def _best(code: str, args: list, runs: int) -> float:
  times = []
  for i in range(runs + 1):          # the first run writes the bytecode caches
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd="/")
    if r.returncode: raise SystemExit(f"failed: {r.stderr.strip().splitlines()[-1:]}")
    if i: times.append(time.perf_counter() - t0)
  return min(times)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--runs", type=int, default=3)
  args = ap.parse_args(argv)
  with tempfile.TemporaryDirectory() as empty:
    rows = [("open", OPEN, [empty], 0.5), ("vector add", VECTOR_ADD, [], 0.5), ("hcq demo", DEMO, [], 1.0)]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; best of {args.runs}")
    for name, code, argv, target in rows:
      t = _best(code, argv, args.runs)
      print(f"{name:<11} {t:6.3f} s  (target {target:g} s: {'met' if t <= target else 'MISSED'})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
