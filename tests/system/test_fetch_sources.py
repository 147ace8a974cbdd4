"""scripts/fetch_sources.py, which scripts/test.sh runs while pip installs the test extras: afterwards every package it
fetches is where the tests read it, so that none of them downloads or unpacks inside pytest."""
from __future__ import annotations

import importlib.util
import os
import pathlib

import pytest

from hcq.autogen import fwpackage, generator, sources
from hcq.config import from_env
from hcq.safefiles import is_private_file

REPO = pathlib.Path(__file__).resolve().parents[2]


def _module(name: str, path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(name, path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def test_after_fetch_sources_no_package_is_fetched_or_unpacked_again(capfd):
  assert _module("fetch_sources", REPO / "scripts" / "fetch_sources.py").main() == 0
  err = capfd.readouterr().err
  missing = [line for line in err.splitlines() if line.startswith("fetch_sources: ") and " done in " not in line]
  if missing: pytest.skip("packages that cannot be had on this machine: " + "; ".join(missing))
  assert "fetch_sources: done in" in err
  cfg = from_env()
  packages = [pkg for pkg in generator.load_manifest()["packages"].values() if not pkg.get("git")]
  packages.append(fwpackage.PACKAGE)
  assert len(packages) >= 5
  said = []
  for pkg in packages:
    # a package still to fetch or unpack says so through log ("downloading", "unpacking") before doing it
    dest = sources.unpack(pkg, cfg.autogen_cache, log=said.append, progress=False)
    assert dest == sources.unpack_dir(pkg, cfg.autogen_cache) and os.path.isdir(dest)
  assert said == []
  ptxas = _module("ptxas_tool", REPO / "tests" / "backend" / "ptxas_tool.py")
  exe = os.path.join(cfg.cache_dir, "ptxas", ptxas.VERSION, "ptxas")
  assert is_private_file(exe) and ptxas.ptxas_path(cfg.cache_dir) == exe
