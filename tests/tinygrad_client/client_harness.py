"""tinygrad 0.14 (a hardware-proven client hcq did not write) on hcq's mocks: each test runs one tinygrad session in a
subprocess (tinygrad reads DEV and its other variables at import) through the adapter of this folder."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def tinygrad_version() -> str | None:
  try:
    from importlib.metadata import version
    return version("tinygrad")
  except Exception: return None


requires_tinygrad = pytest.mark.skipif(tinygrad_version() != "0.14.0",
                                       reason="tinygrad==0.14.0 is not installed (the test extra: pip install -e '.[test]')")


def run_client(scenario: str, dev: str, timeout_s: float = 240, **env) -> subprocess.CompletedProcess:
  """run_client.py <scenario> with DEV=dev in a fresh interpreter; env adds variables (HCQ_* for the mock)."""
  # this process's environment without what would steer tinygrad or the mock (DEV, HCQ_*, AMD_*, NV_*, DEBUG)
  full = {k: v for k, v in os.environ.items() if not k.startswith(("DEV", "HCQ_", "AMD", "NV", "DEBUG", "VFIO"))}
  full.update(DEV=dev, PYTHONPATH="", **{k: str(v) for k, v in env.items()})
  return subprocess.run([sys.executable, os.path.join(HERE, "run_client.py"), scenario], env=full, capture_output=True,
                        text=True, timeout=timeout_s)


def steps(proc: subprocess.CompletedProcess) -> list[str]:
  return [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("STEP ") and " ok" in line]
