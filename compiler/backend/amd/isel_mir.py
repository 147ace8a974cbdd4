"""The machine IR between instruction selection and encoding: RDNA3 instructions over virtual registers.

    Sub(vreg, k)        register k of a multi-register VReg (used as a 32-bit source)
    VReg(cls, n)        a virtual register: cls "v" (per-lane VGPR) or "s" (uniform SGPR), n consecutive registers
                        (2 for a 64-bit SGPR pair); `fixed` pins it to a physical register (kernel entry state)
    Imm(bits, kind)     a constant operand: the 32-bit pattern and how an instruction reads it ("int", "f32", "f16",
                        "f64": the high dword of an f64 whose low dword is 0), which decides between an inline constant
                        and a trailing literal
    Imm64(bits, kind)   the value of a 64-bit constant (int64/uint64 "int", float64 "f64") in instruction selection: used
                        by halves (.lo/.hi Imm) or made a 64-bit operand by isel_wide.WideSelector.pair
    Spec(code)          a special scalar operand by its encoding value (exec_lo 126, null 124, m0 125; operands.py)
    MInst(name, defs, uses, mods)
                        one instruction by its LLVM mnemonic (the ISA tables' name: "v_add_f32_e64", "s_load_b64",
                        "global_load_b32"); defs/uses map encoding fields ("vdst", "src0", "addr", ...) to operands;
                        mods holds immediates ("offset", "simm16") and, for branches, the target label.
                        Pseudo instructions: LABEL (mods["label"]).
"""
from __future__ import annotations

import itertools

from ...ir import Ops, UOp, dtypes

_ids = itertools.count()

EXEC_LO, VCC_LO, NULL, M0 = 126, 106, 124, 125


class VReg:
  __slots__ = ("cls", "n", "id", "fixed", "phys")

  def __init__(self, cls: str, n: int = 1, fixed: int | None = None):
    self.cls, self.n, self.id, self.fixed, self.phys = cls, n, next(_ids), fixed, fixed

  def __repr__(self):
    if self.phys is not None:
      return f"{self.cls}{self.phys}" if self.n == 1 else f"{self.cls}[{self.phys}:{self.phys + self.n - 1}]"
    return f"%{self.cls}{self.id}" + (f"x{self.n}" if self.n > 1 else "")


class Sub:
  """Register k of a multi-register VReg (a ds_load_b128 result read one dword at a time)."""
  __slots__ = ("reg", "k")

  def __init__(self, reg: VReg, k: int): self.reg, self.k = reg, k
  def __eq__(self, o): return isinstance(o, Sub) and o.reg is self.reg and o.k == self.k
  def __hash__(self): return hash((id(self.reg), self.k))
  def __repr__(self): return f"{self.reg!r}.{self.k}"


class Imm:
  __slots__ = ("bits", "kind")

  def __init__(self, bits: int, kind: str = "int"):
    self.bits, self.kind = bits & 0xFFFFFFFF, kind

  @property
  def signed(self) -> int: return self.bits - (1 << 32) if self.bits & 0x80000000 else self.bits

  def __eq__(self, o): return isinstance(o, Imm) and (o.bits, o.kind) == (self.bits, self.kind)
  def __hash__(self): return hash((self.bits, self.kind))
  def __repr__(self): return f"{self.signed}" if self.kind == "int" else f"0x{self.bits:x}:{self.kind}"


class Imm64:
  __slots__ = ("bits", "kind")

  def __init__(self, bits: int, kind: str = "int"):
    self.bits, self.kind = bits & 0xFFFFFFFFFFFFFFFF, kind

  @property
  def lo(self) -> Imm: return Imm(self.bits & 0xFFFFFFFF)
  @property
  def hi(self) -> Imm: return Imm(self.bits >> 32)
  @property
  def signed(self) -> int: return self.bits - (1 << 64) if self.bits >> 63 else self.bits

  def __eq__(self, o): return isinstance(o, Imm64) and (o.bits, o.kind) == (self.bits, self.kind)
  def __hash__(self): return hash(("imm64", self.bits, self.kind))
  def __repr__(self): return f"0x{self.bits:x}:{self.kind}64"


class Spec:
  __slots__ = ("code",)

  def __init__(self, code: int): self.code = code
  def __eq__(self, o): return isinstance(o, Spec) and o.code == self.code
  def __hash__(self): return hash(("spec", self.code))
  def __repr__(self): return {126: "exec_lo", 124: "null", 106: "vcc_lo", 125: "m0"}.get(self.code, f"spec{self.code}")


def _regs(ops: dict) -> list:
  """The VRegs among an instruction's operands (a Sub's register), in field order (exact type tests: the hottest
  helper of the passes after selection)."""
  out = []
  for v in ops.values():
    t = type(v)
    if t is VReg: out.append(v)
    elif t is Sub: out.append(v.reg)
  return out


class MInst:
  __slots__ = ("name", "defs", "uses", "mods")

  def __init__(self, name: str, defs: dict | None = None, uses: dict | None = None, **mods):
    self.name, self.defs, self.uses, self.mods = name, defs or {}, uses or {}, mods

  @property
  def label(self): return self.mods.get("label")
  @property
  def target(self): return self.mods.get("target")

  def regs_used(self): return _regs(self.uses)
  def regs_defined(self): return _regs(self.defs)

  def __repr__(self):
    if self.name == "LABEL": return f"{self.label}:"
    ops = [f"{k}={v!r}" for k, v in self.defs.items()] + [f"{k}={v!r}" for k, v in self.uses.items()]
    ops += [f"{k}={v}" for k, v in self.mods.items()]
    return f"  {self.name} " + ", ".join(ops)


_RESULT_TYPES = (("f64", dtypes.float64), ("i64", dtypes.int64), ("u64", dtypes.uint64), ("f32", dtypes.float32), ("f16", dtypes.float16), ("i32", dtypes.int32), ("u32", dtypes.uint32),
                 ("b32", dtypes.uint32), ("u16", dtypes.uint16), ("i16", dtypes.int16), ("u8", dtypes.uint8),
                 ("i8", dtypes.int8), ("b64", dtypes.uint64))


def result_dtype(m: MInst):
  """The dtype of what an instruction produces: void without a destination, bool for lane masks (v_cmp), else
  the first type in the mnemonic (v_cvt_f32_i32 -> float32, global_load_u16 -> uint16, s_load_b64 -> uint64)."""
  if not m.defs: return dtypes.void
  if m.name.startswith("v_cmp"): return dtypes.bool
  parts = m.name.split("_")
  for p in parts[1:]:
    for t, dt in _RESULT_TYPES:
      if p == t: return dt
  return dtypes.uint32


def to_uops(code: list[MInst]) -> UOp:
  """The selected instructions as INS UOps (arg = (opcode, dtype)) in a LINEAR, for inspection and tests. An INS's
  tag is (position, operand text): registers are not UOps of their own (they are redefined by loops)."""
  out = [UOp(Ops.INS, (), (m.name, result_dtype(m)), (i, repr(m))) for i, m in enumerate(code)]
  return UOp(Ops.LINEAR, tuple(out))
