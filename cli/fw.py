"""`hcq fw`: read AMD firmware containers (amdgpu_ucode.h headers) and print their fields; `hcq fw fetch` gets them.

`hcq fw fetch` downloads the pinned firmware package (Debian's firmware-amd-graphics 20230210-5, sha256-checked,
resumable, byte progress on stderr) into the cache and prints the firmware folder; MOCKPCI+AMD, MOCKUSB+AMD and
`hcq fw NAME` then find it without HCQ_FIRMWARE_DIR. A file named `fetch` is read as ./fetch.

A FILE that is a bare name not present in the current folder is looked up in the firmware folder (HCQ_FIRMWARE_DIR,
else /lib/firmware/amdgpu when the machine has it, else the one `hcq fw fetch` filled). The kind of container (gfx, rlc, psp, smc, ...) comes from the file name, as it does
in Linux: the header does not say which IP it is for. Exit status 1 when any FILE cannot be read or is not a firmware
container (the others are still printed)."""
from __future__ import annotations

import json
import os
import sys

from . import CommandError, UsageError


def register(sub) -> None:
  import argparse
  p = sub.add_parser("fw", help="read AMD firmware containers (/lib/firmware/amdgpu/*.bin)",
                     description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="examples: hcq fw fetch | hcq fw gc_11_0_0_mec.bin psp_13_0_0_sos.bin | hcq fw --json ./smu_13_0_0.bin")
  p.add_argument("files", nargs="+", metavar="FILE", help="firmware file (a bare name is looked up in the firmware folder)")
  p.add_argument("--json", action="store_true", help="print a JSON list, one object per file")
  p.set_defaults(func=run)


def resolve(arg: str, firmware_dir: str) -> str:
  """The path FILE names: itself when it exists or has a folder part, else the name in the firmware folder."""
  if os.path.exists(arg) or os.sep in arg: return arg
  return os.path.join(firmware_dir, arg)


def read_file(path: str, config) -> bytes:
  """The file's bytes, with the driver's checks (firmware.read: a folder, a device, a FIFO or a huge file is named
  as such and never read)."""
  from ..drivers.amd.am import firmware
  from ..drivers.system.linux import LinuxOS
  return firmware.read(LinuxOS(config), path)


def _num(v) -> str:
  return f"{v} ({v:#x})" if isinstance(v, int) and v >= 10 else str(v)


def print_text(fw, out) -> None:
  j = fw.as_json()
  print(f"{fw.file}: {fw.kind or 'unknown'} container, struct {fw.struct}; kind from the {fw.kind_from}", file=out)
  rows = [(k, _num(j[k])) for k in ("size_bytes", "header_size_bytes")]
  rows += [(k, ".".join(map(str, j[k]))) for k in ("header_version", "ip_version")]
  rows += [(k, _num(j[k])) for k in ("ucode_version", "ucode_size_bytes", "ucode_array_offset_bytes", "crc32")]
  for k, v in fw.fields.items():
    if isinstance(v, dict): rows.append((k, " ".join(f"{n}={_num(x)}" for n, x in v.items())))
    elif not isinstance(v, list): rows.append((k, _num(v)))
  width = max(len(k) for k, _ in rows)
  for k, v in rows: print(f"  {k:<{width}}  {v}", file=out)
  for i, t in enumerate(fw.fields.get("pptables", [])):
    print(f"  pptable[{i}]  id={t['id']} ppt_offset_bytes={t['ppt_offset_bytes']} ppt_size_bytes={t['ppt_size_bytes']}", file=out)
  if fw.components:
    print(f"  {'type':>4}  {'name':<28}  {'version':>10}  {'offset':>9}  {'size':>9}", file=out)
    for c in fw.components:
      print(f"  {c['type']:>4}  {c['name'] or '(not in the enum)':<28}  {c['version']:#010x}  {c['offset']:>9}  {c['size']:>9}", file=out)
  for note in fw.notes: print(f"  note: {note}", file=out)


def fetch(config, as_json: bool = False) -> int:
  """`hcq fw fetch`: the pinned package into config.autogen_cache (a second run finds it there and fetches nothing);
  prints the firmware folder on stdout (--json: an object with the package too), progress on stderr."""
  from ..autogen import fwpackage, sources
  pkg = fwpackage.PACKAGE
  def log(msg): print(msg.replace("autogen: ", "hcq fw fetch: ", 1), file=sys.stderr)
  try: folder = fwpackage.firmware_dir(config.autogen_cache, log=log)
  except sources.SourceError as e: raise CommandError(f"cannot fetch {pkg['name']} {pkg['version']}: {e}") from None
  if as_json: print(json.dumps({"firmware_dir": folder, "package": pkg["name"], "version": pkg["version"],
                                "sha256": pkg["sha256"]}, indent=1))
  else: print(folder)
  return 0


def run(args) -> int:
  from ..config import from_env
  from ..drivers.amd.am import firmware
  config = from_env()
  if args.files[0] == "fetch":
    if len(args.files) > 1: raise UsageError(f"hcq fw fetch takes no FILE (got {' '.join(args.files[1:])})")
    return fetch(config, as_json=args.json)
  fw_dir = config.firmware_dir
  results, status = [], 0
  for arg in args.files:
    path = resolve(arg, fw_dir)
    try: results.append(firmware.parse(path, read_file(path, config)))
    except (CommandError, firmware.FirmwareError) as e:
      print(f"hcq fw: error: {e}", file=sys.stderr)
      status = 1
  if args.json: print(json.dumps([r.as_json() for r in results], indent=1))
  else:
    for i, r in enumerate(results):
      if i: print()
      print_text(r, sys.stdout)
  return status
