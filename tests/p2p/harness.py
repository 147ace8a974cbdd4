"""One MockOS holding mock AMD GPUs behind /dev/kfd and a mock Thor2 NIC on the same (mock) PCI fabric, and the
drivers on top: what the peer-to-peer tests use."""
from __future__ import annotations

from hcq.config import Config
from hcq.drivers.amd import open_device
from hcq.drivers.bnxt.device import BNXTDev
from hcq.drivers.bnxt.gpuq import GPUPoster
from hcq.drivers.bnxt.qp import BNXTQP
from hcq.drivers.system.pci import PCIDevice
from hcq.mockgpu import mock_amd_os
from hcq.mockgpu.bnxt.nic import MockThor2


class Fabric:
  """gpus[i] (AMDDevice over KFD), nic (BNXTDev) and its model (self.model), two QPs a -> b connected in PHY
  loopback, and a GPUPoster of QP a on gpus[0]."""

  def __init__(self, gpus: int = 2, timeout_s: float = 5.0, qp_timeout: int = 16, retry_cnt: int = 7, **nic_kw):
    cfg = Config(timeout_s=timeout_s)
    self.os = mock_amd_os(cfg, gpus=gpus)
    self.model = MockThor2(**nic_kw)
    self.os.add_device(self.model)
    self.gpus = [open_device("KFD", i, self.os, cfg) for i in range(gpus)]
    self.nic = BNXTDev(PCIDevice(self.os, self.model.addr), self.os, cfg)
    self.nic.set_ip("10.0.200.5")
    self.a, self.b = BNXTQP(self.nic, timeout=qp_timeout, retry_cnt=retry_cnt), BNXTQP(self.nic)
    self.a.connect(self.b.qpn, self.nic.gid, self.nic.mac)
    self.b.connect(self.a.qpn, self.nic.gid, self.nic.mac)
    self.nic.set_loopback(True)
    self.poster = GPUPoster(self.a, self.gpus[0])

  def close(self) -> None:
    for g in self.gpus: g.close()
    self.nic.close()
    self.os.close()
