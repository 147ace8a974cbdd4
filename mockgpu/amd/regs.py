"""Register numbers and packet constants of the mock gfx1100, from the generated bindings where the headers have
them (hcq.autogen.amd.pm4 = nvd.h; hcq.autogen.amd.gc_11_0_0_compute = the COMPUTE_* registers of
gc_11_0_0_offset.h/_sh_mask.h; hcq.autogen.amd.sdma = sdma_v6_0_0_pkt_open.h, written out below; all linux 6.12),
cited where they do not.

PM4 header = type[31:30] | count[29:16] | opcode[15:8], count = body dwords - 1 (nvd.h CP_PACKET_GET_TYPE/COUNT,
CP_PACKET3_GET_OPCODE). SET_SH_REG bodies count from PACKET3_SET_SH_REG_START, so the SH offset of a compute register
is regX + GC_BASE segment 0 - 0x2c00. SDMA header: op[7:0], sub_op[15:8].

The SDMA opcodes below are written out rather than read from hcq.autogen.amd.sdma at import: that module holds every
SDMA packet field and costs ~3 ms to import, a share of what a fresh process may spend on the mock;
tests/mockgpu/test_regs_autogen.py proves each value equal to the generated bindings. (The COMPUTE_* registers come
from amd.gc_11_0_0_compute, generated apart from the whole-GC module amd.gc_11_0_0 for the same reason.)
"""
from __future__ import annotations

from ...autogen.amd import gc_9_4_3_compute as _gc9
from ...autogen.amd import gc_11_0_0_compute as _gc
from ...autogen.amd import pm4 as _pm4

# ---- PM4 type-3 opcodes
PM4_NOP = _pm4.PACKET3_NOP
PM4_DISPATCH_DIRECT = _pm4.PACKET3_DISPATCH_DIRECT
PM4_PRED_EXEC = _pm4.PACKET3_PRED_EXEC
PM4_WRITE_DATA = _pm4.PACKET3_WRITE_DATA
PM4_WAIT_REG_MEM = _pm4.PACKET3_WAIT_REG_MEM
PM4_INDIRECT_BUFFER = _pm4.PACKET3_INDIRECT_BUFFER
PM4_COPY_DATA = _pm4.PACKET3_COPY_DATA
PM4_EVENT_WRITE = _pm4.PACKET3_EVENT_WRITE
PM4_RELEASE_MEM = _pm4.PACKET3_RELEASE_MEM
PM4_ACQUIRE_MEM = _pm4.PACKET3_ACQUIRE_MEM
PM4_SET_SH_REG = _pm4.PACKET3_SET_SH_REG
PM4_SET_UCONFIG_REG = _pm4.PACKET3_SET_UCONFIG_REG

PM4_NAMES = {v: k[4:] for k, v in dict(globals()).items() if k.startswith("PM4_") and isinstance(v, int)}

SET_SH_REG_START, SET_SH_REG_END = _pm4.PACKET3_SET_SH_REG_START, _pm4.PACKET3_SET_SH_REG_END
SET_UCONFIG_REG_START = _pm4.PACKET3_SET_UCONFIG_REG_START
INDIRECT_BUFFER_VALID = _pm4.INDIRECT_BUFFER_VALID
IB_SIZE_MASK = 0xFFFFF                                       # IB size in dwords: bits [19:0] (gfx_v11_0_ring_emit_ib)

# GC register segment 0 base of a gfx11 (navi3x): no linux 6.12 header has it (soc21 parts take their IP bases from
# the IP discovery table, amdgpu_discovery.c; the values below are what a Navi 31's table holds). The mock publishes them as
# amdgpu's ip_discovery/die/0/11/0/base_addr (topology.py). The driver writes the same fact as
# drivers/amd/pm4.GC_SEG0_BASE (the mock may not import the driver); tests/mockgpu/test_hardware_facts.py holds them
# equal.
GC_BASE_SEGMENTS = (0x1260, 0xA000, 0x1C000)
GC_BASE_SEG0 = GC_BASE_SEGMENTS[0]     # compute registers have BASE_IDX 0
# gfx9 parts (gfx942 here): vega10_ip_offset.h GC_BASE (linux 6.12), the segment-0 base the gc_9_4_3 offsets assume
# (regCOMPUTE_PGM_LO 0xe0c + 0x2000 = SET_SH_REG_START 0x2c00 + 0x20c, as on gfx11)
GC9_BASE_SEGMENTS = (0x2000, 0xA000)


def _sh(reg: int) -> int: return reg + GC_BASE_SEG0 - SET_SH_REG_START


COMPUTE_DISPATCH_INITIATOR = _sh(_gc.regCOMPUTE_DISPATCH_INITIATOR)   # 0x200
COMPUTE_START_X = _sh(_gc.regCOMPUTE_START_X)                         # 0x204, then _Y, _Z
COMPUTE_NUM_THREAD_X = _sh(_gc.regCOMPUTE_NUM_THREAD_X)               # 0x207, then _Y, _Z
COMPUTE_PGM_LO = _sh(_gc.regCOMPUTE_PGM_LO)                           # 0x20c
COMPUTE_PGM_HI = _sh(_gc.regCOMPUTE_PGM_HI)
COMPUTE_DISPATCH_SCRATCH_BASE_LO = _sh(_gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO)
COMPUTE_DISPATCH_SCRATCH_BASE_HI = _sh(_gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI)
COMPUTE_PGM_RSRC1 = _sh(_gc.regCOMPUTE_PGM_RSRC1)                     # 0x212
COMPUTE_PGM_RSRC2 = _sh(_gc.regCOMPUTE_PGM_RSRC2)
COMPUTE_RESOURCE_LIMITS = _sh(_gc.regCOMPUTE_RESOURCE_LIMITS)
COMPUTE_TMPRING_SIZE = _sh(_gc.regCOMPUTE_TMPRING_SIZE)               # 0x218
COMPUTE_RESTART_X = _sh(_gc.regCOMPUTE_RESTART_X)
COMPUTE_PGM_RSRC3 = _sh(_gc.regCOMPUTE_PGM_RSRC3)                     # 0x228
COMPUTE_USER_DATA_0 = _sh(_gc.regCOMPUTE_USER_DATA_0)                 # 0x240 .. 0x24f
NUM_USER_DATA = _gc.regCOMPUTE_USER_DATA_15 - _gc.regCOMPUTE_USER_DATA_0 + 1

# the SH registers a DISPATCH_DIRECT reads besides the user data (the key of MockAMDGPU._launch_states); a SET_SH_REG
# of none of them leaves the converted launch state as it is
LAUNCH_STATE_REGS = (COMPUTE_START_X, COMPUTE_START_X + 1, COMPUTE_START_X + 2, COMPUTE_NUM_THREAD_X,
                     COMPUTE_NUM_THREAD_X + 1, COMPUTE_NUM_THREAD_X + 2, COMPUTE_PGM_LO, COMPUTE_PGM_HI,
                     COMPUTE_PGM_RSRC1, COMPUTE_PGM_RSRC2, COMPUTE_PGM_RSRC3, COMPUTE_TMPRING_SIZE)

# gfx9 (gc 9.4.3: gfx942): the same SH offsets but for COMPUTE_PGM_RSRC3 (0x22d; it holds ACCUM_OFFSET there)
COMPUTE_PGM_RSRC3_GFX9 = _gc9.regCOMPUTE_PGM_RSRC3 + GC9_BASE_SEGMENTS[0] - SET_SH_REG_START
LAUNCH_STATE_REGS_GFX9 = tuple(COMPUTE_PGM_RSRC3_GFX9 if r == COMPUTE_PGM_RSRC3 else r for r in LAUNCH_STATE_REGS)
TMPRING_GRANULE_GFX9 = 1024  # WAVESIZE unit on gfx9: 256 dwords per wave (ROCR amd_aql_queue.cpp)

DISPATCH_COMPUTE_SHADER_EN = _gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
DISPATCH_CS_W32_EN = _gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK
NUM_THREAD_FULL_MASK = _gc.COMPUTE_NUM_THREAD_X__NUM_THREAD_FULL_MASK
RSRC2_LDS_SHIFT = _gc.COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT
RSRC2_LDS_MASK = _gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK >> RSRC2_LDS_SHIFT
LDS_GRANULE = 512            # LDS_SIZE unit on gfx11: 128 dwords (the granule tinygrad and LLVM's ABI use)
TMPRING_WAVESIZE_SHIFT = _gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT
TMPRING_WAVESIZE_MASK = _gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK >> TMPRING_WAVESIZE_SHIFT
TMPRING_GRANULE = 256        # WAVESIZE unit: 64 dwords per wave

# WAIT_REG_MEM control (nvd.h WAIT_REG_MEM_FUNCTION/MEM_SPACE/OPERATION): FUNCTION [2:0], MEM_SPACE [5:4], OPERATION [7:6]
WAIT_FUNCTIONS = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}
# RELEASE_MEM (nvd.h PACKET3_RELEASE_MEM_DATA_SEL/INT_SEL/DST_SEL): DATA_SEL [31:29], INT_SEL [26:24], DST_SEL [17:16]
RELEASE_DATA_NONE, RELEASE_DATA_32, RELEASE_DATA_64, RELEASE_DATA_GPU_CLOCK, RELEASE_DATA_SYS_CLOCK = 0, 1, 2, 3, 4
# WRITE_DATA (nvd.h WRITE_DATA_DST_SEL, WR_ONE_ADDR): DST_SEL [11:8] 0 register, 1 memory, 2 gl2, 5 memory async
WRITE_DATA_DST_REG, WRITE_DATA_ONE_ADDR = 0, _pm4.WR_ONE_ADDR
# COPY_DATA control (CP packet spec as amdgpu gfx_v11_0.c emits it): SRC_SEL [3:0], DST_SEL [11:8], COUNT_SEL bit 16
# (64-bit), WR_CONFIRM bit 20. Selectors: 0 register, 1 memory, 2 TC/L2 memory, 5 immediate data, 9 GPU clock.
COPY_SEL_REG, COPY_SEL_MEM, COPY_SEL_TC_L2, COPY_SEL_IMM, COPY_SEL_GPU_CLOCK = 0, 1, 2, 5, 9
COPY_DATA_COUNT_SEL = 1 << 16

# ---- SDMA opcodes
# sdma_v6_0_0_pkt_open.h SDMA_OP_* / SDMA_SUBOP_* (written out: the generated module is 180 KB)
SDMA_CONSTS = {
  "SDMA_OP_NOP": 0, "SDMA_OP_COPY": 1, "SDMA_OP_WRITE": 2, "SDMA_OP_INDIRECT": 4, "SDMA_OP_FENCE": 5, "SDMA_OP_TRAP": 6,
  "SDMA_OP_POLL_REGMEM": 8, "SDMA_OP_CONST_FILL": 11, "SDMA_OP_TIMESTAMP": 13, "SDMA_OP_GCR_REQ": 17,
  "SDMA_SUBOP_COPY_LINEAR": 0, "SDMA_SUBOP_WRITE_LINEAR": 0, "SDMA_SUBOP_TIMESTAMP_SET": 0,
  "SDMA_SUBOP_TIMESTAMP_GET": 1, "SDMA_SUBOP_TIMESTAMP_GET_GLOBAL": 2,
}
_S = SDMA_CONSTS
SDMA_NOP, SDMA_COPY, SDMA_WRITE, SDMA_INDIRECT = _S["SDMA_OP_NOP"], _S["SDMA_OP_COPY"], _S["SDMA_OP_WRITE"], _S["SDMA_OP_INDIRECT"]
SDMA_FENCE, SDMA_TRAP, SDMA_POLL_REGMEM = _S["SDMA_OP_FENCE"], _S["SDMA_OP_TRAP"], _S["SDMA_OP_POLL_REGMEM"]
SDMA_CONST_FILL, SDMA_TIMESTAMP, SDMA_GCR = _S["SDMA_OP_CONST_FILL"], _S["SDMA_OP_TIMESTAMP"], _S["SDMA_OP_GCR_REQ"]
# COPY_LINEAR count (bytes - 1) per SDMA major: SDMA 4.x (vega10_sdma_pkt_open.h, gfx942) 22 bits, SDMA 6/7 30 bits
SDMA_COPY_COUNT_MASKS = {4: 0x003FFFFF, 6: 0x3FFFFFFF, 7: 0x3FFFFFFF}
SDMA_NAMES = {v: k[5:] for k, v in dict(globals()).items() if k.startswith("SDMA_") and isinstance(v, int)}
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_WRITE_LINEAR = _S["SDMA_SUBOP_COPY_LINEAR"], _S["SDMA_SUBOP_WRITE_LINEAR"]
SDMA_SUBOP_TIMESTAMP_SET = _S["SDMA_SUBOP_TIMESTAMP_SET"]
SDMA_SUBOP_TIMESTAMP_GET = _S["SDMA_SUBOP_TIMESTAMP_GET"]
SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = _S["SDMA_SUBOP_TIMESTAMP_GET_GLOBAL"]

# ---- AQL (HSA runtime spec 1.2, hsa.h: hsa_packet_type_t, hsa_kernel_dispatch_packet_t; amd_hsa_queue.h)
AQL_PACKET_SIZE = 64
AQL_TYPE_VENDOR, AQL_TYPE_INVALID, AQL_TYPE_KERNEL_DISPATCH, AQL_TYPE_BARRIER_AND = 0, 1, 2, 3
AQL_TYPE_AGENT_DISPATCH, AQL_TYPE_BARRIER_OR = 4, 5
AQL_VENDOR_FORMAT_PM4_IB = 1          # amd_aql_pm4_ib_packet_t: amd_format in the upper 16 bits of dword 0
AMD_QUEUE_WRITE_DISPATCH_ID, AMD_QUEUE_READ_DISPATCH_ID = 56, 128   # amd_queue_t offsets (amd_hsa_queue.h)
AMD_SIGNAL_VALUE, AMD_SIGNAL_MAILBOX, AMD_SIGNAL_EVENT_ID = 8, 16, 24   # amd_signal_t offsets (amd_hsa_signal.h)

# ---- kernel descriptor (llvm AMDHSAKernelDescriptor.h, amdhsa_kernel_descriptor_t)
KD_GROUP_SEGMENT, KD_PRIVATE_SEGMENT, KD_KERNARG_SIZE, KD_ENTRY_OFFSET = 0, 4, 8, 16
KD_RSRC3, KD_RSRC1, KD_RSRC2, KD_CODE_PROPERTIES = 44, 48, 52, 56
# kernel_code_properties bits: PRIVATE_SEGMENT_BUFFER 0, DISPATCH_PTR 1, QUEUE_PTR 2, KERNARG_SEGMENT_PTR 3,
# DISPATCH_ID 4, FLAT_SCRATCH_INIT 5, PRIVATE_SEGMENT_SIZE 6, WAVEFRONT_SIZE32 10
KCP_USER_SGPRS = ((0, 4), (1, 2), (2, 2), (3, 2), (4, 2), (5, 2), (6, 1))
KCP_WAVE32 = 1 << 10

# ---- the GPU clock counter the packets read (RELEASE_MEM data_sel 3, COPY_DATA GPU clock, SDMA TIMESTAMP): the 100 MHz
# reference clock of a gfx11 dGPU (amdgpu's soc21_get_xclk, reported as AMDGPU_INFO_DEV_INFO gpu_counter_freq).
# The driver writes the same fact as drivers/amd/pm4.GPU_CLOCK_HZ; tests/mockgpu/test_hardware_facts.py holds them
# equal and times a launch against the host clock.
GPU_CLOCK_HZ = 100_000_000
