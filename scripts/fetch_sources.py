"""Fetch what the test suite otherwise downloads on first use, into the caches the tests read: the pinned Debian
packages of autogen/manifest.json (generator.Roots.root: apt-get download + unpack; git packages are read from a
mirror, never fetched), the AMD firmware package (autogen/fwpackage.py, as `hcq fw fetch`) and NVIDIA's ptxas
(tests/backend/ptxas_tool.py).

scripts/test.sh runs it while pip installs the test extras, so that a run from a fresh clone and HOME downloads
and unpacks them at the same time as pip works instead of inside the first tests that need them (issue 33 P4).
It changes nothing the tests check: whatever cannot be had here is named on stderr, and the tests then fetch it
themselves or skip, saying why, as they do without this script. Exit status 0 either way.

    .venv/bin/python scripts/fetch_sources.py
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
  from hcq.autogen import fwpackage, generator, sources
  from hcq.config import from_env
  cfg = from_env()
  quiet = lambda *a: None  # noqa: E731
  t0 = time.monotonic()
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, cfg.autogen_cache, quiet, cfg.autogen_git)
  for key, pkg in manifest["packages"].items():
    if pkg.get("git"): continue          # a mirror's (HCQ_AUTOGEN_GIT) or nothing: no download
    try: roots.root(key)
    except (sources.SourceError, generator.GenerateError) as e: print(f"fetch_sources: {key}: {e}", file=sys.stderr)
  try: fwpackage.firmware_dir(cfg.autogen_cache, quiet, progress=False)
  except sources.SourceError as e: print(f"fetch_sources: firmware: {e}", file=sys.stderr)
  sys.path.insert(0, os.path.join(ROOT, "tests", "backend"))
  from ptxas_tool import ToolUnavailable, ptxas_path
  try: ptxas_path(cfg.cache_dir)
  except (ToolUnavailable, OSError) as e: print(f"fetch_sources: ptxas: {e}", file=sys.stderr)
  print(f"fetch_sources: done in {time.monotonic() - t0:.1f} s", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
