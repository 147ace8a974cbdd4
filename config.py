"""hcq's options. This module is the ONE place that reads environment variables.

Every other module receives its options explicitly (a Config, or one of its fields) from its caller.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Mapping


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
  # folders searched for the commands tools run (hcq-smi: modprobe, sudo, nvidia-smi), PATH's format
  exec_path: str = os.defpath

  def replace(self, **kw) -> "Config":
    return dataclasses.replace(self, **kw)


def _int(env: Mapping[str, str], name: str, default: int) -> int:
  raw = env.get(name)
  if raw is None or raw == "": return default
  try: return int(raw, 0)
  except ValueError: raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
  raw = env.get(name)
  if raw is None or raw == "": return default
  try: return float(raw)
  except ValueError: raise ValueError(f"environment variable {name}={raw!r} is not a number") from None


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
    timeout_s=_float(env, "HCQ_TIMEOUT", d.timeout_s),
    autogen_cache=env.get("HCQ_AUTOGEN_CACHE") or d.autogen_cache,
    mock_threaded=bool(_int(env, "HCQ_MOCK_THREADED", 0)),
    mock_instruction_budget=_int(env, "HCQ_MOCK_BUDGET", d.mock_instruction_budget),
    bnxt_mock_port=_int(env, "HCQ_BNXT_MOCK_PORT", 0),
    bnxt_mock_peer=_int(env, "HCQ_BNXT_MOCK_PEER", 0),
    bnxt_mock_pcap=env.get("HCQ_BNXT_MOCK_PCAP", ""),
    bnxt_mock_faults=env.get("HCQ_BNXT_MOCK_FAULTS", ""),
    bnxt_mock_mac=env.get("HCQ_BNXT_MOCK_MAC", ""),
    debug=_int(env, "HCQ_DEBUG", 0),
    exec_path=env.get("PATH", d.exec_path),
  )
