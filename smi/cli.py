"""hcq-smi command line: hcq-smi {amd,nv,bnxt} COMMAND [options]."""
from __future__ import annotations

import argparse
import sys

from ..errors import HCQError
from .backends import BACKENDS, backend
from .output import FIELDS, FORMATS, QueryError, parse_query

EXIT_CODES = """\
exit codes:
  0    success (rmmod --expect: the modules are not loaded)
  1    rmmod --expect: a module is loaded; kill_pids: a holder could not be signalled or still holds the lock
       after 128 rounds; reset: a device could not be reset; list, top: a PCI function could not be read (it is
       shown with its address and the error, the others as usual); any other error (named on stderr)
  2    usage error: a bad command, option or PCI address prefix, or a bad HCQ_* variable
  124  a command hcq-smi runs did not finish in 600 s (it is killed)
  126  a command hcq-smi runs was found but could not be run
  127  a command hcq-smi runs (modprobe, sudo, nvidia-smi) was not found in PATH's absolute, readable folders
  N    rmmod/insmod: modprobe's (or nvidia-smi's) own exit code when it fails

Lock files, sysfs and procfs come from HCQ_LOCK_DIR (default: /tmp), HCQ_SYSFS_ROOT (/sys) and
HCQ_PROC_ROOT (/proc). Lock files whose bus part is not a PCI address are ignored with a warning. A process is
signalled only when the running kernel's /proc shows it holding the lock, whatever HCQ_PROC_ROOT lists.
As a user, commands that need root run as `sudo env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CMD ARGS`: no HCQ_*
variable and nothing else of the environment is passed; when HCQ_LOCK_DIR, HCQ_PROC_ROOT or HCQ_SYSFS_ROOT
name another tree, sudo is not used for what depends on it. --sudoless: sudo is never used."""

SEE_EXIT_CODES = "exit codes: see `hcq-smi --help`"

COMMANDS = {
  "rmmod": "unload the kernel driver's modules (amd: amdgpu; nv: nvidia_drm nvidia_modeset nvidia_uvm nvidia; "
           "bnxt: bnxt_re bnxt_en) with modprobe -r",
  "insmod": "rmmod, reset every locked device, then load the kernel driver again",
  "reset": "function-level reset (sysfs) of each device hcq has locked",
  "pids": "print the processes holding each device's lock",
  "kill_pids": "SIGKILL the processes holding each device's lock until none is left",
  "list": "list AMD, NVIDIA and Broadcom PCI functions: address, ids, name, driver, lock holder",
  "top": "a refreshing table of each device (utilisation, VRAM, temperature, power; amd: the SMU's clocks, "
         "temperatures, power and activity of GPUs the AM driver holds)",
}


def _prefix(text: str) -> str:
  """A PCI address prefix; an empty or malformed one is a usage error (no option means every device)."""
  from ..drivers.system.pciaddr import validate_prefix
  try: return validate_prefix(text.lower())
  except HCQError as e: raise argparse.ArgumentTypeError(str(e)) from None


def _interval(text: str) -> float:
  try: value = float(text)
  except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
  if not 0.05 <= value <= 3600: raise argparse.ArgumentTypeError(f"{text} s: the refresh period must be 0.05-3600 s")
  return value


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="hcq-smi", description="Hand GPUs and NICs between kernel drivers and hcq.",
                                   epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("backend", type=str.lower, choices=list(BACKENDS), metavar="{" + ",".join(BACKENDS) + "}",
                      help="device family (case-insensitive)")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
  for name, text in COMMANDS.items():
    p = sub.add_parser(name, help=text, description=text, epilog=SEE_EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text (--format json)")
    if name in ("rmmod", "insmod", "reset", "kill_pids"):
      p.add_argument("--sudoless", action="store_true", help="never call sudo (as a non-root user, act only on what "
                                                             "this user may; failures give a non-zero exit)")
    if name in ("reset", "pids", "kill_pids", "top"):
      # one name, --pci; the spellings of earlier versions stay as aliases
      p.add_argument("--pci", *(("--dev",) if name == "top" else ("--pci_bus", "--pci-bus")), dest="pci", type=_prefix,
                     default=None, metavar="PREFIX",
                     help="only devices whose PCI address starts with PREFIX (e.g. 0000:03; default: every device)")
    if name in ("list", "top"):
      p.add_argument("--format", choices=FORMATS, default=None,
                     help="table (default), csv (RFC 4180, a header line) or json")
      p.add_argument("--query", metavar="FIELD,...", default=None,
                     help=f"only these fields, in this order ({name}: {','.join(FIELDS[name])})")
      p.add_argument("-l", "--loop", type=_interval, default=None, metavar="SECONDS",
                     help="repeat every SECONDS until Ctrl-C; when stdout is not a terminal each round is appended "
                          "(csv: the header once; json: one document a line)")
    if name == "rmmod":
      p.add_argument("--expect", action="store_true", help="change nothing: exit 1 if a module is loaded, else 0")
    if name == "list":
      p.add_argument("--all-vendors", action="store_true", help="list every PCI function, not only AMD/NVIDIA/Broadcom")
    if name == "top":
      p.add_argument("--once", action="store_true", help="print the table once and exit")
      p.add_argument("--interval", type=_interval, default=1.0, metavar="S", help="refresh period in seconds (default 1)")
  return parser


def main(argv=None, host=None) -> int:
  """host: the OS interface to act through (default LinuxOS over the HCQ_* configuration; tests give a MockOS that
  also serves the GPU an AM driver in the same process holds)."""
  parser = build_parser()
  args = parser.parse_args(argv)
  fmt = "json" if args.json else getattr(args, "format", None)
  if args.json and getattr(args, "format", None) not in (None, "json"):
    parser.error(f"--json and --format {args.format} disagree")
  try: fields = parse_query(args.command, getattr(args, "query", None)) if args.command in FIELDS else None
  except QueryError as e: parser.error(str(e))
  from ..config import from_env
  from ..drivers.system import LinuxOS
  from . import commands, listing
  from .report import Report
  report = Report(fmt == "json")
  if host is None:
    try: config = from_env()
    except ValueError as e:  # a malformed HCQ_* variable (config.py names it)
      report.error(str(e))
      return 2
    host = LinuxOS(config)
  ctx = commands.Context(backend(args.backend), host, report, getattr(args, "sudoless", False))
  try:
    if args.command == "rmmod": return commands.rmmod(ctx, args.expect)
    if args.command == "insmod": return commands.insmod(ctx)
    if args.command == "reset": return commands.reset(ctx, args.pci)
    if args.command == "pids": return commands.pids(ctx, args.pci)
    if args.command == "kill_pids": return commands.kill_pids(ctx, args.pci)
    if args.command == "list": return listing.list_devices(ctx, args.all_vendors, fmt, fields, args.loop)
    if args.command == "top": return listing.top(ctx, args.pci, args.once, args.interval, fmt=fmt, fields=fields,
                                                 loop=args.loop)
  except HCQError as e:
    report.error(str(e))
    return 1
  except KeyboardInterrupt:
    return 130
  except BrokenPipeError:   # the reader of our output went away (`hcq-smi amd list | head -1`): quietly
    from ..cli import _silence_stdout
    _silence_stdout()
    return 0
  raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
  sys.exit(main())
