"""python -m hcq.autogen [NAME ...] [--check] [--out DIR] [--cache DIR]

Regenerates the ctypes modules listed in autogen/manifest.json from the pinned Debian packages' headers.
--check regenerates every module (or the ones named) into a temporary folder and diffs against the committed
files: exit 1 with the diff when they differ. Exit 2 for bad input (an unknown module, a header that does not
parse: the error names file:line).
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
import time

from ..errors import UnsafePathError
from . import generator


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m hcq.autogen", description=__doc__.split("\n\n")[1])
  ap.add_argument("names", nargs="*", help="modules to generate (default: all); see --list")
  ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and diff against the committed files")
  ap.add_argument("--out", help="write modules under this folder instead of the package's autogen/")
  ap.add_argument("--cache", help="package cache (default: Config.autogen_cache, HCQ_AUTOGEN_CACHE)")
  ap.add_argument("--list", action="store_true", help="list the known modules")
  ap.add_argument("--manifest", help="another manifest (default: autogen/manifest.json)")
  ap.add_argument("--committed", help="with --check: the folder holding the modules to compare (default: the package's)")
  ap.add_argument("-q", "--quiet", action="store_true")
  args = ap.parse_args(argv)
  try: manifest = generator.load_manifest(args.manifest) if args.manifest else generator.load_manifest()
  except (OSError, ValueError) as e:
    print(f"autogen: cannot read manifest: {e}", file=sys.stderr); return 2
  known = list(manifest["modules"])
  if args.list:
    print("\n".join(known)); return 0
  unknown = [n for n in args.names if n not in manifest["modules"]]
  if unknown:
    print(f"autogen: unknown module(s): {', '.join(unknown)}\nknown modules: {', '.join(known)}", file=sys.stderr)
    return 2
  from hcq.config import from_env
  cfg = from_env()
  cache = args.cache or cfg.autogen_cache
  names = args.names or known
  log = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
  here = args.committed or generator.PACKAGE_DIR
  t0 = time.monotonic()
  try:
    import clang.cindex  # noqa: F401
  except ImportError:
    print("autogen: generating needs libclang (pip install 'libclang==18.1.1', in hcq's [test] extra); "
          "the generated modules themselves do not", file=sys.stderr)
    return 2
  try:
    if args.check:
      with tempfile.TemporaryDirectory(prefix="hcq-autogen-check-") as tmp:
        skipped = generator.generate(names, manifest, cache, tmp, log, cfg.autogen_git)
        if skipped:
          # said on stderr even with -q: a check that checked less than asked must say so
          print(f"autogen --check: {len(skipped)} modules not checked, their headers are not on this machine "
                f"(not unpacked in {cache}, no git mirror in HCQ_AUTOGEN_GIT): {', '.join(skipped)}", file=sys.stderr)
        diffs = []
        for n in [n for n in names if n not in skipped]:
          rel = generator.module_path(n)
          new = open(os.path.join(tmp, rel)).read()
          old_path = os.path.join(here, rel)
          old = open(old_path).read() if os.path.exists(old_path) else ""
          if old != new:
            diffs.append("".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                      f"committed/{rel}", f"regenerated/{rel}", n=1)))
        if diffs:
          text = "\n".join(diffs)
          print(text[:200_000], end="")
          print(f"autogen --check: {len(diffs)} of {len(names)} modules differ from their regeneration", file=sys.stderr)
          return 1
        log(f"autogen --check: {len(names) - len(skipped)} modules regenerate identically ({time.monotonic() - t0:.1f} s)")
        return 0
    skipped = generator.generate(names, manifest, cache, args.out or here, log, cfg.autogen_git)
    if skipped: print(f"autogen: {len(skipped)} modules skipped (headers not on this machine): {', '.join(skipped)}",
                      file=sys.stderr)
    log(f"autogen: wrote {len(names) - len(skipped)} modules in {time.monotonic() - t0:.1f} s")
    return 0
  except (generator.GenerateError, generator.sources.SourceError) as e:
    print(f"autogen: {e}", file=sys.stderr)
    return 2
  except UnsafePathError as e:   # a package cache that is not this user's alone
    print(f"autogen: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
