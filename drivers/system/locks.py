"""Device lock files: <lock dir>/{am,nv,bnxt}_<pcibus>.lock, held with flock(LOCK_EX) by the process that drives
the device. hcq-smi finds holders through these names, so the naming lives here, in one place."""
from __future__ import annotations

import dataclasses
import os
import re
import stat

from ...errors import DeviceError
from .pciaddr import is_valid

LOCK_KINDS = ("am", "nv", "bnxt")
# locks a device's holder shares with tools for a moment (never listed as holders): am-smu_<bus>.lock serialises the
# SMU mailbox between the AM driver and hcq-smi (one message exchange at a time, whoever sends it)
SHARED_LOCK_KINDS = ("am-smu",)
# what a holder publishes for tools next to its lock: <kind>-state_<bus>.json (drivers/amd/am/state.py)
STATE_KINDS = ("am",)
STATE_MAX_BYTES = 4096
SMI_BACKEND = {"am": "amd"}     # the hcq-smi backend of a lock kind, where the names differ (smi/backends.py)


def lock_name(kind: str, pcibus: str) -> str:
  known = LOCK_KINDS + SHARED_LOCK_KINDS
  if kind not in known: raise ValueError(f"unknown lock kind {kind!r} (known: {', '.join(known)})")
  if not is_valid(pcibus): raise ValueError(f"lock for {pcibus!r}: not a PCI address of the form 0000:03:00.0")
  return f"{kind}_{pcibus}.lock"


def lock_path(lock_dir: str, kind: str, pcibus: str) -> str:
  return os.path.join(lock_dir, lock_name(kind, pcibus))


def lock_file_problem(st) -> str | None:
  """Why an existing entry at a lock file's name (its os.stat_result, not following a link) is not a lock file hcq
  may open, flock or list: one rule for the drivers (LinuxOS.lock_device) and hcq-smi (smi/lockfiles.py). The lock
  dir is world-writable: a FIFO (an open would block, a flock would lock nothing of ours) or a hard link to some other
  file (with fs.protected_hardlinks=0 anyone may link a root-owned file there; its flock holders are not hcq's) is
  refused, and so is a symbolic link (whose target the open would reach)."""
  if stat.S_ISLNK(st.st_mode): return "a symbolic link"
  if not stat.S_ISREG(st.st_mode): return "not a regular file"
  if st.st_nlink != 1: return f"a hard link ({st.st_nlink} names for one file)"
  return None


def state_name(kind: str, pcibus: str) -> str:
  """<kind>-state_<bus>.json: no lock file name (the '-state' keeps it out of hcq-smi's <kind>_*.lock scan)."""
  if kind not in STATE_KINDS: raise ValueError(f"unknown state kind {kind!r} (known: {', '.join(STATE_KINDS)})")
  if not is_valid(pcibus): raise ValueError(f"state file for {pcibus!r}: not a PCI address of the form 0000:03:00.0")
  return f"{kind}-state_{pcibus}.json"


def state_path(lock_dir: str, kind: str, pcibus: str) -> str:
  return os.path.join(lock_dir, state_name(kind, pcibus))


def checked_state_path(lock_dir: str, kind: str, pcibus: str, data: bytes | None = None) -> str:
  """state_path for an OS's write/read/remove_device_state: a bad address, or (data given) more than STATE_MAX_BYTES
  of state, is a DeviceError naming them."""
  try: path = state_path(lock_dir, kind, pcibus)
  except ValueError as e: raise DeviceError(f"device state file: {e}") from None
  if data is not None and len(data) > STATE_MAX_BYTES:
    raise DeviceError(f"{path}: {len(data)} bytes of state, at most {STATE_MAX_BYTES}")
  return path


def owner_error(path: str, uid: int, owners) -> str:
  """Why a state file is not used: the lock dir is world-writable, and only the holder's user (or root) speaks for
  the holder; a file any other user left or planted there is not its state."""
  return (f"{path}: owned by uid {uid}, not by the device holder's user or root (uid {', '.join(map(str, sorted(owners)))}):"
          f" not used")


def parse_lock_name(name: str) -> tuple[str, str] | None:
  """(kind, pcibus) for a well-formed lock file name; None for anything else (never trusted further)."""
  if not name.endswith(".lock"): return None
  kind, sep, bus = name[:-len(".lock")].partition("_")
  if not sep or kind not in LOCK_KINDS or not is_valid(bus): return None
  return kind, bus


# ---- lock lines of procfs: <proc>/locks and the "lock:" lines of <proc>/<pid>/fdinfo/<fd>
# "1: FLOCK  ADVISORY  WRITE 1234 fe:00:2149778 0 EOF" (fs/locks.c, lock_get_status); waiters have "-> " after the id.
# ASCII digits only ([0-9], not \d, which also matches other scripts' digits): these fields come from a tree that a
# test (or a hostile HCQ_PROC_ROOT) may have written.
_LOCK_LINE = re.compile(r"^\s*[0-9]+:\s+(->\s+)?(\S+)\s+\S+\s+\S+\s+(-?[0-9]{1,10})\s+([0-9a-f]{1,8}):([0-9a-f]{1,8}):([0-9]{1,20})\s",
                        re.ASCII)


@dataclasses.dataclass(frozen=True)
class FileKey:
  """A file's identity as /proc/locks names it: device major:minor and inode."""
  major: int
  minor: int
  inode: int


@dataclasses.dataclass(frozen=True)
class LockEntry:
  """One line of /proc/locks: who holds (or waits for) a lock on which file."""
  kind: str      # FLOCK, POSIX, OFDLCK, ...
  pid: int
  key: FileKey
  waiting: bool


def parse_lock_lines(text: str, fdinfo: bool = False) -> list[LockEntry]:
  """The lock lines of <proc>/locks, or (fdinfo=True) only the "lock:\t" lines of an fdinfo file; others skipped."""
  out = []
  for line in text.splitlines():
    if line.startswith("lock:"): line = line[len("lock:"):]
    elif fdinfo: continue
    m = _LOCK_LINE.match(line)
    if m: out.append(LockEntry(m.group(2), int(m.group(3)), FileKey(int(m.group(4), 16), int(m.group(5), 16), int(m.group(6))),
                               bool(m.group(1))))
  return out


def held_flocks(text: str, fdinfo: bool = False) -> list[LockEntry]:
  """The granted (not waiting) flock entries among the lock lines of text."""
  return [e for e in parse_lock_lines(text, fdinfo) if e.kind == "FLOCK" and not e.waiting]


def in_use_error(kind: str, pcibus: str, path: str, pids) -> str:
  """The message a second process gets for a device another one holds: the holder's pid when the lock lines show
  it, and how to free the device (hcq-smi finds holders the same way: smi/holders.py)."""
  pids = sorted(set(pids))
  smi = SMI_BACKEND.get(kind, kind)
  who = f"held by pid {', '.join(map(str, pids))}" if pids else "held by another process"
  return (f"device {pcibus} is in use: {who} ({path}; `hcq-smi {smi} pids` lists holders, "
          f"`hcq-smi {smi} kill_pids` frees it)")
