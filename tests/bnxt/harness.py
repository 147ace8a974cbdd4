"""Builds a mock Thor2 on a MockOS and the driver on top, as the tests use them."""
from __future__ import annotations

from hcq.config import Config
from hcq.drivers.system.pci import PCIDevice
from hcq.mockgpu import MockOS
from hcq.mockgpu.bnxt.nic import MockThor2


def make_nic(**kw) -> tuple[MockOS, MockThor2]:
  os = MockOS(Config(timeout_s=kw.pop("timeout_s", 5.0)))
  nic = MockThor2(**kw)
  os.add_device(nic)
  return os, nic


def open_dev(os, nic, ip="10.0.200.5", **kw):
  from hcq.drivers.bnxt.device import BNXTDev
  dev = BNXTDev(PCIDevice(os, nic.addr), os, os.config, **kw)
  if ip: dev.set_ip(ip)
  return dev
