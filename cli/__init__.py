"""The `hcq` command. Each subcommand lives in its own module in this package and exposes

    register(subparsers) -> None      # adds its parser; sets func=callable(args) -> int exit code

Modules are discovered, so adding a command never touches this file."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys


def build_parser() -> argparse.ArgumentParser:
  from .. import __version__
  parser = argparse.ArgumentParser(prog="hcq", description="Drive GPU and RDMA NIC command queues from userspace.")
  parser.add_argument("--version", action="version", version=f"hcq {__version__}")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND")
  for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if info.name.startswith("_"): continue
    module = importlib.import_module(f"{__name__}.{info.name}")
    if hasattr(module, "register"): module.register(sub)
  return parser


def main(argv: list[str] | None = None) -> int:
  parser = build_parser()
  args = parser.parse_args(argv)
  if not getattr(args, "func", None):
    parser.print_help()
    return 2
  from ..errors import ConfigError, HCQError
  try:
    return int(args.func(args) or 0)
  except ConfigError as e:   # a value the command cannot use (a flag, an environment variable): a usage error
    print(f"hcq {args.command}: error: {e}", file=sys.stderr)
    return 2
  except HCQError as e:
    print(f"hcq {args.command}: error: {e}", file=sys.stderr)
    return 1
  except KeyboardInterrupt:
    return 130


if __name__ == "__main__":
  sys.exit(main())
