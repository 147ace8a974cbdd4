"""python -m hcq.autogen: --check on the committed modules, bad input, the check catching a difference."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from hcq.autogen import generator


def run(*args, cwd=None):
  return subprocess.run([sys.executable, "-m", "hcq.autogen", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_check_regenerates_every_committed_module_identically():
  from hcq.config import from_env
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, print)
  for key in manifest["packages"]: roots.root(key)   # fetch + unpack (once) before timing
  t0 = time.monotonic()
  r = run("--check")
  elapsed = time.monotonic() - t0
  assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]
  assert "regenerate identically" in r.stderr
  print(f"--check of {len(generator.load_manifest()['modules'])} modules: {elapsed:.1f} s")
  assert elapsed < 60


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
  t0 = time.monotonic()
  with pytest.raises(sources.SourceError, match=r"apt-get --print-uris download hcq-slow-package=1.0 did not finish in 0.5 s"):
    sources.fetch_deb(pkg, str(tmp_path / "cache"), log=lambda *a: None)
  assert time.monotonic() - t0 < 10


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
