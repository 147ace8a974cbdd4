"""The mock PCI fabric routes a peer's DMA by bus address: into another function's memory BAR (a GPU's VRAM
aperture), never into a register BAR, and an address nothing claims is a DMA fault naming it."""
import pytest

from hcq.config import Config
from hcq.errors import GPUFault
from hcq.mockgpu import mock_navi31_os
from hcq.mockgpu.bnxt.nic import MockThor2


def test_nic_dma_into_the_gpu_vram_bar_reaches_vram():
  os = mock_navi31_os(Config(timeout_s=5.0))
  try:
    nic = os.add_device(MockThor2(seed=1))
    navi = next(fn for fn in os.pci_functions.values() if fn is not nic and 0 in fn.bars)
    vram = navi.bars[0]
    nic.dma_write(vram.bus_address + 0x123450, b"peer-to-peer")
    assert vram.view.read_bytes(0x123450, 12) == b"peer-to-peer"
    vram.view.write_bytes(0x200000, b"from VRAM..!")
    assert nic.dma_read(vram.bus_address + 0x200000, 12) == b"from VRAM..!"
    # a register BAR (the GPU's MMIO) is not memory: the NIC's DMA there faults, naming the address
    regs = navi.bars[5]
    with pytest.raises(GPUFault, match=f"{regs.bus_address:#x}"):
      nic.dma_write(regs.bus_address, b"\0" * 4)
  finally:
    os.close()


@pytest.fixture(scope="module")
def fw_dir():
  from hcq.autogen import fwpackage, sources
  from hcq.config import from_env
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e: pytest.skip(f"no AMD firmware package: {e}")


def test_rdma_write_into_am_vram_through_the_bar(fw_dir, tmp_path):
  """An AM (MOCKPCI+AMD) VRAM buffer registered with the NIC from its pages in the VRAM BAR; an RDMA WRITE lands in
  VRAM, which the GPU then reads back."""
  from hcq.drivers.amd.am.device import open_am
  from hcq.drivers.bnxt.device import BNXTDev
  from hcq.drivers.bnxt.qp import BNXTQP
  from hcq.drivers.hcq import p2p
  from hcq.drivers.system.pci import PCIDevice
  cfg = Config(timeout_s=5.0, lock_dir=str(tmp_path), firmware_dir=fw_dir)
  os = mock_navi31_os(cfg)
  gpu = nic = None
  try:
    model = os.add_device(MockThor2(seed=2))
    gpu = open_am(os, 0, cfg)
    nic = BNXTDev(PCIDevice(os, model.addr), os, cfg)
    nic.set_ip("10.0.200.5")
    a, b = BNXTQP(nic), BNXTQP(nic)
    a.connect(b.qpn, nic.gid, nic.mac)
    b.connect(a.qpn, nic.gid, nic.mac)
    nic.set_loopback(True)
    n = 3 * 4096 + 512
    dst = gpu.alloc(n)                       # VRAM, not CPU-visible
    pages = gpu.dma_pages(dst)
    bar = gpu.iface.am.pci.vram_bus_address()
    assert len(pages) == 4 and all(bar <= p < bar + gpu.iface.am.pci.bar_size("vram") for p in pages)
    _, remote = p2p.register(nic, gpu, dst)
    src = nic.alloc(n)
    data = bytes((i * 37 + 11) & 0xFF for i in range(n))
    src.write(0, data)
    a.rdma_write(remote.va, remote.rkey, src.va, nic.register_mr(src), n)
    assert gpu.copyout(dst) == data
    assert model.errors == []
  finally:
    if nic is not None: nic.close()
    if gpu is not None: gpu.close()
    os.close()
