"""Encoding of allocated machine instructions (isel_mir.MInst) into RDNA3 / RDNA4 / CDNA3 machine code bytes with the
ISA helper's generated tables (hcq.autogen.isa.<arch> via tables.arch_tables).

Every instruction goes through a *plan* made once per shape (mnemonic, operand fields, modifier names) and target:
the word with the opcode, the encoding's identifying bits and the fields every such instruction has the same value
in, then (bit position, mask, how to read the operand) per operand field, and which modifier fields (memory offsets,
simm16, neg) are filled from the instruction. Encoding an instruction is then one pass over its operands, each value
still range-checked against its field. Anything unusual (a value out of its field's range, a field the layout lacks,
a field given twice) takes the general path, _encode_checked: the operands as a dict of field values packed by the
assembler's encode_fields (asm.py), which raises the error naming the instruction, field and value. Both give the same
bytes (tests/backend/test_amd_codegen_golden.py pins them; tests/backend/test_amd_encode.py compares the two).
"""
from __future__ import annotations

from ...ir import CompileError
from .isel_common import inline_code, is_inline, operand_kind
from .isel_mir import NULL, Imm, MInst, Spec, Sub, VReg
from ...isa.amd.asm import encode_fields
from ...isa.amd.errors import AssembleError
from ...isa.amd.tables import arch_tables

SRC9 = ("src0", "src1", "src2", "ssrc0", "ssrc1")
_SRC, _SBASE, _REG = 0, 1, 2                         # how a plan reads an operand field
_NONE, _DS, _FLAT, _VFLAT, _SMEM = range(5)          # which offset field a plan fills from mods["offset"]
_MISSING = object()
# operand kind -> {32-bit pattern: its inline-constant code, or _LITERAL} (isel_common.inline_code, once per pattern)
_INLINE: dict[str, dict[int, int]] = {"int": {}, "f32": {}, "f16": {}, "f64": {}}
_LITERAL, _INLINE_MAX = -1, 1 << 16
# per target: the plans (shape -> plan or None for the general path) and the per-mnemonic facts, shared by every
# Encoder of that target (the tables they come from do not change)
_SHARED: dict[str, tuple[dict, dict, dict]] = {}


class Encoder:
  """MInst -> bytes for one target (gfx1100 and the targets renamed from it: gfx1200, gfx942)."""
  def __init__(self, arch: str = "gfx1100"):
    self.arch, self.t = arch, arch_tables(arch)
    self.gfx12, self.gfx9 = arch == "gfx1200", arch == "gfx942"
    shared = _SHARED.get(arch)
    if shared is None: shared = _SHARED[arch] = ({}, {}, {})
    # shape -> plan; name -> (encoding size, operand kind); name -> (encoding, table, constant fields, kind, renames)
    self._plans, self._sizes, self._info = shared

  def lookup(self, name: str) -> tuple[str, int]:
    try: return self.t.by_name[name]
    except KeyError: raise CompileError(f"{self.arch}: no instruction {name!r} in the ISA tables") from None

  def _size_kind(self, name: str) -> tuple[int, str]:
    sk = self._sizes.get(name)
    if sk is None:
      sk = self._sizes[name] = (self.t.layouts[self.lookup(name)[0]]["size"], operand_kind(name))
    return sk

  def _src(self, x, lits: list, kind: str) -> int:
    c = x.__class__
    if c is Imm:
      code = inline_code(x, kind)
      if code is not None: return code
      if lits and lits[0] != x.bits: raise CompileError(f"{self.arch}: two different literals in one instruction")
      if not lits: lits.append(x.bits)
      return 255
    if c is Sub: return x.reg.phys + x.k + (256 if x.reg.cls == "v" else 0)
    if c is VReg: return x.phys + (256 if x.cls in "va" else 0)
    if c is Spec: return x.code
    raise CompileError(f"{self.arch}: bad operand {x!r}")

  def _reg(self, x) -> int:
    if isinstance(x, Sub): return x.reg.phys + x.k
    if isinstance(x, VReg): return x.phys
    if isinstance(x, Spec): return x.code
    raise CompileError(f"{self.arch}: {x!r} where a register is needed")

  def size(self, m: MInst) -> int:
    size, kind = self._size_kind(m.name)
    for f, v in m.uses.items():
      if f in SRC9 and isinstance(v, Imm) and not is_inline(v, kind): return size + 4
    return size

  def encode(self, m: MInst, simm16: int | None = None) -> bytes:
    """The instruction's bytes by its shape's plan (the general path where the plan says so or a value does not fit
    its field: that path raises the error)."""
    mods, defs, uses = m.mods, m.defs, m.uses
    key = (m.name, *defs, 0, *uses, 0, *mods)
    plan = self._plans.get(key, _MISSING)
    if plan is _MISSING: plan = self._plans[key] = self._plan(m)
    if plan is None: return self._encode_checked(m, simm16)
    word, fops, kind, size, mk, mlo, neg, simm_lo = plan
    lits: list = []
    for (conv, lo, mask), x in zip(fops, (*defs.values(), *uses.values())):
      c = x.__class__
      if c is VReg:   # (conv: 0 _SRC, 1 _SBASE, 2 _REG, as constants: a global read per operand costs more)
        v = x.phys
        # a VGPR source is 256 + its number; so is an AccVGPR's (v_accvgpr_read_b32: MI300 ISA VOP3P SRC0)
        if conv == 0:
          if x.cls in "va": v += 256
        elif conv == 1: v >>= 1
      elif c is Imm and conv == 0:
        inline = _INLINE[kind]
        v = inline.get(x.bits)
        if v is None:
          if len(inline) >= _INLINE_MAX: inline.clear()   # (a long-lived process's many literals: start over)
          v = inline[x.bits] = inline_code(x, kind) or _LITERAL   # (inline codes are never 0)
        if v == _LITERAL:
          if lits and lits[0] != x.bits: return self._encode_checked(m, simm16)   # (its error: two literals)
          if not lits: lits.append(x.bits)
          v = 255
      elif conv == _SRC: v = self._src(x, lits, kind)
      elif conv == _SBASE: v = x.phys >> 1
      else: v = self._reg(x)
      if v < 0 or v > mask: return self._encode_checked(m, simm16)
      word |= v << lo
    if mk:
      off = mods.get("offset", 0)
      if mk == _DS:
        if not 0 <= off <= 0xFFFF: return self._encode_checked(m, simm16)
        word |= (off & 0xFF) << mlo[0] | (off >> 8) << mlo[1]
      elif mk == _FLAT:
        if not -4096 <= off <= 4095: return self._encode_checked(m, simm16)
        word |= (off & 0x1FFF) << mlo[0]
      elif mk == _VFLAT:
        if not -(1 << 23) <= off < 1 << 23: return self._encode_checked(m, simm16)
        word |= (off & 0xFFFFFF) << mlo[0]
        if mods.get("volatile"): word |= 3 << mlo[1]
      else:
        if self.gfx12:
          if not -(1 << 23) <= off < 1 << 23: return self._encode_checked(m, simm16)
          v = off & 0xFFFFFF
        else: v = off & 0x1FFFFF
        if v > mlo[1]: return self._encode_checked(m, simm16)
        word |= v << mlo[0]
    if neg is not None:
      v = mods["neg"]
      if v < 0 or v > neg[1]: return self._encode_checked(m, simm16)
      word |= v << neg[0]
    if simm_lo is not None: word |= ((simm16 if simm16 is not None else mods.get("simm16", 0)) & 0xFFFF) << simm_lo
    out = word.to_bytes(size, "little")
    if lits: out += lits[0].to_bytes(4, "little")
    return out

  def _plan(self, m: MInst):
    """The plan of m's shape (see the module's doc), or None where only the general path encodes it as it should."""
    enc, et, base, kind, renames = self._facts(m.name)
    fmap = {f: (lo, mask) for f, lo, mask in et.fields}
    const = dict(base)
    if enc in ("SCRATCH", "VSCRATCH") and "addr" in m.uses: const["sve"] = 1
    if enc == "SMEM" and self.gfx9 and "soffset" in m.uses: const["soffset_en"] = 1
    seen: set = set()
    dops, uops = [], []
    for ops, out in ((m.defs, dops), (m.uses, uops)):
      for f in ops:
        conv = _SRC if f in SRC9 else _SBASE if f == "sbase" else _REG
        name = renames.get(f, f) if renames and conv == _REG else f
        if name in seen or name not in fmap: return None
        seen.add(name)
        const.pop(name, None)
        out.append((conv, *fmap[name]))
    mk, mlo, neg, simm_lo = _NONE, None, None, None
    derived = []     # (field, the least mask the plan's values need)
    if enc == "DS": mk, derived = _DS, [("offset0", 0xFF), ("offset1", 0xFF)]
    elif enc in ("GLOBAL", "SCRATCH"): mk, derived = _FLAT, [("offset", 0x1FFF)]
    elif enc in ("VGLOBAL", "VSCRATCH"):
      mk, derived = _VFLAT, [("ioffset", 0xFFFFFF)] + ([("scope", 3)] if "volatile" in m.mods else [])
    elif enc == "SMEM": mk, derived = _SMEM, [("offset", 0)]
    if "neg" in m.mods: derived.append(("neg", 0))
    if enc in ("SOPP", "SOPK"): derived.append(("simm16", 0xFFFF))
    for name, need in derived:
      if name in seen or name not in fmap or fmap[name][1] < need: return None
      seen.add(name)
      const.pop(name, None)
    if mk == _DS: mlo = (fmap["offset0"][0], fmap["offset1"][0])
    elif mk == _FLAT: mlo = (fmap["offset"][0],)
    elif mk == _VFLAT: mlo = (fmap["ioffset"][0], fmap["scope"][0] if "volatile" in m.mods else None)
    elif mk == _SMEM: mlo = fmap["offset"]
    if "neg" in m.mods: neg = fmap["neg"]
    if enc in ("SOPP", "SOPK"): simm_lo = fmap["simm16"][0]
    word = et.ident_word
    for name, v in const.items():
      if name not in fmap or not 0 <= v <= fmap[name][1]: return None
      word |= v << fmap[name][0]
    return word, tuple(dops + uops), kind, et.size, mk, mlo, neg, simm_lo

  def _facts(self, name: str) -> tuple:
    """(encoding, its table, the fields every instruction of this name has the same value in, operand kind, the
    target's field names for instruction selection's where they differ)."""
    info = self._info.get(name)
    if info is None:
      enc, op = self.lookup(name)
      et = self.t.encodings[enc]
      base = {et.layout["op"]: op}   # the fields every instruction of this name has the same value in
      if enc in ("GLOBAL", "SCRATCH", "VGLOBAL", "VSCRATCH"): base["saddr"] = self.t.saddr_off if self.gfx9 else NULL
      # VOP3P's OPSEL_HI defaults to 1 for every source (as the text assembler and llvm-mc-19 encode it; the
      # mixed-precision v_fma_mix* aside): v_accvgpr_read/write_b32 on gfx942
      if enc == "VOP3P" and not name.startswith("v_fma_mix"): base["opsel_hi"], base["opsel_hi2"] = 3, 1
      if enc == "SMEM":
        if self.gfx9: base["imm"] = 1   # CDNA3 SMEM: IMM=1 takes the offset (there is no null SGPR on gfx9)
        else: base["soffset"] = NULL
      info = self._info[name] = (enc, et, base, self._size_kind(name)[1],
                                   _GFX12_FIELDS if enc in ("VGLOBAL", "VSCRATCH") else None)
    return info

  def _encode_checked(self, m: MInst, simm16: int | None = None) -> bytes:
    """The general path: the MInst's operands as a dict of field values, packed and checked by the assembler's
    encode_fields (one encoder core for both); it raises the errors that name what is wrong."""
    enc, et, base, kind, renames = self._facts(m.name)
    vals: dict[str, int] = dict(base)
    lits: list[int] = []
    if enc in ("SCRATCH", "VSCRATCH") and "addr" in m.uses: vals["sve"] = 1
    if enc == "SMEM" and self.gfx9 and "soffset" in m.uses: vals["soffset_en"] = 1   # SOFFSET_EN adds an SGPR
    for ops in (m.defs, m.uses):
      for f, x in ops.items():
        if f in SRC9:
          # a VGPR source is 256 + its number; so is an AccVGPR's (v_accvgpr_read_b32: MI300 ISA VOP3P SRC0)
          vals[f] = x.phys + (256 if x.cls in "va" else 0) if x.__class__ is VReg else self._src(x, lits, kind)
        elif f == "sbase": vals[f] = x.phys >> 1
        else: vals[renames.get(f, f) if renames else f] = x.phys if x.__class__ is VReg else self._reg(x)
    off = m.mods.get("offset", 0)
    if enc == "DS":
      if not 0 <= off <= 0xFFFF: raise CompileError(f"{self.arch}: LDS offset {off} out of range in {m!r}")
      vals["offset0"], vals["offset1"] = off & 0xFF, off >> 8
    elif enc in ("GLOBAL", "SCRATCH"):
      if not -4096 <= off <= 4095: raise CompileError(f"{self.arch}: global offset {off} out of range in {m!r}")
      vals["offset"] = off & 0x1FFF
    elif enc in ("VGLOBAL", "VSCRATCH"):   # RDNA4 ISA VGLOBAL/VSCRATCH: IOFFSET [95:72], signed 24 bits
      if not -(1 << 23) <= off < 1 << 23: raise CompileError(f"{self.arch}: global offset {off} out of range in {m!r}")
      vals["ioffset"] = off & 0xFFFFFF
      # TH [54:52] / SCOPE [51:50]: a volatile access goes to the system scope (AMDGPUUsage, "Memory Model GFX12":
      # volatile loads/stores use SCOPE_SYS), others keep TH_RT / SCOPE_CU (0), as clang-19 emits plain accesses
      if m.mods.get("volatile"): vals["scope"] = 3
    elif enc == "SMEM":
      if self.gfx12 and not -(1 << 23) <= off < 1 << 23:
        raise CompileError(f"{self.arch}: scalar offset {off} out of range in {m!r}")
      vals["offset"] = off & (0xFFFFFF if self.gfx12 else 0x1FFFFF)
    if "neg" in m.mods: vals["neg"] = m.mods["neg"]      # VOP3 source negation, one bit per source
    if enc in ("SOPP", "SOPK"):
      vals["simm16"] = (simm16 if simm16 is not None else m.mods.get("simm16", 0)) & 0xFFFF
    try: out = encode_fields(et, vals, strict=True)
    except AssembleError as e: raise CompileError(f"{self.arch}: {e} in {m!r}") from None
    if lits: out += lits[0].to_bytes(4, "little")
    return out


# gfx1200's VGLOBAL/VSCRATCH field names for the gfx11 ones instruction selection fills
_GFX12_FIELDS = {"addr": "vaddr", "data": "vsrc"}
