"""What the RDNA3 instruction selector's parts share: the target name, the selection error, and constants as operand
bit patterns (inline constants vs literals, how an instruction reads its constant sources)."""
from __future__ import annotations

import struct

from ...ir import CompileError, UOp, dtypes
# the IR's Ops members as plain class attributes (compiler/ir/ops.O): selection reads a few per element, and `Ops.ADD`
# off the Enum class costs several times a plain attribute on CPython 3.11; the members are the same objects
from ...ir.ops import O as Ops
from ...ir.dtypes import DType, truncate
from ...ir.uop import _short
from .isel_mir import Imm, Imm64

TARGET = "gfx1100"

# inline constants (RDNA3 ISA 16.3.1 / operands.py): 128 + n for integers 0..64, 192 + n for -1..-16; for float
# operands 240..248 are 0.5, -0.5, 1, -1, 2, -2, 4, -4, 1/(2 pi) in the operand's own format
INLINE_F32 = {0x3f000000: 240, 0xbf000000: 241, 0x3f800000: 242, 0xbf800000: 243, 0x40000000: 244, 0xc0000000: 245,
              0x40800000: 246, 0xc0800000: 247, 0x3e22f983: 248}
# an f64 operand's inline constants, by the high dword of the f64 (whose low dword is 0); a literal for an f64 operand is
# that high dword too (RDNA3 ISA 7.x "64-bit operands": a 32-bit literal fills the high half, the low half is 0)
INLINE_F64 = {0x3fe00000: 240, 0xbfe00000: 241, 0x3ff00000: 242, 0xbff00000: 243, 0x40000000: 244, 0xc0000000: 245,
              0x40100000: 246, 0xc0100000: 247}
INLINE_F16 = {0x3800: 240, 0xb800: 241, 0x3c00: 242, 0xbc00: 243, 0x4000: 244, 0xc000: 245, 0x4400: 246, 0xc400: 247,
              0x3118: 248}


def operand_kind(name: str) -> str:
  """How an instruction reads its constant sources: "f32", "f16" or "int" (raw bits: b32/u32/i32, v_cndmask,
  v_mov, SALU). Conversions read the type after the result's: v_cvt_f32_f16 reads f16."""
  parts = name.split("_")
  if name.startswith("v_ldexp_"): return "int"     # the constant of an ldexp is its integer exponent
  if name.startswith("v_cvt_") and len(parts) > 3: t = parts[3]
  else: t = next((p for p in parts[1:] if p in ("f32", "f16", "f64")), "int")
  return t if t in ("f32", "f16", "f64") else "int"


def inline_code(x: Imm, kind: str = "int") -> int | None:
  """The inline-constant encoding of x's bit pattern read as `kind`, or None (then a literal dword follows).
  Integer codes are used for integer operands only (and 0, whose pattern is 0 in every format); a 32-bit integer
  operand also takes the float codes, whose value there is the f32 bit pattern (as llvm-mc encodes v_mov_b32 v0, 1.0)."""
  if x.bits == 0: return 128
  if kind == "int":   # 32-bit integer/bit operands: small integers, or an f32 inline value's exact bit pattern
    v = x.signed
    if 0 < v <= 64: return 128 + v
    if -16 <= v < 0: return 192 - v
    return INLINE_F32.get(x.bits)
  return {"f32": INLINE_F32, "f16": INLINE_F16, "f64": INLINE_F64}[kind].get(x.bits)


def is_inline(x: Imm, kind: str = "int") -> bool: return inline_code(x, kind) is not None


class SelectError(CompileError):
  """An op the gfx1100 backend can't select."""


def _err(u: UOp, why: str = "") -> SelectError:
  return SelectError(f"{TARGET}: can't select {u.op.name} ({u.dtype}){': ' + why if why else ''}: {_short(u)}", u)


# ---- constants as operand bit patterns
def concrete(dt: DType) -> DType:
  """Weak literal types as the registers hold them (commit_dtypes leaves them only on CONSTs under a CAST)."""
  if dt.kind == "weakint": return dtypes.int32
  if dt.kind == "weakfloat": return dtypes.float32
  return dt


def imm_of(value, dt: DType) -> Imm:
  dt = concrete(dt)
  if dt.is_bool: return Imm(0xFFFFFFFF if value else 0)
  if dt.is_float:
    if dt.itemsize == 4: return Imm(struct.unpack("<I", struct.pack("<f", float(value)))[0], "f32")
    if dt.itemsize == 2: return Imm(struct.unpack("<H", struct.pack("<e", float(value)))[0], "f16")
  if dt.is_int and dt.itemsize <= 4: return Imm(int(truncate(int(value), dt)))
  raise CompileError(f"{TARGET}: no 32-bit constant of type {dt}")


def imm64_of(value, dt: DType) -> Imm64:
  """A 64-bit constant: int64/uint64 wrapped, float64 by its bits."""
  if dt.is_float: return Imm64(struct.unpack("<Q", struct.pack("<d", float(value)))[0], "f64")
  return Imm64(int(truncate(int(value), dt)))


def const_of(value, dt: DType):
  """The constant operand of a value of type dt: Imm (up to 32 bits) or Imm64."""
  return imm64_of(value, concrete(dt)) if concrete(dt).itemsize == 8 else imm_of(value, dt)


def value_of(x, dt: DType):
  dt = concrete(dt)
  if isinstance(x, Imm64):
    if dt.is_float: return struct.unpack("<d", struct.pack("<Q", x.bits))[0]
    return truncate(x.bits, dt)
  if dt.is_bool: return x.bits != 0
  if dt.is_float:
    if dt.itemsize == 4: return struct.unpack("<f", struct.pack("<I", x.bits))[0]
    return struct.unpack("<e", struct.pack("<H", x.bits & 0xFFFF))[0]
  return truncate(x.bits, dt)


def _kind(dt: DType) -> str:
  return "f32" if dt == dtypes.float32 else "f16" if dt == dtypes.float16 else "int"
