"""64-bit integers on ir3, emulated: a value is a pair of full registers (low word in R, high word in R + 1).

ir3 has 32-bit integer ALU only (Mesa lowers 64-bit integer ops in nir: nir_lower_int64), so:
  add/sub       the low words, the carry / borrow as cmps.u.lt (1 or 0), the high words with it
  mul           low x low as 16-bit pieces (mull.u multiplies the low 16 bits of its sources) for the 64-bit product,
                plus the low 32 bits of the cross products (the 32-bit multiply sequence)
  compares      high words (signed or unsigned), the low words unsigned when the high words are equal
  shifts        by n & 63: a shift by n & 31 with the bits crossing between the words, the words moved when n >= 32
  div/mod       a 64-step restoring division of the magnitudes (signs fixed after: C's truncation), 0 for a 0 divisor
  casts         to 64 bits: the high word is the sign (ashr 31) or 0; from 64 bits: the low word (re-extended for a
                narrow type), != 0 of either word for bool; to float32 the top 32 significant bits with a sticky bit
                (cov.u32f32 rounds once) scaled by a power of two; from float32 the mantissa shifted by the exponent,
                saturating as compiler/ir/dtypes.float_to_int
Memory: ldib/stib of two 32-bit elements at 2 * index (untyped.1d.u32.2), ldl/stl/ldp/stp of 2 dwords.
float64 has no ir3 instructions and is refused; 64-bit integers to or from float16 go through float32."""
from __future__ import annotations

from ...ir import CompileError, Ops, UOp
from ...ir.uop import _short


def is_wide(dt) -> bool: return dt.is_int and not dt.is_bool and dt.itemsize == 8


class WideMixin:
  """64-bit code for Selector (isel.py): temps[16:32] are these sequences' own; zero_reg holds 0."""

  def wt(self, k: int) -> int: return self.temps[16 + k]

  def add64(self, d: int, a: int, b: int, sub: bool = False):
    c = self.wt(0)
    if sub:
      self.op2("cmps.u.lt", c, a, b)
      self.op2("sub.u", d, a, b)
      self.op2("sub.u", d + 1, a + 1, b + 1)
      self.op2("sub.u", d + 1, d + 1, c)
    else:
      self.op2("add.u", d, a, b)
      self.op2("cmps.u.lt", c, d, a)
      self.op2("add.u", d + 1, a + 1, b + 1)
      self.op2("add.u", d + 1, d + 1, c)

  def mulhi32(self, d: int, a: int, b: int):
    """d = the high 32 bits of the unsigned 64-bit product a * b, from 16-bit pieces."""
    a1, b1, t0, t1, t2, t3 = (self.wt(k) for k in range(1, 7))
    self.op2("shr.b", a1, a, "16"); self.op2("shr.b", b1, b, "16")
    self.op2("mull.u", t0, a, b); self.op2("mull.u", t1, a1, b)
    self.op2("mull.u", t2, a, b1); self.op2("mull.u", t3, a1, b1)
    self.op2("shr.b", t0, t0, "16")                  # mid = (a0 b0 >> 16) + lo16(a1 b0) + lo16(a0 b1)
    self.op2("and.b", a1, t1, self._imm(0xFFFF)); self.op2("add.u", t0, t0, a1)
    self.op2("and.b", a1, t2, self._imm(0xFFFF)); self.op2("add.u", t0, t0, a1)
    self.op2("shr.b", t0, t0, "16")
    self.op2("shr.b", t1, t1, "16"); self.op2("shr.b", t2, t2, "16")
    self.op2("add.u", d, t3, t1); self.op2("add.u", d, d, t2); self.op2("add.u", d, d, t0)

  def mul64(self, d: int, a: int, b: int):
    x = self.wt(7)
    self.mulhi32(d + 1, a, b)
    self.imul(x, a, b + 1); self.op2("add.u", d + 1, d + 1, x)
    self.imul(x, a + 1, b); self.op2("add.u", d + 1, d + 1, x)
    self.imul(d, a, b)

  def neg64(self, d: int, a: int):
    c = self.wt(0)
    self.op2("cmps.u.ne", c, a, self.zero_reg)                 # the borrow of 0 - lo
    self.alu_text("absneg.s", d, a, neg=True)
    self.alu_text("absneg.s", d + 1, a + 1, neg=True)
    self.op2("sub.u", d + 1, d + 1, c)

  def cmp64(self, d: int, a: int, b: int, cond: str, signed: bool):
    t1, t2, t3 = self.wt(0), self.wt(1), self.wt(2)
    if cond == "lt":
      self.op2(f"cmps.{'s' if signed else 'u'}.lt", t1, a + 1, b + 1)
      self.op2("cmps.u.eq", t2, a + 1, b + 1)
      self.op2("cmps.u.lt", t3, a, b)
      self.op2("and.b", t2, t2, t3)
      self.op2("or.b", d, t1, t2)
    else:
      self.op2("cmps.u.eq", t1, a, b)
      self.op2("cmps.u.eq", t2, a + 1, b + 1)
      self.op2("and.b", d, t1, t2)
      if cond == "ne": self.op2("xor.b", d, d, "1")

  def shift64(self, d: int, a: int, b: int, kind: str):
    """kind: shl, shr (logical), ashr; the amount is the low word of b, & 63."""
    n, m, k, lo, hi, big, x = (self.wt(k) for k in range(7))
    self.op2("and.b", n, b, "63"); self.op2("and.b", m, n, "31")
    self.mov_imm(k, 31); self.op2("sub.u", k, k, m)                 # 31 - m
    self.op2("cmps.u.ge", big, n, "32")
    if kind == "shl":
      self.op2("shl.b", lo, a, m)
      self.op2("shl.b", hi, a + 1, m); self.op2("shr.b", x, a, "1"); self.op2("shr.b", x, x, k)
      self.op2("or.b", hi, hi, x)
      self.sel(d + 1, lo, big, hi)
      self.sel(d, self.zero_reg, big, lo)
    else:
      self.op2("ashr.b" if kind == "ashr" else "shr.b", hi, a + 1, m)
      self.op2("shr.b", lo, a, m); self.op2("shl.b", x, a + 1, "1"); self.op2("shl.b", x, x, k)
      self.op2("or.b", lo, lo, x)
      self.sel(d, hi, big, lo)
      if kind == "ashr":
        self.op2("ashr.b", x, a + 1, "31")
        self.sel(d + 1, x, big, hi)
      else: self.sel(d + 1, self.zero_reg, big, hi)

  def divmod64(self, d: int, a: int, b: int, signed: bool, want_mod: bool):
    """Restoring division of |a| by |b|, 64 steps; C's truncation; 0 for a zero divisor."""
    ZERO = self.zero_reg
    ua, ub, q, rem = (self.wt(2 * k) for k in range(4))          # pairs at wt 0..7
    t, t2, k, sa, sb = self.wt(8), self.wt(9), self.wt(10), self.wt(11), self.wt(12)
    s2 = (self.wt(13), self.wt(14))                               # a pair: rem - ub
    if signed:
      self.op2("ashr.b", sa, a + 1, "31"); self.op2("ashr.b", sb, b + 1, "31")
      for src, sgn, dst in ((a, sa, ua), (b, sb, ub)):          # |x| = (x ^ s) - s, s = 0 or all ones
        self.op2("xor.b", dst, src, sgn); self.op2("xor.b", dst + 1, src + 1, sgn)
        self.op2("cmps.u.lt", t, dst, sgn)
        self.op2("sub.u", dst, dst, sgn); self.op2("sub.u", dst + 1, dst + 1, sgn)
        self.op2("sub.u", dst + 1, dst + 1, t)
    else:
      for src, dst in ((a, ua), (b, ub)): self.mov(dst, src); self.mov(dst + 1, src + 1)
    self.mov(q, ua); self.mov(q + 1, ua + 1)
    self.mov_imm(rem, 0); self.mov_imm(rem + 1, 0); self.mov_imm(k, 64)
    self.max_depth = max(self.max_depth, self.depth + 1)     # the loop is a branch level of its own
    top = self.label()
    self.place(top)
    # rem:q <<= 1 (the 128-bit pair)
    self.op2("shl.b", rem + 1, rem + 1, "1"); self.op2("shr.b", t, rem, "31"); self.op2("or.b", rem + 1, rem + 1, t)
    self.op2("shl.b", rem, rem, "1"); self.op2("shr.b", t, q + 1, "31"); self.op2("or.b", rem, rem, t)
    self.op2("shl.b", q + 1, q + 1, "1"); self.op2("shr.b", t, q, "31"); self.op2("or.b", q + 1, q + 1, t)
    self.op2("shl.b", q, q, "1")
    # if rem >= ub: rem -= ub, q |= 1
    self.op2("cmps.u.lt", t, rem + 1, ub + 1); self.op2("cmps.u.eq", t2, rem + 1, ub + 1)
    self.op2("cmps.u.lt", s2[0], rem, ub); self.op2("and.b", t2, t2, s2[0]); self.op2("or.b", t, t, t2)
    self.op2("xor.b", t, t, "1")                                   # t = rem >= ub
    self.op2("cmps.u.lt", t2, rem, ub)
    self.op2("sub.u", s2[0], rem, ub); self.op2("sub.u", s2[1], rem + 1, ub + 1); self.op2("sub.u", s2[1], s2[1], t2)
    self.sel(rem, s2[0], t, rem); self.sel(rem + 1, s2[1], t, rem + 1)
    self.op2("or.b", q, q, t)
    self.op2("sub.u", k, k, "1")
    self.alu_text_p0("cmps.s.gt", k)
    self.br(top)
    res = rem if want_mod else q
    if signed:
      sign = sa
      if not want_mod:
        sign = t
        self.op2("xor.b", t, sa, sb)
      self.op2("xor.b", res, res, sign); self.op2("xor.b", res + 1, res + 1, sign)
      self.op2("cmps.u.lt", t2, res, sign)
      self.op2("sub.u", res, res, sign); self.op2("sub.u", res + 1, res + 1, sign)
      self.op2("sub.u", res + 1, res + 1, t2)
    self.op2("or.b", t2, b, b + 1)
    self.op2("cmps.u.eq", t2, t2, "0")
    self.sel(d, ZERO, t2, res); self.sel(d + 1, ZERO, t2, res + 1)

  def u64_to_f32(self, d: int, a: int, signed: bool):
    """d = the float32 nearest a (a pair; round to nearest even): the top 32 significant bits, with a sticky bit for
    the rest, converted by cov.u32f32 (one rounding) and scaled by a power of two (exact)."""
    from .legalize import rname
    lo, hi, n, v, t, neg = (self.wt(k) for k in range(8, 14))
    if signed:     # the magnitude: (a ^ s) - s with s the sign word
      self.op2("ashr.b", neg, a + 1, "31")
      self.op2("xor.b", lo, a, neg); self.op2("xor.b", hi, a + 1, neg)
      self.op2("cmps.u.lt", t, lo, neg)
      self.op2("sub.u", lo, lo, neg); self.op2("sub.u", hi, hi, neg); self.op2("sub.u", hi, hi, t)
    else: self.mov(lo, a); self.mov(hi, a + 1)
    self.alu(f"clz.b {rname(n)}, {rname(hi)}", n, hi)              # 32 when the high word is 0
    self.op2("shl.b", v, hi, n)                                     # (hi:lo) << n, top word (n < 32)
    self.op2("shr.b", t, lo, "1"); self.mov_imm(d, 31); self.op2("sub.u", d, d, n); self.op2("shr.b", t, t, d)
    self.op2("or.b", v, v, t)
    self.op2("shl.b", t, lo, n); self.op2("cmps.u.ne", t, t, self.zero_reg)   # the sticky bit: the bits left out
    self.op2("or.b", v, v, t)
    self.alu(f"cov.u32f32 {rname(v)}, {rname(v)}", v, v)
    self.mov_imm(t, 159); self.op2("sub.u", t, t, n); self.op2("shl.b", t, t, "23")   # 2^(32 - n) as a float
    self.op2("mul.f", v, v, t)
    self.alu(f"cov.u32f32 {rname(t)}, {rname(lo)}", t, lo)          # the high word 0: the low word alone
    self.op2("cmps.u.ne", n, hi, self.zero_reg)
    self.sel(d, v, n, t)
    if signed:
      self.alu(f"absneg.f {rname(t)}, (neg){rname(d)}", t, d)
      self.sel(d, t, neg, d)

  def f32_to_64(self, d: int, a: int, signed: bool):
    """d (a pair) = a truncated toward zero, saturating at the 64-bit range of d's signedness, NaN 0
    (compiler/ir/dtypes.float_to_int, the reference)."""
    from .legalize import rname
    t, neg, mag, e, m, big, c = (self.wt(k) for k in range(8, 15))
    self.alu(f"trunc.f {rname(t)}, {rname(a)}", t, a)
    self.op2("cmps.f.lt", neg, t, self.zero_reg)
    self.alu(f"absneg.f {rname(mag)}, (abs){rname(t)}", mag, t)
    # |t| < 2^32: cov.f32u32; else the mantissa shifted by (exponent - 150) as a 64-bit pair
    self.op2("shr.b", e, mag, "23"); self.op2("add.u", e, e, "-150")
    self.op2("and.b", m, mag, self._imm(0x7FFFFF)); self.op2("or.b", m, m, self._imm(0x800000))
    self.mov(d, m); self.mov_imm(d + 1, 0)
    pair = self.wt(15)           # the shift amount as the low word of a pair for shift64 (its high word unread)
    self.mov(pair, e)
    self.shift64(d, d, pair, "shl")
    self.alu(f"cov.f32u32 {rname(c)}, {rname(mag)}", c, mag)
    self.mov_imm(big, 0x4F800000)                                   # 2^32
    self.op2("cmps.f.ge", big, mag, big)
    self.sel(d, d, big, c); self.sel(d + 1, d + 1, big, self.zero_reg)
    if signed:
      # -mag as a pair: the low word negated, the high word inverted plus the carry of a zero low word
      self.op2("cmps.u.ne", c, d, self.zero_reg)
      self.alu(f"absneg.s {rname(e)}, (neg){rname(d)}", e, d)
      self.alu(f"not.b {rname(m)}, {rname(d + 1)}", m, d + 1)
      self.op2("xor.b", c, c, "1"); self.op2("add.u", m, m, c)
      self.sel(d, e, neg, d); self.sel(d + 1, m, neg, d + 1)
      over, lim = big, 0x5F000000                                   # |t| >= 2^63
    else: over, lim = big, 0x5F800000                               # t >= 2^64
    self.mov_imm(over, lim)
    self.op2("cmps.f.ge", over, mag, over)
    if signed:   # INT64_MAX or INT64_MIN by the sign
      self.mov_imm(c, 0x7FFFFFFF); self.mov_imm(e, 0xFFFFFFFF)
      self.mov_imm(m, 0x80000000); self.sel(c, m, neg, c)           # high word
      self.sel(e, self.zero_reg, neg, e)                            # low word
      self.sel(d, e, over, d); self.sel(d + 1, c, over, d + 1)
    else:        # UINT64_MAX above the range, 0 below it (any negative)
      self.mov_imm(c, 0xFFFFFFFF)
      self.sel(d, c, over, d); self.sel(d + 1, c, over, d + 1)
      self.sel(d, self.zero_reg, neg, d); self.sel(d + 1, self.zero_reg, neg, d + 1)
    self.op2("cmps.f.ne", c, a, a)                                  # NaN
    self.sel(d, self.zero_reg, c, d); self.sel(d + 1, self.zero_reg, c, d + 1)

  def alu64(self, u: UOp, d: int, rs: list):
    op = u.op
    signed = u.src[0].dtype.kind == "int"
    if op is Ops.ADD: self.add64(d, rs[0], rs[1])
    elif op is Ops.SUB: self.add64(d, rs[0], rs[1], sub=True)
    elif op is Ops.MUL: self.mul64(d, rs[0], rs[1])
    elif op is Ops.NEG: self.neg64(d, rs[0])
    elif op in (Ops.AND, Ops.OR, Ops.XOR):
      for h in (0, 1): self.op2(f"{op.name.lower()}.b", d + h, rs[0] + h, rs[1] + h)
    elif op is Ops.NOT:
      for h in (0, 1): self.alu_text("not.b", d + h, rs[0] + h)
    elif op is Ops.WHERE: self.sel(d, rs[1], rs[0], rs[2]); self.sel(d + 1, rs[1] + 1, rs[0], rs[2] + 1)
    elif op is Ops.SHL: self.shift64(d, rs[0], rs[1], "shl")
    elif op is Ops.SHR: self.shift64(d, rs[0], rs[1], "ashr" if signed else "shr")
    elif op in (Ops.IDIV, Ops.IMOD): self.divmod64(d, rs[0], rs[1], signed, op is Ops.IMOD)
    else: raise CompileError(f"ir3 backend: no 64-bit sequence for {op.name}: {_short(u)}", u)
