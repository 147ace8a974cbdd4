"""PCIDevice: one PCI function seen through sysfs (<sysfs>/bus/pci/devices/<address>/), reached only through an
OSInterface object, so that a fake sysfs tree or the mock can stand in for the machine.

The sysfs files used (Documentation/ABI/testing/sysfs-bus-pci in the Linux source):
  vendor, device, class, revision, subsystem_vendor, subsystem_device   hex values, one a line
  config      the configuration space (256 or 4096 bytes; non-root readers see only the first 64)
  enable      "1" enables the function (memory decoding, bus mastering follow the driver)
  resource    one line a resource: "start end flags" in hex (BARs 0-5, then the expansion ROM, then bridge windows)
  resourceN   mmap()able memory BAR N
  reset       writing "1" resets the function (FLR or whatever reset method the kernel picked)
  driver      link to the bound driver (bus/pci/drivers/<name>); driver/unbind and drivers/<name>/bind take the address
"""
from __future__ import annotations

import errno
import mmap as _mmap
import os as _os
import posixpath
import re
import warnings
from typing import Iterable

from ...autogen import pci as regs
from ...autogen.pci import PCI_STD_NUM_BARS
from ...errors import DeviceError, OSCallError
from .interface import MMIOView
from .pciaddr import is_valid, validate

DEVICES = "bus/pci/devices"
DRIVERS = "bus/pci/drivers"

# include/linux/ioport.h: resource flags as the kernel prints them in the `resource` file
IORESOURCE_IO, IORESOURCE_MEM, IORESOURCE_PREFETCH, IORESOURCE_MEM_64 = 0x100, 0x200, 0x2000, 0x00100000
NUM_BARS = PCI_STD_NUM_BARS  # include/uapi/linux/pci_regs.h: PCI_BASE_ADDRESS_0..5

_DRIVER_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class BAR:
  """One line of the `resource` file."""

  def __init__(self, index: int, start: int, end: int, flags: int):
    self.index, self.start, self.end, self.flags = index, start, end, flags

  @property
  def size(self) -> int: return self.end - self.start + 1 if self.end > self.start else 0
  @property
  def is_memory(self) -> bool: return bool(self.flags & IORESOURCE_MEM)
  @property
  def is_io(self) -> bool: return bool(self.flags & IORESOURCE_IO)
  @property
  def is_64bit(self) -> bool: return bool(self.flags & IORESOURCE_MEM_64)
  @property
  def prefetchable(self) -> bool: return bool(self.flags & IORESOURCE_PREFETCH)

  def __repr__(self):
    kind = "mem" if self.is_memory else "io" if self.is_io else "none"
    return f"BAR{self.index}({kind} {self.start:#x} size={self.size:#x})"


def capabilities(dev):
  """(id, offset) of every standard capability of a function (dev: anything with config_read(offset, size)), in list
  order; a list that loops or points into the header ends the walk (PCI 3.0 §6.7)."""
  if not dev.config_read(regs.PCI_STATUS, 2) & regs.PCI_STATUS_CAP_LIST: return
  off, seen = dev.config_read(regs.PCI_CAPABILITY_LIST, 1) & 0xFC, set()
  while off >= regs.PCI_STD_HEADER_SIZEOF and off not in seen:
    seen.add(off)
    yield dev.config_read(off + regs.PCI_CAP_LIST_ID, 1), off
    off = dev.config_read(off + regs.PCI_CAP_LIST_NEXT, 1) & 0xFC


def ext_capabilities(dev):
  """(id, offset) of every extended capability (PCIe §7.6.3: id 15:0, version 19:16, next 31:20, from 0x100)."""
  off, seen = regs.PCI_CFG_SPACE_SIZE, set()
  while off >= regs.PCI_CFG_SPACE_SIZE and off not in seen:
    seen.add(off)
    header = dev.config_read(off, 4)
    if header in (0, 0xFFFFFFFF): return
    yield header & 0xFFFF, off
    off = header >> 20 & 0xFFC


def _class_matches(code: int, cls: int) -> bool:
  """cls up to 0xff compares the base class, up to 0xffff base class and subclass, else the full 24-bit code."""
  if cls <= 0xFF: return code >> 16 == cls
  if cls <= 0xFFFF: return code >> 8 == cls
  return code == cls


class PCIDevice:
  """A PCI function at a validated address, e.g. PCIDevice(os, "0000:03:00.0")."""

  def __init__(self, os, addr: str):
    self.os, self.addr = os, validate(addr)
    self._config_file = None
    self._ids: dict[str, int] = {}

  # ---- discovery
  @staticmethod
  def enumerate(os, vendor: int | None = None, device: int | Iterable[int] | None = None,
                cls: int | None = None, on_error=None) -> list["PCIDevice"]:
    """Every PCI function under <sysfs>/bus/pci/devices, sorted by address, filtered by vendor id, device id (one
    or several) and class (see _class_matches). Names that are not PCI addresses are skipped with a warning.

    A function whose ids the filters need cannot be read (unreadable, or removed meanwhile) raises DeviceError,
    unless on_error is given: then on_error(address, error) is called and the scan goes on with the others."""
    devices = {device} if isinstance(device, int) else set(device) if device is not None else None
    out = []
    for name in sorted(os.sysfs_list(DEVICES)):
      if not is_valid(name):
        warnings.warn(f"{DEVICES}/{name!r}: not a PCI address, skipped")
        continue
      dev = PCIDevice(os, name)
      try:
        if vendor is not None and dev.vendor != vendor: continue
        if devices is not None and dev.device not in devices: continue
        if cls is not None and not _class_matches(dev.class_code, cls): continue
      except DeviceError as e:
        if on_error is None: raise
        on_error(name, e)
        continue
      out.append(dev)
    return out

  # ---- identity (sysfs attributes in hex)
  def resource_path(self, index: int) -> str:
    """The sysfs file of memory BAR `index`, absolute (what os.map_pci_resource and os.export_bar_dmabuf take)."""
    return self._abs(f"resource{index}")

  def _path(self, name: str = "") -> str: return posixpath.join(DEVICES, self.addr, name) if name else f"{DEVICES}/{self.addr}"

  def _hex_attr(self, name: str) -> int:
    if name not in self._ids:
      try: text = self.os.sysfs_read(self._path(name)).strip()
      except OSCallError as e:
        # the first read of a function's ids is where an address that names no function shows
        if e.errno == errno.ENOENT and not self.os.sysfs_exists(self._path()):
          raise DeviceError(f"no PCI function {self.addr} (nothing at {self._path()})") from None
        raise
      try: self._ids[name] = int(text, 16)
      except ValueError: raise DeviceError(f"PCI {self.addr}: {name} reads {text!r}, not a hex number") from None
    return self._ids[name]

  @property
  def vendor(self) -> int: return self._hex_attr("vendor")
  @property
  def device(self) -> int: return self._hex_attr("device")
  @property
  def class_code(self) -> int: return self._hex_attr("class")
  @property
  def revision(self) -> int: return self._hex_attr("revision")
  @property
  def subsystem_vendor(self) -> int: return self._hex_attr("subsystem_vendor")
  @property
  def subsystem_device(self) -> int: return self._hex_attr("subsystem_device")

  def attr(self, name: str) -> str:
    """Any other sysfs attribute of the function as text (e.g. 'power_state', 'gpu_busy_percent')."""
    return self.os.sysfs_read(self._path(name)).strip()

  def has_attr(self, name: str) -> bool: return self.os.sysfs_exists(self._path(name))

  def write_attr(self, name: str, text: str) -> None:
    """Write a sysfs attribute of the function (e.g. 'power/control')."""
    self.os.sysfs_write(self._path(name), text)

  # ---- configuration space
  def config_read_bytes(self, offset: int, size: int) -> bytes:
    if offset < 0 or size < 0 or offset + size > 4096:
      raise DeviceError(f"PCI {self.addr}: config read of {size} bytes at {offset:#x} is outside the 4 KiB config space")
    data = self.os.sysfs_read_bytes(self._path("config"), size, offset)
    if len(data) != size:
      raise DeviceError(f"PCI {self.addr}: config read of {size} bytes at {offset:#x} returned {len(data)} (config "
                        f"space smaller, or not root: unprivileged readers see only the first 64 bytes)")
    return data

  def config_read(self, offset: int, size: int = 4) -> int:
    """A little-endian 1-, 2- or 4-byte config register."""
    if size not in (1, 2, 4): raise DeviceError(f"PCI {self.addr}: config access width {size} is not 1, 2 or 4")
    return int.from_bytes(self.config_read_bytes(offset, size), "little")

  def config_write(self, offset: int, value: int, size: int = 4) -> None:
    if size not in (1, 2, 4): raise DeviceError(f"PCI {self.addr}: config access width {size} is not 1, 2 or 4")
    if offset < 0 or offset + size > 4096 or offset % size:
      raise DeviceError(f"PCI {self.addr}: config write of {size} bytes at {offset:#x} is outside the config space or misaligned")
    if not 0 <= value < 1 << (8 * size):
      raise DeviceError(f"PCI {self.addr}: value {value:#x} does not fit a {size}-byte config register at {offset:#x}")
    if self._config_file is None:
      self._config_file = self.os.open(self._abs("config"), _os.O_RDWR)
    written = self._config_file.write(value.to_bytes(size, "little"), offset)
    if written != size: raise DeviceError(f"PCI {self.addr}: config write at {offset:#x} wrote {written} of {size} bytes")

  def _abs(self, name: str) -> str:
    return posixpath.join(self.os.config.sysfs_root, DEVICES, self.addr, name)

  # ---- power / enable / reset
  def enable(self) -> None: self.os.sysfs_write(self._path("enable"), "1")
  def disable(self) -> None: self.os.sysfs_write(self._path("enable"), "0")

  @property
  def enabled(self) -> bool: return self.os.sysfs_read(self._path("enable")).strip() not in ("", "0")

  def reset(self) -> None:
    """Function reset through the `reset` file (the kernel picks FLR, PM or bus reset)."""
    if not self.os.sysfs_exists(self._path("reset")):
      raise DeviceError(f"PCI {self.addr}: no reset file in sysfs (the kernel knows no reset method for this function)")
    self.os.sysfs_write(self._path("reset"), "1")

  # ---- BARs
  def bars(self) -> list[BAR]:
    """BARs 0-5 from the `resource` file (unused BARs have size 0)."""
    lines = self.os.sysfs_read(self._path("resource")).splitlines()
    out = []
    for i in range(NUM_BARS):
      if i >= len(lines):
        out.append(BAR(i, 0, 0, 0))
        continue
      try: start, end, flags = (int(x, 16) for x in lines[i].split())
      except ValueError: raise DeviceError(f"PCI {self.addr}: resource line {i} is {lines[i]!r}, not 'start end flags'") from None
      out.append(BAR(i, start, end, flags))
    return out

  def bar(self, index: int) -> BAR:
    if not 0 <= index < NUM_BARS: raise DeviceError(f"PCI {self.addr}: there is no BAR {index} (0-{NUM_BARS - 1})")
    return self.bars()[index]

  def map_bar(self, index: int, size: int | None = None, offset: int = 0) -> MMIOView:
    """An MMIO view of memory BAR `index` (the whole BAR unless size is given; offset must be page-aligned)."""
    bar = self.bar(index)
    if not bar.is_memory or bar.size == 0:
      raise DeviceError(f"PCI {self.addr}: BAR {index} is not a memory BAR ({bar!r})")
    size = bar.size - offset if size is None else size
    if offset < 0 or size <= 0 or offset + size > bar.size:
      raise DeviceError(f"PCI {self.addr}: window {offset:#x}+{size:#x} is outside BAR {index} of {bar.size:#x} bytes")
    if offset % _mmap.PAGESIZE:
      raise DeviceError(f"PCI {self.addr}: BAR {index} window offset {offset:#x} is not a multiple of the page size "
                        f"({_mmap.PAGESIZE:#x}): mmap cannot start there")
    if not self.os.sysfs_exists(self._path(f"resource{index}")):
      raise DeviceError(f"PCI {self.addr}: no resource{index} file in sysfs to map BAR {index}")
    return self.os.map_mmio(self._abs(f"resource{index}"), size, offset, name=f"{self.addr} BAR{index}")

  def map_bar_at(self, index: int, addr: int, size: int, offset: int = 0) -> MMIOView:
    """Memory BAR `index` from `offset` mapped at the fixed process address addr (os.map_pci_resource): CPU-visible
    VRAM at its GPU VA. addr, offset and size page-aligned, the range inside the BAR; errors name them."""
    bar = self.bar(index)
    if not bar.is_memory or bar.size == 0:
      raise DeviceError(f"PCI {self.addr}: BAR {index} is not a memory BAR ({bar!r})")
    if offset < 0 or size <= 0 or offset + size > bar.size:
      raise DeviceError(f"PCI {self.addr}: window {offset:#x}+{size:#x} is outside BAR {index} of {bar.size:#x} bytes")
    if (addr | offset | size) % _mmap.PAGESIZE:
      raise DeviceError(f"PCI {self.addr}: BAR {index} window {offset:#x}+{size:#x} at address {addr:#x} is not "
                        f"page-aligned ({_mmap.PAGESIZE:#x}): mmap cannot place it")
    if not self.os.sysfs_exists(self._path(f"resource{index}")):
      raise DeviceError(f"PCI {self.addr}: no resource{index} file in sysfs to map BAR {index}")
    return self.os.map_pci_resource(self._abs(f"resource{index}"), addr, size, offset, name=f"{self.addr} BAR{index}")

  # ---- drivers
  @property
  def driver(self) -> str | None:
    """Name of the bound kernel driver, None when unbound."""
    if not self.os.sysfs_exists(self._path("driver")): return None
    return posixpath.basename(self.os.sysfs_readlink(self._path("driver")).rstrip("/"))

  def unbind(self) -> None:
    """Detach the bound driver (nothing to do when unbound)."""
    if self.driver is None: return
    self.os.sysfs_write(self._path("driver/unbind"), self.addr)

  def bind(self, driver: str) -> None:
    if not isinstance(driver, str) or not _DRIVER_NAME.fullmatch(driver):
      raise DeviceError(f"PCI {self.addr}: {driver!r} is not a driver name")
    bind = posixpath.join(DRIVERS, driver, "bind")
    if not self.os.sysfs_exists(bind): raise DeviceError(f"PCI {self.addr}: no PCI driver {driver!r} is loaded ({bind} missing)")
    self.os.sysfs_write(bind, self.addr)

  def close(self) -> None:
    if self._config_file is not None:
      self._config_file.close()
      self._config_file = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()

  def __repr__(self):
    try: return f"PCIDevice({self.addr} {self.vendor:04x}:{self.device:04x} class {self.class_code:06x})"
    except DeviceError: return f"PCIDevice({self.addr})"
