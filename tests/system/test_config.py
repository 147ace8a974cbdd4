"""config.py: the device lock dir is one folder for every process on the machine."""
import os
import subprocess
import sys


def test_lock_dir_does_not_follow_tmpdir(tmp_path):
  """Device locks exclude each other only if every process looks in the same folder: a user's TMPDIR (or sudo,
  which resets it) must not move it. HCQ_LOCK_DIR does."""
  env = {k: v for k, v in os.environ.items() if k != "HCQ_LOCK_DIR"}
  code = "from hcq.config import from_env; print(from_env().lock_dir)"
  out = subprocess.run([sys.executable, "-c", code], env={**env, "TMPDIR": str(tmp_path)}, capture_output=True,
                       text=True, check=True, timeout=60).stdout.strip()
  assert out == "/tmp"
  out = subprocess.run([sys.executable, "-c", code], env={**env, "HCQ_LOCK_DIR": str(tmp_path)}, capture_output=True,
                       text=True, check=True, timeout=60).stdout.strip()
  assert out == str(tmp_path)
