"""PCI Express through an ASM24xx bridge (asm24.py): the GPU behind it as a PCI function with the members of
drivers/system/pci.py's PCIDevice that a driver uses (ids, config_read/config_write, enabled/enable, bars()/bar(),
map_bar() -> MMIOView, close()), plus the bridge's windows as the GPU's system memory and a bounded poll of a signal
in them over USB.

The pieces, one job each: the bring-up of the tree behind the bridge (bus numbers, windows, BAR sizes and addresses)
is usbpcisetup.py; a BAR's register view built on TLPs (and what each access costs in USB transfers) tlpmmio.py; the
bridge's SRAM and windows bridgemem.py; the bounded poll poll.py. Copies into VRAM bounced through the SRAM belong to
the AMD USB path (drivers/amd/am/usbstaging.py).
"""
from __future__ import annotations

from ...autogen import pci as regs
from ...errors import DeviceError
from . import asm24, pcie, usbpcisetup
from .bridgemem import SRAM, SYSMEM_SIZE, WINDOWS, SRAMBuffer, Window
from .interface import MMIOView
from .pci import BAR, NUM_BARS, ext_capabilities
from .poll import poll
from .tlpmmio import TLPMMIO
from .usbpcisetup import GPU_BUS

USB_LOCK_DOMAIN = 0xFB00                           # PCI domain of the device locks of GPUs behind bridges (lock_key)


class USBPCIDevice:
  """The PCI function at bus 4 behind an opened bridge. setup() (run by open()) programs the tree; afterwards config
  accesses and BAR views are TLPs. `addr` is the function's address in the bridge's own PCI tree."""

  def __init__(self, os, bridge: asm24.ASM24Bridge, bus: int = GPU_BUS, timeout_s: float | None = None):
    self.os, self.bridge, self.bus = os, bridge, bus
    self.addr = f"0000:{bus:02x}:00.0"
    self.name = f"{bridge.name} {self.addr}"
    self.timeout_s = timeout_s if timeout_s is not None else os.config.timeout_s
    self.poll_us = os.config.amd_usb_poll_us
    self._bars: list[BAR] = [BAR(i, 0, 0, 0) for i in range(NUM_BARS)]
    self.views: list[MMIOView] = []
    self.sram = SRAM(bridge)
    self._sysmem_next = 0
    self.stats: dict = {}
    self.index = 0

  @property
  def lock_key(self) -> tuple[str, str]:
    """The device lock of the GPU behind bridge #index (drivers/system/locks.py): its address in the bridge's tree
    with the PCI domain USB_LOCK_DOMAIN + index, a domain no host bridge of ours has, so that it never collides with
    the host function at the same bus number (hcq-smi shows the holder of that name)."""
    return "am", f"{USB_LOCK_DOMAIN + self.index:04x}{self.addr[4:]}"

  @classmethod
  def open(cls, os, index: int = 0) -> "USBPCIDevice":
    bridge = asm24.ASM24Bridge.open(os, index)
    dev = cls(os, bridge)
    dev.index = index
    try: dev.setup()
    except BaseException:
      bridge.close()
      raise
    return dev

  # ---- configuration space through CfgRd/CfgWr (type 0 on bus 0, type 1 beyond: §5.2)
  def config_read_at(self, bus: int, offset: int, size: int = 4) -> int:
    self._cfg_check(bus, offset, size)
    fmt_type = pcie.CFGRD1 if bus else pcie.CFGRD0
    value = self._cfg_tlp(fmt_type, bus, offset, 0, pcie.byte_enables(offset, size))
    return value >> 8 * (offset & 3) & (1 << 8 * size) - 1

  def config_write_at(self, bus: int, offset: int, value: int, size: int = 4) -> None:
    self._cfg_check(bus, offset, size)
    if not 0 <= value < 1 << 8 * size:
      raise DeviceError(f"{self.bridge.name}: value {value:#x} does not fit a {size}-byte config register at {offset:#x}")
    fmt_type = pcie.CFGWR1 if bus else pcie.CFGWR0
    self._cfg_tlp(fmt_type, bus, offset, value << 8 * (offset & 3), pcie.byte_enables(offset, size))

  def _cfg_check(self, bus: int, offset: int, size: int) -> None:
    if size not in (1, 2, 4) or offset < 0 or offset + size > 4096 or offset % size:
      raise DeviceError(f"{self.bridge.name}: config access of {size} bytes at {offset:#x} on bus {bus} is outside "
                        f"the 4 KiB config space or misaligned")

  def _cfg_tlp(self, fmt_type: int, bus: int, offset: int, value: int, be: int) -> int:
    """A config TLP; a CRS completion (the function is not ready yet, PCIe §2.3.1) is retried until the timeout."""
    address = pcie.config_address(bus, 0, 0, offset & ~3)
    deadline = self.os.monotonic() + self.timeout_s
    while True:
      try: return self.bridge.tlp(fmt_type, address, value, be) or 0
      except asm24.CompletionError as e:
        if e.status != pcie.CPL_CRS or self.os.monotonic() >= deadline: raise
        self.bridge.retries["crs"] += 1
        self.os.sleep(0.001)

  def config_read(self, offset: int, size: int = 4) -> int: return self.config_read_at(self.bus, offset, size)
  def config_write(self, offset: int, value: int, size: int = 4) -> None: self.config_write_at(self.bus, offset, value, size)

  def config_read_bytes(self, offset: int, size: int) -> bytes:
    return b"".join(self.config_read(o, 4).to_bytes(4, "little") for o in range(offset & ~3, offset + size, 4))[offset & 3:][:size]

  # ---- identity
  @property
  def vendor(self) -> int: return self.config_read(regs.PCI_VENDOR_ID, 2)
  @property
  def device(self) -> int: return self.config_read(regs.PCI_DEVICE_ID, 2)
  @property
  def class_code(self) -> int: return self.config_read(regs.PCI_CLASS_REVISION) >> 8
  @property
  def revision(self) -> int: return self.config_read(regs.PCI_CLASS_REVISION, 1)

  @property
  def enabled(self) -> bool: return bool(self.config_read(regs.PCI_COMMAND, 2) & regs.PCI_COMMAND_MEMORY)

  def enable(self) -> None:
    cmd = self.config_read(regs.PCI_COMMAND, 2)
    self.config_write(regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_MEMORY, 2)

  def reset(self) -> None:
    raise DeviceError(f"{self.name}: no function reset through the bridge (power-cycle the link: bridge.power)")

  # ---- bring-up (usbpcisetup.py: what a PCI core would do for this tree)
  def setup(self) -> None:
    """Power the link, number the buses, open the windows, resize and assign the GPU's BARs, enable it."""
    self._bars = usbpcisetup.setup(self)

  def ext_capabilities(self):
    """(id, offset) of every extended capability (drivers/system/pci.py ext_capabilities)."""
    return ext_capabilities(self)

  def resize_largest_bar(self) -> int | None:
    """Set the first Resizable BAR entry to the largest size it supports; returns that size (None: no capability)."""
    return usbpcisetup.resize_largest_bar(self)

  # ---- BARs
  def bars(self) -> list[BAR]: return list(self._bars)

  def bar(self, index: int) -> BAR:
    if not 0 <= index < NUM_BARS: raise DeviceError(f"{self.name}: there is no BAR {index} (0-{NUM_BARS - 1})")
    return self._bars[index]

  def map_bar(self, index: int, size: int | None = None, offset: int = 0) -> TLPMMIO:
    bar = self.bar(index)
    if not bar.is_memory or not bar.size: raise DeviceError(f"{self.name}: BAR {index} is not a memory BAR ({bar!r})")
    size = bar.size - offset if size is None else size
    if offset < 0 or size <= 0 or offset + size > bar.size:
      raise DeviceError(f"{self.name}: window {offset:#x}+{size:#x} is outside BAR {index} of {bar.size:#x} bytes")
    view = TLPMMIO(self.bridge, bar.start + offset, size, f"{self.name} BAR{index}")
    self.views.append(view)
    return view

  # ---- system memory for the GPU: the bridge's windows
  def alloc_sysmem(self, size: int, align: int = 0x1000) -> SRAMBuffer:
    """A buffer in the SRAM below SYSMEM_SIZE (a bump allocator: it lives as long as the device)."""
    start = -(-self._sysmem_next // align) * align
    if size <= 0 or start + size > SYSMEM_SIZE:
      raise DeviceError(f"{self.name}: no room for {size:#x} bytes of system memory in the bridge SRAM "
                        f"({SYSMEM_SIZE - start:#x} of {SYSMEM_SIZE:#x} left)")
    self._sysmem_next = start + size
    return SRAMBuffer(self.sram, start, size, WINDOWS["sram"].bus + start)

  def window(self, name: str) -> Window: return WINDOWS[name]

  def read_window(self, name: str, offset: int, size: int) -> bytes:
    """Bytes of an XDATA window (a000, b000, b800: signals, small queues) as the host sees them."""
    w = WINDOWS[name]
    if offset < 0 or offset + size > w.size: raise DeviceError(f"{self.name}: {name} window read of {size} at {offset:#x} is outside {w.size:#x}")
    return self.bridge.xdata_read(w.xdata + offset, size)

  def write_window(self, name: str, offset: int, data: bytes) -> None:
    w = WINDOWS[name]
    if offset < 0 or offset + len(data) > w.size: raise DeviceError(f"{self.name}: {name} window write of {len(data)} at {offset:#x} is outside {w.size:#x}")
    self.bridge.xdata_write(w.xdata + offset, data)

  def wait_signal(self, window: str, offset: int, expected: int, timeout_s: float | None = None, what: str | None = None) -> int:
    """Poll a 32-bit signal in a window over USB until it reaches `expected`, AMD_USB_POLL_US (Config.amd_usb_poll_us)
    between polls, the value that ends the wait read twice (the controller reads XDATA byte by byte: poll's torn);
    hcq.Timeout names the signal, the expected and the last value."""
    what = what or f"{self.name}: signal at {window} window +{offset:#x} (GPU address {WINDOWS[window].bus + offset:#x})"
    read = lambda: int.from_bytes(self.read_window(window, offset, 4), "little")
    return poll(read, expected, what, self.timeout_s if timeout_s is None else timeout_s, self.poll_us,
                self.os.monotonic, self.os.sleep, self.stats, torn=True)

  def close(self) -> None:
    self.views = []
    if self.bridge is not None:
      self.bridge.close()
      self.bridge = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
  def __repr__(self): return f"USBPCIDevice({self.name})"

