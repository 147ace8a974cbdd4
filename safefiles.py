"""Files hcq keeps for itself (compiled C kernels, the autogen package cache): the one place that makes them safe.

What is read back from a cache is trusted (a cached shared object is dlopen-ed: it runs as its user), so a cache
lives only in a folder that nobody else can write to, and nothing is written there through a name someone else
could have chosen:
  - private_dir(path): the folder, created with mode 0700, or the existing one taken only if it is a real directory
    (not a symbolic link), owned by this user and writable by nobody else. One that others may only read is narrowed
    to 0700 (nobody else could have put anything in it); anything else is refused with UnsafePathError, because what
    it holds may have been planted. Nothing is deleted: the folder may be the user's own choice (HCQ_CACHE_DIR).
  - atomic_writer(path): the file is written under a fresh random name in its folder (mkstemp: O_CREAT|O_EXCL, so
    never through a planted symbolic link) and renamed over `path` once complete: a reader never sees half a file,
    and a symbolic link at `path` is replaced, not followed.
  - is_private_file(path): a cached file is used only if it is a regular file (lstat: a symbolic link is not
    followed), owned by this user and writable by nobody else; otherwise the caller makes it again.
The folders' parents are not checked: they are the user's (~/.cache) or chosen by the user.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile

from .errors import UnsafePathError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_OTHERS_ANY = stat.S_IRWXG | stat.S_IRWXO


def private_dir(path: str, hint: str = "") -> str:
  """Create or check a folder that only this user may write to (see the module doc); returns its absolute path.
  `hint` ends the error message (how to choose another folder)."""
  path = os.path.abspath(path)
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkdir(path, 0o700)
  except FileExistsError: pass
  except OSError as e: raise UnsafePathError(path, f"cannot create the folder: {e.strerror}", hint) from None
  try: fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError as e:
    raise UnsafePathError(path, f"{_what_is(path, e)} (hcq keeps its cache files only in a real folder of its "
                                f"own)", hint) from None
  try:
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
      raise UnsafePathError(path, f"owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): what it holds "
                                  f"is not this user's to trust", hint)
    mode = stat.S_IMODE(st.st_mode)
    if mode & _OTHERS_WRITE:
      raise UnsafePathError(path, f"others may write to it (mode {mode:o}), so what it holds may have been planted: "
                                  f"remove it (or make it mode 700 if only you ever wrote to it)", hint)
    # readable by others only: nobody else could write into it, so its files are ours; narrow it
    if mode & _OTHERS_ANY: os.fchmod(fd, mode & ~_OTHERS_ANY)
  finally: os.close(fd)
  return path


def _what_is(path: str, err: OSError) -> str:
  """Why `path` could not be opened as a folder without following a link (O_NOFOLLOW|O_DIRECTORY)."""
  if err.errno not in (errno.ELOOP, errno.ENOTDIR): return err.strerror
  try: st = os.lstat(path)
  except OSError: return err.strerror
  return "a symbolic link, not a folder" if stat.S_ISLNK(st.st_mode) else "not a folder"


def is_private_file(path: str) -> bool:
  """True for a regular file (not a symbolic link) owned by this user that nobody else may write; False when there
  is nothing at `path` or what is there must not be trusted (the caller makes the file again)."""
  try: st = os.lstat(path)
  except FileNotFoundError: return False
  return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & _OTHERS_WRITE


@contextlib.contextmanager
def atomic_writer(path: str, text: bool = False, perm: int = 0o600):
  """with atomic_writer(path) as f: f.write(...) -- see the module doc. The file gets mode `perm` (no umask)."""
  folder, name = os.path.split(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
  try:
    with os.fdopen(fd, "w" if text else "wb") as f:
      yield f
      os.fchmod(f.fileno(), perm)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError): os.unlink(tmp)
    raise
