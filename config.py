"""hcq's options. This module is the ONE place that reads environment variables.

Every other module receives its options explicitly (a Config, or one of its fields) from its caller.
"""
from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from typing import Mapping

from .errors import HCQError


@dataclasses.dataclass(frozen=True)
class Config:
  # device spec used by hcq.open() without an argument, e.g. "MOCK+AMD" ("" = autodetect)
  dev: str = ""
  # roots of the kernel's pseudo file systems; tests point them at fake trees
  sysfs_root: str = "/sys"
  proc_root: str = "/proc"
  dev_root: str = "/dev"
  # folder holding the per-device lock files {am,nv,bnxt}_<pcibus>.lock: the system temp dir /tmp, the same for every
  # user and under sudo (not tempfile.gettempdir(), which follows each user's TMPDIR: two users with different TMPDIRs
  # would each get a lock on the same device)
  lock_dir: str = "/tmp"
  # default timeout of every wait, in seconds
  timeout_s: float = 10.0
  # where the autogen generator caches downloaded Debian packages
  autogen_cache: str = os.path.join(os.path.expanduser("~"), ".cache", "hcq", "autogen")
  # mock device behaviour
  mock_threaded: bool = False
  mock_instruction_budget: int = 50_000_000
  # mock BNXT NIC: its UDP "PHY" port on 127.0.0.1 (0 = any), the peer NIC's port (0 = none), a pcap of its wire,
  # wire faults ("drop=3,corrupt=1,reorder=2,p_drop=0.1"), its MAC (12 hex digits; "" = 02:00:00:00:00:<index+1>)
  bnxt_mock_port: int = 0
  bnxt_mock_peer: int = 0
  bnxt_mock_pcap: str = ""
  bnxt_mock_faults: str = ""
  bnxt_mock_mac: str = ""
  debug: int = 0

  def replace(self, **kw) -> "Config":
    return dataclasses.replace(self, **kw)


class ConfigError(HCQError, ValueError):
  """An HCQ_* environment variable holds a value hcq cannot use; names the variable, the value and what would do."""


def _raw(env: Mapping[str, str], name: str) -> str | None:
  raw = env.get(name)
  return None if raw is None or raw.strip() == "" else raw


def _int(env: Mapping[str, str], name: str, default: int, lo: int = 0, hi: int | None = None) -> int:
  """An integer in [lo, hi] (decimal, or 0x/0o/0b prefixed); out of range is an error, never clamped."""
  raw = _raw(env, name)
  if raw is None: return default
  try: v = int(raw.strip(), 0)
  except ValueError: raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
  if v < lo or (hi is not None and v > hi):
    want = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
    raise ConfigError(f"environment variable {name}={raw!r} is out of range (must be {want})")
  return v


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
  """A positive, finite number of seconds (0, negative, nan and inf are refused: a wait needs a real bound)."""
  raw = _raw(env, name)
  if raw is None: return default
  try: v = float(raw)
  except ValueError: raise ConfigError(f"environment variable {name}={raw!r} is not a number of seconds") from None
  if not (math.isfinite(v) and v > 0):
    raise ConfigError(f"environment variable {name}={raw!r} must be a positive, finite number of seconds")
  return v


def from_env(env: Mapping[str, str] | None = None) -> Config:
  """Build a Config from the environment (os.environ unless another mapping is given)."""
  env = os.environ if env is None else env
  d = Config()
  return Config(
    dev=env.get("HCQ_DEV", d.dev),
    sysfs_root=env.get("HCQ_SYSFS_ROOT") or d.sysfs_root,
    proc_root=env.get("HCQ_PROC_ROOT") or d.proc_root,
    dev_root=env.get("HCQ_DEV_ROOT") or d.dev_root,
    lock_dir=env.get("HCQ_LOCK_DIR") or d.lock_dir,
    timeout_s=_seconds(env, "HCQ_TIMEOUT", d.timeout_s),
    autogen_cache=env.get("HCQ_AUTOGEN_CACHE") or d.autogen_cache,
    mock_threaded=bool(_int(env, "HCQ_MOCK_THREADED", 0, hi=1)),
    mock_instruction_budget=_int(env, "HCQ_MOCK_BUDGET", d.mock_instruction_budget, lo=1),
    bnxt_mock_port=_int(env, "HCQ_BNXT_MOCK_PORT", 0, hi=65535),
    bnxt_mock_peer=_int(env, "HCQ_BNXT_MOCK_PEER", 0, hi=65535),
    bnxt_mock_pcap=env.get("HCQ_BNXT_MOCK_PCAP", ""),
    bnxt_mock_faults=env.get("HCQ_BNXT_MOCK_FAULTS", ""),
    bnxt_mock_mac=env.get("HCQ_BNXT_MOCK_MAC", ""),
    debug=_int(env, "HCQ_DEBUG", 0),
  )
