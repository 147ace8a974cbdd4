"""PM4 type-3 packets for the gfx10-gfx11 compute queue, as lists of dwords.

Sources (Linux 6.12): drivers/gpu/drm/amd/amdgpu/nvd.h (opcodes, header, WAIT_REG_MEM / RELEASE_MEM / ACQUIRE_MEM
fields), asic_reg/gc/gc_11_0_0_offset.h (COMPUTE_* registers; GC segment-0 base 0x1260, soc21 ip offsets),
asic_reg/gc/gc_11_0_0_sh_mask.h (COMPUTE_DISPATCH_INITIATOR bits), include/navi10_enum.h (VGT event types).
tests/amd/test_packets.py checks these numbers against the headers."""
from __future__ import annotations

# nvd.h: #define PACKET3(op, n) ((PACKET_TYPE3 << 30) | (((op) & 0xFF) << 8) | ((n) & 0x3FFF) << 16)
PACKET_TYPE3 = 3
NOP, DISPATCH_DIRECT, WRITE_DATA, WAIT_REG_MEM, INDIRECT_BUFFER = 0x10, 0x15, 0x37, 0x3C, 0x3F
COPY_DATA, EVENT_WRITE, RELEASE_MEM, ACQUIRE_MEM, SET_SH_REG, SET_UCONFIG_REG = 0x40, 0x46, 0x49, 0x58, 0x76, 0x79
PRED_EXEC = 0x23
OPCODE_NAMES = {NOP: "NOP", DISPATCH_DIRECT: "DISPATCH_DIRECT", WRITE_DATA: "WRITE_DATA", WAIT_REG_MEM: "WAIT_REG_MEM",
                INDIRECT_BUFFER: "INDIRECT_BUFFER", COPY_DATA: "COPY_DATA", EVENT_WRITE: "EVENT_WRITE",
                RELEASE_MEM: "RELEASE_MEM", ACQUIRE_MEM: "ACQUIRE_MEM", SET_SH_REG: "SET_SH_REG",
                SET_UCONFIG_REG: "SET_UCONFIG_REG", PRED_EXEC: "PRED_EXEC"}

# nvd.h: PACKET3_SET_SH_REG_START 0x2c00, PACKET3_SET_UCONFIG_REG_START 0xc000
SH_REG_START, UCONFIG_REG_START = 0x2C00, 0xC000
GC_SEG0_BASE = 0x1260  # soc21 GC_BASE.instance[0].segment[0] (Linux: soc21 ip offsets), so regX + base = absolute

# gc_11_0_0_offset.h (base index 0) -> offsets in the SET_SH_REG window
def _sh(reg: int) -> int: return reg + GC_SEG0_BASE - SH_REG_START
COMPUTE_DISPATCH_INITIATOR = _sh(0x1ba0)
COMPUTE_START_X = _sh(0x1ba4)
COMPUTE_NUM_THREAD_X = _sh(0x1ba7)
COMPUTE_PGM_LO = _sh(0x1bac)
COMPUTE_DISPATCH_SCRATCH_BASE_LO = _sh(0x1bb0)
COMPUTE_PGM_RSRC1 = _sh(0x1bb2)
COMPUTE_RESOURCE_LIMITS = _sh(0x1bb5)
COMPUTE_TMPRING_SIZE = _sh(0x1bb8)
COMPUTE_RESTART_X = _sh(0x1bbb)
COMPUTE_PGM_RSRC3 = _sh(0x1bc8)
COMPUTE_USER_DATA_0 = _sh(0x1be0)
SH_REG_NAMES = {
  COMPUTE_DISPATCH_INITIATOR: "COMPUTE_DISPATCH_INITIATOR", COMPUTE_START_X: "COMPUTE_START_X",
  COMPUTE_START_X + 1: "COMPUTE_START_Y", COMPUTE_START_X + 2: "COMPUTE_START_Z",
  COMPUTE_NUM_THREAD_X: "COMPUTE_NUM_THREAD_X", COMPUTE_NUM_THREAD_X + 1: "COMPUTE_NUM_THREAD_Y",
  COMPUTE_NUM_THREAD_X + 2: "COMPUTE_NUM_THREAD_Z", COMPUTE_PGM_LO: "COMPUTE_PGM_LO", COMPUTE_PGM_LO + 1: "COMPUTE_PGM_HI",
  COMPUTE_DISPATCH_SCRATCH_BASE_LO: "COMPUTE_DISPATCH_SCRATCH_BASE_LO",
  COMPUTE_DISPATCH_SCRATCH_BASE_LO + 1: "COMPUTE_DISPATCH_SCRATCH_BASE_HI", COMPUTE_PGM_RSRC1: "COMPUTE_PGM_RSRC1",
  COMPUTE_PGM_RSRC1 + 1: "COMPUTE_PGM_RSRC2", COMPUTE_RESOURCE_LIMITS: "COMPUTE_RESOURCE_LIMITS",
  COMPUTE_TMPRING_SIZE: "COMPUTE_TMPRING_SIZE", COMPUTE_RESTART_X: "COMPUTE_RESTART_X",
  COMPUTE_RESTART_X + 1: "COMPUTE_RESTART_Y", COMPUTE_RESTART_X + 2: "COMPUTE_RESTART_Z",
  COMPUTE_PGM_RSRC3: "COMPUTE_PGM_RSRC3", **{COMPUTE_USER_DATA_0 + i: f"COMPUTE_USER_DATA_{i}" for i in range(16)},
}

# gc_11_0_0_sh_mask.h: COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN 0, __FORCE_START_AT_000 2, __CS_W32_EN 15
INITIATOR_COMPUTE_SHADER_EN, INITIATOR_FORCE_START_AT_000, INITIATOR_CS_W32_EN = 1 << 0, 1 << 2, 1 << 15

# nvd.h WAIT_REG_MEM: FUNCTION(x) << 0, MEM_SPACE(x) << 4, OPERATION(x) << 6, ENGINE(x) << 8
WAIT_ALWAYS, WAIT_LT, WAIT_LE, WAIT_EQ, WAIT_NE, WAIT_GE, WAIT_GT = range(7)
# nvd.h RELEASE_MEM: EVENT_TYPE << 0, EVENT_INDEX << 8, GCR_GLM_WB 12 .. GCR_SEQ 22; DST_SEL << 16, INT_SEL << 24,
# DATA_SEL << 29 (in the second dword)
REL_GCR_GLM_WB, REL_GCR_GLM_INV, REL_GCR_GLV_INV, REL_GCR_GL1_INV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
REL_GCR_GL2_INV, REL_GCR_GL2_WB, REL_GCR_SEQ = 1 << 20, 1 << 21, 1 << 22
REL_FLUSH_ALL = REL_GCR_GLM_WB | REL_GCR_GLM_INV | REL_GCR_GLV_INV | REL_GCR_GL1_INV | REL_GCR_GL2_INV | REL_GCR_GL2_WB | REL_GCR_SEQ
DATA_SEL_NONE, DATA_SEL_32, DATA_SEL_64, DATA_SEL_GPU_CLOCK = 0, 1, 2, 3
INT_SEL_NONE, INT_SEL_INT, INT_SEL_INT_AFTER_WRITE = 0, 1, 2
# navi10_enum.h VGT_EVENT_TYPE: CS_PARTIAL_FLUSH 0x7, CACHE_FLUSH_AND_INV_TS_EVENT 0x14; event index 4 = CS partial
# flush, 5 = end of pipe (the "EVENT_INDEX" values of the PM4 spec)
CS_PARTIAL_FLUSH, CACHE_FLUSH_AND_INV_TS_EVENT = 0x07, 0x14
EVENT_INDEX_PARTIAL_FLUSH, EVENT_INDEX_EOP = 4, 5
# nvd.h ACQUIRE_MEM GCR_CNTL: GLI_INV 0, GL1_RANGE 2, GLM_WB 4, GLM_INV 5, GLK_WB 6, GLK_INV 7, GLV_INV 8, GL1_INV 9,
# GL2_US 10, GL2_RANGE 11, GL2_DISCARD 13, GL2_INV 14, GL2_WB 15, SEQ 16
GCR_GLI_INV, GCR_GLM_WB, GCR_GLM_INV, GCR_GLK_WB, GCR_GLK_INV = 1 << 0, 1 << 4, 1 << 5, 1 << 6, 1 << 7
GCR_GLV_INV, GCR_GL1_INV, GCR_GL2_INV, GCR_GL2_WB = 1 << 8, 1 << 9, 1 << 14, 1 << 15
GCR_ALL = GCR_GLI_INV | GCR_GLM_WB | GCR_GLM_INV | GCR_GLK_WB | GCR_GLK_INV | GCR_GLV_INV | GCR_GL1_INV | GCR_GL2_INV | GCR_GL2_WB
# nvd.h INDIRECT_BUFFER_VALID (1 << 23); the IB size field is 20 bits of dwords
IB_VALID, IB_MAX_DWORDS = 1 << 23, (1 << 20) - 1


def header(opcode: int, body_dwords: int) -> int:
  """nvd.h PACKET3(op, n) with n = body dwords - 1."""
  return (PACKET_TYPE3 << 30) | (((body_dwords - 1) & 0x3FFF) << 16) | ((opcode & 0xFF) << 8)


def lo(x) -> int:
  """Low dword of a 64-bit value; a symbolic value (cmdbuf.Sym) gives a patch."""
  return x & 0xFFFFFFFF if isinstance(x, int) else x.lo()


def hi(x) -> int: return (x >> 32) & 0xFFFFFFFF if isinstance(x, int) else x.hi()


def set_sh_reg(offset: int, *values: int) -> list[int]:
  return [header(SET_SH_REG, len(values) + 1), offset, *values]


def dispatch_direct(x: int, y: int, z: int, initiator: int) -> list[int]:
  """x, y, z count work-groups."""
  return [header(DISPATCH_DIRECT, 4), x, y, z, initiator]


def wait_reg_mem(addr: int, ref: int, mask: int = 0xFFFFFFFF, func: int = WAIT_GE, poll: int = 4) -> list[int]:
  """Wait until (mem32[addr] & mask) func ref, polling memory (MEM_SPACE 1, OPERATION 0 = wait, ENGINE 0 = ME)."""
  return [header(WAIT_REG_MEM, 6), func | (1 << 4), lo(addr), hi(addr), lo(ref), mask, poll]


def acquire_mem(gcr_cntl: int = GCR_ALL) -> list[int]:
  """Invalidate/write back caches over the whole address space (COHER_SIZE all ones, base 0)."""
  return [header(ACQUIRE_MEM, 7), 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0x0A, gcr_cntl]


def release_mem(addr: int, data: int, data_sel: int, int_sel: int = INT_SEL_NONE, ctxid: int = 0,
                gcr: int = REL_FLUSH_ALL) -> list[int]:
  """End-of-pipe release: after prior work drains and caches flush, write data (or the GPU clock) to addr and
  optionally raise an interrupt carrying ctxid (the KFD event id)."""
  ev = CACHE_FLUSH_AND_INV_TS_EVENT | (EVENT_INDEX_EOP << 8) | gcr
  sel = (data_sel << 29) | (int_sel << 24)  # DST_SEL 0 = memory
  return [header(RELEASE_MEM, 7), ev, sel, lo(addr), hi(addr), lo(data), hi(data), ctxid]


def event_write(event_type: int, event_index: int) -> list[int]:
  return [header(EVENT_WRITE, 1), event_type | (event_index << 8)]


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
  """(dword offset, packet name, fields) for each packet of a PM4 stream. Raises ValueError at a non-type-3
  header or a truncated packet, naming the offset."""
  out, i, n = [], 0, len(words)
  while i < n:
    h = words[i]
    if h >> 30 != PACKET_TYPE3:
      raise ValueError(f"dword {i}: {h:#010x} is not a PM4 type-3 header (type {h >> 30})")
    op, count = (h >> 8) & 0xFF, ((h >> 16) & 0x3FFF) + 1
    if i + 1 + count > n: raise ValueError(f"dword {i}: {OPCODE_NAMES.get(op, hex(op))} needs {count} body dwords, "
                                           f"the stream has {n - i - 1}")
    body = list(words[i + 1:i + 1 + count])
    out.append((i, OPCODE_NAMES.get(op, f"OPCODE_{op:#x}"), _fields(op, body)))
    i += 1 + count
  return out
