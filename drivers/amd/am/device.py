"""AMDev: one AMD GPU brought up from userspace over PCI (the "AM" driver), block by block.

Order (full boot; Linux amdgpu and the reference lineage agree on it):
  pci        the function locked, BARs mapped, bus mastering on
  discovery  VRAM size (RCC_CONFIG_MEMSIZE), the IP discovery binary at the top of VRAM -> IP versions and bases,
             a register module per IP
  sw_init    nbio, gmc, ih, psp, smu, gfx: VRAM for page tables, rings, PSP buffers; firmware read and checked
  hw_init    nbio (doorbell aperture) -> gmc (VM hubs, page tables, TLB) -> ih (ring 0) -> psp (bootloader, sOS,
             ring, TOC, TMR, every IP firmware, RLC autoload) -> smu (mailbox, driver table, features) -> gfx (RLC
             autoload complete)
Each step is recorded in `steps` as (block, step, seconds since open) and passed to `trace` as it happens.
`stage` names the last block whose hw_init completed. The queues come after, from the runtime device on top
(AMIface.create_queue: a compute HQD and the SDMA0 ring).

Not yet: reusing a GPU another AM process left booted beyond the sOS check (PSP skips its bootloader when the sOS
runs, everything else is programmed again), mode-1 reset of a GPU left in a bad state, the SR-IOV VF, clock gating.
Memory: `vram` (memory.VRAM) allocates VRAM for the driver's own lifetime (alloc: page tables, rings, PSP buffers)
and for the runtime (alloc_user/free: AMIface's device buffers, which live in VRAM); the GMC maps either kind of
memory at GPU VAs (map_vram for VRAM, map for system pages).
Over a USB bridge (device=USBPCIDevice) the same boot runs through TLPs, and usb.py stands the runtime device on it
(hcq.open("USB+AMD")): all its memory in VRAM (alloc_user + map_vram), CPU shadows made coherent at the doorbell,
signals read through the bridge, copies through the bridge's SRAM.
"""
from __future__ import annotations

import threading

from ....errors import DeviceError
from . import discovery as disc
from . import firmware as fwmod
from .block import BLOCKS
from .gfx import GFX
from .gmc import GMC
from .ih import IH
from .memory import VRAM
from .nbio import NBIO
from .pci import AMPCI
from .psp import PSP
from .regs import IPRegs, RegAccess, module_for
from .smu import SMU

# RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE is read before discovery gives the bases: the generated register (NBIO 4.3, offset
# 0xC3 in segment 2) at the segment base every Navi 3x has (0xD20). Its one reader is _discover.
NBIO_SEGMENT2_EARLY = 0xD20
IP_REGS = {"gc_regs": "GC", "sdma_regs": "SDMA0", "mmhub_regs": "MMHUB", "osssys_regs": "OSSSYS", "hdp_regs": "HDP",
           "nbio_regs": "NBIF", "mp0_regs": "MP0", "mp1_regs": "MP1"}


class AMDev:
  BLOCKS = BLOCKS

  def __init__(self, os, addr: str | None, config, trace=None, label: str | None = None, until: str | None = None,
               device=None):
    """Boot the GPU at PCI address addr, or the opened PCI device `device` (AMPCI: a USBPCIDevice behind a USB
    bridge; addr None); until: stop after that block's hw_init (a block name of BLOCKS)."""
    if until is not None and until not in self.BLOCKS:
      raise DeviceError(f"AM: no block {until!r} to boot until (blocks: {', '.join(self.BLOCKS)})")
    self.os, self.config, self.trace, self.until = os, config, trace, until
    self.label = label or (f"PCI+AMD {addr}" if device is None else f"USB+AMD {device.name}")
    self.steps: list[tuple[str, str, float]] = []
    self.stage = "none"
    self._fw: dict[str, fwmod.Firmware] = {}
    self.vram = None
    self.t0 = os.monotonic()
    # one lock per GPU around what threads share: memory and page tables (TLB flushes), queue registers, the IH read
    # pointer, the MM_INDEX/MM_DATA pair (reentrant: alloc maps pages, which flushes through registers)
    self.lock = threading.RLock()
    self.pci = AMPCI(os, addr, self.label, device=device)
    try: self._boot()
    except BaseException:
      self.close()
      raise

  # ---- tracing and firmware
  def step(self, block: str, what: str) -> None:
    t = self.os.monotonic() - self.t0
    self.steps.append((block, what, t))
    if self.trace is not None: self.trace(block, what, t)

  def firmware(self, name: str) -> fwmod.Firmware:
    if name not in self._fw:
      try: self._fw[name] = fwmod.load(self.os, self.config.firmware_dir, name)
      except fwmod.FirmwareError as e: raise DeviceError(f"{self.label}: {e}") from None
    return self._fw[name]

  # ---- bring-up
  def _boot(self) -> None:
    p = self.pci
    self.step("pci", f"{p.product} at {p.addr}: VRAM BAR{p.bar_index['vram']} ({p.bar_size('vram') >> 20} MiB), "
                     f"doorbells BAR{p.bar_index['doorbell']}, registers BAR{p.bar_index['mmio']}; bus master on")
    self.stage = "pci"
    self.access = RegAccess(p.mmio, self.os, self.config.timeout_s, self.label, self.lock)
    self._discover()
    self.nbio, self.gmc, self.ih, self.psp, self.smu, self.gfx = blocks = \
      [cls(self) for cls in (NBIO, GMC, IH, PSP, SMU, GFX)]
    if self.until is not None: blocks = blocks[:self.BLOCKS.index(self.until) + 1]
    for b in blocks:
      self.step(b.name, "sw_init")
      b.sw_init()
    for b in blocks:
      self.step(b.name, "hw_init")
      b.hw_init()
      self.stage = b.name
    if self.stage == "gfx":
      self.step("am", "boot reached gfx: every firmware running (queues come with the runtime device)")
    else: self.step("am", f"boot stopped after {self.stage} as asked")

  def _discover(self) -> None:
    reg = module_for("NBIF", (4, 3, 0)).REGS["RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"]
    raw = self.access.read(NBIO_SEGMENT2_EARLY + reg.offset)
    if raw == 0xFFFFFFFF:      # the first register read: all ones is a function that does not answer at all
      raise DeviceError(f"{self.label}: the GPU is not answering: RCC_CONFIG_MEMSIZE reads 0xffffffff through the "
                        f"register BAR (all ones: powered down, fallen off the bus, or left hung; reset it or "
                        f"reboot)")
    size = raw << 20
    if size == 0 or size > self.pci.bar_size("vram") and self.pci.bar_size("vram") < (64 << 20):
      raise DeviceError(f"{self.label}: RCC_CONFIG_MEMSIZE reads {size >> 20} MiB: the board firmware did not set "
                        f"up VRAM (or the GPU is not answering on its register BAR)")
    self.vram = VRAM(self, size, reserved_top=disc.DISCOVERY_OFFSET)
    at = size - disc.DISCOVERY_OFFSET
    self.discovery = disc.parse(self.vram.read(at, disc.DISCOVERY_SIZE))
    self.step("discovery", f"{size >> 20} MiB VRAM; table at VRAM {at:#x}: {self.discovery.summary()}")
    gc = self.discovery.version_of("GC")
    if gc != self.pci.gc_version:
      raise DeviceError(f"{self.label}: discovery reports GC {'.'.join(map(str, gc))}, the device id "
                        f"{self.pci.device_id:#06x} is a GC {'.'.join(map(str, self.pci.gc_version))} part")
    for attr, ip in IP_REGS.items():
      inst = self.discovery.ip(ip)
      setattr(self, attr, IPRegs(self.access, ip, module_for(ip, inst.version), inst.bases))
    self.stage = "discovery"

  # ---- end
  def close(self) -> None:
    if self.vram is not None:
      self.vram.close()
      self.vram = None
    if self.pci is not None:
      self.pci.close()
      self.pci = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()


def find_functions(os) -> list[str]:
  """The PCI addresses of the AMD functions AM boots, in address order."""
  from ...system.pci import PCIDevice
  from .pci import SUPPORTED, VENDOR_AMD
  return [d.addr for d in PCIDevice.enumerate(os, vendor=VENDOR_AMD, device=list(SUPPORTED))]


def open_am(os, index: int, config, label: str | None = None):
  """hcq.open("PCI+AMD:N"): boot AMD function N (in address order) and stand AMDDevice on it (AMIface)."""
  from ..device import AMDDevice
  from .iface import AMIface
  return AMDDevice(AMIface(os, index, config, label), os, config)
