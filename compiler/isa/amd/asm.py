"""RDNA3 assembler: LLVM-syntax text -> bytes, and a Python DSL for code generators.

Text (for people):
    assemble("v_add_f32 v2, v2, v3\\ns_endpgm")          -> bytes    (one instruction per line; ';' or '//' comments;
                                                                   "name:" defines a label for s_branch/s_cbranch_*)
DSL (for the compiler):
    from hcq.compiler.isa.amd.asm import Asm, v, s
    a = Asm()
    a.s_load_b64(s[0:1], s[0:1], 0x10)
    a.v_add_f32_e32(v[2], v[2], v[3])
    a.global_store_b32(v[0:1], v[2], "off", offset=16, glc=True)    # keyword modifiers: offset=16, glc=True, clamp=True
    a.label("done"); a.s_cbranch_execz("done")                      # labels resolve when .code is read
    a.s_endpgm()
    a.code                                                            # bytes
Mnemonics, operand order and register widths come from the generated tables (hcq.autogen.isa.gfx1100); the
operand-value conventions are documented in operands.py. A mnemonic without _e32/_e64 picks the 32-bit form
when its operands fit (as llvm-mc does), else the VOP3 form. Errors raise AssembleError naming line and text.
"""
from __future__ import annotations

import re
import struct

from .mimg import mimg_address_count, nsa_layout
from .errors import AssembleError
from .operands import INLINE_FLOAT_TEXT, NAMES_BY_ARCH, SPECIAL_NAMES, SPECIAL_NAMES_64
from .tables import ArchTables, arch_tables

_REG = re.compile(r"^(v|s|ttmp|a)(?:(\d+)|\[(\d+):(\d+)\])$")     # a: gfx9 AccVGPRs
_REG16 = re.compile(r"^v(\d+)\.([lh])$")
_SPECIAL = {name: code for code, name in SPECIAL_NAMES.items()}
_SPECIAL.update({name: code for code, name in SPECIAL_NAMES_64.items()})


def _specials(arch: str) -> tuple[dict, int]:
  """(special register name -> scalar code, highest SGPR) of an arch: gfx9's differ (operands.NAMES_BY_ARCH: m0 124,
  flat_scratch/xnack_mask at 102-105, s0..s101)."""
  if arch not in NAMES_BY_ARCH: return _SPECIAL, 105
  names, names64, nsgpr = NAMES_BY_ARCH[arch]
  specials = {name: code for code, name in names.items()}
  specials.update({name: code for code, name in names64.items()})
  return specials, nsgpr - 1
_FLOATS = {text: code for code, text in INLINE_FLOAT_TEXT.items()}
_FLOATS["0.15915494309189532"] = 248
_F16_INLINE = {0x3800: 240, 0xb800: 241, 0x3c00: 242, 0xbc00: 243, 0x4000: 244, 0xc000: 245, 0x4400: 246,
               0xc400: 247, 0x3118: 248}
_NINE_BIT = ("src0", "src1", "src2", "srcx0", "srcy0")
_EIGHT_BIT_SRC = ("ssrc0", "ssrc1", "soffset")
_INSTID = {n: i for i, n in enumerate(("NO_DEP", "VALU_DEP_1", "VALU_DEP_2", "VALU_DEP_3", "VALU_DEP_4",
                                        "TRANS32_DEP_1", "TRANS32_DEP_2", "TRANS32_DEP_3", "FMA_ACCUM_CYCLE_1",
                                        "SALU_CYCLE_1", "SALU_CYCLE_2", "SALU_CYCLE_3"))}
_INSTSKIP = {n: i for i, n in enumerate(("SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"))}


class _Operand:
  """A parsed operand: kind reg/const/special/off/text; for registers cls+idx+count; neg/abs flags."""
  __slots__ = ("kind", "cls", "idx", "count", "value", "neg", "abs", "text", "max_sgpr")

  def __init__(self, text: str, specials: dict = _SPECIAL, max_sgpr: int = 105):
    self.max_sgpr = max_sgpr
    self.text, self.neg, self.abs = text, False, False
    t = text
    if t.startswith(("neg(", "sext(")) and t.endswith(")"): self.neg, t = True, t[t.index("(") + 1:-1]
    elif t.startswith("-") and (t[1:2] in ("|", "v", "s", "t") or t[1:].startswith(("vcc", "exec", "m0", "null", "src_"))):
      self.neg, t = True, t[1:]
    if t.startswith("|") and t.endswith("|"): self.abs, t = True, t[1:-1]
    elif t.startswith("abs(") and t.endswith(")"): self.abs, t = True, t[4:-1]
    self.cls = self.idx = self.value = None
    self.count = 1
    m = _REG.match(t)
    if m:
      self.kind, self.cls = "reg", m.group(1)
      if m.group(2) is not None: self.idx = int(m.group(2))
      else:
        self.idx, hi = int(m.group(3)), int(m.group(4))
        self.count = hi - self.idx + 1
        if self.count < 1: raise AssembleError(f"bad register range {t}")
    elif t in specials: self.kind, self.value = "special", specials[t]
    elif t == "off": self.kind = "off"
    elif t in _FLOATS: self.kind, self.value = "const", _FLOATS[t]
    else:
      try:
        self.kind, self.value = "int", int(t, 0)
      except ValueError:
        try:
          self.kind, self.value = "float", float(t)
        except ValueError:
          self.kind = "text"
    self.text = t


def _scalar_code(op: _Operand, what: str) -> int:
  if op.kind == "reg" and op.cls == "s":
    if op.idx + op.count - 1 > op.max_sgpr:
      raise AssembleError(f"{what}: SGPR s{op.idx} out of range (s0..s{op.max_sgpr})")
    return op.idx
  if op.kind == "reg" and op.cls == "ttmp":
    if op.idx > 15: raise AssembleError(f"{what}: ttmp{op.idx} out of range")
    return 108 + op.idx
  if op.kind == "special": return op.value
  raise AssembleError(f"{what}: {op.text!r} is not a scalar register")


_SADDR_OFF_GFX9 = 0x7f      # tables.ArchTables.saddr_off of gfx9 (gfx942): the arch whose gfx9 forms apply
SDWA_SRC0 = 0xf9            # src0 of a gfx9 VOP1/VOP2/VOPC that carries an SDWA dword
_SDWA_UNUSED = {"UNUSED_PAD": 0, "UNUSED_SEXT": 1, "UNUSED_PRESERVE": 2}


class _Literal:
  def __init__(self): self.value = None

  def set(self, v: int):
    v &= 0xffffffff
    if self.value is not None and self.value != v: raise AssembleError("two different literals in one instruction")
    self.value = v


class _NoLiteralType:
  """SDWA sources take no literal constant."""
  value = None

  def set(self, v: int): raise AssembleError("an SDWA source cannot be a literal constant")


_NoLiteral = _NoLiteralType()


def _source_code(op: _Operand, nine_bit: bool, lit: _Literal, what: str, lit16: bool, wide: bool) -> int:
  if op.kind == "reg" and op.cls in ("v", "a"):     # an AccVGPR source (v_accvgpr_*) takes the VGPR codes
    if not nine_bit: raise AssembleError(f"{what}: a VGPR is not allowed here")
    if op.idx + op.count - 1 > 255: raise AssembleError(f"{what}: VGPR v{op.idx} out of range (v0..v255)")
    return 256 + op.idx
  if op.kind in ("reg", "special") and (op.kind == "special" or op.cls in ("s", "ttmp")):
    return _scalar_code(op, what)
  if op.kind == "const": return op.value
  if op.kind == "int":
    v = op.value
    if 0 <= v <= 64: return 128 + v
    if -16 <= v < 0: return 192 - v
    if not -(1 << 31) <= v < (1 << 32) and not wide: raise AssembleError(f"{what}: constant {v:#x} does not fit 32 bits")
    lit.set(v)
    return 255
  if op.kind == "float":
    # a float literal in the operand's type: f64 keeps the high dword, f16 its 16 bits (16.3.1 "Literal constants")
    if wide: lit.set(struct.unpack("<Q", struct.pack("<d", op.value))[0] >> 32)
    elif lit16: lit.set(struct.unpack("<H", struct.pack("<e", op.value))[0])
    else: lit.set(struct.unpack("<I", struct.pack("<f", op.value))[0])
    return 255
  raise AssembleError(f"{what}: cannot encode operand {op.text!r}")


def _swizzle_offset(text: str) -> int:
  """ds_swizzle_b32 offset from LLVM's swizzle() macros (see disasm.swizzle_text for the bit layout)."""
  m = re.fullmatch(r'swizzle\((\w+),(.*)\)', text)
  if not m: raise AssembleError(f"bad swizzle {text!r}")
  mode, args = m.group(1), m.group(2).split(",")
  if mode == "QUAD_PERM": return 0x8000 | sum(int(a) << (2 * i) for i, a in enumerate(args))
  if mode == "SWAP": return 0x1f | int(args[0]) << 10
  if mode == "REVERSE": return 0x1f | (int(args[0]) - 1) << 10
  if mode == "BROADCAST": return (0x1f & ~(int(args[0]) - 1)) | int(args[1]) << 5
  if mode == "BITMASK_PERM":
    and_m = or_m = xor_m = 0
    for i, c in enumerate(args[0].strip('"')):
      bit = 1 << (4 - i)
      if c == "1": or_m |= bit
      elif c == "p": and_m |= bit
      elif c == "i": and_m, xor_m = and_m | bit, xor_m | bit
      elif c != "0": raise AssembleError(f"bad BITMASK_PERM character {c!r}")
    return and_m | or_m << 5 | xor_m << 10
  raise AssembleError(f"unknown swizzle mode {mode!r}")


def _bits(text: str) -> int:
  m = re.match(r"^\[([01](?:,[01])*)\]$", text)
  if not m: raise AssembleError(f"bad bit list {text!r}")
  return sum(int(b) << i for i, b in enumerate(m.group(1).split(",")))


def _split(text: str):
  from ....autogen.isa.syntax import split_operands
  return split_operands(text)


_NSA_ITEM = re.compile(r"v(\d+)|v\[(\d+):(\d+)\]")


def encode_fields(et, fields: dict, strict: bool = False, what: str | None = None) -> bytes:
  """The one place field values become instruction bytes (the text assembler, the Asm DSL and the RDNA3 backend all
  end here): each field of encoding table `et` (tables.EncodingTable: name, lo bit, mask) from `fields` (0 when
  absent), range-checked, plus the encoding's identifying bits. strict: a field name the layout lacks is an error.
  what: how errors name the instruction (default: the encoding's name)."""
  if strict:
    unknown = fields.keys() - et.field_names
    if unknown:
      raise AssembleError(f"{et.name}: no field {', '.join(sorted(unknown))} in this encoding "
                          f"(its fields: {', '.join(f for f, _, _ in et.fields)})")
  word = et.ident_word   # the encoding's identifying bits (tables.EncodingTable, from the layout's "ident")
  get = fields.get
  for fname, lo, mask in et.fields:
    v = get(fname, 0)
    if v < 0 or v > mask: raise AssembleError(f"{what or et.name}: value {v} out of range for field {fname} (max {mask})")
    word |= v << lo
  return word.to_bytes(et.size, "little")


def waitcnt_simm16(vmcnt: int = 0x3f, lgkmcnt: int = 0x3f, expcnt: int = 7) -> int:
  """gfx11 S_WAITCNT simm16 (RDNA3 ISA SOPP S_WAITCNT: vmcnt [15:10], lgkmcnt [9:4], expcnt [2:0]); a counter left at
  its maximum is not waited for."""
  if not (0 <= vmcnt <= 0x3f and 0 <= lgkmcnt <= 0x3f and 0 <= expcnt <= 7):
    raise AssembleError(f"s_waitcnt: counts vmcnt({vmcnt}) lgkmcnt({lgkmcnt}) expcnt({expcnt}) out of range")
  return vmcnt << 10 | lgkmcnt << 4 | expcnt


def waitcnt_simm16_gfx9(vmcnt: int = 0x3f, lgkmcnt: int = 0xf, expcnt: int = 7) -> int:
  """gfx9/CDNA S_WAITCNT simm16 (MI300 ISA, S_WAITCNT: vmcnt [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8]); a counter
  left at its maximum is not waited for."""
  if not (0 <= vmcnt <= 0x3f and 0 <= lgkmcnt <= 0xf and 0 <= expcnt <= 7):
    raise AssembleError(f"s_waitcnt: counts vmcnt({vmcnt}) lgkmcnt({lgkmcnt}) expcnt({expcnt}) out of range")
  return (vmcnt & 0xf) | expcnt << 4 | lgkmcnt << 8 | (vmcnt >> 4) << 14


def depctr_simm16(**counts: int) -> int:
  """S_WAITCNT_DEPCTR simm16 from counter values by their LLVM names without the depctr_ prefix (va_vdst=0,
  sa_sdst=0, ...): every other field at its "no wait" all-ones value, unused bits 6:5 clear (disasm.DEPCTR_FIELDS)."""
  from .disasm import DEPCTR_FIELDS
  v = 0xff9f
  for key, val in counts.items():
    field = [f for f in DEPCTR_FIELDS if f[0] == f"depctr_{key}"]
    if not field: raise AssembleError(f"s_waitcnt_depctr: unknown counter depctr_{key}")
    _, lo, w = field[0]
    if not 0 <= val < 1 << w: raise AssembleError(f"s_waitcnt_depctr: depctr_{key}({val}) out of range")
    v = (v & ~(((1 << w) - 1) << lo)) | val << lo
  return v


class Assembler:
  def __init__(self, arch: str = "gfx1100"):
    self.t: ArchTables = arch_tables(arch)
    self.arch = arch
    self._specials, self._max_sgpr = _specials(arch)
    # several encodings can print alike (ignored bits): the smallest value is the canonical one
    self._msg = {v: k for k, v in sorted(self.t.sendmsg.items(), reverse=True)}
    self._msg_rtn = {v: k for k, v in sorted(self.t.sendmsg_rtn.items(), reverse=True)}
    self._hwreg = {v: k for k, v in self.t.hwreg.items()}
    self._fmt = {v: k for k, v in self.t.buf_formats.items()}

  def _op(self, text: str) -> _Operand:
    """An operand parsed with this arch's special register names."""
    return _Operand(text, self._specials, self._max_sgpr)

  # ------------------------------------------------------------------------------------------------ lookup
  def _lookup(self, name: str, nops: list[str], mods: list[str] = ()):
    dpp = None
    if name.startswith(("v_cmp_", "v_cmpx_")) and any(m.startswith(("dpp8:", "quad_perm:", "row_")) for m in mods) \
        and not name.endswith(("_e32", "_e64", "_dpp")):
      name += "_e32_dpp" if self._fits_e32(name + "_e32", nops) else "_e64_dpp"
    if name.endswith("_dpp"):
      dpp, name = True, name[:-4]
      if name.endswith("_e64") and name not in self.t.by_name: name = name[:-4]  # native VOP3: v_fma_f32_e64_dpp
      elif not name.endswith(("_e64", "_e32")) and name + "_e32" in self.t.by_name: name += "_e32"
    if name in self.t.by_name: return name, self.t.by_name[name], dpp
    for suffix in ("_e32", "_e64"):
      if name + suffix in self.t.by_name:
        cand = name + suffix
        if suffix == "_e32" and not self._fits_e32(cand, nops): continue
        return cand, self.t.by_name[cand], dpp
    raise AssembleError(f"unknown {self.arch} mnemonic {name!r}")

  def _fits_e32(self, name: str, ops: list[str]) -> bool:
    enc, op = self.t.by_name[name]
    template = self.t.encodings[enc].ops[op][2]
    regs = [t for t in template if t[0] in ("reg", "text")]
    if len(regs) != len(ops): return False
    for t, text in zip(regs, ops):
      o = self._op(text)
      if o.neg or o.abs: return False
      if t[0] == "text":
        if text != t[1]: return False
      elif t[1] in ("vsrc1", "vdst") and not (o.kind == "reg" and o.cls == "v"): return False
    return True

  # ------------------------------------------------------------------------------------------------ assemble
  def assemble_line(self, text: str) -> bytes:
    text = text.strip()
    if " :: " in text: return self._vopd(text)
    if text.startswith(("lds_param_load", "lds_direct_load")): return self._ldsdir(text)
    if text.startswith("exp "): return self._exp(text)
    name, ops, mods = _split(text)
    if name.endswith("_sdwa") and self.t.saddr_off == _SADDR_OFF_GFX9: return self._sdwa(name, ops, mods)
    name, (enc, opcode), dpp = self._lookup(name, ops, mods)
    et = self.t.encodings[enc]
    _, size, template, _ = et.ops[opcode]
    if not template and ops:   # an instruction without operands: what follows its name are modifiers (global_wb scope:SCOPE_SE)
      ops, mods = [], ops[:-1] + ops[-1].split() + list(mods)
    extra = et.extra.get(opcode, {})
    if extra.get("operands_glc") is not None:
      returning = any(m.startswith("th:TH_ATOMIC") and "RETURN" in m for m in mods) if enc.startswith("V") \
        else "glc" in mods
      if returning: template = extra["operands_glc"]
    f: dict[str, int] = {et.layout["op"]: opcode}
    if enc in ("FLAT", "GLOBAL", "SCRATCH", "VFLAT", "VGLOBAL", "VSCRATCH"):
      f["saddr"] = self.t.saddr_off
    if enc == "VBUFFER": f["format"] = 1
    if enc == "SMEM" and any(x[0] == "reg" and x[1] == "sbase" for x in template) and "imm" not in et.field_names:
      f["soffset"] = 124    # gfx11/12: SOFFSET null; gfx9 has SOFFSET_EN instead
    if enc == "MTBUF": f["format"] = 1
    if enc == "VOP3P" and not name.startswith("v_fma_mix"): f["opsel_hi"], f["opsel_hi2"] = 3, 1
    if enc == "VOP3" and name.startswith("v_cmpx_"): f["vdst"] = 126  # the implicit EXEC destination
    lit = _Literal()
    lit16 = extra.get("lit16", frozenset())
    self._f16hex = extra.get("f16hex", frozenset())
    consumed = self._operands(name, enc, template, ops, f, lit, lit16)
    if consumed != len(ops): raise AssembleError(f"{name}: expected {consumed} operands, got {len(ops)}")
    dpp_word = self._modifiers(name, enc, f, mods, dpp)
    if size > et.size and lit.value is None: raise AssembleError(f"{name}: needs a literal constant")
    if f.get("_nsa_sizes"): self._check_nsa(name, et, f)
    out = encode_fields(et, f, what=name)   # "_nsa_regs" is no field: appended below
    if enc == "MIMG": f.setdefault("_nsa_regs", None)
    if dpp_word is not None: out += dpp_word.to_bytes(4, "little")
    if f.get("_nsa_regs"):
      extra = bytes(f["_nsa_regs"])
      out += extra + bytes(-len(extra) % 4)
    if lit.value is not None: out += lit.value.to_bytes(4, "little")
    return out

  def _operands(self, name, enc, template, ops, f, lit, lit16) -> int:
    i = 0
    for t in template:
      kind = t[0]
      if kind == "simm16" and t[2] and i >= len(ops):
        f["simm16"] = 0
        continue
      if i >= len(ops): raise AssembleError(f"{name}: missing operand {i + 1}")
      text = ops[i]
      i += 1
      o = self._op(text)
      if kind == "text":
        if enc in ("GLOBAL", "VGLOBAL") and t[1] == "off":
          if o.kind != "off": f["saddr"] = _scalar_code(o, "saddr")
          continue
        if enc == "SCRATCH" and t[1] == "off":
          if o.kind == "reg" and o.cls == "v": f["addr"], f["sve"] = o.idx, 1
          elif o.kind != "off": raise AssembleError(f"{name}: bad scratch address {text!r}")
          continue
        if text != t[1]: raise AssembleError(f"{name}: operand {i} must be {t[1]!r}, got {text!r}")
        continue
      if kind == "reg":
        self._reg_field(name, enc, t, o, f, lit, lit16, self._f16hex)
      elif kind == "simm16":
        f["simm16"] = self._simm16(t[1], text, name)
      elif kind == "imm":
        if enc == "SMEM" and t[1] == "offset": self._smem_offset(text, f, name)
        else: f[t[1]] = int(text, 0)
      elif kind == "literal":
        if o.kind == "float": lit.set(struct.unpack("<I", struct.pack("<f", o.value))[0])
        elif o.kind == "int": lit.set(o.value)
        else: raise AssembleError(f"{name}: {text!r} is not a constant")
      elif kind == "sendmsg_rtn":
        f[t[1]] = self._sendmsg(text, self._msg_rtn)
    return i

  def _reg_field(self, name, enc, t, o: _Operand, f, lit, lit16, f16hex=frozenset()):
    field, cls, count = t[1], t[2], t[3]
    what = f"{name} {field}"
    if field in ("src0", "src1", "src2"):
      i = int(field[3])
      if o.neg: f["neg"] = f.get("neg", 0) | 1 << i
      if o.abs:
        af = "neg_hi" if name.startswith("v_fma_mix") else "abs"
        f[af] = f.get(af, 0) | 1 << i
    m16 = _REG16.match(o.text)
    if cls == "v16" and m16:
      idx = int(m16.group(1)) | (0x80 if m16.group(2) == "h" else 0)
      if int(m16.group(1)) > 127: raise AssembleError(f"{what}: 16-bit VGPR {o.text} out of range (v0..v127)")
      f[field] = 256 + idx if field in _NINE_BIT else idx
      return
    if field in _NINE_BIT or field in ("ssrc0", "ssrc1"):
      if o.kind == "int" and field in lit16 and not -16 <= o.value <= 64:
        # (llvm-mc keeps 0x3c00 a literal for 16-bit integer operands although its disassembler prints the inline
        # constant 1.0 that way: text -> bytes follows the assembler)
        o.value &= 0xffff
      half = field in lit16 or (enc == "VOP3P" and name.startswith("v_pk_") and "f16" in name)  # packed f16
      f[field] = _source_code(o, field in _NINE_BIT, lit, what, half, count == 2)
    elif field == "soffset":
      f[field] = _source_code(o, False, lit, what, False, False) if enc != "SMEM" else _scalar_code(o, what)
    elif field == "saddr":
      if o.kind == "off": f[field] = self.t.saddr_off
      else: f[field] = _scalar_code(o, what)
    elif field == "addr" and enc == "SCRATCH":     # gfx9: the address VGPR or off (SVE says which)
      if o.kind == "off": f["sve"] = 0
      elif o.kind == "reg" and o.cls == "v" and o.count == 1: f[field], f["sve"] = o.idx, 1
      else: raise AssembleError(f"{what}: expected a VGPR or off, got {o.text!r}")
    elif field == "vaddr" and enc == "VSCRATCH":
      if o.kind == "off": f["sve"] = 0
      else: f[field], f["sve"] = o.idx, 1
    elif field == "vaddr" and enc == "VBUFFER":
      f[field] = 0 if o.kind == "off" else o.idx
    elif field == "rsrc": f[field] = _scalar_code(o, what)
    elif field == "sbase": f[field] = _scalar_code(o, what) // 2
    elif field in ("srsrc", "ssamp"): f[field] = _scalar_code(o, what) // 4
    elif field == "vdsty":
      if o.kind != "reg" or o.cls != "v": raise AssembleError(f"{what}: expected a VGPR")
      f[field] = o.idx >> 1
    elif field == "vaddr" and enc == "MIMG" and o.kind == "text" and o.text.startswith("["):
      # [v16, v40, v41, v42, v[43:44]]: VADDR, then one byte per address (the last may start a range, mimg.nsa_layout)
      items = [x.strip() for x in o.text[1:].removesuffix("]").split(",")] if o.text.endswith("]") else []
      regs, sizes = [], []
      for k, item in enumerate(items):
        m = _NSA_ITEM.fullmatch(item)
        if m is None:
          raise AssembleError(f"{what}: {item!r} in the address list {o.text!r} is not a VGPR or a VGPR range")
        first = int(m[1] or m[2])
        last = int(m[3]) if m[3] else first
        if not first <= last <= 255: raise AssembleError(f"{what}: {item!r} is not a VGPR range within v0..v255")
        if m[3] and k != len(items) - 1: raise AssembleError(f"{what}: only the last address of {o.text!r} may be a range")
        regs.append(first)
        sizes.append(last - first + 1)
      if not regs: raise AssembleError(f"{what}: bad address list {o.text!r}")
      f[field], f["nsa"], f["_nsa_regs"], f["_nsa_sizes"] = regs[0], 1, regs[1:], sizes
    elif field == "vaddr" and enc in ("MUBUF", "MTBUF"):
      f[field] = 0 if o.kind == "off" else o.idx
    elif cls == "s" or field in ("sdst", "sdata"):
      f[field] = _scalar_code(o, what)
    else:
      if o.kind != "reg" or o.cls not in ("v", "a"): raise AssembleError(f"{what}: expected a VGPR, got {o.text!r}")
      if o.idx > 255: raise AssembleError(f"{what}: VGPR {o.text} out of range (0..255)")
      if o.cls == "a":      # gfx9 AccVGPR data of a memory instruction: the ACC bit; v_accvgpr_* name them directly
        if "acc" in self.t.encodings[enc].field_names and field in ("vdata", "vdst", "data"): f["acc"] = 1
        elif not name.startswith("v_accvgpr"): raise AssembleError(f"{what}: an AccVGPR is not allowed here")
      f[field] = o.idx

  def _check_nsa(self, name: str, et, f: dict) -> None:
    """An NSA address list holds as many VGPRs as the opcode, DIM and A16 need, laid out as the encoding stores them:
    VADDR, then one register each, the last a range for the rest (mimg.nsa_layout; llvm-mc-19: "image address
    size does not match dim and a16")."""
    count = mimg_address_count(et, f[et.layout["op"]], f)
    if f["_nsa_sizes"] != [1] + nsa_layout(count):
      raise AssembleError(f"{name}: the address list has {sum(f['_nsa_sizes'])} VGPRs {f['_nsa_sizes']}, this opcode and "
                          f"dim need {count} (as [1] + {nsa_layout(count)} registers)")

  def _th(self, name: str, val: str) -> int:
    kind = "atomic" if "_atomic" in name else "store" if "_store" in name else "load"
    for key, text in sorted(self.t.th_names.get(kind, {}).items()):
      if text == val: return key
    return int(val.rsplit("_", 1)[-1], 0)

  def smem_offset_field(self, name: str, value: int) -> int:
    """An SMEM immediate offset as its field: signed, 21 bits on gfx11 and 24 bits on gfx12 (whose SMEM encoding has
    the th field), the ranges llvm-mc-19 accepts ("expected a 21-bit signed offset")."""
    bits = 24 if "th" in self.t.encodings["SMEM"].field_names else 21
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
      raise AssembleError(f"{name}: offset {value:#x} is not a {bits}-bit signed offset")
    return value & ((1 << bits) - 1)

  def _smem_offset(self, text: str, f, name: str):
    parts = text.split()
    o = self._op(parts[0])
    if "imm" in self.t.encodings["SMEM"].field_names:
      # gfx9: IMM=1 takes OFFSET as bytes; an SGPR offset goes in OFFSET[6:0] with IMM=0, or in SOFFSET (SOFFSET_EN)
      # when an immediate offset comes with it ("s2 offset:0x10")
      if o.kind == "int": f["offset"], f["imm"] = self.smem_offset_field(name, o.value), 1
      else:
        code = _scalar_code(o, "offset")
        extra = [p for p in parts[1:] if p.startswith("offset:")]
        if extra: f["soffset"], f["soffset_en"], f["imm"] = code, 1, 1
        else: f["offset"], f["_smem_sgpr"] = code, code    # an offset: modifier may follow (_modifiers)
        for p in extra: f["offset"] = self.smem_offset_field(name, int(p[7:], 0))
      return
    if o.kind == "int": f["offset"] = self.smem_offset_field(name, o.value)
    else:
      f["soffset"] = _scalar_code(o, "soffset")
      for p in parts[1:]:
        if p.startswith("offset:"): f["offset"] = self.smem_offset_field(name, int(p[7:], 0))

  def _sendmsg(self, text: str, table: dict) -> int:
    if text.startswith("sendmsg(") and text.endswith(")"):
      inner = text[8:-1]
      if inner in table: return table[inner]
      raise AssembleError(f"unknown message {inner!r}")
    return int(text, 0)

  def _simm16(self, kind: str, text: str, name: str) -> int:
    if kind == "waitcnt":
      gfx9 = self.t.saddr_off == _SADDR_OFF_GFX9
      vals = {"vmcnt": 0x3f, "expcnt": 7, "lgkmcnt": 0xf if gfx9 else 0x3f}
      if re.fullmatch(r"-?\d+|0x[0-9a-fA-F]+", text): return int(text, 0) & 0xffff
      for m in re.finditer(r"(\w+)\((\d+)\)", text):
        if m.group(1) not in vals: raise AssembleError(f"{name}: unknown counter {m.group(1)}")
        vals[m.group(1)] = int(m.group(2))
      return waitcnt_simm16_gfx9(**vals) if gfx9 else waitcnt_simm16(**vals)
    if kind == "delay_alu":
      if re.fullmatch(r"\d+|0x[0-9a-fA-F]+", text): return int(text, 0)
      v = 0
      for m in re.finditer(r"(\w+)\((\w+)\)", text):
        key, val = m.group(1), m.group(2)
        if key == "instid0": v |= _INSTID[val]
        elif key == "instskip": v |= _INSTSKIP[val] << 4
        elif key == "instid1": v |= _INSTID[val] << 7
        else: raise AssembleError(f"{name}: unknown field {key}")
      return v
    if kind == "sendmsg": return self._sendmsg(text, self._msg)
    if name in ("s_waitcnt_depctr", "s_wait_alu") and not re.fullmatch(r"-?\d+|0x[0-9a-fA-F]+", text):
      counts = {}
      for m in re.finditer(r"(\w+)\((\d+)\)", text):
        if not m.group(1).startswith("depctr_"): raise AssembleError(f"{name}: unknown counter {m.group(1)}")
        counts[m.group(1)[len("depctr_"):]] = int(m.group(2))
      return depctr_simm16(**counts)
    if kind == "hwreg":
      m = re.fullmatch(r"hwreg\((\w+)(?:, (\d+), (\d+))?\)", text)
      if not m: return int(text, 0)
      rid = self._hwreg.get(m.group(1))
      if rid is None: rid = int(m.group(1))
      off, size = (int(m.group(2)), int(m.group(3))) if m.group(2) else (0, 32)
      return rid | off << 6 | (size - 1) << 11
    if re.fullmatch(r"[A-Za-z_.$][\w.$]*", text):  # a label: branch distance in dwords from the next instruction
      if self.labels is None: return 0                 # first pass: sizes only
      if text not in self.labels: raise AssembleError(f"{name}: undefined label {text!r}")
      delta = self.labels[text] - (self.pc + 4)
      if delta % 4: raise AssembleError(f"{name}: label {text!r} is not dword aligned")
      v = delta // 4
      if not -0x8000 <= v <= 0x7fff: raise AssembleError(f"{name}: label {text!r} is out of branch range")
      return v & 0xffff
    v = int(text, 0)
    if not -0x8000 <= v <= 0xffff: raise AssembleError(f"{name}: immediate {v} does not fit 16 bits")
    return v & 0xffff

  def _modifiers(self, name, enc, f, mods, dpp) -> int | None:
    dpp_ctrl = None
    dpp8 = None
    d = dict(row_mask=0xf, bank_mask=0xf, bc=0, fi=0)
    nsrc = sum(1 for k in ("src0", "src1", "src2") if k in f or k in ("src0",))
    for m in mods:
      key, _, val = m.partition(":")
      if key in ("glc", "slc", "dlc", "gds", "tfe", "offen", "idxen", "sc0", "sc1", "nt", "nv") and not val: f[key] = 1
      elif key == "clamp": f["clmp"] = 1
      elif key == "mul": f["omod"] = {"2": 1, "4": 2}[val]
      elif key == "div": f["omod"] = 3
      elif key == "offset":
        v = _swizzle_offset(val) if val.startswith("swizzle(") else int(val, 0)
        if enc in ("VFLAT", "VGLOBAL", "VSCRATCH", "VBUFFER"):
          if not -(1 << 23) <= v < (1 << 23): raise AssembleError(f"{name}: offset {v} out of range (24-bit signed)")
          f["ioffset"] = v & 0xffffff
        elif enc == "DS":
          if not 0 <= v <= 0xffff: raise AssembleError(f"{name}: offset {v} out of range (0..65535)")
          f["offset0"], f["offset1"] = v & 0xff, v >> 8
        elif enc in ("GLOBAL", "SCRATCH"):
          if not -4096 <= v <= 4095: raise AssembleError(f"{name}: offset {v} out of range (-4096..4095)")
          f["offset"] = v & 0x1fff
        elif enc == "FLAT":
          if not 0 <= v <= 4095: raise AssembleError(f"{name}: offset {v} out of range (0..4095)")
          f["offset"] = v
        elif enc == "SMEM":
          f["offset"] = self.smem_offset_field(name, v)
          if "imm" in self.t.encodings["SMEM"].field_names:    # gfx9 "sN offset:X": the SGPR goes to SOFFSET
            f["imm"] = 1
            if "_smem_sgpr" in f: f["soffset"], f["soffset_en"] = f.pop("_smem_sgpr"), 1
        else:
          if not 0 <= v <= 4095: raise AssembleError(f"{name}: offset {v} out of range (0..4095)")
          f["offset"] = v
      elif key in ("offset0", "offset1"):
        v = int(val, 0)
        if not 0 <= v <= 255: raise AssembleError(f"{name}: {key} {v} out of range (0..255)")
        f[key] = v
      elif key == "op_sel":
        bits = _bits(val)
        if enc == "VOP3":
          n = val.count(",")  # entries - 1 = number of sources
          f["opsel"] = (bits & ((1 << n) - 1)) | ((bits >> n) & 1) << 3
        else: f["opsel"] = bits
      elif key == "op_sel_hi":
        bits = _bits(val) | (0b111 << (val.count(",") + 1)) & 0b111  # sources not listed keep the default 1
        f["opsel_hi"], f["opsel_hi2"] = bits & 3, bits >> 2 & 1
      elif key == "neg_lo": f["neg"] = _bits(val)
      elif key == "neg_hi": f["neg_hi"] = _bits(val)
      elif key == "format":
        name_ = val.strip("[]")
        f["format"] = self._fmt[name_] if name_ in self._fmt else int(name_, 0)
      elif key == "wait_exp": f["waitexp"] = int(val)
      elif key == "dmask": f["dmask"] = int(val, 0)
      elif key == "th": f["th"] = self._th(name, val) & 7
      elif key == "scope":
        f["scope"] = {v_: k for k, v_ in self.t.scope_names.items()}.get(val, None)
        if f["scope"] is None: raise AssembleError(f"{name}: unknown scope {val!r}")
      elif key == "dim":
        dims = ("1D", "2D", "3D", "CUBE", "1D_ARRAY", "2D_ARRAY", "2D_MSAA", "2D_MSAA_ARRAY")
        f["dim"] = dims.index(val.replace("SQ_RSRC_IMG_", ""))
      elif key in ("unorm", "r128", "a16", "lwe", "d16") and not val: f["unrm" if key == "unorm" else key] = 1
      elif key == "wait_vdst": f["waitvdst"] = int(val)
      elif key == "quad_perm":
        b = [int(x) for x in val.strip("[]").split(",")]
        dpp_ctrl = b[0] | b[1] << 2 | b[2] << 4 | b[3] << 6
      elif key in ("row_shl", "row_shr", "row_ror", "row_share", "row_xmask"):
        base = {"row_shl": 0x100, "row_shr": 0x110, "row_ror": 0x120, "row_share": 0x150, "row_xmask": 0x160}[key]
        dpp_ctrl = base + int(val, 0)
      elif key == "row_mirror": dpp_ctrl = 0x140
      elif key == "row_half_mirror": dpp_ctrl = 0x141
      elif key in ("row_mask", "bank_mask"): d[key] = int(val, 0)
      elif key == "bound_ctrl": d["bc"] = 1
      elif key == "fi": d["fi"] = int(val)
      elif key == "dpp8":
        sel = [int(x) for x in val.strip("[]").split(",")]
        dpp8 = sum(s_ << (3 * i) for i, s_ in enumerate(sel))
      else:
        raise AssembleError(f"{name}: unknown modifier {m!r}")
    if dpp8 is not None:
      src0 = f.get("src0", 256)
      f["src0"] = 234 if d["fi"] else 233
      return (src0 - 256) & 0xff | dpp8 << 8
    if dpp_ctrl is not None or dpp:
      src0 = f.get("src0", 256)
      f["src0"] = 250
      neg, abs_ = f.pop("neg", 0), f.pop("abs", 0)
      if enc in ("VOP3", "VOP3SD", "VOP3P"): f["neg"], f["abs"] = neg, abs_
      ctrl = dpp_ctrl or 0
      word = (src0 - 256) & 0xff | ctrl << 8 | d["fi"] << 18 | d["bc"] << 19 | d["row_mask"] << 28 | d["bank_mask"] << 24
      if enc not in ("VOP3", "VOP3SD", "VOP3P"):
        word |= (neg & 1) << 20 | (abs_ & 1) << 21 | (neg >> 1 & 1) << 22 | (abs_ >> 1 & 1) << 23
      return word
    return None

  def _sdwa(self, name: str, ops: list[str], mods: list[str]) -> bytes:
    """A gfx9 SDWA instruction (src0 = 0xf9, then the SDWA dword: decode._SDWA_FIELDS): the VOP1/VOP2/VOPC form of
    the name without _sdwa; sources may be SGPRs or constants (S0/S1) with sext/neg/abs, a VOPC may name an SGPR
    pair destination (SD) instead of vcc, and the selects and dst_unused come as modifiers."""
    base = name[:-len("_sdwa")]
    hit = self.t.by_name.get(base + "_e32") or self.t.by_name.get(base)
    if hit is None or hit[0] not in ("VOP1", "VOP2", "VOPC"): raise AssembleError(f"unknown {self.arch} mnemonic {name!r}")
    enc, opcode = hit
    et = self.t.encodings[enc]
    template = et.ops[opcode][2]
    f = {et.layout["op"]: opcode, "src0": SDWA_SRC0}
    # selects default to DWORD; VOPC has SDST/SD where VOP1/VOP2 have DST_SEL/DST_UNUSED/CLAMP/OMOD
    d = {"src0_sel": 6, "src1_sel": 6} if enc == "VOPC" else {"dst_sel": 6, "dst_u": 0, "src0_sel": 6, "src1_sel": 6}
    if len(ops) != len(template): raise AssembleError(f"{name}: expected {len(template)} operands, got {len(ops)}")
    for t, text in zip(template, ops):
      if t[0] == "text":          # VOPC's vcc, or the SGPR pair SD names
        if text != t[1]: d["sdst"], d["sd"] = _scalar_code(self._op(text), f"{name} sdst"), 1
        continue
      field = t[1]
      if field in ("src0", "vsrc1"):
        i = 0 if field == "src0" else 1
        sext = text.startswith("sext(") and text.endswith(")")
        o = self._op(text[5:-1] if sext else text)
        d[f"src{i}_sext"], d[f"src{i}_neg"], d[f"src{i}_abs"] = int(sext), int(o.neg), int(o.abs)
        if o.kind == "reg" and o.cls == "v": value = o.idx
        else: value, d[f"s{i}"] = _source_code(o, False, _NoLiteral, f"{name} {field}", False, False), 1
        if i == 0: d["src0"] = value
        else: f["vsrc1"] = value
      else:
        o = self._op(text)
        if o.kind != "reg" or o.cls != "v": raise AssembleError(f"{name} {field}: expected a VGPR, got {text!r}")
        f[field] = o.idx
    sels = {n: i for i, n in enumerate(("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD"))}
    for m in mods:
      key, _, val = m.partition(":")
      vop = enc != "VOPC"
      if key in ("src0_sel", "src1_sel") and val in sels: d[key] = sels[val]
      elif key == "dst_sel" and vop and val in sels: d[key] = sels[val]
      elif key == "dst_unused" and vop and val in _SDWA_UNUSED: d["dst_u"] = _SDWA_UNUSED[val]
      elif key == "clamp" and vop and not val: d["clmp"] = 1
      elif key == "mul" and vop and val in ("2", "4"): d["omod"] = {"2": 1, "4": 2}[val]
      elif key == "div" and vop and val == "2": d["omod"] = 3
      else: raise AssembleError(f"{name}: unknown SDWA modifier {m!r}")
    from .decode import _SDWA_FIELDS
    word = 0
    for fname, lo, mask in _SDWA_FIELDS:
      if fname in d: word |= (d[fname] & mask) << lo
    return encode_fields(et, f, what=name) + word.to_bytes(4, "little")

  def _vopd(self, text: str) -> bytes:
    xtext, _, ytext = text.partition(" :: ")
    et = self.t.encodings["VOPD"]
    f: dict[str, int] = {}
    lit = _Literal()
    self._f16hex = frozenset()
    for side, part, table in (("x", xtext, self.t.vopd_x), ("y", ytext, self.t.vopd_y)):
      name, ops, mods = _split(part)
      hit = [op for op, (n, _) in table.items() if n == name]
      if not hit: raise AssembleError(f"unknown VOPD {side.upper()} opcode {name!r}")
      f["op" + side] = hit[0]
      template = table[hit[0]][1]
      used = self._operands(name, "VOPD", template, ops, f, lit, frozenset())
      if used != len(ops): raise AssembleError(f"{name}: expected {used} operands, got {len(ops)}")
    out = encode_fields(et, f)
    if lit.value is not None: out += lit.value.to_bytes(4, "little")
    return out

  def _encode(self, enc: str, f: dict) -> bytes:
    return encode_fields(self.t.encodings[enc], f)

  def _ldsdir(self, text: str) -> bytes:
    # LDSDIR (RDNA3 ISA 16.5): lds_param_load vN, attrA.C wait_vdst:W | lds_direct_load vN wait_vdst:W
    m = re.fullmatch(r"(lds_param_load|lds_direct_load) v(\d+)(?:, attr(\d+)\.([xyzw]))?(?: wait_vdst:(\d+))?", text)
    if not m: raise AssembleError(f"cannot parse {text!r}")
    op = [o for o, e in self.t.encodings["LDSDIR"].ops.items() if e[0] == m.group(1)][0]
    f = dict(op=op, vdst=int(m.group(2)), attr=int(m.group(3) or 0), attr_chan="xyzw".index(m.group(4) or "x"),
             waitvdst=int(m.group(5) or 0))
    return self._encode("LDSDIR", f)

  def _exp(self, text: str) -> bytes:
    # EXP (RDNA3 ISA 16.9): exp TARGET src0, src1, src2, src3 [done] [row_en]
    m = re.fullmatch(r"exp (\w+) (\S+), (\S+), (\S+), (\S+)((?: done| row_en)*)", text)
    if not m: raise AssembleError(f"cannot parse {text!r}")
    names = {**{f"mrt{i}": i for i in range(8)}, "mrtz": 8, **{f"pos{i}": 12 + i for i in range(5)}, "prim": 20,
             "dual_src_blend0": 21, "dual_src_blend1": 22}
    tgt = m.group(1)
    target = names[tgt] if tgt in names else int(tgt[len("invalid_target_"):]) if tgt.startswith("invalid_target_") else None
    if target is None: raise AssembleError(f"unknown export target {tgt!r}")
    f = dict(target=target, done=int("done" in m.group(6)), row=int("row_en" in m.group(6)))
    for i in range(4):
      src = m.group(2 + i)
      if src != "off":
        f["en"] = f.get("en", 0) | 1 << i
        f[f"vsrc{i}"] = int(src[1:])
    return self._encode("EXP", f)

  labels: dict[str, int] | None = {}
  pc = 0

  def assemble(self, text: str) -> bytes:
    """Assemble lines of text; `name:` lines define labels that branch instructions (s_branch, s_cbranch_*) may
    name as their target. Two passes: sizes (labels unknown), then encoding."""
    lines = []
    for lineno, line in enumerate(text.splitlines(), 1):
      code = re.split(r"//|;", line, maxsplit=1)[0].strip()
      while re.match(r"^[A-Za-z_.$][\w.$]*:", code):
        label, _, code = code.partition(":")
        lines.append((lineno, label.strip() + ":"))
        code = code.strip()
      if code and not code.startswith("."): lines.append((lineno, code))
    return self.assemble_items(lines)

  def assemble_items(self, items) -> bytes:
    """The two passes over (line, item) pairs: an item is one instruction's text, a `name:` label, or an instruction
    already encoded (bytes, copied as they are: branches around it count its size). `line` is what errors name (a
    text line number, an INS position). What assemble() and a PROGRAM of INS UOps (program.py) both end in."""
    labels: dict[str, int] = {}
    for final in (False, True):
      self.labels = labels if final else None
      out = bytearray()
      for lineno, code in items:
        if isinstance(code, (bytes, bytearray)):
          out += code
          continue
        if code.endswith(":") and " " not in code:
          if not final:
            if code[:-1] in labels: raise AssembleError(f"label {code[:-1]!r} defined twice", lineno, code)
            labels[code[:-1]] = len(out)
          continue
        self.pc = len(out)
        try:
          out += self.assemble_line(code)
        except AssembleError as e:
          raise AssembleError(str(e).split(" (line ")[0], lineno, code) from None
        except (KeyError, ValueError, IndexError) as e:
          raise AssembleError(f"cannot assemble: {type(e).__name__}: {e}", lineno, code) from None
    self.labels = {}
    return bytes(out)


def assemble(text: str, arch: str = "gfx1100") -> bytes:
  """Assemble LLVM-syntax text (one instruction per line) into machine code."""
  return Assembler(arch).assemble(text)


# --------------------------------------------------------------------------------------------------------- DSL
class Reg:
  __slots__ = ("cls", "idx", "count")

  def __init__(self, cls: str, idx: int, count: int = 1):
    self.cls, self.idx, self.count = cls, idx, count

  def __str__(self) -> str:
    return f"{self.cls}{self.idx}" if self.count == 1 else f"{self.cls}[{self.idx}:{self.idx + self.count - 1}]"

  def __neg__(self) -> "_Mod": return _Mod(f"-{self}")
  def __abs__(self) -> "_Mod": return _Mod(f"|{self}|")


class _Mod(str):
  def __neg__(self): return _Mod(f"-{self}")


class _RegFile:
  def __init__(self, cls: str): self.cls = cls

  def __getitem__(self, key) -> Reg:
    if isinstance(key, slice): return Reg(self.cls, key.start, key.stop - key.start + 1)   # s[0:1] = s0..s1
    return Reg(self.cls, key)


v, s, ttmp = _RegFile("v"), _RegFile("s"), _RegFile("ttmp")
vcc_lo, vcc, exec_lo, exec_, m0, null, off = "vcc_lo", "vcc", "exec_lo", "exec", "m0", "null", "off"


def _operand_text(x) -> str:
  if isinstance(x, bool): raise AssembleError("a bool is not an operand")
  if isinstance(x, int): return str(x) if -16 <= x <= 64 else hex(x)
  if isinstance(x, float):
    for code, t in INLINE_FLOAT_TEXT.items():
      if float(t) == x and code != 248: return t
    return hex(struct.unpack("<I", struct.pack("<f", x))[0])
  return str(x)


class Asm:
  """Instruction builder: every attribute is a mnemonic; call it with operands (Reg, int, float, str) and keyword
  modifiers (offset=16, glc=True, clamp=True, op_sel=[0,1,0])."""

  def __init__(self, arch: str = "gfx1100"):
    self._asm = Assembler(arch)
    self.lines: list[str] = []
    self._code: bytes | None = b""

  def emit(self, line: str) -> bytes:
    """Append one instruction (LLVM syntax); it is checked now (errors name it), branches to labels are resolved
    when `code` is read. Returns its encoding (a label operand still 0)."""
    self._asm.labels = None
    try:
      data = self._asm.assemble_line(line)
    finally:
      self._asm.labels = {}
    self.lines.append(line)
    self._code = None
    return data

  def label(self, name: str) -> None:
    """Define a branch target at the current position: a.label("loop"); ...; a.s_cbranch_scc1("loop")."""
    self.lines.append(f"{name}:")
    self._code = None

  def __getattr__(self, name: str):
    if name.startswith("_"): raise AttributeError(name)

    def build(*operands, **mods):
      text = name + (" " + ", ".join(_operand_text(o) for o in operands) if operands else "")
      for k, val in mods.items():
        if val is True: text += f" {k}"
        elif val is False or val is None: continue
        elif isinstance(val, (list, tuple)): text += f" {k}:[{','.join(str(int(b)) for b in val)}]"
        else: text += f" {k}:{val}"
      return self.emit(text)
    return build

  @property
  def code(self) -> bytes:
    if self._code is None: self._code = self._asm.assemble("\n".join(self.lines))
    return self._code

  @property
  def text(self) -> str: return "\n".join(self.lines)

  @property
  def arch(self) -> str:
    """The target these instructions are assembled for (backend/amd/program.program(name, asm, ...) reads it)."""
    return self._asm.arch
