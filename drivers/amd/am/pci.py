"""The AM driver's hold on one AMD PCI function: the device lock, the ids, bus mastering, the three BARs AM uses and
system memory the GPU can reach, all through the OS interface (drivers/system/interface.py).

A Navi 31 function shows three memory BARs (lspci -v of a 7900 XTX; the order is the hardware's):
  VRAM      the largest 64-bit prefetchable BAR (BAR0): a CPU window on the framebuffer (all of it with resizable BAR)
  doorbell  the other 64-bit prefetchable BAR (BAR2): the doorbell page array, 64-bit stores
  MMIO      the 32-bit non-prefetchable BAR (BAR5): the register aperture, 32-bit loads and stores
They are told apart by these properties (the `resource` file's flags), not by their numbers alone, so that a function
whose BARs are laid out otherwise is refused with the list of what it has.

The PCI device is the sysfs one (drivers/system/pci.py's PCIDevice) unless the caller injects another with the same
members (drivers/system/usbpci.py's USBPCIDevice: the GPU behind a USB bridge, its BARs TLP views). An injected device
may name its own lock through `lock_key` (kind, address): a function behind a bridge has a bus address only in the
bridge's private tree, which would collide with the host's.

System memory for the GPU is shared anonymous memory; the GPU reaches it at its pagemap physical addresses where no
IOMMU translates the function's DMA (no IOMMU group, or an identity one), else at IOVAs mapped through VFIO: the
function is then opened through its IOMMU group (drivers/system/vfio.py's VFIOPCIDevice: BARs and config space through
the VFIO device file, the function bound to vfio-pci). Config.am_dma (auto | pagemap | vfio) may force either.

The lock <lock dir>/am_<bus>.lock (drivers/system/locks.py) is held from open to close: `hcq-smi amd pids` and
`kill_pids` find the holder through it, and a second process gets an error naming the holder's pid.
"""
from __future__ import annotations

import dataclasses

from ....autogen import pci as pci_regs
from ....errors import DeviceError
from ...system.pci import PCIDevice
from ...system.pciaddr import validate
from ...system.vfio import VFIOPCIDevice, dma_mode

VENDOR_AMD = 0x1002
# the device ids this driver boots, with the GC version their discovery table must report
SUPPORTED = {0x744C: ("Navi 31 (Radeon RX 7900 XT/XTX)", (11, 0, 0)),
             # an SR-IOV VF (libdrm amdgpu.ids "7461, 00, AMD Radeon Pro V710 MxGPU"; gfx1101 = GC 11.0.3: ROCm's GPU
             # specifications, Linux kfd_device.c): AM boots it as a VF only (virt.py), the host owns PSP and SMU
             0x7461: ("Navi 32 (Radeon PRO V710 MxGPU, SR-IOV VF)", (11, 0, 3))}
PAGE = 0x1000


@dataclasses.dataclass
class SysMem:
  """Host memory the GPU reaches by DMA: `addr` in this process, `paddrs` the bus address of each 4 KiB page
  (not contiguous: the GPU page tables map page by page). Behind a USB bridge it is the bridge's SRAM: `remote` the
  device's buffer, no CPU address or view (addr and view None); read/write reach either kind."""
  addr: int | None
  size: int
  paddrs: list[int]
  view: memoryview | None
  remote: object = None
  iova: int | None = None     # mapped through VFIO: its IOVA (paddrs are IOVAs), unmapped when freed

  def read(self, offset: int, size: int) -> bytes:
    self._range(offset, size)
    return self.remote.read(offset, size) if self.view is None else bytes(self.view[offset:offset + size])

  def write(self, offset: int, data: bytes) -> None:
    self._range(offset, len(data))
    if self.view is None: self.remote.write(offset, data)
    else: self.view[offset:offset + len(data)] = data

  def _range(self, offset: int, size: int) -> None:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"system memory at bus address {self.paddrs[0]:#x}: {size} bytes at {offset:#x} are outside "
                        f"its {self.size:#x} bytes")


def identify_bars(pci, label: str) -> dict[str, int]:
  """{"vram", "doorbell", "mmio"} -> the BAR index of each role, told apart by their flags (the module's doc)."""
  bars = [b for b in pci.bars() if b.is_memory and b.size]
  big = sorted((b for b in bars if b.is_64bit and b.prefetchable), key=lambda b: -b.size)
  regs = [b for b in bars if not b.prefetchable]
  if len(big) < 2 or not regs:
    raise DeviceError(f"{label}: expected two 64-bit prefetchable BARs (VRAM, doorbells) and a "
                      f"non-prefetchable one (MMIO), found {bars!r}")
  return {"vram": big[0].index, "doorbell": big[1].index, "mmio": regs[0].index}


def check_ids(pci, label: str) -> tuple[str, tuple[int, int, int]]:
  """(product name, GC version) of a function AM boots; another vendor or device is a DeviceError naming it."""
  vendor, device = pci.vendor, pci.device
  if vendor != VENDOR_AMD:
    raise DeviceError(f"{label}: vendor {vendor:#06x} is not AMD ({VENDOR_AMD:#06x})")
  if device not in SUPPORTED:
    known = ", ".join(f"{d:#06x} {n}" for d, (n, _) in SUPPORTED.items())
    raise DeviceError(f"{label}: device {device:#06x} is not one AM boots (supported: {known})")
  return SUPPORTED[device]


class AMPCI:
  """One AMD PCI function, locked, enabled for memory decoding and bus mastering, its BARs identified and mapped."""

  def __init__(self, os, addr: str | None = None, label: str | None = None, device=None):
    """addr: the function's sysfs address; device: an already opened PCI device to use instead (its .addr)."""
    if (addr is None) == (device is None): raise DeviceError("AMPCI: give a PCI address or an opened device, one of them")
    self.os, self.addr = os, validate(addr if device is None else device.addr)
    self.label = label or f"PCI+AMD {self.addr}"
    self.lock = None
    self.pci = PCIDevice(os, self.addr) if device is None else device
    try:
      self._check_ids()
      self.lock_key = getattr(self.pci, "lock_key", ("am", self.addr))
      self.lock = os.lock_device(*self.lock_key)
      self.dma = "device" if device is not None else self._choose_dma()
    except BaseException:
      if device is None: self.pci.close()     # an injected device stays its caller's on a refusal
      if self.lock is not None: self.lock.release()
      raise
    self.views: dict[str, object] = {}
    self._sysmem: list[SysMem] = []
    self._fixed: list = []        # VRAM BAR windows mapped at fixed addresses (map_vram)
    try:
      self.bar_index = self._identify_bars()
      self.enable_bus_master()
      for role in ("mmio", "doorbell", "vram"):
        self.views[role] = self.pci.map_bar(self.bar_index[role])
    except BaseException:
      self.close()
      raise

  # ---- VFIO (drivers/system/vfio.py): where the IOMMU translates DMA, the function is opened through its group and
  # system memory is mapped at IOVAs; elsewhere sysfs and pagemap physical addresses (config.am_dma forces either)
  def _choose_dma(self) -> str:
    mode, group, self.dma_why = dma_mode(self.os, self.addr, getattr(self.os.config, "am_dma", "auto"))
    if mode == "vfio":
      self.pci.close()
      self.pci = VFIOPCIDevice(self.os, self.addr, group)
    return mode

  def _bus_addrs(self, addr: int, size: int) -> tuple[list[int], int | None]:
    """(bus address of each page, the IOVA when mapped through VFIO) of host memory [addr, addr+size)."""
    if not hasattr(self.pci, "dma_map"): return self.os.phys_addrs(addr, size), None
    iova = self.pci.dma_map(addr, size)
    return [iova + off for off in range(0, size, PAGE)], iova

  # ---- identity
  def _check_ids(self) -> None:
    self.product, self.gc_version = check_ids(self.pci, self.label)
    self.device_id = self.pci.device

  def _identify_bars(self) -> dict[str, int]: return identify_bars(self.pci, self.label)

  def bar_size(self, role: str) -> int: return self.pci.bar(self.bar_index[role]).size

  @property
  def vram(self): return self.views["vram"]
  @property
  def doorbell(self): return self.views["doorbell"]
  @property
  def mmio(self): return self.views["mmio"]

  def vram_bus_address(self) -> int:
    """Where the VRAM BAR sits on the bus (peer access and the GPU's view of its own BAR)."""
    return self.pci.bar(self.bar_index["vram"]).start

  def map_vram(self, offset: int, size: int, addr: int):
    """The CPU view of VRAM [offset, offset+size) mapped at the fixed address addr (AMSession: a buffer's GPU VA, so
    that GPU VA == CPU VA holds for CPU-visible VRAM); an MMIOView whose close() unmaps it, freed with the rest at
    close. A device behind a USB bridge has no BAR the CPU can map: DeviceError."""
    if not hasattr(self.pci, "map_bar_at"):
      raise DeviceError(f"{self.label}: VRAM behind {getattr(self.pci, 'name', 'this device')} has no CPU mapping; "
                        f"VRAM {offset:#x}+{size:#x} cannot be mapped at {addr:#x}")
    view = self.pci.map_bar_at(self.bar_index["vram"], addr, size, offset)
    self._fixed.append(view)
    return view

  def unmap_vram(self, view) -> None:
    if view in self._fixed:
      self._fixed.remove(view)
      view.close()

  # ---- PCI command register
  def enable_bus_master(self) -> None:
    """`enable` (the kernel turns on memory decoding) then PCI_COMMAND memory + bus master: the GPU may DMA."""
    if not self.pci.enabled: self.pci.enable()
    cmd = self.pci.config_read(pci_regs.PCI_COMMAND, 2)
    self.pci.config_write(pci_regs.PCI_COMMAND, cmd | pci_regs.PCI_COMMAND_MEMORY | pci_regs.PCI_COMMAND_MASTER, 2)

  def disable_bus_master(self) -> None:
    cmd = self.pci.config_read(pci_regs.PCI_COMMAND, 2)
    self.pci.config_write(pci_regs.PCI_COMMAND, cmd & ~pci_regs.PCI_COMMAND_MASTER & 0xFFFF, 2)

  @property
  def bus_master(self) -> bool:
    return bool(self.pci.config_read(pci_regs.PCI_COMMAND, 2) & pci_regs.PCI_COMMAND_MASTER)

  # ---- system memory
  def alloc_sysmem(self, size: int, addr: int | None = None) -> SysMem:
    """Shared anonymous memory, page-rounded, with each page's physical address (pagemap through the OS); at addr
    when given (AMSession: GPU VA == CPU VA)."""
    size = (size + PAGE - 1) & ~(PAGE - 1)
    if size <= 0: raise DeviceError(f"{self.label}: system memory of {size} bytes")
    if hasattr(self.pci, "alloc_sysmem"): return self._device_sysmem(size, addr)
    addr = self.os.alloc_anon(size, addr=addr, shared=True)
    try: paddrs, iova = self._bus_addrs(addr, size)
    except BaseException:
      self.os.free_anon(addr, size)
      raise
    mem = SysMem(addr, size, paddrs, self.os.memview(addr, size), iova=iova)
    self._sysmem.append(mem)
    return mem

  def _device_sysmem(self, size: int, addr: int | None) -> SysMem:
    """The PCI device's own system memory (USBPCIDevice.alloc_sysmem: the bridge's SRAM, page-aligned): the GPU
    reaches it at its bus address, the CPU only through read/write, so it cannot be placed at a CPU address."""
    if addr is not None:
      raise DeviceError(f"{self.label}: system memory behind {self.pci.name} has no CPU address; it cannot be placed at "
                        f"{addr:#x} (GPU VA == CPU VA needs memory the CPU maps)")
    buf = self.pci.alloc_sysmem(size, align=PAGE)
    mem = SysMem(None, size, [buf.bus + off for off in range(0, size, PAGE)], None, remote=buf)
    self._sysmem.append(mem)
    return mem

  def free_sysmem(self, mem: SysMem) -> None:
    if mem not in self._sysmem: return
    self._sysmem.remove(mem)
    if mem.remote is None:        # the device's own (bridge SRAM) stays with its bump allocator until it closes
      if mem.iova is not None: self.pci.dma_unmap(mem.iova)     # the IOMMU lets go before the pages go
      try: mem.view.release()
      except BufferError: pass      # a caller still holds a slice of it: the memory goes anyway
      self.os.free_anon(mem.addr, mem.size)

  # ---- end
  def close(self) -> None:
    """Bus mastering off (no DMA from a GPU left running into memory about to go), unmap the BARs, free system memory,
    give the lock back (idempotent)."""
    try:
      if self.lock is not None: self.disable_bus_master()
    finally:
      for mem in list(self._sysmem): self.free_sysmem(mem)
      for view in list(getattr(self, "_fixed", ())): self.unmap_vram(view)
      for view in self.views.values(): view.close()
      self.views = {}
      self.pci.close()
      if self.lock is not None:
        self.lock.release()
        self.lock = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
