"""PCI addresses ("domain:bus:device.function", e.g. 0000:03:00.0): validation and parsing.

Every PCI address that reaches a path, a lock file name or a command goes through validate() first."""
from __future__ import annotations

import re

from ...errors import DeviceError

# domain: 4 hex digits, or up to 8 where the kernel numbers synthetic domains from 0x10000 (Intel VMD;
# drivers/pci/controller/vmd.c), as sysfs and `lspci -D` print them
_PCI_ADDR = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$")
# a non-empty prefix of some canonical address: part of the domain; or the domain (4-8 digits) ":" and part of the
# bus; or domain, the whole bus, ":" and part of "device.function" (device 00-1f, function 0-7). An empty prefix
# (which would match every device) or a part that no address can continue (e.g. "0:03", "0000:03:2") is rejected.
_PCI_PREFIX = re.compile(r"^[0-9a-f]{1,8}$|^[0-9a-f]{4,8}:[0-9a-f]{0,2}$|^[0-9a-f]{4,8}:[0-9a-f]{2}:([01]([0-9a-f](\.[0-7]?)?)?)?$")


def is_valid(addr: str) -> bool:
  """True for a full, canonical (lower-case) PCI address: 4-8 digit domain, bus, device 0-1f, function 0-7."""
  return isinstance(addr, str) and _PCI_ADDR.fullmatch(addr) is not None


def validate(addr: str) -> str:
  """Return addr if it is a canonical PCI address, else raise DeviceError naming it."""
  if not is_valid(addr): raise DeviceError(f"{addr!r} is not a PCI address of the form 0000:03:00.0")
  return addr


def validate_prefix(prefix: str) -> str:
  """A non-empty prefix of a PCI address such as '0000:03' (for --pci_bus filters), else DeviceError naming it.
  "Every device" is no prefix at all (None at the callers), never the empty string."""
  if not isinstance(prefix, str) or not _PCI_PREFIX.fullmatch(prefix):
    raise DeviceError(f"{prefix!r} is not a PCI address prefix (e.g. 0000:03 or 0000:03:00.0)")
  return prefix


def parse(addr: str) -> tuple[int, int, int, int]:
  """(domain, bus, device, function) of a canonical address."""
  validate(addr)
  dom, bus, devfn = addr.split(":")
  dev, fn = devfn.split(".")
  return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
