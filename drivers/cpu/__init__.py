"""The CPU device: `hcq.open("CPU")`. Memory is host memory; kernels are UOp kernels compiled by the C backend
(or shared objects it built) and run by its work-group runner (threads, shared LOCAL memory, real barriers).

Where the OS is touched: building and dlopen-ing the shared object happen in the compiler's C backend (a build step,
as for every backend), so this driver needs nothing from the OS interface; buffers are ctypes arrays that the device
owns.
"""
from __future__ import annotations

from ...errors import DeviceError
from ..hcq.registry import Driver, Interface

DRIVER = Driver(vendor="CPU", module=__name__, summary="the host CPU: UOp kernels compiled by the C backend",
                default="", interfaces=(Interface("", "host memory, kernels as shared objects"),), max_index=0)


def open_device(iface: str, index: int, os, config, label: str | None = None):
  if index != 0: raise DeviceError(f"CPU:{index}: there is one CPU device (CPU:0)")
  from .device import CPUDevice
  return CPUDevice(os, config)


def __getattr__(name):
  if name in ("CPUDevice", "CPUProgram"):
    from . import device
    return getattr(device, name)
  raise AttributeError(name)
