"""NVIDIA's ptxas, the reference that checks hcq's PTX: fetched once from the pip wheel nvidia-cuda-nvcc-cu12==12.9.86
(PyPI) into <cache_dir>/ptxas/12.9.86/ and reused from there.

Why a fetch and not a [test] extra: the wheel is 40 MB, installs all of nvcc (about 150 MB) into every test
environment, and the tests need one 35 MB binary of it; the fetch takes that member only, checks the wheel's sha256
and runs where pip can reach the index (else the tests that need it skip, saying why).

    path = ptxas_path(cache_dir)        # raises ToolUnavailable (with the reason) when it can't be had
    out = assemble(path, ptx_text, "sm_90")   # stdout+stderr of ptxas; raises PTXASError when it refuses
"""
from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import zipfile

from hcq.safefiles import is_private_file, private_dir

PACKAGE, VERSION = "nvidia-cuda-nvcc-cu12", "12.9.86"
MEMBER = "nvidia/cuda_nvcc/bin/ptxas"
# the manylinux x86_64 wheel (the only platform pinned here)
WHEEL = "nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
WHEEL_SHA256 = "5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0"
FETCH_TIMEOUT_S = 600


class ToolUnavailable(Exception):
  """ptxas could not be had here; the message says why (a test skips with it)."""


class PTXASError(Exception):
  """ptxas refused a PTX file (the message holds its diagnostics)."""


def _sha256(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""): h.update(chunk)
  return h.hexdigest()


def ptxas_path(cache_dir: str) -> str:
  if sys.platform != "linux" or platform.machine() != "x86_64":
    raise ToolUnavailable(f"ptxas {VERSION} is pinned for x86_64 Linux only, not {sys.platform}/{platform.machine()}")
  folder = private_dir(os.path.join(private_dir(cache_dir, "choose another HCQ_CACHE_DIR"), "ptxas", VERSION),
                       "choose another HCQ_CACHE_DIR")
  exe = os.path.join(folder, "ptxas")
  if is_private_file(exe): return exe   # ours alone: what is found there is run
  with tempfile.TemporaryDirectory(prefix=".fetch-", dir=folder) as tmp:
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp,
            f"{PACKAGE}=={VERSION}"]
    try: r = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e: raise ToolUnavailable(f"pip download {PACKAGE}=={VERSION}: {e}") from None
    wheel = os.path.join(tmp, WHEEL)
    if r.returncode != 0 or not os.path.isfile(wheel):
      raise ToolUnavailable(f"pip download {PACKAGE}=={VERSION} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    got = _sha256(wheel)
    if got != WHEEL_SHA256: raise ToolUnavailable(f"{WHEEL}: sha256 {got}, expected {WHEEL_SHA256}")
    part = os.path.join(tmp, "ptxas")
    with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(part, "wb") as dst:
      for chunk in iter(lambda: src.read(1 << 20), b""): dst.write(chunk)
    os.chmod(part, 0o700)
    os.replace(part, exe)   # atomic: a concurrent run sees no half-written binary
  return exe


def assemble(exe: str, ptx: str, arch: str, workdir: str) -> str:
  """Run ptxas on ptx for arch (output discarded); return what it printed. Spills are reported as warnings."""
  src = os.path.join(workdir, f"k_{arch}.ptx")
  with open(src, "w") as f: f.write(ptx)
  r = subprocess.run([exe, f"-arch={arch}", "--warn-on-spills", "-o", os.devnull, src],
                     capture_output=True, text=True, timeout=120)
  out = (r.stdout + r.stderr).strip()
  if r.returncode != 0: raise PTXASError(f"ptxas -arch={arch} failed (exit {r.returncode}) on {src}:\n{out[-3000:]}")
  return out
