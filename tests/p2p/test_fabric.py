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
