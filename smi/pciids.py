"""Vendor and device names from the PCI ID database (pci.ids, https://pci-ids.ucw.cz/), when a copy is installed.

Format: a vendor line "vvvv  Vendor name", its devices on lines "\\tdddd  Device name", subsystems on "\\t\\t..." lines;
comments start with '#'; the class list ("C cc  ...") follows the vendors."""
from __future__ import annotations

import os as _os
import re

PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids")

_VENDOR = re.compile(r"^([0-9a-f]{4})\s+(.*\S)\s*$")
_DEVICE = re.compile(r"^\t([0-9a-f]{4})\s+(.*\S)\s*$")


class PciIds:
  def __init__(self, vendors: dict[int, str], devices: dict[tuple[int, int], str], source: str | None):
    self.vendors, self.devices, self.source = vendors, devices, source

  def vendor_name(self, vendor: int) -> str | None: return self.vendors.get(vendor)
  def device_name(self, vendor: int, device: int) -> str | None: return self.devices.get((vendor, device))


def parse(text: str, only_vendors: set[int] | None = None) -> tuple[dict, dict]:
  vendors, devices, current = {}, {}, None
  for line in text.splitlines():
    if not line or line.startswith("#"): continue
    if line.startswith("C "): break  # device classes: no more vendors
    m = _VENDOR.match(line)
    if m:
      current = int(m.group(1), 16)
      if only_vendors is None or current in only_vendors: vendors[current] = m.group(2)
      continue
    m = _DEVICE.match(line)
    if m and current is not None and (only_vendors is None or current in only_vendors):
      devices[(current, int(m.group(1), 16))] = m.group(2)
  return vendors, devices


def load(host, only_vendors: set[int] | None = None, paths=PCI_IDS_PATHS) -> PciIds:
  """The first pci.ids found (read through the OS interface); empty when none is installed."""
  for path in paths:
    if not host.exists(path): continue
    f = host.open(path, _os.O_RDONLY)
    try:
      chunks = []
      while True:
        chunk = f.read(1 << 20)
        if not chunk: break
        chunks.append(chunk)
    finally: f.close()
    vendors, devices = parse(b"".join(chunks).decode("utf-8", errors="replace"), only_vendors)
    return PciIds(vendors, devices, path)
  return PciIds({}, {}, None)
