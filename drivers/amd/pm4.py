"""PM4 type-3 packets for the gfx10-gfx11 compute queue, as lists of dwords.

Facts come from the generated bindings: hcq.autogen.amd.pm4 (Linux drivers/gpu/drm/amd/amdgpu/nvd.h: opcodes, the
PACKET3 header, WAIT_REG_MEM / RELEASE_MEM / ACQUIRE_MEM fields) and hcq.autogen.amd.gc_11_0_0_compute (the COMPUTE_*
registers and fields of asic_reg/gc/gc_11_0_0_offset.h and _sh_mask.h, generated apart from the whole-GC module
amd.gc_11_0_0 because that one costs ~20 ms to import, more than a launch path may spend at start-up). Three facts
are in none of those headers and are cited where defined: the GC segment-0 base, the VGT event types and the GPU
clock's frequency.

Per GC IP version (ComputeRegs, gc_registers): the compute registers come from that version's generated module
(gc_9_4_3_compute for gfx942, gc_11_0_0_compute, gc_12_0_0_compute): their SET_SH_REG offsets differ (gfx9's
COMPUTE_PGM_RSRC3 is 0x22d, gfx11's 0x228), gfx9 has no CS_W32_EN (wave64 only) and a narrower TMPRING WAVESIZE, and
gfx9's cache-control packets are soc15d.h's (RELEASE_MEM EOP_TC_*_ACTION_EN bits, a 6-dword ACQUIRE_MEM with
CP_COHER_CNTL: release_mem_soc15, acquire_mem_soc15) where gfx10+ has nvd.h's GCR fields."""
from __future__ import annotations

import importlib

from ...autogen.amd import gc_11_0_0_compute as gc
from ...autogen.amd import pm4 as nvd
from ...autogen.amd import pm4_soc15 as soc15
from ...errors import DeviceError
from ..hcq.cmdbuf import hi, lo  # noqa: F401 - re-exported: packet users write pm4.lo(x)
from .decoding import DecodeError

PACKET_TYPE3 = nvd.PACKET_TYPE3
NOP, DISPATCH_DIRECT, WRITE_DATA = nvd.PACKET3_NOP, nvd.PACKET3_DISPATCH_DIRECT, nvd.PACKET3_WRITE_DATA
WAIT_REG_MEM, INDIRECT_BUFFER, COPY_DATA = nvd.PACKET3_WAIT_REG_MEM, nvd.PACKET3_INDIRECT_BUFFER, nvd.PACKET3_COPY_DATA
EVENT_WRITE, RELEASE_MEM, ACQUIRE_MEM = nvd.PACKET3_EVENT_WRITE, nvd.PACKET3_RELEASE_MEM, nvd.PACKET3_ACQUIRE_MEM
SET_SH_REG, SET_UCONFIG_REG, PRED_EXEC = nvd.PACKET3_SET_SH_REG, nvd.PACKET3_SET_UCONFIG_REG, nvd.PACKET3_PRED_EXEC
OPCODE_NAMES = {v: k[len("PACKET3_"):] for k, v in vars(nvd).items()
                if k.startswith("PACKET3_") and isinstance(v, int) and not k.endswith("_START") and 0x10 <= v < 0x100}
OPCODE_NAMES.update({NOP: "NOP", INDIRECT_BUFFER: "INDIRECT_BUFFER"})  # nvd.h also names 0x10/0x3F otherwise

SH_REG_START, UCONFIG_REG_START = nvd.PACKET3_SET_SH_REG_START, nvd.PACKET3_SET_UCONFIG_REG_START
# GC register segment 0 base of gfx11 (navi3x): the absolute dword address of regX (BASE_IDX 0) is regX + 0x1260.
# No header of linux 6.12 has it for gfx11 (soc21 parts take their IP bases from the IP discovery table, which amdgpu
# shows as ip_discovery/die/0/11/0/base_addr; the navi2x header sienna_cichlid_ip_offset.h has the same
# GC_BASE__INST0_SEG0). The mock models the same fact as
# mockgpu/amd/regs.GC_BASE_SEG0 and publishes it in its IP discovery sysfs; tests/mockgpu/test_hardware_facts.py
# holds the two equal to each other and to what the mock's discovery reports.
GC_SEG0_BASE = 0x1260


def _sh(reg: int) -> int: return reg + GC_SEG0_BASE - SH_REG_START


# every segment-0 COMPUTE_* register by name (gc_11_0_0_offset.h); SET_SH_REG offsets assume segment 0
GC_REGS = {k[3:]: v for k, v in vars(gc).items()
           if k.startswith("reg") and not k.endswith("_BASE_IDX") and getattr(gc, k + "_BASE_IDX") == 0}
COMPUTE_DISPATCH_INITIATOR = _sh(gc.regCOMPUTE_DISPATCH_INITIATOR)
COMPUTE_START_X = _sh(gc.regCOMPUTE_START_X)
COMPUTE_NUM_THREAD_X = _sh(gc.regCOMPUTE_NUM_THREAD_X)
COMPUTE_PGM_LO = _sh(gc.regCOMPUTE_PGM_LO)
COMPUTE_DISPATCH_SCRATCH_BASE_LO = _sh(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO)
COMPUTE_PGM_RSRC1 = _sh(gc.regCOMPUTE_PGM_RSRC1)
COMPUTE_RESOURCE_LIMITS = _sh(gc.regCOMPUTE_RESOURCE_LIMITS)
COMPUTE_TMPRING_SIZE = _sh(gc.regCOMPUTE_TMPRING_SIZE)
COMPUTE_RESTART_X = _sh(gc.regCOMPUTE_RESTART_X)
COMPUTE_PGM_RSRC3 = _sh(gc.regCOMPUTE_PGM_RSRC3)
COMPUTE_USER_DATA_0 = _sh(gc.regCOMPUTE_USER_DATA_0)
SH_REG_NAMES = {_sh(v): k for k, v in GC_REGS.items() if v + GC_SEG0_BASE >= SH_REG_START}

# gc_11_0_0_sh_mask.h fields
INITIATOR_COMPUTE_SHADER_EN = gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
INITIATOR_FORCE_START_AT_000 = gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK
INITIATOR_CS_W32_EN = gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK
RSRC1_PRIV = gc.COMPUTE_PGM_RSRC1__PRIV_MASK


def tmpring_size(waves: int, wavesize: int) -> int:
  """COMPUTE_TMPRING_SIZE: WAVES (scratch waves per shader engine) and WAVESIZE (256-byte units per wave), each
  masked to its field (gc_11_0_0_sh_mask.h)."""
  return ((waves << gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT) & gc.COMPUTE_TMPRING_SIZE__WAVES_MASK) | \
    ((wavesize << gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT) & gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK)
RSRC2_LDS_SIZE_SHIFT, RSRC2_LDS_SIZE_MASK = gc.COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT, gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK
LDS_GRANULE = 512   # bytes per LDS_SIZE unit on gfx11 (128 dwords; LLVM AMDGPU's LDS allocation granule)


class ComputeRegs:
  """The COMPUTE_* registers a dispatch programs, for one GC IP version: SET_SH_REG offsets (regX + the GC segment-0
  base - PACKET3_SET_SH_REG_START; every one has BASE_IDX 0) and the fields the driver sets, all from that version's
  generated gc_<ver>_compute module. tmpring_granule: bytes per COMPUTE_TMPRING_SIZE.WAVESIZE unit (1 KiB on gfx9,
  256 bytes from gfx11 on, as ROCR's amd_aql_queue.cpp sizes scratch per wave)."""

  def __init__(self, ip: tuple, module, seg0: int, tmpring_granule: int):
    self.ip, self.module, self.seg0, self.tmpring_granule = ip, module, seg0, tmpring_granule
    def sh(name): return getattr(module, "regCOMPUTE_" + name) + seg0 - SH_REG_START
    self.DISPATCH_INITIATOR, self.START_X, self.NUM_THREAD_X = sh("DISPATCH_INITIATOR"), sh("START_X"), sh("NUM_THREAD_X")
    self.PGM_LO, self.PGM_RSRC1, self.PGM_RSRC3 = sh("PGM_LO"), sh("PGM_RSRC1"), sh("PGM_RSRC3")
    self.RESOURCE_LIMITS, self.TMPRING_SIZE, self.RESTART_X = sh("RESOURCE_LIMITS"), sh("TMPRING_SIZE"), sh("RESTART_X")
    self.USER_DATA_0, self.DISPATCH_SCRATCH_BASE_LO = sh("USER_DATA_0"), sh("DISPATCH_SCRATCH_BASE_LO")
    # the driver sets COMPUTE_PGM_LO/HI, DISPATCH_PKT_ADDR_LO/HI, DISPATCH_SCRATCH_BASE_LO/HI, PGM_RSRC1/2 as one run
    if [sh(n) - self.PGM_LO for n in ("PGM_HI", "DISPATCH_PKT_ADDR_LO", "DISPATCH_SCRATCH_BASE_LO", "PGM_RSRC2")] != [1, 2, 4, 7]:
      raise DeviceError(f"GC {'.'.join(map(str, ip))}: COMPUTE_PGM_LO .. COMPUTE_PGM_RSRC2 are not one run of registers")
    f = vars(module)
    self.INITIATOR_COMPUTE_SHADER_EN = f["COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK"]
    self.INITIATOR_FORCE_START_AT_000 = f["COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK"]
    self.INITIATOR_CS_W32_EN = f.get("COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK", 0)    # none on gfx9: wave64 only
    self.RSRC1_PRIV = f["COMPUTE_PGM_RSRC1__PRIV_MASK"]
    self.RSRC2_LDS_SIZE_SHIFT, self.RSRC2_LDS_SIZE_MASK = f["COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT"], f["COMPUTE_PGM_RSRC2__LDS_SIZE_MASK"]
    self._tmpring = (f["COMPUTE_TMPRING_SIZE__WAVES__SHIFT"], f["COMPUTE_TMPRING_SIZE__WAVES_MASK"],
                     f["COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT"], f["COMPUTE_TMPRING_SIZE__WAVESIZE_MASK"])

  def tmpring_size(self, waves: int, wavesize: int) -> int:
    """COMPUTE_TMPRING_SIZE: WAVES (scratch waves per shader engine) and WAVESIZE (tmpring_granule units per wave),
    each masked to its field."""
    ws, wm, ss, sm = self._tmpring
    return ((waves << ws) & wm) | ((wavesize << ss) & sm)

  @property
  def max_wavesize(self) -> int: return self._tmpring[3] >> self._tmpring[2]

  def __repr__(self): return f"ComputeRegs(gc {'.'.join(map(str, self.ip))})"


# the GC versions whose compute registers are generated: (module, GC segment-0 base, TMPRING WAVESIZE granule).
# gfx9's segment-0 base is vega10_ip_offset.h GC_BASE SEG0 (0x2000), gfx11's and gfx12's GC_SEG0_BASE above
GC_VERSIONS = {(9, 4, 3): ("gc_9_4_3_compute", 0x2000, 1024), (11, 0, 0): ("gc_11_0_0_compute", GC_SEG0_BASE, 256),
               (12, 0, 0): ("gc_12_0_0_compute", GC_SEG0_BASE, 256)}
_REGS: dict[tuple, ComputeRegs] = {}


def gc_registers(ip: tuple) -> ComputeRegs:
  """The compute registers of GC IP version ip: those of the greatest generated version with the same major that is
  not above it (the reference's register selection: gc 11.0.3 takes 11.0.0's). DeviceError when none fits."""
  fits = [v for v in GC_VERSIONS if v[0] == ip[0] and v <= tuple(ip)]
  if not fits:
    raise DeviceError(f"GC {'.'.join(map(str, ip))}: no generated compute registers for it (hcq has GC "
                      f"{', '.join('.'.join(map(str, v)) for v in sorted(GC_VERSIONS))})")
  v = max(fits)
  regs = _REGS.get(v)
  if regs is None:
    name, seg0, granule = GC_VERSIONS[v]
    regs = _REGS[v] = ComputeRegs(v, importlib.import_module(f"...autogen.amd.{name}", __package__), seg0, granule)
  return regs

# The GPU clock counter that RELEASE_MEM DATA_SEL_GPU_CLOCK and SDMA TIMESTAMP write counts the SPLL reference clock:
# 100 MHz on the gfx11 dGPUs (amdgpu reports it as AMDGPU_INFO_DEV_INFO gpu_counter_freq = soc21_get_xclk, 10000 in
# 10 kHz units; gfx11 APUs give 99.81 MHz). The mock's clock is mockgpu/amd/regs.GPU_CLOCK_HZ;
# tests/mockgpu/test_hardware_facts.py holds the two equal and checks a timed launch against the host's clock.
GPU_CLOCK_HZ = 100_000_000
TICKS_PER_US = GPU_CLOCK_HZ / 1e6

# WAIT_REG_MEM_FUNCTION values (nvd.h comment: 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >)
WAIT_ALWAYS, WAIT_LT, WAIT_LE, WAIT_EQ, WAIT_NE, WAIT_GE, WAIT_GT = range(7)
REL_FLUSH_ALL = (nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB | nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV |
                 nvd.PACKET3_RELEASE_MEM_GCR_GLV_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL1_INV |
                 nvd.PACKET3_RELEASE_MEM_GCR_GL2_INV | nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB | nvd.PACKET3_RELEASE_MEM_GCR_SEQ)
# RELEASE_MEM DATA_SEL / INT_SEL values (nvd.h comments)
DATA_SEL_NONE, DATA_SEL_32, DATA_SEL_64, DATA_SEL_GPU_CLOCK = 0, 1, 2, 3
INT_SEL_NONE, INT_SEL_INT, INT_SEL_INT_AFTER_WRITE = 0, 1, 2
# navi10_enum.h VGT_EVENT_TYPE: CS_PARTIAL_FLUSH 0x7, CACHE_FLUSH_AND_INV_TS_EVENT 0x14; event index 4 = CS partial
# flush, 5 = end of pipe
CS_PARTIAL_FLUSH, CACHE_FLUSH_AND_INV_TS_EVENT = 0x07, 0x14
EVENT_INDEX_PARTIAL_FLUSH, EVENT_INDEX_EOP = 4, 5
GCR_ALL = (nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1) |
           nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1))
IB_VALID, IB_MAX_DWORDS = nvd.INDIRECT_BUFFER_VALID, (1 << 20) - 1  # IB size: 20 bits of dwords


def header(opcode: int, body_dwords: int) -> int:
  """nvd.h PACKET3(op, n) with n = body dwords - 1."""
  return nvd.PACKET3(opcode, body_dwords - 1)




def set_sh_reg(offset: int, *values: int) -> list[int]:
  return [header(SET_SH_REG, len(values) + 1), offset, *values]


def dispatch_direct(x: int, y: int, z: int, initiator: int) -> list[int]:
  """x, y, z count work-groups."""
  return [header(DISPATCH_DIRECT, 4), x, y, z, initiator]


def wait_reg_mem(addr: int, ref: int, mask: int = 0xFFFFFFFF, func: int = WAIT_GE, poll: int = 4) -> list[int]:
  """Wait until (mem32[addr] & mask) func ref, polling memory (MEM_SPACE 1, OPERATION 0 = wait, ENGINE 0 = ME)."""
  info = nvd.WAIT_REG_MEM_FUNCTION(func) | nvd.WAIT_REG_MEM_MEM_SPACE(1) | nvd.WAIT_REG_MEM_OPERATION(0) | \
    nvd.WAIT_REG_MEM_ENGINE(0)
  return [header(WAIT_REG_MEM, 6), info, lo(addr), hi(addr), lo(ref), mask, poll]


# WRITE_DATA control (nvd.h): DST_SEL 5 = memory (async, direct), WR_CONFIRM: the packet completes once the write is
# acknowledged (a later packet sees it); COPY_DATA control as amdgpu gfx_v11_0.c emits it: SRC_SEL [3:0] (5: immediate
# data), DST_SEL [11:8] (5: memory), COUNT_SEL bit 16 (64 bits), WR_CONFIRM bit 20
WRITE_DATA_MEMORY = nvd.WRITE_DATA_DST_SEL(5) | nvd.WR_CONFIRM
COPY_SEL_IMMEDIATE, COPY_SEL_MEMORY, COPY_COUNT_64 = 5, 5, 1 << 16


def write_data(addr: int, dwords) -> list:
  """WRITE_DATA of consecutive dwords to memory at addr (4-byte aligned): one 32-bit store per dword."""
  dwords = list(dwords)
  if not dwords: raise DeviceError("WRITE_DATA needs at least one dword")
  return [header(WRITE_DATA, 3 + len(dwords)), WRITE_DATA_MEMORY, lo(addr), hi(addr), *dwords]


def store64(addr: int, value) -> list:
  """COPY_DATA of a 64-bit immediate to memory at addr (8-byte aligned): one 64-bit store (a doorbell that must not
  arrive in two halves)."""
  control = COPY_SEL_IMMEDIATE | (COPY_SEL_MEMORY << 8) | COPY_COUNT_64 | nvd.WR_CONFIRM
  return [header(COPY_DATA, 5), control, lo(value), hi(value), lo(addr), hi(addr)]


def acquire_mem(gcr_cntl: int = GCR_ALL) -> list[int]:
  """Invalidate/write back caches over the whole address space (COHER_SIZE all ones, base 0)."""
  return [header(ACQUIRE_MEM, 7), 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0x0A, gcr_cntl]


def release_mem(addr: int, data: int, data_sel: int, int_sel: int = INT_SEL_NONE, ctxid: int = 0,
                gcr: int = REL_FLUSH_ALL) -> list[int]:
  """End-of-pipe release: after prior work drains and caches flush, write data (or the GPU clock) to addr and
  optionally raise an interrupt carrying ctxid (the KFD event id)."""
  ev = nvd.PACKET3_RELEASE_MEM_EVENT_TYPE(CACHE_FLUSH_AND_INV_TS_EVENT) | \
    nvd.PACKET3_RELEASE_MEM_EVENT_INDEX(EVENT_INDEX_EOP) | gcr
  sel = nvd.PACKET3_RELEASE_MEM_DATA_SEL(data_sel) | nvd.PACKET3_RELEASE_MEM_INT_SEL(int_sel) | \
    nvd.PACKET3_RELEASE_MEM_DST_SEL(0)  # memory
  return [header(RELEASE_MEM, 7), ev, sel, lo(addr), hi(addr), lo(data), hi(data), ctxid]


# gfx9 (soc15d.h): RELEASE_MEM's cache actions are EOP_* bits of its event dword (write back and invalidate L2 and
# the vector L1 at end of pipe, as gfx_v9_0_ring_emit_fence does); ACQUIRE_MEM has 6 body dwords with CP_COHER_CNTL
EOP_FLUSH_ALL_SOC15 = soc15.EOP_TC_WB_ACTION_EN | soc15.EOP_TCL1_ACTION_EN | soc15.EOP_TC_ACTION_EN
COHER_ALL_SOC15 = (soc15.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1) |
                   soc15.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1) |
                   soc15.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1) |
                   soc15.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1) |
                   soc15.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1))


def release_mem_soc15(addr: int, data: int, data_sel: int, int_sel: int = INT_SEL_NONE, ctxid: int = 0,
                      flush: bool = True) -> list[int]:
  """gfx9's end-of-pipe release (soc15d.h): the seven body dwords of release_mem, its cache actions as EOP_* bits of
  the event dword."""
  ev = soc15.EVENT_TYPE(CACHE_FLUSH_AND_INV_TS_EVENT) | soc15.EVENT_INDEX(EVENT_INDEX_EOP) | \
    (EOP_FLUSH_ALL_SOC15 if flush else 0)
  sel = soc15.DATA_SEL(data_sel) | soc15.INT_SEL(int_sel) | soc15.DST_SEL(0)
  return [header(RELEASE_MEM, 7), ev, sel, lo(addr), hi(addr), lo(data), hi(data), ctxid]


def acquire_mem_soc15(coher_cntl: int = COHER_ALL_SOC15) -> list[int]:
  """gfx9's ACQUIRE_MEM (soc15d.h; gfx_v9_0_emit_mem_sync): CP_COHER_CNTL, COHER_SIZE (all ones), COHER_SIZE_HI,
  COHER_BASE, COHER_BASE_HI, POLL_INTERVAL."""
  return [header(ACQUIRE_MEM, 6), coher_cntl, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 0x0A]


def event_write(event_type: int, event_index: int) -> list[int]:
  return [header(EVENT_WRITE, 1), nvd.EVENT_TYPE(event_type) | nvd.EVENT_INDEX(event_index)]


def indirect_buffer(addr: int, size_dw: int) -> list[int]:
  if addr & 3: raise ValueError(f"indirect buffer at {addr:#x} is not 4-byte aligned")
  if not 0 < size_dw <= IB_MAX_DWORDS: raise ValueError(f"indirect buffer of {size_dw} dwords (max {IB_MAX_DWORDS})")
  return [header(INDIRECT_BUFFER, 3), lo(addr), hi(addr), size_dw | IB_VALID]


def nop(body_dwords: int) -> list[int]:
  return [header(NOP, body_dwords)] + [0] * body_dwords


# ---- decoding (hcq decode, tests)
def _fields(op: int, body: list[int]) -> list[str]:
  def a(i): return f"{body[i] | (body[i + 1] << 32):#x}" if i + 1 < len(body) else "?"
  if op in (SET_SH_REG, SET_UCONFIG_REG) and body:
    base = body[0]
    out = []
    for i, v in enumerate(body[1:]):
      name = SH_REG_NAMES.get(base + i, f"reg {base + i + (SH_REG_START if op == SET_SH_REG else UCONFIG_REG_START):#x}") \
        if op == SET_SH_REG else f"uconfig {base + i + UCONFIG_REG_START:#x}"
      out.append(f"{name}={v:#x}")
    return out
  if op == DISPATCH_DIRECT and len(body) == 4:
    ini = body[3]
    flags = [n for b, n in ((INITIATOR_COMPUTE_SHADER_EN, "COMPUTE_SHADER_EN"), (INITIATOR_FORCE_START_AT_000, "FORCE_START_AT_000"),
                            (INITIATOR_CS_W32_EN, "CS_W32_EN")) if ini & b]
    return [f"dim_x={body[0]}", f"dim_y={body[1]}", f"dim_z={body[2]}", f"initiator={ini:#x}({'|'.join(flags)})"]
  if op == WAIT_REG_MEM and len(body) == 6:
    info = body[0]
    fn = ("always", "<", "<=", "==", "!=", ">=", ">", "?")[info & 7]
    space = "memory" if (info >> 4) & 3 == 1 else "register"
    oper = ("wait", "write-then-wait", "wait-on-reg-mem")[min((info >> 6) & 3, 2)]
    return [f"function={fn}", f"mem_space={space}", f"operation={oper}", f"addr={a(1)}", f"reference={body[3]:#x}",
            f"mask={body[4]:#x}", f"poll_interval={body[5]}"]
  if op == RELEASE_MEM and len(body) == 7:
    ev, sel = body[0], body[1]
    return [f"event_type={ev & 0x3F:#x}", f"event_index={(ev >> 8) & 0xF}", f"gcr={ev & 0x7FF000:#x}",
            f"data_sel={(sel >> 29) & 7}", f"int_sel={(sel >> 24) & 7}", f"dst_sel={(sel >> 16) & 3}",
            f"addr={a(2)}", f"data={a(4)}", f"int_ctxid={body[6]:#x}"]
  if op == ACQUIRE_MEM and len(body) == 7:
    return [f"coher_size={a(1)}", f"coher_base={a(3)}", f"poll_interval={body[5]}", f"gcr_cntl={body[6]:#x}"]
  if op == EVENT_WRITE and body:
    return [f"event_type={body[0] & 0x3F:#x}", f"event_index={(body[0] >> 8) & 0xF}"]
  if op == INDIRECT_BUFFER and len(body) == 3:
    return [f"ib_addr={a(0)}", f"size_dw={body[2] & 0xFFFFF}", f"valid={(body[2] >> 23) & 1}"]
  return [f"{v:#x}" for v in body]


def decode(words) -> list[tuple[int, str, list[str]]]:
  """(dword offset, packet name, fields) for each packet of a PM4 stream. Raises DecodeError (a ValueError holding
  the packets before it) at a non-type-3 header or a truncated packet, naming the offset."""
  out, i, n = [], 0, len(words)
  while i < n:
    h = words[i]
    if h >> 30 != PACKET_TYPE3:
      raise DecodeError(f"dword {i}: {h:#010x} is not a PM4 type-3 header (type {h >> 30})", out)
    op, count = (h >> 8) & 0xFF, ((h >> 16) & 0x3FFF) + 1
    if i + 1 + count > n: raise DecodeError(f"dword {i}: {OPCODE_NAMES.get(op, hex(op))} needs {count} body dwords, "
                                            f"the stream has {n - i - 1}", out)
    body = list(words[i + 1:i + 1 + count])
    out.append((i, OPCODE_NAMES.get(op, f"OPCODE_{op:#x}"), _fields(op, body)))
    i += 1 + count
  return out
