"""The devices hcq holds: lock files <lock dir>/<kind>_<pcibus>.lock. Their names come from a world-writable
folder, so every name is validated (drivers/system/pciaddr.py) before it reaches a path or a command; a name that
does not validate is ignored with a warning that shows it escaped (repr), never interpreted."""
from __future__ import annotations

import dataclasses
import errno
import posixpath

from ..drivers.system.locks import LOCK_KINDS, lock_file_problem, lock_name, parse_lock_name
from ..drivers.system.pciaddr import validate_prefix
from ..errors import OSCallError


@dataclasses.dataclass(frozen=True)
class LockFile:
  kind: str
  bus: str
  path: str


def _not_a_lock_file(st) -> str | None:
  """Why a well-named entry is still no lock file hcq made: a symlink, a folder, or a hard link to some other file
  (whose flock holders kill_pids would then kill, e.g. a package manager's lock): the drivers' own rule."""
  return lock_file_problem(st)


def discover(host, kind: str, prefix: str | None = None, warn=print) -> list[LockFile]:
  """Lock files of `kind` whose PCI address starts with prefix (None: every one; an empty or malformed prefix is a
  DeviceError, never "every device"), sorted by address. A lock dir that does not exist holds no locks; one that
  cannot be listed is an OSCallError (who holds what cannot be known)."""
  if prefix is not None: validate_prefix(prefix)
  lock_dir = host.config.lock_dir
  try: names = host.listdir(lock_dir)
  except OSCallError as e:
    if e.errno != errno.ENOENT: raise
    return []
  found = []
  for name in names:
    if not name.startswith(f"{kind}_"): continue  # another backend's, or not a lock file at all
    parsed = parse_lock_name(name)
    if parsed is None:
      warn(f"ignoring lock file {name!r} in {lock_dir}: its bus part is not a PCI address such as 0000:03:00.0")
      continue
    path = posixpath.join(lock_dir, lock_name(*parsed))
    try: st = host.stat(path, follow_symlinks=False)
    except OSCallError: continue  # removed meanwhile
    why = _not_a_lock_file(st)
    if why:
      warn(f"ignoring lock file {name!r} in {lock_dir}: {why}")
      continue
    if prefix is None or parsed[1].startswith(prefix): found.append(LockFile(parsed[0], parsed[1], path))
  return sorted(found, key=lambda lf: lf.bus)


def lock_for(host, bus: str) -> list[LockFile]:
  """Every existing lock file (any kind) of one PCI address."""
  out = []
  for kind in LOCK_KINDS:
    path = posixpath.join(host.config.lock_dir, lock_name(kind, bus))
    try: st = host.stat(path, follow_symlinks=False)
    except OSCallError: continue
    if not _not_a_lock_file(st): out.append(LockFile(kind, bus, path))
  return out
