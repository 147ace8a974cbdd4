"""Device models behind the OS interface: the embedded default device of hcq.

open_mock_os(spec, config) -> (MockOS, iface) is how hcq.open() plugs the mock in (the only import of mockgpu
outside tests)."""
from __future__ import annotations


def open_mock_os(spec, config):
  from ..errors import DeviceError
  raise DeviceError(f"{spec}: the mock device is not built yet")
