"""The 64-byte AMDHSA kernel descriptor (LLVM AMDGPUUsage "Kernel Descriptor", amdhsa_kernel_descriptor_t) and the
bit fields of COMPUTE_PGM_RSRC1/2/3 and kernel_code_properties that launchers and the emulator need.

Byte layout: 0 group_segment_fixed_size u32, 4 private_segment_fixed_size u32, 8 kernarg_size u32, 12 reserved,
16 kernel_code_entry_byte_offset i64 (relative to the descriptor), 24..43 reserved, 44 compute_pgm_rsrc3,
48 compute_pgm_rsrc1, 52 compute_pgm_rsrc2, 56 kernel_code_properties u16, 58 kernarg_preload u16, 60 reserved.
Register bit fields: AMD RDNA3 ISA / LLVM AMDGPUUsage tables "compute_pgm_rsrc1/2/3 for GFX6-GFX12" (also the
gc_11_0_0_sh_mask.h COMPUTE_PGM_RSRC2__* masks).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

KD_SIZE = 64
_KD = struct.Struct("<IIII q 20s IIIHH I")
assert _KD.size == KD_SIZE

# kernel_code_properties bits (AMDGPUUsage "Kernel Code Properties")
KCP_PRIVATE_SEGMENT_BUFFER = 1 << 0
KCP_DISPATCH_PTR = 1 << 1
KCP_QUEUE_PTR = 1 << 2
KCP_KERNARG_SEGMENT_PTR = 1 << 3
KCP_DISPATCH_ID = 1 << 4
KCP_FLAT_SCRATCH_INIT = 1 << 5
KCP_PRIVATE_SEGMENT_SIZE = 1 << 6
KCP_WAVEFRONT_SIZE32 = 1 << 10
KCP_USES_DYNAMIC_STACK = 1 << 11


@dataclass
class KernelDescriptor:
  """The 64-byte AMDHSA kernel descriptor's fields (LLVM AMDGPUUsage, 'Kernel Descriptor')."""
  group_segment_fixed_size: int = 0
  private_segment_fixed_size: int = 0
  kernarg_size: int = 0
  kernel_code_entry_byte_offset: int = 0
  compute_pgm_rsrc3: int = 0
  compute_pgm_rsrc1: int = 0
  compute_pgm_rsrc2: int = 0
  kernel_code_properties: int = 0
  kernarg_preload: int = 0

  @classmethod
  def unpack(cls, data: bytes) -> "KernelDescriptor":
    g, p, k, _r0, entry, _r1, rsrc3, rsrc1, rsrc2, props, preload, _r2 = _KD.unpack(bytes(data[:KD_SIZE]))
    return cls(g, p, k, entry, rsrc3, rsrc1, rsrc2, props, preload)

  def pack(self) -> bytes:
    return _KD.pack(self.group_segment_fixed_size, self.private_segment_fixed_size, self.kernarg_size, 0,
                    self.kernel_code_entry_byte_offset, bytes(20), self.compute_pgm_rsrc3, self.compute_pgm_rsrc1,
                    self.compute_pgm_rsrc2, self.kernel_code_properties, self.kernarg_preload, 0)

  # --- COMPUTE_PGM_RSRC1 (gfx10+): VGPR granule [5:0], SGPR granule [9:6], float modes [19:12], ...
  @property
  def granulated_workitem_vgpr_count(self) -> int: return self.compute_pgm_rsrc1 & 0x3f

  def vgpr_count(self, wave32: bool | None = None) -> int:
    """Allocated VGPRs: (granule + 1) * 8 in wave32, * 4 in wave64 (gfx10/11)."""
    w32 = self.wavefront_size32 if wave32 is None else wave32
    return (self.granulated_workitem_vgpr_count + 1) * (8 if w32 else 4)

  # --- gfx90a/gfx942's unified VGPR/AccVGPR file (AMDGPUUsage, "compute_pgm_rsrc1 for GFX90A, GFX942": the VGPR
  #     granule counts VGPRs and AccVGPRs together in blocks of 8; "compute_pgm_rsrc3 for GFX90A, GFX942": ACCUM_OFFSET
  #     [5:0], the first AccVGPR / 4 - 1)
  def unified_vgprs(self) -> int: return (self.granulated_workitem_vgpr_count + 1) * 8
  def accum_offset(self) -> int: return ((self.compute_pgm_rsrc3 & 0x3F) + 1) * 4

  # --- COMPUTE_PGM_RSRC2: PRIVATE_SEGMENT 0, USER_SGPR [5:1], TRAP 6, TGID_X/Y/Z 7/8/9, TG_SIZE 10, VGPR_WORKITEM_ID [12:11],
  #     LDS_SIZE [23:15]
  @property
  def enable_private_segment(self) -> bool: return bool(self.compute_pgm_rsrc2 & 1)
  @property
  def user_sgpr_count(self) -> int: return (self.compute_pgm_rsrc2 >> 1) & 0x1f
  @property
  def enable_sgpr_workgroup_id(self) -> tuple[bool, bool, bool]:
    return tuple(bool(self.compute_pgm_rsrc2 >> b & 1) for b in (7, 8, 9))
  @property
  def enable_sgpr_workgroup_info(self) -> bool: return bool(self.compute_pgm_rsrc2 >> 10 & 1)
  @property
  def enable_vgpr_workitem_id(self) -> int: return (self.compute_pgm_rsrc2 >> 11) & 3
  @property
  def granulated_lds_size(self) -> int: return (self.compute_pgm_rsrc2 >> 15) & 0x1ff

  # --- kernel_code_properties
  @property
  def wavefront_size32(self) -> bool: return bool(self.kernel_code_properties & KCP_WAVEFRONT_SIZE32)
  @property
  def enable_sgpr_kernarg_segment_ptr(self) -> bool: return bool(self.kernel_code_properties & KCP_KERNARG_SEGMENT_PTR)
  @property
  def enable_sgpr_dispatch_ptr(self) -> bool: return bool(self.kernel_code_properties & KCP_DISPATCH_PTR)
  @property
  def enable_sgpr_queue_ptr(self) -> bool: return bool(self.kernel_code_properties & KCP_QUEUE_PTR)
  @property
  def enable_sgpr_private_segment_buffer(self) -> bool:
    return bool(self.kernel_code_properties & KCP_PRIVATE_SEGMENT_BUFFER)

  def user_sgpr_layout(self) -> dict[str, int]:
    """First SGPR of each enabled user-SGPR item, in hardware order (AMDGPUUsage "Initial Kernel Execution
    State"): private segment buffer (4), dispatch ptr (2), queue ptr (2), kernarg segment ptr (2), dispatch id (2),
    flat scratch init (2), private segment size (1); then after USER_SGPR_COUNT the workgroup ids x, y, z and the
    workgroup info when enabled."""
    order = [(KCP_PRIVATE_SEGMENT_BUFFER, "private_segment_buffer", 4), (KCP_DISPATCH_PTR, "dispatch_ptr", 2),
             (KCP_QUEUE_PTR, "queue_ptr", 2), (KCP_KERNARG_SEGMENT_PTR, "kernarg_segment_ptr", 2),
             (KCP_DISPATCH_ID, "dispatch_id", 2), (KCP_FLAT_SCRATCH_INIT, "flat_scratch_init", 2),
             (KCP_PRIVATE_SEGMENT_SIZE, "private_segment_size", 1)]
    out, sgpr = {}, 0
    for bit, name, n in order:
      if self.kernel_code_properties & bit:
        out[name] = sgpr
        sgpr += n
    sgpr = self.user_sgpr_count
    for axis, on in zip("xyz", self.enable_sgpr_workgroup_id):
      if on:
        out[f"workgroup_id_{axis}"] = sgpr
        sgpr += 1
    if self.enable_sgpr_workgroup_info: out["workgroup_info"] = sgpr
    return out
