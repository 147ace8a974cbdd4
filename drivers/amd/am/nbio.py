"""NBIO 4.3 (the SOC side of the PCI function): the doorbell aperture and routing, the HDP flush (the VRAM size is
read before discovery: AMDev._discover).

HDP flush (Linux nbio_v4_3_remap_hdp_registers, hdp_v6_0_flush_hdp): BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds the
*address* of the flush register, remapped into the MMIO hole at rmmio_remap.reg_offset = MMIO_REG_HOLE_OFFSET
(0x80000 - PAGE_SIZE, nbio_v4_3.c) + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL (0; _REG_FLUSH_CNTL 4, kfd_ioctl.h). A flush is
a write of 0 at that address, then a read of RCC_CONFIG_MEMSIZE to post it. A VF leaves the remap to the host (soc21_common_hw_init).

Doorbell routing: the S2A (SOC-to-agent) entries send a doorbell write to its engine: ENTRY_0 and ENTRY_3 to the GC
(nbio_v4_3_gc_doorbell_init's values), ENTRY_2 to SDMA0 for its range (nbio_v4_3_sdma_doorbell_range).
"""
from __future__ import annotations

from .block import IPBlock

MMIO_REG_HOLE_OFFSET = 0x80000 - 0x1000
REMAP_HDP_MEM_FLUSH_CNTL, REMAP_HDP_REG_FLUSH_CNTL = 0x0, 0x4
GC_DOORBELL_ENTRY_0, GC_DOORBELL_ENTRY_3 = 0x30000007, 0x3000000D     # nbio_v4_3_gc_doorbell_init
SDMA_AWID, SDMA_AWADDR_31_28 = 0xE, 0x3                               # nbio_v4_3_sdma_doorbell_range
SDMA_DOORBELL_RANGE = 20        # doorbell_index.sdma_doorbell_range (soc21 / nv doorbell index init), per instance


class NBIO(IPBlock):
  name = "nbio"
  flush_at = MMIO_REG_HOLE_OFFSET + REMAP_HDP_MEM_FLUSH_CNTL     # the byte address the flush is written to

  def hw_init(self) -> None:
    r = self.dev.nbio_regs
    self.step("doorbell aperture")
    r.write("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", BIF_DOORBELL_APER_EN=1)
    if not self.dev.vf: self.remap_hdp()

  def remap_hdp(self) -> None:
    """nbio_v4_3_remap_hdp_registers: the HDP flush registers at their addresses in the MMIO hole."""
    r = self.dev.nbio_regs
    self.step(f"HDP flush registers remapped to MMIO {MMIO_REG_HOLE_OFFSET:#x} (the register hole)")
    r.write("BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", MMIO_REG_HOLE_OFFSET + REMAP_HDP_MEM_FLUSH_CNTL)
    r.write("BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL", MMIO_REG_HOLE_OFFSET + REMAP_HDP_REG_FLUSH_CNTL)

  def hdp_flush(self) -> None:
    """Make the CPU's writes through the BAR visible to the GPU (hdp_v6_0_flush_hdp: 0 to the remapped flush
    register, read back so that the write has landed)."""
    d = self.dev
    d.access.write(self.flush_at >> 2, 0)
    # "read back a register to post the write": the memory size register (hdp_v6_0_flush_hdp: reading the remapped
    # one back causes problems on some platforms). Behind a USB bridge every TLP goes out in order and PCIe keeps
    # posted writes in order (the doorbell's MWr cannot pass the flush's): no read, which would cost two transfers
    if d.pci.dma != "device": d.nbio_regs.read("RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE")

  def gc_doorbell_init(self) -> None:
    """nbio_v4_3_gc_doorbell_init: the GC's doorbells routed (S2A entries 0 and 3)."""
    r = self.dev.nbio_regs
    self.step("GC doorbells routed (S2A_DOORBELL_ENTRY_0_CTRL, S2A_DOORBELL_ENTRY_3_CTRL)")
    r.write("S2A_DOORBELL_ENTRY_0_CTRL", GC_DOORBELL_ENTRY_0)
    r.write("S2A_DOORBELL_ENTRY_3_CTRL", GC_DOORBELL_ENTRY_3)

  def sdma_doorbell_range(self, doorbell_dw: int) -> None:
    """nbio_v4_3_sdma_doorbell_range(instance 0): SDMA0's doorbells (from dword doorbell_dw) routed (S2A entry 2)."""
    self.dev.nbio_regs.update("S2A_DOORBELL_ENTRY_2_CTRL", S2A_DOORBELL_PORT2_ENABLE=1, S2A_DOORBELL_PORT2_AWID=SDMA_AWID,
                              S2A_DOORBELL_PORT2_RANGE_OFFSET=doorbell_dw, S2A_DOORBELL_PORT2_RANGE_SIZE=SDMA_DOORBELL_RANGE,
                              S2A_DOORBELL_PORT2_AWADDR_31_28_VALUE=SDMA_AWADDR_31_28)
