"""The AMD driver: AMDDevice over an iface (KFD: the amdgpu kernel driver's /dev/kfd; PCI and USB later).

  device.py     AMDDevice: the public API (alloc/copyin/copyout/load/compile/synchronize/close), timeline, SDMA copies
                with staging, launches, bound command buffers (INDIRECT_BUFFER)
  iface.py      the contract between AMDDevice and an iface; kfd.py: KFDIface
  program.py    AMDProgram: code object kernel -> COMPUTE_* registers, user SGPRs, kernargs, per-shape command buffers
  lower.py      queue programs (hcq.compiler.queue) -> PM4 / SDMA packets by pattern matchers; cmdbuf.py: command
                buffers with symbolic words, built once and patched at submit
  pm4.py, sdma.py  packet builders and decoders
  kernels/      demo.hsaco (empty, vadd, matmul) for `hcq demo` and bench/launch.py

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
