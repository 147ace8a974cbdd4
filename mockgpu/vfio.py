"""VFIO and an IOMMU in a MockOS (drivers/system/vfio.py is the driver side; Documentation/driver-api/vfio.rst).

add_iommu_group(os, fn, kind) puts PCI function fn into a new IOMMU group, as sysfs shows it
(Documentation/ABI/testing/sysfs-kernel-iommu_groups): <fn>/iommu_group -> ../../../kernel/iommu_groups/<n>,
/sys/kernel/iommu_groups/<n>/type ("identity" or "DMA") and devices/<addr>; and the device nodes /dev/vfio/vfio (a
container: VFIO_GET_API_VERSION, VFIO_CHECK_EXTENSION, VFIO_SET_IOMMU, VFIO_IOMMU_MAP_DMA / UNMAP_DMA) and
/dev/vfio/<n> (VFIO_GROUP_GET_STATUS: viable while every function of the group is bound to vfio-pci,
VFIO_GROUP_SET_CONTAINER, VFIO_GROUP_GET_DEVICE_FD). The device file answers VFIO_DEVICE_GET_INFO and
VFIO_DEVICE_GET_REGION_INFO; its regions sit at index << 40 as vfio-pci lays them out: BARs 0-5 (mmap: the same
windows as the sysfs resourceN files) and the config region (read/write: the function's config space).

The IOMMU: MockGroup.bus_pages() is what the function's DMA reaches, {bus page: host page}. An "identity" group (and
a function without a group) reaches host memory at the physical addresses pagemap hands out (HostMemory's table); a
"DMA" group reaches only the IOVAs its container mapped with VFIO_IOMMU_MAP_DMA: a physical address, or an IOVA
not mapped, reaches nothing (the device model faults), as behind a translating IOMMU.
"""
from __future__ import annotations

import ctypes
import errno

from ..autogen import vfio as v
from ..errors import OSCallError
from .files import MockFile
from .vfs import DeviceNode

PAGE = 0x1000
REGION_SHIFT = 40             # vfio-pci's VFIO_PCI_OFFSET_SHIFT: region i starts at file offset i << 40
KINDS = {"identity": "identity", "dma": "DMA"}
REQ = {getattr(v, n).request: n for n in ("VFIO_GET_API_VERSION", "VFIO_CHECK_EXTENSION", "VFIO_SET_IOMMU",
                                          "VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA", "VFIO_GROUP_GET_STATUS",
                                          "VFIO_GROUP_SET_CONTAINER", "VFIO_GROUP_GET_DEVICE_FD",
                                          "VFIO_DEVICE_GET_INFO", "VFIO_DEVICE_GET_REGION_INFO")}


class MockVFIO:
  """The VFIO state of one MockOS: its groups, and its open containers by descriptor (VFIO_GROUP_SET_CONTAINER)."""

  def __init__(self, os):
    self.os, self.groups, self.containers = os, {}, {}
    os.vfs.mkdir("/dev/vfio")
    os.vfs.add("/dev/vfio/vfio", DeviceNode(lambda path, flags: ContainerFile(self, path, flags)))
    os.vfs.mkdir("/sys/kernel/iommu_groups")


def vfio_of(os) -> MockVFIO:
  if getattr(os, "vfio", None) is None: os.vfio = MockVFIO(os)
  return os.vfio


class MockGroup:
  def __init__(self, vfio: MockVFIO, number: int, kind: str):
    self.vfio, self.number, self.kind = vfio, number, kind
    self.functions: list = []
    self.container: ContainerFile | None = None
    self.on_unmap: list = []       # callbacks(ranges [(host address, size)]): DMA the IOMMU no longer lets through

  def join(self, fn) -> None:
    """Another PCI function (published in sysfs) in this group (e.g. the GPU's HDMI audio function)."""
    os = self.vfio.os
    self.functions.append(fn)
    os.vfs.add_symlink(f"/sys/kernel/iommu_groups/{self.number}/devices/{fn.addr}", f"../../../../devices/pci{fn.domain_bus}/{fn.addr}")
    os.vfs.add_symlink(f"{fn.sysfs_dir}/iommu_group", f"../../../kernel/iommu_groups/{self.number}")

  @property
  def viable(self) -> bool: return all(fn.driver == "vfio-pci" for fn in self.functions)

  def bus_pages(self):
    """{bus page: host page} the functions' DMA reaches (the module's doc)."""
    if self.kind == "identity": return self.vfio.os.memory._phys_page
    c = self.container
    return c.pages if c is not None and c.iommu is not None else {}


def add_iommu_group(os, fn, kind: str) -> MockGroup:
  """A new IOMMU group of kind "identity" or "dma" holding PCI function fn (already published in sysfs)."""
  if kind not in KINDS: raise ValueError(f"mock IOMMU: {kind!r} is not one of {', '.join(KINDS)}")
  vfio = vfio_of(os)
  number = len(vfio.groups) + 1
  group = vfio.groups[number] = MockGroup(vfio, number, kind)
  base = f"/sys/kernel/iommu_groups/{number}"
  os.vfs.mkdir(f"{base}/devices")
  os.vfs.add_file(f"{base}/type", f"{KINDS[kind]}\n")
  group.join(fn)
  os.vfs.add(f"/dev/vfio/{number}", DeviceNode(lambda path, flags: GroupFile(group, path, flags)))
  return group


def _need(path: str, name: str, arg, cls):
  """arg as the struct cls the ioctl takes, its argsz at least the struct's (the kernel's check), else EINVAL."""
  if not isinstance(arg, cls) or arg.argsz < ctypes.sizeof(cls):
    raise OSCallError("ioctl", path, errno.EINVAL, f"{name}: needs a {cls.__name__} with argsz >= {ctypes.sizeof(cls)}")
  return arg


class ContainerFile(MockFile):
  def __init__(self, vfio: MockVFIO, path: str, flags: int):
    super().__init__(path, flags)
    self.vfio, self.groups, self.iommu = vfio, [], None
    self.maps: dict[int, tuple[int, int]] = {}      # iova -> (host address, size)
    self.pages: dict[int, int] = {}                 # iova page -> host page
    vfio.containers[self.fd] = self

  def ioctl(self, request: int, arg) -> int:
    self._check_open("ioctl")
    name = REQ.get(request)
    if name == "VFIO_GET_API_VERSION": return v.VFIO_API_VERSION
    if name == "VFIO_CHECK_EXTENSION": return int(arg in (v.VFIO_TYPE1_IOMMU, v.VFIO_TYPE1v2_IOMMU))
    if name == "VFIO_SET_IOMMU":
      if not self.groups: raise OSCallError("ioctl", self.path, errno.EINVAL, f"{name}: no group in the container")
      if arg not in (v.VFIO_TYPE1_IOMMU, v.VFIO_TYPE1v2_IOMMU) or self.iommu is not None:
        raise OSCallError("ioctl", self.path, errno.EINVAL, f"{name}: IOMMU type {arg!r}")
      self.iommu = arg
      return 0
    if name == "VFIO_IOMMU_MAP_DMA": return self._map(_need(self.path, name, arg, v.struct_vfio_iommu_type1_dma_map))
    if name == "VFIO_IOMMU_UNMAP_DMA": return self._unmap(_need(self.path, name, arg, v.struct_vfio_iommu_type1_dma_unmap))
    raise OSCallError("ioctl", self.path, errno.ENOTTY, f"request {request:#x}")

  def _map(self, m) -> int:
    err = lambda e, why: OSCallError("ioctl", self.path, e, f"VFIO_IOMMU_MAP_DMA {m.vaddr:#x}+{m.size:#x} at IOVA {m.iova:#x}: {why}")
    if self.iommu is None: raise err(errno.EINVAL, "no IOMMU set")
    if (m.vaddr | m.iova | m.size) % PAGE or not m.size: raise err(errno.EINVAL, "not page-aligned")
    if not m.flags & v.VFIO_DMA_MAP_FLAG_READ: raise err(errno.EINVAL, "not readable")
    mem = self.vfio.os.memory
    for off in range(0, m.size, PAGE):      # pinning faults on memory that is not mapped
      found = mem.find(m.vaddr + off)
      if found is None or "(reserved)" in found[2]: raise err(errno.EFAULT, f"host page {m.vaddr + off:#x} is not mapped")
    if any(m.iova + off in self.pages for off in range(0, m.size, PAGE)): raise err(errno.EEXIST, "IOVA in use")
    self.maps[m.iova] = (m.vaddr, m.size)
    for off in range(0, m.size, PAGE): self.pages[m.iova + off] = m.vaddr + off
    return 0

  def _unmap(self, u) -> int:
    found = self.maps.get(u.iova)
    if found is None or found[1] != u.size:
      raise OSCallError("ioctl", self.path, errno.EINVAL, f"VFIO_IOMMU_UNMAP_DMA of IOVA {u.iova:#x}+{u.size:#x}: no such mapping")
    self._drop(u.iova)
    return 0

  def _drop(self, iova: int) -> None:
    addr, size = self.maps.pop(iova)
    for off in range(0, size, PAGE): self.pages.pop(iova + off, None)
    for group in self.groups:
      for cb in group.on_unmap: cb([(addr, size)])

  def close(self) -> None:
    if self.closed: return
    for iova in list(self.maps): self._drop(iova)
    for group in self.groups: group.container = None
    self.vfio.containers.pop(self.fd, None)
    super().close()


class GroupFile(MockFile):
  def __init__(self, group: MockGroup, path: str, flags: int):
    super().__init__(path, flags)
    self.group = group

  def ioctl(self, request: int, arg) -> int:
    self._check_open("ioctl")
    name, g = REQ.get(request), self.group
    if name == "VFIO_GROUP_GET_STATUS":
      st = _need(self.path, name, arg, v.struct_vfio_group_status)
      st.flags = (v.VFIO_GROUP_FLAGS_VIABLE if g.viable else 0) | (v.VFIO_GROUP_FLAGS_CONTAINER_SET if g.container else 0)
      return 0
    if name == "VFIO_GROUP_SET_CONTAINER":
      if not isinstance(arg, ctypes.Array) or len(arg) != 1: raise OSCallError("ioctl", self.path, errno.EFAULT, name)
      c = g.vfio.containers.get(arg[0])
      if c is None: raise OSCallError("ioctl", self.path, errno.EBADF, f"{name}: fd {arg[0]} is no container")
      if not g.viable: raise OSCallError("ioctl", self.path, errno.EPERM, f"{name}: group {g.number} is not viable")
      if g.container is not None: raise OSCallError("ioctl", self.path, errno.EINVAL, f"{name}: already set")
      g.container = c
      c.groups.append(g)
      return 0
    raise OSCallError("ioctl", self.path, errno.ENOTTY, f"request {request:#x}")

  def ioctl_fd(self, request: int, arg, path: str) -> "DeviceFile":
    self._check_open("ioctl")
    g = self.group
    if REQ.get(request) != "VFIO_GROUP_GET_DEVICE_FD": raise OSCallError("ioctl", self.path, errno.ENOTTY, f"request {request:#x}")
    if g.container is None or g.container.iommu is None:
      raise OSCallError("ioctl", self.path, errno.EINVAL, "VFIO_GROUP_GET_DEVICE_FD: no container with an IOMMU")
    want = arg.value.decode(errors="replace") if isinstance(arg, ctypes.Array) and arg._type_ is ctypes.c_char else None
    fn = next((f for f in g.functions if f.addr == want), None)
    if fn is None: raise OSCallError("ioctl", self.path, errno.ENODEV, f"VFIO_GROUP_GET_DEVICE_FD: no device {want!r} in the group")
    fn.enabled = True           # vfio-pci enables the function when its device file opens
    return DeviceFile(fn, path)


class DeviceFile(MockFile):
  def __init__(self, fn, path: str):
    super().__init__(path)
    self.fn = fn

  def _region(self, index: int) -> tuple[int, int]:
    """(flags, size) of region index."""
    if index == v.VFIO_PCI_CONFIG_REGION_INDEX:
      return v.VFIO_REGION_INFO_FLAG_READ | v.VFIO_REGION_INFO_FLAG_WRITE, len(self.fn.config)
    bar = self.fn.bars.get(index)
    if bar is None or bar.io: return 0, 0
    return v.VFIO_REGION_INFO_FLAG_READ | v.VFIO_REGION_INFO_FLAG_WRITE | v.VFIO_REGION_INFO_FLAG_MMAP, bar.size

  def ioctl(self, request: int, arg) -> int:
    self._check_open("ioctl")
    name = REQ.get(request)
    if name == "VFIO_DEVICE_GET_INFO":
      info = _need(self.path, name, arg, v.struct_vfio_device_info)
      info.flags, info.num_regions, info.num_irqs = v.VFIO_DEVICE_FLAGS_PCI, v.VFIO_PCI_NUM_REGIONS, v.VFIO_PCI_NUM_IRQS
      return 0
    if name == "VFIO_DEVICE_GET_REGION_INFO":
      r = _need(self.path, name, arg, v.struct_vfio_region_info)
      if r.index >= v.VFIO_PCI_NUM_REGIONS: raise OSCallError("ioctl", self.path, errno.EINVAL, f"{name}: region {r.index}")
      r.flags, r.size = self._region(r.index)
      r.offset, r.cap_offset = r.index << REGION_SHIFT, 0
      return 0
    raise OSCallError("ioctl", self.path, errno.ENOTTY, f"request {request:#x}")

  def _config(self, offset: int, size: int, call: str) -> int:
    index, off = offset >> REGION_SHIFT, offset & ((1 << REGION_SHIFT) - 1)
    if index != v.VFIO_PCI_CONFIG_REGION_INDEX or off + size > len(self.fn.config):
      raise OSCallError(call, self.path, errno.EINVAL, f"{size} bytes at {offset:#x}: not inside the config region")
    return off

  def read(self, size: int = -1, offset: int | None = None) -> bytes:
    self._check_open("read")
    off = self._config(offset or 0, size, "pread")
    return self.fn.config_read(off, size)

  def write(self, data, offset: int | None = None) -> int:
    self._check_open("write")
    off = self._config(offset or 0, len(data), "pwrite")
    return self.fn.config_write(off, bytes(data))

  def mmio(self, size: int, offset: int, name: str):
    """The window of the BAR region at file offset `offset` (the same models as the sysfs resourceN files)."""
    self._check_open("mmap")
    index, off = offset >> REGION_SHIFT, offset & ((1 << REGION_SHIFT) - 1)
    bar = self.fn.bars.get(index)
    if index >= 6 or bar is None: raise OSCallError("mmap", self.path, errno.EINVAL, f"offset {offset:#x}: no BAR region there")
    return bar.window(size, off, name)

  def close(self) -> None:
    super().close()
