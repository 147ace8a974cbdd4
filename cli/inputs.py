"""Input files of the commands (`hcq run`'s code object and .npy arrays, `hcq disasm`, `hcq decode`): one check for
all of them, made before anything is read.

A command line may name anything: a FIFO (an open for reading blocks until a writer comes, maybe never), a device
such as /dev/zero (endless: read whole, it fills the memory), a folder, or a huge file. So a path is accepted only
when it is a regular file (after following a symbolic link, as any reader does) of at most `limit` bytes; it is opened
with O_NONBLOCK (a FIFO put in its place after the stat still does not block the open), checked again on the open
file (fstat), and read bounded (the size the fstat gave and one byte more: a file that grew meanwhile is refused,
never read without end). Standard input ("-") is read bounded the same way."""
from __future__ import annotations

import contextlib
import os
import stat
import sys

from . import CommandError

# the most any of these commands reads into memory: a code object, a dword stream or raw machine code of 16 MiB
# is already far larger than any real one (a stream becomes one Python int per dword, about 36 bytes each)
MAX_INPUT_BYTES = 16 << 20


def _kind(mode: int) -> str:
  if stat.S_ISDIR(mode): return "a folder"
  if stat.S_ISFIFO(mode): return "a FIFO (named pipe)"
  if stat.S_ISCHR(mode): return "a character device"
  if stat.S_ISBLK(mode): return "a block device"
  if stat.S_ISSOCK(mode): return "a socket"
  return "not a regular file"


def _check(path: str, what: str, st, limit: int | None) -> None:
  if not stat.S_ISREG(st.st_mode):
    raise CommandError(f"{what} {path} is {_kind(st.st_mode)}, not a regular file: not read")
  if limit is not None and st.st_size > limit:
    raise CommandError(f"{what} {path} has {st.st_size} bytes, more than the {limit} this command reads")


@contextlib.contextmanager
def open_input(path: str, what: str = "input file", limit: int | None = MAX_INPUT_BYTES):
  """with open_input(path, what) as (f, st): a binary file object of a checked regular file (see the module doc) and
  its fstat. limit=None: any size (the caller maps the file rather than reading it)."""
  try: st = os.stat(path)
  except OSError as e: raise CommandError(f"cannot read {what} {path}: {e.strerror or e}") from None
  _check(path, what, st, limit)
  try: fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
  except OSError as e: raise CommandError(f"cannot read {what} {path}: {e.strerror or e}") from None
  with os.fdopen(fd, "rb") as f:
    st = os.fstat(fd)
    _check(path, what, st, limit)    # what was opened, should the name have been replaced since the stat
    yield f, st


def read_input(path: str, what: str = "input file", limit: int = MAX_INPUT_BYTES) -> bytes:
  """The bytes of the file at path ("-": standard input), checked and read bounded (see the module doc)."""
  if path == "-": return _read_bounded(sys.stdin.buffer, "standard input", what, limit)
  with open_input(path, what, limit) as (f, st):
    try: data = f.read(st.st_size + 1)
    except OSError as e: raise CommandError(f"cannot read {what} {path}: {e.strerror or e}") from None
  if len(data) > st.st_size: raise CommandError(f"{what} {path} grew while it was read: not used")
  return data


def _read_bounded(stream, name: str, what: str, limit: int) -> bytes:
  chunks, total = [], 0
  while total <= limit:
    chunk = stream.read(min(1 << 20, limit + 1 - total))
    if not chunk: break
    chunks.append(chunk)
    total += len(chunk)
  if total > limit: raise CommandError(f"{what} on {name}: more than the {limit} bytes this command reads")
  return b"".join(chunks)
