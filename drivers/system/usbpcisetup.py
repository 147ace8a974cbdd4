"""Bring-up of the PCI tree behind an ASM24xx bridge, which nobody else enumerates: what a PCI core would do, done
through a function's config accesses (usbpci.py's USBPCIDevice: config_read_at/config_write_at on every bus).

Topology (as lspci shows an ASM2464PD enclosure): the bridge's own PCIe switch puts bridges on buses 0..3 (one each,
device 0 function 0) and the GPU at bus 4. `setup()` numbers the buses and opens the memory windows on every bridge,
makes the GPU's largest Resizable BAR (PCIe Base Spec 4.0 §7.8.6) as large as it goes, sizes every memory BAR
(all-ones probe, PCI Local Bus 3.0 §6.2.5.1) and gives it an address (prefetchable 64-bit BARs from PREF_BASE, the
others from MEM_BASE, each aligned to its size), then turns on memory decoding and bus mastering.
"""
from __future__ import annotations

from ...autogen import pci as regs
from ...errors import DeviceError
from . import asm24
from .pci import BAR, IORESOURCE_MEM, IORESOURCE_MEM_64, IORESOURCE_PREFETCH, NUM_BARS
from .poll import poll

BRIDGE_BUSES = (0, 1, 2, 3)
GPU_BUS = 4
MEM_BASE, MEM_LIMIT = 0x1000_0000, 0xFFFF_FFFF     # 32-bit non-prefetchable window of every bridge
PREF_BASE = 32 << 30                               # 64-bit prefetchable pool


def setup(dev) -> list[BAR]:
  """Power the link, number the buses, open the windows, resize and assign the GPU's BARs, enable it; returns the
  BARs (dev: a USBPCIDevice)."""
  bridge = dev.bridge
  if not bridge.link_up:
    bridge.power(True)
    poll(bridge.ltssm, asm24.LTSSM_L0, f"{bridge.name}: PCIe link (LTSSM {asm24.LTSSM_STATE:#x})",
         dev.timeout_s, 1000, dev.os.monotonic, dev.os.sleep)
  for bus in BRIDGE_BUSES: setup_bridge(dev, bus)
  resize_largest_bar(dev)
  bars = assign_bars(dev)
  cmd = dev.config_read(regs.PCI_COMMAND, 2)
  dev.config_write(regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_MEMORY | regs.PCI_COMMAND_MASTER, 2)
  return bars


def setup_bridge(dev, bus: int) -> None:
  # primary, secondary, subordinate bus numbers in one write (latency timer 0)
  dev.config_write_at(bus, regs.PCI_PRIMARY_BUS, bus | (bus + 1) << 8 | GPU_BUS << 16)
  dev.config_write_at(bus, regs.PCI_MEMORY_BASE, (MEM_BASE >> 16) & 0xFFF0, 2)
  dev.config_write_at(bus, regs.PCI_MEMORY_LIMIT, (MEM_LIMIT >> 16) & 0xFFF0, 2)
  dev.config_write_at(bus, regs.PCI_PREF_MEMORY_BASE, (PREF_BASE >> 16) & 0xFFF0 | regs.PCI_PREF_RANGE_TYPE_64, 2)
  dev.config_write_at(bus, regs.PCI_PREF_MEMORY_LIMIT, 0xFFF0 | regs.PCI_PREF_RANGE_TYPE_64, 2)
  dev.config_write_at(bus, regs.PCI_PREF_BASE_UPPER32, PREF_BASE >> 32)
  dev.config_write_at(bus, regs.PCI_PREF_LIMIT_UPPER32, 0xFFFFFFFF)
  cmd = dev.config_read_at(bus, regs.PCI_COMMAND, 2)
  dev.config_write_at(bus, regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_IO | regs.PCI_COMMAND_MEMORY | regs.PCI_COMMAND_MASTER, 2)


def resize_largest_bar(dev) -> int | None:
  """Set the first Resizable BAR entry to the largest size it supports; returns that size (None: no capability)."""
  rebar = next((off for cap, off in dev.ext_capabilities() if cap == regs.PCI_EXT_CAP_ID_REBAR), None)
  if rebar is None: return None
  cmd = dev.config_read(regs.PCI_COMMAND, 2)
  dev.config_write(regs.PCI_COMMAND, cmd & ~regs.PCI_COMMAND_MEMORY & 0xFFFF, 2)   # no decoding while it changes
  sizes = dev.config_read(rebar + regs.PCI_REBAR_CAP) & regs.PCI_REBAR_CAP_SIZES
  if not sizes: raise DeviceError(f"{dev.name}: Resizable BAR capability at {rebar:#x} lists no size")
  enc = sizes.bit_length() - 1 - 4            # bit 4 = 1 MiB
  ctrl = dev.config_read(rebar + regs.PCI_REBAR_CTRL)
  dev.config_write(rebar + regs.PCI_REBAR_CTRL, ctrl & ~regs.PCI_REBAR_CTRL_BAR_SIZE | enc << regs.PCI_REBAR_CTRL_BAR_SHIFT)
  return 1 << (20 + enc)


def size_bar(dev, index: int) -> tuple[int, int, bool, bool]:
  """(size, flags register, 64-bit, prefetchable) by the all-ones probe (PCI 3.0 §6.2.5.1); 0 = unimplemented."""
  reg = regs.PCI_BASE_ADDRESS_0 + 4 * index
  old = dev.config_read(reg)
  if old & regs.PCI_BASE_ADDRESS_SPACE_IO: return 0, old, False, False
  is64 = bool(old & regs.PCI_BASE_ADDRESS_MEM_TYPE_64)
  dev.config_write(reg, 0xFFFFFFFF)
  lo = dev.config_read(reg) & 0xFFFFFFF0
  dev.config_write(reg, old)
  hi = 0xFFFFFFFF
  if is64:
    old_hi = dev.config_read(reg + 4)
    dev.config_write(reg + 4, 0xFFFFFFFF)
    hi = dev.config_read(reg + 4)
    dev.config_write(reg + 4, old_hi)
  mask = hi << 32 | lo
  if not lo and (not is64 or not hi): return 0, old, is64, False
  return (~mask & 0xFFFFFFFFFFFFFFFF) + 1, old, is64, bool(old & regs.PCI_BASE_ADDRESS_MEM_PREFETCH)


def assign_bars(dev) -> list[BAR]:
  """Size every BAR and give it an address (decoding off meanwhile); returns the NUM_BARS BARs (unimplemented: 0)."""
  cmd = dev.config_read(regs.PCI_COMMAND, 2)
  dev.config_write(regs.PCI_COMMAND, cmd & ~regs.PCI_COMMAND_MEMORY & 0xFFFF, 2)   # no decoding while sizing
  bars = [BAR(i, 0, 0, 0) for i in range(NUM_BARS)]
  pref, mem = PREF_BASE, MEM_BASE
  index = 0
  while index < NUM_BARS:
    size, _, is64, prefetch = size_bar(dev, index)
    if size:
      if prefetch and is64:
        start = pref = -(-pref // size) * size
        pref += size
      else:
        start = mem = -(-mem // size) * size
        mem += size
        if mem - 1 > MEM_LIMIT: raise DeviceError(f"{dev.name}: BAR{index} of {size:#x} bytes does not fit the 32-bit window")
      reg = regs.PCI_BASE_ADDRESS_0 + 4 * index
      dev.config_write(reg, start & 0xFFFFFFFF)
      if is64: dev.config_write(reg + 4, start >> 32)
      flags = IORESOURCE_MEM | (IORESOURCE_MEM_64 if is64 else 0) | (IORESOURCE_PREFETCH if prefetch else 0)
      bars[index] = BAR(index, start, start + size - 1, flags)
    index += 2 if is64 else 1
  return bars
