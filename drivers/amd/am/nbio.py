"""NBIO 4.3 (the SOC side of the PCI function): the doorbell aperture, the HDP flush (the VRAM size is read before
discovery: AMDev._discover)."""
from __future__ import annotations

from .block import IPBlock


class NBIO(IPBlock):
  name = "nbio"

  def hw_init(self) -> None:
    self.step("doorbell aperture")
    self.dev.nbio_regs.write("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", BIF_DOORBELL_APER_EN=1)

  def hdp_flush(self) -> None:
    """Make the CPU's writes through the BAR visible to the GPU (the HDP write queue drains on this write)."""
    self.dev.nbio_regs.write("BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", 0)
