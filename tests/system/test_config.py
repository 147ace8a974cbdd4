"""config.py: the device lock dir is one folder for every process on the machine; the cache dir is the user's own."""
import os
import subprocess
import sys

import pytest

from hcq.config import from_env
from hcq.errors import HCQError


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


@pytest.mark.parametrize("name,value", [
  ("HCQ_TIMEOUT", "abc"), ("HCQ_TIMEOUT", "-1"), ("HCQ_TIMEOUT", "nan"), ("HCQ_TIMEOUT", "inf"), ("HCQ_TIMEOUT", "0"),
  ("HCQ_MOCK_BUDGET", "-5"), ("HCQ_MOCK_BUDGET", "0"), ("HCQ_MOCK_BUDGET", "1e6"),
  ("HCQ_MOCK_THREADED", "2"), ("HCQ_MOCK_THREADED", "-1"), ("HCQ_MOCK_THREADED", "yes"),
  ("HCQ_DEBUG", "x"), ("HCQ_DEBUG", "-1"), ("HCQ_BNXT_MOCK_PORT", "70000"), ("HCQ_BNXT_MOCK_PEER", "-2"),
])
def test_bad_values_are_refused_naming_the_variable(name, value):
  """A value out of range is an error naming the variable and the value, never accepted or clamped silently."""
  with pytest.raises(HCQError) as e: from_env({name: value})
  assert name in str(e.value) and repr(value) in str(e.value)


def test_good_values_are_read():
  cfg = from_env({"HCQ_TIMEOUT": "2.5", "HCQ_MOCK_BUDGET": "0x100", "HCQ_MOCK_THREADED": "1", "HCQ_DEBUG": "3",
                  "HCQ_BNXT_MOCK_PORT": "65535"})
  assert (cfg.timeout_s, cfg.mock_instruction_budget, cfg.mock_threaded, cfg.debug, cfg.bnxt_mock_port) == \
         (2.5, 256, True, 3, 65535)
  assert from_env({"HCQ_TIMEOUT": "", "HCQ_DEBUG": " "}).timeout_s == 10.0


def test_a_bad_variable_is_a_one_line_cli_error(monkeypatch, capsys):
  """hcq commands read the configuration through hcq.open: a bad value is a usage error (exit 2), not a traceback."""
  from hcq.cli import main
  monkeypatch.setenv("HCQ_TIMEOUT", "nan")
  assert main(["demo", "--device", "MOCK+AMD", "-n", "256", "-m", "16"]) == 2
  err = capsys.readouterr().err
  assert "HCQ_TIMEOUT='nan'" in err and "Traceback" not in err and err.count("\n") == 1


def test_a_usb_fault_range_is_kept_as_a_range():
  """issue 29 item 6: transport=1-1000000000000 was expanded to 10^12 numbers by every command that read the
  config. A range costs its two ends: parsing a range of two million numbers allocates next to nothing."""
  import tracemalloc
  from hcq.config import parse_usb_faults
  tracemalloc.start()
  try:
    faults = parse_usb_faults("transport=1-2000000,stall=5+7-9+8")
    peak = tracemalloc.get_traced_memory()[1]
  finally: tracemalloc.stop()
  assert peak < 64 << 10, f"{peak} bytes to parse two ranges"
  t = faults["transport"]
  assert 1 in t and 2_000_000 in t and 2_000_001 not in t and 0 not in t
  assert [n for n in range(1, 12) if n in faults["stall"]] == [5, 7, 8, 9]
  huge = parse_usb_faults("transport=1-1000000000000")["transport"]
  assert 10 ** 12 in huge and 10 ** 12 + 1 not in huge


@pytest.mark.parametrize("value", ["transport=1-100000000000000000000", "stall=٣", "ur=5-3", "ca=0"])
def test_a_bad_usb_fault_spec_names_the_variable(value):
  with pytest.raises(HCQError, match=r"HCQ_USB_MOCK_FAULTS.*USB fault spec"): from_env({"HCQ_USB_MOCK_FAULTS": value})
