#!/usr/bin/env python3
"""Cold start (issue 33, P3): a new process to a verified vector add on MOCK+AMD, against `python -c "import numpy"`,
both measured in the same run, alternately, as wall time of the whole process (interpreter start-up included).

    .venv/bin/python bench/cold_start.py [--runs 7] [--json]

The vadd process: import numpy and hcq, hcq.open("MOCK+AMD"), load the committed clang-19 vadd code object
(tests/fixtures/opencl/hsaco/vadd.hsaco), copy in 256 floats twice, launch (4 waves) and wait, copy out and compare
with numpy, close. Prints the median and best of each and the ratio of the medians. Target: ratio <= 2. The machine
is shared: the runs alternate so that both sides see the same load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VADD = """
import numpy as np, hcq
with open({path!r}, "rb") as f: blob = f.read()
with hcq.open("MOCK+AMD") as dev:
  prog = dev.load(blob, "vadd")
  n = 256
  a = np.arange(n, dtype=np.float32); b = 2 * a
  da, db, dc = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
  dev.copyin(da, a); dev.copyin(db, b)
  prog(da, db, dc, global_size=(n // 64,), local_size=(64,), wait=True)
  if not np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b): raise SystemExit("vadd differs from numpy")
"""


def _time(code: str) -> float:
  t0 = time.perf_counter()
  subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
  return time.perf_counter() - t0


def measure(runs: int) -> dict:
  vadd = VADD.format(path=os.path.join(ROOT, "tests", "fixtures", "opencl", "hsaco", "vadd.hsaco"))
  # warm the page cache and the bytecode caches: the warm-up writes the .pyc files even under PYTHONDONTWRITEBYTECODE
  # (an installed package has them; without them every run would compile the sources changed since they were written)
  write_pyc = "import sys; sys.dont_write_bytecode = False\n"
  _time(write_pyc + "import numpy"), _time(write_pyc + vadd)
  base, full = [], []
  for _ in range(runs):
    base.append(_time("import numpy"))
    full.append(_time(vadd))
  return {"numpy_import_median_s": statistics.median(base), "numpy_import_best_s": min(base),
          "vadd_process_median_s": statistics.median(full), "vadd_process_best_s": min(full),
          "ratio_median": statistics.median(full) / statistics.median(base), "ratio_best": min(full) / min(base)}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=7)
  ap.add_argument("--json", action="store_true")
  r = measure(ap.parse_args().runs)
  if ap.parse_args().json: return print(json.dumps(r))
  print(f"python -c 'import numpy': median {r['numpy_import_median_s']:.3f} s, best {r['numpy_import_best_s']:.3f} s")
  print(f"new process to a verified vadd on MOCK+AMD: median {r['vadd_process_median_s']:.3f} s, "
        f"best {r['vadd_process_best_s']:.3f} s")
  print(f"ratio: {r['ratio_median']:.2f} (medians), {r['ratio_best']:.2f} (bests); target <= 2: "
        f"{'MET' if r['ratio_median'] <= 2 else 'NOT MET'}")


if __name__ == "__main__":
  main()
