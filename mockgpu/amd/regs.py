"""Register numbers and packet constants of the mock gfx1100, with where each comes from.

PM4 (drivers/gpu/drm/amd/amdgpu/nvd.h, linux 6.12): PACKET3 header = type[31:30] | count[29:16] | opcode[15:8],
count = body dwords - 1 (CP_PACKET_GET_TYPE/COUNT, CP_PACKET3_GET_OPCODE).
Compute registers: asic_reg/gc/gc_11_0_0_offset.h (regCOMPUTE_* with BASE_IDX 0) + GC_BASE segment 0 = 0x1260
(soc21_ip_offset.h); SET_SH_REG bodies count from PACKET3_SET_SH_REG_START 0x2c00, so the SH offset of a register is
reg + 0x1260 - 0x2c00.
SDMA (drivers/gpu/drm/amd/amdgpu/sdma_v6_0_0_pkt_open.h): header op[7:0], sub_op[15:8].
"""
from __future__ import annotations

# ---- PM4 type-3 opcodes (nvd.h)
PM4_NOP = 0x10
PM4_DISPATCH_DIRECT = 0x15
PM4_PRED_EXEC = 0x23
PM4_WRITE_DATA = 0x37
PM4_WAIT_REG_MEM = 0x3C
PM4_INDIRECT_BUFFER = 0x3F
PM4_COPY_DATA = 0x40
PM4_EVENT_WRITE = 0x46
PM4_RELEASE_MEM = 0x49
PM4_ACQUIRE_MEM = 0x58
PM4_SET_SH_REG = 0x76
PM4_SET_UCONFIG_REG = 0x79

PM4_NAMES = {v: k[4:] for k, v in dict(globals()).items() if k.startswith("PM4_") and isinstance(v, int)}

SET_SH_REG_START, SET_SH_REG_END = 0x2C00, 0x3000            # nvd.h PACKET3_SET_SH_REG_START/END
SET_UCONFIG_REG_START, SET_UCONFIG_REG_END = 0xC000, 0xC400  # nvd.h PACKET3_SET_UCONFIG_REG_START/END
INDIRECT_BUFFER_VALID = 1 << 23                              # nvd.h INDIRECT_BUFFER_VALID
IB_SIZE_MASK = 0xFFFFF                                       # IB size in dwords: bits [19:0]

GC_BASE_SEG0 = 0x1260    # soc21_ip_offset.h GC_BASE.instance[0].segment[0]


def _sh(reg: int) -> int: return reg + GC_BASE_SEG0 - SET_SH_REG_START


# gc_11_0_0_offset.h register numbers -> SET_SH_REG offsets
COMPUTE_DISPATCH_INITIATOR = _sh(0x1BA0)   # 0x200
COMPUTE_START_X = _sh(0x1BA4)              # 0x204, then _Y, _Z
COMPUTE_NUM_THREAD_X = _sh(0x1BA7)         # 0x207, then _Y, _Z
COMPUTE_PGM_LO = _sh(0x1BAC)               # 0x20c
COMPUTE_PGM_HI = _sh(0x1BAD)
COMPUTE_DISPATCH_SCRATCH_BASE_LO = _sh(0x1BB0)
COMPUTE_DISPATCH_SCRATCH_BASE_HI = _sh(0x1BB1)
COMPUTE_PGM_RSRC1 = _sh(0x1BB2)            # 0x212
COMPUTE_PGM_RSRC2 = _sh(0x1BB3)
COMPUTE_RESOURCE_LIMITS = _sh(0x1BB5)
COMPUTE_TMPRING_SIZE = _sh(0x1BB8)         # 0x218
COMPUTE_RESTART_X = _sh(0x1BBB)
COMPUTE_PGM_RSRC3 = _sh(0x1BC8)            # 0x228
COMPUTE_USER_DATA_0 = _sh(0x1BE0)          # 0x240 .. 0x24f (COMPUTE_USER_DATA_15 = 0x1bef)
NUM_USER_DATA = 16

# COMPUTE_DISPATCH_INITIATOR bits (gc_11_0_0_sh_mask.h): COMPUTE_SHADER_EN 0, FORCE_START_AT_000 2, CS_W32_EN 15
DISPATCH_COMPUTE_SHADER_EN, DISPATCH_CS_W32_EN = 1 << 0, 1 << 15
# COMPUTE_PGM_RSRC2 (llvm AMDHSAKernelDescriptor.h / gc sh_mask): USER_SGPR [5:1], LDS_SIZE [23:15] in 512-byte units
RSRC2_LDS_SHIFT, RSRC2_LDS_MASK, LDS_GRANULE = 15, 0x1FF, 512
# COMPUTE_TMPRING_SIZE (gc_11_0_0_sh_mask.h): WAVES [11:0], WAVESIZE [24:12] in 256-byte units per wave
TMPRING_WAVESIZE_SHIFT, TMPRING_WAVESIZE_MASK, TMPRING_GRANULE = 12, 0x1FFF, 256

# WAIT_REG_MEM control (nvd.h): FUNCTION [2:0], MEM_SPACE [5:4], OPERATION [7:6]
WAIT_FUNCTIONS = {0: "always", 1: "<", 2: "<=", 3: "==", 4: "!=", 5: ">=", 6: ">"}
# RELEASE_MEM (nvd.h): EVENT_TYPE [5:0], EVENT_INDEX [11:8]; DATA_SEL [31:29], INT_SEL [26:24], DST_SEL [17:16]
RELEASE_DATA_NONE, RELEASE_DATA_32, RELEASE_DATA_64, RELEASE_DATA_GPU_CLOCK, RELEASE_DATA_SYS_CLOCK = 0, 1, 2, 3, 4
# WRITE_DATA (nvd.h): DST_SEL [11:8] 0 register, 1 memory, 2 gl2, 5 memory async; WR_ONE_ADDR bit 16
WRITE_DATA_DST_REG, WRITE_DATA_ONE_ADDR = 0, 1 << 16
# COPY_DATA control (gfx v10/v11 CP packet spec as used by amdgpu gfx_v11_0.c): SRC_SEL [3:0], DST_SEL [11:8],
# COUNT_SEL bit 16 (64-bit), WR_CONFIRM bit 20. Selectors: 0 register, 1 memory, 2 TC/L2 memory, 5 immediate data,
# 9 GPU clock counter.
COPY_SEL_REG, COPY_SEL_MEM, COPY_SEL_TC_L2, COPY_SEL_IMM, COPY_SEL_GPU_CLOCK = 0, 1, 2, 5, 9
COPY_DATA_COUNT_SEL = 1 << 16

# ---- SDMA opcodes (sdma_v6_0_0_pkt_open.h SDMA_OP_*)
SDMA_NOP, SDMA_COPY, SDMA_WRITE, SDMA_INDIRECT, SDMA_FENCE, SDMA_TRAP = 0, 1, 2, 4, 5, 6
SDMA_POLL_REGMEM, SDMA_CONST_FILL, SDMA_TIMESTAMP, SDMA_GCR = 8, 11, 13, 17
SDMA_NAMES = {v: k[5:] for k, v in dict(globals()).items() if k.startswith("SDMA_") and isinstance(v, int)}
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_WRITE_LINEAR = 0, 0
SDMA_SUBOP_TIMESTAMP_SET, SDMA_SUBOP_TIMESTAMP_GET, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 0, 1, 2

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

# ---- the GPU clock counter the packets read (RELEASE_MEM data_sel 3, SDMA TIMESTAMP): 100 MHz
GPU_CLOCK_HZ = 100_000_000
