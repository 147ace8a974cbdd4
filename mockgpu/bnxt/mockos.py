"""A small OS interface for the mock NIC: a sysfs tree with one PCI function, BAR views whose accesses reach the device
model, and anonymous memory with fake, shuffled physical addresses that the device reaches by DMA.

It implements the part of drivers.system.interface.OSInterface that PCIDevice and the BNXT driver use. (When the shared
MockOS core lands, the NIC plugs into it as a PCI function instead.)
"""
from __future__ import annotations

import ctypes
import mmap
import posixpath
import random
import threading
import time

from ...drivers.system.interface import MMIOView
from ...errors import DeviceError, GPUFault, OSCallError

PAGE = 4096


class DMAFault(GPUFault):
  """The device touched a physical address that is not mapped (what an IOMMU would report)."""


class BarView(MMIOView):
  """A BAR as the driver sees it: every access goes to the device model's read/write handlers."""

  def __init__(self, device, bar: int, size: int, name: str):
    self.device, self.bar, self.size, self.name = device, bar, size, name

  def read32(self, offset): self._check(offset, 4); return self.device.mmio_read(self.bar, offset, 4)
  def write32(self, offset, value): self._check(offset, 4); self.device.mmio_write(self.bar, offset, value & 0xFFFFFFFF, 4)
  def read64(self, offset): self._check(offset, 8); return self.device.mmio_read(self.bar, offset, 8)
  def write64(self, offset, value): self._check(offset, 8); self.device.mmio_write(self.bar, offset, value & (2**64 - 1), 8)


class ConfigFile:
  """<sysfs>/bus/pci/devices/<addr>/config opened for read/write."""

  def __init__(self, path, device):
    self.path, self.device, self.fd = path, device, 1000

  def read(self, size=-1, offset=None):
    off = offset or 0
    return bytes(self.device.config[off:off + (len(self.device.config) if size < 0 else size)])

  def write(self, data, offset=None):
    self.device.config_write(offset or 0, bytes(data))
    return len(data)

  def ioctl(self, request, arg): raise OSCallError("ioctl", self.path, 25)
  def mmap(self, *a, **k): raise OSCallError("mmap", self.path, 19)
  def close(self): pass


class _Lock:
  def __init__(self, path): self.path = path
  def release(self): pass


class BnxtMockOS:
  """OS interface with one mock PCI function (device.addr) in its sysfs."""

  def __init__(self, config, seed: int | None = None):
    self.config = config
    self.devices: dict[str, object] = {}
    self._rng = random.Random(seed)
    self._maps: dict[int, tuple[mmap.mmap, int]] = {}     # va -> (mapping, size)
    self._phys: dict[int, int] = {}                      # physical page -> host page
    self._virt: dict[int, int] = {}                      # host page -> physical page
    self._lock = threading.Lock()

  # ---- PCI functions
  def add_device(self, device) -> None:
    self.devices[device.addr] = device
    device.attach(self)

  def _dev_of(self, path: str):
    parts = path.strip("/").split("/")
    if len(parts) >= 4 and parts[:3] == ["bus", "pci", "devices"] and parts[3] in self.devices:
      return self.devices[parts[3]], "/".join(parts[4:])
    return None, None

  def _rel(self, path: str) -> str:
    root = self.config.sysfs_root.rstrip("/")
    return path[len(root):] if path.startswith(root + "/") else path

  # ---- sysfs
  def sysfs_list(self, path):
    if path.strip("/") == "bus/pci/devices": return sorted(self.devices)
    dev, attr = self._dev_of(path)
    if dev is not None and attr == "": return sorted(dev.sysfs_files())
    raise OSCallError("listdir", path, 2)

  def sysfs_read(self, path):
    dev, attr = self._dev_of(path)
    files = dev.sysfs_files() if dev is not None else {}
    if attr not in files: raise OSCallError("read", path, 2)
    return files[attr]

  def sysfs_read_bytes(self, path, size=-1, offset=0):
    dev, attr = self._dev_of(path)
    if dev is not None and attr == "config":
      end = len(dev.config) if size < 0 else offset + size
      return bytes(dev.config[offset:end])
    return self.sysfs_read(path).encode()[offset:None if size < 0 else offset + size]

  def sysfs_write(self, path, data):
    dev, attr = self._dev_of(path)
    if dev is None or attr not in dev.sysfs_files(): raise OSCallError("write", path, 2)
    dev.sysfs_write(attr, data if isinstance(data, str) else bytes(data).decode())

  def sysfs_exists(self, path):
    if path.strip("/") in ("bus/pci/devices", "bus/pci"): return True
    dev, attr = self._dev_of(path)
    return dev is not None and (attr == "" or attr in dev.sysfs_files())

  def sysfs_readlink(self, path): raise OSCallError("readlink", path, 2)
  def proc_list(self, path=""): return []
  def proc_read(self, path): raise OSCallError("read", path, 2)
  def proc_readlink(self, path): raise OSCallError("readlink", path, 2)

  def open(self, path, flags=0, mode=0o666):
    dev, attr = self._dev_of(self._rel(path))
    if dev is not None and attr == "config": return ConfigFile(path, dev)
    raise OSCallError("open", path, 2)

  def exists(self, path):
    dev, attr = self._dev_of(self._rel(path))
    return dev is not None

  def map_mmio(self, path, size, offset=0, name=""):
    dev, attr = self._dev_of(self._rel(path))
    if dev is None or not attr.startswith("resource") or not attr[len("resource"):].isdigit():
      raise OSCallError("mmap", path, 19)
    bar = int(attr[len("resource"):])
    if offset: raise OSCallError("mmap", path, 22, "the mock maps whole BARs")
    if size > dev.bar_sizes.get(bar, 0): raise OSCallError("mmap", path, 22, f"{size:#x} bytes exceed BAR {bar}")
    return BarView(dev, bar, size, name or f"{dev.addr} BAR{bar}")

  # ---- memory
  def alloc_anon(self, size, addr=None, prot=None, shared=False, reserve_only=False):
    if addr is not None: raise OSCallError("mmap", "anonymous", 22, "the mock places mappings itself")
    size = (size + PAGE - 1) // PAGE * PAGE
    m = mmap.mmap(-1, size)
    va = ctypes.addressof(ctypes.c_char.from_buffer(m))
    with self._lock:
      self._maps[va] = (m, size)
      for off in range(0, size, PAGE):
        while True:   # deliberately scattered page frames above 4 GiB
          pa = self._rng.randrange(0x100000, 0x4000000) * PAGE
          if pa not in self._phys: break
        self._phys[pa] = va + off
        self._virt[va + off] = pa
    return va

  def free_anon(self, addr, size):
    with self._lock:
      m, msize = self._maps.pop(addr, (None, 0))
      for off in range(0, msize, PAGE):
        pa = self._virt.pop(addr + off, None)
        self._phys.pop(pa, None)

  def phys_addrs(self, addr, size):
    out = []
    for page in range(addr & ~(PAGE - 1), addr + size, PAGE):
      if page not in self._virt: raise OSCallError("pagemap", f"{page:#x}", 14, "not mapped by alloc_anon")
      out.append(self._virt[page])
    return out

  def memview(self, addr, size):
    return memoryview((ctypes.c_char * size).from_address(addr)).cast("B")

  def memory_barrier(self): pass

  # ---- device side: DMA by physical address
  def _host(self, pa: int, n: int, who: str) -> list[tuple[int, int]]:
    out, pos, end = [], pa, pa + n
    while pos < end:
      page, off = pos & ~(PAGE - 1), pos & (PAGE - 1)
      host = self._phys.get(page)
      if host is None: raise DMAFault(f"{who}: DMA to unmapped physical page", address=pos, kind="IOMMU fault")
      chunk = min(PAGE - off, end - pos)
      out.append((host + off, chunk))
      pos += chunk
    return out

  def dma_read(self, pa: int, n: int, who: str = "device") -> bytes:
    return b"".join(ctypes.string_at(h, c) for h, c in self._host(pa, n, who))

  def dma_write(self, pa: int, data: bytes, who: str = "device") -> None:
    pos = 0
    for h, c in self._host(pa, len(data), who):
      ctypes.memmove(h, data[pos:pos + c], c)
      pos += c

  # ---- misc
  def lock_device(self, kind, pcibus): return _Lock(posixpath.join(self.config.lock_dir, f"{kind}_{pcibus}.lock"))
  def eventfd(self, initval=0): raise DeviceError("the bnxt mock OS has no eventfd")
  def usb_open(self, vendor_id, product_id, index=0): raise DeviceError("the bnxt mock OS has no USB")
  def monotonic(self): return time.monotonic()
  def sleep(self, seconds): time.sleep(seconds)

  def close(self):
    for dev in self.devices.values(): dev.close()
