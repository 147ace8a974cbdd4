"""PCI functions of a MockOS: configuration space, BARs and the sysfs files Linux shows for them.

A device model (a GPU's PCI side, a NIC) subclasses PCIFunction or fills one in: ids, BARs (a register window whose
accesses call the model, or plain host memory such as VRAM), capabilities, and hooks for enable/reset/config writes.
MockOS.add_pci_function() publishes it as /sys/bus/pci/devices/<addr> -> /sys/devices/pci<dom>:<bus>/<addr> with
the files of Documentation/ABI/testing/sysfs-bus-pci: vendor device class revision subsystem_vendor subsystem_device
config resource resourceN enable reset remove driver numa_node irq power_state driver_override.

Configuration space offsets and bits: include/uapi/linux/pci_regs.h, through the generated hcq.autogen.pci.
"""
from __future__ import annotations

import errno
import struct
import threading

from ..autogen import pci as regs
from ..drivers.system.interface import MMIOView
from ..drivers.system.pciaddr import parse, validate
from ..errors import DeviceError, OSCallError

# include/linux/ioport.h resource flags, as the `resource` file prints them
IORESOURCE_IO, IORESOURCE_MEM, IORESOURCE_PREFETCH, IORESOURCE_MEM_64 = 0x100, 0x200, 0x2000, 0x00100000
RESOURCE_LINES = 13   # 6 BARs, the ROM, 6 SR-IOV BARs: what pci-sysfs.c prints for an endpoint with CONFIG_PCI_IOV
CONFIG_SIZE = regs.PCI_CFG_SPACE_EXP_SIZE      # PCI Express: 4 KiB of configuration space


# what a config write leaves as it is: the ids (vendor, device), class and revision, subsystem ids
_READ_ONLY = ((regs.PCI_VENDOR_ID, regs.PCI_COMMAND), (regs.PCI_CLASS_REVISION, regs.PCI_CACHE_LINE_SIZE),
              (regs.PCI_SUBSYSTEM_VENDOR_ID, regs.PCI_ROM_ADDRESS))


def _bar_reg(index: int) -> int: return regs.PCI_BASE_ADDRESS_0 + 4 * index


class WindowMMIO(MMIOView):
  """A sub-window [offset, offset+size) of another MMIO view."""

  def __init__(self, inner: MMIOView, offset: int, size: int, name: str):
    self.inner, self.base, self.size, self.name = inner, offset, size, name

  def read32(self, offset): self._check(offset, 4); return self.inner.read32(self.base + offset)
  def write32(self, offset, value): self._check(offset, 4); self.inner.write32(self.base + offset, value)
  def read64(self, offset): self._check(offset, 8); return self.inner.read64(self.base + offset)
  def write64(self, offset, value): self._check(offset, 8); self.inner.write64(self.base + offset, value)

  def mmap_address(self, addr=None) -> int:
    return self.inner.mmap_address(None if addr is None else addr - self.base) + self.base

  def map_view(self, memory, addr: int, offset: int, size: int, holder, what: str, kind: str = "") -> None:
    if offset < 0 or offset + size > self.size:
      raise OSCallError("mmap", what, errno.EINVAL, f"{offset:#x}+{size:#x} is outside {self.name} ({self.size:#x} bytes)")
    view = getattr(self.inner, "map_view", None)
    if view is None: raise OSCallError("mmap", what, errno.ENODEV, f"{self.name} is not memory that can be mapped")
    view(memory, addr, self.base + offset, size, holder, what, kind)


class MockBAR:
  """One BAR: `view` is the whole BAR as an MMIOView (RegisterMMIO/DoorbellMMIO call the model; MemoryMMIO is plain
  memory). bus_address is the address the BAR is assigned on the (fake) bus."""

  def __init__(self, index: int, view: MMIOView, is_64: bool = True, prefetchable: bool = False, io: bool = False):
    size = view.size
    if size & (size - 1) or size < 16: raise DeviceError(f"BAR{index}: size {size:#x} is not a power of two >= 16")
    self.index, self.view, self.size, self.is_64, self.prefetchable, self.io = index, view, size, is_64, prefetchable, io
    self.bus_address = 0

  @property
  def flags(self) -> int:
    if self.io: return IORESOURCE_IO
    return IORESOURCE_MEM | (IORESOURCE_MEM_64 if self.is_64 else 0) | (IORESOURCE_PREFETCH if self.prefetchable else 0)

  @property
  def low_bits(self) -> int:
    """The read-only low bits of the BAR register: space, type and prefetch."""
    if self.io: return regs.PCI_BASE_ADDRESS_SPACE_IO
    return (regs.PCI_BASE_ADDRESS_MEM_TYPE_64 if self.is_64 else 0) | \
      (regs.PCI_BASE_ADDRESS_MEM_PREFETCH if self.prefetchable else 0)

  def window(self, size: int, offset: int, name: str) -> MMIOView:
    if offset < 0 or size <= 0 or offset + size > self.size:
      raise OSCallError("mmap", name, errno.EINVAL, f"window {offset:#x}+{size:#x} is outside BAR{self.index} of "
                        f"{self.size:#x} bytes")
    if offset == 0 and size == self.size: return self.view
    return WindowMMIO(self.view, offset, size, f"{name}+{offset:#x}")


class PCIFunction:
  """One PCI function. Override on_enable/on_reset/on_config_write/on_bind/on_unbind in a device model."""

  def __init__(self, addr: str, vendor: int, device: int, class_code: int, revision: int = 0,
               subsystem_vendor: int = 0, subsystem_device: int = 0, driver: str | None = None, numa_node: int = -1,
               irq: int = 0):
    self.addr = validate(addr)
    self.vendor, self.device, self.class_code, self.revision = vendor, device, class_code, revision
    self.subsystem_vendor, self.subsystem_device = subsystem_vendor, subsystem_device
    self.driver, self.driver_override, self.numa_node, self.irq = driver, "", numa_node, irq
    self.bars: dict[int, MockBAR] = {}
    self.enabled = False
    self.lock = threading.RLock()
    self.config = bytearray(CONFIG_SIZE)
    self._cap_tail = 0            # offset of the last capability's next pointer
    self._next_cap = regs.PCI_STD_HEADER_SIZEOF   # capabilities follow the standard header
    self.os = None
    struct.pack_into("<HH", self.config, regs.PCI_VENDOR_ID, vendor, device)
    struct.pack_into("<I", self.config, regs.PCI_CLASS_REVISION, (class_code << 8) | revision)
    struct.pack_into("<HH", self.config, regs.PCI_SUBSYSTEM_VENDOR_ID, subsystem_vendor, subsystem_device)
    self.config[regs.PCI_INTERRUPT_PIN] = 1          # interrupt pin INTA

  @property
  def domain_bus(self) -> str:
    dom, bus, _, _ = parse(self.addr)
    return f"{dom:04x}:{bus:02x}"

  @property
  def sysfs_dir(self) -> str: return f"/sys/devices/pci{self.domain_bus}/{self.addr}"

  # ---- building
  def add_bar(self, index: int, view: MMIOView, is_64: bool = True, prefetchable: bool = False, io: bool = False) -> MockBAR:
    if not 0 <= index < regs.PCI_STD_NUM_BARS or index in self.bars or (index - 1) in self.bars and self.bars[index - 1].is_64:
      raise DeviceError(f"PCI {self.addr}: BAR{index} is taken or out of range")
    if is_64 and index == 5: raise DeviceError(f"PCI {self.addr}: a 64-bit BAR cannot start at BAR5")
    bar = self.bars[index] = MockBAR(index, view, is_64, prefetchable, io)
    self._write_bar_register(index, 0)
    return bar

  def add_capability(self, cap_id: int, body: bytes) -> int:
    """Append a standard capability (id, next pointer, body) to the list; returns its offset."""
    off = self._next_cap
    if off + 2 + len(body) > regs.PCI_CFG_SPACE_SIZE: raise DeviceError(f"PCI {self.addr}: no room for capability {cap_id:#x}")
    self.config[off + regs.PCI_CAP_LIST_ID], self.config[off + regs.PCI_CAP_LIST_NEXT] = cap_id, 0
    self.config[off + 2:off + 2 + len(body)] = body
    if self._cap_tail: self.config[self._cap_tail] = off
    else:
      self.config[regs.PCI_CAPABILITY_LIST] = off
      status = struct.unpack_from("<H", self.config, regs.PCI_STATUS)[0]
      struct.pack_into("<H", self.config, regs.PCI_STATUS, status | regs.PCI_STATUS_CAP_LIST)
    self._cap_tail = off + regs.PCI_CAP_LIST_NEXT
    self._next_cap = (off + 2 + len(body) + 3) & ~3
    return off

  # ---- configuration space
  def _write_bar_register(self, index: int, value: int) -> None:
    bar = self.bars[index]
    mask = ~(bar.size - 1) & 0xFFFFFFFF
    struct.pack_into("<I", self.config, _bar_reg(index), (value & mask & regs.PCI_BASE_ADDRESS_MEM_MASK) | bar.low_bits)

  def config_read(self, offset: int, size: int) -> bytes:
    with self.lock: return bytes(self.config[offset:offset + size])

  def config_write(self, offset: int, data: bytes) -> int:
    """Write bytes into config space; BAR registers keep their size alignment and flag bits (so the all-ones
    sizing protocol works); the ids and class are read-only."""
    with self.lock:
      for i, b in enumerate(data):
        pos = offset + i
        if pos >= CONFIG_SIZE or any(lo <= pos < hi for lo, hi in _READ_ONLY): continue
        self.config[pos] = b
      for index in range(regs.PCI_STD_NUM_BARS):   # a BAR register with no BAR behind it is hardwired to 0
        upper = index - 1 in self.bars and self.bars[index - 1].is_64
        if index not in self.bars and not upper and offset < _bar_reg(index) + 4 and offset + len(data) > _bar_reg(index):
          struct.pack_into("<I", self.config, _bar_reg(index), 0)
      for index, bar in self.bars.items():
        reg = _bar_reg(index)
        if offset < reg + 4 and offset + len(data) > reg:
          value = struct.unpack_from("<I", self.config, reg)[0]
          struct.pack_into("<I", self.config, reg, (value & ~(bar.size - 1) & regs.PCI_BASE_ADDRESS_MEM_MASK & 0xFFFFFFFF) | bar.low_bits)
        if bar.is_64 and offset < reg + 8 and offset + len(data) > reg + 4:
          hi = struct.unpack_from("<I", self.config, reg + 4)[0]
          struct.pack_into("<I", self.config, reg + 4, hi & (~((bar.size - 1) >> 32) & 0xFFFFFFFF))
      self.on_config_write(offset, bytes(data))
    return len(data)

  @property
  def command(self) -> int: return struct.unpack_from("<H", self.config, regs.PCI_COMMAND)[0]

  def assign_bus_addresses(self, allocate) -> None:
    """Give every BAR a bus address from allocate(size) and program the BAR registers with it."""
    for index, bar in sorted(self.bars.items()):
      bar.bus_address = allocate(bar.size, bar.is_64)
      struct.pack_into("<I", self.config, _bar_reg(index), (bar.bus_address & 0xFFFFFFFF) | bar.low_bits)
      if bar.is_64: struct.pack_into("<I", self.config, _bar_reg(index) + 4, bar.bus_address >> 32)

  # ---- hooks for device models
  def on_enable(self, enabled: bool) -> None: pass
  def on_reset(self) -> None: pass
  def on_config_write(self, offset: int, data: bytes) -> None: pass
  def on_bind(self, driver: str) -> None: pass
  def on_unbind(self, driver: str) -> None: pass

  # ---- sysfs
  def resource_text(self) -> str:
    lines = []
    for i in range(RESOURCE_LINES):
      bar = self.bars.get(i) if i < regs.PCI_STD_NUM_BARS else None
      if bar is None: lines.append("0x%016x 0x%016x 0x%016x" % (0, 0, 0))
      else: lines.append("0x%016x 0x%016x 0x%016x" % (bar.bus_address, bar.bus_address + bar.size - 1, bar.flags))
    return "\n".join(lines) + "\n"

  def sysfs_files(self) -> dict:
    """name -> DataFile keyword arguments (see vfs.DataFile) for the function's directory."""
    def hexattr(width, value): return lambda: f"0x{value:0{width}x}\n"

    def set_enable(data: bytes):
      text = data.decode(errors="replace").strip()
      if text not in ("0", "1"): raise OSCallError("write", f"{self.sysfs_dir}/enable", errno.EINVAL, repr(text))
      self.enabled = text == "1"
      self.on_enable(self.enabled)

    def do_reset(data: bytes):
      if data.decode(errors="replace").strip() != "1":
        raise OSCallError("write", f"{self.sysfs_dir}/reset", errno.EINVAL, "write 1 to reset")
      self.on_reset()

    def set_override(data: bytes): self.driver_override = data.decode(errors="replace").strip()

    files = {
      "vendor": dict(read=hexattr(4, self.vendor)), "device": dict(read=hexattr(4, self.device)),
      "class": dict(read=hexattr(6, self.class_code)), "revision": dict(read=hexattr(2, self.revision)),
      "subsystem_vendor": dict(read=hexattr(4, self.subsystem_vendor)),
      "subsystem_device": dict(read=hexattr(4, self.subsystem_device)),
      "config": dict(read_at=lambda size, off: self.config_read(off, size), write_at=lambda data, off: self.config_write(off, data)),
      "resource": dict(read=self.resource_text),
      "enable": dict(read=lambda: "1\n" if self.enabled else "0\n", write=set_enable),
      "reset": dict(write=do_reset, mode=0o200),
      "numa_node": dict(read=lambda: f"{self.numa_node}\n"), "irq": dict(read=lambda: f"{self.irq}\n"),
      "power_state": dict(read=lambda: "D0\n"),
      "driver_override": dict(read=lambda: (self.driver_override or "(null)") + "\n", write=set_override),
    }
    for index, bar in self.bars.items():
      files[f"resource{index}"] = dict(mmio=lambda size, off, path, bar=bar: bar.window(size, off, path), mode=0o600)
    return files
