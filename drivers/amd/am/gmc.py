"""GMC: the memory controller's two VM hubs (MMHUB for SDMA/PSP/IH clients, the GC hub for shaders and the CP),
their 4-level GPU page tables for VMID 0, and TLB invalidation.

Page tables (gfx10/11 layout): PDB2 -> PDB1 -> PDB0 -> PTB, indexed by VA bits 47:39, 38:30, 29:21, 20:12 of the
address relative to the context's PAGE_TABLE_START; 512 eight-byte entries a level, 4 KiB pages. A PDE holds the
next table's physical VRAM address | VALID. A PTE holds the page's address (physical VRAM address: MC_VM_FB_OFFSET
<< 24 + offset, gmc_v11_0_get_vm_pde / amdgpu_gmc_vram_mc2pa; bus address for system memory) with
the flags below, whose values are those of Linux's amdgpu_vm.h (AMDGPU_PTE_*: hardware facts; amdgpu_vm.h is not in
hcq's autogen yet). CONTEXT0_CNTL.PAGE_TABLE_DEPTH = 3 says four levels.

TLB invalidation uses engine 17 of each hub: take its semaphore (MMHUB: a read returns 1 when taken), write REQ with
the VMID bit and the levels to drop, wait for that VMID's bit in ACK, release the semaphore. Each wait is bounded and
names its register.
"""
from __future__ import annotations

import sys
from array import array

from .block import IPBlock

PTE_VALID, PTE_SYSTEM, PTE_SNOOPED = 1 << 0, 1 << 1, 1 << 2
PTE_EXECUTABLE, PTE_READABLE, PTE_WRITEABLE = 1 << 4, 1 << 5, 1 << 6
PDE_PTE = 1 << 54
def PTE_FRAG(x: int) -> int: return (x & 0x1F) << 7
def PTE_MTYPE_NV10(x: int) -> int: return (x & 7) << 48
MTYPE_UC = 3
PTE_RWX = PTE_VALID | PTE_READABLE | PTE_WRITEABLE | PTE_EXECUTABLE
ADDR_MASK = ((1 << 48) - 1) & ~0xFFF
VM_BASE, VM_SIZE = 0x2000_0000_0000, 1 << 44     # the GPU VA range AM hands out (mirrored in the process)
INV_ENGINE = 17
FAULT_KINDS = ("RANGE", "DUMMY_PAGE", "PDE0", "VALID", "READ", "WRITE", "EXECUTE")   # VM_CONTEXT*_CNTL fault bits
MAX_FRAG = 9          # fragments up to 2 MiB (Linux amdgpu's default vm_fragment_size)


def _fragments(va: int, addrs) -> list[tuple[int, int, int]]:
  """The pages as blocks (first index, pages, fragment field): 2^f pages that are contiguous both in VA and in VRAM
  and aligned to 2^f pages in both may say so (PTE_FRAG(f), up to MAX_FRAG), so that the TLB caches them as one
  entry; 0 elsewhere. A fragment never spans two map calls, so unmapping what one map call mapped (AMSession frees
  whole buffers) leaves no stale one; an unmap of part of one, or a map over part of one, narrows the fragments
  around it (GMC._narrow_fragments). addrs a range of 4 KiB steps is contiguous as a whole (no page-by-page look)."""
  n, out, i = len(addrs), [], 0
  whole = isinstance(addrs, range) and addrs.step == 0x1000
  while i < n:
    run = n - i if whole else 1              # the contiguous pages from i
    while i + run < n and addrs[i + run] == addrs[i] + run * 0x1000: run += 1
    j = i
    while j < i + run:
      vp, pp, left = (va >> 12) + j, addrs[j] >> 12, i + run - j
      f = min(MAX_FRAG, (vp & -vp).bit_length() - 1 if vp else MAX_FRAG, (pp & -pp).bit_length() - 1 if pp else MAX_FRAG,
              left.bit_length() - 1)
      out.append((j, 1 << f, f))
      j += 1 << f
    i += run
  return out


def _ptes(va: int, addrs, base: int, flags: int, system: bool) -> array:
  """The PTEs of the pages at va, in order: a block of contiguous pages as one range of 4 KiB steps (the flags sit
  outside the address bits, so each PTE is the previous one plus a page)."""
  if system: return array("Q", [(a & ADDR_MASK) | flags for a in addrs])
  out = array("Q")
  for j, count, f in _fragments(va, addrs):
    first = ((base + addrs[j]) & ADDR_MASK) | flags | PTE_FRAG(f)
    out.extend(range(first, first + count * 0x1000, 0x1000))
  return out


class Hub:
  """One VM hub (MMHUB: prefix MMVM/MMMC, mmhub_v3_0.c; the GC hub: GCVM/GCMC, gfxhub_v3_0.c, on GC 11.0.3
  gfxhub_v3_0_3.c's register layout: regs.GFXHUB_MODULES)."""

  def __init__(self, regs, vm: str, mc: str, semaphore: bool):
    self.regs, self.vm, self.mc, self.semaphore = regs, vm, mc, semaphore
    self.enabled = False        # gart_enable done (the GC hub: only once GFX is powered, after the RLC autoload)

  def program(self, fb_base: int, fb_end: int, root_pa: int, dummy_pa: int, scratch_pa: int, vf: bool = False) -> None:
    """The hub's gart_enable, step by step as Linux mmhub_v3_0_gart_enable / gfxhub_v3_0_gart_enable do it (the
    helpers named below are theirs, mmhub_v3_0_* and gfxhub_v3_0_*). Page-table and default-page addresses are
    physical VRAM addresses (amdgpu_gmc_vram_mc2pa: the walker and the L2 take physical addresses)."""
    self.gart_aperture(root_pa)
    if not vf: self.system_aperture(fb_base, fb_end, dummy_pa, scratch_pa)
    self.tlb_regs()
    if not vf: self.cache_regs()
    self.enable_system_domain()
    if not vf: self.disable_identity_aperture()
    self.program_invalidation()
    self.enabled = True

  def gart_aperture(self, root_pa: int) -> None:
    """init_gart_aperture_regs (setup_vm_pt_regs): VMID 0's page-table base and range."""
    r, vm = self.regs, self.vm
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", (root_pa | PTE_VALID) & 0xFFFFFFFF)
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", root_pa >> 32)
    start, end = VM_BASE >> 12, (VM_BASE + VM_SIZE - 1) >> 12
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", start & 0xFFFFFFFF)
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", start >> 32)
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", end & 0xFFFFFFFF)
    r.write(f"{vm}_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", end >> 32)

  def system_aperture(self, fb_base: int, fb_end: int, dummy_pa: int, scratch_pa: int) -> None:
    """init_system_aperture_regs (not on a VF: the host programs them): AGP off, the system aperture over the frame
    buffer with its default page, the protection-fault default page, PTE read retry on page migration."""
    r, vm, mc = self.regs, self.vm, self.mc
    r.write(f"{mc}_VM_AGP_BASE", 0)
    r.write(f"{mc}_VM_AGP_BOT", 0xFFFFFF)     # AGP aperture off (BOT > TOP)
    r.write(f"{mc}_VM_AGP_TOP", 0)
    r.write(f"{mc}_VM_SYSTEM_APERTURE_LOW_ADDR", fb_base >> 18)
    r.write(f"{mc}_VM_SYSTEM_APERTURE_HIGH_ADDR", fb_end >> 18)
    r.write(f"{mc}_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB", (scratch_pa >> 12) & 0xFFFFFFFF)
    r.write(f"{mc}_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", scratch_pa >> 44)
    r.write(f"{vm}_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", (dummy_pa >> 12) & 0xFFFFFFFF)
    r.write(f"{vm}_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", dummy_pa >> 44)
    r.update(f"{vm}_L2_PROTECTION_FAULT_CNTL2", ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY=1)

  def tlb_regs(self) -> None:
    """init_tlb_regs: the L1 TLB on, system accesses mapped by the page tables (mode 3), the advanced driver model."""
    self.regs.update(f"{self.mc}_VM_MX_L1_TLB_CNTL", ENABLE_L1_TLB=1, SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1,
                     SYSTEM_APERTURE_UNMAPPED_ACCESS=0, ECO_BITS=0, MTYPE=MTYPE_UC)

  def cache_regs(self) -> None:
    """init_cache_regs: the L2 (the PF programs a VF's)."""
    r, vm = self.regs, self.vm
    r.update(f"{vm}_L2_CNTL", ENABLE_L2_CACHE=1, ENABLE_L2_FRAGMENT_PROCESSING=0, ENABLE_DEFAULT_PAGE_OUT_TO_SYSTEM_MEMORY=1,
             L2_PDE0_CACHE_TAG_GENERATION_MODE=0, PDE_FAULT_CLASSIFICATION=0, CONTEXT1_IDENTITY_ACCESS_MODE=1,
             IDENTITY_MODE_FRAGMENT_SIZE=0)
    r.update(f"{vm}_L2_CNTL2", INVALIDATE_ALL_L1_TLBS=1, INVALIDATE_L2_CACHE=1)
    r.update(f"{vm}_L2_CNTL3", BANK_SELECT=9, L2_CACHE_BIGK_FRAGMENT_SIZE=6)     # no translate_further on gfx11
    r.update(f"{vm}_L2_CNTL4", VMC_TAP_PDE_REQUEST_PHYSICAL=0, VMC_TAP_PTE_REQUEST_PHYSICAL=0)
    r.update(f"{vm}_L2_CNTL5", L2_CACHE_SMALLK_FRAGMENT_SIZE=0)

  def enable_system_domain(self) -> None:
    """enable_system_domain: context 0 on, four levels (PAGE_TABLE_DEPTH 3: AM's VMID 0 is a 4-level VM, not Linux's
    one-level GART); every protection fault raises an interrupt and takes the default page
    (gmc_v11_0_vm_fault_interrupt_state sets the *_ENABLE_INTERRUPT bits of every context: without them a VM fault
    never reaches the IH ring)."""
    faults = {f"{k}_PROTECTION_FAULT_ENABLE_{w}": 1 for k in FAULT_KINDS for w in ("INTERRUPT", "DEFAULT")}
    self.regs.write(f"{self.vm}_CONTEXT0_CNTL", ENABLE_CONTEXT=1, PAGE_TABLE_DEPTH=3, **faults)

  def disable_identity_aperture(self) -> None:
    """disable_identity_aperture (not on a VF)."""
    r, vm = self.regs, self.vm
    r.write(f"{vm}_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_LO32", 0xFFFFFFFF)
    r.write(f"{vm}_L2_CONTEXT1_IDENTITY_APERTURE_LOW_ADDR_HI32", 0xF)
    r.write(f"{vm}_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_LO32", 0)
    r.write(f"{vm}_L2_CONTEXT1_IDENTITY_APERTURE_HIGH_ADDR_HI32", 0)
    r.write(f"{vm}_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_LO32", 0)
    r.write(f"{vm}_L2_CONTEXT_IDENTITY_PHYSICAL_OFFSET_HI32", 0)

  def program_invalidation(self) -> None:
    """program_invalidation: every invalidation engine covers the whole address range."""
    r, vm = self.regs, self.vm
    for eng in range(18):
      r.write(f"{vm}_INVALIDATE_ENG{eng}_ADDR_RANGE_LO32", 0xFFFFFFFF)
      r.write(f"{vm}_INVALIDATE_ENG{eng}_ADDR_RANGE_HI32", 0x1F)

  def flush_tlb(self, vmid: int = 0, vf: bool = False) -> None:
    """gmc_v11_0_flush_gpu_tlb's register path: semaphore (MMHUB), REQ, wait ACK, release; then MMHUB's private
    invalidation (MMVM_L2_BANK_SELECT_RESERVED_CID2 bit 25, read back), which a VF leaves to the host."""
    r, eng = self.regs, f"{self.vm}_INVALIDATE_ENG{INV_ENGINE}"
    if self.semaphore: r.wait(f"{eng}_SEM", 1, 1)
    r.write(f"{eng}_REQ", PER_VMID_INVALIDATE_REQ=1 << vmid, FLUSH_TYPE=0, INVALIDATE_L2_PTES=1, INVALIDATE_L2_PDE0=1,
            INVALIDATE_L2_PDE1=1, INVALIDATE_L2_PDE2=1, INVALIDATE_L1_PTES=1)
    r.wait(f"{eng}_ACK", 1 << vmid, 1 << vmid)
    if self.semaphore: r.write(f"{eng}_SEM", 0)
    if self.vm == "MMVM" and not vf: self.private_invalidation()

  def private_invalidation(self) -> None:
    """MMHUB's additional private invalidation (bit 25 of MMVM_L2_BANK_SELECT_RESERVED_CID2), read back."""
    self.regs.update("MMVM_L2_BANK_SELECT_RESERVED_CID2", RESERVED_CACHE_PRIVATE_INVALIDATION=1)
    self.regs.read("MMVM_L2_BANK_SELECT_RESERVED_CID2")


class GMC(IPBlock):
  name = "gmc"

  def sw_init(self) -> None:
    d = self.dev
    self.fb_base = (d.mmhub_regs.read("MMMC_VM_FB_LOCATION_BASE") & 0xFFFFFF) << 24
    self.fb_end = ((d.mmhub_regs.read("MMMC_VM_FB_LOCATION_TOP") & 0xFFFFFF) << 24) | 0xFFFFFF
    # the physical address of VRAM offset 0 (mmhub_v3_0_get_mc_fb_offset: FB_OFFSET << 24; Linux keeps it as
    # vm_manager.vram_base_offset and amdgpu_gmc_vram_mc2pa turns MC addresses into these)
    self.vram_base = (d.mmhub_regs.read("MMMC_VM_FB_OFFSET") & 0xFFFFFF) << 24
    d.vram.fb_base = self.fb_base
    self.step(f"framebuffer at MC {self.fb_base:#x}..{self.fb_end:#x}, physical base {self.vram_base:#x}")
    self.root = d.vram.alloc(0x1000, "page directory (PDB2)")
    self.dummy = d.vram.alloc(0x1000, "fault page")
    self.scratch = d.vram.alloc(0x1000, "system aperture default page (mem_scratch)")
    self.hubs = {"MMHUB": Hub(d.mmhub_regs, "MMVM", "MMMC", True), "GC": Hub(d.gfxhub_regs, "GCVM", "GCMC", False)}
    # the directory entries (PDB2/PDB1/PDB0) as this instance wrote them: (table offset, index) -> entry. Only this
    # instance writes its directories (the root and every table come zeroed from its own VRAM allocations), so an
    # entry known here is the one in VRAM, and finding a page table costs no VRAM read (a read is 2 USB transfers
    # behind a bridge)
    self._pde: dict[tuple[int, int], int] = {}

  def pa(self, offset: int) -> int:
    """The physical address of VRAM offset `offset`: what PTEs, PDEs and CONTEXT0_PAGE_TABLE_BASE_ADDR hold
    (gmc_v11_0_get_vm_pde: amdgpu_gmc_vram_mc2pa). Engines that take MC addresses (PSP, IH, SMU) keep VRAMBuf.mc."""
    return self.vram_base + offset

  def hw_init(self) -> None:
    """gmc_v11_0_gart_enable: only MMHUB now; the GC hub waits for GFX power (enable_gc_hub, from gfx after the RLC
    autoload: gfx_v11_0_gfxhub_enable)."""
    self.step(f"MMHUB gart_enable: VM context 0 (4-level page tables at physical {self.pa(self.root.offset):#x}), "
              f"L1 TLB, L2, apertures")
    self._program("MMHUB")
    self.dev.nbio.hdp_flush()          # "Flush HDP after it is initialized"
    self.flush_tlb()

  def enable_gc_hub(self) -> None:
    """gfx_v11_0_gfxhub_enable: the GC hub's gart_enable, then its TLB flushed (GFX is powered: after the RLC
    autoload)."""
    self.step("GC hub gart_enable (GFX powered after the RLC autoload)")
    self._program("GC")
    self.dev.nbio.hdp_flush()
    with self.dev.lock: self.hubs["GC"].flush_tlb(0)

  def _program(self, name: str) -> None:
    self.hubs[name].program(self.fb_base, self.fb_end, self.pa(self.root.offset), self.pa(self.dummy.offset),
                            self.pa(self.scratch.offset), vf=self.dev.vf)

  def flush_tlb(self) -> None:
    """Both hubs' TLBs; the GC hub's only once it is enabled (gmc_v11_0_flush_gpu_tlb skips GFXHUB while GFX is off)."""
    with self.dev.lock:          # engine 17's REQ/ACK is one request at a time (the GC hub has no semaphore)
      for hub in self.hubs.values():
        if hub.enabled: hub.flush_tlb(0, vf=self.dev.vf)

  # ---- page tables
  def _entry(self, table_off: int, index: int) -> int:
    return int.from_bytes(self.dev.vram.read(table_off + index * 8, 8), "little")

  def _set(self, table_off: int, index: int, value: int) -> None:
    self.dev.vram.write(table_off + index * 8, value.to_bytes(8, "little"))

  def map(self, va: int, addrs, system: bool, flags: int = PTE_RWX, flush: bool = True) -> None:
    """Map 4 KiB pages at va: addrs are each page's address (VRAM offsets, or bus addresses of system memory)."""
    addrs = addrs if isinstance(addrs, range) else list(addrs)
    with self.dev.lock: self._map(va, addrs, system, flags, flush)     # tables made on first use are shared

  def map_vram(self, va: int, offset: int, size: int, flags: int = PTE_RWX, flush: bool = True) -> None:
    """Map the contiguous VRAM [offset, offset+size) at va (VRAM PTEs: physical addresses, no SYSTEM bit)."""
    self.map(va, range(offset, offset + size, 0x1000), system=False, flags=flags, flush=flush)

  def _map(self, va: int, addrs: list, system: bool, flags: int, flush: bool) -> None:
    from ....errors import DeviceError
    d = self.dev
    n = len(addrs)
    if not VM_BASE <= va <= va + n * 0x1000 <= VM_BASE + VM_SIZE or va & 0xFFF:
      raise DeviceError(f"{d.label}: GPU VA {va:#x}+{n * 0x1000:#x} is outside the VM range {VM_BASE:#x}+{VM_SIZE:#x} "
                        f"or unaligned")
    flags |= PTE_SYSTEM | PTE_SNOOPED | PTE_MTYPE_NV10(MTYPE_UC) if system else 0
    ptes = _ptes(va, addrs, 0 if system else self.pa(0), flags, system)
    if sys.byteorder != "little": ptes.byteswap()       # PTEs are little-endian in VRAM
    i, tables = 0, {}
    try:
      while i < n:                       # one page table (2 MiB of VA) at a time, its entries written at once
        rel = va + i * 0x1000 - VM_BASE
        lo = (rel >> 12) & 0x1FF
        count = min(n - i, 512 - lo)
        ptb = tables[rel >> 21] = self._table_of(rel)   # may fail (no VRAM for a new table): the pages so far are undone
        d.vram.write(ptb + lo * 8, ptes[i:i + count].tobytes())
        i += count
      self._narrow_fragments(va, n, tables)      # the pages around lose any fragment that covered these
      if flush:
        d.nbio.hdp_flush()
        self.flush_tlb()
    except BaseException:
      # a failed map leaves no PTE behind: the caller frees the memory next, which the GPU must not reach then
      self._clear(va, i)
      raise

  def lookup(self, va: int) -> int | None:
    """The PTE that maps va in VMID 0's tables as they are in VRAM (None: no page table there)."""
    with self.dev.lock:
      rel = va - VM_BASE
      ptb = self._table_of(rel, make=False)
      return None if ptb is None else self._entry(ptb, (rel >> 12) & 0x1FF)

  def _table_of(self, rel: int, make: bool = True) -> int | None:
    """VRAM offset of the page table (PTB) covering rel (VA - VM_BASE), making the directories on the way (make=False:
    None where there is none)."""
    table, known = self.root.offset, self._pde
    for level in (3, 2, 1):
      idx = (rel >> (12 + 9 * level)) & 0x1FF
      e = known.get((table, idx))
      if e is None: e = known[table, idx] = self._entry(table, idx)
      if not e & PTE_VALID:
        if not make: return None
        t = self.dev.vram.alloc(0x1000, f"page table level {4 - level}")
        e = self.pa(t.offset) | PTE_VALID
        self._set(table, idx, e)
        known[table, idx] = e
      table = (e & ADDR_MASK) - self.vram_base
    return table

  def unmap(self, va: int, pages: int) -> None:
    """Clear the PTEs of `pages` 4 KiB pages at va (tables stay), then flush the TLBs."""
    with self.dev.lock: self._unmap(va, pages)

  def _unmap(self, va: int, pages: int) -> None:
    self._clear(va, pages)
    self.dev.nbio.hdp_flush()
    self.flush_tlb()

  def _clear(self, va: int, pages: int) -> None:
    """Clear the PTEs of `pages` pages at va where there is a page table (no flush)."""
    rel0, tables = va - VM_BASE, {}
    for key in range(rel0 >> 21, ((rel0 + pages * 0x1000 - 1) >> 21) + 1):   # each 2 MiB: its page table found once
      ptb = tables[key] = self._table_of(key << 21, make=False)
      if ptb is None: continue
      first = max(rel0, key << 21)
      last = min(rel0 + pages * 0x1000, (key + 1) << 21)
      lo, n = (first >> 12) & 0x1FF, (last - first) >> 12
      self.dev.vram.fill(ptb + lo * 8, n * 8)
    self._narrow_fragments(va, pages, tables)

  def _narrow_fragments(self, va: int, pages: int, tables: dict) -> None:
    """A page next to [va, va + pages) whose fragment covers part of that range claims a contiguity that no longer
    holds (part of a map call's range unmapped or mapped again): every page of that fragment outside the range gets
    the largest aligned fragment inside its old one that stays clear of the range. A fragment lies inside one page
    table (MAX_FRAG, aligned), so only a neighbour in the range's first or last page table (tables: 2 MiB index ->
    its page table, as the caller found them) can have one: one PTE read at each end, at most one table rewritten."""
    if pages <= 0: return
    first, end = (va - VM_BASE) >> 12, ((va - VM_BASE) >> 12) + pages        # page numbers relative to VM_BASE
    for edge, inner in ((first - 1, first), (end, end - 1)):
      if edge >> 9 != inner >> 9: continue          # in another page table: no fragment of it reaches the range
      ptb = tables.get(edge >> 9)
      if ptb is None: continue
      e = self._entry(ptb, edge & 0x1FF)
      f = min((e >> 7) & 0x1F, MAX_FRAG)      # (larger ones are not this driver's: a table's worth at most)
      block = edge & ~((1 << f) - 1)
      if not e & PTE_VALID or block + (1 << f) <= first or block >= end: continue
      raw = self.dev.vram.read(ptb + (block & 0x1FF) * 8, 8 << f)
      entries = [int.from_bytes(raw[k * 8:k * 8 + 8], "little") for k in range(1 << f)]
      for k, pte in enumerate(entries):
        p = block + k
        if first <= p < end or not pte & PTE_VALID: continue
        g = min((pte >> 7) & 0x1F, f)
        while g and (p & ~((1 << g) - 1)) < end and first < (p & ~((1 << g) - 1)) + (1 << g): g -= 1
        entries[k] = (pte & ~PTE_FRAG(0x1F)) | PTE_FRAG(g)
      self.dev.vram.write(ptb + (block & 0x1FF) * 8, b"".join(x.to_bytes(8, "little") for x in entries))
