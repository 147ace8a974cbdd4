"""Device lock files: <lock dir>/{am,nv,bnxt}_<pcibus>.lock, held with flock(LOCK_EX) by the process that drives
the device. hcq-smi finds holders through these names, so the naming lives here, in one place."""
from __future__ import annotations

import os

from .pciaddr import is_valid

LOCK_KINDS = ("am", "nv", "bnxt")


def lock_name(kind: str, pcibus: str) -> str:
  if kind not in LOCK_KINDS: raise ValueError(f"unknown lock kind {kind!r} (known: {', '.join(LOCK_KINDS)})")
  if not is_valid(pcibus): raise ValueError(f"lock for {pcibus!r}: not a PCI address of the form 0000:03:00.0")
  return f"{kind}_{pcibus}.lock"


def lock_path(lock_dir: str, kind: str, pcibus: str) -> str:
  return os.path.join(lock_dir, lock_name(kind, pcibus))


def parse_lock_name(name: str) -> tuple[str, str] | None:
  """(kind, pcibus) for a well-formed lock file name; None for anything else (never trusted further)."""
  if not name.endswith(".lock"): return None
  kind, sep, bus = name[:-len(".lock")].partition("_")
  if not sep or kind not in LOCK_KINDS or not is_valid(bus): return None
  return kind, bus
