"""Fetch the pinned Debian packages that hold the headers, check them, and unpack only the members we need.

A *source* package (manifest "source": true: Mesa, for the Adreno material) is located with `apt-get --print-uris
source --download-only NAME=VERSION` through a private deb-src list built from the machine's own Debian entry; its upstream
tarball ("orig") is what the sha256 pins, and the members are taken out of that tarball (below its "strip" folder).

A package is named in manifest.json by name, version, architecture and sha256. apt says where it is (`apt-get
--print-uris download NAME=VERSION`) and download.py fetches it (resumable, byte progress on stderr) into <cache>/debs (a copy already in apt's own archive cache is taken when its
sha256 matches), then the listed members are unpacked with `dpkg-deb --fsys-tarfile` + `tar` into
<cache>/src/<name>_<version>-<hash of the member list>/. linux-source ships one big tarball inside the .deb: only the members asked for
are taken out of it. A stamp file records what was unpacked so that a second run does nothing.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from ..safefiles import atomic_writer, private_dir

APT_ARCHIVES = "/var/cache/apt/archives"
APT_SOURCES = "/etc/apt"
# Every wait has a limit: the download (linux-source is ~150 MB), each unpack, and the wait for another generator
# that holds the cache (it may be downloading).
DOWNLOAD_TIMEOUT_S, UNPACK_TIMEOUT_S, CACHE_LOCK_TIMEOUT_S = 1800.0, 600.0, 2400.0


class SourceError(Exception):
  pass


class SourceUnavailable(SourceError):
  """A package whose files cannot be had on this machine: a git package (below) neither unpacked in the cache nor
  held by a mirror named in Config.autogen_git. The generator skips its modules, saying so (their committed text
  stays what it is: CI, which cannot reach GitHub, checks the rest)."""


def deb_filename(name: str, version: str, arch: str) -> str:
  return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def sha256_of(path: str) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""): h.update(chunk)
  return h.hexdigest()


def private_cache(cache: str) -> str:
  """The cache folder, checked to be this user's alone (safefiles.private_dir): the headers unpacked there become
  committed code, and an unpacked tree is trusted by its stamp, not checked again."""
  return private_dir(cache, "choose another package cache with --cache or HCQ_AUTOGEN_CACHE")


def fetch_deb(pkg: dict, cache: str, log=print, progress=None) -> str:
  """The path of the package's .deb in the cache, downloaded with apt-get when missing; sha256 checked."""
  debs = os.path.join(private_cache(cache), "debs")
  os.makedirs(debs, exist_ok=True)
  fname = deb_filename(pkg["name"], pkg["version"], pkg["arch"])
  path = os.path.join(debs, fname)
  if os.path.exists(path) and sha256_of(path) == pkg["sha256"]: return path
  local = os.path.join(APT_ARCHIVES, fname)
  if os.path.exists(local) and sha256_of(local) == pkg["sha256"]:
    log(f"autogen: taking {fname} from {APT_ARCHIVES}")
    with open(local, "rb") as src, atomic_writer(path, perm=0o644) as dst: shutil.copyfileobj(src, dst, 1 << 20)
    return path
  log(f"autogen: downloading {pkg['name']}={pkg['version']}")
  # a package of a suite or component the machine's own apt sources may lack (non-free-firmware) is fetched through a
  # private sources list; the others through the machine's apt configuration, as before. apt says where the file is
  # (--print-uris); the download itself is ours: resumable, with byte progress (download.py)
  def download(opts):
    what = f"apt-get --print-uris download {pkg['name']}={pkg['version']}"
    url, size, sha = _print_uri(_apt(["apt-get", *opts, "--print-uris", "download", f"{pkg['name']}={pkg['version']}"],
                                     debs, what), fname, what)
    _download(url, path, size, pkg["sha256"], sha, progress)
  if not pkg.get("suite"): download([])
  else:
    fetched = []
    opts = private_apt_options(pkg, cache, fetched=fetched)
    try: download(opts)
    except SourceError:
      if fetched: raise      # the lists are fresh from this call: fetching them again would not help
      download(private_apt_options(pkg, cache, refresh=True))   # lists fetched long ago may be stale: once more
  if not os.path.exists(path): raise SourceError(f"apt-get download did not produce {path}")
  got = sha256_of(path)
  if got != pkg["sha256"]:
    os.unlink(path)
    raise SourceError(f"{fname}: sha256 {got} does not match the manifest's {pkg['sha256']}")
  return path


def fetch_source(pkg: dict, cache: str, log=print, progress=None) -> str:
  """The path of a source package's upstream tarball in the cache, downloaded with `apt-get source --download-only`
  through a private deb-src list when missing; sha256 checked (a mismatch is removed and is an error)."""
  folder = os.path.join(private_cache(cache), "debs", f"{pkg['name']}_{pkg['version'].replace(':', '_')}_source")
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, pkg["orig"])
  if os.path.exists(path) and sha256_of(path) == pkg["sha256"]: return path
  what = f"apt-get source --download-only {pkg['name']}={pkg['version']}"
  log(f"autogen: {what}")
  fetched = []
  # apt says where the upstream tarball is (--print-uris); only that file is downloaded, with progress (download.py)
  def uris(opts):
    return _apt(["apt-get", *opts, "--print-uris", "source", "--download-only", f"{pkg['name']}={pkg['version']}"],
                folder, what)
  try: listing = uris(private_apt_options(pkg, cache, fetched=fetched))
  except SourceError:
    if fetched: raise
    listing = uris(private_apt_options(pkg, cache, refresh=True))
  url, size, sha = _print_uri(listing, pkg["orig"], what)
  _download(url, path, size, pkg["sha256"], sha, progress)
  if not os.path.exists(path): raise SourceError(f"{what} did not produce {pkg['orig']} in {folder}")
  got = sha256_of(path)
  if got != pkg["sha256"]:
    os.unlink(path)
    raise SourceError(f"{pkg['orig']}: sha256 {got} does not match the manifest's {pkg['sha256']}")
  return path


def _apt(argv: list[str], cwd: str, what: str) -> str:
  """Run an apt command; its stdout."""
  try: r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
  except FileNotFoundError: raise SourceError(f"{what}: {argv[0]} is not installed (a Debian tool)") from None
  except subprocess.TimeoutExpired: raise SourceError(f"{what} did not finish in {DOWNLOAD_TIMEOUT_S:g} s") from None
  if r.returncode != 0: raise SourceError(f"{what} failed (rc {r.returncode}): {r.stderr.strip()}")
  return r.stdout


def _print_uri(listing: str, fname: str, what: str) -> tuple[str, int | None, str]:
  """(URL, size, sha256 or "") of fname in apt's --print-uris output: one line per file, `'URL' FILENAME SIZE
  HASHTYPE:HASH` (apt-get(8), --print-uris: "URI, destination filename, size and expected hash")."""
  for line in listing.splitlines():
    parts = line.split()
    if len(parts) >= 2 and parts[0].startswith("'") and parts[0].endswith("'") and parts[1] == fname:
      size = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
      sha = next((p.split(":", 1)[1].lower() for p in parts[3:] if p.upper().startswith("SHA256:")), "")
      return parts[0][1:-1], size, sha
  raise SourceError(f"{what}: apt does not list {fname} (apt's answer: {listing.strip()[:300]!r})")


def _download(url: str, path: str, size: int | None, pinned: str, apt_sha: str, progress) -> None:
  """Download url to path (download.fetch: resumable, progress on stderr unless progress is False); the sha256 the
  archive's index gives must be the pinned one before a byte is fetched."""
  from . import download
  if apt_sha and apt_sha != pinned:
    raise SourceError(f"{url}: the archive's index gives sha256 {apt_sha}, not the manifest's {pinned} (another build "
                      f"of the same version?)")
  try: download.fetch(url, path, size, pinned, quiet=progress is False, out=None if progress in (None, False) else progress)
  except download.DownloadError as e: raise SourceError(str(e)) from None


def debian_mirror(sources_dir: str = APT_SOURCES) -> tuple[str, str]:
  """(URI, Signed-By) of the machine's own Debian archive entry: the first stanza of debian.sources (deb822), else
  the first `deb` line of sources.list. The registry is never named in code: the machine's own entry is used.
  A Signed-By that holds the key itself (a multi-line block, not a path) gives "": apt then checks the archive with the
  machine's own keyring, as it does for the machine's own sources."""
  deb822 = os.path.join(sources_dir, "sources.list.d", "debian.sources")
  if os.path.exists(deb822):
    for stanza in _read_text(deb822).split("\n\n"):
      fields = {}
      for line in stanza.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "#")): fields[key.strip().lower()] = value.strip()
      if "deb" in fields.get("types", "").split() and fields.get("uris"):
        return fields["uris"].split()[0], fields.get("signed-by", "")
  legacy = os.path.join(sources_dir, "sources.list")
  if os.path.exists(legacy):
    for line in _read_text(legacy).splitlines():
      m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s*)?(\S+)", line)   # deb [opt=v opt=v] URI suite components
      if m:
        signed = next((o.split("=", 1)[1] for o in (m.group(1) or "").split() if o.startswith("signed-by=")), "")
        return m.group(2), signed
  raise SourceError(f"no Debian archive entry in {deb822} or {legacy}: cannot build a sources list")


def private_apt_options(pkg: dict, cache: str, refresh: bool = False, sources_dir: str = APT_SOURCES,
                        fetched: list | None = None) -> list[str]:
  """apt options that read only a private sources list (the machine's Debian mirror, the package's suite and
  component) with its own package lists under <cache>/apt; the lists are fetched (apt-get update) on first use or
  when refresh is asked (then True is appended to `fetched`, if given)."""
  uri, signed = debian_mirror(sources_dir)
  kind = "deb-src" if pkg.get("source") else "deb"
  base = os.path.join(private_cache(cache), "apt", f"{pkg['suite']}_{pkg['component']}{'_src' if pkg.get('source') else ''}")
  lists = os.path.join(base, "lists")
  os.makedirs(os.path.join(lists, "partial"), exist_ok=True)
  os.makedirs(os.path.join(base, "cache"), exist_ok=True)
  line = f"{kind} {f'[signed-by={signed}] ' if signed else ''}{uri} {pkg['suite']} {pkg['component']}\n"
  listfile = os.path.join(base, "sources.list")
  if not os.path.exists(listfile) or _read_text(listfile) != line:
    with atomic_writer(listfile, text=True, perm=0o644) as f: f.write(line)
  opts = ["-o", f"Dir::Etc::sourcelist={listfile}", "-o", "Dir::Etc::sourceparts=/dev/null",
          "-o", f"Dir::State::Lists={lists}", "-o", f"Dir::Cache={os.path.join(base, 'cache')}"]
  index = "_Sources" if pkg.get("source") else "_Packages"
  if refresh or not any(n.endswith(index) or f"{index}." in n for n in os.listdir(lists)):
    _apt(["apt-get", *opts, "update"], base, f"apt-get update ({pkg['suite']} {pkg['component']})")
    if fetched is not None: fetched.append(True)
  return opts


def _read_text(path: str) -> str:
  with open(path) as f: return f.read()


def _run_pipe(first: list[str], second: list[str], what: str):
  p1 = subprocess.Popen(first, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  p2 = subprocess.Popen(second, stdin=p1.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  p1.stdout.close()
  try:
    _, err2 = p2.communicate(timeout=UNPACK_TIMEOUT_S)
    err1 = p1.stderr.read()
    p1.wait(timeout=UNPACK_TIMEOUT_S)
  except subprocess.TimeoutExpired:
    for p in (p1, p2):
      p.kill()
      p.wait()
    raise SourceError(f"{what} did not finish in {UNPACK_TIMEOUT_S:g} s: {' '.join(first)} | {' '.join(second)}") from None
  if p1.returncode or p2.returncode:
    raise SourceError(f"{what} failed: {err1.decode(errors='replace')} {err2.decode(errors='replace')}".strip())


@contextlib.contextmanager
def _cache_lock(cache: str):
  """One generator at a time fetches and unpacks into a cache (several test runs may share it)."""
  path = os.path.join(private_cache(cache), ".lock")
  # never through a symbolic link; the lock file itself stays (its identity is the lock), so no atomic rename
  try: fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
  except OSError as e:
    why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror
    raise SourceError(f"{path}: cannot open the cache's lock file: {why}") from None
  with os.fdopen(fd, "r+") as f:
    deadline = time.monotonic() + CACHE_LOCK_TIMEOUT_S
    while True:
      try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
      except BlockingIOError:
        if time.monotonic() > deadline:
          raise SourceError(f"{path}: another generator held the cache for {CACHE_LOCK_TIMEOUT_S:g} s") from None
        time.sleep(0.2)
    try: yield
    finally: fcntl.flock(f, fcntl.LOCK_UN)


def unpack(pkg: dict, cache: str, log=print, git_dirs: str = "", progress=None) -> str:
  """Unpack the package's members; returns the folder that holds them (paths relative to the package root).
  git_dirs: Config.autogen_git, the mirrors a git package may be read from; progress: where a download's byte
  progress goes (None: stderr; False: nowhere)."""
  if pkg.get("git"):
    dest = unpack_dir(pkg, cache)
    if _stamped(dest, pkg): return dest          # unpacked before: no mirror needed (and no lock: read only)
    with _cache_lock(cache): return _unpack_git(pkg, cache, log, git_dirs)
  with _cache_lock(cache): return _unpack(pkg, cache, log, progress)


def stamp_text(pkg: dict) -> str:
  keys = ("git", "commit", "members") if pkg.get("git") else ("sha256", "tarball", "strip", "members", "orig")
  return json.dumps({k: pkg.get(k) for k in keys}, sort_keys=True)


def _stamped(dest: str, pkg: dict) -> bool:
  stamp = os.path.join(dest, ".hcq-unpacked")
  return os.path.exists(stamp) and _read_text(stamp) == stamp_text(pkg)


# ---------------------------------------------------------------- git packages
# A package with "git" (the GitHub repository, owner/name), "tag" (its version) and "commit" (the 40-hex commit the tag
# names, pinned: a moved tag is an error) is read from a local git mirror (`git archive COMMIT MEMBERS`): the machine
# that generates needs one, CI does not (it skips those modules, SourceUnavailable). The generated module names the tag,
# the commit and each header's git blob sha (blob_sha below), so a reader can tell which header text it was made from.
def git_blob_sha(path: str) -> str:
  """The git blob id of a file's bytes (sha1 of "blob <size>\\0" + bytes): what `git ls-tree` lists for it."""
  with open(path, "rb") as f: data = f.read()
  return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _git(argv: list[str], what: str, binary: bool = False):
  try: r = subprocess.run(["git", *argv], capture_output=True, timeout=UNPACK_TIMEOUT_S)
  except FileNotFoundError: raise SourceError(f"{what}: git is not installed") from None
  except subprocess.TimeoutExpired: raise SourceError(f"{what}: git did not finish in {UNPACK_TIMEOUT_S:g} s") from None
  if r.returncode: raise SourceError(f"{what}: git {' '.join(argv[:3])} failed: {r.stderr.decode(errors='replace').strip()}")
  return r.stdout if binary else r.stdout.decode().strip()


def find_mirror(pkg: dict, git_dirs: str) -> str | None:
  """The first git directory of git_dirs (':'-separated) that holds the pinned commit; the tag, when the mirror has
  it, must name that commit (a moved tag is an error, not a silent other header text)."""
  for d in [x for x in git_dirs.split(":") if x]:
    if not os.path.isdir(d): continue
    try: _git(["--git-dir", d, "cat-file", "-e", pkg["commit"] + "^{commit}"], f"{d}")
    except SourceError: continue
    try: tagged = _git(["--git-dir", d, "rev-parse", "--verify", "-q", f"refs/tags/{pkg['tag']}^{{commit}}"], d)
    except SourceError: tagged = ""
    if tagged and tagged != pkg["commit"]:
      raise SourceError(f"{d}: tag {pkg['tag']} of {pkg['git']} names commit {tagged}, the manifest pins {pkg['commit']}")
    return d
  return None


def _unpack_git(pkg: dict, cache: str, log, git_dirs: str) -> str:
  dest = unpack_dir(pkg, cache)
  if _stamped(dest, pkg): return dest
  mirror = find_mirror(pkg, git_dirs)
  if mirror is None:
    raise SourceUnavailable(f"{pkg['git']} {pkg['tag']} (commit {pkg['commit'][:12]}): not unpacked in {cache} and no "
                            f"git mirror holding that commit is named (HCQ_AUTOGEN_GIT={git_dirs!r})")
  log(f"autogen: git archive {pkg['git']} {pkg['tag']} from {mirror}")
  if os.path.exists(dest): shutil.rmtree(dest)
  os.makedirs(os.path.dirname(dest), exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".unpack-", dir=os.path.dirname(dest))
  try:
    tar = os.path.join(tmp, "members.tar")
    data = _git(["--git-dir", mirror, "archive", "--format=tar", pkg["commit"], "--", *pkg["members"]],
                f"git archive {pkg['tag']}", binary=True)
    with open(tar, "wb") as f: f.write(data)
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    try: r = subprocess.run(["tar", "-x", "-f", tar, "-C", out], capture_output=True, text=True, timeout=UNPACK_TIMEOUT_S)
    except subprocess.TimeoutExpired: raise SourceError(f"tar -x {tar} did not finish in {UNPACK_TIMEOUT_S:g} s") from None
    if r.returncode: raise SourceError(f"tar -x {tar} failed: {r.stderr.strip()}")
    os.replace(out, dest)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  with atomic_writer(os.path.join(dest, ".hcq-unpacked"), text=True, perm=0o644) as f: f.write(stamp_text(pkg))
  return dest


def unpack_dir(pkg: dict, cache: str) -> str:
  """Where pkg's members are unpacked: one folder per package version *and* member list (a short hash of the stamp),
  so that checkouts whose manifests ask for other members (branches, worktrees sharing a cache) each keep their own
  tree instead of unpacking the shared one again under each other's feet."""
  digest = hashlib.sha256(stamp_text(pkg).encode()).hexdigest()[:12]
  if pkg.get("git"): return os.path.join(cache, "src", f"{pkg['git'].replace('/', '+')}_{pkg['tag']}-{digest}")
  return os.path.join(cache, "src", f"{pkg['name']}_{pkg['version'].replace(':', '_')}-{digest}")


def _unpack(pkg: dict, cache: str, log=print, progress=None) -> str:
  dest = unpack_dir(pkg, cache)
  want = stamp_text(pkg)
  stamp = os.path.join(dest, ".hcq-unpacked")
  if os.path.exists(stamp) and open(stamp).read() == want: return dest
  deb = fetch_source(pkg, cache, log, progress) if pkg.get("source") else fetch_deb(pkg, cache, log, progress)
  log(f"autogen: unpacking {len(pkg['members'])} member patterns of {os.path.basename(deb)}")
  if os.path.exists(dest): shutil.rmtree(dest)
  os.makedirs(os.path.dirname(dest), exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".unpack-", dir=os.path.dirname(dest))
  try:
    members = list(pkg["members"])
    if pkg.get("source"):
      # the upstream tarball itself: only the members, below its top folder
      out = os.path.join(tmp, "out")
      os.makedirs(out)
      argv = ["tar", "-x", "-f", deb, "-C", out, "--wildcards", "--no-wildcards-match-slash"] + [pkg["strip"] + m for m in members]
      try: r = subprocess.run(argv, capture_output=True, text=True, timeout=UNPACK_TIMEOUT_S)
      except subprocess.TimeoutExpired: raise SourceError(f"tar -x {deb} did not finish in {UNPACK_TIMEOUT_S:g} s") from None
      if r.returncode: raise SourceError(f"tar -x {deb} failed: {r.stderr.strip()}")
      root = os.path.join(out, pkg["strip"].rstrip("/"))
    elif pkg.get("tarball"):
      # the .deb holds a tarball (linux-source): take it out, then take only the members out of it
      _run_pipe(["dpkg-deb", "--fsys-tarfile", deb], ["tar", "-x", "-C", tmp, "./" + pkg["tarball"]], "dpkg-deb")
      inner = os.path.join(tmp, pkg["tarball"])
      strip = pkg.get("strip", "")
      out = os.path.join(tmp, "out")
      os.makedirs(out)
      argv = ["tar", "-x", "-f", inner, "-C", out, "--wildcards", "--no-wildcards-match-slash"] + [strip + m for m in members]
      try: r = subprocess.run(argv, capture_output=True, text=True, timeout=UNPACK_TIMEOUT_S)
      except subprocess.TimeoutExpired: raise SourceError(f"tar -x {inner} did not finish in {UNPACK_TIMEOUT_S:g} s") from None
      if r.returncode: raise SourceError(f"tar -x {inner} failed: {r.stderr.strip()}")
      os.unlink(inner)
      root = os.path.join(out, strip.rstrip("/")) if strip else out
    else:
      out = os.path.join(tmp, "out")
      os.makedirs(out)
      _run_pipe(["dpkg-deb", "--fsys-tarfile", deb],
                ["tar", "-x", "-C", out, "--wildcards", "--no-wildcards-match-slash"] + ["./" + m for m in members],
                "dpkg-deb")
      root = out
    os.replace(root, dest)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  with atomic_writer(stamp, text=True, perm=0o644) as f: f.write(want)
  return dest


def asm_generic_shim(linux_root: str, cache: str, arch: str = "x86") -> str:
  """A folder with the asm/*.h wrappers the kernel's build generates (Kbuild 'mandatory-y'): every uapi
  asm-generic header the architecture does not provide itself becomes `#include <asm-generic/X.h>`."""
  shim = os.path.join(private_cache(cache), "shim", f"uapi-asm-{arch}")
  generic = os.path.join(linux_root, "include", "uapi", "asm-generic")
  own = os.path.join(linux_root, "arch", arch, "include", "uapi", "asm")
  want = {}
  for name in sorted(os.listdir(generic)):
    if name.endswith(".h") and not os.path.exists(os.path.join(own, name)):
      want[name] = f"#include <asm-generic/{name}>\n"
  # scripts/headers_install.sh deletes `#include <linux/compiler(_types).h>` from exported headers: the same
  # effect for the headers as they are in include/uapi is an empty header of that name
  for name in ("compiler.h", "compiler_types.h"):
    want["../linux/" + name] = "/* empty: scripts/headers_install.sh removes this include from exported headers */\n"
  os.makedirs(os.path.join(shim, "asm"), exist_ok=True)
  os.makedirs(os.path.join(shim, "linux"), exist_ok=True)
  for name, text in want.items():
    p = os.path.normpath(os.path.join(shim, "asm", name))
    if not os.path.exists(p) or open(p).read() != text:
      # atomically: another generator sharing the cache may be reading it right now
      with atomic_writer(p, text=True, perm=0o644) as f: f.write(text)
  return shim
