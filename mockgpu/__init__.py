"""Device models behind the OS interface: the embedded default device of hcq.

open_mock_os(spec, config) -> (MockOS, iface) is how hcq.open() plugs the mock in (the only import of mockgpu
outside tests). MockOS (mockos.py) is generic and hosts any number of device models:
  vfs.py     /dev, /sys, /proc in memory (files computed on read, writes reaching the model, device nodes, symlinks)
  files.py   open-file objects (ioctl/mmap/read/write), in-memory eventfd
  memory.py  anonymous host memory at fixed addresses (GPU VA == host VA), fake physical addresses and DMA
  mmio.py    MMIO views: register windows and doorbell pages whose writes call the model, windows over memory
  pci.py     PCI functions: config space (BAR sizing, capabilities), BARs, the sysfs files Linux shows
  amd/       the mock gfx1100: KFD model (kfd.py), topology (topology.py), GPU + queues (gpu.py, queues.py, pm4.py,
             sdma.py) and the RDNA3 wave emulator (emu/)
  bnxt/      the mock Thor2 NIC

In tests: `mock_amd_os(config, gpus=2)` gives a MockOS with two GPUs behind /dev/kfd; tests/mockgpu/mock_kfd_harness.py
drives it with KFD ioctls, `hcq.open("MOCK+AMD")` with hcq's own driver. config.mock_threaded runs the GPUs in
worker threads; config.mock_instruction_budget bounds each dispatch.
"""
from __future__ import annotations

from .mockos import MockOS

__all__ = ["MockOS", "open_mock_os", "mock_amd_os"]

# mock spec interface -> the real interface the driver then uses on the MockOS
_AMD_IFACES = {"MOCK": "KFD", "MOCKKFD": "KFD"}


def mock_amd_os(config=None, gpus: int = 1, props=None) -> MockOS:
  """A MockOS with `gpus` mock gfx1100 GPUs behind /dev/kfd."""
  from .amd.device import add_amd_gpus
  os = MockOS(config)
  add_amd_gpus(os, gpus, props)
  return os


def open_mock_os(spec, config):
  """(MockOS, iface) for a mock spec such as MOCK+AMD (the GPU index is the driver's to pick)."""
  if spec.vendor == "BNXT":
    from .bnxt import open_bnxt_mock
    os, _nic = open_bnxt_mock(config, spec.index)
    return os, "MOCK"
  from ..errors import DeviceError
  if spec.vendor == "AMD" and spec.iface in _AMD_IFACES:
    return mock_amd_os(config, gpus=max(1, spec.index + 1)), _AMD_IFACES[spec.iface]
  raise DeviceError(f"{spec}: no mock for interface {spec.iface} of vendor {spec.vendor} (mocked: "
                    f"{', '.join(k + '+AMD' for k in _AMD_IFACES)})")
