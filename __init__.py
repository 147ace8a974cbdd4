"""hcq: drive GPU and RDMA NIC command queues directly from userspace.

    import hcq
    dev = hcq.open("MOCK+AMD")

Importing hcq does no I/O and imports no driver; hcq.open() loads what the spec names.
"""
from __future__ import annotations

import importlib

from .errors import DeviceError, GPUFault, HCQError, OSCallError, QueueError, Timeout

__version__ = "0.1.0"
__all__ = ["open", "parse_spec", "DeviceSpec", "DeviceError", "GPUFault", "HCQError", "OSCallError", "QueueError",
           "Timeout", "__version__"]

# vendor -> "module:function"; function(iface, index, os, config) -> Device.  A driver module is imported only when
# its vendor is opened.
_OPENERS = {
  "AMD": "hcq.drivers.amd:open_device",
  "NV": "hcq.drivers.nv:open_device",
  "CPU": "hcq.drivers.cpu:open_device",
  "BNXT": "hcq.drivers.bnxt:open_device",
}
_IFACES = {"AMD": ("KFD", "PCI", "USB", "MOCK", "MOCKKFD", "MOCKPCI", "MOCKUSB"), "NV": ("NV", "PCI", "MOCK"), "CPU": ("",), "BNXT": ("PCI", "MOCK")}
# the spec tried first by hcq.open() with no spec and no HCQ_DEV: a real device, then the embedded mock
_AUTODETECT = ("KFD+AMD", "NV", "MOCK+AMD")


class DeviceSpec(tuple):
  """A parsed device spec "[IFACE+]VENDOR[:N]": (iface, vendor, index)."""
  __slots__ = ()

  def __new__(cls, iface: str, vendor: str, index: int):
    return super().__new__(cls, (iface, vendor, index))

  iface = property(lambda self: self[0])
  vendor = property(lambda self: self[1])
  index = property(lambda self: self[2])

  @property
  def is_mock(self) -> bool: return self.iface.startswith("MOCK")

  def __str__(self): return (f"{self.iface}+" if self.iface else "") + self.vendor + (f":{self.index}" if self.index else "")


def parse_spec(spec: str) -> DeviceSpec:
  """Parse "[IFACE+]VENDOR[:N]" (case-insensitive). AMD alone means KFD+AMD, NV alone the nvidia.ko path."""
  text = spec.strip().upper()
  body, _, idx = text.partition(":")
  try: index = int(idx) if idx else 0
  except ValueError: raise DeviceError(f"device spec {spec!r}: index {idx!r} is not an integer") from None
  if index < 0: raise DeviceError(f"device spec {spec!r}: index must be >= 0")
  iface, plus, vendor = body.rpartition("+")
  if vendor not in _OPENERS:
    raise DeviceError(f"device spec {spec!r}: unknown vendor {vendor!r} (known: {', '.join(_OPENERS)})")
  if not plus: iface = {"AMD": "KFD", "NV": "NV", "CPU": "", "BNXT": "PCI"}[vendor]
  if iface not in _IFACES[vendor]:
    raise DeviceError(f"device spec {spec!r}: vendor {vendor} has no interface {iface!r} (known: {', '.join(_IFACES[vendor])})")
  return DeviceSpec(iface, vendor, index)


def open(spec: str | None = None, config=None):
  """Open a device. Without a spec: HCQ_DEV, else the first real device, else the embedded mock (MOCK+AMD)."""
  from . import config as config_mod
  cfg = config if config is not None else config_mod.from_env()
  spec = spec if spec is not None else cfg.dev
  if spec: return _open_one(parse_spec(spec), cfg)
  errors = []
  for candidate in _AUTODETECT:
    try: return _open_one(parse_spec(candidate), cfg)
    except DeviceError as e: errors.append(f"{candidate}: {e}")
  raise DeviceError("no device could be opened:\n  " + "\n  ".join(errors))


def _open_one(spec: DeviceSpec, cfg):
  modname, _, fn = _OPENERS[spec.vendor].partition(":")
  try: module = importlib.import_module(modname)
  except ImportError as e: raise DeviceError(f"{spec}: driver module {modname} is not available ({e})") from e
  if spec.is_mock:
    from .mockgpu import open_mock_os  # the only import of mockgpu outside tests: the mock plugs in here
    os_iface, iface = open_mock_os(spec, cfg)
  else:
    from .drivers.system import LinuxOS
    os_iface, iface = LinuxOS(cfg), spec.iface
  opener = getattr(module, fn, None)
  try:
    if opener is None: raise DeviceError(f"{spec}: the {spec.vendor} driver ({modname}) has no {fn}() yet")
    dev = opener(iface, spec.index, os_iface, cfg)
  except BaseException:
    if spec.is_mock: os_iface.close()   # the mock made for this device (its worker threads, sockets) goes with it
    raise
  if spec.is_mock: dev.owned_os = os_iface   # closed by dev.close()
  return dev
