"""Integer division and modulo for the RDNA3 instruction selector (a mixin of isel.ISel): by powers of two
(shift / mask), by other constants (magic multiplication, magic_u32) and by run-time divisors (a float reciprocal
estimate refined in integers). C's truncating semantics; signs handled on absolute values."""
from __future__ import annotations

from ...ir import UOp
from .isel_common import Ops, _err, value_of
from .isel_mir import Imm


def magic_u32(d: int, nmax: int) -> tuple[int, int] | None:
  """(m, s) with floor(n * m / 2^(32+s)) == n // d for every 0 <= n <= nmax, m < 2^32 (one v_mul_hi_u32 and a
  shift). With m = ceil(2^(32+s) / d) and e = m*d - 2^(32+s) (0 <= e < d): n*m / 2^(32+s) = n/d + n*e / (d 2^(32+s)),
  and the error term keeps the floor unchanged when n*e < 2^(32+s), since n/d's fraction is at most (d-1)/d.
  The smallest s that works is used; None when m would need 33 bits."""
  for s in range(0, 33):
    m = -(-(1 << (32 + s)) // d)
    if m >= 1 << 32: return None
    if nmax * (m * d - (1 << (32 + s))) < (1 << (32 + s)): return m, s
  return None


class DivModSelector:
  def divmod(self, u: UOp, s):
    n_u, d_u = u.src
    n, d = s
    want_q = u.op is Ops.IDIV
    unsigned = u.dtype.is_unsigned
    if isinstance(d, Imm):
      dv = value_of(d, d_u.dtype)
      if dv == 0: raise _err(u, "division by the constant 0")
      if (unsigned or n_u.vmin >= 0) and dv > 0:
        return self.udiv_const(n, dv, int(min(n_u.vmax, 2**32 - 1)), want_q)
      if not unsigned and dv != -2**31:
        # |n| / |d| by a magic multiplication, then C's signs: q negative when the signs differ, r has n's sign
        sn = self.vop("v_ashrrev_i32_e64", Imm(31), n)
        an = self.vop("v_xor_b32_e64", self.vop("v_add_nc_u32_e64", n, sn), sn)
        q = self.udiv_const(an, abs(dv), 2**31, True)
        if want_q:
          sq = sn if dv > 0 else self.vop("v_xor_b32_e64", sn, Imm(-1))
          return self.vop("v_sub_nc_u32_e64", self.vop("v_xor_b32_e64", q, sq), sq)
        r = self.vop("v_sub_nc_u32_e64", an, self.mul_imm(q, abs(dv)))
        return self.vop("v_sub_nc_u32_e64", self.vop("v_xor_b32_e64", r, sn), sn)
    if unsigned or (n_u.vmin >= 0 and d_u.vmin > 0):
      q, r = self.udivmod(n, d)
      return q if want_q else r
    sn = self.vop("v_ashrrev_i32_e64", Imm(31), n)
    sd = self.vop("v_ashrrev_i32_e64", Imm(31), d)
    an = self.vop("v_xor_b32_e64", self.vop("v_add_nc_u32_e64", n, sn), sn)
    ad = self.vop("v_xor_b32_e64", self.vop("v_add_nc_u32_e64", d, sd), sd)
    q, r = self.udivmod(an, ad)
    if want_q:
      sq = self.vop("v_xor_b32_e64", sn, sd)
      return self.vop("v_sub_nc_u32_e64", self.vop("v_xor_b32_e64", q, sq), sq)
    return self.vop("v_sub_nc_u32_e64", self.vop("v_xor_b32_e64", r, sn), sn)

  def mul_imm(self, x, c: int):
    if c & (c - 1) == 0: return self.vop("v_lshlrev_b32_e64", Imm(c.bit_length() - 1), x)
    return self.vop("v_mul_lo_u32", x, Imm(c))

  def udiv_const(self, n, d: int, nmax: int, want_q: bool):
    """n // d (or n % d) for 0 <= n <= nmax: a power of two by shift/mask, else q = mulhi(n, m) >> s (magic_u32),
    else the runtime algorithm with d as a constant."""
    if d == 1: q = n
    elif d & (d - 1) == 0:
      if not want_q: return self.vop("v_and_b32_e64", n, Imm(d - 1))
      q = self.vop("v_lshrrev_b32_e64", Imm(d.bit_length() - 1), n)
    else:
      magic = magic_u32(d, nmax)
      if magic is None:
        q, r = self.udivmod(n, Imm(d))
        return q if want_q else r
      m, sh = magic
      q = self.vop("v_mul_hi_u32", n, Imm(m))
      if sh: q = self.vop("v_lshrrev_b32_e64", Imm(sh), q)
    if want_q: return q
    return self.vop("v_sub_nc_u32_e64", n, self.mul_imm(q, d))

  def udivmod(self, n, d):
    """Unsigned 32-bit division by a runtime divisor: a float reciprocal estimate of 2^32/d, one Newton-Raphson
    step in integers, then the quotient corrected at most twice."""
    fd = self.vop("v_cvt_f32_u32_e64", d)
    rc = self.vop("v_rcp_f32_e64", fd)
    rc = self.vop("v_mul_f32_e64", rc, Imm(0x4f7ffffe, "f32"))     # 4294966784.0: just below 2^32
    z = self.vop("v_cvt_u32_f32_e64", rc)
    negd = self.vop("v_sub_nc_u32_e64", Imm(0), d)
    e = self.vop("v_mul_lo_u32", negd, z)                             # -d*z mod 2^32: the error of z*d vs 2^32
    z = self.vop("v_add_nc_u32_e64", z, self.vop("v_mul_hi_u32", z, e))
    q = self.vop("v_mul_hi_u32", n, z)
    r = self.vop("v_sub_nc_u32_e64", n, self.vop("v_mul_lo_u32", q, d))
    for _ in range(2):
      big = self.vcmp("v_cmp_ge_u32_e64", r, d)
      q = self.cndmask(big, q, self.vop("v_add_nc_u32_e64", q, Imm(1)))
      r = self.cndmask(big, r, self.vop("v_sub_nc_u32_e64", r, d))
    return q, r
