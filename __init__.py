"""hcq: drive GPU and RDMA NIC command queues directly from userspace.

    import hcq
    dev = hcq.open("MOCK+AMD")

Importing hcq does no I/O and imports no driver; hcq.open() loads what the spec names.
"""
from __future__ import annotations

import importlib

from .errors import DeviceError, GPUFault, HCQError, OSCallError, QueueError, Timeout

__version__ = "0.1.0"
__all__ = ["open", "parse_spec", "DeviceSpec", "registered_drivers", "device_list", "device_list_markdown", "DeviceError", "GPUFault", "HCQError", "OSCallError", "QueueError",
           "Timeout", "__version__"]

# the driver packages, each declaring DRIVER (drivers/hcq/registry.py); hcq.open, spec parsing, autodetection and the
# README's device list come from these declarations. A vendor is listed when its driver works.
_DRIVER_PACKAGES = ("amd", "cpu", "bnxt", "nv", "qcom")
# hcq.open() with no spec and no HCQ_DEV opens the first present device of an autodetected interface, else this
_FALLBACK = "MOCK+AMD"


def registered_drivers() -> dict:
  """{vendor: Driver} of every registered driver (importing only their declarations)."""
  global _DRIVERS
  if _DRIVERS is None:
    found = {}
    for pkg in _DRIVER_PACKAGES:
      d = importlib.import_module(f"hcq.drivers.{pkg}").DRIVER
      found[d.vendor] = d
    _DRIVERS = found
  return _DRIVERS


_DRIVERS = None


class DeviceSpec(tuple):
  """A parsed device spec "[IFACE+]VENDOR[:N]": (iface, vendor, index); iface as written (a mock's name included)."""
  __slots__ = ()

  def __new__(cls, iface: str, vendor: str, index: int):
    return super().__new__(cls, (iface, vendor, index))

  iface = property(lambda self: self[0])
  vendor = property(lambda self: self[1])
  index = property(lambda self: self[2])

  @property
  def driver(self): return registered_drivers()[self.vendor]

  @property
  def interface(self):
    """The driver's Interface this spec opens."""
    return self.driver.interface(self.iface)[0]

  @property
  def is_mock(self) -> bool: return self.driver.interface(self.iface)[1]

  @property
  def label(self) -> str:
    """The spec with every part spelled out, as errors name the device: "MOCK+AMD:0"."""
    return (f"{self.iface}+" if self.iface else "") + f"{self.vendor}:{self.index}"

  def __str__(self): return (f"{self.iface}+" if self.iface else "") + self.vendor + (f":{self.index}" if self.index else "")


def parse_spec(spec: str) -> DeviceSpec:
  """Parse "[IFACE+]VENDOR[:N]" (case-insensitive). A vendor alone means its default interface (AMD: KFD+AMD)."""
  if not isinstance(spec, str): raise DeviceError(f"device spec {spec!r}: not a string")
  text = spec.strip().upper()
  body, _, idx = text.partition(":")
  iface, plus, vendor = body.rpartition("+")
  known = registered_drivers()
  if vendor not in known:
    raise DeviceError(f"device spec {spec!r}: unknown vendor {vendor!r} (known: {', '.join(known)})")
  driver = known[vendor]
  if idx and not (idx.isascii() and idx.isdigit()):
    given = spec.strip().partition(":")[2]
    raise DeviceError(f"device spec {spec!r}: index {given!r} is not a non-negative integer")
  # the index is bounded before it is converted: a spec must not make hcq (or its mock) build that many devices
  if idx and (len(idx) > 6 or int(idx) > driver.max_index):
    raise DeviceError(f"device spec {spec!r}: index {idx} is out of range (0..{driver.max_index} for {vendor})")
  index = int(idx) if idx else 0
  if not plus: iface = driver.default
  if driver.interface(iface) is None:
    names = ", ".join(n or "(none)" for n in driver.spec_names())
    raise DeviceError(f"device spec {spec!r}: vendor {vendor} has no interface {iface!r} (known: {names})")
  return DeviceSpec(iface, vendor, index)


def open(spec: str | None = None, config=None):
  """Open a device. Without a spec: HCQ_DEV, else the first present device of an autodetected interface, else the
  embedded mock (MOCK+AMD)."""
  from . import config as config_mod
  cfg = config if config is not None else config_mod.from_env()
  spec = spec if spec is not None else cfg.dev
  if spec: return _open_one(parse_spec(spec), cfg)
  errors = []
  for candidate in _autodetect(cfg):
    try: return _open_one(candidate, cfg)
    except DeviceError as e: errors.append(f"{candidate}: {e}")
  try: return _open_one(parse_spec(_FALLBACK), cfg)
  except DeviceError as e: errors.append(f"{_FALLBACK}: {e}")
  raise DeviceError("no device could be opened:\n  " + "\n  ".join(errors))


def _autodetect(cfg) -> list[DeviceSpec]:
  """The specs of autodetected interfaces whose probe path is present (cheap: nothing is opened here)."""
  from .drivers.system import LinuxOS
  osi = LinuxOS(cfg)
  return [DeviceSpec(i.name, d.vendor, 0) for d in registered_drivers().values() for i in d.interfaces
          if i.probe is not None and osi.exists(i.probe)]


def _mock_entry(interface):
  """The callable a driver's Interface.mock names: a dotted path under the mock package ("amd.kfd_os"), resolved
  here, where the mock plugs in (drivers/hcq/registry.py; the drivers never import it)."""
  module, _, name = interface.mock.rpartition(".")
  try: return getattr(importlib.import_module(f"{__name__}.mockgpu.{module}"), name)
  except (ImportError, AttributeError) as e:
    raise DeviceError(f"interface {interface.name}: its mock entry {interface.mock!r} does not resolve ({e})") from e


def _mock_os(vendor: str, iface: str, index: int, cfg):
  """The MockOS that serves device `index` of vendor behind iface, for tools that drive a bring-up themselves
  (`hcq am boot --mock`) rather than opening a device."""
  interface = registered_drivers()[vendor].interface(iface)[0]
  return _mock_entry(interface)(index, cfg, f"{interface.mocks[0]}+{vendor}:{index}")


def _mock_fabric_os(cfg, gpus: int, iface: str = "KFD"):
  """A MockOS with `gpus` mock GPUs (AMD behind /dev/kfd, "PCI": AMD for AM, "RM": NV behind nvidia.ko) and a mock
  Thor2 on one PCI fabric, for tools that join the two drivers (`hcq rdma gpu --mock`: a GPU queue rings the NIC's
  doorbell)."""
  from .mockgpu import mock_amd_bnxt_os  # the mock plugs in here too (as in _open_one)
  return mock_amd_bnxt_os(cfg, gpus=gpus, iface=iface)


def _open_one(spec: DeviceSpec, cfg):
  driver = spec.driver
  try: module = importlib.import_module(driver.module)
  except ImportError as e: raise DeviceError(f"{spec}: driver module {driver.module} is not available ({e})") from e
  iface = spec.interface.name
  if spec.is_mock:
    # the only way into mockgpu outside tests: the entry the driver's declaration names builds the mock
    os_iface = _mock_entry(spec.interface)(spec.index, cfg, spec.label)
  else:
    from .drivers.system import LinuxOS
    os_iface = LinuxOS(cfg)
  try: dev = module.open_device(iface, spec.index, os_iface, cfg, label=spec.label)
  except BaseException:
    if spec.is_mock: os_iface.close()   # the mock made for this device (its worker threads, sockets) goes with it
    raise
  if spec.is_mock: dev.owned_os = os_iface   # closed by dev.close()
  return dev


def device_list() -> list:
  """Every spec hcq.open takes, from the registry: a list of drivers/hcq/registry.py DeviceRecord (spec, vendor,
  interface, alias, summary, mock_of, autodetected, probe; .as_json() gives a dict). Nothing is opened or probed:
  `hcq devices` says what is present."""
  from .drivers.hcq.registry import device_records
  return device_records(registered_drivers())


def device_list_markdown() -> str:
  """The README's list of devices, rendered from device_list()."""
  from .drivers.hcq.registry import markdown
  return markdown(device_list())
