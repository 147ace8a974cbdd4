"""The AMD driver: AMDDevice over an iface (KFD: the amdgpu kernel driver's /dev/kfd; PCI and USB later).

open_device(iface, index, os, config) is how hcq.open() builds one: "KFD+AMD", "AMD", and "MOCK+AMD" (the MockOS
with iface "KFD")."""
from __future__ import annotations

from ...errors import DeviceError


def open_device(iface: str, index: int, os, config):
  from .device import AMDDevice
  if iface in ("KFD", "MOCKKFD", "MOCK"):
    from .kfd import KFDIface
    return AMDDevice(KFDIface(os, index, config), os, config)
  raise DeviceError(f"AMD: interface {iface!r} is not supported yet (supported: KFD)")


def __getattr__(name):
  if name == "AMDDevice":
    from .device import AMDDevice
    return AMDDevice
  raise AttributeError(name)


__all__ = ["AMDDevice", "open_device"]
