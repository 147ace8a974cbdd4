"""Device models behind the OS interface: the embedded default device of hcq.

open_mock_os(spec, config) -> (MockOS, iface) is how hcq.open() plugs the mock in (the only import of mockgpu
outside tests). MockOS (mockos.py) is generic: a virtual file system, host memory with fake physical addresses,
MMIO views, PCI functions, locks and eventfds; device models (amd/ for the AMD GPU, bnxt/ for the NIC) attach to it.
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
