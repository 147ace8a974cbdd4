"""One MockOS holding mock NV GPUs behind nvidia.ko and a mock Thor2 NIC on the same (mock) PCI fabric, and the
drivers on top: the NV side of the peer-to-peer tests (harness.py is the AMD one)."""
from __future__ import annotations

from hcq.config import Config
from hcq.drivers.bnxt.device import BNXTDev
from hcq.drivers.bnxt.gpuq import GPUPoster
from hcq.drivers.bnxt.qp import BNXTQP
from hcq.drivers.hcq import p2p
from hcq.drivers.nv import open_device
from hcq.drivers.system.pci import PCIDevice
from hcq.mockgpu import mock_amd_bnxt_os


class NVFabric:
  """gpus[i] (NVDevice over RM), nic (BNXTDev) and its model (self.model), QP a (its SQ and CQ in GPU 0's host
  memory: p2p.QueueMemory) -> QP b in PHY loopback, and a GPUPoster of QP a on gpus[0]."""

  def __init__(self, gpus: int = 2, timeout_s: float = 5.0, qp_timeout: int = 16, retry_cnt: int = 7, pcap: str = "",
               faults: str = ""):
    cfg = Config(timeout_s=timeout_s, bnxt_mock_pcap=pcap, bnxt_mock_faults=faults)
    self.os = mock_amd_bnxt_os(cfg, gpus=gpus, iface="RM")
    self.gpus = []
    try:
      self.gpus = [open_device("RM", i, self.os, cfg) for i in range(gpus)]
      from hcq.drivers.bnxt import find_devices
      addr = find_devices(self.os)[0].addr
      self.model = self.os.pci_functions[addr]
      self.nic = BNXTDev(PCIDevice(self.os, addr), self.os, cfg)
      self.nic.set_ip("10.0.200.5")
      self.a = BNXTQP(self.nic, timeout=qp_timeout, retry_cnt=retry_cnt, queue_memory=p2p.QueueMemory(self.gpus[0]))
      self.b = BNXTQP(self.nic)
      self.a.connect(self.b.qpn, self.nic.gid, self.nic.mac)
      self.b.connect(self.a.qpn, self.nic.gid, self.nic.mac)
      self.nic.set_loopback(True)
      self.poster = GPUPoster(self.a, self.gpus[0])
    except BaseException:
      self.close()
      raise

  def close(self) -> None:
    for g in self.gpus: g.close()
    if getattr(self, "nic", None) is not None: self.nic.close()
    self.os.close()
