"""Device models behind the OS interface: the embedded default device of hcq.

open_mock_os(spec, config) -> (MockOS, iface) is how hcq.open() plugs the mock in (the only import of mockgpu
outside tests)."""
from __future__ import annotations


def open_mock_os(spec, config):
  if spec.vendor == "BNXT":
    from .bnxt import open_bnxt_mock
    os, _nic = open_bnxt_mock(config, spec.index)
    return os, "MOCK"
  from ..errors import DeviceError
  raise DeviceError(f"{spec}: the mock device is not built yet")
