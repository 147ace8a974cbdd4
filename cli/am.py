"""`hcq am`: the AM driver's bring-up of an AMD GPU over PCI, step by step.

`hcq am boot` takes the GPU (amdgpu must not be bound to it: `hcq-smi amd rmmod`), reads IP discovery, programs the
VM hubs and the interrupt ring, loads every firmware through the PSP, starts the SMU and waits for the RLC autoload,
then gives the GPU back; a GPU an earlier AM process left booted is reused when its state checks out, else reset and
booted in full (the trace says which and why). `hcq am reset` mode-1 resets the GPU. --trace prints each step as it happens (milliseconds since the start, block, step), so a
board bring-up shows where it stops. --mock boots the embedded mock Navi 31 instead (with the machine's firmware
folder: HCQ_FIRMWARE_DIR). Exit status 1 when the boot fails (the error names the block, register or file)."""
from __future__ import annotations

import json
import sys

from . import UsageError


def register(sub) -> None:
  import argparse
  from ..drivers.amd.am.block import BLOCKS
  p = sub.add_parser("am", help="boot an AMD GPU from userspace over PCI (the AM driver), step by step",
                     description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
  asub = p.add_subparsers(dest="am_command", metavar="ACTION", required=True)
  b = asub.add_parser("boot", help="bring the GPU up as far as AM goes, then give it back")
  where = b.add_mutually_exclusive_group()
  where.add_argument("--pci", metavar="ADDR", help="the PCI function (default: the first AMD GPU AM supports)")
  where.add_argument("--mock", action="store_true", help="the embedded mock Navi 31 (a Radeon PRO V710 SR-IOV VF with HCQ_MOCK_AM_VF=1)")
  b.add_argument("--trace", action="store_true", help="print every step (ms since the start, block, step) as it happens")
  b.add_argument("--until", choices=BLOCKS, help="stop after this block's hw_init")
  b.add_argument("--json", action="store_true", help="print the steps as JSON at the end")
  b.set_defaults(func=boot)
  r = asub.add_parser("reset", help="mode-1 reset the GPU (its firmware stops; the next open boots in full)")
  where = r.add_mutually_exclusive_group()
  where.add_argument("--pci", metavar="ADDR", help="the PCI function (default: the first AMD GPU AM supports)")
  where.add_argument("--mock", action="store_true", help="the embedded mock Navi 31, booted first (it starts with no "
                                                         "firmware running)")
  r.add_argument("--trace", action="store_true", help="print every step (ms since the start, block, step) as it happens")
  r.set_defaults(func=reset)


def _open(args):
  """(config, OS, PCI address) of the GPU the arguments name."""
  from .. import _mock_os
  from ..config import from_env
  from ..drivers.amd.am.device import find_functions
  from ..drivers.system import LinuxOS
  from ..drivers.system.pciaddr import is_valid
  from ..errors import DeviceError
  cfg = from_env()
  if args.pci is not None and not is_valid(args.pci):
    raise UsageError(f"--pci {args.pci!r} is not a PCI address of the form 0000:03:00.0")
  os = _mock_os("AMD", "PCI", 0, cfg) if args.mock else LinuxOS(cfg)
  try:
    addr = args.pci
    if addr is None:
      found = find_functions(os)
      if not found:
        from ..drivers.amd.am.pci import SUPPORTED
        known = ", ".join(f"{name}, device {dev:#06x}" for dev, (name, _) in SUPPORTED.items())
        raise DeviceError(f"no AMD GPU that AM boots was found (supported: {known})")
      addr = found[0]
  except BaseException:
    if args.mock: os.close()
    raise
  return cfg, os, addr


def _trace(block, step, t): print(f"{t * 1000:10.2f} ms  {block:<10} {step}", flush=True)


def reset(args) -> int:
  from ..drivers.amd.am.device import AMDev
  cfg, os, addr = _open(args)
  trace = _trace if args.trace else None
  try:
    # the embedded mock starts at power-on, with no firmware running: booted first, as an earlier AM process leaves
    # a GPU, so that the reset has firmware to stop (on a machine the GPU is reset as it is found)
    if args.mock:
      from ..errors import DeviceError
      try:
        with AMDev(os, addr, cfg, trace=trace): pass
      except DeviceError as e:     # no firmware folder here, say: the mock is reset as it is (nothing runs on it)
        print(f"{addr}: the mock GPU was not booted first ({e}); reset as it is", file=sys.stderr)
    with AMDev(os, addr, cfg, trace=trace, until="discovery") as dev:
      dev.mode1_reset()
      _block, last, took = dev.steps[-1]
  finally:
    if args.mock: os.close()
  if args.trace: return 0
  if last.startswith("nothing to reset"): print(f"{addr}: {last}")
  else: print(f"{addr}: mode-1 reset done in {took * 1000:.1f} ms (PSP bootloader ready, no firmware running)")
  return 0


def boot(args) -> int:
  from ..drivers.amd.am.device import AMDev
  cfg, os, addr = _open(args)
  try:
    with AMDev(os, addr, cfg, trace=_trace if args.trace and not args.json else None, until=args.until) as dev:
      steps, stage = list(dev.steps), dev.stage
  finally:
    if args.mock: os.close()
  if args.json:
    json.dump({"pci": addr, "stage": stage, "steps": [{"block": b, "step": s, "ms": round(t * 1000, 3)} for b, s, t in steps]},
              sys.stdout, indent=1)
    print()
  elif not args.trace:
    print(f"{addr}: boot reached {stage} in {steps[-1][2] * 1000:.1f} ms ({len(steps)} steps; --trace shows them)")
  return 0
