"""AMDGPU code-object writer: an executable (ET_DYN) HSA ELF that llvm-objdump-19 -d and llvm-readelf-19 --notes
accept and CodeObject.parse / the AMD loader read back.

    blob = write_code_object([KernelSpec("vadd", code, args=[Arg(0, 8, "global_buffer", "a"), ...],
                                         vgpr_count=3, sgpr_count=10, workgroup_ids="x")], arch="gfx1100")

Layout (one PT_LOAD segment, virtual address == file offset, as ld.lld lays out small objects): ELF header,
program headers, .note (NT_AMDGPU_METADATA, msgpack, code object v5), .rodata (one 64-byte kernel descriptor per
kernel, 64-aligned), .text (256-aligned kernels, COMPUTE_PGM_LO needs 256-byte alignment), .symtab/.strtab
(kernel FUNC and "<name>.kd" OBJECT symbols), .shstrtab. Formats: LLVM AMDGPUUsage ("ELF Code Object",
"Code Object V5 Metadata", "Kernel Descriptor"), System V gABI for the ELF structures. The COMPUTE_PGM_RSRC1
defaults are gfx10/gfx11 ones (DX10_CLAMP, IEEE_MODE); gfx12 gives those bits other meanings.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .codeobject import MACH_BY_NAME
from .descriptor import KCP_KERNARG_SEGMENT_PTR, KCP_WAVEFRONT_SIZE32, KD_SIZE, KernelDescriptor
from .elf import EHDR, PHDR, SHDR, SYM
from .errors import CodeObjectError

PT_LOAD, PT_NOTE = 1, 4
PF_X, PF_W, PF_R = 1, 2, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE = 1, 2, 3, 7
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STB_GLOBAL, STT_OBJECT, STT_FUNC, STV_PROTECTED = 1, 1, 2, 3


@dataclass
class Arg:
  offset: int
  size: int
  value_kind: str               # global_buffer, by_value, hidden_block_count_x, ...
  name: str | None = None
  address_space: str | None = None   # "global" for buffers

  def to_msgpack(self) -> dict:
    d = {".offset": self.offset, ".size": self.size, ".value_kind": self.value_kind}
    if self.name: d[".name"] = self.name
    if self.address_space or self.value_kind == "global_buffer": d[".address_space"] = self.address_space or "global"
    return d


@dataclass
class KernelSpec:
  name: str
  code: bytes
  args: list[Arg] = field(default_factory=list)
  vgpr_count: int = 1
  sgpr_count: int = 16
  group_segment_fixed_size: int = 0
  private_segment_fixed_size: int = 0
  kernarg_segment_size: int | None = None
  kernarg_segment_align: int = 8
  wavefront_size: int = 32
  workgroup_ids: str = "x"            # which TGID_* SGPRs are enabled (rsrc2 bits 7..9)
  workitem_id_dims: int = 1           # VGPR_WORKITEM_ID: 1 = x, 2 = x,y, 3 = x,y,z (packed in v0 on gfx11)
  max_flat_workgroup_size: int = 1024
  reqd_workgroup_size: tuple[int, int, int] | None = None

  def descriptor(self) -> KernelDescriptor:
    kernarg = self.kernarg_size()
    props = (KCP_KERNARG_SEGMENT_PTR if kernarg else 0) | (KCP_WAVEFRONT_SIZE32 if self.wavefront_size == 32 else 0)
    user_sgprs = 2 if kernarg else 0
    granule = 8 if self.wavefront_size == 32 else 4
    # rsrc1: VGPR granule [5:0]; FLOAT_DENORM_MODE_32 [17:16] = 3 and FLOAT_DENORM_MODE_16_64 [19:18] = 3
    # (no flush), DX10_CLAMP 21, IEEE_MODE 23, WGP_MODE 29, MEM_ORDERED 30: the values clang-19 uses for gfx1100
    rsrc1 = (max(self.vgpr_count, 1) + granule - 1) // granule - 1
    rsrc1 |= 3 << 16 | 3 << 18 | 1 << 21 | 1 << 23 | 1 << 29 | 1 << 30
    # rsrc2: ENABLE_PRIVATE_SEGMENT 0, USER_SGPR_COUNT [5:1], TGID_X/Y/Z_EN 7/8/9, VGPR_WORKITEM_ID [12:11]
    rsrc2 = int(self.private_segment_fixed_size > 0) | user_sgprs << 1
    for i, axis in enumerate("xyz"):
      if axis in self.workgroup_ids: rsrc2 |= 1 << (7 + i)
    rsrc2 |= (self.workitem_id_dims - 1) << 11
    return KernelDescriptor(self.group_segment_fixed_size, self.private_segment_fixed_size, kernarg, 0, 0, rsrc1,
                            rsrc2, props, 0)

  def kernarg_size(self) -> int:
    if self.kernarg_segment_size is not None: return self.kernarg_segment_size
    return max((a.offset + a.size for a in self.args), default=0)

  def metadata(self) -> dict:
    md = {".name": self.name, ".symbol": f"{self.name}.kd", ".args": [a.to_msgpack() for a in self.args],
          ".kernarg_segment_size": self.kernarg_size(), ".kernarg_segment_align": self.kernarg_segment_align,
          ".group_segment_fixed_size": self.group_segment_fixed_size,
          ".private_segment_fixed_size": self.private_segment_fixed_size, ".sgpr_count": self.sgpr_count,
          ".vgpr_count": self.vgpr_count, ".wavefront_size": self.wavefront_size, ".sgpr_spill_count": 0,
          ".vgpr_spill_count": 0, ".max_flat_workgroup_size": self.max_flat_workgroup_size}
    if self.reqd_workgroup_size: md[".reqd_workgroup_size"] = list(self.reqd_workgroup_size)
    return md


def _align(n: int, a: int) -> int: return (n + a - 1) // a * a


def write_code_object(kernels: list[KernelSpec], arch: str = "gfx1100") -> bytes:
  import msgpack
  if arch not in MACH_BY_NAME: raise CodeObjectError(f"unknown target {arch!r}")
  if not kernels: raise CodeObjectError("a code object needs at least one kernel")
  names = [k.name for k in kernels]
  if len(set(names)) != len(names): raise CodeObjectError(f"duplicate kernel names in {names}")
  md = {"amdhsa.version": [1, 2], "amdhsa.target": f"amdgcn-amd-amdhsa--{arch}",
        "amdhsa.kernels": [k.metadata() for k in kernels]}
  desc = msgpack.packb(md)
  note = struct.pack("<III", 7, len(desc), 32) + b"AMDGPU\0\0" + desc + bytes(_align(len(desc), 4) - len(desc))

  nph = 2
  off = EHDR.size + nph * PHDR.size
  note_off = _align(off, 4)
  rodata_off = _align(note_off + len(note), 64)
  rodata_size = KD_SIZE * len(kernels)
  text_off = _align(rodata_off + rodata_size, 256)
  text = bytearray()
  code_offs = []
  for k in kernels:
    text += bytes(_align(len(text), 256) - len(text))
    code_offs.append(text_off + len(text))
    text += k.code
  rodata = bytearray()
  for i, k in enumerate(kernels):
    kd = k.descriptor()
    kd.kernel_code_entry_byte_offset = code_offs[i] - (rodata_off + KD_SIZE * i)
    rodata += kd.pack()
  load_end = text_off + len(text)

  strtab = bytearray(b"\0")
  syms = [SYM.pack(0, 0, 0, 0, 0, 0)]
  shidx = {"note": 1, "rodata": 2, "text": 3}
  for i, k in enumerate(kernels):
    n = len(strtab); strtab += k.name.encode() + b"\0"
    syms.append(SYM.pack(n, STB_GLOBAL << 4 | STT_FUNC, STV_PROTECTED, shidx["text"], code_offs[i], len(k.code)))
    n = len(strtab); strtab += f"{k.name}.kd".encode() + b"\0"
    syms.append(SYM.pack(n, STB_GLOBAL << 4 | STT_OBJECT, STV_PROTECTED, shidx["rodata"], rodata_off + KD_SIZE * i,
                         KD_SIZE))
  symtab = b"".join(syms)
  shstr = bytearray(b"\0")
  def sname(s: str) -> int:
    n = len(shstr); shstr.extend(s.encode() + b"\0"); return n

  symtab_off = _align(load_end, 8)
  strtab_off = symtab_off + len(symtab)
  shstr_names = [sname(x) for x in (".note", ".rodata", ".text", ".symtab", ".strtab", ".shstrtab")]
  shstr_off = strtab_off + len(strtab)
  shoff = _align(shstr_off + len(shstr), 8)
  shdrs = [SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
           SHDR.pack(shstr_names[0], SHT_NOTE, SHF_ALLOC, note_off, note_off, len(note), 0, 0, 4, 0),
           SHDR.pack(shstr_names[1], SHT_PROGBITS, SHF_ALLOC, rodata_off, rodata_off, rodata_size, 0, 0, 64, 0),
           SHDR.pack(shstr_names[2], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_off, text_off, len(text), 0, 0, 256, 0),
           SHDR.pack(shstr_names[3], SHT_SYMTAB, 0, 0, symtab_off, len(symtab), 5, 1, 8, SYM.size),
           SHDR.pack(shstr_names[4], SHT_STRTAB, 0, 0, strtab_off, len(strtab), 0, 0, 1, 0),
           SHDR.pack(shstr_names[5], SHT_STRTAB, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0)]
  # e_ident: ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_AMDGPU_HSA (64), ABI version 3 (code object v5)
  ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)
  ehdr = EHDR.pack(ident, 3, 224, 1, 0, EHDR.size, shoff, MACH_BY_NAME[arch], EHDR.size, PHDR.size, nph,
                   SHDR.size, len(shdrs), 6)
  phdrs = PHDR.pack(PT_LOAD, PF_R | PF_X, 0, 0, 0, load_end, load_end, 0x1000) + \
          PHDR.pack(PT_NOTE, PF_R, note_off, note_off, note_off, len(note), len(note), 4)
  out = bytearray(shoff + len(shdrs) * SHDR.size)
  for pos, blob in ((0, ehdr), (EHDR.size, phdrs), (note_off, note), (rodata_off, rodata), (text_off, text),
                    (symtab_off, symtab), (strtab_off, strtab), (shstr_off, shstr), (shoff, b"".join(shdrs))):
    out[pos:pos + len(blob)] = blob
  return bytes(out)
