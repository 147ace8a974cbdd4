"""config.py: the device lock dir is one folder for every process on the machine; the cache dir is the user's own."""
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


def test_the_cache_dir_is_the_users_own_not_the_shared_temp_dir():
  """hcq's cache (compiled C kernels are loaded from it) is under the user's cache folder, never the shared temp
  folder another user could prepare: HCQ_CACHE_DIR, else $XDG_CACHE_HOME/hcq (an absolute one), else ~/.cache/hcq;
  the autogen package cache goes with it unless HCQ_AUTOGEN_CACHE says otherwise."""
  from hcq.config import Config, from_env
  home = os.path.join(os.path.expanduser("~"), ".cache", "hcq")
  assert from_env({"TMPDIR": "/tmp/x"}).cache_dir == home == Config().cache_dir
  assert from_env({"XDG_CACHE_HOME": "relative/dir"}).cache_dir == home
  c = from_env({"XDG_CACHE_HOME": "/var/cache/me"})
  assert (c.cache_dir, c.autogen_cache) == ("/var/cache/me/hcq", "/var/cache/me/hcq/autogen")
  c = from_env({"XDG_CACHE_HOME": "/var/cache/me", "HCQ_CACHE_DIR": "/srv/hcq", "HCQ_AUTOGEN_CACHE": "/srv/debs"})
  assert (c.cache_dir, c.autogen_cache) == ("/srv/hcq", "/srv/debs")
