"""python -m hcq.autogen: --check on the committed modules, bad input, the check catching a difference."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from hcq.autogen import generator


def run(*args, cwd=None):
  return subprocess.run([sys.executable, "-m", "hcq.autogen", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_check_regenerates_every_committed_module_identically():
  from hcq.config import from_env
  manifest = generator.load_manifest()
  cfg = from_env()
  roots = generator.Roots(manifest, cfg.autogen_cache, print, cfg.autogen_git)
  for key in manifest["packages"]:   # fetch + unpack (once) before the check
    try: roots.root(key)
    except generator.sources.SourceUnavailable: pass    # a git package not on this machine: --check says it skips it
  # `--check NAME ...` is `--check` on the modules named (names default to the manifest's): every module is checked
  # by one of two processes at once (balanced by the committed modules' sizes, which is what their regeneration
  # costs), so that the check uses both cores of a 2-core CI machine; each process is bounded by its timeout
  halves = _balanced_halves(manifest["modules"])
  assert sorted(halves[0] + halves[1]) == sorted(manifest["modules"])
  procs = [subprocess.Popen([sys.executable, "-m", "hcq.autogen", "--check", *half], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True) for half in halves]
  for p, half in zip(procs, halves):
    try: out, err = p.communicate(timeout=300)
    finally:
      if p.poll() is None: p.kill(); p.communicate()
    assert p.returncode == 0, out[-5000:] + err[-5000:]
    checked = re.search(r"autogen --check: (\d+) modules regenerate identically", err)
    skipped = re.search(r"autogen --check: (\d+) modules not checked", err)
    assert checked and int(checked[1]) + (int(skipped[1]) if skipped else 0) == len(half), err[-5000:]


def _balanced_halves(modules) -> tuple[list[str], list[str]]:
  """The module names in two lists of about equal committed source size (largest first, each to the lighter list)."""
  paths = {n: os.path.join(generator.PACKAGE_DIR, generator.module_path(n)) for n in modules}
  size = {n: os.path.getsize(p) if os.path.exists(p) else 0 for n, p in paths.items()}
  halves, weight = ([], []), [0, 0]
  for n in sorted(modules, key=lambda n: (-size[n], n)):
    i = weight.index(min(weight))
    halves[i].append(n)
    weight[i] += size[n]
  return halves


def test_unknown_module_lists_the_known_ones():
  r = run("kfd", "no_such_module")
  assert r.returncode == 2
  assert "unknown module(s): no_such_module" in r.stderr
  for name in ("kfd", "bnxt", "amd.pm4", "amd.gc_11_0_0"): assert name in r.stderr


def _manifest(tmp_path, header_text: str) -> str:
  h = tmp_path / "tiny.h"
  h.write_text(header_text)
  m = {"packages": {}, "modules": {"tiny": {"kind": "c", "headers": [str(h)], "include": []}}}
  p = tmp_path / "manifest.json"
  p.write_text(json.dumps(m))
  return str(p)


def test_a_header_that_does_not_parse_names_file_and_line(tmp_path):
  man = _manifest(tmp_path, "struct ok { int a; };\n\nstruct broken { int a; nosuchtype b; };\n")
  r = run("--manifest", man, "--out", str(tmp_path / "out"), "tiny")
  assert r.returncode == 2
  assert f"{tmp_path / 'tiny.h'}:3:" in r.stderr, r.stderr
  assert not (tmp_path / "out" / "tiny.py").exists()


def test_check_reports_a_difference_with_a_diff(tmp_path):
  man = _manifest(tmp_path, "#define TINY_A 1\n#define TINY_B (1 << 31)\nstruct tiny { char c; long l; };\n")
  out = tmp_path / "out"
  assert run("--manifest", man, "--out", str(out), "tiny").returncode == 0
  text = (out / "tiny.py").read_text()
  assert "TINY_B = -2147483648" in text
  assert run("--manifest", man, "--check", "--committed", str(out), "tiny").returncode == 0
  (out / "tiny.py").write_text(text.replace("TINY_A = 1", "TINY_A = 2"))
  r = run("--manifest", man, "--check", "--committed", str(out), "tiny")
  assert r.returncode == 1
  assert "-TINY_A = 2" in r.stdout and "+TINY_A = 1" in r.stdout


def test_a_package_that_cannot_be_fetched_is_named(tmp_path):
  m = {"packages": {"nopkg": {"name": "hcq-no-such-package", "version": "1.0", "arch": "all", "sha256": "0" * 64,
                              "members": ["x.h"]}},
       "modules": {"tiny": {"kind": "c", "headers": ["nopkg:x.h"], "include": []}}}
  (tmp_path / "manifest.json").write_text(json.dumps(m))
  r = run("--manifest", str(tmp_path / "manifest.json"), "--cache", str(tmp_path / "cache"), "--out", str(tmp_path), "tiny")
  assert r.returncode == 2
  assert "apt-get --print-uris download hcq-no-such-package=1.0 failed" in r.stderr, r.stderr


def test_a_cached_package_with_the_wrong_sha256_is_not_used(tmp_path):
  from hcq.autogen import sources
  pkg = {"name": "hcq-no-such-package", "version": "1.0", "arch": "all", "sha256": "0" * 64, "members": []}
  debs = tmp_path / "debs"
  debs.mkdir()
  (debs / sources.deb_filename("hcq-no-such-package", "1.0", "all")).write_bytes(b"not the pinned package")
  with pytest.raises(sources.SourceError, match="apt-get --print-uris download"):
    sources.fetch_deb(pkg, str(tmp_path), log=lambda *a: None)


def test_a_download_that_hangs_times_out_naming_the_package(tmp_path, monkeypatch):
  from hcq.autogen import sources
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  (bin_dir / "apt-get").write_text("#!/bin/sh\nexec sleep 30\n")
  (bin_dir / "apt-get").chmod(0o755)
  monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
  monkeypatch.setattr(sources, "DOWNLOAD_TIMEOUT_S", 0.5)
  monkeypatch.setattr(sources, "APT_ARCHIVES", str(tmp_path / "no-archives"))
  pkg = {"name": "hcq-slow-package", "version": "1.0", "arch": "all", "sha256": "0" * 64, "members": []}
  # the error names the 0.5 s it waited (a wait for the 30 s sleep would have ended without it)
  with pytest.raises(sources.SourceError, match=r"apt-get --print-uris download hcq-slow-package=1.0 did not finish in 0.5 s"):
    sources.fetch_deb(pkg, str(tmp_path / "cache"), log=lambda *a: None)


def test_a_cache_held_by_another_generator_is_waited_for_with_a_limit(tmp_path, monkeypatch):
  import fcntl
  from hcq.autogen import sources
  cache = tmp_path / "cache"
  cache.mkdir()
  monkeypatch.setattr(sources, "CACHE_LOCK_TIMEOUT_S", 0.5)
  with open(cache / ".lock", "w") as other:
    fcntl.flock(other, fcntl.LOCK_EX)
    pkg = {"name": "x", "version": "1", "arch": "all", "sha256": "0" * 64, "members": []}
    with pytest.raises(sources.SourceError, match=r"\.lock: another generator held the cache for 0.5 s"):
      sources.unpack(pkg, str(cache), log=lambda *a: None)


def test_check_skips_git_packages_not_on_the_machine_saying_so(tmp_path, monkeypatch):
  """The per-series NVIDIA modules come from a git tag CI cannot fetch: without the unpacked headers and without a
  mirror, --check leaves them unchecked and says which (exit 0); the other modules are still checked."""
  cache = tmp_path / "cache"
  cache.mkdir(mode=0o700)
  env = {k: v for k, v in __import__("os").environ.items() if k != "HCQ_AUTOGEN_GIT"}
  r = subprocess.run([sys.executable, "-m", "hcq.autogen", "--check", "nv.rm_580", "nv.uvm_590", "--cache", str(cache)],
                     capture_output=True, text=True, timeout=300, env=env)
  assert r.returncode == 0, r.stderr
  assert "2 modules not checked, their headers are not on this machine" in r.stderr and "nv.rm_580, nv.uvm_590" in r.stderr
  assert "NVIDIA/open-gpu-kernel-modules 580.105.08 (commit 2af9f1f0f7de)" in r.stderr


def test_a_git_package_is_read_from_a_mirror_at_its_pinned_commit(tmp_path):
  """sources: a git package's members come from the mirror holding the pinned commit (git archive); the module names
  the tag, commit and blob of each header; a tag that moved to another commit is refused."""
  from hcq.autogen import sources
  repo = tmp_path / "repo"
  (repo / "inc").mkdir(parents=True)
  (repo / "inc" / "a.h").write_text("#define A_VALUE 7\n")
  git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
  subprocess.run(["git", "init", "-q", str(repo)], check=True)
  subprocess.run(git + ["add", "."], check=True)
  subprocess.run(git + ["commit", "-qm", "one"], check=True)
  subprocess.run(git + ["tag", "1.0"], check=True)
  commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
  cache = tmp_path / "cache"
  cache.mkdir(mode=0o700)
  pkg = {"git": "example/repo", "tag": "1.0", "commit": commit, "members": ["inc"]}
  with pytest.raises(sources.SourceUnavailable, match="example/repo 1.0.*no git mirror"):
    sources.unpack(pkg, str(cache), lambda *a: None, "")
  root = sources.unpack(pkg, str(cache), lambda *a: None, str(repo / ".git"))
  assert open(f"{root}/inc/a.h").read() == "#define A_VALUE 7\n"
  blob = subprocess.run(git + ["rev-parse", "HEAD:inc/a.h"], capture_output=True, text=True, check=True).stdout.strip()
  assert sources.git_blob_sha(f"{root}/inc/a.h") == blob
  assert sources.unpack(pkg, str(cache), lambda *a: None, "") == root      # unpacked once: no mirror needed again
  (repo / "inc" / "a.h").write_text("#define A_VALUE 8\n")
  subprocess.run(git + ["commit", "-qam", "two"], check=True)
  subprocess.run(git + ["tag", "-f", "1.0"], check=True, capture_output=True)
  moved = dict(pkg, members=["inc/a.h"])
  with pytest.raises(sources.SourceError, match="tag 1.0 of example/repo names commit .*, the manifest pins"):
    sources.unpack(moved, str(cache), lambda *a: None, str(repo / ".git"))
