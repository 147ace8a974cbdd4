"""The OS interface (drivers never touch the OS any other way) and its Linux implementation.

LinuxOS, MemoryMMIO and PCIDevice are imported when first asked for (PEP 562's module __getattr__): a process on the
embedded mock never loads the Linux implementation or the PCI layer (issue 33 P3, a new process's cold start)."""
import importlib

from .interface import DeviceLock, FileHandle, MMIOView, OSInterface, USBTransport

_LAZY = {"LinuxOS": ".linux", "MemoryMMIO": ".linux", "PCIDevice": ".pci"}

__all__ = ["DeviceLock", "FileHandle", "MMIOView", "OSInterface", "USBTransport", "LinuxOS", "MemoryMMIO", "PCIDevice"]


def __getattr__(name: str):
  if name not in _LAZY: raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(_LAZY[name], __name__), name)
  globals()[name] = value
  return value
