"""The NV driver: NVDevice on the HCQ runtime, over nvidia.ko's resource manager and UVM (rm.py).

  rm.py       RMSession: /dev/nvidiactl, /dev/nvidiaN, /dev/nvidia-uvm; the RM object tree, memory, channels
  device.py   NVDevice: engines "compute" and "copy" (GPFIFO channels), launches by QMD, code loading, faults
  gpfifo.py   pushbuffer methods, GPFIFO entries, the channel engine (ring + doorbell), pushbuffer decoding
  packets.py  queue programs (hcq.compiler.queue) -> methods by pattern matchers
  program.py  PTX and cubins, the CUDA parameter ABI (NVProgram, CUDAParams)
  qmd.py      QMD v3/v4/v5 layouts (autogen/nv/tables/qmd.py) and the per-launch field update of a template
  abi.py      classes, control numbers and params, UVM params, NV status names; the escape numbers re-exported
              from tables/rm.py
  (autogen/nv/series.py: the RM/UVM ABI of each supported nvidia.ko series, generated from NVIDIA's headers at
              the release tag; autogen/nv/tables: the cited tables the driver and the mock share: RM numbers every
              release shares (rm.py), QMDs, classes; autogen/nv/rm_abi.py: the RM/UVM numbers both use)

DRIVER declares the interfaces to hcq.open (drivers/hcq/registry.py); open_device builds a device for one."""
from __future__ import annotations

from ...errors import DeviceError
from ..hcq.registry import Driver, Interface

DRIVER = Driver(
  vendor="NV", module=__name__, summary="NVIDIA GPUs (Ampere, Ada, Hopper, Blackwell)", default="RM",
  interfaces=(Interface("RM", "through nvidia.ko's resource manager (/dev/nvidiactl) and UVM", mocks=("MOCK",),
                        mock="nv.rm_os", probe="/dev/nvidiactl"),))


def open_device(iface: str, index: int, os, config, label: str | None = None):
  """The NVIDIA GPU number `index` through interface `iface`; label names it in errors (default "RM+NV:index")."""
  from .device import NVDevice
  from .rm import RMSession
  if iface != "RM": raise DeviceError(f"NV: interface {iface!r} is not supported (supported: RM)")
  label = label or f"RM+NV:{index}"
  return NVDevice(RMSession(os, index, config, label=label), os, config)


def __getattr__(name):
  if name == "NVDevice":
    from .device import NVDevice
    return NVDevice
  raise AttributeError(name)


__all__ = ["NVDevice", "DRIVER", "open_device"]
