#!/usr/bin/env bash
# NV on real hardware (written for an H200 with driver 580): open RM+NV, run the CUDA-style corpus
# (tests/fixtures/cuda) compiled to cubins (nvJitLink or ptxas from pip: pip install nvidia-nvjitlink-cu12 or
# nvidia-cuda-nvcc-cu12) and check every result against numpy, then time empty-kernel launches and a vector add.
#
#   bench/nv_device.sh [PYTHON]        # PYTHON defaults to .venv/bin/python of the repository
#
# Exit status: 0 when every kernel gave numpy's result; 1 otherwise (each failure is named). Nothing here needs root:
# nvidia.ko's /dev/nvidiactl, /dev/nvidia0 and /dev/nvidia-uvm must be readable and writable by the user.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-$here/.venv/bin/python}"
if [ ! -x "$py" ]; then echo "nv_device.sh: no python at $py (make the venv: python3 -m venv .venv && .venv/bin/pip install -e '.[test]')" >&2; exit 2; fi
for node in /dev/nvidiactl /dev/nvidia0 /dev/nvidia-uvm; do
  if [ ! -e "$node" ]; then echo "nv_device.sh: $node is missing (is nvidia.ko loaded? nvidia-modprobe -u -c=0 creates nvidia-uvm)" >&2; exit 1; fi
done
[ -r /proc/driver/nvidia/version ] && head -1 /proc/driver/nvidia/version
cd "$here/.." && exec "$py" - "$here" <<'EOF'
import os, sys, time
here = sys.argv[1]
sys.path.insert(0, os.path.dirname(here))
sys.path.insert(0, here)
import numpy as np
import hcq
from hcq.compiler.backend.cubin import PTXCompiler
from tests.fixtures.cuda.kernels import KERNELS

if not PTXCompiler().available():
  sys.exit("nv_device.sh: neither nvJitLink nor ptxas found: pip install nvidia-nvjitlink-cu12 (or nvidia-cuda-nvcc-cu12)")
t0 = time.perf_counter()
dev = hcq.open("NV")
print(f"opened {dev.name} in {time.perf_counter() - t0:.2f} s: compute {dev.compute_class:#x}, copy {dev.copy_class:#x}, "
      f"QMD v{dev.qmd_major}, driver {dev.session.driver_version}")
failed = []
for name, spec in sorted(KERNELS.items()):
  try:
    prog = dev.load(spec.ptx().encode(), name=spec.name)       # PTX -> cubin by nvJitLink/ptxas, then .nv.info
    data = spec.inputs(0)
    bufs, args = {}, []
    for a in spec.args:
      if hasattr(a, "count"):
        b = bufs[a.name] = dev.alloc(max(a.nbytes, 4))
        dev.copyin(b, data[a.name])
        args.append(b)
      else: args.append(data[a.name].item() if hasattr(data[a.name], "item") else data[a.name])
    if spec.dynamic_shared: args.append(spec.dynamic_shared)
    t = prog(*args, global_size=spec.grid, local_size=spec.block, wait=True)
    outs = {a.name: np.frombuffer(dev.copyout(bufs[a.name]), a.dtype) for a in spec.outputs}
    spec.check(outs, data)
    print(f"  ok    {name:<16} {t * 1e6:9.1f} us")
    for b in bufs.values(): dev.free(b)
  except Exception as e:                     # keep going: every kernel is reported
    failed.append(name)
    print(f"  FAIL  {name:<16} {type(e).__name__}: {e}")
    if dev.fault is not None:
      print("  (the device faulted: reopening it)")
      dev.close()
      dev = hcq.open("NV")

EMPTY = b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry empty()\n{\n  ret;\n}\n"
prog = dev.load(EMPTY, "empty")
for _ in range(100): prog(global_size=1, local_size=1)
dev.synchronize()
for n in (1000, 10000):
  t = time.perf_counter()
  for _ in range(n): prog(global_size=1, local_size=1)
  dev.synchronize()
  print(f"empty kernel: {(time.perf_counter() - t) / n * 1e6:.2f} us per launch ({n} async launches + synchronize)")
print(f"empty kernel, one timed launch (GPU timestamps): {prog(global_size=1, local_size=1, wait=True) * 1e6:.2f} us")
dev.close()
print("all kernels gave numpy's results" if not failed else f"{len(failed)} failed: {', '.join(failed)}")
sys.exit(1 if failed else 0)
EOF
