"""64-bit values for the RDNA3 instruction selector (a mixin of isel.ISel): int64/uint64 and float64.

A 64-bit value lives in a register pair, VReg(cls, 2) (SGPR pairs for kernel arguments and scalar loads, VGPR pairs
for everything computed), or is a constant Imm64. Instructions with 64-bit operands (v_add_f64, v_lshlrev_b64,
v_cmp_*_u64, global_load_b64, ...) take the pair; the others work on its halves, Sub(pair, 0) (low) and Sub(pair, 1)
(high), and write the halves of a new pair (a Sub as a destination). 64-bit values are never uniform in the SALU
sense: their arithmetic is VALU (the operands may still be SGPR pairs).

int64: ADD/SUB by v_add_co_u32 + v_add_co_ci_u32 (the carry in an SGPR lane mask), MUL by v_mad_u64_u32 (low x low)
plus the two cross products in the high half, shifts by v_lshlrev_b64 / v_lshrrev_b64 / v_ashrrev_i64, AND/OR/XOR
per half, comparisons by v_cmp_*_{i,u}64, IDIV/IMOD (C's truncating forms: FLOORDIV/FLOORMOD were legalized into
them) by a restoring shift-subtract loop over the absolute values (64 iterations of a scalar loop, the signs applied
after); INT64_MIN / -1 wraps and INT64_MIN % -1 is 0, as the reference semantics want it. The IR leaves x / 0
undefined (compiler/ir/evaluate.py; the C backend raises KernelFault); here it does not fault: unsigned x / 0 is all
ones, signed x / 0 is -1 for x >= 0 and +1 for x < 0 (|x| / 0 is all ones, then the sign of x applied), x % 0 is x.

float64: ADD/SUB/MUL/MAX/TRUNC/comparisons are single instructions (MULACC is MUL then ADD: the reference rounds twice). FDIV (and RECIP) is correctly rounded by the
ISA's division sequence: v_div_scale (denominator and numerator scaled away from overflow/underflow), a v_rcp_f64
estimate refined by two Newton-Raphson steps in fma, the quotient and its residual, v_div_fmas (which undoes the
scaling, VCC from the numerator's v_div_scale) and v_div_fixup (infinities, zeros, NaNs, overflow). SQRT: v_rsq_f64 refined
by a Goldschmidt step and two Newton-Raphson corrections of the square root (residual x - g*g in fma), inputs below
2^-767 scaled by 2^256 first; 0, -0 and +inf are returned as they are (v_cmp_class).

Conversions follow compiler/ir/dtypes.float_to_int (truncation, NaN -> 0, saturation at the target's range):
  f64 -> i32/u32          v_cvt_i32_f64 / v_cvt_u32_f64 (saturating, NaN 0 in hardware)
  f64 -> i64/u64          t = trunc(x), hi = floor(t * 2^-32), lo = t - hi * 2^32 (exact), both converted, then
                          clamped where t is outside the range (NaN gives 0 in both halves)
  i64/u64 -> f64          cvt(hi) * 2^32 + cvt_u32(lo): one rounding (the product is exact)
  i64/u64 -> f32          |x| shifted left until its top bit is set, the high dword with a sticky bit for the low one,
                          v_cvt_f32_u32 (one rounding), v_ldexp_f32 back, the sign put on: correctly rounded
  f32 <-> f64             v_cvt_f64_f32 / v_cvt_f32_f64; f16 -> f64 through f32 (exact)
"""
from __future__ import annotations

from ...ir import UOp, dtypes
from ...ir.dtypes import DType
from .isel_common import Ops, _err, is_inline, operand_kind
from .isel_mir import NULL, VCC_LO, Imm, Imm64, Spec, Sub, VReg

F64_ONE_HI, F64_HALF_HI = 0x3ff00000, 0x3fe00000


def is_wide(x) -> bool:
  return isinstance(x, Imm64) or (isinstance(x, VReg) and x.n == 2)


class WideSelector:
  # ------------------------------------------------------------------ operands
  @staticmethod
  def halves(x):
    """(low, high) 32-bit operands of a 64-bit value (a pair, an Imm64 or a (lo, hi) tuple)."""
    if isinstance(x, tuple): return x
    if isinstance(x, Imm64): return x.lo, x.hi
    if isinstance(x, VReg) and x.n == 2: return Sub(x, 0), Sub(x, 1)
    raise TypeError(f"not a 64-bit operand: {x!r}")

  def pair(self, x, kind: str = "int"):
    """x as a 64-bit instruction operand: a register pair, or an inline constant (0, a small integer, an f64 whose
    low dword is 0 and high dword an inline float); other constants go to an SGPR pair (two s_mov_b32, CSE'd)."""
    if isinstance(x, VReg) and x.n == 2: return x
    if isinstance(x, tuple): return self.join(*x)
    if x.bits == 0: return Imm(0)
    if kind == "f64" and x.bits & 0xFFFFFFFF == 0 and is_inline(Imm(x.bits >> 32, "f64"), "f64"):
      return Imm(x.bits >> 32, "f64")
    if kind == "int" and -16 <= x.signed <= 64: return Imm(x.signed)
    key = ("const64", x.bits)
    hit = self.cached(key)
    if hit is not None: return hit
    d = VReg("s", 2)
    self.emit("s_mov_b32", {"sdst": Sub(d, 0)}, {"ssrc0": x.lo})
    self.emit("s_mov_b32", {"sdst": Sub(d, 1)}, {"ssrc0": x.hi})
    self.cse[-1][key] = d
    return d

  def join(self, lo, hi):
    """A VGPR pair from two 32-bit operands."""
    d = VReg("v", 2)
    self.emit("v_mov_b32_e32", {"vdst": Sub(d, 0)}, {"src0": lo})
    self.emit("v_mov_b32_e32", {"vdst": Sub(d, 1)}, {"src0": hi})
    return d

  def to_v64(self, x):
    if isinstance(x, VReg) and x.n == 2 and x.cls == "v": return x
    return self.join(*self.halves(x))

  def low32(self, x):
    """The low dword of a 64-bit value (an index: byte offsets of a buffer under 4 GiB fit 32 bits)."""
    if isinstance(x, Imm64): return x.lo
    if isinstance(x, VReg) and x.n == 2: return Sub(x, 0)
    return x

  def _srcs(self, name, srcs, fields=("src0", "src1", "src2")):
    return dict(zip(fields, self.legal_vop3(list(srcs), operand_kind(name))))

  def v64(self, name, *srcs, kind: str = "int", **mods):
    """An instruction with a VGPR-pair result over 64-bit (pair) operands."""
    srcs = [self.pair(s, kind) if is_wide(s) or isinstance(s, tuple) else s for s in srcs]
    return self.pure(name, self.legal_vop3(srcs, operand_kind(name)), dst_n=2, **mods)

  def halfwise(self, name, a, b=None):
    """name applied to each half: (lo(a) op lo(b), hi(a) op hi(b))."""
    d = VReg("v", 2)
    ha, hb = self.halves(a), self.halves(b) if b is not None else (None, None)
    for k in (0, 1):
      srcs = [ha[k]] + ([hb[k]] if b is not None else [])
      self.emit(name, {"vdst": Sub(d, k)}, self._srcs(name, srcs))
    return d

  # ------------------------------------------------------------------ int64
  def add64(self, a, b, sub: bool = False):
    (a0, a1), (b0, b1) = self.halves(a), self.halves(b)
    d, carry = VReg("v", 2), VReg("s")
    lo, hi = ("v_sub_co_u32", "v_sub_co_ci_u32_e64") if sub else ("v_add_co_u32", "v_add_co_ci_u32_e64")
    self.emit(lo, {"vdst": Sub(d, 0), "sdst": carry}, self._srcs(lo, [a0, b0]))
    c, x, y = self.legal_vop3([carry, a1, b1], "int")    # the carry takes the first constant-bus slot
    self.emit(hi, {"vdst": Sub(d, 1), "sdst": Spec(NULL)}, {"src0": x, "src1": y, "src2": c})
    return d

  def mul64(self, a, b):
    (a0, a1), (b0, b1) = self.halves(a), self.halves(b)
    d = VReg("v", 2)
    self.emit("v_mad_u64_u32", {"vdst": d, "sdst": Spec(NULL)}, self._srcs("v_mad_u64_u32", [a0, b0, Imm(0)]))
    cross = [self.vop("v_mul_lo_u32", x, y) for x, y in ((a0, b1), (a1, b0)) if Imm(0) not in (x, y)]
    if cross:
      srcs = [Sub(d, 1)] + cross + ([Imm(0)] if len(cross) == 1 else [])
      self.emit("v_add3_u32", {"vdst": Sub(d, 1)}, self._srcs("v_add3_u32", srcs))
    return d

  def where64(self, mask, if_false, if_true):
    if isinstance(mask, Imm): return if_true if mask.bits else if_false
    d = VReg("v", 2)
    (f0, f1), (t0, t1) = self.halves(if_false), self.halves(if_true)
    for k, (f, t) in enumerate(((f0, t0), (f1, t1))):
      m, f, t = self.legal_vop3([mask, f, t], "int")
      self.emit("v_cndmask_b32_e64", {"vdst": Sub(d, k)}, {"src0": f, "src1": t, "src2": m})
    return d

  def cmp64(self, name, a, b, kind: str = "int"):
    return self.vcmp(name, self.pair(a, kind), self.pair(b, kind))

  def i64_alu(self, u: UOp, s):
    op, sdt = u.op, u.src[0].dtype
    unsigned = sdt.is_unsigned
    if op is Ops.ADD: return self.add64(s[0], s[1])
    if op is Ops.SUB: return self.add64(s[0], s[1], sub=True)
    if op is Ops.NEG: return self.add64(Imm64(0), s[0], sub=True)
    if op is Ops.MUL: return self.mul64(s[0], s[1])
    if op is Ops.MULACC: return self.add64(self.mul64(s[0], s[1]), s[2])
    if op in (Ops.AND, Ops.OR, Ops.XOR): return self.halfwise({Ops.AND: "v_and_b32_e64", Ops.OR: "v_or_b32_e64",
                                                                Ops.XOR: "v_xor_b32_e64"}[op], s[0], s[1])
    if op is Ops.NOT: return self.halfwise("v_xor_b32_e64", s[0], Imm64(-1))
    if op in (Ops.SHL, Ops.SHR):
      name = "v_lshlrev_b64" if op is Ops.SHL else "v_lshrrev_b64" if unsigned else "v_ashrrev_i64"
      return self.v64(name, self.low32(s[1]), s[0])
    if op is Ops.CMPLT: return self.cmp64(f"v_cmp_lt_{'u' if unsigned else 'i'}64_e64", s[0], s[1])
    if op is Ops.CMPEQ: return self.cmp64("v_cmp_eq_u64_e64", s[0], s[1])
    if op is Ops.CMPNE: return self.cmp64("v_cmp_ne_u64_e64", s[0], s[1])
    if op is Ops.MAX:
      return self.where64(self.cmp64(f"v_cmp_lt_{'u' if unsigned else 'i'}64_e64", s[0], s[1]), s[0], s[1])
    if op in (Ops.IDIV, Ops.IMOD): return self.divmod64(u, s[0], s[1])
    raise _err(u)

  def divmod64(self, u: UOp, n, d):
    want_q = u.op is Ops.IDIV
    if u.dtype.is_unsigned:
      q, r = self.udivmod64(n, d)
      return q if want_q else r
    # |n| / |d| unsigned, then C's signs: the quotient negative when the signs differ, the remainder has n's sign
    sn = self.vop("v_ashrrev_i32_e64", Imm(31), self.halves(n)[1])
    sd = self.vop("v_ashrrev_i32_e64", Imm(31), self.halves(d)[1])
    q, r = self.udivmod64(self.flip(n, sn), self.flip(d, sd))
    if want_q: return self.flip(q, self.vop("v_xor_b32_e64", sn, sd))
    return self.flip(r, sn)

  def flip(self, x, sign):
    """x negated where sign (a dword of all sign bits) is -1: (x ^ sign) - sign in 64 bits."""
    return self.add64(self.halfwise("v_xor_b32_e64", x, (sign, sign)), (sign, sign), sub=True)

  def udivmod64(self, n, d):
    """Unsigned 64-bit n / d and n % d: restoring division, one quotient bit per iteration of a scalar loop of 64
    (every lane runs it, whatever EXEC is). The quotient bits are shifted into N as its dividend bits leave it."""
    N, R = self.to_v64_copy(n), self.join(Imm(0), Imm(0))
    # the loop reads the divisor's halves: a register pair as it is, anything else (an Imm64 or a (lo, hi) tuple)
    # moved into a VGPR pair by its halves (pair() would give an inline constant, which has no halves)
    D = d if isinstance(d, VReg) and d.n == 2 else self.join(*self.halves(d))
    d0, d1 = self.halves(D)
    cnt = VReg("s")
    self.mutable.update({N, R, cnt})
    head, exit_ = self.label("div64_"), self.label("div64_end")
    self.emit("s_mov_b32", {"sdst": cnt}, {"ssrc0": Imm(0)})
    self.emit("LABEL", label=head)
    # (R:N) <<= 1  (v_alignbit_b32 hi, lo, 31 = hi << 1 | lo >> 31)
    for dst, hi, lo in ((Sub(R, 1), Sub(R, 1), Sub(R, 0)), (Sub(R, 0), Sub(R, 0), Sub(N, 1)), (Sub(N, 1), Sub(N, 1), Sub(N, 0))):
      self.emit("v_alignbit_b32", {"vdst": dst}, {"src0": hi, "src1": lo, "src2": Imm(31)})
    self.emit("v_lshlrev_b32_e64", {"vdst": Sub(N, 0)}, {"src0": Imm(1), "src1": Sub(N, 0)})
    ge = VReg("s")
    self.emit("v_cmp_ge_u64_e64", {"vdst": ge}, self._srcs("v_cmp_ge_u64_e64", [R, D]))
    t, borrow = VReg("v", 2), VReg("s")
    self.emit("v_sub_co_u32", {"vdst": Sub(t, 0), "sdst": borrow}, self._srcs("v_sub_co_u32", [Sub(R, 0), d0]))
    c, x, y = self.legal_vop3([borrow, Sub(R, 1), d1], "int")
    self.emit("v_sub_co_ci_u32_e64", {"vdst": Sub(t, 1), "sdst": Spec(NULL)}, {"src0": x, "src1": y, "src2": c})
    for k in (0, 1):
      self.emit("v_cndmask_b32_e64", {"vdst": Sub(R, k)}, {"src0": Sub(R, k), "src1": Sub(t, k), "src2": ge})
    bit = VReg("v")
    self.emit("v_cndmask_b32_e64", {"vdst": bit}, {"src0": Imm(0), "src1": Imm(1), "src2": ge})
    self.emit("v_or_b32_e64", {"vdst": Sub(N, 0)}, {"src0": Sub(N, 0), "src1": bit})
    self.emit("s_add_i32", {"sdst": cnt}, {"ssrc0": cnt, "ssrc1": Imm(1)})
    self.emit("s_cmp_lt_u32", {}, {"ssrc0": cnt, "ssrc1": Imm(64)})
    self.emit("s_cbranch_scc1", target=head)
    self.emit("LABEL", label=exit_)
    self.loops.append((head, exit_))
    return N, R

  def to_v64_copy(self, x):
    """A fresh VGPR pair holding x (to be modified in place)."""
    return self.join(*self.halves(x))

  # ------------------------------------------------------------------ float64
  def f64_alu(self, u: UOp, s):
    op = u.op
    if op in (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE):
      return self.cmp64(f"v_cmp_{ {Ops.CMPLT: 'lt', Ops.CMPEQ: 'eq', Ops.CMPNE: 'neq'}[op]}_f64_e64", s[0], s[1], "f64")
    if op is Ops.ADD: return self.v64("v_add_f64", s[0], s[1], kind="f64")
    if op is Ops.SUB: return self.v64("v_add_f64", s[0], s[1], kind="f64", neg=0b010)
    if op is Ops.MUL: return self.v64("v_mul_f64", s[0], s[1], kind="f64")
    if op is Ops.MULACC:   # the reference semantics round the product (C: -ffp-contract=off, PTX: mul.rn + add.rn)
      return self.v64("v_add_f64", self.v64("v_mul_f64", s[0], s[1], kind="f64"), s[2], kind="f64")
    if op is Ops.MAX: return self.v64("v_max_f64", s[0], s[1], kind="f64")
    if op is Ops.TRUNC: return self.v64("v_trunc_f64_e64", s[0], kind="f64")
    if op is Ops.NEG:
      lo, hi = self.halves(s[0])
      return self.join(lo, self.vop("v_xor_b32_e64", hi, Imm(0x80000000)))
    if op is Ops.FDIV: return self.fdiv64(s[0], s[1])
    if op is Ops.RECIP: return self.fdiv64(Imm64(0x3ff0000000000000, "f64"), s[0])
    if op is Ops.SQRT: return self.sqrt64(s[0])
    raise _err(u, "float64 supports + - * / fma max sqrt trunc and comparisons")

  def fdiv64(self, num, den):
    num, den = self.pair(num, "f64"), self.pair(den, "f64")
    one = Imm(F64_ONE_HI, "f64")
    ds = VReg("v", 2)
    self.emit("v_div_scale_f64", {"vdst": ds, "sdst": Spec(NULL)}, self._srcs("v_div_scale_f64", [den, den, num]))
    ns = VReg("v", 2)   # its VCC (the numerator was scaled) is what v_div_fmas reads
    self.emit("v_div_scale_f64", {"vdst": ns, "sdst": Spec(VCC_LO)}, self._srcs("v_div_scale_f64", [num, den, num]))
    r = self.v64("v_rcp_f64_e64", ds, kind="f64")
    for _ in range(2):   # r += r * (1 - ds * r)
      e = self.v64("v_fma_f64", ds, r, one, kind="f64", neg=0b001)
      r = self.v64("v_fma_f64", r, e, r, kind="f64")
    q = self.v64("v_mul_f64", ns, r, kind="f64")
    e = self.v64("v_fma_f64", ds, q, ns, kind="f64", neg=0b001)          # the residual ns - ds * q, exact
    fm = VReg("v", 2)
    self.emit("v_div_fmas_f64", {"vdst": fm}, self._srcs("v_div_fmas_f64", [e, r, q]))
    out = VReg("v", 2)
    self.emit("v_div_fixup_f64", {"vdst": out}, self._srcs("v_div_fixup_f64", [fm, den, num]))
    return out

  def sqrt64(self, x):
    x = self.pair(x, "f64")
    tiny = self.cmp64("v_cmp_gt_f64_e64", Imm64(0x1000000000000000, "f64"), x, "f64")   # x < 2^-767
    xs = self.v64("v_ldexp_f64", x, self.cndmask(tiny, Imm(0), Imm(256)), kind="f64")
    y = self.v64("v_rsq_f64_e64", xs, kind="f64")
    half = Imm(F64_HALF_HI, "f64")
    g = self.v64("v_mul_f64", xs, y, kind="f64")             # sqrt(x) estimate
    h = self.v64("v_mul_f64", y, half, kind="f64")           # 1 / (2 sqrt(x)) estimate
    r = self.v64("v_fma_f64", h, g, half, kind="f64", neg=0b001)
    g = self.v64("v_fma_f64", g, r, g, kind="f64")
    h = self.v64("v_fma_f64", h, r, h, kind="f64")
    for _ in range(2):   # g += h * (x - g*g)
      d = self.v64("v_fma_f64", g, g, xs, kind="f64", neg=0b001)
      g = self.v64("v_fma_f64", d, h, g, kind="f64")
    g = self.v64("v_ldexp_f64", g, self.cndmask(tiny, Imm(0), Imm(-128)), kind="f64")
    # +-0 and +inf are their own square roots (the estimate gives NaN there): bits 5 (-0), 6 (+0), 9 (+inf)
    keep = self.vcmp("v_cmp_class_f64_e64", x, self.to_s(Imm(0x260)))
    return self.where64(keep, g, x)

  # ------------------------------------------------------------------ conversions
  def wide_cast(self, u: UOp, x):
    src, dt = u.src[0].dtype, u.dtype
    if src.itemsize == 8 and dt.itemsize == 8:
      if src.is_float == dt.is_float: return x                 # int64 <-> uint64
      return self.f64_to_i64(x, dt) if src.is_float else self.i64_to_f64(x, src)
    if dt.itemsize == 8:    # widening to 64 bits
      if src.is_bool:
        return self.where64(x, Imm64(0), Imm64(0x3ff0000000000000 if dt.is_float else 1))
      if dt.is_float:
        if src.is_float: return self.v64("v_cvt_f64_f32_e64", x if src.itemsize == 4 else self.vop("v_cvt_f32_f16_e64", x))
        return self.v64("v_cvt_f64_u32_e64" if src.is_unsigned else "v_cvt_f64_i32_e64", x)
      if src.is_float:
        f = self.v64("v_cvt_f64_f32_e64", x if src.itemsize == 4 else self.vop("v_cvt_f32_f16_e64", x))
        return self.f64_to_i64(f, dt)
      # registers hold narrower ints extended by their own signedness: the high dword repeats the sign (or is 0)
      hi = Imm(0) if src.is_unsigned else self.vop("v_ashrrev_i32_e64", Imm(31), x)
      return self.join(x, hi)
    # narrowing from 64 bits
    if dt.is_bool:
      return self.cmp64("v_cmp_neq_f64_e64" if src.is_float else "v_cmp_ne_u64_e64", x, Imm64(0), "f64" if src.is_float else "int")
    if src.is_float:
      if dt.is_float:
        if dt.itemsize == 2: raise _err(u, "float64 -> float16 (one rounding) is not supported; cast through float32")
        return self.vop("v_cvt_f32_f64_e64", self.pair(x, "f64"))
      return self.narrow(self.vop("v_cvt_u32_f64_e64" if dt.is_unsigned else "v_cvt_i32_f64_e64", self.pair(x, "f64")), dt)
    if dt.is_float:
      f = self.i64_to_f32(x, src)
      return f if dt.itemsize == 4 else self.vop("v_cvt_f16_f32_e64", f)
    return self.narrow(self.low32(x), dt)

  def i64_to_f64(self, x, src: DType):
    lo, hi = self.halves(x)
    h = self.v64("v_cvt_f64_u32_e64" if src.is_unsigned else "v_cvt_f64_i32_e64", hi)
    h = self.v64("v_ldexp_f64", h, Imm(32))
    return self.v64("v_add_f64", h, self.v64("v_cvt_f64_u32_e64", lo), kind="f64")

  def i64_to_f32(self, x, src: DType):
    sign = None
    if not src.is_unsigned:
      sign = self.vop("v_ashrrev_i32_e64", Imm(31), self.halves(x)[1])
      x = self.flip(x, sign)
    lo, hi = self.halves(x)
    sh = self.vop("v_min_u32_e64", self.vop("v_clz_i32_u32_e64", hi), Imm(32))   # clz(0) is -1: 32
    n = self.v64("v_lshlrev_b64", sh, x)
    nlo, nhi = self.halves(n)
    sticky = self.cndmask(self.vcmp("v_cmp_ne_u32_e64", nlo, Imm(0)), Imm(0), Imm(1))
    f = self.vop("v_cvt_f32_u32_e64", self.vop("v_or_b32_e64", nhi, sticky))
    f = self.vop("v_ldexp_f32", f, self.vop("v_sub_nc_u32_e64", Imm(32), sh))
    if sign is not None: f = self.vop("v_xor_b32_e64", f, self.vop("v_and_b32_e64", sign, Imm(0x80000000)))
    return f

  def f64_to_i64(self, x, dt: DType):
    t = self.v64("v_trunc_f64_e64", x, kind="f64")
    hf = self.v64("v_floor_f64_e64", self.v64("v_ldexp_f64", t, Imm(-32)), kind="f64")
    lf = self.v64("v_fma_f64", hf, Imm64(0xc1f0000000000000, "f64"), t, kind="f64")    # t - hf * 2^32, in [0, 2^32)
    lo = self.vop("v_cvt_u32_f64_e64", lf)
    hi = self.vop("v_cvt_u32_f64_e64" if dt.is_unsigned else "v_cvt_i32_f64_e64", hf)
    if dt.is_unsigned:
      top, low = 0x43f0000000000000, 0          # 2^64; below 0 everything is 0
      big_val, small_val = (Imm(-1), Imm(-1)), (Imm(0), Imm(0))
    else:
      top, low = 0x43e0000000000000, 0xc3e0000000000000   # 2^63, -2^63
      big_val, small_val = (Imm(-1), Imm(0x7fffffff)), (Imm(0), Imm(0x80000000))
    big = self.cmp64("v_cmp_ge_f64_e64", t, Imm64(top, "f64"), "f64")
    small = self.cmp64("v_cmp_lt_f64_e64", t, Imm64(low, "f64"), "f64")
    out = self.where64(big, (lo, hi), big_val)
    return self.where64(small, out, small_val)
