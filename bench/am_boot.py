"""AM boot time: hcq.open("MOCKPCI+AMD") (discovery, GMC, IH, PSP loading AMD's real firmware, SMU, RLC autoload,
queues) and the first kernel (the demo's empty one) to its end, in a fresh process each round (a cold start: imports
included), and the same inside one process (the boot alone, warm imports). Then the partial boot: a process killed
after its first kernel (MockOS.exit_process: SIGKILL, no close) and the next one opening the same mock GPU, which it
reuses (am.session.open_am, what hcq.open("MOCKPCI+AMD") calls, on one MockOS: hcq.open would build a fresh mock each time).

    HCQ_FIRMWARE_DIR=<firmware-amd-graphics 20230210-5 lib/firmware/amdgpu> .venv/bin/python bench/am_boot.py [--rounds 3]

The firmware folder: `python -c "from hcq.autogen import fwpackage; from hcq.config import from_env;
print(fwpackage.firmware_dir(from_env().autogen_cache))"` fetches and prints it. Any other spec (PCI+AMD on hardware)
may be given with --device."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

CHILD = """
import time
t0 = time.perf_counter()
import hcq
from hcq.drivers.amd.kernels import demo_code_object
with hcq.open({device!r}) as dev:
  t1 = time.perf_counter()
  dev.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)
  t2 = time.perf_counter()
print(f"{{t1 - t0:.4f}} {{t2 - t0:.4f}}")
"""

# a fresh interpreter whose mock GPU a previous "process" booted and was killed (no close, no kernel run: the
# kernel path's first-use costs count, as in a real second process)
CHILD_REUSE = """
import time
from hcq import _mock_os
from hcq.config import from_env
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.session import open_am
from hcq.drivers.amd.kernels import demo_code_object
cfg = from_env()
os = _mock_os("AMD", "PCI", 0, cfg)
AMDev(os, "0000:03:00.0", cfg)
os.exit_process()
t0 = time.perf_counter()
dev = open_am(os, 0, cfg)
t1 = time.perf_counter()
dev.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)
t2 = time.perf_counter()
assert any(b == "am" and s.startswith("reused: ") for b, s, _t in dev.session.am.steps), dev.session.am.steps
print(f"{t1 - t0:.4f} {t2 - t0:.4f}")
"""


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--device", default="MOCKPCI+AMD")
  def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1: raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)
  ap.add_argument("--rounds", type=positive, default=3)
  args = ap.parse_args(argv)
  cold = [_child(CHILD.format(device=args.device)) for _ in range(args.rounds)]
  import hcq
  from hcq.drivers.amd.kernels import demo_code_object
  warm = []
  for _ in range(args.rounds):
    t0 = time.perf_counter()
    with hcq.open(args.device) as dev:
      t1 = time.perf_counter()
      dev.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)
      warm.append((t1 - t0, time.perf_counter() - t0))
  reuse = reuse_rounds(args.rounds) if args.device.startswith("MOCKPCI") else []
  fresh = [_child(CHILD_REUSE) for _ in range(args.rounds)] if reuse else []
  best = lambda xs, i: min(x[i] for x in xs)
  print(f"{args.device}: cold process: open {best(cold, 0):.3f} s, first kernel done {best(cold, 1):.3f} s "
        f"(best of {args.rounds})")
  print(f"{args.device}: in-process: open {best(warm, 0):.3f} s, first kernel done {best(warm, 1):.3f} s")
  if reuse:
    print(f"{args.device}: next process after a kill (reuse): open {best(reuse, 0):.3f} s, first kernel done "
          f"{best(reuse, 1):.3f} s (best of {args.rounds}; worst {max(r[1] for r in reuse):.3f} s)")
    print(f"{args.device}: next process after a kill, fresh interpreter (reuse): open {best(fresh, 0):.3f} s, first "
          f"kernel done {best(fresh, 1):.3f} s (worst {max(r[1] for r in fresh):.3f} s)")
  return 0


def _child(code: str) -> tuple[float, ...]:
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
  if out.returncode: raise SystemExit(f"am_boot: the child failed:\n{out.stderr.strip()}")
  return tuple(map(float, out.stdout.split()))


def reuse_rounds(rounds: int) -> list[tuple[float, float]]:
  """(open, first kernel done) seconds of each process after the previous one was killed after its first kernel."""
  from hcq import _mock_os         # the MockOS hcq.open("MOCKPCI+AMD") would build (as `hcq am boot --mock` does)
  from hcq.config import from_env
  from hcq.drivers.amd.am.session import open_am
  from hcq.drivers.amd.kernels import demo_code_object
  cfg = from_env()
  os = _mock_os("AMD", "PCI", 0, cfg)
  out = []
  try:
    for i in range(rounds + 1):
      t0 = time.perf_counter()
      dev = open_am(os, 0, cfg)
      t1 = time.perf_counter()
      dev.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)
      t2 = time.perf_counter()
      reused = any(b == "am" and s.startswith("reused: ") for b, s, _t in dev.session.am.steps)
      if i and not reused: raise SystemExit("am_boot: the process after a kill did not reuse the GPU")
      if i: out.append((t1 - t0, t2 - t0))
      os.exit_process()          # killed: no close()
  finally: os.close()
  return out


if __name__ == "__main__":
  sys.exit(main())
