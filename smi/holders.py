"""Which processes hold a lock file, read from procfs (never lsof).

A process holds an flock when one of its file descriptors refers to the open file description that owns the lock.
procfs shows exactly that: <proc>/<pid>/fd/<n> links to the file, and <proc>/<pid>/fdinfo/<n> has a line
    lock:	1: FLOCK  ADVISORY  WRITE 1234 fe:00:2149778 0 EOF
for every lock owned through that descriptor (Documentation/filesystems/proc.rst, "fdinfo"; since Linux 4.1).
<proc>/locks lists every lock with the same fields ("id: FLOCK ADVISORY WRITE pid major:minor:inode start end",
"->" marking waiters); it is used for processes whose fds this user may not read (another user's): their pid is
reported, so that a holder that cannot be signalled is still named.

A process that merely has the file open (waiting for the lock, or reading it) is not a holder.

All of this reads Config.proc_root, which tests point at fake trees: it decides what is LISTED. Whether a process is
SIGNALLED is decided again by the running kernel's own /proc (ProcessHandle.signal_lock_holder), never by this.
"""
from __future__ import annotations

import dataclasses
import errno
import os  # os.major/os.minor only: arithmetic on st_dev

from ..drivers.system.linux import parse_pid
from ..drivers.system.locks import FileKey, LockEntry, parse_lock_lines  # noqa: F401  (LockEntry: re-exported)
from ..errors import OSCallError


def file_key(host, path: str) -> FileKey:
  st = host.stat(path)
  return FileKey(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)


def _flock_owners(entries, key) -> set[int]:
  return {e.pid for e in entries if e.kind == "FLOCK" and not e.waiting and e.key == key and e.pid > 0}


def _pids(names) -> list[int]:
  """The process ids among procfs entry names (anything else - "self", "٣", "-1", a huge number - is skipped)."""
  return [pid for pid in map(parse_pid, names) if pid is not None]


def lock_target(host, path: str) -> tuple[FileKey, str] | None:
  """What identifies the lock file: its (device, inode) as procfs prints it, and its real path; None when absent."""
  try: return file_key(host, path), host.realpath(path)
  except OSCallError: return None


def holds(host, pid: int, key: FileKey, target: str) -> bool | None:
  """Whether process pid holds the flock on the file: True when one of its fds is that file and the fd's fdinfo
  shows the lock; False when not (or the process is gone); None when this user may not read its fds."""
  try: fds = host.proc_list(f"{pid}/fd")
  except OSCallError as e:
    return None if e.errno in (errno.EACCES, errno.EPERM) else False  # ENOENT: exited meanwhile
  for fd in fds:
    try:
      if host.proc_readlink(f"{pid}/fd/{fd}") != target: continue
      info = host.proc_read(f"{pid}/fdinfo/{fd}")
    except OSCallError: continue  # the fd was closed meanwhile
    if _flock_owners(parse_lock_lines(info, fdinfo=True), key):
      return True
  return False


@dataclasses.dataclass(frozen=True)
class Holders:
  verified: list[int]    # their fds show that they hold the lock
  unverified: list[int]  # <proc>/locks names them, but this user may not read their fds: a pid there can be stale

  @property
  def all(self) -> list[int]: return sorted(self.verified + self.unverified)


def classify_holders(host, path: str) -> Holders:
  """The processes holding the flock on path (none when the file does not exist)."""
  target = lock_target(host, path)
  if target is None: return Holders([], [])
  key, real = target
  try: owners = _flock_owners(parse_lock_lines(host.proc_read("locks")), key)
  except OSCallError: owners = set()  # no <proc>/locks: only the fd scan below can name holders
  verified, unverified = [], []
  for pid in _pids(host.proc_list("")):
    verdict = holds(host, pid, key, real)
    if verdict: verified.append(pid)
    elif verdict is None and pid in owners: unverified.append(pid)
  return Holders(sorted(verified), sorted(unverified))


def find_holders(host, path: str) -> list[int]:
  """Sorted pids of the processes holding the flock on path (an empty list when the file does not exist)."""
  return classify_holders(host, path).all


def process_uid(host, pid: int) -> int | None:
  """The user process pid runs as: the owner of <proc>/<pid> (its effective uid; root for a non-dumpable one);
  None when it is gone."""
  try: return host.stat(f"{host.config.proc_root}/{pid}").st_uid
  except OSCallError: return None


def process_name(host, pid: int) -> str:
  """Its comm (any process may give itself any name: Report escapes what is not printable)."""
  try: return host.proc_read(f"{pid}/comm").strip()
  except OSCallError: return "?"
