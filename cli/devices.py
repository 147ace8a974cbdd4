"""`hcq devices`: every spec hcq.open takes (hcq.device_list()), present here or not, and what was detected for it.

Detection opens nothing: it reads sysfs, /dev and the lock folder. A kernel-driver interface (KFD+AMD, RM+NV,
KGSL+QCOM) is present when its device node is; PCI+AMD, PCI+BNXT when a PCI function of the vendor's class is there
(its PCI ids, the kernel driver bound to it, the processes holding hcq's lock on it); USB+AMD when an ASM24xx bridge
is on the USB bus; an embedded mock and CPU always are. Exit status 0, or 1 when sysfs could not be read."""
from __future__ import annotations

import json
import sys

# PCI vendor ids and base classes (PCI Code and ID Assignment Specification: class 03h display controller, 02h
# network controller; vendor ids as in the pci.ids database: 1002 AMD/ATI, 10de NVIDIA, 14e4 Broadcom)
PCI_MATCH = {"AMD": (0x1002, 0x03), "NV": (0x10DE, 0x03), "BNXT": (0x14E4, 0x02)}
# the kernel driver an interface goes through (bound to the function) or must be free of (hcq's own, over PCI)
KERNEL_DRIVER = {("AMD", "KFD"): "amdgpu", ("NV", "RM"): "nvidia"}


def register(sub) -> None:
  import argparse
  p = sub.add_parser("devices", help="every device spec, present here or not, and what was detected",
                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="examples: hcq devices | hcq devices --json")
  p.add_argument("--json", action="store_true", help="print a JSON list, one object per spec")
  p.set_defaults(func=run)


class _Warnings:
  """The report object smi.listing expects: its warnings go to stderr as this command's."""
  def __init__(self): self.seen = []

  def warn(self, text: str) -> None:
    self.seen.append(text)
    print(f"hcq devices: warning: {text}", file=sys.stderr)


def _pci_functions(host) -> tuple[list[dict], str | None]:
  """The AMD, NVIDIA and Broadcom PCI functions (smi.listing's records: address, id, class, driver, holders, error),
  or an error when sysfs cannot be listed."""
  import types
  from ..errors import HCQError
  from ..smi.listing import functions
  try: return functions(types.SimpleNamespace(host=host, report=_Warnings())), None
  except HCQError as e: return [], str(e)


def _usb_bridges(host) -> list[dict]:
  """ASM24xx bridges on the USB bus (sysfs bus/usb/devices/*/idVendor, idProduct: Documentation/ABI/stable/
  sysfs-bus-usb), by the ids the USB+AMD driver looks for (drivers/system/asm24.py BRIDGE_IDS)."""
  from ..drivers.system.asm24 import BRIDGE_IDS
  from ..errors import HCQError
  base = "bus/usb/devices"
  out = []
  try:
    if not host.sysfs_exists(base): return []
    names = sorted(host.sysfs_list(base))
  except HCQError: return []
  for name in names:
    try: ids = int(host.sysfs_read(f"{base}/{name}/idVendor").strip(), 16), int(host.sysfs_read(f"{base}/{name}/idProduct").strip(), 16)
    except (HCQError, ValueError): continue
    if ids in BRIDGE_IDS: out.append({"usb": name, "id": f"{ids[0]:04x}:{ids[1]:04x}"})
  return out


def detect(records, host) -> tuple[list[dict], str | None]:
  """One dict per record: its fields, "present" and "detected" (a list of what was found: PCI functions, USB
  bridges, device nodes)."""
  funcs, error = _pci_functions(host)
  bridges = None
  out = []
  for r in records:
    row = dict(r.as_json(), present=False, detected=[])
    if r.mock_of or r.vendor == "CPU":
      row.update(present=True, detected=[{"embedded": "mock" if r.mock_of else "host CPU"}])
    else:
      if r.probe and host.exists(r.probe): row["detected"].append({"node": r.probe})
      match = PCI_MATCH.get(r.vendor)
      if match and r.interface in ("PCI",) + tuple(i for (v, i) in KERNEL_DRIVER if v == r.vendor):
        want_driver = KERNEL_DRIVER.get((r.vendor, r.interface))
        for f in funcs:
          if f["error"] or f["vendor"] != f"{match[0]:04x}" or not f["class"] or int(f["class"][:2], 16) != match[1]: continue
          if want_driver and f["driver"] != want_driver: continue
          row["detected"].append({"pci": f["address"], "id": f["id"], "name": f["device_name"], "driver": f["driver"],
                                  "holders": [{"pid": h["pid"], "name": h["name"]} for h in f["holders"]]})
      if r.interface == "USB":
        if bridges is None: bridges = _usb_bridges(host)
        row["detected"] += bridges
      row["present"] = bool(row["detected"])
    out.append(row)
  return out, error


def _what(d: dict) -> str:
  if "embedded" in d: return f"embedded {d['embedded']}"
  if "node" in d: return d["node"]
  if "usb" in d: return f"USB {d['usb']} [{d['id']}]"
  holders = ", ".join(f"{h['pid']} ({h['name']})" for h in d["holders"]) or "-"
  return f"{d['pci']} [{d['id']}] driver: {d['driver'] or '-'} holder: {holders}"


def run(args) -> int:
  import hcq
  from ..config import from_env
  from ..drivers.system import LinuxOS
  rows, error = detect(hcq.device_list(), LinuxOS(from_env()))
  if args.json: print(json.dumps(rows, indent=1))
  else:
    width = max(len(r["spec"]) for r in rows)
    for r in rows:
      found = "; ".join(_what(d) for d in r["detected"]) if r["detected"] else "not found"
      print(f"{r['spec']:<{width}}  {'present' if r['present'] else 'absent ':<7}  {found}")
  if error:
    print(f"hcq devices: error: cannot list PCI functions: {error}", file=sys.stderr)
    return 1
  return 0
