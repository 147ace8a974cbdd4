"""The `hcq` command. Each subcommand lives in its own module in this package and exposes

    register(subparsers) -> None      # adds its parser; sets func=callable(args) -> int exit code

Modules are discovered, so adding a command never touches this file.

Exit status, for every subcommand: 0 done, 1 a failure (an hcq error: a device, a file, a kernel), 2 a command line
that cannot be acted on (argparse's errors, UsageError, a bad HCQ_* value: ConfigError), 130 interrupted. Errors are one line on stderr, never a
traceback. Output piped into a reader that stops early (`hcq disasm BIG | head -1`) ends the command quietly."""
from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
import sys

from ..errors import ConfigError, HCQError


class UsageError(HCQError):
  """A command line the command cannot act on (a bad option value, options that conflict): exit status 2."""


class CommandError(HCQError):
  """A command that failed on its input (a file it cannot read or write, ...): exit status 1."""


def device_spec(text: str) -> str:
  """argparse type of a --device option: a spec hcq cannot parse is a usage error (exit 2) naming it, before anything
  is opened. Returns the text as given (hcq.open parses it again)."""
  from .. import parse_spec
  from ..errors import DeviceError
  try: parse_spec(text)
  except DeviceError as e: raise argparse.ArgumentTypeError(str(e)) from None
  return text


def build_parser() -> argparse.ArgumentParser:
  from .. import __version__
  parser = argparse.ArgumentParser(prog="hcq", description="Drive GPU and RDMA NIC command queues from userspace.")
  parser.add_argument("--version", action="version", version=f"hcq {__version__}")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND")
  for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if info.name.startswith("_"): continue
    module = importlib.import_module(f"{__name__}.{info.name}")
    if hasattr(module, "register"): module.register(sub)
  for name in TRACED:   # --trace FILE: the devices' timeline (drivers/hcq/trace.py), as HCQ_TRACE=FILE
    if name in sub.choices:
      sub.choices[name].add_argument("--trace", metavar="FILE", dest="trace_file", default=None,
                                     help="write the devices' timeline to FILE (Chrome trace event JSON, for Perfetto; "
                                          "as HCQ_TRACE=FILE)")
  return parser


TRACED = ("run", "demo", "kernels")   # the commands that take --trace FILE


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
  """build_parser() once per process: parsing leaves a parser as it was (argparse copies list defaults into each
  namespace), and building one costs ~10 ms (every subcommand's arguments, each help string through gettext), which
  a program or test that calls main() many times would pay on every call. A test that replaces a command's function
  (bound by set_defaults when the parser is built) replaces this with build_parser too."""
  return build_parser()


def main(argv: list[str] | None = None) -> int:
  command = None
  try:
    parser = _parser()
    args = parser.parse_args(argv)
    command = args.command
    if not getattr(args, "func", None):
      parser.print_help(sys.stderr)
      return 2
    if getattr(args, "trace_file", None):
      from ..drivers.hcq import trace
      trace.set_path(args.trace_file)
      try: return int(args.func(args) or 0)
      finally: trace.set_path(None)
    return int(args.func(args) or 0)
  except SystemExit as e:   # argparse: 2 after its error message, 0 after --help / --version
    return _exit_status(e)
  except (UsageError, ConfigError) as e:   # a command line or an HCQ_* value the command cannot act on
    _error(command, e)
    return 2
  except HCQError as e:
    _error(command, e)
    return 1
  except MemoryError:
    _error(command, "not enough host memory for this request")
    return 1
  except BrokenPipeError as e:
    if _stdout_closed():   # the reader of our output went away (`| head`): it has what it wanted
      _silence_stdout()
      return 0
    _error(command, e)
    return 1
  except KeyboardInterrupt:
    _error(command, "interrupted")
    return 130


def _error(command: str | None, e) -> None:
  print(f"hcq {command}: error: {e}" if command else f"hcq: error: {e}", file=sys.stderr)


def _exit_status(e: SystemExit) -> int:
  if e.code is None: return 0
  if isinstance(e.code, int): return e.code
  print(e.code, file=sys.stderr)   # sys.exit("message"): Python's own convention, status 1
  return 1


def _stdout_closed() -> bool:
  """Whether stdout is a pipe whose reader has closed it (poll reports POLLERR on such a write end)."""
  import select
  try:
    fd = sys.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(ev & select.POLLERR for _, ev in poller.poll(0))
  except (OSError, ValueError, AttributeError):   # no real file descriptor (a test's capture), or closed
    return False


def _silence_stdout() -> None:
  """Point stdout at /dev/null: the interpreter flushes it at exit, which would raise BrokenPipeError once more."""
  import os
  try: os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
  except (OSError, ValueError): pass


if __name__ == "__main__":
  sys.exit(main())
