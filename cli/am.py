"""`hcq am`: the AM driver's bring-up of an AMD GPU over PCI, step by step.

`hcq am boot` takes the GPU (amdgpu must not be bound to it: `hcq-smi amd rmmod`), reads IP discovery, programs the
VM hubs and the interrupt ring, loads every firmware through the PSP, starts the SMU and waits for the RLC autoload,
then gives the GPU back. --trace prints each step as it happens (block, step, milliseconds since the start), so a
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
  where.add_argument("--mock", action="store_true", help="the embedded mock Navi 31")
  b.add_argument("--trace", action="store_true", help="print every step (block, step, time) as it happens")
  b.add_argument("--until", choices=BLOCKS, help="stop after this block's hw_init")
  b.add_argument("--json", action="store_true", help="print the steps as JSON at the end")
  b.set_defaults(func=boot)


def boot(args) -> int:
  from .. import _mock_os
  from ..config import from_env
  from ..drivers.amd.am.device import AMDev, find_functions
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
      if not found: raise DeviceError("no AMD GPU that AM boots was found (supported: Navi 31, device 0x744c)")
      addr = found[0]
    def trace(block, step, t):
      print(f"{t * 1000:10.2f} ms  {block:<10} {step}", flush=True)
    with AMDev(os, addr, cfg, trace=trace if args.trace and not args.json else None, until=args.until) as dev:
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
