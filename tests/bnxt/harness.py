"""Builds a mock Thor2 behind its mock OS and the driver on top, as the tests use them."""
from __future__ import annotations

from hcq.config import Config
from hcq.mockgpu.bnxt.mockos import BnxtMockOS
from hcq.mockgpu.bnxt.nic import MockThor2

try:
  from hcq.drivers.system.pci import PCIDevice
except ImportError:   # until drivers/system/pci.py lands on main: the same calls over the OS interface
  class PCIDevice:
    def __init__(self, os, addr):
      self.os, self.addr = os, addr

    def config_read(self, offset, size=4):
      return int.from_bytes(self.os.sysfs_read_bytes(f"bus/pci/devices/{self.addr}/config", size, offset), "little")

    def config_write(self, offset, value, size=4):
      f = self.os.open(f"{self.os.config.sysfs_root}/bus/pci/devices/{self.addr}/config")
      f.write(value.to_bytes(size, "little"), offset)

    def map_bar(self, index):
      size = int(self.os.sysfs_read(f"bus/pci/devices/{self.addr}/resource").splitlines()[index].split()[1], 16)
      start = int(self.os.sysfs_read(f"bus/pci/devices/{self.addr}/resource").splitlines()[index].split()[0], 16)
      return self.os.map_mmio(f"{self.os.config.sysfs_root}/bus/pci/devices/{self.addr}/resource{index}",
                              size - start + 1, 0, name=f"{self.addr} BAR{index}")


def make_nic(**kw) -> tuple[BnxtMockOS, MockThor2]:
  cfg = Config(timeout_s=kw.pop("timeout_s", 5.0))
  nic = MockThor2(**kw)
  os = BnxtMockOS(cfg, seed=kw.get("seed"))
  os.add_device(nic)
  return os, nic


def open_dev(os, nic, ip="10.0.200.5", **kw):
  from hcq.drivers.bnxt.device import BNXTDev
  dev = BNXTDev(PCIDevice(os, nic.addr), os, os.config, **kw)
  if ip: dev.set_ip(ip)
  return dev
