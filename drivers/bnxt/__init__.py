"""Broadcom NetXtreme-E (Thor2) RoCEv2 from userspace: BNXTDev (HWRM, RCFW, rings), BNXTQP (RC QP, RDMA WRITE).

DRIVER declares the interfaces to hcq.open (drivers/hcq/registry.py); the rest is imported when used."""
from __future__ import annotations

from ..hcq.registry import Driver, Interface

DRIVER = Driver(vendor="BNXT", module=__name__, summary="Broadcom NetXtreme-E (Thor2) RoCEv2 NICs", default="PCI",
                interfaces=(Interface("PCI", "the PCI function from userspace (bnxt_en unbound)", mocks=("MOCK",),
                                            mock="bnxt.pci_os"),))

_LAZY = {"BNXTDev": "device", "ipv4_to_gid": "device", "PCI_VENDOR_BROADCOM": "device", "THOR2_DEVICE_IDS": "device",
         "BNXTQP": "qp", "CompletionError": "qp"}
__all__ = ["BNXTDev", "BNXTQP", "CompletionError", "DRIVER", "ipv4_to_gid", "open_device", "open_pci", "find_devices"]


def __getattr__(name):
  if name in _LAZY:
    import importlib
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
  raise AttributeError(name)


def find_devices(os) -> list:
  """Every Thor2 function on the machine (PCIDevice objects), by PCI address."""
  from ..system.pci import PCIDevice
  from .device import PCI_VENDOR_BROADCOM, THOR2_DEVICE_IDS
  return PCIDevice.enumerate(os, vendor=PCI_VENDOR_BROADCOM, device=THOR2_DEVICE_IDS)


def open_pci(os, config, bus: str):
  """BNXTDev on the function at PCI address bus (the kernel's bnxt_en must not be bound to it)."""
  from ...errors import DeviceError
  from ..system.pci import PCIDevice
  from .device import PCI_VENDOR_BROADCOM, THOR2_DEVICE_IDS, BNXTDev
  pci = PCIDevice(os, bus)
  if pci.vendor != PCI_VENDOR_BROADCOM or pci.device not in THOR2_DEVICE_IDS:
    raise DeviceError(f"PCI {bus}: {pci.vendor:04x}:{pci.device:04x} is not a Broadcom Thor2 "
                      f"({', '.join(f'14e4:{d:04x}' for d in THOR2_DEVICE_IDS)})")
  driver = pci.driver if hasattr(pci, "driver") else None
  if driver: raise DeviceError(f"PCI {bus}: bound to the kernel driver {driver}; unbind it first")
  return BNXTDev(pci, os, config)


def open_device(iface: str, index: int, os, config, label: str | None = None):
  """hcq.open("BNXT:N") / hcq.open("MOCK+BNXT:N"): the Nth Thor2 function."""
  from ...errors import DeviceError
  devs = find_devices(os)
  if index >= len(devs): raise DeviceError(f"{label or f'BNXT:{index}'}: {len(devs)} Thor2 function(s) found")
  return open_pci(os, config, devs[index].addr)
