"""The command processors of the mock Navi 31 behind its registers: compute HQDs (CP_HQD_*) and the SDMA0 ring
(SDMA0_QUEUE0_*), run by the mock gfx1100's PM4/SDMA engines and RDNA3 emulator (mockgpu/amd: queues.py, gpu.py).

- A compute queue starts when the driver sets CP_HQD_ACTIVE.ACTIVE: the HQD registers of the queue GRBM_GFX_CNTL
  selects are read then (ring base, size from CP_HQD_PQ_CONTROL.QUEUE_SIZE = log2(ring dwords) - 1, the read pointer
  report address, the doorbell offset in dwords), and its MQD at CP_MQD_BASE_ADDR (struct v11_compute_mqd): every
  field of the MQD's HQD part must agree with its register (a mismatch, or no MQD, is a DeviceError naming the
  field). It stops when ACTIVE is cleared, or on a dequeue request, after which the read and write pointers are
  saved into the MQD (and the HQD registers) as the CP does.
- The SDMA queue starts when SDMA0_QUEUE0_RB_CNTL.RB_ENABLE is set (RB_SIZE = log2(ring dwords)).
- Doorbells: a 64-bit store at the queue's doorbell offset of the doorbell BAR is its write pointer.
- Memory: the engines access GPU virtual addresses as host addresses (the mock's rule: GPU VA == host VA). What they
  may touch is what the GC hub's page tables map, walked at every GC hub TLB invalidation: a system PTE holds a bus
  address, resolved to a host page through the IOMMU model or pagemap (gpu.py bus_pages): a page at its own host
  address is reached there, a host page elsewhere is viewed at the VA (HostMemory.map_view of host memory: the same
  pages mapped again); a VRAM PTE's pages are viewed at the VA from the VRAM memory file (shared with a CPU mapping of
  the BAR the driver may have made at the same VA). A VA the process only reserved (PROT_NONE: tinygrad keeps its GPU's
  whole VA range so) takes the view; views no longer mapped are let go. Anything else is a GPU fault: the queue stops
  and a VM fault goes to the IH ring (client UTCL2) with the address. (A mapping at a VA where the process has other
  memory cannot be viewed there: it faults too.) Behind a USB bridge, system pages at the bus addresses of the
  bridge's windows (its SRAM, the a000/b800 XDATA windows: memory files of the mock bridge) are viewed at their VA the
  same way.
- Interrupts: an end-of-pipe (RELEASE_MEM int_sel) or SDMA trap posts an IH entry: client GRBM_CP 0x14 source 181
  (CP EOP) or client GFX 0x0a source 49 (SDMA trap), with the context id in the first data dword (soc21 ids).
"""
from __future__ import annotations

import ctypes
from array import array

from ....autogen.amd.v11_structs import struct_v11_compute_mqd as MQD
from ....errors import DeviceError, GPUFault, OSCallError
from ..gpu import GPUProperties, MockAMDGPU
from ..queues import COMPUTE, SDMA
from .blocks import PDE_PTE, PTE_SYSTEM, PTE_VALID, ADDR_MASK
from .discovery import GC_HWID, NBIF_HWID, SDMA0_HWID

# S2A doorbell agent ids: the GC's (nbio_v4_3_gc_doorbell_init writes ENTRY_0 = 0x30000007: AWID 3) and SDMA0's
# (nbio_v4_3_sdma_doorbell_range: AWID 0xe)
S2A_AWID_GC, S2A_AWID_SDMA0 = 0x3, 0xE

MQD_SIZE = ctypes.sizeof(MQD)
# gfx_v11_0.c golden_settings_gc_11_0: SOC15_REG_GOLDEN_VALUE(GC, 0, regTCP_CNTL, 0x20000000, 0x20000000), applied by
# gfx_v11_0_init_golden_registers on every GC 11 part before the CP runs (gc_11_0_0_sh_mask.h names no TCP_CNTL field)
TCP_CNTL_GOLDEN = 0x20000000
PAGE = 0x1000
# gfx11 interrupt ids (soc15_ih_clientid.h SOC21_IH_CLIENTID_*, irqsrcs_gfx_11_0_0.h): CP end-of-pipe GRBM_CP 0x14 /
# 181, the SDMA trap GFX 0x0a / 49 (sdma_v6_0_sw_init registers it there), the GC hub's UTCL2 fault GFX 0x0a / 0
CLIENT_CP, SRC_CP_EOP, CLIENT_SDMA0, SRC_SDMA_TRAP, CLIENT_UTCL2 = 0x14, 181, 0x0A, 49, 0x0A


class CommandProcessors:
  def __init__(self, navi):
    self.navi = navi
    # the engines run RDNA3 code: gfx1100's tables for the Navi 31 and for the VF's Navi 32 (gfx1101) alike (the same
    # RDNA3 ISA, the same 768 KiB VGPR file: ROCm's GPU specifications table)
    self.gpu = MockAMDGPU(navi.os, 0, 0x744C, GPUProperties())
    self.gpu.listener = self
    # the MMU's state lives across a reset's hook(): the reset's remap() (its hubs off) lets go of what it holds
    self.mapped: list[tuple[int, int]] = []        # the ranges the engines reach (system pages and VRAM views)
    # (va, size, (memory file, offset)) viewed at va for the engines: VRAM, or a USB bridge's window
    self.vram_views: set[tuple[int, int, tuple[int, int]]] = set()
    self._tables: dict[tuple, tuple] = {}      # (page table MC address, its VA) -> (its bytes, its ranges)
    self.aperture_pieces: set[tuple] = set()   # system-aperture pages queues named (reach_aperture)
    self.hook()

  def hook(self) -> None:
    """Take over the queue registers (at creation, and again after a reset rebuilt the register file)."""
    rf = self.navi.regs
    g = lambda n: rf.addr(GC_HWID, "gc_11_0_0", n)
    self.hqd = {n: g(n) for n in ("GRBM_GFX_CNTL", "CP_MEC_DOORBELL_RANGE_LOWER", "CP_MEC_DOORBELL_RANGE_UPPER",
                                  "CP_HQD_PERSISTENT_STATE", "CP_HQD_PQ_BASE", "CP_HQD_PQ_BASE_HI", "CP_HQD_PQ_RPTR_REPORT_ADDR",
                                  "CP_HQD_PQ_RPTR_REPORT_ADDR_HI", "CP_HQD_PQ_WPTR_POLL_ADDR", "CP_HQD_PQ_WPTR_POLL_ADDR_HI",
                                  "CP_HQD_PQ_DOORBELL_CONTROL", "CP_HQD_PQ_CONTROL", "CP_HQD_ACTIVE",
                                  "CP_MQD_BASE_ADDR", "CP_MQD_BASE_ADDR_HI")}
    rf.hook(self.hqd["CP_HQD_ACTIVE"], write=self._hqd_active)
    rf.hook(g("CP_HQD_DEQUEUE_REQUEST"), write=lambda v: v and self._hqd_stop())
    s = lambda n: rf.addr(SDMA0_HWID, "sdma_6_0_0", n)
    self.sdma = {n: s(n) for n in ("SDMA0_QUEUE0_RB_CNTL", "SDMA0_QUEUE0_RB_BASE", "SDMA0_QUEUE0_RB_BASE_HI",
                                   "SDMA0_QUEUE0_RB_RPTR_ADDR_LO", "SDMA0_QUEUE0_RB_RPTR_ADDR_HI",
                                   "SDMA0_QUEUE0_DOORBELL_OFFSET", "SDMA0_QUEUE0_DOORBELL")}
    rf.hook(self.sdma["SDMA0_QUEUE0_RB_CNTL"], write=self._sdma_cntl)
    rf.hook(s("SDMA0_STATUS_REG"), read=self._sdma_status)
    rf.poke(s("SDMA0_F32_CNTL"), rf.module("sdma_6_0_0").REGS["SDMA0_F32_CNTL"].encode(HALT=1, TH1_RESET=1))
    self.sdma["SDMA0_F32_CNTL"] = s("SDMA0_F32_CNTL")
    self.sdma_saved = {"rptr": 0, "wptr": 0}   # RB_RPTR / RB_WPTR as the last ring left them (kept while it is off)
    rf.hook(s("SDMA0_QUEUE0_RB_RPTR"), write=lambda v: self.sdma_saved.__setitem__("rptr", v))
    rf.hook(s("SDMA0_QUEUE0_RB_WPTR"), write=lambda v: self.sdma_saved.__setitem__("wptr", v))
    # the MEC (RS64): each pipe's program counter, latched by the pipe's reset pulse (gfx_v11_0_config_gfx_rs64)
    self.mec_pc: dict[int, int] = {}         # pipe -> CP_MEC_RS64_PRGRM_CNTR_START(_HI) as written (dwords)
    self.mec_latched: dict[int, int] = {}    # pipe -> the program counter its last reset pulse took
    self.mec_by_host = False                 # an SR-IOV VF: the host started the MEC (virt.py)
    self.g = g
    rf.hook(g("CP_MEC_RS64_PRGRM_CNTR_START"), write=lambda v: self._mec_pc(v, hi=False))
    rf.hook(g("CP_MEC_RS64_PRGRM_CNTR_START_HI"), write=lambda v: self._mec_pc(v, hi=True))
    self._mec_cntl_last = rf.values.get(g("CP_MEC_RS64_CNTL"), 0)
    rf.hook(g("CP_MEC_RS64_CNTL"), write=self._mec_cntl)
    self.queues: dict[tuple, object] = {}      # (kind, me, pipe, queue) -> the engine's queue
    self.mqds: dict[tuple, int] = {}           # (kind, me, pipe, queue) -> the MQD address of an active HQD
    self.doorbells: dict[int, object] = {}     # doorbell byte offset -> queue
    self._next_qid = 1
    # where each queue stands: the read pointer (CP: dwords modulo the ring; SDMA: bytes) and the write pointer its
    # doorbell last gave, as the hardware's status registers show them
    rf.hook(g("CP_HQD_PQ_RPTR"), read=lambda: self._pointer(self._selected(), "rptr"))
    rf.hook(g("CP_HQD_PQ_WPTR_LO"), read=lambda: self._pointer(self._selected(), "wptr"))
    rf.hook(s("SDMA0_QUEUE0_RB_RPTR"), read=lambda: self._pointer(("sdma", 0, 0, 0), "rptr"))
    rf.hook(s("SDMA0_QUEUE0_RB_WPTR"), read=lambda: self._pointer(("sdma", 0, 0, 0), "wptr"))

  # ---- the MEC's state (gfx_v11_0_config_gfx_rs64, gfx_v11_0_cp_compute_enable)
  def _gc_field(self, reg: str, field: str) -> int:
    return self.navi.regs.fields("gc_11_0_0", reg, self.navi.regs.values.get(self.g(reg), 0))[field]

  def _mec_pc(self, value: int, hi: bool) -> None:
    if self._f("GRBM_GFX_CNTL", "MEID") != 1: return
    pipe = self._f("GRBM_GFX_CNTL", "PIPEID")
    old = self.mec_pc.get(pipe, 0)
    self.mec_pc[pipe] = (old & 0xFFFFFFFF) | (value << 32) if hi else (old & ~0xFFFFFFFF) | value

  def _mec_cntl(self, value: int) -> None:
    """A pipe whose MEC_PIPEn_RESET goes from 1 to 0 starts from the program counter written for it."""
    cntl = self.navi.regs.module("gc_11_0_0").REGS["CP_MEC_RS64_CNTL"]
    before, now = cntl.decode(self._mec_cntl_last), cntl.decode(value)
    for p in range(4):
      if before[f"MEC_PIPE{p}_RESET"] and not now[f"MEC_PIPE{p}_RESET"]: self.mec_latched[p] = self.mec_pc.get(p, 0)
    self._mec_cntl_last = value

  def mec_problem(self, pipe: int) -> str | None:
    """Why MEC pipe `pipe` does not run, None when it does: halted, the pipe in reset or inactive, or started from
    a program counter that is not the MEC firmware's start (its gfx_firmware_header_v2_0 ucode_start_addr >> 2)."""
    if self.mec_by_host: return None
    halt, active, reset = (self._gc_field("CP_MEC_RS64_CNTL", f) for f in ("MEC_HALT", f"MEC_PIPE{pipe}_ACTIVE", f"MEC_PIPE{pipe}_RESET"))
    if halt: return "CP_MEC_RS64_CNTL.MEC_HALT is 1 (the MEC is halted: gfx_v11_0_cp_compute_enable clears it)"
    if reset or not active:
      return f"CP_MEC_RS64_CNTL: pipe {pipe} {'in reset' if reset else 'not active'} (MEC_PIPE{pipe}_RESET {reset}, _ACTIVE {active})"
    start = self.navi.mec_start
    if start is None: return "no MEC firmware was loaded (PSP LOAD_IP_FW RS64_MEC)"
    pc = self.mec_latched.get(pipe)
    if pc != start >> 2:
      return (f"pipe {pipe} started from CP_MEC_RS64_PRGRM_CNTR_START(_HI) {pc if pc is None else hex(pc)}, the MEC "
              f"firmware starts at {start:#x} (PC {start >> 2:#x}; program it, then pulse MEC_PIPE{pipe}_RESET: "
              f"gfx_v11_0_config_gfx_rs64)")
    return None

  # ---- doorbells as NBIO routes them (nbio_v4_3_gc_doorbell_init / _sdma_doorbell_range) and the engines take them
  def _nbio_field(self, reg: str, field: str) -> int:
    rf = self.navi.regs
    return rf.fields("nbio_4_3_0", reg, rf.values.get(rf.addr(NBIF_HWID, "nbio_4_3_0", reg), 0))[field]

  def doorbell_problem(self, kind, offset: int) -> str | None:
    """Why a doorbell store at byte `offset` of the doorbell BAR does not reach its engine (None: it does)."""
    if kind == SDMA:
      if not self._nbio_field("S2A_DOORBELL_ENTRY_2_CTRL", "S2A_DOORBELL_PORT2_ENABLE") or \
         self._nbio_field("S2A_DOORBELL_ENTRY_2_CTRL", "S2A_DOORBELL_PORT2_AWID") != S2A_AWID_SDMA0:
        return f"S2A_DOORBELL_ENTRY_2_CTRL does not route doorbells to SDMA0 (port 2 enabled with AWID {S2A_AWID_SDMA0:#x})"
      lo = self._nbio_field("S2A_DOORBELL_ENTRY_2_CTRL", "S2A_DOORBELL_PORT2_RANGE_OFFSET")
      n = self._nbio_field("S2A_DOORBELL_ENTRY_2_CTRL", "S2A_DOORBELL_PORT2_RANGE_SIZE")
      if not lo <= offset // 4 < lo + n:
        return f"dword {offset // 4:#x} is outside S2A_DOORBELL_ENTRY_2_CTRL's SDMA range {lo:#x}+{n}"
      if self._f("SDMA0_F32_CNTL", "HALT"): return "SDMA0_F32_CNTL.HALT is 1 (the engine is halted: sdma_v6_0_gfx_resume_instance un-halts it)"
      return None
    if not self._nbio_field("S2A_DOORBELL_ENTRY_0_CTRL", "S2A_DOORBELL_PORT0_ENABLE") or \
       self._nbio_field("S2A_DOORBELL_ENTRY_0_CTRL", "S2A_DOORBELL_PORT0_AWID") != S2A_AWID_GC:
      return f"S2A_DOORBELL_ENTRY_0_CTRL does not route doorbells to the GC (port 0 enabled with AWID {S2A_AWID_GC:#x})"
    lo, hi = self._r("CP_MEC_DOORBELL_RANGE_LOWER") & 0xFFC, self._r("CP_MEC_DOORBELL_RANGE_UPPER") & 0xFFC
    if not lo <= offset <= hi:
      return f"byte {offset:#x} is outside the MEC's CP_MEC_DOORBELL_RANGE_LOWER/UPPER {lo:#x}..{hi:#x} (bytes)"
    return None

  def _ring(self, kind, offset: int, fn, value: int) -> None:
    why = self.doorbell_problem(kind, offset)
    if why is not None:
      self.navi.dropped_doorbells.append((offset, value, why))
      raise DeviceError(f"mock Navi 31 {self.navi.addr}: doorbell at {offset:#x} (value {value:#x}) dropped: {why}")
    fn(value)

  def _r(self, name: str) -> int: return self.navi.regs.values.get(self.hqd.get(name) or self.sdma[name], 0)

  def _f(self, name: str, field: str) -> int:
    """A field of a register by the names of the generated module (gc 11.0.0 or sdma 6.0.0)."""
    module = "sdma_6_0_0" if name.startswith("SDMA") else "gc_11_0_0"
    return self.navi.regs.fields(module, name, self._r(name))[field]

  # ---- compute HQDs
  def _selected(self) -> tuple:
    return ("compute", self._f("GRBM_GFX_CNTL", "MEID"), self._f("GRBM_GFX_CNTL", "PIPEID"), self._f("GRBM_GFX_CNTL", "QUEUEID"))

  def _hqd_active(self, value: int) -> None:
    key = self._selected()
    if not self._f("CP_HQD_ACTIVE", "ACTIVE"): return self._stop(key)
    if key[1] == 1:
      why = self.mec_problem(key[2])
      if why: raise DeviceError(f"mock Navi 31 {self.navi.addr} CP: HQD me 1 pipe {key[2]} activated while the MEC does not run: {why}")
    tcp = self.navi.regs.values.get(self.g("TCP_CNTL"), 0)
    if not tcp & TCP_CNTL_GOLDEN:
      raise DeviceError(f"mock Navi 31 {self.navi.addr} CP: HQD me {key[1]} pipe {key[2]} activated with TCP_CNTL "
                        f"{tcp:#x}: bit 29 clear, the golden setting gfx_v11_0_init_golden_registers applies on every GC 11 "
                        f"part (golden_settings_gc_11_0) is missing")
    if not self._f("CP_HQD_PERSISTENT_STATE", "PRELOAD_REQ"):
      # gfx_v11_0_compute_mqd_init keeps the register's reset value's PRELOAD_REQ (gc_11_0_0_default.h 0x0be05501);
      # tinygrad 0.14 sets it too: a queue without it has nothing preloaded for the CP to fetch from
      raise DeviceError(f"mock Navi 31 {self.navi.addr} CP: HQD me {key[1]} pipe {key[2]} queue {key[3]} activated with "
                        f"CP_HQD_PERSISTENT_STATE.PRELOAD_REQ 0")
    self.reach_aperture(self._mqd_address(key), MQD_SIZE)
    self.mqds[key] = self._check_mqd(key)
    ring = ((self._r("CP_HQD_PQ_BASE_HI") << 32) | self._r("CP_HQD_PQ_BASE")) << 8
    size = 4 << (self._f("CP_HQD_PQ_CONTROL", "QUEUE_SIZE") + 1)
    rptr = (self._r("CP_HQD_PQ_RPTR_REPORT_ADDR_HI") << 32) | self._r("CP_HQD_PQ_RPTR_REPORT_ADDR")
    wptr = (self._r("CP_HQD_PQ_WPTR_POLL_ADDR_HI") << 32) | self._r("CP_HQD_PQ_WPTR_POLL_ADDR")
    on = self._f("CP_HQD_PQ_DOORBELL_CONTROL", "DOORBELL_EN")
    self._start(key, COMPUTE, ring, size, rptr, wptr, self._f("CP_HQD_PQ_DOORBELL_CONTROL", "DOORBELL_OFFSET") * 4 if on else None)

  def _hqd_stop(self) -> None:
    key = self._selected()
    q = self.queues.get(key)
    self._stop(key)
    self.navi.regs.poke(self.hqd["CP_HQD_ACTIVE"], 0)
    if q is not None and key in self.mqds: self._save_mqd(key, q)

  # ---- the MQD behind an HQD (struct v11_compute_mqd, Linux drivers/gpu/drm/amd/include/v11_structs.h)
  def _mqd_fields(self) -> list[tuple[str, int]]:
    """(MQD field, register address) of the MQD's HQD part: its fields from cp_mqd_base_addr_lo to cp_hqd_pq_wptr_hi
    are the HQD registers from CP_MQD_BASE_ADDR on, in register order (reserved slots have no register)."""
    names = [f[0] for f in MQD._fields_]
    base = self.navi.regs.addr(GC_HWID, "gc_11_0_0", "CP_MQD_BASE_ADDR")
    part = names[names.index("cp_mqd_base_addr_lo"):names.index("cp_hqd_pq_wptr_hi") + 1]
    return [(f, base + k) for k, f in enumerate(part) if not f.startswith("reserved_")]

  def _mqd_address(self, key) -> int:
    return (self._r("CP_MQD_BASE_ADDR_HI") << 32) | (self._r("CP_MQD_BASE_ADDR") & 0xFFFFFFFC)

  def _check_mqd(self, key) -> int:
    """Read the selected HQD's MQD (the CP does when a queue is mapped) and check that it describes the queue the
    HQD registers hold: a field that disagrees is the driver's error, named. Returns the MQD's address."""
    where = f"mock Navi 31 CP: HQD me {key[1]} pipe {key[2]} queue {key[3]}"
    addr = self._mqd_address(key)
    if not addr: raise DeviceError(f"{where} activated without an MQD (CP_MQD_BASE_ADDR is 0)")
    with self.gpu.lock:
      try: raw = bytes(self.gpu.mem.u32_view(addr, MQD_SIZE // 4, "MQD"))
      except GPUFault as e: raise DeviceError(f"{where}: its MQD at {addr:#x} is not mapped ({e})") from None
    m = MQD.from_buffer_copy(raw)
    values = self.navi.regs.values
    for field, reg in self._mqd_fields():
      if field in ("cp_hqd_active", "cp_hqd_dequeue_request"): continue     # the triggers, not queue state
      want, have = getattr(m, field), values.get(reg, 0)
      if field == "cp_mqd_base_addr_lo": want, have = want & 0xFFFFFFFC, have & 0xFFFFFFFC
      if want != have:
        raise DeviceError(f"{where}: MQD at {addr:#x} has {field} = {want:#x}, the HQD register holds {have:#x}")
    return addr

  def _save_mqd(self, key, q) -> None:
    """On a dequeue the CP writes the queue's state back into its MQD: the read pointer (ring offset in dwords), the
    write pointer, and the queue inactive; the HQD registers show the same."""
    addr = self.mqds.pop(key)
    rptr, wptr = q.ring.pos % q.ring.size_dw, q.doorbell_value
    state = {"cp_hqd_pq_rptr": rptr, "cp_hqd_pq_wptr_lo": wptr & 0xFFFFFFFF, "cp_hqd_pq_wptr_hi": wptr >> 32,
             "cp_hqd_active": 0}
    regs = dict(self._mqd_fields())
    with self.gpu.lock:
      for field, value in state.items(): self.navi.regs.poke(regs[field], value)
      try: view = self.gpu.mem.u32_view(addr, MQD_SIZE // 4, "MQD")
      except GPUFault as e:     # the MQD's memory is gone (its process ended): the CP's write faults, as any access
        fault = e.address if e.address is not None else addr
        self.navi.gchub.post_fault(fault)
        return
      for field, value in state.items(): view[getattr(MQD, field).offset // 4] = value

  # ---- SDMA0 queue 0
  def _sdma_cntl(self, value: int) -> None:
    key = ("sdma", 0, 0, 0)
    if not self._f("SDMA0_QUEUE0_RB_CNTL", "RB_ENABLE"): return self._stop(key)
    saved = self.sdma_saved
    if key not in self.queues and saved["rptr"] != saved["wptr"]:
      raise DeviceError(f"mock Navi 31 {self.navi.addr}: SDMA0_QUEUE0_RB_CNTL.RB_ENABLE with SDMA0_QUEUE0_RB_RPTR "
                        f"{saved['rptr']:#x} and RB_WPTR {saved['wptr']:#x} kept from the previous ring: the engine would "
                        f"resume there (sdma_v6_0_gfx_resume_instance resets both before enabling the ring)")
    ring = ((self._r("SDMA0_QUEUE0_RB_BASE_HI") << 32) | self._r("SDMA0_QUEUE0_RB_BASE")) << 8
    size = 4 << self._f("SDMA0_QUEUE0_RB_CNTL", "RB_SIZE")
    rptr = (self._r("SDMA0_QUEUE0_RB_RPTR_ADDR_HI") << 32) | self._r("SDMA0_QUEUE0_RB_RPTR_ADDR_LO")
    on = self._f("SDMA0_QUEUE0_DOORBELL", "ENABLE")
    self._start(key, SDMA, ring, size, rptr, 0, self._f("SDMA0_QUEUE0_DOORBELL_OFFSET", "OFFSET") * 4 if on else None)

  def _sdma_status(self) -> int:
    """SDMA0_STATUS_REG: IDLE (bit 0) while its queue has nothing left to run."""
    q = self.queues.get(("sdma", 0, 0, 0))
    return 0 if q is not None and q.pending() else 1

  def _pointer(self, key, which: str) -> int:
    q = self.queues.get(key)
    if q is None: return self.sdma_saved[which] if key[0] == "sdma" else 0
    if which == "wptr": return q.doorbell_value & 0xFFFFFFFF
    return (q.ring.pos % q.ring.size_dw) if key[0] == "compute" else (4 * q.ring.pos) & 0xFFFFFFFF

  # ---- queues on the engines
  def _start(self, key, kind, ring, size, rptr, wptr, doorbell) -> None:
    self._stop(key)
    q = self.gpu.create_queue(kind, self._next_qid, ring, size, rptr, wptr, doorbell or 0)
    self._next_qid += 1
    self.queues[key] = q
    if doorbell is not None:
      self.doorbells[doorbell] = q
      ring = self.gpu.doorbell_of(q)
      self.navi.doorbell_view.route(doorbell, lambda v, kind=kind, off=doorbell, ring=ring: self._ring(kind, off, ring, v))

  def _stop(self, key) -> None:
    q = self.queues.get(key)
    if q is None: return
    if key[0] == "sdma":      # the pointer registers keep where the ring stood
      self.sdma_saved = {"rptr": self._pointer(key, "rptr"), "wptr": self._pointer(key, "wptr")}
    del self.queues[key]
    for off, other in list(self.doorbells.items()):
      if other is q:
        del self.doorbells[off]
        self.navi.doorbell_view.route(off, None)
    self.gpu.destroy_queue(q.qid)

  # ---- the GC hub's mappings as the engines see them
  def remap(self) -> None:
    """Walk the GC hub's VMID 0 page tables: the system pages mapped at their own host address and the VRAM pages
    become the ranges the engines may touch (coalesced). A VA mapped to VRAM reaches it through a view of the VRAM file
    at that VA (HostMemory.map_view, held by this MMU), whether or not the driver mapped the VRAM BAR there itself
    (over a USB bridge it cannot). A page table whose bytes did not change since the last walk gives its cached
    ranges (an allocation changes one or two of them), and only the ranges that changed are unmapped / mapped."""
    hub = self.navi.gchub
    cntl = hub.reg("GCVM_CONTEXT0_CNTL")
    pieces, seen = [], set()
    if cntl & 1:
      base = hub.reg("GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32") | (hub.reg("GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32") << 32)
      start = (hub.reg("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32") |
               (hub.reg("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32") << 32)) << 12
      if base & PTE_VALID:
        self.navi.gchub.check_enabled("GC hub TLB invalidation")
        self._walk(base & ADDR_MASK, (cntl >> 1) & 3, start, pieces, seen)
      pieces.extend(self._system_aperture())
    self._tables = {k: v for k, v in self._tables.items() if k in seen}
    self._remap_peers([p for p in pieces if p[2] is not None and p[2][0] == "peer"])
    pieces = [p for p in pieces if p[2] is None or p[2][0] != "peer"]
    system, vram = [], []
    for va, size, off in sorted(pieces):
      out = system if off is None else vram
      if out and out[-1][0] + out[-1][1] == va and (off is None or _follows(out[-1][2], out[-1][1], off)): out[-1][1] += size
      else: out.append([va, size] if off is None else [va, size, off])
    memory = self.navi.os.memory
    with self.gpu.lock:
      want_vram = {tuple(r) for r in vram}
      for va, size, _off in self.vram_views - want_vram: memory.unmap_view(va, size, self)
      for va, size, off in want_vram - self.vram_views:
        # over_reserved: a VA the process only reserved (PROT_NONE, no memory: tinygrad's _System.reserve_va keeps its
        # GPU's whole VA range so) is where the GPU reaches the VRAM its page tables map there, as on hardware
        try: memory.map_view(off[0], off[1], va, size, self, f"mock Navi 31 {self.navi.addr} memory {off[1]:#x} at VA",
                             over_reserved=True)
        except (DeviceError, OSCallError):   # another mapping of this process lives there: the VA stays unreachable
          want_vram.discard((va, size, off))
      # what the engines reach, compared as a whole with what they reached: a range that stays (the same VA and size,
      # even where it now reaches other memory) is left as it is, the others go, then the new ones come
      reached, before = {tuple(r) for r in system} | {(va, size) for va, size, _ in want_vram}, set(self.mapped)
      for va, size in before - reached: self.gpu.unmap_range(va)
      for va, size in reached - before: self.gpu.map_range(va, size)
      self.mapped, self.vram_views = sorted(reached), want_vram

  def _in_aperture(self, addr: int, size: int) -> bool:
    """VMID 0 reaches the frame buffer at its MC addresses without page tables, through the system aperture
    (GCMC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR, 256 KiB units, programmed over [fb_start, fb_end] by
    gfxhub_v3_0_init_system_aperture_regs): how Linux's VMID-0 queues use MC addresses of VRAM buffers for their MQD
    and rings (gfx_v11_0_compute_mqd_init: mqd_gpu_addr, amdgpu_bo_gpu_offset), and tinygrad's AM_GFX.setup_ring
    its MQD (mqd_mc)."""
    hub, fb = self.navi.gchub, self.navi.fb_base
    if not hub.reg("GCVM_CONTEXT0_CNTL") & 1 or not hub.field("GCMC_VM_MX_L1_TLB_CNTL", "ENABLE_L1_TLB"): return False
    lo, hi = hub.reg("GCMC_VM_SYSTEM_APERTURE_LOW_ADDR") << 18, (hub.reg("GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR") << 18) | 0x3FFFF
    return max(lo, fb) <= addr and addr + size <= min(hi + 1, fb + self.navi.vram_size)

  def reach_aperture(self, addr: int, size: int) -> None:
    """The pages [addr, addr+size) at MC addresses in the system aperture become reachable to the engines (a view of
    VRAM at that address), as the queue that names them starts (the whole aperture is not viewed: hundreds of MiB of
    page-by-page views per boot)."""
    if not size or not self._in_aperture(addr, size): return
    page, end = addr & ~(PAGE - 1), (addr + size + PAGE - 1) & ~(PAGE - 1)
    piece = (page, end - page, (self.navi.vram_fd, page - self.navi.fb_base))
    if piece not in self.aperture_pieces:
      self.aperture_pieces.add(piece)
      self.remap()

  def _system_aperture(self) -> list[tuple]:
    return [p for p in self.aperture_pieces if self._in_aperture(p[0], p[1])]

  def _walk(self, table: int, level: int, va: int, out: list, seen: set) -> None:
    raw = self.navi.read_pa(table, 4096, f"GCVM page table (level {3 - level}) for VA {va:#x}")
    span = 1 << (12 + 9 * level)
    if level == 0:                                   # a page table: its ranges, cached by its bytes
      key = (table, va)
      seen.add(key)
      cached = self._tables.get(key)
      if cached is None or cached[0] != raw:
        cached = self._tables[key] = (raw, self._ranges_of(array("Q", raw), va, span))
      out.extend(cached[1])
      return
    for i, e in enumerate(array("Q", raw)):
      if not e & PTE_VALID: continue
      if e & PDE_PTE: out.extend(self._ranges_of([e], va + i * span, span))
      else: self._walk(e & ADDR_MASK, level - 1, va + i * span, out, seen)

  def _ranges_of(self, entries, va: int, span: int) -> list[tuple]:
    """(va, size, (VRAM memory file, offset)) of the VRAM pages of these entries, (va, size, None) of their system
    pages mapped at their own host address, (va, size, (None, host address)) of system pages whose host pages are
    elsewhere, (va, size, (window file, offset)) of system pages in a USB bridge's windows, coalesced. A bus address
    no host page is behind, or an address outside VRAM, is left out: the engines fault there."""
    host_of, fb, vram_size, ranges = self.navi.bus_pages(), self.navi.fb_offset, self.navi.vram_size, []   # IOMMU: gpu.py
    for i, e in enumerate(entries):
      if not e & PTE_VALID: continue
      at, addr = va + i * span, e & ADDR_MASK         # a huge entry's page starts at its address (blocks.PDE_PTE)
      if e & PTE_SYSTEM:
        # the entry holds a bus address (AMDGPU_PTE_SYSTEM, amdgpu_vm.h; amdgpu_vm_map_gart: the page's dma_addr_t, which
        # the IOMMU, or pagemap's physical address without one, resolves to a host page). Every page of it host memory
        # at the same address (a huge entry too: the engines must not reach the host memory after its first page);
        # else host pages elsewhere, viewed at the VA; else a bridge window, a peer BAR, or nothing they can use
        hosts = [host_of.get(addr + k) for k in range(0, span, PAGE)]
        if all(h == at + k * PAGE for k, h in enumerate(hosts)): off = None
        elif hosts[0] is not None and all(h == hosts[0] + k * PAGE for k, h in enumerate(hosts)): off = (None, hosts[0])
        else:
          off = self._window_file(addr, span)
          if off is None:
            off = self._peer_bar(addr, span)       # another function's register BAR: a peer window (mockgpu/peer.py)
            if off is None: continue
      else:
        if addr - fb < 0 or addr - fb + span > vram_size: continue
        off = (self.navi.vram_fd, addr - fb)
      last = ranges[-1] if ranges else None
      if last and last[0] + last[1] == at and (off is None) == (last[2] is None) and \
         (off is None or _follows(last[2], last[1], off)): last[1] += span
      else: ranges.append([at, span, off])
    return [tuple(r) for r in ranges]

  def _peer_bar(self, bus: int, size: int) -> tuple | None:
    """("peer", view, offset, name) when the bus addresses [bus, bus+size) lie in a register BAR of another PCI
    function of the fabric (its stores are model calls, not memory: a NIC's doorbell page)."""
    from ...mmio import MemoryMMIO
    for fn in list(self.navi.os.pci_functions.values()):
      if fn is getattr(self.navi, "function", None): continue
      for bar in fn.bars.values():
        if bar.bus_address <= bus and bus + size <= bar.bus_address + bar.size and not isinstance(bar.view, MemoryMMIO):
          return ("peer", bar.view, bus - bar.bus_address, f"{fn.addr} BAR{bar.index}")
    return None

  def _remap_peers(self, pieces: list) -> None:
    """The peer windows of the GPU's engines become exactly these (va, size, ("peer", view, offset, name))."""
    want = {(va, size, off[1], off[2], off[3]) for va, size, off in pieces}
    have = getattr(self, "peer_windows", set())
    with self.gpu.lock:
      for va, *_ in have - want: self.gpu.mem.peers.remove(va)
      for va, size, view, offset, name in want - have: self.gpu.mem.peers.add(va, size, view, offset, f"{name}+{offset:#x}")
    self.peer_windows = want

  def _window_file(self, bus: int, size: int) -> tuple[int, int] | None:
    """(memory file, offset) of the USB bridge window holding the bus addresses [bus, bus+size), if the GPU is
    behind one (gpu.bridge) and the window is a memory file."""
    bridge = getattr(self.navi, "bridge", None)
    return None if bridge is None else bridge.fw.window_file(bus, size)

  # ---- the engines' events (the listener interface of MockAMDGPU)
  def interrupt(self, gpu, queue, ctxid: int) -> None:
    if queue.kind == SDMA: self.navi.ih.post(CLIENT_SDMA0, SRC_SDMA_TRAP, [ctxid, 0, 0, 0])
    else: self.navi.ih.post(CLIENT_CP, SRC_CP_EOP, [ctxid, 0, 0, 0])

  def queue_failed(self, gpu, queue, error) -> None:
    addr = getattr(error, "address", None)
    if addr is not None: self.navi.gchub.post_fault(addr)
    else: self.navi.ih.post(CLIENT_CP, 0xB9, [0, 0, 0, 0])     # a bad opcode: CP privileged-instruction style error

  def stop_all(self) -> None:
    """Every queue stops, its work dropped (a reset: nothing is saved into the MQDs)."""
    for key in list(self.queues): self._stop(key)
    self.mqds.clear()

  def process_exiting(self, ranges) -> None:
    """The host memory in ranges [(address, size)] is about to be unmapped (its process ended): the engines stop
    reaching it now (an access becomes a GPU fault, as through an IOMMU that lost the pages), and a dispatch in
    flight, whose waves read their code and data from it, ends with a fault. The queues stay as the registers
    programmed them (a driver finds them still active)."""
    ends = [(a, a + n) for a, n in ranges]
    with self.gpu.lock:
      self.forget(ranges)
      for q in self.gpu.queues.values():
        if getattr(getattr(q, "engine", None), "running", None) is not None and q.error is None:
          q.drop_work()
          q.error = GPUFault(f"{q.name}: the waves' memory was unmapped (its process ended)", address=ends[0][0] if ends else 0,
                             kind="page fault")
          self.queue_failed(self.gpu, q, q.error)

  def forget(self, ranges) -> None:
    """The engines stop reaching the host memory in ranges [(address, size)], which is about to be unmapped: the
    ranges that meet it go now, and so do the cached ranges of the page tables that map it (their bytes may not have
    changed: a driver that frees memory before unmapping it), so that no remap gives it back to the engines. An access
    there is a GPU fault from now on, never a touch of unmapped host memory."""
    ends = [(a, a + n) for a, n in ranges]
    gone = lambda va, size: any(a < va + size and va < e for a, e in ends)
    with self.gpu.lock:
      # views at a VA being unmapped (a reservation the process maps something else over), and views of host pages
      # (at another VA) whose memory is going: their VAs go from the engines' reach too
      host_gone = lambda off, n: off is not None and off[0] is None and gone(off[1], n)
      views = [v for v in self.vram_views if gone(v[0], v[1]) or host_gone(v[2], v[1])]
      hit = lambda va, size: gone(va, size) or any(a < va + size and va < a + n for a, n, _ in views)
      for va, size in [r for r in self.mapped if hit(*r)]: self.gpu.unmap_range(va)
      self.mapped = [r for r in self.mapped if not hit(*r)]
      for view in views:
        self.navi.os.memory.unmap_view(view[0], view[1], self)
        self.vram_views.discard(view)
      self._tables = {k: v for k, v in self._tables.items()
                      if not any(off is None and gone(va, n) or host_gone(off, n) for va, n, off in v[1])}

  def close(self) -> None:
    for va, size, _off in self.vram_views: self.navi.os.memory.unmap_view(va, size, self)
    self.vram_views = set()
    self.gpu.close()


def _follows(src: tuple[int, int], size: int, nxt: tuple[int, int]) -> bool:
  """Whether file range nxt starts where src's size bytes end (same memory file)."""
  return src[0] == nxt[0] and src[1] + size == nxt[1]
