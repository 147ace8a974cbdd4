"""AMDev: one AMD GPU brought up from userspace over PCI (the "AM" driver), block by block.

Order (full boot; Linux amdgpu and the reference lineage agree on it):
  pci        the function locked, BARs mapped, bus mastering on
  discovery  VRAM size (RCC_CONFIG_MEMSIZE), the IP discovery binary at the top of VRAM -> IP versions and bases,
             a register module per IP
  sw_init    nbio, gmc, ih, psp, smu, gfx: VRAM for page tables, rings, PSP buffers; firmware read and checked
  hw_init    nbio (doorbell aperture, HDP remap) -> gmc (MMHUB gart_enable, page tables, TLB) -> ih (ring 0) -> psp
             (bootloader, sOS, ring, TOC, SMU firmware, TMR, every other IP firmware, RLC autoload) -> smu (mailbox,
             driver table, features) -> gfx (RLC autoload complete, MEC program counter, GC hub gart_enable,
             constants, GC doorbells, MEC started). Each step follows Linux amdgpu 6.12: README.md has the table.
Partial boot (reuse.py): after sw_init, before hw_init, the GPU's state is assessed: one that an AM process left
booted (the boot signature in GC SCRATCH_REG7 and the boot record at VRAM 0), its firmware running and its queues
idle, is reused: every hw_init runs but the PSP's (no bootloader, no firmware load: the TMR is kept). Anything else
is a full boot, after a mode-1 reset (reset.py) when firmware runs. Every boot to gfx ends by signing.
Each step is recorded in `steps` as (block, step, seconds since open) and passed to `trace` as it happens.
`stage` names the last block whose hw_init completed. The queues come after, from the runtime device on top
(AMSession.create_queue: a compute HQD and the SDMA0 ring).

SR-IOV virtual function (virt.py): when RCC_IOV_FUNC_IDENTIFIER says "VF", the host already booted the GPU: the
boot asks the PF for init data and exclusive init access through the mailbox before discovery, runs nbio, gmc, ih and
gfx (no PSP, no SMU: the host owns them and loaded every firmware; gfx checks the host's RLC autoload completed), and
keeps the access until the runtime device's queues exist (end_init, from session.open_am); close asks for fini access first.

Partial boot (reuse.py, reset.py): a GPU a previous AM process left booted is reused when its boot record and state
check out, else mode-1 reset and booted in full (not on a VF: the host owns the firmware).

Not yet: clock gating.
Memory: `vram` (memory.VRAM) allocates VRAM for the driver's own lifetime (alloc: page tables, rings, PSP buffers)
and for the runtime (alloc_user/free: AMSession's device buffers, which live in VRAM); the GMC maps either kind of
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
from . import reset, reuse
from .block import BLOCKS
from .gfx import GFX
from .gmc import GMC
from .ih import IH
from .memory import VRAM
from .nbio import NBIO
from .pci import AMPCI
from .psp import PSP
from .regs import IPRegs, RegAccess, gfxhub_module_for, module_for
from .smu import SMU, Mailbox
from . import virt

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
    bridge; addr None); until: stop after that block's hw_init (a block name of BLOCKS), or after "discovery" (no
    block touched: e.g. to reset the GPU)."""
    if until is not None and until not in ("discovery", *self.BLOCKS):
      raise DeviceError(f"AM: no block {until!r} to boot until (discovery, or a block: {', '.join(self.BLOCKS)})")
    self.os, self.config, self.trace, self.until = os, config, trace, until
    self.label = label or (f"PCI+AMD {addr}" if device is None else f"USB+AMD {device.name}")
    self.steps: list[tuple[str, str, float]] = []
    self.stage = "none"
    self._fw: dict[str, fwmod.Firmware] = {}
    self.vram = None
    self.vf, self.mailbox, self.pf2vf = False, None, None    # an SR-IOV VF, its mailbox to the PF, the host's pf2vf
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
    self._detect_vf()
    self._discover()
    if self.until == "discovery": return self.step("am", "boot stopped after discovery as asked")
    self.nbio, self.gmc, self.ih, self.psp, self.smu, self.gfx = blocks = \
      [cls(self) for cls in (NBIO, GMC, IH, PSP, SMU, GFX)]
    if self.until is not None: blocks = blocks[:self.BLOCKS.index(self.until) + 1]
    if self.vf:       # ---- SR-IOV VF: the host runs PSP and SMU (virt.py)
      self.psp = self.smu = None
      blocks = [b for b in blocks if b.name not in ("psp", "smu")]
    else: reuse.claim_record(self)        # VRAM's first page, as the last boot left it (reuse.py)
    for b in blocks:
      self.step(b.name, "sw_init")
      b.sw_init()
    # ---- partial boot (reuse.py, reset.py): reuse the GPU as a previous process left it, or reset it
    plan = reuse.Plan("boot", "an SR-IOV VF (the host booted the GPU)") if self.vf else reuse.assess(self)
    if plan.reset: reset.mode1_reset(self, plan.why)
    for b in blocks:
      self.step(b.name, "hw_init")
      if plan.reuse and b is self.psp: reuse.resume_psp(self, plan)
      else: b.hw_init()
      self.stage = b.name
    # ----
    if self.stage == "gfx":
      if not self.vf: reuse.sign(self)
      self.step("am", "boot reached gfx: every firmware running (queues come with the runtime device)"
                + (" under the VF's exclusive init access" if self.vf else ""))
    else: self.step("am", f"boot stopped after {self.stage} as asked")

  def mode1_reset(self) -> None:
    """Mode-1 reset the GPU (reset.py) of an instance opened until="discovery" (no block of it runs on the GPU: a
    booted one's IH ring, page tables and queues, which the runtime's threads use, would lose their firmware under
    them). Afterwards its PSP waits in the bootloader and no firmware runs: close it (the next open boots in full)."""
    if self.vf: raise DeviceError(f"{self.label}: a VF cannot mode-1 reset the GPU (the host owns it)")
    if self.stage != "discovery":
      raise DeviceError(f"{self.label}: no mode-1 reset under this instance's blocks (booted up to {self.stage}): "
                        f"open the GPU with until='discovery' to reset it")
    reset.mode1_reset(self, "asked")
    self.stage = "discovery"

  # ---- SR-IOV VF (virt.py)
  def _detect_vf(self) -> None:
    """RCC_IOV_FUNC_IDENTIFIER says VF: ask the PF for init data and exclusive init access before touching the GPU."""
    self.vf, iov = virt.read_iov(self.access, NBIO_SEGMENT2_EARLY)
    if not self.vf: return
    self.step("virt", f"SR-IOV VF (RCC_IOV_FUNC_IDENTIFIER: FUNC_IDENTIFIER 1, IOV_ENABLE {int(iov)}): the host booted "
                      f"the GPU; no PSP, no SMU, no firmware load")
    self.mailbox = virt.Mailbox(self.access, NBIO_SEGMENT2_EARLY, self.label, self.config.timeout_s,
                                lambda what: self.step("virt", what))
    ver = self.mailbox.request_init_data()
    if ver: self.step("virt", f"host init data version {ver}")
    self.mailbox.request_access(init=True)
    block = self.pci.vram.read(virt.PF2VF_OFFSET, virt.PF2VF_SIZE)
    try: self.pf2vf = virt.parse_pf2vf(block, self.mailbox.checksum_key)
    except ValueError as e: self.step("virt", f"pf2vf region at VRAM {virt.PF2VF_OFFSET:#x} unusable: {e}")
    else: self.step("virt", f"pf2vf v{self.pf2vf['version']} at VRAM {virt.PF2VF_OFFSET:#x}: feature flags "
                            f"{self.pf2vf['feature_flags']:#x}, function {self.pf2vf.get('fcn_idx', '?')}")

  def end_init(self) -> None:
    """The runtime device is up (queues created): a VF gives its exclusive init access back (IDH_REL_GPU_INIT_ACCESS,
    as Linux does at the end of amdgpu_device_init). Nothing on a PF."""
    if self.mailbox is not None and self.mailbox.held == "init": self.mailbox.release_access()

  def begin_fini(self) -> None:
    """Before the queues are torn down, a VF asks for exclusive fini access (IDH_REQ_GPU_FINI_ACCESS); close gives it
    back. A PF that does not answer is noted and the teardown goes on (the VF's own memory must still go)."""
    if self.mailbox is None or self.mailbox.held: return
    try: self.mailbox.request_access(init=False)
    except virt.VirtError as e: self.step("virt", f"no fini access: {e}")

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
    # a VF allocates nothing where the host's messages to it live (virt.py)
    self.vram = VRAM(self, size, reserved_top=disc.DISCOVERY_OFFSET, reserved_bottom=virt.VF_RESERVED if self.vf else 0)
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
    self.gfxhub_regs = IPRegs(self.access, "GC", gfxhub_module_for(gc), self.discovery.ip("GC").bases)
    # the SMU mailbox, shared with hcq-smi through its lock (smu.py): every message goes through it, the reuse probe
    # and the reset request included
    self.smu_mailbox = Mailbox(self.mp1_regs, self.os, self.pci.lock_key[1], self.label, self.config.timeout_s)
    self.stage = "discovery"

  # ---- end
  def close(self) -> None:
    if self.mailbox is not None and self.mailbox.held and self.pci is not None:
      try: self.mailbox.release_access()      # never leave the other VFs locked out
      except virt.VirtError as e: self.step("virt", f"release not acknowledged: {e}")
    smu = getattr(self, "smu", None)
    if smu is not None: smu.close()     # the state file goes before the lock it stands next to
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
