"""AMDGPU code-object writer: an executable (ET_DYN) HSA ELF that llvm-objdump-19 -d and llvm-readelf-19 --notes
accept, that CodeObject.parse / the AMD loader read back, and whose kernels a ROCm-style loader finds through the
dynamic symbol table. The one writer of hcq: the assembler's users and the RDNA3 backend (render.py) both use it.

    blob = write_code_object([KernelSpec("vadd", code, args=[Arg(0, 8, "global_buffer", "a"), ...],
                                         vgpr_count=3, sgpr_count=10, workgroup_ids="x")], arch="gfx1100")

Layout (virtual address == file offset, the segments ld.lld makes for clang's code objects):
  PT_LOAD R   ELF header, program headers, .note (NT_AMDGPU_METADATA, msgpack, code object v5), .dynsym, .hash,
              .dynstr, .rodata (one 64-byte kernel descriptor per kernel, 64-aligned)
  PT_LOAD RX  .text (page aligned; each kernel 256-aligned: COMPUTE_PGM_LO holds address >> 8)
  PT_LOAD RW  .dynamic (DT_HASH, DT_SYMTAB, DT_SYMENT, DT_STRTAB, DT_STRSZ), also PT_DYNAMIC; PT_NOTE for the note
  then .symtab / .strtab (for tools) and .shstrtab.
Formats: LLVM AMDGPUUsage ("ELF Code Object", "Code Object V5 Metadata", "Kernel Descriptor", "Initial Kernel
Execution State"), System V gABI for the ELF structures, the symbol hash table and the dynamic section. The
COMPUTE_PGM_RSRC1 defaults are gfx10/gfx11 ones (DX10_CLAMP, IEEE_MODE); gfx12 gives those bits other meanings.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .codeobject import MACH_BY_NAME
from .descriptor import KCP_KERNARG_SEGMENT_PTR, KCP_WAVEFRONT_SIZE32, KD_SIZE, KernelDescriptor
from .elf import EHDR, PHDR, SHDR, SYM
from .errors import CodeObjectError

PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
PF_X, PF_W, PF_R = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_DYNSYM = 1, 2, 3, 5, 6, 7, 11
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STB_GLOBAL, STT_OBJECT, STT_FUNC, STV_PROTECTED = 1, 1, 2, 3   # lld gives kernel symbols protected visibility
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 4, 5, 6, 10, 11
PAGE = 0x1000
NT_AMDGPU_METADATA = 32

# COMPUTE_PGM_RSRC1 (AMDGPUUsage "compute_pgm_rsrc1 for GFX6-GFX12"): FLOAT_DENORM_MODE_32 [17:16] = 3 and
# FLOAT_DENORM_MODE_16_64 [19:18] = 3 (no flush), DX10_CLAMP 21, IEEE_MODE 23, WGP_MODE 29, MEM_ORDERED 30: the
# values clang-19 sets for gfx1100 (rsrc1 0x60af00xx in the OpenCL corpus)
RSRC1_FIXED = 3 << 16 | 3 << 18 | 1 << 21 | 1 << 23 | 1 << 29 | 1 << 30
# gfx12 gives bits 21 and 23 other meanings (AMDGPUUsage: WG_RR_EN, DISABLE_PERF): clang-19 -mcpu=gfx1200 leaves them
# clear (rsrc1 0x600f00xx); gfx9 has no WGP_MODE / MEM_ORDERED (clang-19 -mcpu=gfx942: 0x00af00xx)
RSRC1_BY_ARCH = {"gfx1200": RSRC1_FIXED & ~(1 << 21 | 1 << 23), "gfx942": RSRC1_FIXED & ~(1 << 29 | 1 << 30)}
MAX_USER_SGPRS = 16   # COMPUTE_PGM_RSRC2.USER_SGPR_COUNT is 5 bits, the hardware loads at most 16 user-data registers
# The targets with LLVM's FeatureUserSGPRInit16Bug (AMDGPU.td: FeatureISAVersion11_0_0 and 11_0_2 list it, 11_0_1 does
# not): clang-19 gives .amdhsa_user_sgpr_count 15 for a kernel with the kernarg pointer and TGID_X on gfx1100 and
# gfx1102, 2 on gfx1101
USER_SGPR_INIT16_BUG = ("gfx1100", "gfx1102")


@dataclass
class Arg:
  offset: int
  size: int
  value_kind: str               # global_buffer, by_value, hidden_block_count_x, ...
  name: str | None = None
  address_space: str | None = None   # "global" for buffers
  type_name: str | None = None       # ".type_name" ("float*", "int"), informational

  def to_msgpack(self) -> dict:
    d = {".offset": self.offset, ".size": self.size, ".value_kind": self.value_kind}
    if self.name: d[".name"] = self.name
    if self.type_name: d[".type_name"] = self.type_name
    if self.address_space or self.value_kind == "global_buffer": d[".address_space"] = self.address_space or "global"
    return d


def user_sgpr_count(enabled: int, system_sgprs: int, arch: str = "gfx1100", wavefront_size: int = 32) -> int:
  """USER_SGPR_COUNT for `enabled` user SGPRs followed by `system_sgprs` (work-group ids, work-group info). gfx1100
  and gfx1102 in wave32 need user + system SGPRs >= 16 (USER_SGPR_INIT16_BUG), so the user part is padded (LLVM's
  UserSGPRInit16Bug; clang-19's gfx1100 code objects show it: USER_SGPR_COUNT 15 with TGID_X, 14 with TGID_X and
  TGID_Y, whatever few user SGPRs they use). The system SGPRs start right after: the RDNA3 backend reads the
  work-group ids from there."""
  if arch in USER_SGPR_INIT16_BUG and wavefront_size == 32: return max(enabled, MAX_USER_SGPRS - system_sgprs)
  return enabled


@dataclass
class KernelSpec:
  name: str
  code: bytes
  args: list[Arg] = field(default_factory=list)
  vgpr_count: int = 1                 # ArchVGPRs (v0..v<n - 1>)
  agpr_count: int = 0                 # gfx942 AccVGPRs (a0..a<n - 1>), placed after the ArchVGPRs (ACCUM_OFFSET)
  sgpr_count: int = 16                # ".sgpr_count" (VCC included, as clang counts): also the rsrc1 SGPR granule
  group_segment_fixed_size: int = 0
  private_segment_fixed_size: int = 0
  kernarg_segment_size: int | None = None
  kernarg_segment_align: int = 8
  wavefront_size: int = 32
  workgroup_ids: str = "x"            # which TGID_* SGPRs are enabled (rsrc2 bits 7..9)
  workitem_id_dims: int = 1           # VGPR_WORKITEM_ID: 1 = x, 2 = x,y, 3 = x,y,z (packed in v0 on gfx11)
  user_sgpr_count: int | None = None  # None: the enabled user SGPRs, padded where the target needs it (see above)
  max_flat_workgroup_size: int = 1024
  reqd_workgroup_size: tuple[int, int, int] | None = None
  sgpr_spill_count: int = 0
  vgpr_spill_count: int = 0
  language: str | None = None         # e.g. "OpenCL C" with language_version (2, 0)
  language_version: tuple[int, int] | None = None
  uniform_work_group_size: bool | None = None

  def enabled_user_sgprs(self) -> int:
    return 2 if self.kernarg_size() else 0     # the kernarg segment pointer (the only user SGPR item we enable)

  def user_sgprs(self, arch: str = "gfx1100") -> int:
    """USER_SGPR_COUNT: the system SGPRs (work-group ids) are loaded right after these (user_sgpr_layout)."""
    enabled = self.enabled_user_sgprs()
    if self.user_sgpr_count is not None:
      if not enabled <= self.user_sgpr_count <= MAX_USER_SGPRS:
        raise CodeObjectError(f"kernel {self.name}: user_sgpr_count {self.user_sgpr_count} must be {enabled}.."
                              f"{MAX_USER_SGPRS} (the enabled user SGPRs .. the hardware's 16)")
      return self.user_sgpr_count
    return user_sgpr_count(enabled, len(self.workgroup_ids), arch, self.wavefront_size)

  def descriptor(self, arch: str = "gfx1100") -> KernelDescriptor:
    kernarg = self.kernarg_size()
    props = (KCP_KERNARG_SEGMENT_PTR if kernarg else 0) | (KCP_WAVEFRONT_SIZE32 if self.wavefront_size == 32 else 0)
    # gfx90a/gfx940 (unified VGPR/AccVGPR file): blocks of 8 in wave64 too (AMDGPUUsage, compute_pgm_rsrc1 for GFX90A,
    # GFX942: GRANULATED_WORKITEM_VGPR_COUNT "in granules of 8")
    granule = 8 if self.wavefront_size == 32 or arch == "gfx942" else 4
    # rsrc1: VGPR granule [5:0] (blocks of 8 in wave32, 4 in wave64, minus one); SGPR granule [9:6] = ceil(.sgpr_count
    # / 8) - 1 as clang-19 fills it on gfx11 (.sgpr_count 18 -> 2, 26 -> 3 in the corpus), then the fixed modes
    rsrc1 = (self.total_vgprs() + granule - 1) // granule - 1
    rsrc1 |= min(15, max(0, (self.sgpr_count + 7) // 8 - 1)) << 6 | RSRC1_BY_ARCH.get(arch, RSRC1_FIXED)
    # rsrc2: ENABLE_PRIVATE_SEGMENT 0, USER_SGPR_COUNT [5:1], TGID_X/Y/Z_EN 7/8/9, VGPR_WORKITEM_ID [12:11]
    rsrc2 = int(self.private_segment_fixed_size > 0) | self.user_sgprs(arch) << 1
    for i, axis in enumerate("xyz"):
      if axis in self.workgroup_ids: rsrc2 |= 1 << (7 + i)
    rsrc2 |= (self.workitem_id_dims - 1) << 11
    # rsrc3 on gfx90a/gfx940 (AMDGPUUsage "compute_pgm_rsrc3 for GFX90A, GFX942"): ACCUM_OFFSET [5:0] = the first
    # AccVGPR / 4 - 1 (granularity 4: 0 -> 4 ... 63 -> 256), right after the ArchVGPRs; TG_SPLIT [16] clear
    rsrc3 = self.accum_offset() // 4 - 1 if arch == "gfx942" else 0
    return KernelDescriptor(self.group_segment_fixed_size, self.private_segment_fixed_size, kernarg, 0, rsrc3, rsrc1,
                            rsrc2, props, 0)

  def accum_offset(self) -> int:
    """The unified register file's first AccVGPR: the ArchVGPRs rounded up to 4 (AMDGPUUsage ACCUM_OFFSET)."""
    return (max(self.vgpr_count, 1) + 3) // 4 * 4

  def total_vgprs(self) -> int:
    """VGPRs the wave allocates: with AccVGPRs, alignTo(ArchVGPRs, 4) + AccVGPRs (LLVM AMDGPUBaseInfo
    getTotalNumVGPRs for gfx90a+), else the ArchVGPRs: what rsrc1's VGPR granule and .vgpr_count count."""
    return self.accum_offset() + self.agpr_count if self.agpr_count else max(self.vgpr_count, 1)

  def kernarg_size(self) -> int:
    if self.kernarg_segment_size is not None: return self.kernarg_segment_size
    return max((a.offset + a.size for a in self.args), default=0)

  def metadata(self) -> dict:
    md = {".name": self.name, ".symbol": f"{self.name}.kd", ".args": [a.to_msgpack() for a in self.args],
          ".kernarg_segment_size": self.kernarg_size(), ".kernarg_segment_align": self.kernarg_segment_align,
          ".group_segment_fixed_size": self.group_segment_fixed_size,
          ".private_segment_fixed_size": self.private_segment_fixed_size, ".sgpr_count": self.sgpr_count,
          ".vgpr_count": self.total_vgprs() if self.agpr_count else self.vgpr_count, ".agpr_count": self.agpr_count,
          ".wavefront_size": self.wavefront_size,
          ".sgpr_spill_count": self.sgpr_spill_count, ".vgpr_spill_count": self.vgpr_spill_count,
          ".max_flat_workgroup_size": self.max_flat_workgroup_size}
    if self.reqd_workgroup_size: md[".reqd_workgroup_size"] = list(self.reqd_workgroup_size)
    if self.uniform_work_group_size is not None: md[".uniform_work_group_size"] = int(self.uniform_work_group_size)
    if self.language: md[".language"] = self.language
    if self.language_version: md[".language_version"] = list(self.language_version)
    return md

  def check(self) -> None:
    if self.reqd_workgroup_size is not None:
      r = tuple(self.reqd_workgroup_size)
      if len(r) != 3 or r[0] * r[1] * r[2] > self.max_flat_workgroup_size:
        raise CodeObjectError(f"kernel {self.name}: reqd_workgroup_size {r} needs 3 sizes within "
                              f"max_flat_workgroup_size {self.max_flat_workgroup_size}")
    if not 1 <= self.workitem_id_dims <= 3: raise CodeObjectError(f"kernel {self.name}: workitem_id_dims 1..3")
    # AMDGPUUsage: ACCUM_OFFSET 4..256 and a0..a255; the unified file holds 512 registers per lane (MI300 ISA)
    if not 0 <= self.agpr_count <= 256 or self.total_vgprs() > 512 or (self.agpr_count and self.vgpr_count > 256):
      raise CodeObjectError(f"kernel {self.name}: {self.vgpr_count} VGPRs and {self.agpr_count} AccVGPRs do not fit "
                            f"the 512-register unified file (at most 256 of each)")
    if any(c not in "xyz" for c in self.workgroup_ids):
      raise CodeObjectError(f"kernel {self.name}: workgroup_ids {self.workgroup_ids!r} is not a subset of 'xyz'")


def _align(n: int, a: int) -> int: return (n + a - 1) // a * a


class _Strtab:
  def __init__(self):
    self.data = bytearray(b"\0")

  def add(self, s: str) -> int:
    n = len(self.data)
    self.data += s.encode() + b"\0"
    return n


def _note(desc: bytes) -> bytes:
  """An ELF note "AMDGPU" of type NT_AMDGPU_METADATA (name and descriptor 4-byte padded)."""
  return struct.pack("<III", 7, len(desc), NT_AMDGPU_METADATA) + b"AMDGPU\0\0" + desc + bytes(_align(len(desc), 4) - len(desc))


def write_code_object(kernels: list[KernelSpec], arch: str = "gfx1100") -> bytes:
  import msgpack
  if arch not in MACH_BY_NAME: raise CodeObjectError(f"unknown target {arch!r}")
  if not kernels: raise CodeObjectError("a code object needs at least one kernel")
  names = [k.name for k in kernels]
  if len(set(names)) != len(names): raise CodeObjectError(f"duplicate kernel names in {names}")
  for k in kernels: k.check()
  md = {"amdhsa.version": [1, 2], "amdhsa.target": f"amdgcn-amd-amdhsa--{arch}",
        "amdhsa.kernels": [k.metadata() for k in kernels]}
  note = _note(msgpack.packb(md))
  nsyms = 1 + 2 * len(kernels)            # null, then per kernel: the code (FUNC) and "<name>.kd" (OBJECT)
  dynstr = _Strtab()
  dyn_names = [(dynstr.add(k.name), dynstr.add(f"{k.name}.kd")) for k in kernels]

  nph = 5
  note_off = _align(EHDR.size + nph * PHDR.size, 4)
  dynsym_off = _align(note_off + len(note), 8)
  hash_off = _align(dynsym_off + SYM.size * nsyms, 4)
  dynstr_off = hash_off + 4 * (2 + 1 + nsyms)
  rodata_off = _align(dynstr_off + len(dynstr.data), 64)
  rodata_size = KD_SIZE * len(kernels)
  ro_end = rodata_off + rodata_size
  text_off = _align(ro_end, PAGE)
  text = bytearray()
  code_offs = []
  for k in kernels:
    text += bytes(_align(len(text), 256) - len(text))
    code_offs.append(text_off + len(text))
    text += k.code
  kd_offs = [rodata_off + KD_SIZE * i for i in range(len(kernels))]
  rodata = bytearray()
  for k, code_off, kd_off in zip(kernels, code_offs, kd_offs):
    kd = k.descriptor(arch)
    kd.kernel_code_entry_byte_offset = code_off - kd_off
    rodata += kd.pack()
  dyn_off = _align(text_off + len(text), PAGE)
  dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in
                     ((DT_HASH, hash_off), (DT_SYMTAB, dynsym_off), (DT_SYMENT, SYM.size), (DT_STRTAB, dynstr_off),
                      (DT_STRSZ, len(dynstr.data)), (DT_NULL, 0)))

  # section indices: 1 .note 2 .dynsym 3 .hash 4 .dynstr 5 .rodata 6 .text 7 .dynamic 8 .symtab 9 .strtab 10 .shstrtab
  def symbols(name_offs) -> bytes:
    out = [SYM.pack(0, 0, 0, 0, 0, 0)]
    for k, (n_code, n_kd), code_off, kd_off in zip(kernels, name_offs, code_offs, kd_offs):
      out.append(SYM.pack(n_code, STB_GLOBAL << 4 | STT_FUNC, STV_PROTECTED, 6, code_off, len(k.code)))
      out.append(SYM.pack(n_kd, STB_GLOBAL << 4 | STT_OBJECT, STV_PROTECTED, 5, kd_off, KD_SIZE))
    return b"".join(out)

  dynsym = symbols(dyn_names)
  # SysV hash table with one bucket: bucket[0] is the last symbol, each symbol's chain entry the one before it, so a
  # lookup walks every symbol (any hash modulo 1 is 0)
  hashtab = struct.pack(f"<{3 + nsyms}I", 1, nsyms, nsyms - 1, 0, *range(nsyms - 1))
  strtab = _Strtab()
  symtab = symbols([(strtab.add(k.name), strtab.add(f"{k.name}.kd")) for k in kernels])
  shstr = _Strtab()
  sec_names = [shstr.add(n) for n in (".note", ".dynsym", ".hash", ".dynstr", ".rodata", ".text", ".dynamic",
                                      ".symtab", ".strtab", ".shstrtab")]
  symtab_off = _align(dyn_off + len(dynamic), 8)
  strtab_off = symtab_off + len(symtab)
  shstr_off = strtab_off + len(strtab.data)
  shoff = _align(shstr_off + len(shstr.data), 8)

  # (type, flags, offset, size, link, info, addralign, entsize); allocated sections have sh_addr == offset
  secs = [(SHT_NOTE, SHF_ALLOC, note_off, len(note), 0, 0, 4, 0),
          (SHT_DYNSYM, SHF_ALLOC, dynsym_off, len(dynsym), 4, 1, 8, SYM.size),
          (SHT_HASH, SHF_ALLOC, hash_off, len(hashtab), 2, 0, 4, 4),
          (SHT_STRTAB, SHF_ALLOC, dynstr_off, len(dynstr.data), 0, 0, 1, 0),
          (SHT_PROGBITS, SHF_ALLOC, rodata_off, rodata_size, 0, 0, 64, 0),
          (SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_off, len(text), 0, 0, 256, 0),
          (SHT_DYNAMIC, SHF_ALLOC | SHF_WRITE, dyn_off, len(dynamic), 4, 0, 8, 16),
          (SHT_SYMTAB, 0, symtab_off, len(symtab), 9, 1, 8, SYM.size),
          (SHT_STRTAB, 0, strtab_off, len(strtab.data), 0, 0, 1, 0),
          (SHT_STRTAB, 0, shstr_off, len(shstr.data), 0, 0, 1, 0)]
  shdrs = [SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
  for nm, (typ, flags, off, size, link, info, align, entsize) in zip(sec_names, secs):
    shdrs.append(SHDR.pack(nm, typ, flags, off if flags & SHF_ALLOC else 0, off, size, link, info, align, entsize))
  # e_ident: ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_AMDGPU_HSA (64), ABI version 3 (code object v5)
  ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)
  ehdr = EHDR.pack(ident, 3, 224, 1, 0, EHDR.size, shoff, MACH_BY_NAME[arch], EHDR.size, PHDR.size, nph,
                   SHDR.size, len(shdrs), len(shdrs) - 1)
  phdrs = b"".join(PHDR.pack(pt, fl, off, off, off, size, size, align) for pt, fl, off, size, align in
                   ((PT_LOAD, PF_R, 0, ro_end, PAGE), (PT_LOAD, PF_R | PF_X, text_off, len(text), PAGE),
                    (PT_LOAD, PF_R | PF_W, dyn_off, len(dynamic), PAGE), (PT_DYNAMIC, PF_R | PF_W, dyn_off, len(dynamic), 8),
                    (PT_NOTE, PF_R, note_off, len(note), 4)))
  out = bytearray(shoff + len(shdrs) * SHDR.size)
  for pos, blob in ((0, ehdr), (EHDR.size, phdrs), (note_off, note), (dynsym_off, dynsym), (hash_off, hashtab),
                    (dynstr_off, dynstr.data), (rodata_off, rodata), (text_off, text), (dyn_off, dynamic),
                    (symtab_off, symtab), (strtab_off, strtab.data), (shstr_off, shstr.data), (shoff, b"".join(shdrs))):
    out[pos:pos + len(blob)] = blob
  return bytes(out)
