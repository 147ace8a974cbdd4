"""Another PCI function's BAR in an AM GPU's address space (a NIC's doorbell page rung by a GPU queue): system PTEs
with the BAR's bus address, at a VA of the process range. The GPU's stores there are posted writes to that function,
routed by address like any peer-to-peer TLP. Without an IOMMU the bus address is the BAR's (sysfs `resource`); behind
one (VFIO) the GPU's IOMMU domain would need the BAR mapped as well, which hcq does not do: refused by name."""
from __future__ import annotations

from ....errors import DeviceError
from .gmc import PTE_RWX
from .va import PROCESS_VA

PAGE = 0x1000


def map_bar(session, bus: int, size: int, what: str) -> int:
  """Map the bus addresses [bus, bus + size) (page aligned) at a new VA of the process range; returns the VA. The
  mapping lives as long as the device (the VM goes with it)."""
  if bus % PAGE or size <= 0: raise DeviceError(f"{session.label}: {what} at bus address {bus:#x}+{size:#x} is not whole pages")
  if hasattr(session.am.pci.pci, "dma_map"):      # opened through VFIO (am/pci.py _choose_dma)
    raise DeviceError(f"{session.label}: {what}: the GPU sits behind an IOMMU (VFIO), whose domain does not map the "
                      f"peer's BAR; run without VFIO to map it")
  size = (size + PAGE - 1) & ~(PAGE - 1)
  va = PROCESS_VA.alloc(size, what)
  try:
    with session.am.lock: session.am.gmc.map(va, range(bus, bus + size, PAGE), system=True, flags=PTE_RWX)
  except BaseException:
    PROCESS_VA.free(va, size)
    raise
  return va
