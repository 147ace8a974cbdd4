"""AMSession: AMDDevice's session (drivers/amd/session.py) on a GPU that AM booted: memory mapped by AM's own page tables,
compute and SDMA queues programmed straight into the hardware queue registers, doorbells in BAR2, interrupts read
from the IH ring.

- Memory: every allocation takes a VA of AM's process-wide range (va.PROCESS_VA) and is mapped into VMID 0 there.
  kind="vram" (device buffers, code, scratch) is VRAM (memory.VRAM.alloc_user, mapped by VRAM PTEs); with cpu_access
  the VRAM BAR window of the buffer is also mapped at its VA (GPU VA == CPU VA, Mem.cpu its bytes), without it the
  CPU has no mapping there (the runtime copies device buffers through staging on the SDMA engine either way, and BAR
  writes would need an HDP flush before the GPU reads them). kind="gtt"/"userptr" (rings, signals, kernel arguments,
  staging) is host memory: shared anonymous pages at that same fixed address, their physical addresses from pagemap,
  mapped as system pages, which the CPU always sees. free unmaps the GPU's view first (TLB flushed), then lets the
  memory go; close frees what is left.
- Compute queue: its MQD (struct v11_compute_mqd, drivers/amd/am/mqd.py) filled in memory: ring base (>> 8),
  QUEUE_SIZE = log2(ring dwords) - 1, the read-pointer report and write-pointer poll addresses, the doorbell (offset
  in dwords, enabled), the EOP buffer, VMID 0, its own address; then HQD me 1 pipe 0 queue 0, selected through
  GRBM_GFX_CNTL, loaded from the MQD register by register, CP_HQD_ACTIVE last. The CP saves the queue's state into
  the MQD when it is dequeued.
- SDMA queue: SDMA0_QUEUE0_RB_* (ring >> 8, RB_SIZE = log2(ring dwords), read-pointer write-back) and its doorbell.
- Interrupts: the queues' end-of-pipe / trap interrupts carry event_id; wait_events polls the IH ring (raising
  hcq.GPUFault for a VM fault, with its address) until one carries it or the time is up.
"""
from __future__ import annotations

import dataclasses

from ....errors import DeviceError, Timeout
from ..kfd import RPTR_OFFSET, WPTR_OFFSET
from . import mqd as mqdmod
from .device import AMDev, find_functions
from .queues import stop_compute_hqd, stop_sdma_ring
from .va import PROCESS_VA

PAGE = 0x1000
EVENT_ID = 1
DOORBELL_COMPUTE, DOORBELL_SDMA = 3, 0x100     # 64-bit doorbell indices (AMDGPU_NAVI10_DOORBELL_MEC_RING0, sDMA_ENGINE0)
# (IH client, source) of the interrupts the queues raise, gfx11's soc21 ids: CP end-of-pipe SOC21_IH_CLIENTID_GRBM_CP
# GFX_11_0_0__SRCID__CP_EOP_INTERRUPT, the SDMA trap SOC21_IH_CLIENTID_GFX GFX_11_0_0__SRCID__SDMA_TRAP (sdma_v6_0_sw_init)
CP_EOP, SDMA_TRAP = (0x14, 181), (0x0A, 49)


@dataclasses.dataclass
class Mem:
  va: int
  size: int
  cpu: memoryview | None
  sysmem: object = None        # the AMPCI.SysMem behind it (gtt, userptr)
  vram: object = None          # the memory.VRAMBuf behind it (vram)
  view: object = None          # the VRAM BAR window mapped at va (vram with cpu_access)


@dataclasses.dataclass
class HWQueue:
  kind: str
  queue_id: int
  ring: Mem
  gart: Mem
  doorbell_offset: int
  rptr_offset: int = RPTR_OFFSET
  wptr_offset: int = WPTR_OFFSET
  mqd: Mem | None = None       # a compute queue's MQD (the CP saves the queue's state there when it is dequeued)


def _log2(n: int) -> int: return n.bit_length() - 1


# GC versions whose ISA target (what a code object is built for) is not the hardware version: Linux kfd_device.c
# kgd2kfd_probe's gfx_target_version ("Compiler version is 11.0.1 while HW version is 11.0.3"; 11.0.1 and 11.0.4 are
# gfx1103)
_TARGET_OF_GC = {(11, 0, 1): 110003, (11, 0, 3): 110001, (11, 0, 4): 110003}


def gfx_target_version(gc: tuple[int, int, int]) -> int:
  """KFD's gfx_target_version of a GC IP version: major*10000 + minor*100 + stepping of the ISA target."""
  return _TARGET_OF_GC.get(tuple(gc), gc[0] * 10000 + gc[1] * 100 + gc[2])


class AMSession:
  name = "PCI"

  def __init__(self, os, index: int, config, label: str | None = None, trace=None):
    self.os, self.config = os, config
    found = find_functions(os)
    self.label = label or f"PCI+AMD:{index}"
    if index >= len(found):
      raise DeviceError(f"{self.label}: {len(found)} AMD GPU(s) AM can boot ({', '.join(found) or 'none'}); no device {index}")
    self.am = AMDev(os, found[index], config, label=f"{self.label} ({found[index]})", trace=trace)
    self.label = self.am.label
    self._mems: dict[int, Mem] = {}
    self._queues: list[HWQueue] = []
    try: self._setup()
    except BaseException:
      self.close()
      raise

  def _setup(self) -> None:
    gc = self.am.discovery.gc_info
    cu_per_sh = 2 * (gc.get("gc_num_wgp0_per_sa", 0) + gc.get("gc_num_wgp1_per_sa", 0))
    sa = gc.get("gc_num_sa_per_se", 1) * gc.get("gc_num_se", 1)
    major, minor, rev = self.am.discovery.version_of("GC")
    target = gfx_target_version((major, minor, rev))
    self.arch = f"gfx{target // 10000}{(target // 100) % 100:x}{target % 100:x}"
    # the IP versions the discovery table reports select the driver's register and packet tables (AMDSession)
    self.gc_ip = (major, minor, rev)
    self.sdma_ip = tuple(self.am.discovery.version_of("SDMA0"))
    # the CUs the GFX block counted at boot (gfx.GFX.cu_info: fused-off WGPs excluded), else the table's maximum
    cus = getattr(self.am.gfx, "active_cus", None) or sa * cu_per_sh
    self.props = {"gfx_target_version": target, "simd_count": cus * 2,
                  "simd_per_cu": 2, "array_count": sa, "simd_arrays_per_engine": gc.get("gc_num_sa_per_se", 1),
                  "cu_per_simd_array": cu_per_sh, "max_waves_per_simd": gc.get("gc_max_waves_per_simd", 16),
                  "lds_size_in_kb": gc.get("gc_lds_size", 64), "max_slots_scratch_cu": gc.get("gc_max_scratch_slots_per_cu", 32),
                  "wave_front_size": gc.get("gc_wave_size", 32), "num_xcc": 1}
    self.event_id = EVENT_ID
    self.mailbox = self.alloc(PAGE, kind="gtt")
    self.mailbox_va = self.mailbox.va
    self.doorbells = self.am.pci.doorbell

  # ---- memory
  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    if kind not in ("vram", "gtt", "userptr"): raise ValueError(f"unknown memory kind {kind!r}")
    with self.am.lock: return self._alloc_vram(size, cpu_access) if kind == "vram" else self._alloc(size)

  def _alloc(self, size: int) -> Mem:
    size = (max(size, 1) + PAGE - 1) & ~(PAGE - 1)
    va = PROCESS_VA.alloc(size, self.label)        # shared by every AM device of the process
    try:
      sm = self.am.pci.alloc_sysmem(size, addr=va)
      try: self.am.gmc.map(va, sm.paddrs, system=True)
      except BaseException:
        self.am.pci.free_sysmem(sm)
        raise
    except BaseException:
      PROCESS_VA.free(va, size)
      raise
    mem = self._mems[va] = Mem(va, size, sm.view, sm)
    return mem

  def _alloc_vram(self, size: int, cpu_access: bool) -> Mem:
    """VRAM at a VA of the process range; with cpu_access the VRAM BAR window mapped at that VA first (the GPU's
    mapping comes last: the GPU never sees the VA before the CPU view is in place)."""
    size = (max(size, 1) + PAGE - 1) & ~(PAGE - 1)
    va = PROCESS_VA.alloc(size, self.label)
    buf = view = None
    try:
      buf = self.am.vram.alloc_user(size, f"buffer at {va:#x}")
      if cpu_access: view = self.am.pci.map_vram(buf.offset, size, va)
      self.am.gmc.map_vram(va, buf.offset, size)
    except BaseException:
      if view is not None: self.am.pci.unmap_vram(view)
      if buf is not None: self.am.vram.free(buf)
      PROCESS_VA.free(va, size)
      raise
    mem = self._mems[va] = Mem(va, size, None if view is None else self.os.memview(va, size), vram=buf, view=view)
    return mem

  def free(self, mem: Mem) -> None:
    with self.am.lock: self._free(mem)

  def _free(self, mem: Mem) -> None:
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: free of unknown memory at {mem.va:#x}")
    mem.cpu = None
    self.am.gmc.unmap(mem.va, mem.size // PAGE)       # the GPU lets go first, then the memory goes
    if mem.vram is not None:
      if mem.view is not None: self.am.pci.unmap_vram(mem.view)
      self.am.vram.free(mem.vram)
    else: self.am.pci.free_sysmem(mem.sysmem)
    PROCESS_VA.free(mem.va, mem.size)

  # ---- queues
  def create_queue(self, kind: str, ring_size: int) -> HWQueue:
    with self.am.lock: return self._create_queue(kind, ring_size)

  def _create_queue(self, kind: str, ring_size: int) -> HWQueue:
    ring, gart = self.alloc(ring_size, kind="gtt"), self.alloc(PAGE, kind="gtt")
    mqd = None
    if kind == "compute":
      eop = self.alloc(PAGE, kind="gtt")
      mqd, fields = self._compute_mqd(ring, gart, eop)
      r = self.am.gc_regs
      # the MEC's doorbell range, in bytes of the doorbell BAR (the register's field is bits 11:2: Linux writes
      # doorbell index * 2 << 2): every CP doorbell below SDMA's
      r.write("CP_MEC_DOORBELL_RANGE_LOWER", 0)
      r.write("CP_MEC_DOORBELL_RANGE_UPPER", (DOORBELL_SDMA * 2 - 2) << 2)
      r.write("GRBM_GFX_CNTL", MEID=1, PIPEID=0, QUEUEID=0)
      try: mqdmod.load_hqd(r, fields)
      finally: r.write("GRBM_GFX_CNTL", 0)
      doorbell = DOORBELL_COMPUTE * 8
    elif kind == "sdma":
      self._sdma_resume(ring, gart)
      doorbell = DOORBELL_SDMA * 8
    else: raise ValueError(f"unknown queue kind {kind!r}")
    q = HWQueue(kind, len(self._queues), ring, gart, doorbell, mqd=mqd)
    self._queues.append(q)
    self.am.step(kind, f"queue {q.queue_id}: ring of {ring.size >> 10} KiB at {ring.va:#x}, doorbell {doorbell:#x}")
    return q

  def _sdma_resume(self, ring: Mem, gart: Mem) -> None:
    """SDMA0 queue 0 as Linux sdma_v6_0_gfx_resume_instance starts it: RB_CNTL (size, RB_PRIV) with the ring off, the
    read and write pointers reset (a re-created ring must not keep the old ones), the write-pointer poll and the
    read-pointer write-back addresses, the ring base, the write pointer under MINOR_PTR_UPDATE, the doorbell and its
    NBIO route (nbio_v4_3_sdma_doorbell_range), the hang watchdog, UTCL1, the engine un-halted (F32_CNTL HALT 0,
    TH1_RESET 0; a VF leaves that to the host), then RB_ENABLE and IB_ENABLE."""
    r, am = self.am.sdma_regs, self.am
    rb = dict(RB_SIZE=_log2(ring.size // 4), RB_PRIV=1)
    r.write("SDMA0_QUEUE0_RB_CNTL", **rb)
    self._sdma_reset_pointers()
    r.write("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_LO", (gart.va + WPTR_OFFSET) & 0xFFFFFFFF)
    r.write("SDMA0_QUEUE0_RB_WPTR_POLL_ADDR_HI", (gart.va + WPTR_OFFSET) >> 32)
    r.write("SDMA0_QUEUE0_RB_RPTR_ADDR_HI", (gart.va + RPTR_OFFSET) >> 32)
    r.write("SDMA0_QUEUE0_RB_RPTR_ADDR_LO", (gart.va + RPTR_OFFSET) & 0xFFFFFFFC)
    rb.update(RPTR_WRITEBACK_ENABLE=1, WPTR_POLL_ENABLE=0, F32_WPTR_POLL_ENABLE=1)
    r.write("SDMA0_QUEUE0_RB_BASE", (ring.va >> 8) & 0xFFFFFFFF)
    r.write("SDMA0_QUEUE0_RB_BASE_HI", ring.va >> 40)
    r.write("SDMA0_QUEUE0_MINOR_PTR_UPDATE", ENABLE=1)      # before a write pointer lower than the last
    if not am.vf:
      r.write("SDMA0_QUEUE0_RB_WPTR", 0)
      r.write("SDMA0_QUEUE0_RB_WPTR_HI", 0)
    r.write("SDMA0_QUEUE0_DOORBELL", ENABLE=1)
    r.write("SDMA0_QUEUE0_DOORBELL_OFFSET", OFFSET=DOORBELL_SDMA * 2)
    am.nbio.sdma_doorbell_range(DOORBELL_SDMA * 2)
    r.write("SDMA0_QUEUE0_MINOR_PTR_UPDATE", 0)
    r.update("SDMA0_WATCHDOG_CNTL", QUEUE_HANG_COUNT=min(max(int(self.config.timeout_s * 10), 1), 0xFF))   # 100 ms units
    r.update("SDMA0_UTCL1_CNTL", RESP_MODE=3, REDO_DELAY=9)
    r.update("SDMA0_UTCL1_PAGE", RD_L2_POLICY=2, WR_L2_POLICY=3, LLC_NOALLOC=1)   # sdma_common.h: NOA, BYPASS
    if not am.vf: self._sdma_unhalt()
    r.write("SDMA0_QUEUE0_RB_CNTL", RB_ENABLE=1, **rb)
    r.update("SDMA0_QUEUE0_IB_CNTL", IB_ENABLE=1)

  def _sdma_reset_pointers(self) -> None:
    """The ring's read and write pointers back to 0 (a re-created ring must not resume where the last one stopped)."""
    for reg in ("RB_RPTR", "RB_RPTR_HI", "RB_WPTR", "RB_WPTR_HI"): self.am.sdma_regs.write(f"SDMA0_QUEUE0_{reg}", 0)

  def _sdma_unhalt(self) -> None:
    """SDMA0_F32_CNTL: HALT 0, TH1_RESET 0 (the engine runs)."""
    self.am.sdma_regs.update("SDMA0_F32_CNTL", HALT=0, TH1_RESET=0)

  def _compute_mqd(self, ring: Mem, gart: Mem, eop: Mem):
    """The queue's MQD (drivers/amd/am/mqd.py) in memory the CP reaches, filled: (its Mem, the struct written); the
    HQD is loaded from it."""
    # VRAM: the queue state outlives this process (a next process that reuses the GPU dequeues a queue left active,
    # and the CP saves it into the MQD: into freed host memory, had it been system pages)
    # Written through the VRAM BAR view (a CPU mapping on PCI, TLPs behind a USB bridge: no CPU mapping needed)
    mem = self.alloc(mqdmod.MQD_SIZE, kind="vram")
    m = mqdmod.compute_mqd(mem.va, ring.va, ring.size, gart.va + RPTR_OFFSET, gart.va + WPTR_OFFSET, eop.va, eop.size,
                           DOORBELL_COMPUTE * 2)
    self.am.vram.write(mem.vram.offset, bytes(m))
    self.am.nbio.hdp_flush()       # written through the VRAM BAR: out of HDP before the CP may read it
    return mem, m

  def doorbell(self, q: HWQueue):
    view, off = self.doorbells, q.doorbell_offset
    return lambda value: view.write64(off, value)

  # ---- interrupts and faults
  def wait_events(self, timeout_ms: int) -> bool:
    deadline = self.os.monotonic() + timeout_ms / 1000
    while True:
      for e in self.am.ih.poll():      # raises GPUFault for a VM fault
        if (e["client"], e["src"]) in (CP_EOP, SDMA_TRAP) and e["data"][0] == self.event_id: return True
      if self.os.monotonic() >= deadline: return False
      self.os.sleep(0.0002)

  def _stop_queue(self, q: HWQueue) -> None:
    """A compute HQD is dequeued and waited for; the SDMA ring stops and the engine is waited idle (queues.py)."""
    if q.kind == "compute": stop_compute_hqd(self.am.gc_regs)
    else: stop_sdma_ring(self.am.sdma_regs)

  def close(self) -> None:
    am = getattr(self, "am", None)
    if am is None: return
    with am.lock: self._close(am)

  def _close(self, am) -> None:
    try:
      if am.pci is not None:
        am.begin_fini()          # an SR-IOV VF: exclusive fini access for the teardown (released in am.close)
        drained = True
        for q in self._queues:
          try: self._stop_queue(q)
          except Timeout as e:
            am.step(q.kind, f"queue {q.queue_id} did not stop: {e}")
            drained = False
        self._queues.clear()
        # an engine that did not stop may still reach the memory: no DMA before it goes
        if not drained: am.pci.disable_bus_master()
        for mem in list(self._mems.values()): self.free(mem)
    finally:
      am.close()
      self.am = None


def open_am(os, index: int, config, label: str | None = None):
  """hcq.open("PCI+AMD:N"): boot AMD function N (in address order) and stand AMDDevice on it (AMSession)."""
  from ..device import AMDDevice
  session = AMSession(os, index, config, label)
  dev = AMDDevice(session, os, config)      # makes the queues (on failure it closes the session: access released there)
  try: session.am.end_init()
  except BaseException:
    dev.close()
    raise
  return dev
