"""VFIO: a PCI function whose DMA goes through an IOMMU, driven from userspace (Documentation/driver-api/vfio.rst),
all through the OS interface (its open/ioctl/mmap, read/write of the device file at region offsets).

Whether a function needs it (Documentation/ABI/testing/sysfs-kernel-iommu_groups):
  <sysfs>/bus/pci/devices/<addr>/iommu_group      a link to kernel/iommu_groups/<n>; absent: no IOMMU translates the
                                                  function's DMA, physical addresses reach memory (pagemap path)
  <sysfs>/kernel/iommu_groups/<n>/type            the group's default domain: "identity" (passthrough: physical
                                                  addresses reach memory, pagemap path); "DMA" / "DMA-FQ" (translated:
                                                  a physical address reaches nothing, or some other page: VFIO); and
                                                  "blocked" / "unmanaged" (no DMA at all unless a userspace domain is
                                                  set: VFIO). Any other text is refused, naming it.
  <sysfs>/kernel/iommu_groups/<n>/devices/        every function of the group (all must be bound to vfio-pci)
dma_mode() applies this; the caller's option (Config.am_dma: auto | pagemap | vfio) may force either path.

The function must already be bound to vfio-pci: this module refuses otherwise, with the commands that bind it
(driver_override, unbind, bind), rather than taking a device from a kernel driver behind the user's back.

Set-up (VFIOPCIDevice): /dev/vfio/vfio (VFIO_GET_API_VERSION == VFIO_API_VERSION, VFIO_CHECK_EXTENSION of
VFIO_TYPE1v2_IOMMU), /dev/vfio/<n> (VFIO_GROUP_GET_STATUS: viable, i.e. every device of the group bound to vfio-pci),
VFIO_GROUP_SET_CONTAINER, VFIO_SET_IOMMU (type 1 v2), VFIO_GROUP_GET_DEVICE_FD(<addr>), VFIO_DEVICE_GET_INFO and
VFIO_DEVICE_GET_REGION_INFO of BARs 0-5 and the config region. BARs are mmapped from the device file at their
region's offset, config space is read and written there (pread/pwrite), so bus mastering is the command register
written through it; vfio-pci enabled the function when the device file was opened.

DMA: VFIO_IOMMU_MAP_DMA (READ|WRITE) of host memory at an IOVA, VFIO_IOMMU_UNMAP_DMA when it is freed. IOVAs come
from a bump allocator from IOVA_BASE (64 GiB: far above the 32-bit window where x86 IOMMUs reserve the MSI range
0xfee00000) up to IOVA_LIMIT (2^39: the narrowest address width IOMMUs in use give a second-level table); never
reused within one open, which leaves ample room. IOVA == host VA was not chosen: host addresses reach 2^47, beyond
narrow IOMMUs, and fixed GPU VAs may fall into reserved windows.
"""
from __future__ import annotations

import ctypes
import os as _os
import posixpath

from ...autogen import vfio as v
from ...errors import DeviceError, OSCallError
from .pci import DEVICES, NUM_BARS, PCIDevice

PAGE = 0x1000
IOVA_BASE, IOVA_LIMIT = 1 << 36, 1 << 39
GROUPS = "kernel/iommu_groups"
VFIO_DRIVER = "vfio-pci"
TRANSLATED = ("DMA", "DMA-FQ", "blocked", "unmanaged")
MODES = ("auto", "pagemap", "vfio")


def iommu_group(os, addr: str) -> str | None:
  """The IOMMU group number of function addr (its iommu_group link), None when it has none (no IOMMU)."""
  link = posixpath.join(DEVICES, addr, "iommu_group")
  if not os.sysfs_exists(link): return None
  group = posixpath.basename(os.sysfs_readlink(link).rstrip("/"))
  if not group.isascii() or not group.isdigit():
    raise DeviceError(f"PCI {addr}: {link} points to {group!r}, not an IOMMU group number")
  return group


def group_type(os, group: str) -> str:
  path = posixpath.join(GROUPS, group, "type")
  try: return os.sysfs_read(path).strip()
  except OSCallError as e: raise DeviceError(f"IOMMU group {group}: cannot read its type ({e})") from None


def dma_mode(os, addr: str, option: str = "auto") -> tuple[str, str | None, str]:
  """("pagemap" | "vfio", the IOMMU group or None, why) for function addr (the module's doc); option forces a path."""
  if option not in MODES: raise DeviceError(f"PCI {addr}: DMA mode {option!r} is not one of {', '.join(MODES)}")
  group = iommu_group(os, addr)
  if option == "vfio":
    if group is None: raise DeviceError(f"PCI {addr}: VFIO asked for (am_dma=vfio), but the function has no IOMMU group")
    return "vfio", group, "forced (am_dma=vfio)"
  if option == "pagemap": return "pagemap", group, "forced (am_dma=pagemap)"
  if group is None: return "pagemap", None, "no IOMMU group: physical addresses reach memory"
  kind = group_type(os, group)
  if kind == "identity": return "pagemap", group, f"IOMMU group {group} is identity (passthrough)"
  if kind in TRANSLATED: return "vfio", group, f"IOMMU group {group} translates DMA (type {kind})"
  raise DeviceError(f"PCI {addr}: IOMMU group {group} has type {kind!r}, not one hcq knows (identity, "
                    f"{', '.join(TRANSLATED)}); force a path with am_dma=pagemap or am_dma=vfio")


def bind_instructions(addr: str) -> str:
  return (f"bind it to vfio-pci (as root: modprobe vfio-pci; echo vfio-pci > /sys/bus/pci/devices/{addr}/driver_override; "
          f"echo {addr} > /sys/bus/pci/devices/{addr}/driver/unbind; echo {addr} > /sys/bus/pci/drivers/vfio-pci/bind)")


class VFIOContainer:
  """/dev/vfio/vfio: the IOMMU context the groups share; DMA maps at IOVAs from the bump allocator."""

  def __init__(self, os, what: str):
    self.os, self.what = os, what
    self.file = os.open("/dev/vfio/vfio", _os.O_RDWR)
    self.iommu_set = False
    self.maps: dict[int, tuple[int, int]] = {}     # iova -> (host address, size)
    self._next = IOVA_BASE
    try:
      version = v.VFIO_GET_API_VERSION(self.file)
      if version != v.VFIO_API_VERSION:
        raise DeviceError(f"{what}: VFIO_GET_API_VERSION on /dev/vfio/vfio returned {version!r}, not {v.VFIO_API_VERSION}")
      if v.VFIO_CHECK_EXTENSION(self.file, v.VFIO_TYPE1v2_IOMMU) != 1:
        raise DeviceError(f"{what}: VFIO_CHECK_EXTENSION on /dev/vfio/vfio: no type 1 v2 IOMMU (VFIO_TYPE1v2_IOMMU)")
    except BaseException:
      self.file.close()
      raise

  def set_iommu(self) -> None:
    if self.iommu_set: return
    res = v.VFIO_SET_IOMMU(self.file, v.VFIO_TYPE1v2_IOMMU)
    if res != 0: raise DeviceError(f"{self.what}: VFIO_SET_IOMMU (type 1 v2) on /dev/vfio/vfio returned {res!r}")
    self.iommu_set = True

  def map_dma(self, addr: int, size: int) -> int:
    """Map host memory [addr, addr+size) (page-aligned) for the device, readable and writable; returns its IOVA."""
    if addr % PAGE or size <= 0 or size % PAGE:
      raise DeviceError(f"{self.what}: DMA map of {addr:#x}+{size:#x}: address and size must be page multiples")
    iova = self._next
    if iova + size > IOVA_LIMIT:
      raise DeviceError(f"{self.what}: no IOVA space left for {size:#x} bytes at {addr:#x} (up to {IOVA_LIMIT:#x})")
    arg = v.struct_vfio_iommu_type1_dma_map(argsz=ctypes.sizeof(v.struct_vfio_iommu_type1_dma_map),
                                            flags=v.VFIO_DMA_MAP_FLAG_READ | v.VFIO_DMA_MAP_FLAG_WRITE,
                                            vaddr=addr, iova=iova, size=size)
    try: v.VFIO_IOMMU_MAP_DMA(self.file, arg)
    except OSCallError as e:
      raise DeviceError(f"{self.what}: VFIO_IOMMU_MAP_DMA of host {addr:#x}+{size:#x} at IOVA {iova:#x} failed ({e})") from None
    self._next = iova + size
    self.maps[iova] = (addr, size)
    return iova

  def unmap_dma(self, iova: int) -> None:
    addr, size = self.maps.pop(iova)
    arg = v.struct_vfio_iommu_type1_dma_unmap(argsz=ctypes.sizeof(v.struct_vfio_iommu_type1_dma_unmap), iova=iova, size=size)
    try: v.VFIO_IOMMU_UNMAP_DMA(self.file, arg)
    except OSCallError as e:
      raise DeviceError(f"{self.what}: VFIO_IOMMU_UNMAP_DMA of IOVA {iova:#x}+{size:#x} (host {addr:#x}) failed ({e})") from None
    if arg.size != size:
      raise DeviceError(f"{self.what}: VFIO_IOMMU_UNMAP_DMA of IOVA {iova:#x}+{size:#x} unmapped {arg.size:#x} bytes")

  def close(self) -> None:
    for iova in list(self.maps):
      try: self.unmap_dma(iova)
      except DeviceError: pass        # closing the container drops every mapping anyway
    self.file.close()


class Region:
  def __init__(self, index: int, flags: int, size: int, offset: int):
    self.index, self.flags, self.size, self.offset = index, flags, size, offset

  def __repr__(self): return f"Region({self.index}, flags={self.flags:#x}, size={self.size:#x}, offset={self.offset:#x})"


class VFIOPCIDevice(PCIDevice):
  """A PCI function bound to vfio-pci, opened through its IOMMU group: PCIDevice's members (ids and BAR addresses
  from sysfs, which stay readable), with config space and BARs through the VFIO device file and DMA through the
  container (dma_map/dma_unmap)."""

  def __init__(self, os, addr: str, group: str | None = None):
    super().__init__(os, addr)
    self.group_file = self.file = self.container = None
    self.regions: dict[int, Region] = {}
    drv = self.driver
    if drv != VFIO_DRIVER:
      raise DeviceError(f"PCI {self.addr}: needs VFIO (its IOMMU translates DMA) but is bound to "
                        f"{drv or 'no driver'}; {bind_instructions(self.addr)}")
    self.group = group if group is not None else iommu_group(os, self.addr)
    if self.group is None: raise DeviceError(f"PCI {self.addr}: no IOMMU group, nothing for VFIO to open")
    self.what = f"PCI {self.addr} (VFIO group {self.group})"
    try: self._open()
    except BaseException as e:
      self.close()
      if isinstance(e, OSCallError): raise DeviceError(f"{self.what}: {e}") from None     # named with device and group
      raise

  def _open(self) -> None:
    self.container = VFIOContainer(self.os, self.what)
    path = f"/dev/vfio/{self.group}"
    self.group_file = self.os.open(path, _os.O_RDWR)
    status = v.struct_vfio_group_status(argsz=ctypes.sizeof(v.struct_vfio_group_status))
    v.VFIO_GROUP_GET_STATUS(self.group_file, status)
    if not status.flags & v.VFIO_GROUP_FLAGS_VIABLE:
      raise DeviceError(f"{self.what}: IOMMU group {self.group} is not viable (VFIO_GROUP_GET_STATUS flags "
                        f"{status.flags:#x}): every device of it must be bound to vfio-pci ({self._unbound()}); "
                        f"{bind_instructions('<each address>')}")
    v.VFIO_GROUP_SET_CONTAINER(self.group_file, (ctypes.c_int32 * 1)(self.container.file.fd))
    self.container.set_iommu()
    name = ctypes.create_string_buffer(self.addr.encode())
    self.file = self.group_file.ioctl_fd(v.VFIO_GROUP_GET_DEVICE_FD.request, name, f"{path} device {self.addr}")
    info = v.struct_vfio_device_info(argsz=ctypes.sizeof(v.struct_vfio_device_info))
    v.VFIO_DEVICE_GET_INFO(self.file, info)
    if not info.flags & v.VFIO_DEVICE_FLAGS_PCI or info.num_regions <= v.VFIO_PCI_CONFIG_REGION_INDEX:
      raise DeviceError(f"{self.what}: VFIO_DEVICE_GET_INFO says flags {info.flags:#x}, {info.num_regions} regions: "
                        f"not a PCI device with a config region")
    for index in (*range(NUM_BARS), v.VFIO_PCI_CONFIG_REGION_INDEX): self.regions[index] = self._region(index)

  def _unbound(self) -> str:
    """The group's devices not bound to vfio-pci, as sysfs lists them (for the error)."""
    try: names = self.os.sysfs_list(posixpath.join(GROUPS, self.group, "devices"))
    except OSCallError: return "its devices cannot be listed"
    bad = [f"{n} ({PCIDevice(self.os, n).driver or 'no driver'})" for n in names
           if PCIDevice(self.os, n).driver != VFIO_DRIVER] if all(map(_is_addr, names)) else names
    return "not bound: " + (", ".join(bad) or "none that sysfs shows")

  def _region(self, index: int) -> Region:
    info = v.struct_vfio_region_info(argsz=ctypes.sizeof(v.struct_vfio_region_info), index=index)
    v.VFIO_DEVICE_GET_REGION_INFO(self.file, info)
    if info.index != index or info.offset % PAGE or info.offset + info.size >= 1 << 63:
      raise DeviceError(f"{self.what}: VFIO_DEVICE_GET_REGION_INFO of region {index} gave index {info.index}, offset "
                        f"{info.offset:#x}, size {info.size:#x}: not a usable region")
    return Region(index, info.flags, info.size, info.offset)

  # ---- configuration space through the config region
  def config_read_bytes(self, offset: int, size: int) -> bytes:
    cfg = self.regions[v.VFIO_PCI_CONFIG_REGION_INDEX]
    if offset < 0 or size < 0 or offset + size > cfg.size:
      raise DeviceError(f"{self.what}: config read of {size} bytes at {offset:#x} is outside the {cfg.size:#x}-byte config region")
    data = self.file.read(size, cfg.offset + offset)
    if len(data) != size:
      raise DeviceError(f"{self.what}: config read of {size} bytes at {offset:#x} returned {len(data)}")
    return data

  def config_write(self, offset: int, value: int, size: int = 4) -> None:
    cfg = self.regions[v.VFIO_PCI_CONFIG_REGION_INDEX]
    if size not in (1, 2, 4) or offset < 0 or offset + size > cfg.size or offset % size or not 0 <= value < 1 << (8 * size):
      raise DeviceError(f"{self.what}: config write of {value:#x} ({size} bytes) at {offset:#x}: bad width, misaligned, "
                        f"outside the {cfg.size:#x}-byte config region or a value that does not fit")
    written = self.file.write(value.to_bytes(size, "little"), cfg.offset + offset)
    if written != size: raise DeviceError(f"{self.what}: config write at {offset:#x} wrote {written} of {size} bytes")

  # vfio-pci enables the function when its device file opens
  @property
  def enabled(self) -> bool: return self.file is not None
  def enable(self) -> None: pass

  # ---- BARs through the device file
  def _bar_region(self, index: int, offset: int, size: int) -> Region:
    if index not in range(NUM_BARS): raise DeviceError(f"{self.what}: there is no BAR {index} (0-{NUM_BARS - 1})")
    r = self.regions[index]
    if not r.flags & v.VFIO_REGION_INFO_FLAG_MMAP:
      raise DeviceError(f"{self.what}: BAR {index}'s region cannot be mmapped (flags {r.flags:#x})")
    if offset < 0 or size <= 0 or offset + size > r.size or offset % PAGE:
      raise DeviceError(f"{self.what}: window {offset:#x}+{size:#x} is outside BAR {index}'s region of {r.size:#x} "
                        f"bytes or not page-aligned")
    return r

  def map_bar(self, index: int, size: int | None = None, offset: int = 0):
    size = self.regions[index].size - offset if size is None and index in self.regions else size
    r = self._bar_region(index, offset, size if size is not None else 0)
    return self.os.map_file_mmio(self.file, size, r.offset + offset, name=f"{self.addr} BAR{index} (VFIO)")

  def map_bar_at(self, index: int, addr: int, size: int, offset: int = 0):
    r = self._bar_region(index, offset, size)
    return self.os.map_file_mmio(self.file, size, r.offset + offset, name=f"{self.addr} BAR{index} (VFIO)", addr=addr)

  # ---- DMA through the IOMMU
  def dma_map(self, addr: int, size: int) -> int: return self.container.map_dma(addr, size)
  def dma_unmap(self, iova: int) -> None: self.container.unmap_dma(iova)

  def close(self) -> None:
    """The device file, the group and the container (its DMA mappings first: the IOMMU lets go of the pages)."""
    for name in ("file", "container", "group_file"):
      f = getattr(self, name, None)
      if f is not None:
        setattr(self, name, None)
        f.close()
    super().close()


def _is_addr(name: str) -> bool:
  from .pciaddr import is_valid
  return is_valid(name)
