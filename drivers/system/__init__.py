"""The OS interface (drivers never touch the OS any other way) and its Linux implementation."""
from .interface import DeviceLock, FileHandle, MMIOView, OSInterface, USBTransport
from .linux import LinuxOS, MemoryMMIO
from .pci import PCIDevice

__all__ = ["DeviceLock", "FileHandle", "MMIOView", "OSInterface", "USBTransport", "LinuxOS", "MemoryMMIO", "PCIDevice"]
