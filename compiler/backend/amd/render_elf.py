"""The HSA code object (ELF64, AMDGPU, code object v5) around one compiled kernel.

Formats (LLVM AMDGPUUsage): "ELF Code Object" header (EI_OSABI 64 ELFOSABI_AMDGPU_HSA, EI_ABIVERSION 3 = code
object v5, e_machine 224 EM_AMDGPU, e_flags EF_AMDGPU_MACH_AMDGCN_GFX1100 = 0x41), "Note Records"
(NT_AMDGPU_METADATA = 32, name "AMDGPU", a msgpack map: "Code Object V5 Metadata"), "Kernel Descriptor" (64 bytes
in .rodata, symbol "<name>.kd", kernel_code_entry_byte_offset relative to it) and "compute_pgm_rsrc1/2" fields
(descriptor.py of the ISA helper documents the same bits). The layout follows what ld.lld produces for clang's
code objects: read-only segment (note, dynsym, hash, dynstr, rodata), executable segment (.text, page aligned),
writable segment (.dynamic), and a .symtab for tools. Virtual addresses equal file offsets.
"""
from __future__ import annotations

import struct

import msgpack

from .descriptor import KCP_KERNARG_SEGMENT_PTR, KCP_WAVEFRONT_SIZE32, KernelDescriptor

EF_AMDGPU_MACH_GFX1100 = 0x41
PAGE = 0x1000

# COMPUTE_PGM_RSRC1 bits (AMDGPUUsage "compute_pgm_rsrc1 for GFX6-GFX12"): FLOAT_DENORM_MODE_32 [17:16] = 3 and
# FLOAT_DENORM_MODE_16_64 [19:18] = 3 (denormals kept, as C on the host), DX10_CLAMP 21, IEEE_MODE 23, WGP_MODE 29,
# MEM_ORDERED 30 -- the values clang-19 sets for gfx1100 (rsrc1 0x60af00xx)
RSRC1_FIXED = (3 << 16) | (3 << 18) | (1 << 21) | (1 << 23) | (1 << 29) | (1 << 30)


def descriptor(c, entry_offset: int) -> KernelDescriptor:
  sel, regs = c.sel, c.regs
  vgpr_granule = (max(regs.vgprs, 1) + 7) // 8 - 1
  sgpr_granule = min(15, max(0, (regs.sgprs + 6 + 7) // 8 - 1))   # + VCC and reserved, as LLVM counts
  rsrc1 = RSRC1_FIXED | (sgpr_granule << 6) | vgpr_granule
  # COMPUTE_PGM_RSRC2: USER_SGPR_COUNT [5:1], TGID_X/Y/Z_EN 7/8/9, TIDIG_COMP_CNT (VGPR work-item ids) [12:11]
  # ENABLE_PRIVATE_SEGMENT (bit 0) when the code uses scratch (private arrays, spills): gfx11 sets up the wave's
  # scratch itself (no flat_scratch_init prologue; clang-19's gfx1100 output does the same)
  rsrc2 = (sel.user_sgprs << 1) | sum(1 << (7 + i) for i in range(sel.workgroup_ids)) | (sel.workitem_id_dims << 11)
  rsrc2 |= int(sel.private_size > 0)
  return KernelDescriptor(group_segment_fixed_size=sel.lds_size, private_segment_fixed_size=sel.private_size,
                          kernarg_size=sel.kernarg_size, kernel_code_entry_byte_offset=entry_offset,
                          compute_pgm_rsrc3=0, compute_pgm_rsrc1=rsrc1, compute_pgm_rsrc2=rsrc2,
                          kernel_code_properties=KCP_KERNARG_SEGMENT_PTR | KCP_WAVEFRONT_SIZE32)


def metadata(c) -> bytes:
  sel, regs = c.sel, c.regs
  args = []
  for a in sel.args:
    if a.kind == "buffer":
      args.append({".name": a.name, ".offset": a.offset, ".size": 8, ".value_kind": "global_buffer",
                   ".address_space": "global", ".type_name": f"{a.dtype.cname}*"})
    else:
      args.append({".name": a.name, ".offset": a.offset, ".size": a.size, ".value_kind": "by_value",
                   ".type_name": a.dtype.cname})
  kernel = {".name": sel.name, ".symbol": f"{sel.name}.kd", ".args": args,
            ".kernarg_segment_size": sel.kernarg_size, ".kernarg_segment_align": 8,
            ".group_segment_fixed_size": sel.lds_size, ".private_segment_fixed_size": sel.private_size,
            ".wavefront_size": 32, ".sgpr_count": regs.sgprs + 2, ".vgpr_count": max(regs.vgprs, 1),
            ".agpr_count": 0, ".sgpr_spill_count": 0, ".vgpr_spill_count": regs.spills, ".max_flat_workgroup_size": 1024,
            ".uniform_work_group_size": 1, ".language": "OpenCL C", ".language_version": [2, 0]}
  if sel.uses_local_ids:
    # the code reads work-item ids for this work-group shape only (lidx0 is v0 itself when y and z are 1)
    kernel[".reqd_workgroup_size"] = list(sel.local_size)
    kernel[".max_flat_workgroup_size"] = sel.local_size[0] * sel.local_size[1] * sel.local_size[2]
  md = {"amdhsa.version": [1, 2], "amdhsa.target": "amdgcn-amd-amdhsa--gfx1100", "amdhsa.kernels": [kernel]}
  return msgpack.packb(md)


def _align(n: int, a: int) -> int: return (n + a - 1) // a * a


def _note(name: bytes, ntype: int, desc: bytes) -> bytes:
  nm = name + b"\0"
  return struct.pack("<III", len(nm), len(desc), ntype) + nm.ljust(_align(len(nm), 4), b"\0") + \
      desc.ljust(_align(len(desc), 4), b"\0")


class _Strtab:
  def __init__(self):
    self.data = bytearray(b"\0")
    self.at: dict[str, int] = {}

  def add(self, s: str) -> int:
    if s not in self.at:
      self.at[s] = len(self.data)
      self.data += s.encode() + b"\0"
    return self.at[s]


def code_object(c) -> bytes:
  """The ELF bytes for a compiled kernel (render.Compiled)."""
  name = c.sel.name
  note = _note(b"AMDGPU", 32, metadata(c))
  dynstr = _Strtab()
  n_kernel, n_kd = dynstr.add(name), dynstr.add(f"{name}.kd")
  nphdr = 5
  off = 64 + 56 * nphdr
  note_off = _align(off, 4); off = note_off + len(note)
  dynsym_off = _align(off, 8); off = dynsym_off + 24 * 3
  hash_off = _align(off, 4); off = hash_off + 4 * (2 + 1 + 3)
  dynstr_off = off; off = dynstr_off + len(dynstr.data)
  rodata_off = _align(off, 64); off = rodata_off + 64
  ro_end = off
  text_off = _align(off, PAGE)
  text = c.text
  text_end = text_off + len(text)
  dyn_off = _align(text_end, PAGE)
  dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in
                     ((4, hash_off), (6, dynsym_off), (11, 24), (5, dynstr_off), (10, len(dynstr.data)), (0, 0)))
  dyn_end = dyn_off + len(dynamic)
  # sections: 0 null 1 .note 2 .dynsym 3 .hash 4 .dynstr 5 .rodata 6 .text 7 .dynamic 8 .symtab 9 .strtab 10 .shstrtab
  kd = descriptor(c, text_off - rodata_off).pack()

  def sym(st_name, info, shndx, value, size, other=3):   # STV_PROTECTED, as lld gives kernel symbols
    return struct.pack("<IBBHQQ", st_name, info, other, shndx, value, size)

  dynsym = bytes(24) + sym(n_kernel, 0x12, 6, text_off, len(text)) + sym(n_kd, 0x11, 5, rodata_off, 64)
  hashtab = struct.pack("<6I", 1, 3, 2, 0, 0, 1)   # nbucket 1, nchain 3, bucket[0] = 2, chain: 0, 0, 1
  strtab = _Strtab()
  s_kernel, s_kd = strtab.add(name), strtab.add(f"{name}.kd")
  symtab = bytes(24) + sym(s_kernel, 0x12, 6, text_off, len(text)) + sym(s_kd, 0x11, 5, rodata_off, 64)
  shstr = _Strtab()
  names = [".note", ".dynsym", ".hash", ".dynstr", ".rodata", ".text", ".dynamic", ".symtab", ".strtab", ".shstrtab"]
  sh_names = [shstr.add(n) for n in names]
  symtab_off = _align(dyn_end, 8)
  strtab_off = symtab_off + len(symtab)
  shstr_off = strtab_off + len(strtab.data)
  shoff = _align(shstr_off + len(shstr.data), 8)

  img = bytearray(shoff + 64 * (len(names) + 1))
  ident = b"\x7fELF" + bytes([2, 1, 1, 64, 3]) + bytes(7)
  img[0:64] = ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 64, shoff, EF_AMDGPU_MACH_GFX1100, 64, 56,
                                  nphdr, 64, len(names) + 1, len(names))
  phdrs = [(1, 4, 0, ro_end, PAGE),                    # PT_LOAD R: headers .. .rodata
           (1, 5, text_off, len(text), PAGE),          # PT_LOAD RX: .text
           (1, 6, dyn_off, len(dynamic), PAGE),        # PT_LOAD RW: .dynamic
           (2, 6, dyn_off, len(dynamic), 8),           # PT_DYNAMIC
           (4, 4, note_off, len(note), 4)]             # PT_NOTE
  for i, (pt, fl, o, sz, al) in enumerate(phdrs):
    struct.pack_into("<IIQQQQQQ", img, 64 + 56 * i, pt, fl, o, o, o, sz, sz, al)
  for o, data in ((note_off, note), (dynsym_off, dynsym), (hash_off, hashtab), (dynstr_off, dynstr.data),
                  (rodata_off, kd), (text_off, text), (dyn_off, dynamic), (symtab_off, symtab),
                  (strtab_off, strtab.data), (shstr_off, shstr.data)):
    img[o:o + len(data)] = data
  # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
  secs = [(7, 2, note_off, len(note), 0, 0, 4, 0), (11, 2, dynsym_off, len(dynsym), 4, 1, 8, 24),
          (5, 2, hash_off, len(hashtab), 2, 0, 4, 4), (3, 2, dynstr_off, len(dynstr.data), 0, 0, 1, 0),
          (1, 2, rodata_off, 64, 0, 0, 64, 0), (1, 6, text_off, len(text), 0, 0, 256, 0),
          (6, 3, dyn_off, len(dynamic), 4, 0, 8, 16), (2, 0, symtab_off, len(symtab), 9, 1, 8, 24),
          (3, 0, strtab_off, len(strtab.data), 0, 0, 1, 0), (3, 0, shstr_off, len(shstr.data), 0, 0, 1, 0)]
  for i, ((typ, flags, o, size, link, info, align, entsize), nm) in enumerate(zip(secs, sh_names)):
    addr = o if flags & 2 else 0
    struct.pack_into("<IIQQQQIIQQ", img, shoff + 64 * (i + 1), nm, typ, flags, addr, o, size, link, info, align,
                     entsize)
  return bytes(img)
