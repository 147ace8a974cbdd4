"""The ASM24xx bridge with the custom firmware, as the host sees it through its vendor requests (the protocol is
described in drivers/system/asm24.py), and the PCIe tree behind it:
four bridges on buses 0..3 and one endpoint function (a mockgpu.pci.PCIFunction: config space + BARs) at bus 4.

What the model checks as hardware would: a type 1 config request reaches bus N only through bridges whose secondary/
subordinate numbers cover N, a memory request only when it falls in every bridge's memory windows, the endpoint
decodes memory (PCI_COMMAND_MEMORY) and one of its BARs (as programmed in its config space) covers the address;
otherwise the completion says unsupported request. The GPU reaches the bridge's windows (SRAM at 0x200000 ...)
through dma_read/dma_write, the path a device model's engines use for "system memory".
"""
from __future__ import annotations

import collections
import ctypes
import struct

from ...autogen import pci as regs
from ...drivers.system import pcie
from ...drivers.system.mmio import MappedMMIO

SECTOR, SLOT, SRAM_SIZE = 512, 16 << 10, 512 << 10
# Bursts announced (0xF0 modes 1/2, 0xF2) and not yet moved that the firmware holds, and so the bulk transfers that may
# be in flight per bulk endpoint (asyncengine.py). The custom firmware's own limit is not published: the
# hardware-proven client has two announced at once (tinygrad 0.14 runtime/ops_amd.py, USB copy-in: the next chunk's
# 0xF2 arm while the previous chunk's bulk OUT is in flight); the mock allows 4, its own stated choice, so that a host
# depth above 2 can be measured here, and refuses a fifth by name.
QUEUE_DEPTH = 4
LTSSM_STATE, LTSSM_L0 = 0xB450, 0x78
BRIDGE_VENDOR, BRIDGE_DEVICE = 0x1B21, 0x2464   # ASMedia; the device id is the mock's own, not a verified one
# (name, XDATA address, GPU bus address, size); sram's XDATA view is its first 4 KiB
WINDOWS = (("sram", 0xF000, 0x200000, SRAM_SIZE), ("a000", 0xA000, 0x820000, 4 << 10), ("b000", 0xB000, 0x800000, 512),
           ("b800", 0xB800, 0x822000, 4 << 10))


class TLPFault(Exception):
  """Raised inside the model: the TLP completes with this status (pcie.CPL_*)."""

  def __init__(self, status: int): self.status = status


class BridgeConfig:
  """A type 1 (bridge) config header: ids, class 0x0604, header type 1; everything else is plain storage."""

  def __init__(self, bus: int):
    self.bus = bus
    self.config = bytearray(4096)
    struct.pack_into("<HH", self.config, regs.PCI_VENDOR_ID, BRIDGE_VENDOR, BRIDGE_DEVICE)
    struct.pack_into("<I", self.config, regs.PCI_CLASS_REVISION, 0x060400 << 8)
    self.config[regs.PCI_HEADER_TYPE] = 1

  def config_read(self, offset: int, size: int) -> bytes: return bytes(self.config[offset:offset + size])

  def config_write(self, offset: int, data: bytes) -> None:
    for i, b in enumerate(data):
      if offset + i >= regs.PCI_COMMAND: self.config[offset + i] = b   # ids are read-only

  def u16(self, off): return struct.unpack_from("<H", self.config, off)[0]
  def u32(self, off): return struct.unpack_from("<I", self.config, off)[0]

  def routes_bus(self, bus: int) -> bool:
    return self.config[regs.PCI_SECONDARY_BUS] <= bus <= self.config[regs.PCI_SUBORDINATE_BUS] and \
      self.config[regs.PCI_SECONDARY_BUS] > self.bus

  def routes_memory(self, addr: int, size: int) -> bool:
    if not self.u16(regs.PCI_COMMAND) & regs.PCI_COMMAND_MEMORY: return False
    mem = (self.u16(regs.PCI_MEMORY_BASE) & 0xFFF0) << 16, (self.u16(regs.PCI_MEMORY_LIMIT) & 0xFFF0) << 16 | 0xFFFFF
    pref = ((self.u16(regs.PCI_PREF_MEMORY_BASE) & 0xFFF0) << 16 | self.u32(regs.PCI_PREF_BASE_UPPER32) << 32,
            (self.u16(regs.PCI_PREF_MEMORY_LIMIT) & 0xFFF0) << 16 | 0xFFFFF | self.u32(regs.PCI_PREF_LIMIT_UPPER32) << 32)
    return any(lo <= addr and addr + size - 1 <= hi for lo, hi in (mem, pref))


class ASM24Firmware:
  """The bridge's state and its vendor requests. `counts` tallies what the host asked (tlps, xdata reads per address,
  dma arms); `faults` (config.parse_usb_faults) makes chosen TLPs fail (see backend.py for transfer faults)."""

  def __init__(self, endpoint, monotonic=None, memory=None):
    """memory: the MockOS's HostMemory; the windows of whole pages are then memory files (window_file), which a mock
    GPU's MMU can view at the VAs its page tables map to their bus addresses (its DMA into the bridge)."""
    self.endpoint = endpoint
    self.xdata = bytearray(0x10000)
    self.files: dict[str, tuple[int, int, int]] = {}      # name -> (memory file, bus address, size)
    self.windows = {name: (xd, bus, self._window_memory(memory, name, bus, size)) for name, xd, bus, size in WINDOWS}
    self.bridges = [BridgeConfig(b) for b in range(4)]
    self.powered = False
    self.completion = bytes(8)
    self.queued: collections.deque = collections.deque()   # the bulk transfers requests announced, in order
    self.queue_depth = QUEUE_DEPTH
    self.counts: collections.Counter = collections.Counter()
    self.xdata_reads: collections.Counter = collections.Counter()
    self.tlp_faults: dict = {}
    self.tlp_number = 0
    if hasattr(endpoint, "attach_bridge"): endpoint.attach_bridge(self)

  def _window_memory(self, memory, name: str, bus: int, size: int):
    if memory is None or size % 4096: return bytearray(size)
    addr, fd = memory.alloc_file(size, what=f"mock ASM24 bridge {name} window")
    self.files[name] = (fd, bus, size)
    return memoryview((ctypes.c_ubyte * size).from_address(addr)).cast("B")

  def window_file(self, bus_addr: int, size: int) -> tuple[int, int] | None:
    """(memory file, offset) of the window holding bus addresses [bus_addr, bus_addr+size), None if none does."""
    for fd, bus, wsize in self.files.values():
      if bus <= bus_addr and bus_addr + size <= bus + wsize: return fd, bus_addr - bus
    return None

  # ---- XDATA: registers plus the small windows (and the first 4 KiB of SRAM at 0xF000)
  def _xdata_window(self, addr: int):
    for name, (xd, _, mem) in self.windows.items():
      size = min(len(mem), 0x10000 - xd, 4096 if name == "sram" else len(mem))
      if xd <= addr < xd + size: return mem, addr - xd
    return self.xdata, addr

  def xdata_read(self, addr: int, size: int) -> bytes:
    self.xdata_reads[addr] += 1
    self.tick()
    return bytes(self._xdata_byte(addr + i) for i in range(size))

  def _xdata_byte(self, addr: int) -> int:
    mem, off = self._xdata_window(addr)
    return mem[off]

  def xdata_write(self, addr: int, value: int) -> None:
    mem, off = self._xdata_window(addr)
    mem[off] = value & 0xFF

  def power(self, on: bool) -> None:
    self.powered = on
    self.xdata[LTSSM_STATE] = LTSSM_L0 if on else 0

  # ---- the DMA path of the GPU into the bridge's windows
  def _window_at(self, bus_addr: int, size: int):
    for name, (_, bus, mem) in self.windows.items():
      if bus <= bus_addr and bus_addr + size <= bus + len(mem): return mem, bus_addr - bus
    return None, 0

  def dma_read(self, bus_addr: int, size: int) -> bytes:
    mem, off = self._window_at(bus_addr, size)
    if mem is None: raise TLPFault(pcie.CPL_UR)
    return bytes(mem[off:off + size])

  def dma_write(self, bus_addr: int, data: bytes) -> None:
    mem, off = self._window_at(bus_addr, len(data))
    if mem is None: raise TLPFault(pcie.CPL_UR)
    mem[off:off + len(data)] = data

  def tick(self) -> None:
    """Time passes for the endpoint (its timers, engines) at every host request."""
    if hasattr(self.endpoint, "tick"): self.endpoint.tick()

  # ---- TLPs
  def _next_tlp_fault(self, posted: bool) -> int | None:
    """The injected fault of this TLP (posted writes carry no completion, so they take none)."""
    if posted: return None
    self.tlp_number += 1
    for kind, status in (("transport", -1), ("ur", pcie.CPL_UR), ("crs", pcie.CPL_CRS), ("ca", pcie.CPL_CA)):
      if self.tlp_number in self.tlp_faults.get(kind, ()): return status
    return None

  def _complete(self, data: int, status: int = pcie.CPL_SC, transport: int = 0) -> None:
    self.completion = struct.pack("<I", data & 0xFFFFFFFF) + bytes([status << 5, 0, 0, transport])

  def _route_config(self, fmt_type: int, address: int):
    bus, dev, fn, reg = pcie.split_config_address(address)
    if not self.powered: raise TLPFault(pcie.CPL_UR)
    if (bus == 0) != (fmt_type & 0x1F == pcie.TYPE_CFG0) or dev or fn: raise TLPFault(pcie.CPL_UR)
    if any(not self.bridges[b].routes_bus(bus) for b in range(min(bus, 4))): raise TLPFault(pcie.CPL_UR)
    if bus < 4: return self.bridges[bus], reg
    if bus == 4: return self.endpoint, reg
    raise TLPFault(pcie.CPL_UR)

  def _bar_at(self, addr: int, size: int):
    """(view, offset) of the endpoint BAR that decodes [addr, addr+size)."""
    if not all(b.routes_memory(addr, size) for b in self.bridges): raise TLPFault(pcie.CPL_UR)
    ep = self.endpoint
    if not struct.unpack_from("<H", ep.config, regs.PCI_COMMAND)[0] & regs.PCI_COMMAND_MEMORY: raise TLPFault(pcie.CPL_UR)
    for index, bar in ep.bars.items():
      reg = regs.PCI_BASE_ADDRESS_0 + 4 * index
      base = struct.unpack_from("<I", ep.config, reg)[0] & 0xFFFFFFF0
      if bar.is_64: base |= struct.unpack_from("<I", ep.config, reg + 4)[0] << 32
      if base and base <= addr and addr + size <= base + bar.size: return bar.view, addr - base
    raise TLPFault(pcie.CPL_UR)

  def tlp(self, fmt_type: int, be: int, addr_lo: int, addr_hi: int, value: int) -> None:
    """Mode 0: one TLP, from the request's fields (the header's wire format is tests/usb/test_tlp.py's)."""
    self.counts["tlps"] += 1
    self.tick()
    address = (addr_hi << 32 | addr_lo) & ~3      # Address[1:0] is not on the link: the byte enables say which bytes
    posted = pcie.is_posted(fmt_type)
    fault = self._next_tlp_fault(posted)
    if fault == -1: return self._complete(0, transport=1)
    if fault is not None: return self._complete(0xFFFFFFFF, fault)
    try:
      if pcie.is_config(fmt_type):
        target, reg = self._route_config(fmt_type, address)
        if pcie.has_data(fmt_type):
          lo, n = pcie.be_span(be)
          target.config_write(reg + lo, (value >> 8 * lo).to_bytes(4, "little")[:n])
          return self._complete(0)
        return self._complete(int.from_bytes(target.config_read(reg, 4), "little"))
      if pcie.is_memory(fmt_type):
        view, off = self._bar_at(address, 4)
        if pcie.has_data(fmt_type):
          view.write32(off, value if be == 0xF else pcie.merge_enabled(view.read32(off), value, be))
          return
        return self._complete(view.read32(off))
      raise TLPFault(pcie.CPL_UR)
    except TLPFault as f:
      if not posted: self._complete(0xFFFFFFFF, f.status)

  def stream(self, mode: int, fmt_type: int, addr_lo: int, addr_hi: int, dwords: int) -> None:
    """Modes 1 and 2: a burst of whole dwords, its data on the next bulk transfer."""
    self.counts["tlps"] += 1
    self.tick()
    address = addr_hi << 32 | addr_lo
    self.queued.append(("stream_write" if mode == 1 else "stream_read", address, dwords * 4))

  def stream_write(self, address: int, data: bytes) -> None:
    try: view, off = self._bar_at(address, len(data))
    except TLPFault: return     # posted: the data is dropped, as a switch drops a write nobody claims
    _write_view(view, off, data)

  def stream_read(self, address: int, size: int) -> bytes:
    fault = self._next_tlp_fault(False)
    if fault == -1:
      self._complete(0, transport=1)
      return bytes(size)
    if fault is not None:
      self._complete(0, fault)
      return b"\xff" * size
    try: view, off = self._bar_at(address, size)
    except TLPFault as f:
      self._complete(0, f.status)
      return b"\xff" * size
    self._complete(size // 4)
    return _read_view(view, off, size)

  # ---- the SRAM DMA engine
  def arm_sram(self, sectors_value: int, slot_index: int) -> None:
    self.counts["dma_arms"] += 1
    read = bool(sectors_value & 0x8000)
    size, slot = (sectors_value & 0x7FFF) * SECTOR, (slot_index & 0xFF) * SLOT
    self.queued.append(("sram_read" if read else "sram_write", slot, size))

  def sram(self) -> bytearray: return self.windows["sram"][2]


def _read_view(view, off: int, size: int) -> bytes:
  fast = getattr(view, "read_block", None)
  if fast is not None: return fast(off, size)
  if isinstance(view, MappedMMIO): return ctypes.string_at(view.addr + off, size)   # plain memory (a VRAM BAR)
  return b"".join(view.read32(off + i).to_bytes(4, "little") for i in range(0, size, 4))


def _write_view(view, off: int, data: bytes) -> None:
  fast = getattr(view, "write_block", None)
  if fast is not None: return fast(off, data)
  if isinstance(view, MappedMMIO) and type(view).write32 is MappedMMIO.write32:
    return ctypes.memmove(view.addr + off, bytes(data), len(data))
  if len(data) == 8 and off % 8 == 0: return view.write64(off, struct.unpack("<Q", data)[0])   # one 2-DW MWr: a doorbell
  for i, (v,) in enumerate(struct.iter_unpack("<I", data)): view.write32(off + 4 * i, v)
