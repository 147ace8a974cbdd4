"""Disassembler: Inst -> llvm-objdump text (`str(inst)`), and operand lists for Inst.operands.

The operand order and register widths come from the generated templates; the modifier syntax (|abs|, -neg,
op_sel:[...], clamp, mul:2, offset:N, glc/slc/dlc, ...) follows LLVM's AMDGPU assembler syntax
(https://llvm.org/docs/AMDGPUModifierSyntax.html, AMDGPUOperandSyntax.html).
"""
from __future__ import annotations

import re

from .errors import DecodeError
from .mimg import mimg_address_count, nsa_layout
from .operands import Operand, reg_text, scalar_operand, source_operand
from .tables import arch_tables

# `inst: Inst` below is a decode.Inst, named in annotations only (PEP 563: never evaluated); decode imports this
# module for Inst.operands and str(inst), so this module does not import decode.

# IEEE half bit patterns of the inline float constants 240..248 (0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 1/(2pi))
_F16_BITS = {240: 0x3800, 241: 0xb800, 242: 0x3c00, 243: 0xbc00, 244: 0x4000, 245: 0xc000, 246: 0x4400, 247: 0xc400,
             248: 0x3118}
NINE_BIT_SOURCES = ("src0", "src1", "src2", "srcx0", "srcy0", "ssrc0", "ssrc1", "soffset")


# gfx942 DS/FLAT/GLOBAL/SCRATCH/MUBUF fields that name AccVGPRs instead of VGPRs when the instruction's ACC bit is set
_ACC_DATA = frozenset(("vdst", "data", "data0", "data1", "vdata"))


def _field_operand(inst: Inst, field: str, cls: str, count: int, value: int) -> Operand:
  if cls == "v16":  # true16: bit 7 of the VGPR number selects the high half (RDNA3 ISA 16.3, 16-bit VGPRs)
    if field in NINE_BIT_SOURCES and value < 256:
      op = source_operand(value, 1, field, inst.literal)
      if op is None: raise DecodeError(f"{inst.name}: reserved value {value} in operand field {field}", inst.offset)
      return op
    v = value & 0xff
    return Operand("vgpr", v & 0x7f, 1, None, field, f"v{v & 0x7f}.{'h' if v & 0x80 else 'l'}")
  if inst.dpp is not None and inst.dpp["kind"] == "sdwa": return _sdwa_operand(inst, field, cls, count, value)
  if field == "src0" and inst.dpp is not None:
    v = inst.dpp["src0"]
    return Operand("vgpr", v, count, None, field, reg_text("v", v, count))
  arch = inst.arch
  if cls == "v" and field in _ACC_DATA and inst.fields.get("acc"):   # gfx942 memory data in AGPRs (ACC = 1)
    return Operand("agpr", value, count, None, field, reg_text("a", value, count))
  if cls == "a":  # CDNA accumulation registers (AGPRs): the field holds the AGPR number (9-bit sources: 256 + n)
    idx = value - 256 if value >= 256 else value
    return Operand("agpr", idx, count, None, field, reg_text("a", idx, count))
  if field in NINE_BIT_SOURCES:
    if field == "soffset" and inst.encoding == "SMEM":
      op = scalar_operand(value, count, field, arch)
    else:
      op = source_operand(value, count, field, inst.literal, arch)
  elif field == "sbase":
    op = scalar_operand(value * 2, count, field, arch)
  elif field in ("srsrc", "ssamp"):
    op = scalar_operand(value * 4, count, field, arch)
  elif field == "vdsty":
    idx = (value << 1) | ((inst.fields["vdstx"] & 1) ^ 1)
    op = Operand("vgpr", idx, count, None, field, reg_text("v", idx, count))
  elif cls == "s":
    op = scalar_operand(value, count, field, arch)
  else:
    op = Operand("vgpr", value, count, None, field, reg_text("v", value, count))
  if op is None:
    raise DecodeError(f"{inst.name}: reserved value {value} in operand field {field}", inst.offset)
  if op.kind == "literal" and op.value is not None:
    et = arch_tables(inst.arch).encodings[inst.encoding]
    if field in et.extra.get(inst.opcode, {}).get("lit16", ()):
      op = op._replace(text=f"0x{op.value & 0xffff:x}")
  elif op.kind == "float" and field in arch_tables(inst.arch).encodings[inst.encoding].extra.get(inst.opcode, {}).get("f16hex", ()):
    op = op._replace(text=f"0x{_F16_BITS[value]:x}")
  elif op.kind == "float" and count == 2 and value == 248:
    op = op._replace(text="0.15915494309189532")  # 1/(2*pi) as an f64 inline constant
  return op


def _template_operands(inst: Inst, template, fields: dict) -> list[Operand]:
  ops = []
  enc = inst.encoding
  for t in template:
    kind = t[0]
    if kind == "reg":
      field, cls, count = t[1], t[2], t[3]
      value = fields[field]
      saddr_off = arch_tables(inst.arch).saddr_off
      if enc in ("GLOBAL", "VGLOBAL") and field in ("addr", "vaddr") and fields["saddr"] != saddr_off: count = 1
      if enc == "VSCRATCH" and field == "vaddr" and not fields["sve"]:
        ops.append(Operand("text", None, 0, None, field, "off"))
        continue
      if enc == "VSCRATCH" and field == "saddr" and value == 124:
        ops.append(Operand("text", None, 0, None, field, "off"))
        continue
      if enc == "VBUFFER" and field == "vaddr":
        count = fields["offen"] + fields["idxen"]
        if count == 0:
          ops.append(Operand("text", None, 0, None, field, "off"))
          continue
      if enc == "VBUFFER" and field == "vdata" and fields["tfe"]: count += 1
      if enc == "VBUFFER" and field == "soffset":
        op = scalar_operand(value, 1, field)
        if op is None: raise DecodeError(f"{inst.name}: reserved SOFFSET {value}", inst.offset)
        ops.append(op)
        continue
      if enc == "SCRATCH" and field == "addr" and not fields["sve"]:
        ops.append(Operand("text", None, 0, None, field, "off"))
        continue
      if enc == "SCRATCH" and field == "saddr" and value == saddr_off:
        ops.append(Operand("text", None, 0, None, field, "off"))
        continue
      if enc in ("MUBUF", "MTBUF") and field == "vaddr":
        count = fields["offen"] + fields["idxen"]
        if count == 0:
          ops.append(Operand("text", None, 0, None, field, "off"))
          continue
      if enc == "SMEM" and field == "soffset": continue
      if enc in ("MUBUF", "MTBUF") and field == "vdata" and fields.get("tfe"): count += 1
      if enc == "MUBUF" and field == "vdata" and fields.get("lds"): continue   # gfx942: loaded into LDS, no VGPR
      if enc == "MIMG" and field == "vdata": count = _mimg_data_count(inst)
      if enc == "MIMG" and field == "vaddr":
        et = arch_tables(inst.arch).encodings["MIMG"]
        count = mimg_address_count(et, inst.opcode, fields)
        if fields["nsa"]:
          regs = [reg_text("v", value, 1)] + [reg_text("v", r, n) for r, n in zip(inst.data[8:], nsa_layout(count))]
          ops.append(Operand("text", None, 0, None, field, "[" + ", ".join(regs) + "]"))
          continue
      ops.append(_field_operand(inst, field, cls, count, value))
    elif kind == "text":
      text = t[1]
      if enc in ("GLOBAL", "VGLOBAL") and text == "off" and fields["saddr"] != arch_tables(inst.arch).saddr_off:
        ops.append(_field_operand(inst, "saddr", "s", 2, fields["saddr"]))
        continue
      if enc == "SCRATCH" and text == "off":  # the address slot; handled through the template's saddr entry
        ops.append(Operand("vgpr", fields["addr"], 1, None, "addr", f"v{fields['addr']}") if fields["sve"]
                   else Operand("text", None, 0, None, None, "off"))
        continue
      if enc == "VOPC" and text == "vcc" and inst.dpp is not None and inst.dpp["kind"] == "sdwa" and inst.dpp["sd"]:
        ops.append(scalar_operand(inst.dpp["sdst"], 2, "sdst", inst.arch))   # SDWA SD: SDST replaces vcc
        continue
      ops.append(Operand("text", None, 0, None, None, text))
    elif kind == "simm16":
      v = fields["simm16"]
      if t[2] and v == 0: continue
      ops.append(Operand("imm", None, 0, v, "simm16", format_simm16(inst, t[1], v)))
    elif kind == "imm":
      v = fields[t[1]]
      text = _smem_offset_text(inst) if enc == "SMEM" and t[1] == "offset" else str(v)
      ops.append(Operand("imm", None, 0, v, t[1], text))
    elif kind == "sendmsg_rtn":
      v = fields[t[1]]
      names = arch_tables(inst.arch).sendmsg_rtn
      ops.append(Operand("imm", None, 0, v, t[1], f"sendmsg({names[v]})" if v in names else str(v)))
    elif kind == "literal":
      lit = inst.literal
      signed = lit - (1 << 32) if lit & 0x80000000 else lit
      # s_setreg_imm32_b32's immediate prints like an integer constant: small values in decimal
      text = str(signed) if enc == "SOPK" and -16 <= signed <= 64 else f"0x{lit:x}"
      ops.append(Operand("literal", None, 0, lit, None, text))
  return ops


def inst_operands(inst: Inst) -> list[Operand]:
  if inst.encoding == "VOPD":
    (_, xt), (_, yt) = inst.vopd
    return _template_operands(inst, xt, inst.fields) + _template_operands(inst, yt, inst.fields)
  return _template_operands(inst, inst.template, inst.fields)


def _mimg_data_count(inst: Inst) -> int:
  f = inst.fields
  if "_atomic_" in inst.name:  # atomics: the data width is the opcode's (x2 for cmpswap)
    n = next(t[3] for t in inst.template if t[0] == "reg" and t[1] == "vdata")
    return n + (1 if f["tfe"] or f["lwe"] else 0)
  n = 4 if "gather4" in inst.name or "msaa_load" in inst.name else bin(f["dmask"]).count("1") or 1
  if f["d16"]: n = (n + 1) // 2
  return n + (1 if f["tfe"] or f["lwe"] else 0)


def _smem_offset_text(inst: Inst) -> str:
  f = inst.fields
  off = f["offset"]
  if "imm" in f:  # gfx9/CDNA: IMM selects an immediate offset, else OFFSET names an SGPR; SOFFSET_EN adds SOFFSET
    if not f["imm"]:  # an SGPR offset: in OFFSET[6:0], or in SOFFSET when SOFFSET_EN
      sgpr = f["soffset"] if f["soffset_en"] else off & 0x7f
      so = scalar_operand(sgpr, 1, "offset", inst.arch)
      if so is None: raise DecodeError(f"{inst.name}: reserved SGPR offset {sgpr}", inst.offset)
      return so.text
    if off & (1 << 20): off -= 1 << 21
    text = f"-0x{-off:x}" if off < 0 else f"0x{off:x}"
    if f["soffset_en"]:
      so = scalar_operand(f["soffset"], 1, "soffset", inst.arch)
      if so is None: raise DecodeError(f"{inst.name}: reserved SOFFSET {f['soffset']}", inst.offset)
      return so.text + f" offset:{text}"
    return text
  if "th" in f:  # gfx12: 24-bit signed offset; LLVM prints the offset (not null) when SOFFSET is null
    if off & (1 << 23): off -= 1 << 24
    text = f"-0x{-off:x}" if off < 0 else f"0x{off:x}"
    if f["soffset"] == 124: return text
    so = scalar_operand(f["soffset"], 1, "soffset")
    if so is None: raise DecodeError(f"{inst.name}: reserved SOFFSET {f['soffset']}", inst.offset)
    return so.text + f" offset:{text}"
  if off & (1 << 20): off -= 1 << 21  # 21-bit signed byte offset (16.2 SMEM)
  text = f"-0x{-off:x}" if off < 0 else f"0x{off:x}"
  # LLVM prints the SOFFSET register when the offset is 0 or SOFFSET is not null, and "reg offset:N" for both
  if f["soffset"] != 124 or off == 0:
    so = scalar_operand(f["soffset"], 1, "soffset")
    if so is None: raise DecodeError(f"{inst.name}: reserved SOFFSET {f['soffset']}", inst.offset)
    return so.text + (f" offset:{text}" if off else "")
  return text


# ---------------------------------------------------------------------------------------------- simm16 formats
def format_simm16(inst: Inst, kind: str, v: int) -> str:
  if inst.name in ("s_waitcnt_depctr", "s_wait_alu"): return depctr_text(v)
  if kind == "hex": return f"0x{v:x}"
  if kind == "udec": return str(v)
  if kind == "sdec": return str(v - 0x10000 if v & 0x8000 else v)
  if kind == "u16": return str(v) if v <= 64 else f"0x{v:x}"
  if kind == "waitcnt": return _waitcnt_gfx9_text(v) if inst.arch == "gfx942" else _waitcnt_text(v)
  if kind == "delay_alu": return _delay_alu_text(v)
  if kind == "sendmsg": return _sendmsg_text(inst.arch, v)
  if kind == "hwreg": return _hwreg_text(inst.arch, v)
  if inst.name in ("s_waitcnt_depctr", "s_wait_alu"): return depctr_text(v)
  return str(v)


# S_WAITCNT_DEPCTR simm16 fields (RDNA3 ISA 16.1 SOPP, S_WAITCNT_DEPCTR), in the order LLVM prints them; a field
# at its all-ones value is "no wait". Bits 6:5 are unused: with any of them set LLVM prints the raw hex value.
DEPCTR_FIELDS = (("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4),
                 ("depctr_va_sdst", 9, 3), ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1), ("depctr_vm_vsrc", 2, 3))


def depctr_text(v: int) -> str:
  if v & 0x60: return f"0x{v:x}"
  vals = [(name, (v >> lo) & ((1 << w) - 1), (1 << w) - 1) for name, lo, w in DEPCTR_FIELDS]
  shown = [(n, x) for n, x, full in vals if x != full] or [(n, x) for n, x, _ in vals]
  return " ".join(f"{n}({x})" for n, x in shown)


def swizzle_text(off: int) -> str:
  """ds_swizzle_b32 offset (RDNA3 ISA 12.? DS_SWIZZLE_B32): bit 15 set = quad permute of 2-bit lane selects;
  else bit-masks and [4:0], or [9:5], xor [14:10] on the lane id. Spelled with LLVM's swizzle() macros."""
  if off & 0x8000:
    if off & 0x7f00: return str(off)
    return "swizzle(QUAD_PERM," + ",".join(str((off >> (2 * i)) & 3) for i in range(4)) + ")"
  and_m, or_m, xor_m = off & 0x1f, (off >> 5) & 0x1f, (off >> 10) & 0x1f
  if and_m == 0x1f and or_m == 0 and xor_m and xor_m & (xor_m - 1) == 0: return f"swizzle(SWAP,{xor_m})"
  if and_m == 0x1f and or_m == 0 and xor_m and (xor_m + 1) & xor_m == 0: return f"swizzle(REVERSE,{xor_m + 1})"
  if xor_m == 0:
    size = ((~and_m) & 0x1f) + 1
    if and_m != 0x1f and size & (size - 1) == 0 and or_m < size and (and_m | (size - 1)) == 0x1f:
      return f"swizzle(BROADCAST,{size},{or_m})"
  chars = []  # lane bit = ((id & and) | or) ^ xor: forced 0/1, preserved (p) or inverted (i)
  for b in range(4, -1, -1):
    a, o, x = and_m >> b & 1, or_m >> b & 1, xor_m >> b & 1
    if o: chars.append("0" if x else "1")
    elif a: chars.append("i" if x else "p")
    else: chars.append("1" if x else "0")
  return f'swizzle(BITMASK_PERM,"{"".join(chars)}")'


def _waitcnt_gfx9_text(v: int) -> str:
  # gfx9/CDNA S_WAITCNT: vmcnt [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8] (MI300 ISA, S_WAITCNT)
  vm, exp, lgkm = (v & 0xf) | ((v >> 14) & 3) << 4, (v >> 4) & 7, (v >> 8) & 0xf
  parts = [f"vmcnt({vm})"] if vm != 0x3f else []
  if exp != 7: parts.append(f"expcnt({exp})")
  if lgkm != 0xf: parts.append(f"lgkmcnt({lgkm})")
  return " ".join(parts) if parts else f"vmcnt({vm}) expcnt({exp}) lgkmcnt({lgkm})"


def _waitcnt_text(v: int) -> str:
  # gfx11 S_WAITCNT simm16 (RDNA3 ISA 16.1 SOPP, S_WAITCNT): expcnt [2:0], lgkmcnt [9:4], vmcnt [15:10]
  vm, exp, lgkm = (v >> 10) & 0x3f, v & 7, (v >> 4) & 0x3f
  parts = []
  if vm != 0x3f: parts.append(f"vmcnt({vm})")
  if exp != 7: parts.append(f"expcnt({exp})")
  if lgkm != 0x3f: parts.append(f"lgkmcnt({lgkm})")
  if not parts: return f"vmcnt({vm}) expcnt({exp}) lgkmcnt({lgkm})"
  return " ".join(parts)


_INSTID = ("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4", "TRANS32_DEP_1", "TRANS32_DEP_2",
           "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1", "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3")
_INSTSKIP = ("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4")


def _delay_alu_text(v: int) -> str:
  # S_DELAY_ALU simm16 (RDNA3 ISA 16.1 SOPP, S_DELAY_ALU): instid0 [3:0], instskip [6:4], instid1 [10:7]
  # bits 15:11 are ignored; values without a name print as LLVM's "/* invalid ... value */" comment
  id0, skip, id1 = v & 0xf, (v >> 4) & 7, (v >> 7) & 0xf
  def name(table, i, what): return table[i] if i < len(table) else f"/* invalid {what} value */"
  parts = []
  if id0: parts.append(f"instid0({name(_INSTID, id0, 'instid')})")
  if skip: parts.append(f"instskip({name(_INSTSKIP, skip, 'instskip')})")
  if id1: parts.append(f"instid1({name(_INSTID, id1, 'instid')})")
  return " | ".join(parts) if parts else "0"


def _sendmsg_text(arch: str, v: int) -> str:
  names = arch_tables(arch).sendmsg
  if v in names: return f"sendmsg({names[v]})"
  return str(v)


def _hwreg_text(arch: str, v: int) -> str:
  # simm16: id [5:0], offset [10:6], size-1 [15:11] (RDNA3 ISA 16.1 SOPK, S_GETREG_B32)
  names = arch_tables(arch).hwreg
  rid, off, size = v & 0x3f, (v >> 6) & 0x1f, ((v >> 11) & 0x1f) + 1
  name = names.get(rid, str(rid))
  if off == 0 and size == 32: return f"hwreg({name})"
  return f"hwreg({name}, {off}, {size})"


# ------------------------------------------------------------------------------------------------- modifiers
# DS opcodes with two 8-bit offsets (offset0:/offset1:): gfx11 ds_load_2addr_b32..., gfx9 ds_read2_b32, ds_write2st64_b64,
# ds_wrxchg2_rtn_b32...
_DS_TWO_OFFSETS = re.compile(r"2addr|^ds_(read|write|wrxchg)2")
_OMOD = {1: "mul:2", 2: "mul:4", 3: "div:2"}


def _apply_vop3_src_mods(inst: Inst, ops: list[Operand], abs_field: str = "abs") -> list[str]:
  f = inst.fields
  texts = []
  neg, abs_ = f.get("neg", 0), f.get(abs_field, 0)
  srcmods = None
  if inst.encoding in ("VOP3", "VOP3SD"):
    srcmods = arch_tables(inst.arch).encodings[inst.encoding].extra[inst.opcode]["srcmods"]
  for op in ops:
    text = op.text
    if op.field in ("src0", "src1", "src2"):
      i = int(op.field[3])
      kinds = srcmods.get(op.field, ()) if srcmods is not None else ("neg", "abs")
      if abs_ >> i & 1 and "abs" in kinds: text = f"|{text}|"
      if neg >> i & 1 and "sext" in kinds: text = f"sext({text})"
      elif neg >> i & 1 and "neg" in kinds:
        # LLVM writes neg(...) around a constant, so that "-" is not read as the constant's sign
        absd = abs_ >> i & 1 and "abs" in kinds
        text = f"neg({text})" if op.kind in ("int", "float", "literal") and not absd else f"-{text}"
    texts.append(text)
  return texts


def _bits_list(value: int, n: int) -> str:
  return "[" + ",".join(str((value >> i) & 1) for i in range(n)) + "]"


def format_inst(inst: Inst) -> str:
  if inst.encoding == "VOPD":
    (xn, xt), (yn, yt) = inst.vopd
    xs = ", ".join(o.text for o in _template_operands(inst, xt, inst.fields))
    ys = ", ".join(o.text for o in _template_operands(inst, yt, inst.fields))
    return f"{xn} {xs} :: {yn} {ys}"
  ops = inst.operands
  enc, f = inst.encoding, inst.fields
  mods: list[str] = []
  if enc == "EXP": return _format_exp(inst)
  if enc == "LDSDIR":
    t = inst.name
    if t == "lds_param_load": t += f" v{f['vdst']}, attr{f['attr']}.{'xyzw'[f['attr_chan']]}"
    else: t += f" v{f['vdst']}"
    return t + f" wait_vdst:{f['waitvdst']}"
  if enc == "VINTERP":
    texts = _apply_vop3_src_mods(inst, ops)
    if f["opsel"]: mods.append("op_sel:" + _bits_list(f["opsel"], 4))
    if f["clmp"]: mods.append("clamp")
    mods.append(f"wait_exp:{f['waitexp']}")
    return f"{inst.name} {', '.join(texts)} {' '.join(mods)}"
  if enc in ("VOP3", "VOP3SD"):
    texts = _apply_vop3_src_mods(inst, ops)
    nsrc = sum(1 for o in ops if o.field in ("src0", "src1", "src2"))
    if "_fmac_" in inst.name or "_mac_" in inst.name: nsrc = 3  # the accumulator is a tied third source
    if enc == "VOP3" and f["opsel"]:
      mods.append("op_sel:" + _bits_list(f["opsel"] & ((1 << nsrc) - 1) | ((f["opsel"] >> 3) << nsrc), nsrc + 1))
    if f["clmp"]: mods.append("clamp")
    if f["omod"]: mods.append(_OMOD[f["omod"]])
  elif enc == "VOP3P":
    nsrc = sum(1 for o in ops if o.field in ("src0", "src1", "src2"))
    mask = (1 << nsrc) - 1
    opsel_hi = f["opsel_hi"] | (f["opsel_hi2"] << 2)
    if inst.name.startswith("v_fma_mix"):
      # mixed-precision FMA: NEG_HI acts as ABS and OPSEL_HI selects f16 sources (default 0): LLVM AMDGPU syntax
      texts = _apply_vop3_src_mods(inst, ops, abs_field="neg_hi")
      if f["opsel"] & mask: mods.append("op_sel:" + _bits_list(f["opsel"], nsrc))
      if opsel_hi & mask: mods.append("op_sel_hi:" + _bits_list(opsel_hi, nsrc))
    else:
      texts = [o.text for o in ops]
      if f["opsel"] & mask: mods.append("op_sel:" + _bits_list(f["opsel"], nsrc))
      if opsel_hi & mask != mask: mods.append("op_sel_hi:" + _bits_list(opsel_hi, nsrc))
      if f["neg"] & mask: mods.append("neg_lo:" + _bits_list(f["neg"], nsrc))
      if f["neg_hi"] & mask: mods.append("neg_hi:" + _bits_list(f["neg_hi"], nsrc))
    if f["clmp"]: mods.append("clamp")
  else:
    texts = [o.text for o in ops]
    if enc == "DS":
      if _DS_TWO_OFFSETS.search(inst.name):
        if f["offset0"]: mods.append(f"offset0:{f['offset0']}")
        if f["offset1"]: mods.append(f"offset1:{f['offset1']}")
      else:
        off = f["offset0"] | f["offset1"] << 8
        if off and inst.name == "ds_swizzle_b32": mods.append(f"offset:{swizzle_text(off)}")
        elif off: mods.append(f"offset:{off}")
      if f["gds"]: mods.append("gds")
    elif enc in ("FLAT", "GLOBAL", "SCRATCH"):
      off = f["offset"]
      if enc != "FLAT" and off & 0x1000: off -= 0x2000  # 13-bit signed for GLOBAL/SCRATCH (16.10)
      if enc == "FLAT": off &= 0xfff
      if off: mods.append(f"offset:{off}")
      mods += [m for m in ("glc", "slc", "dlc", "sc0", "nt", "sc1") if f.get(m)]   # gfx942: sc0/nt/sc1 (LLVM's order)
    elif enc == "SMEM" and "th" in f:
      mods += _cache_policy_mods(inst)
    elif enc == "SMEM" and "imm" in f:
      mods += [m for m in ("glc", "nv") if f[m]]
    elif enc == "SMEM":
      mods += [m for m in ("glc", "dlc") if f[m]]
    elif enc in ("VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"):
      if enc == "VBUFFER":
        if inst.name.startswith("tbuffer") and f["format"] != 1:
          mods.append(f"format:{_buf_format_text(inst.arch, f['format'])}")
        if f["idxen"]: mods.append("idxen")
        if f["offen"]: mods.append("offen")
      off = f["ioffset"]
      if off & (1 << 23): off -= 1 << 24  # 24-bit signed instruction offset
      if off: mods.append(f"offset:{off}")
      mods += _cache_policy_mods(inst)
      if enc == "VBUFFER" and f["tfe"]: mods.append("tfe")
    elif enc == "MIMG":
      dims = ("1D", "2D", "3D", "CUBE", "1D_ARRAY", "2D_ARRAY", "2D_MSAA", "2D_MSAA_ARRAY")
      mods.append(f"dmask:0x{f['dmask']:x}")
      mods.append(f"dim:SQ_RSRC_IMG_{dims[f['dim']]}")
      mods += [m for m in ("unorm", "glc", "slc", "dlc", "r128", "a16", "tfe", "lwe", "d16")
               if f["unrm" if m == "unorm" else m]]
    elif enc in ("MUBUF", "MTBUF"):
      if enc == "MTBUF" and f["format"] != 1:  # 1 (BUF_FMT_8_UNORM) is the default LLVM leaves out
        mods.append(f"format:{_buf_format_text(inst.arch, f['format'])}")
      if f["idxen"]: mods.append("idxen")
      if f["offen"]: mods.append("offen")
      if f["offset"]: mods.append(f"offset:{f['offset']}")
      mods += [m for m in ("glc", "slc", "dlc", "tfe") if f.get(m)]
      mods += [m for m in ("sc0", "nt", "sc1", "lds") if f.get(m)]                 # gfx942
  if inst.dpp is not None: mods += _dpp_mods(inst)
  text = inst.name
  if texts: text += " " + ", ".join(texts)
  if mods: text += " " + " ".join(mods)
  return text


def _cache_policy_mods(inst: Inst) -> list[str]:
  """gfx12 th:/scope: modifiers (names learned from llvm-mc, per load/store/atomic)."""
  t = arch_tables(inst.arch)
  f, out = inst.fields, []
  kind = "atomic" if "_atomic" in inst.name else "store" if "_store" in inst.name else "load"
  names = t.th_names.get(kind, {})
  key = f["th"] | f["scope"] << 3
  if f["th"]: out.append(f"th:{names.get(key, names.get(f['th'], hex(f['th'])))}")
  if f["scope"]: out.append(f"scope:{t.scope_names.get(f['scope'], hex(f['scope']))}")
  return out


_EXP_TARGETS = {**{i: f"mrt{i}" for i in range(8)}, 8: "mrtz", **{12 + i: f"pos{i}" for i in range(5)}, 20: "prim",
                21: "dual_src_blend0", 22: "dual_src_blend1"}


def _format_exp(inst: Inst) -> str:
  # EXP (RDNA3 ISA 16.9): EN [3:0] enables VSRC0..3, TARGET [9:4], DONE 11, ROW 13
  f = inst.fields
  target = _EXP_TARGETS.get(f["target"], f"invalid_target_{f['target']}")
  srcs = [f"v{f[f'vsrc{i}']}" if f["en"] >> i & 1 else "off" for i in range(4)]
  text = f"exp {target} {', '.join(srcs)}"
  if f["done"]: text += " done"
  if f["row"]: text += " row_en"
  return text


def _buf_format_text(arch: str, fmt: int) -> str:
  names = arch_tables(arch).buf_formats
  return f"[{names[fmt]}]" if fmt in names else str(fmt)


_SDWA_SEL = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")
_SDWA_UNUSED = ("UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE")


def _sdwa_operand(inst: Inst, field: str, cls: str, count: int, value: int) -> Operand:
  """An operand of a gfx942 SDWA instruction: src0/src1 are VGPRs unless S0/S1 make them SGPRs (or constants), with
  sext/neg/abs from the SDWA dword (a VOPC destination is vcc unless SD names SDST: see _template_operands)."""
  d = inst.dpp
  if field in ("src0", "vsrc1"):
    i = 0 if field == "src0" else 1
    v = d["src0"] if i == 0 else value
    op = source_operand(v if d[f"s{i}"] else 256 + v, count, field, None, inst.arch)
    if op is None: raise DecodeError(f"{inst.name}: reserved SDWA source {v} in {field}", inst.offset)
    text = op.text
    if d[f"src{i}_abs"]: text = f"|{text}|"
    if d[f"src{i}_neg"]: text = f"-{text}"
    if d[f"src{i}_sext"]: text = f"sext({text})"
    return op._replace(text=text)
  return Operand("vgpr", value, count, None, field, reg_text("v", value, count))


def _sdwa_mods(inst: Inst) -> list[str]:
  d, mods = inst.dpp, []
  if inst.encoding != "VOPC":
    if d["clmp"]: mods.append("clamp")
    if d["omod"]: mods.append(_OMOD[d["omod"]])
    mods += [f"dst_sel:{_SDWA_SEL[d['dst_sel']]}", f"dst_unused:{_SDWA_UNUSED[d['dst_u']]}"]
  mods.append(f"src0_sel:{_SDWA_SEL[d['src0_sel']]}")
  if inst.encoding != "VOP1": mods.append(f"src1_sel:{_SDWA_SEL[d['src1_sel']]}")
  return mods


def _dpp_mods(inst: Inst) -> list[str]:
  d = inst.dpp
  if d["kind"] == "sdwa": return _sdwa_mods(inst)
  if d["kind"] == "dpp8":
    sel = ",".join(str((d["lane_sel"] >> (3 * i)) & 7) for i in range(8))
    return [f"dpp8:[{sel}]"] + (["fi:1"] if d["fi"] else [])
  ctrl = d["dpp_ctrl"]
  if ctrl <= 0xff: ctl = "quad_perm:[" + ",".join(str((ctrl >> (2 * i)) & 3) for i in range(4)) + "]"
  elif 0x101 <= ctrl <= 0x10f: ctl = f"row_shl:{ctrl & 0xf}"
  elif 0x111 <= ctrl <= 0x11f: ctl = f"row_shr:{ctrl & 0xf}"
  elif 0x121 <= ctrl <= 0x12f: ctl = f"row_ror:{ctrl & 0xf}"
  elif ctrl == 0x140: ctl = "row_mirror"
  elif ctrl == 0x141: ctl = "row_half_mirror"
  elif 0x150 <= ctrl <= 0x15f: ctl = f"row_share:{ctrl & 0xf}"
  elif 0x160 <= ctrl <= 0x16f: ctl = f"row_xmask:{ctrl & 0xf}"
  else: ctl = f"dpp_ctrl:{ctrl:#x}"
  out = [ctl, f"row_mask:0x{d['row_mask']:x}", f"bank_mask:0x{d['bank_mask']:x}"]
  if d["bc"]: out.append("bound_ctrl:1")
  if d["fi"]: out.append("fi:1")
  return out
