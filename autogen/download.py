"""Download one file over HTTP(S): resumable, sha256-checked, with byte progress.

The bytes go to <dest>.part first; a later call asks the server for the rest (an HTTP Range request, RFC 9110
section 14.2) and carries on from there. A server that answers the whole file (status 200 instead of 206 Partial
Content) is taken from the start again. The file is renamed to dest only once its size and sha256 are those asked for.

Progress: on a terminal, a tqdm bar of bytes (tqdm is a dependency of hcq); when the output is not a terminal (a pipe,
a log file), one plain line per tenth of the file, so that logs stay readable.
"""
from __future__ import annotations

import hashlib
import os
import stat
import sys
import time
import urllib.error
import urllib.request

CHUNK = 1 << 16
READ_TIMEOUT_S = 60.0      # each connect and each read of the socket
PLAIN_STEPS = 10           # plain lines per file when the output is not a terminal


class DownloadError(Exception):
  pass


def _partial_size(part: str) -> int:
  """Bytes of an earlier download in part; anything there that is not a regular file (a symbolic link) is removed,
  never followed."""
  try: st = os.lstat(part)
  except FileNotFoundError: return 0
  if stat.S_ISREG(st.st_mode): return st.st_size
  os.unlink(part)
  return 0


def _sha256_prefix(path: str) -> "hashlib._Hash":
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""): h.update(chunk)
  return h


def _human(n: float) -> str:
  for unit in ("B", "KiB", "MiB", "GiB"):
    if n < 1024 or unit == "GiB": return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024
  return f"{n} B"


class Progress:
  """Byte progress of one file: tqdm on a terminal, plain lines (one per tenth) otherwise, nothing when quiet."""

  def __init__(self, name: str, total: int, done: int, out=None, quiet: bool = False):
    self.out = sys.stderr if out is None else out
    self.name, self.total, self.done, self.quiet = name, total, done, quiet
    self.bar = None
    self.next_step = 0
    isatty = getattr(self.out, "isatty", None)
    if quiet: return
    if isatty is not None and isatty():
      from tqdm import tqdm

      class Bar(tqdm):
        monitor_interval = 0   # no monitor thread (tqdm's TMonitor): the bar is updated on every chunk anyway
      self.bar = Bar(total=total or None, initial=done, unit="B", unit_scale=True, unit_divisor=1024, desc=name,
                      file=self.out, leave=True, dynamic_ncols=True)
    else:
      self._line("resuming" if done else "starting")
      self.next_step = self._step(done) + 1

  def _step(self, n: int) -> int:
    return min(PLAIN_STEPS, n * PLAIN_STEPS // self.total) if self.total else 0

  def _line(self, what: str) -> None:
    pct = f" ({100 * self.done // self.total}%)" if self.total else ""
    of = f" of {_human(self.total)}" if self.total else ""
    print(f"{self.name}: {what}, {_human(self.done)}{of}{pct}", file=self.out, flush=True)

  def update(self, n: int) -> None:
    self.done += n
    if self.quiet: return
    if self.bar is not None: self.bar.update(n)
    elif self.total and self._step(self.done) >= self.next_step:
      self.next_step = self._step(self.done) + 1
      self._line("downloading")

  def restart(self) -> None:
    """The server sent the whole file: count from 0 again."""
    self.done = 0
    if self.bar is not None: self.bar.reset(total=self.total or None)
    elif not self.quiet:
      self.next_step = 1
      self._line("the server does not resume; starting again")

  def close(self) -> None:
    if self.bar is not None: self.bar.close()


def fetch(url: str, dest: str, size: int | None, sha256: str, *, out=None, quiet: bool = False,
          deadline_s: float = 1800.0, opener=urllib.request.urlopen) -> str:
  """Download url to dest (resuming dest.part), check its size (when given) and sha256; returns dest.
  A DownloadError names the URL and what went wrong; a sha256 mismatch removes the partial file."""
  name = os.path.basename(dest)
  part = dest + ".part"
  have = _partial_size(part)
  if size is not None and have > size: os.unlink(part); have = 0   # not a prefix of this file
  h = _sha256_prefix(part) if have else hashlib.sha256()
  progress = Progress(name, size or 0, have, out, quiet)
  deadline = time.monotonic() + deadline_s
  try:
    if size is None or have < size:
      req = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
      try: resp = opener(req, timeout=READ_TIMEOUT_S)
      except urllib.error.HTTPError as e:
        if e.code == 416 and size is not None and have == size: resp = None   # nothing left to send
        else: raise DownloadError(f"{url}: HTTP {e.code} {e.reason}") from None
      except (urllib.error.URLError, OSError) as e:
        raise DownloadError(f"{url}: {getattr(e, 'reason', e)}") from None
      if resp is not None:
        with resp:
          status = getattr(resp, "status", 200)
          mode = "ab"
          if have and status != 206:   # the server ignored the Range: the body is the whole file
            have, h, mode = 0, hashlib.sha256(), "wb"
            progress.restart()
          flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if mode == "ab" else os.O_TRUNC)
          with os.fdopen(os.open(part, flags, 0o644), "wb") as f:
            while True:
              if time.monotonic() > deadline:
                raise DownloadError(f"{url}: not done in {deadline_s:g} s ({progress.done} bytes so far, kept in {part}; "
                                    f"run again to resume)")
              try: chunk = resp.read(CHUNK)
              except OSError as e:
                raise DownloadError(f"{url}: the download stopped after {progress.done} bytes ({e}); kept in {part}: "
                                    f"run again to resume") from None
              if not chunk: break
              f.write(chunk)
              h.update(chunk)
              progress.update(len(chunk))
  finally:
    progress.close()
  got_size = os.path.getsize(part)
  if size is not None and got_size != size:
    raise DownloadError(f"{url}: the server sent {got_size} bytes of {size}; kept in {part}: run again to resume")
  digest = h.hexdigest()
  if digest != sha256:
    os.unlink(part)
    raise DownloadError(f"{url}: sha256 {digest} does not match the pinned {sha256}; the download was removed")
  os.replace(part, dest)
  return dest
