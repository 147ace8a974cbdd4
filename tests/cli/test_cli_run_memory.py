"""issue 29 item 8: `hcq run` moves its .npy arrays between their files and the device in chunks (cli/run.py
CHUNK_BYTES), so that its memory peak is the device's own copy of the buffers and little more. It used to be about
4x the input files (np.load, a contiguous copy, copyout's bytes, the output array). On MOCK+AMD the device's memory
(its VRAM, a memory file) is in the process, so its size is counted: the peak may exceed the buffers' total by a
quarter of the input files at most (chunks, staging), where the old one exceeded it by 2.5x the inputs."""
import pathlib
import subprocess
import sys

import numpy as np

import hcq

DEMO = str(pathlib.Path(hcq.__file__).parent / "drivers" / "amd" / "kernels" / "demo.hsaco")
N = 8 << 20     # float32 elements of each input: 32 MiB

_CHILD = r"""
import resource, sys
from hcq.cli import main
rc = main(sys.argv[1:])
print("MAXRSS_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(rc)
"""


def _peak_kb(tmp_path, *args) -> int:
  p = subprocess.run([sys.executable, "-c", _CHILD, "run", DEMO, "--kernel", "vadd", "--device", "MOCK+AMD", "--out",
                      str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
  assert p.returncode == 0, p.stderr
  return int(p.stdout.split("MAXRSS_KB")[1])


def test_the_memory_peak_is_the_device_buffers_and_a_fraction_of_the_inputs(tmp_path):
  a = np.arange(N, dtype=np.float32)
  np.save(tmp_path / "a.npy", a)
  np.save(tmp_path / "b.npy", np.full(N, 2, np.float32))
  np.save(tmp_path / "sa.npy", a[:64])
  base = _peak_kb(tmp_path, "sa.npy", "sa.npy", "64:float32", "=64")
  # one work-item: the kernel's own work is no part of this; every buffer still goes in and out whole
  peak = _peak_kb(tmp_path, "a.npy", "b.npy", f"{N}:float32", f"={N}")
  inputs = 2 * a.nbytes
  device = 3 * a.nbytes
  rise = (peak - base) * 1024
  assert rise <= device + inputs // 4, f"peak rose by {rise / inputs:.2f}x the inputs ({rise >> 20} MiB)"
  out = np.load(tmp_path / "out" / "arg0.npy", mmap_mode="r")
  assert out.shape == (N,) and out[N - 1] == N - 1          # the arrays came back whole
  c = np.load(tmp_path / "out" / "arg2.npy", mmap_mode="r")
  assert c[0] == 2 and c.shape == (N,)                       # and the one work-item's sum is in the output
