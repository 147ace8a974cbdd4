"""RDNA3 instruction decoder: bytes -> Inst.

    from hcq.compiler.isa.amd.decode import decode, decode_all
    inst = decode(code, offset=0, arch="gfx1100")
    inst.name       # LLVM mnemonic as llvm-objdump prints it: "v_add_f32_e32", "s_load_b128", "v_add_f32_dpp"
    inst.encoding   # microcode format: SOP1 SOP2 SOPK SOPC SOPP SMEM VOP1 VOP2 VOPC VOP3 VOP3SD VOP3P VOPD VINTERP
                    # LDSDIR DS MUBUF MTBUF MIMG EXP FLAT GLOBAL SCRATCH
    inst.opcode     # value of the OP field (VOPD: OPX; inst.fields["opy"] has OPY)
    inst.size       # bytes, including a 32-bit literal and a DPP dword
    inst.offset     # byte offset in `code`
    inst.fields     # raw fields named as in the RDNA3 ISA document (see hcq.autogen.isa.layouts)
    inst.dpp        # None, the gfx942 SDWA dword's fields ({"kind": "sdwa", src0, s0, src0_sel, ...: _SDWA_FIELDS),
                    # or the DPP dword's fields: {"kind": "dpp16", src0, dpp_ctrl, fi, bc, src0_neg, src0_abs,
                    # src1_neg, src1_abs, bank_mask, row_mask} / {"kind": "dpp8", src0, lane_sel, fi}; the real
                    # src0 VGPR is inst.dpp["src0"] (fields["src0"] holds the DPP selector 250/233/234)
    inst.literal    # the 32-bit literal dword, or None
    inst.operands   # list of operands.Operand (kind, index, count, value, field, text) in printed order
    str(inst)       # llvm-objdump syntax, e.g. "v_add_f32_e32 v2, v2, v3"

Architectures: "gfx1100" (RDNA3, every format), "gfx1200" (RDNA4: ALU, DS, SMEM, VFLAT/VSCRATCH/VGLOBAL,
VBUFFER; image/export formats not tabulated yet) and "gfx942" (CDNA3: scalar/vector ALU incl. MFMA opcodes and
SMEM, DS, FLAT/SCRATCH/GLOBAL, MUBUF; memory data in AccVGPRs with ACC).
Operand value conventions (SGPR 0-105, VCC_LO 106, ... inline ints 128-208, floats 240-248, literal 255, VGPR
256-511 in 9-bit source fields) are documented in operands.py. Errors raise DecodeError naming the byte offset.
"""
from __future__ import annotations

from .errors import DecodeError
from .mimg import mimg_address_count, nsa_layout
from .operands import DPP16, DPP8, DPP8_FI, SDWA, Operand
from .tables import ArchTables, arch_tables

_FLAT_BY_SEG = ("FLAT", "SCRATCH", "GLOBAL", None)
_RETURNING = frozenset(("FLAT", "GLOBAL", "SCRATCH", "MUBUF", "VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"))
_RETURNING_TH = frozenset(("VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"))
_DPP_SRC0 = frozenset((DPP16, DPP8, DPP8_FI))
_DPP_ENCODINGS = frozenset(("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P"))
# gfx9 SDWA dword (MI300 ISA "VOP_SDWA"): VOPC puts SDST/SD where VOP1/2 have DST_SEL/DST_U/CLMP/OMOD
_SDWA_FIELDS = (("src0", 0, 0xff), ("dst_sel", 8, 7), ("dst_u", 11, 3), ("clmp", 13, 1), ("omod", 14, 3),
                ("sdst", 8, 0x7f), ("sd", 15, 1), ("src0_sel", 16, 7), ("src0_sext", 19, 1), ("src0_neg", 20, 1),
                ("src0_abs", 21, 1), ("s0", 23, 1), ("src1_sel", 24, 7), ("src1_sext", 27, 1), ("src1_neg", 28, 1),
                ("src1_abs", 29, 1), ("s1", 31, 1))
# DPP16 dword layout: RDNA3 ISA 16.3.3 "DPP16"; DPP8: 16.3.4 (3-bit lane selects, lane i at bits 3i+8)
_DPP16_FIELDS = (("src0", 0, 0xff), ("dpp_ctrl", 8, 0x1ff), ("fi", 18, 1), ("bc", 19, 1), ("src0_neg", 20, 1),
                 ("src0_abs", 21, 1), ("src1_neg", 22, 1), ("src1_abs", 23, 1), ("bank_mask", 24, 0xf),
                 ("row_mask", 28, 0xf))


class Inst:
  __slots__ = ("name", "encoding", "opcode", "size", "offset", "fields", "literal", "data", "arch", "template",
               "dpp", "_operands", "vopd")

  def __init__(self, name, encoding, opcode, size, offset, fields, literal, data, arch, template, dpp=None, vopd=None):
    self.name, self.encoding, self.opcode, self.size, self.offset = name, encoding, opcode, size, offset
    self.fields, self.literal, self.data, self.arch, self.template = fields, literal, data, arch, template
    self.dpp, self.vopd, self._operands = dpp, vopd, None

  @property
  def operands(self) -> list[Operand]:
    if self._operands is None:
      from .disasm import inst_operands
      self._operands = inst_operands(self)
    return self._operands

  def __str__(self) -> str:
    from .disasm import format_inst
    return format_inst(self)

  def __repr__(self) -> str:
    return f"<Inst {self.offset:#x} {self.encoding} {self}>"


def decode(code: bytes, offset: int = 0, arch: str = "gfx1100") -> Inst:
  """Decode the instruction at `offset` of `code`."""
  return _decode(arch_tables(arch), code if isinstance(code, (bytes, bytearray)) else bytes(code), offset)


def decode_all(code: bytes, arch: str = "gfx1100", start: int = 0, end: int | None = None) -> list[Inst]:
  """Decode every instruction of `code[start:end]` in order."""
  tables = arch_tables(arch)
  data = code if isinstance(code, (bytes, bytearray)) else bytes(code)
  end = len(data) if end is None else end
  out, off = [], start
  while off < end:
    inst = _decode(tables, data, off)
    out.append(inst)
    off += inst.size
  return out


def _dword(data: bytes, off: int, what: str, start: int) -> int:
  if off + 4 > len(data):
    raise DecodeError(f"truncated instruction: {what} needs bytes {off:#x}..{off + 3:#x} but the code ends at {len(data):#x}", start)
  return int.from_bytes(data[off:off + 4], "little")


def _decode(t: ArchTables, data: bytes, off: int) -> Inst:
  n = len(data)
  if off < 0 or off >= n: raise DecodeError("offset outside the code", off)
  if off + 8 <= n:  # fast path: both dwords present
    word = int.from_bytes(data[off:off + 8], "little")
    w0 = word & 0xffffffff
  else:
    w0 = word = _dword(data, off, "the first dword", off)
  enc = t.dispatch[w0 >> 23]
  if enc is None: raise DecodeError(f"no {t.arch} encoding has identifying bits {w0 >> 23:#05x} (dword {w0:#010x})", off)
  if enc == "FLAT":
    enc = _FLAT_BY_SEG[(w0 >> t.flat_seg_shift) & 3]
    if enc is None: raise DecodeError(f"reserved FLAT segment 3 (dword {w0:#010x})", off)
  if enc == "VOPD": return _decode_vopd(t, data, off, w0)
  et = t.encodings[enc]
  if et.size == 8:
    if off + 8 > n: _dword(data, off + 4, f"{enc}'s second dword", off)
  elif et.size == 12:  # gfx12 VFLAT/VGLOBAL/VSCRATCH/VBUFFER
    _dword(data, off + 8, f"{enc}'s third dword", off)
    word = int.from_bytes(data[off:off + 12], "little")
  else:
    word = w0
  opcode = (word >> et.op_shift) & et.op_mask
  entry = et.ops.get(opcode)
  if entry is None and enc == "VOP3":
    sd = t.encodings["VOP3SD"]
    entry = sd.ops.get(opcode)
    if entry is not None: enc, et = "VOP3SD", sd
  if entry is None:
    raise DecodeError(f"unknown {enc} opcode {opcode} ({opcode:#x}) in {t.arch} (dword {w0:#010x})", off)
  name, size, template, lit_srcs = entry
  fields = et.extract(word)
  literal = dpp = None
  if size > et.size:  # the instruction always carries a literal (v_fmaak_f32, s_setreg_imm32_b32, ...)
    literal = _dword(data, off + et.size, "the 32-bit literal", off)
  elif lit_srcs:
    for src in lit_srcs:
      if fields[src] == 255:
        literal = _dword(data, off + size, "the 32-bit literal", off)
        size += 4
        break
  if enc == "MIMG" and fields["nsa"]:
    # non-sequential addresses: VADDR holds the first one, the others follow one byte each (16.8 MIMG-NSA); gfx11
    # has one such dword: at most 4 more address bytes, the last one starting a range for the rest (nsa_bytes)
    size += 4 * ((len(nsa_layout(mimg_address_count(et, opcode, fields))) + 3) // 4)
    if off + size > n: _dword(data, off + size - 4, "the MIMG NSA address dwords", off)
  if enc in _RETURNING and (fields["th"] & 1 if enc in _RETURNING_TH else fields.get("glc", fields.get("sc0"))):
    alt = et.extra[opcode]["operands_glc"]  # the returning form of an atomic (GLC on gfx11, th bit 0 on gfx12)
    if alt is not None: template = alt
  if t.arch == "gfx942" and enc in ("VOP1", "VOP2", "VOPC") and fields["src0"] == SDWA:
    ext = _dword(data, off + size, "the SDWA dword", off)
    size += 4
    dpp = {f: (ext >> lo) & m for f, lo, m in _SDWA_FIELDS}
    dpp["kind"] = "sdwa"
    name = (name[:-4] if name.endswith("_e32") else name) + "_sdwa"     # LLVM: v_add_u32_sdwa, v_cmp_ne_u16_sdwa
  elif enc in _DPP_ENCODINGS and literal is None and fields["src0"] in _DPP_SRC0:
    ext = _dword(data, off + size, "the DPP dword", off)
    size += 4
    if fields["src0"] == DPP16:
      dpp = {f: (ext >> lo) & m for f, lo, m in _DPP16_FIELDS}
      dpp["kind"] = "dpp16"
    else:
      dpp = {"kind": "dpp8", "src0": ext & 0xff, "lane_sel": ext >> 8, "fi": int(fields["src0"] == DPP8_FI)}
    # LLVM names: v_add_f32_dpp (VOP1/2/C), v_add_f32_e64_dpp and v_fma_f32_e64_dpp (VOP3)
    # (llvm-objdump-19 prints VOPC DPP forms with neither suffix: "v_cmp_gt_f32 vcc_lo, v1, v2 dpp8:[...]")
    if enc == "VOPC": name = name.replace("_e32", "")
    elif enc in ("VOP1", "VOP2"): name = name.replace("_e32", "") + "_dpp"
    else: name = (name[:-4] if name.endswith("_e64") else name) + "_e64_dpp"
  return Inst(name, enc, opcode, size, off, fields, literal, data[off:off + size], t.arch, template, dpp)


def _decode_vopd(t: ArchTables, data: bytes, off: int, w0: int) -> Inst:
  et = t.encodings["VOPD"]
  word = w0 | _dword(data, off + 4, "VOPD's second dword", off) << 32
  fields = et.extract(word)
  x = t.vopd_x.get(fields["opx"])
  y = t.vopd_y.get(fields["opy"])
  if x is None or y is None:
    bad = ("OPX", fields["opx"]) if x is None else ("OPY", fields["opy"])
    raise DecodeError(f"unknown VOPD {bad[0]} opcode {bad[1]} in {t.arch}", off)
  size, literal = 8, None
  needs_lit = (fields["srcx0"] == 255 or fields["srcy0"] == 255
               or any(o[0] == "literal" for o in x[1] + y[1]))
  if needs_lit:
    literal = _dword(data, off + 8, "the 32-bit literal", off)
    size = 12
  name = f"{x[0]} :: {y[0]}"
  return Inst(name, "VOPD", fields["opx"], size, off, fields, literal, data[off:off + size], t.arch, (), vopd=(x, y))
