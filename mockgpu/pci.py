"""PCI functions of a MockOS: configuration space, BARs and the sysfs files Linux shows for them.

A device model (a GPU's PCI side, a NIC) subclasses PCIFunction or fills one in: ids, BARs (a register window whose
accesses call the model, or plain host memory such as VRAM), capabilities, and hooks for enable/reset/config writes.
MockOS.add_pci_function() publishes it as /sys/bus/pci/devices/<addr> -> /sys/devices/pci<dom>:<bus>/<addr> with
the files of Documentation/ABI/testing/sysfs-bus-pci: vendor device class revision subsystem_vendor subsystem_device
config resource resourceN enable reset remove driver numa_node irq power_state driver_override.

Configuration space offsets: include/uapi/linux/pci_regs.h (PCI_VENDOR_ID 0x00, PCI_COMMAND 0x04, PCI_STATUS 0x06,
PCI_CLASS_REVISION 0x08, PCI_HEADER_TYPE 0x0e, PCI_BASE_ADDRESS_0 0x10, PCI_SUBSYSTEM_VENDOR_ID 0x2c,
PCI_SUBSYSTEM_ID 0x2e, PCI_CAPABILITY_LIST 0x34, PCI_INTERRUPT_LINE 0x3c, PCI_STATUS_CAP_LIST 0x10,
PCI_BASE_ADDRESS_MEM_TYPE_64 0x04, PCI_BASE_ADDRESS_MEM_PREFETCH 0x08, PCI_BASE_ADDRESS_SPACE_IO 0x01).
"""
from __future__ import annotations

import errno
import struct
import threading

from ..drivers.system.interface import MMIOView
from ..drivers.system.pciaddr import parse, validate
from ..errors import DeviceError, OSCallError

# include/linux/ioport.h resource flags, as the `resource` file prints them
IORESOURCE_IO, IORESOURCE_MEM, IORESOURCE_PREFETCH, IORESOURCE_MEM_64 = 0x100, 0x200, 0x2000, 0x00100000
RESOURCE_LINES = 13   # 6 BARs, the ROM, 6 SR-IOV BARs: what pci-sysfs.c prints for an endpoint with CONFIG_PCI_IOV
CONFIG_SIZE = 4096
PCI_COMMAND, PCI_STATUS, PCI_CAPABILITY_LIST, PCI_STATUS_CAP_LIST = 0x04, 0x06, 0x34, 0x10
PCI_COMMAND_MEMORY, PCI_COMMAND_MASTER = 0x2, 0x4


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
    if self.io: return 0x1
    return (0x4 if self.is_64 else 0) | (0x8 if self.prefetchable else 0)

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
    self._next_cap = 0x40
    self.os = None
    struct.pack_into("<HH", self.config, 0, vendor, device)
    struct.pack_into("<I", self.config, 0x08, (class_code << 8) | revision)
    struct.pack_into("<HH", self.config, 0x2C, subsystem_vendor, subsystem_device)
    self.config[0x3D] = 1          # interrupt pin INTA

  @property
  def domain_bus(self) -> str:
    dom, bus, _, _ = parse(self.addr)
    return f"{dom:04x}:{bus:02x}"

  @property
  def sysfs_dir(self) -> str: return f"/sys/devices/pci{self.domain_bus}/{self.addr}"

  # ---- building
  def add_bar(self, index: int, view: MMIOView, is_64: bool = True, prefetchable: bool = False, io: bool = False) -> MockBAR:
    if not 0 <= index < 6 or index in self.bars or (index - 1) in self.bars and self.bars[index - 1].is_64:
      raise DeviceError(f"PCI {self.addr}: BAR{index} is taken or out of range")
    if is_64 and index == 5: raise DeviceError(f"PCI {self.addr}: a 64-bit BAR cannot start at BAR5")
    bar = self.bars[index] = MockBAR(index, view, is_64, prefetchable, io)
    self._write_bar_register(index, 0)
    return bar

  def add_capability(self, cap_id: int, body: bytes) -> int:
    """Append a standard capability (id, next pointer, body) to the list; returns its offset."""
    off = self._next_cap
    if off + 2 + len(body) > 0x100: raise DeviceError(f"PCI {self.addr}: no room for capability {cap_id:#x}")
    self.config[off], self.config[off + 1] = cap_id, 0
    self.config[off + 2:off + 2 + len(body)] = body
    if self._cap_tail: self.config[self._cap_tail] = off
    else:
      self.config[PCI_CAPABILITY_LIST] = off
      struct.pack_into("<H", self.config, PCI_STATUS, struct.unpack_from("<H", self.config, PCI_STATUS)[0] | PCI_STATUS_CAP_LIST)
    self._cap_tail = off + 1
    self._next_cap = (off + 2 + len(body) + 3) & ~3
    return off

  # ---- configuration space
  def _write_bar_register(self, index: int, value: int) -> None:
    bar = self.bars[index]
    mask = ~(bar.size - 1) & 0xFFFFFFFF
    struct.pack_into("<I", self.config, 0x10 + 4 * index, (value & mask & ~0xF) | bar.low_bits)

  def config_read(self, offset: int, size: int) -> bytes:
    with self.lock: return bytes(self.config[offset:offset + size])

  def config_write(self, offset: int, data: bytes) -> int:
    """Write bytes into config space; BAR registers keep their size alignment and flag bits (so the all-ones
    sizing protocol works); the ids and class are read-only."""
    with self.lock:
      for i, b in enumerate(data):
        pos = offset + i
        if pos < 0x04 or 0x08 <= pos < 0x0C or 0x2C <= pos < 0x30 or pos >= CONFIG_SIZE: continue
        self.config[pos] = b
      for index, bar in self.bars.items():
        reg = 0x10 + 4 * index
        if offset < reg + 4 and offset + len(data) > reg:
          value = struct.unpack_from("<I", self.config, reg)[0]
          struct.pack_into("<I", self.config, reg, (value & ~(bar.size - 1) & ~0xF & 0xFFFFFFFF) | bar.low_bits)
        if bar.is_64 and offset < reg + 8 and offset + len(data) > reg + 4:
          hi = struct.unpack_from("<I", self.config, reg + 4)[0]
          struct.pack_into("<I", self.config, reg + 4, hi & (~((bar.size - 1) >> 32) & 0xFFFFFFFF))
      self.on_config_write(offset, bytes(data))
    return len(data)

  @property
  def command(self) -> int: return struct.unpack_from("<H", self.config, PCI_COMMAND)[0]

  def assign_bus_addresses(self, allocate) -> None:
    """Give every BAR a bus address from allocate(size) and program the BAR registers with it."""
    for index, bar in sorted(self.bars.items()):
      bar.bus_address = allocate(bar.size, bar.is_64)
      struct.pack_into("<I", self.config, 0x10 + 4 * index, (bar.bus_address & 0xFFFFFFFF) | bar.low_bits)
      if bar.is_64: struct.pack_into("<I", self.config, 0x14 + 4 * index, bar.bus_address >> 32)

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
      bar = self.bars.get(i) if i < 6 else None
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
