"""Register models of the mock Navi 31's simpler blocks: NBIO (memory size, doorbell aperture, HDP flush), the two VM
hubs (MMHUB, GC hub: the TLB invalidation engines, the page-table walker), IH (the interrupt ring) and the GC's RLC
(autoload status), and the SMU (MP1 mailbox, features, metrics table).

Each model answers what the driver programs with what the hardware would show: an invalidation request is
acknowledged per VMID, a GPU address is translated through the driver's 4-level page tables (an unmapped one becomes
a VM fault entry in the IH ring), an SMU message gets a response code in C2PMSG_90.
"""
from __future__ import annotations

import struct
import threading

from ....autogen.amd import smu_v13_0_0 as SMU
from ....errors import DeviceError, GPUFault
from .discovery import GC_HWID, MMHUB_HWID, MP1_HWID, NBIF_HWID, OSSSYS_HWID

PTE_VALID, PTE_SYSTEM = 1 << 0, 1 << 1
PDE_PTE = 1 << 54          # gfx10/11: a PDE that is itself a PTE (huge page)
# A huge entry's address is where its page starts: the walker adds the VA's offset inside the page and masks nothing
# off. Linux only writes huge entries for VRAM its buddy allocator aligned (amdgpu_vm_ptes_update picks the level by
# the VA's fragment, amdgpu_vm_pte_fragment, not by the physical address); tinygrad 0.14's AM driver, which runs on real
# RX 7900 XTX boards, writes them wherever the VA is aligned (memory.py PageTableTraverseContext.next with
# AMPageTableEntry.supports_huge_page, which ignores the physical address) for VRAM its TLSF allocator did not align
# (its 16 MiB kernel-argument buffer at 0x2034000 in a 2 MiB entry): a walker that masked the low bits would hand its
# kernels another buffer's bytes. No public source says the hardware masks them.
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF


# The MMIO register hole: the BAR page with no register in it, where Linux remaps the HDP flush registers
# (nbio_v4_3.c: MMIO_REG_HOLE_OFFSET = 0x80000 - PAGE_SIZE; KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL 0, _REG_FLUSH_CNTL 4)
REG_HOLE, REG_HOLE_END = 0x80000 - 0x1000, 0x80000


class NBIO:
  """Memory size, and the HDP flush: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds the byte address in the register BAR of
  the flush register (nbio_v4_3_remap_hdp_registers); a write there drains the HDP (hdp_v6_0_flush_hdp). Only an
  address in the register hole can be remapped (anything else would alias a real register: 0 is BIF_BX_PF0_MM_INDEX);
  a write to the REMAP register itself flushes nothing. At power-on it points into the hole where Linux puts it:
  tinygrad 0.14's AM driver (hardware-proven) never remaps and flushes at the address it reads there
  (AM_GMC.flush_hdp), so a booted board holds a usable address."""

  def __init__(self, gpu):
    rf, self.gpu = gpu.regs, gpu
    self.hdp_flushes = 0
    self.flush_addr = None
    rf.hook(rf.addr(NBIF_HWID, "nbio_4_3_0", "RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"), read=lambda: gpu.vram_size >> 20)
    self.remap = rf.addr(NBIF_HWID, "nbio_4_3_0", "BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")
    rf.hook(self.remap, write=self._remap)
    rf.poke(rf.addr(NBIF_HWID, "nbio_4_3_0", "BIF_BX0_REMAP_HDP_REG_FLUSH_CNTL"), REG_HOLE + 4)
    rf.poke(self.remap, REG_HOLE)
    self._move(REG_HOLE)

  def _remap(self, value: int) -> None:
    if value & 3 or not REG_HOLE <= value < REG_HOLE_END:
      raise DeviceError(f"mock Navi 31 {self.gpu.addr}: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL = {value:#x}: the HDP flush "
                        f"register can only be remapped to a dword of the MMIO register hole {REG_HOLE:#x}..{REG_HOLE_END:#x} "
                        f"(it holds an address: nbio_v4_3_remap_hdp_registers; {value:#x} would alias a register"
                        f"{' (BIF_BX_PF0_MM_INDEX)' if value == 0 else ''})")
    self._move(value)

  def _move(self, byte_addr: int) -> None:
    rf = self.gpu.regs
    if self.flush_addr is not None:
      rf.write_hooks.pop(self.flush_addr, None)
      rf.read_hooks.pop(self.flush_addr, None)
    self.flush_addr = byte_addr >> 2
    rf.hook(self.flush_addr, write=self._flush, read=lambda: 0)

  def _flush(self, _value): self.hdp_flushes += 1


class Hub:
  """One VM hub (prefix MMVM_/MMMC_ in mmhub 3.0.0, GCVM_/GCMC_ in gc 11.0.0 or GC 11.0.3's gfxhub layout).

  Translation needs the hub turned on as mmhub_v3_0/gfxhub_v3_0 *_gart_enable do: {mc}_VM_MX_L1_TLB_CNTL with
  ENABLE_L1_TLB, SYSTEM_ACCESS_MODE 3 and ENABLE_ADVANCED_DRIVER_MODEL, {vm}_L2_CNTL.ENABLE_L2_CACHE; an invalidation
  or a walk of an enabled context without them is refused, naming the register. The walker takes physical VRAM
  addresses (the page-table base, every PDE and VRAM PTE: gmc_v11_0_get_vm_pde, amdgpu_gmc_vram_mc2pa; VRAM starts at
  physical MC_VM_FB_OFFSET << 24). MMHUB: after each engine-17 invalidation the driver issues the L2's private
  invalidation (MMVM_L2_BANK_SELECT_RESERVED_CID2 bit 25, gmc_v11_0_flush_gpu_tlb); the next request without it is
  refused (a VF leaves it to the host)."""

  PRIVATE_INVALIDATION = 1 << 25

  def __init__(self, gpu, hw_id: int, module: str, vm: str, mc: str):
    self.gpu, self.hw_id, self.module, self.vm, self.mc = gpu, hw_id, module, vm, mc
    self.invalidations: list[int] = []
    self.on_invalidate = None     # called after each invalidation (the command processors re-read the mappings)
    self.private_pending = False
    rf = gpu.regs
    for eng in range(18):
      req = rf.addr(hw_id, module, f"{vm}_INVALIDATE_ENG{eng}_REQ")
      ack = rf.addr(hw_id, module, f"{vm}_INVALIDATE_ENG{eng}_ACK")
      rf.hook(req, write=lambda v, ack=ack: self._invalidate(v, ack))
      rf.hook(rf.addr(hw_id, module, f"{vm}_INVALIDATE_ENG{eng}_SEM"), read=lambda: 1)   # the semaphore is free
    rf.poke(rf.addr(hw_id, module, f"{mc}_VM_FB_LOCATION_BASE"), gpu.fb_base >> 24)
    rf.poke(rf.addr(hw_id, module, f"{mc}_VM_FB_LOCATION_TOP"), (gpu.fb_base + gpu.vram_size - 1) >> 24)
    rf.poke(rf.addr(hw_id, module, f"{mc}_VM_FB_OFFSET"), gpu.fb_offset >> 24)
    if vm == "MMVM":
      rf.hook(rf.addr(hw_id, module, "MMVM_L2_BANK_SELECT_RESERVED_CID2"), write=self._private)

  def _private(self, value: int) -> None:
    if value & self.PRIVATE_INVALIDATION: self.private_pending = False

  def field(self, name: str, field: str) -> int: return self.gpu.regs.fields(self.module, name, self.reg(name))[field]

  def check_enabled(self, what: str) -> None:
    """Refuse `what` on an enabled context whose L1 TLB / L2 is not on, or whose page-table base is no physical
    VRAM address."""
    mc, vm = self.mc, self.vm
    need = [(f"{mc}_VM_MX_L1_TLB_CNTL", "ENABLE_L1_TLB", 1), (f"{mc}_VM_MX_L1_TLB_CNTL", "SYSTEM_ACCESS_MODE", 3),
            (f"{mc}_VM_MX_L1_TLB_CNTL", "ENABLE_ADVANCED_DRIVER_MODEL", 1), (f"{vm}_L2_CNTL", "ENABLE_L2_CACHE", 1)]
    for reg, field, want in need:
      have = self.field(reg, field)
      if have != want:
        raise DeviceError(f"mock Navi 31 {self.gpu.addr}: {what}: {reg}.{field} is {have}, translation needs {want} "
                          f"({'mmhub' if vm == 'MMVM' else 'gfxhub'}_v3_0 gart_enable: init_tlb_regs / init_cache_regs)")
    base = self._base(0)
    if not self.gpu.is_pa(base & ADDR_MASK, 0x1000):
      raise DeviceError(f"mock Navi 31 {self.gpu.addr}: {what}: {vm}_CONTEXT0_PAGE_TABLE_BASE_ADDR holds {base:#x}, not a "
                        f"physical VRAM address ({self.gpu.fb_offset:#x}..{self.gpu.fb_offset + self.gpu.vram_size:#x}: "
                        f"the walker takes physical addresses, amdgpu_gmc_vram_mc2pa; MC addresses start at "
                        f"{self.gpu.fb_base:#x})")

  def _base(self, vmid: int) -> int:
    return self.reg(f"{self.vm}_CONTEXT{vmid}_PAGE_TABLE_BASE_ADDR_LO32") | \
      (self.reg(f"{self.vm}_CONTEXT{vmid}_PAGE_TABLE_BASE_ADDR_HI32") << 32)

  def _invalidate(self, value: int, ack: int) -> None:
    vmids = value & 0xFFFF      # PER_VMID_INVALIDATE_REQ
    what = f"{self.vm}_INVALIDATE_ENG17_REQ"
    if self.private_pending:
      raise DeviceError(f"mock Navi 31 {self.gpu.addr}: {what} before the private invalidation of the last one "
                        f"(MMVM_L2_BANK_SELECT_RESERVED_CID2.RESERVED_CACHE_PRIVATE_INVALIDATION, gmc_v11_0_flush_gpu_tlb)")
    if self.reg(f"{self.vm}_CONTEXT0_CNTL") & 1: self.check_enabled(what)
    self.invalidations.append(vmids)
    if self.on_invalidate is not None: self.on_invalidate()
    self.gpu.regs.poke(ack, vmids)
    if self.vm == "MMVM" and not self.gpu.vf: self.private_pending = True

  def reg(self, name: str) -> int: return self.gpu.regs.read(self.gpu.regs.addr(self.hw_id, self.module, name))

  def translate(self, va: int, vmid: int = 0) -> tuple[str, int]:
    """("vram", offset) or ("system", physical address) of GPU virtual address va in context vmid (0 only), walking
    the page tables the driver built (physical VRAM addresses); an unmapped address raises GPUFault and posts a VM
    fault to the IH ring."""
    cntl = self.reg(f"{self.vm}_CONTEXT{vmid}_CNTL")
    if not cntl & 1: return self._fault(va, "context disabled")
    self.check_enabled(f"{self.vm} page walk of {va:#x}")
    depth = (cntl >> 1) & 3
    base = self._base(vmid)
    start = (self.reg(f"{self.vm}_CONTEXT{vmid}_PAGE_TABLE_START_ADDR_LO32") |
             (self.reg(f"{self.vm}_CONTEXT{vmid}_PAGE_TABLE_START_ADDR_HI32") << 32)) << 12
    if not base & PTE_VALID: return self._fault(va, "no root page table")
    table, rel = base & ADDR_MASK, va - start
    if rel < 0: return self._fault(va, "below the context's range")
    for level in range(depth, -1, -1):
      shift = 12 + 9 * level
      entry = self.gpu.read_pa64(table + ((rel >> shift) & 0x1FF) * 8, f"{self.vm} level-{depth - level} table")
      if not entry & PTE_VALID: return self._fault(va, f"invalid entry at level {depth - level}")
      if level == 0 or entry & PDE_PTE:
        page = entry & ADDR_MASK           # unaligned huge pages: see PDE_PTE above
        addr = page + (rel & ((1 << shift) - 1))
        if entry & PTE_SYSTEM: return "system", addr
        if not self.gpu.is_pa(addr, 1): return self._fault(va, f"PTE address {addr:#x} is not physical VRAM")
        return "vram", addr - self.gpu.fb_offset
      table = entry & ADDR_MASK

  def post_fault(self, va: int) -> bool:
    """A protection fault at va reaches the IH ring only when its context asks for the interrupt
    (CONTEXT0_CNTL.VALID_PROTECTION_FAULT_ENABLE_INTERRUPT: gmc_v11_0_vm_fault_interrupt_state sets it); soc21 ids
    (soc15_ih_clientid.h, gmc_v11_0_sw_init): MMHUB as VMC 0x12, the GC hub's UTCL2 as GFX 0x0a, source 0 for both."""
    if not self.field(f"{self.vm}_CONTEXT0_CNTL", "VALID_PROTECTION_FAULT_ENABLE_INTERRUPT"): return False
    return self.gpu.ih.post(client=0x12 if self.hw_id == MMHUB_HWID else 0x0A, src=0, ctx=[va >> 12, (va >> 44) & 0xF, 0, 0])

  def _fault(self, va: int, why: str):
    self.post_fault(va)
    raise GPUFault(f"{self.vm} page walk: {why}", address=va, kind="VM fault")


class IH:
  """Interrupt ring 0: entries of 8 dwords written at the write pointer, which is also written back to memory."""

  def __init__(self, gpu):
    self.gpu = gpu
    rf, m = gpu.regs, "osssys_6_0_0"
    self.lock = threading.Lock()
    self.posted = 0
    self.overflow = False        # RB_OVERFLOW of the write pointer: set when an entry overwrote an unread one
    self.a = {n: rf.addr(OSSSYS_HWID, m, n) for n in ("IH_RB_CNTL", "IH_RB_BASE", "IH_RB_BASE_HI", "IH_RB_WPTR",
                                                      "IH_RB_WPTR_ADDR_LO", "IH_RB_WPTR_ADDR_HI", "IH_RB_RPTR")}
    rf.hook(self.a["IH_RB_CNTL"], write=self._cntl)

  def _cntl(self, value: int) -> None:
    if value & 0x80000000: self.overflow = False       # WPTR_OVERFLOW_CLEAR

  def post(self, client: int, src: int, ctx: list[int], vmid: int = 0) -> bool:
    """Write one IV entry. Called by the engines' worker thread while it holds the GPU's lock: the register values are
    read and set without the register file's lock (which a driver's register write holds while a hook takes the GPU's
    lock: taking it here would deadlock); entries are serialised by the IH's own lock."""
    values = self.gpu.regs.values
    with self.lock:
      cntl = values.get(self.a["IH_RB_CNTL"], 0)
      if not cntl & 1: return False          # RB_ENABLE clear: the interrupt is dropped
      size = 4 << ((cntl >> 1) & 0x1F)       # RB_SIZE: log2 of the ring's dwords
      base = ((values.get(self.a["IH_RB_BASE_HI"], 0) << 32) | values.get(self.a["IH_RB_BASE"], 0)) << 8
      wptr = values.get(self.a["IH_RB_WPTR"], 0)
      if (wptr + 32) % size == values.get(self.a["IH_RB_RPTR"], 0) % size:     # full: the entry overwrites unread ones
        if not cntl & (1 << 16): return False                 # WPTR_OVERFLOW_ENABLE clear: it is dropped instead
        self.overflow = True
      # an IV entry (Linux amdgpu_ih.c, decode_iv): client, source, ring, vmid in dword 0; timestamp in 1-2;
      # pasid in 3; the source's four data dwords in 4-7
      entry = struct.pack("<8I", client | (src << 8) | (vmid << 24), 0, 0, 0, *[c & 0xFFFFFFFF for c in ctx])
      self.gpu.write_mc(base + (wptr % size), entry)
      wptr = (wptr + 32) % size
      values[self.a["IH_RB_WPTR"]] = wptr
      wb = values.get(self.a["IH_RB_WPTR_ADDR_LO"], 0) | (values.get(self.a["IH_RB_WPTR_ADDR_HI"], 0) << 32)
      if wb: self.gpu.write_mc(wb, struct.pack("<I", wptr | self.overflow))
      self.posted += 1
    return True


class RLC:
  """The RLC's autoload (PSP AUTOLOAD_RLC): it powers GFX up and boots its firmware; until then the GC hub has no
  power (guard_gc_hub refuses its writes); CP_STAT reads 0 (the CP idle). The MEC stays halted (CP_MEC_RS64_CNTL:
  MEC_HALT and every pipe in reset) until the driver starts it (cp.py checks that at an HQD's activation).
  Then its firmware's safe-mode handshake. RLC_SAFE_MODE (Linux gfx_v11_0_set_safe_mode / _unset_safe_mode): the
  driver writes CMD=1 with MESSAGE 1 (enter) or 0 (exit) and waits for the RLC to clear CMD. Only running RLC
  firmware answers: before the autoload CMD stays set."""

  def __init__(self, gpu):
    from ....autogen.amd import gc_11_0_0 as GC
    rf = gpu.regs
    self.powered = False
    self.regs = rf
    self.status = rf.addr(GC_HWID, "gc_11_0_0", "RLC_RLCS_BOOTLOAD_STATUS")
    self.safe_mode_reg = rf.addr(GC_HWID, "gc_11_0_0", "RLC_SAFE_MODE")
    self.cmd_mask, self.msg_mask, self.msg_shift = GC.RLC_SAFE_MODE__CMD_MASK, GC.RLC_SAFE_MODE__MESSAGE_MASK, GC.RLC_SAFE_MODE__MESSAGE__SHIFT
    rf.hook(self.safe_mode_reg, write=self._safe_mode)
    rf.poke(rf.addr(GC_HWID, "gc_11_0_0", "CP_STAT"), 0)
    cntl = rf.module("gc_11_0_0").REGS["CP_MEC_RS64_CNTL"]
    rf.poke(rf.addr(GC_HWID, "gc_11_0_0", "CP_MEC_RS64_CNTL"),
            cntl.encode(MEC_HALT=1, **{f"MEC_PIPE{p}_RESET": 1 for p in range(4)}))
    self.running = False
    self.safe_mode = False        # the GFX clocks held on for the driver (entered with MESSAGE 1)

  def autoload(self, gpu) -> None:
    self.powered = True
    gpu.regs.poke(self.status, 0x80000000 | 0x1)   # BOOTLOAD_COMPLETE | GFX_INIT_DONE
    self.running = True

  def _safe_mode(self, value: int) -> None:
    if not self.running or not value & self.cmd_mask: return
    self.safe_mode = bool((value & self.msg_mask) >> self.msg_shift)
    self.regs.poke(self.safe_mode_reg, value & ~self.cmd_mask)      # the firmware's acknowledgement


def guard_gc_hub(gpu) -> None:
  """The GC hub's registers (GCVM_*, GCMC_* of gc 11.0.0, or of GC 11.0.3's layout: gpu.gfxhub_module) take no
  write while GFX has no power: before the RLC autoload (Linux enables GFXHUB in gfx_v11_0_hw_init after it,
  gfx_v11_0_gfxhub_enable, and skips GFXHUB TLB flushes while gfx.is_poweron is false: gmc_v11_0_flush_gpu_tlb).
  Reads answer (Linux reads the FB location)."""
  rf, module = gpu.regs, gpu.gchub.module
  for name in rf.module(module).REGS:
    if not name.startswith(("GCVM_", "GCMC_")): continue
    def check(_v, name=name):
      if gpu.rlc.powered: return True
      raise DeviceError(f"mock Navi 31 {gpu.addr}: {name} written before the RLC autoload: the GC hub has no power yet "
                        f"(gfx_v11_0_hw_init enables GFXHUB after gfx_v11_0_wait_for_rlc_autoload_complete)")
    rf.guard(rf.addr(GC_HWID, module, name), write=check)


class SMUModel:
  """MP1 firmware after PSP loaded it: messages in C2PMSG_66 with an argument in C2PMSG_82; the response code in
  C2PMSG_90 (PPSMC_Result_*), the result in C2PMSG_82. Before its firmware is loaded it answers nothing."""

  def __init__(self, gpu):
    self.gpu, rf = gpu, gpu.regs
    self.msg, self.arg, self.resp = (rf.addr(MP1_HWID, "mp_13_0_0", f"MP1_SMN_C2PMSG_{n}") for n in (66, 82, 90))
    rf.hook(self.msg, write=self._message)
    self.running, self.version = False, 0
    self.driver_if_version = SMU.SMU13_0_0_DRIVER_IF_VERSION   # what GetDriverIfVersion answers (a test may change it)
    self.features, self.dram_addr = 0, 0
    self.soft_min, self.soft_max = {}, {}
    self.metrics_count = 0
    self.temperature = float(self.AMBIENT_C)
    self.last_metrics = None       # the SmuMetricsExternal_t of the last TransferTableSmu2Dram
    self.messages: list[tuple[int, int]] = []

  def start(self, version: int) -> None:
    self.running, self.version = True, version
    self.gpu.regs.poke(self.resp, SMU.PPSMC_Result_OK)

  # DPM levels per clock. Linux's smu_v13_0_0_set_default_dpm_table (smu_v13_0_0_ppt.c) reads the SOCCLK and FCLK
  # tables as well as GFXCLK's and UCLK's (smu_v13_0_set_single_dpm_table: GetDpmFreqByIndex with index 0xff for the
  # count, then each level), and tinygrad's AM_SMU.set_clocks reads all four: the SOC and fabric clocks have one level
  # here, the frequencies the metrics report (SOC_MHZ, FCLK_MHZ)
  DPM_MHZ = {SMU.PPCLK_GFXCLK: [500, 1500, 2500], SMU.PPCLK_UCLK: [96, 456, 1249], SMU.PPCLK_SOCCLK: [1200],
             SMU.PPCLK_FCLK: [1900]}
  DPM_BIT31 = {SMU.PPCLK_UCLK}      # clocks whose GetDpmFreqByIndex answers carry bit 31 (the DPM kind flag)

  def _message(self, msg: int) -> None:
    if not self.running: return
    rf = self.gpu.regs
    arg = rf.read(self.arg)
    self.messages.append((msg, arg))
    if msg == SMU.PPSMC_MSG_Mode1Reset: return self.gpu.mode1_reset("SMU PPSMC_MSG_Mode1Reset")   # no answer: it resets
    result, out = SMU.PPSMC_Result_OK, arg
    if msg == SMU.PPSMC_MSG_TestMessage: out = arg + 1
    elif msg == SMU.PPSMC_MSG_GetSmuVersion: out = self.version
    elif msg == SMU.PPSMC_MSG_GetDriverIfVersion: out = self.driver_if_version
    elif msg == SMU.PPSMC_MSG_SetDriverDramAddrHigh: self.dram_addr = (self.dram_addr & 0xFFFFFFFF) | (arg << 32)
    elif msg == SMU.PPSMC_MSG_SetDriverDramAddrLow: self.dram_addr = (self.dram_addr & ~0xFFFFFFFF) | arg
    elif msg == SMU.PPSMC_MSG_EnableAllSmuFeatures: self.features = (1 << 64) - 1
    elif msg == SMU.PPSMC_MSG_GetRunningSmuFeaturesLow: out = self.features & 0xFFFFFFFF
    elif msg == SMU.PPSMC_MSG_GetRunningSmuFeaturesHigh: out = self.features >> 32
    elif msg in (SMU.PPSMC_MSG_GetDpmFreqByIndex, SMU.PPSMC_MSG_GetMaxDpmFreq):
      levels = self.DPM_MHZ.get(arg >> 16)
      if levels is None: result = SMU.PPSMC_Result_Failed
      elif msg == SMU.PPSMC_MSG_GetMaxDpmFreq: out = levels[-1]
      elif arg & 0xFFFF == 0xFF: out = len(levels)
      elif arg & 0xFFFF < len(levels): out = levels[arg & 0xFFFF]
      else: result = SMU.PPSMC_Result_Failed
      if msg == SMU.PPSMC_MSG_GetDpmFreqByIndex and arg >> 16 in self.DPM_BIT31: out |= 1 << 31
    elif msg in (SMU.PPSMC_MSG_SetSoftMinByFreq, SMU.PPSMC_MSG_SetSoftMaxByFreq):
      (self.soft_min if msg == SMU.PPSMC_MSG_SetSoftMinByFreq else self.soft_max)[arg >> 16] = arg & 0xFFFF
    elif msg == SMU.PPSMC_MSG_TransferTableSmu2Dram:
      if arg != SMU.TABLE_SMU_METRICS or not self.dram_addr: result = SMU.PPSMC_Result_CmdRejectedPrereq
      else: self._write_metrics()
    else: result = SMU.PPSMC_Result_UnknownCmd
    rf.poke(self.arg, out & 0xFFFFFFFF)
    rf.poke(self.resp, result)

  SOC_MHZ, FCLK_MHZ, AMBIENT_C = 1200, 1900, 35

  def _write_metrics(self) -> None:
    """SmuMetrics_t (smu13_driver_if_v13_0_0.h) as the firmware fills it, from the mock's state: the GFX clock at
    the DPM level the driver allowed (its soft maximum, else the top level) while the engines run and at the lowest
    level when idle; GFX activity the share of the last second the engines ran dispatches; temperatures moving
    halfway to what that activity heats them to at each update; power from clock and activity."""
    self.metrics_count += 1
    cp = getattr(self.gpu, "cp", None)
    activity = cp.gpu.busy_percent() if cp is not None else 0
    levels = self.DPM_MHZ[SMU.PPCLK_GFXCLK]
    gfx = self.soft_max.get(SMU.PPCLK_GFXCLK, levels[-1]) if activity else self.soft_min.get(SMU.PPCLK_GFXCLK, levels[0])
    uclk = self.soft_max.get(SMU.PPCLK_UCLK, self.DPM_MHZ[SMU.PPCLK_UCLK][-1])
    self.temperature += (self.AMBIENT_C + 0.4 * activity - self.temperature) / 2
    edge = round(self.temperature)
    m = SMU.struct_SmuMetricsExternal_t()
    s = m.SmuMetrics
    s.CurrClock[SMU.PPCLK_GFXCLK], s.CurrClock[SMU.PPCLK_SOCCLK] = gfx, self.SOC_MHZ
    s.CurrClock[SMU.PPCLK_UCLK], s.CurrClock[SMU.PPCLK_FCLK] = uclk, self.FCLK_MHZ
    s.AverageGfxclkFrequencyPostDs = s.AverageGfxclkFrequencyPreDs = gfx
    s.AverageMemclkFrequencyPostDs = uclk
    s.AverageGfxActivity, s.AverageUclkActivity = activity, activity // 3
    s.AverageSocketPower = s.AverageTotalBoardPower = 25 + round(gfx * activity / 1000)
    s.AvgTemperature[SMU.TEMP_EDGE], s.AvgTemperature[SMU.TEMP_HOTSPOT], s.AvgTemperature[SMU.TEMP_MEM] = edge, edge + 8, edge + 4
    s.AvgFanRpm = 800 + 20 * activity
    s.MetricsCounter = self.metrics_count
    self.last_metrics = m
    self.gpu.write_mc(self.dram_addr, bytes(m))
