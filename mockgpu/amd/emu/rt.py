"""Run-time helpers called by translated blocks (as R.*): lane masks, 64-bit pairs, 16-bit halves, float and integer
helpers with the ISA's semantics. Memory accesses are in memaccess.py (M.* in blocks), cross-lane moves in lanes.py.

Register values are uint32 numpy arrays: SGPRs (n,), VGPRs (n, L), n = waves executing the block, L = lanes per wave
(32, or 64 in wave64 where a lane mask is an SGPR pair: lanes2/pack2/all_ones2).
"""
from __future__ import annotations

import numpy as np

from .lanes import dpp8, dpp16, permlane16, permute, swizzle  # noqa: F401 (called by translated blocks as R.*)
from .memaccess import PRIVATE_HI, SHARED_HI, MemAccess, atomic, bcast  # noqa: F401 (the engine builds MemAccess)
from ...floats import exact_round, fma16, fma32, fma64  # noqa: F401 (called by translated blocks as R.fma32, ...)

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64
LANE = np.arange(32, dtype=np.uint32)
LANE_BELOW = ((np.uint64(1) << LANE.astype(np.uint64)) - np.uint64(1)).astype(np.uint32)  # bits of lanes < L
# wave64 (V_MBCNT_LO/HI_U32_B32): the bits of the lanes below lane L within EXEC_LO / within EXEC_HI
_L64 = np.arange(64, dtype=np.int64)
LANE_BELOW64_LO = np.where(_L64 >= 32, 0xFFFFFFFF, (1 << np.minimum(_L64, 31)) - 1).astype(np.uint32)
LANE_BELOW64_HI = np.where(_L64 < 32, 0, (1 << np.clip(_L64 - 32, 0, 31)) - 1).astype(np.uint32)
FULL = np.uint32(0xFFFFFFFF)



# ---- lane masks ----
def lanes(mask: np.ndarray) -> np.ndarray:
  """(n,) u32 wave masks -> (n, 32) bool per lane."""
  m = np.ascontiguousarray(mask, dtype=u32)
  return np.unpackbits(m.view(u8).reshape(-1, 4), axis=1, bitorder="little").view(np.bool_)


def pack(bits: np.ndarray) -> np.ndarray:
  """(n, 32) bool -> (n,) u32 wave masks."""
  b = np.ascontiguousarray(bits, dtype=np.bool_)
  return np.packbits(b, axis=1, bitorder="little").view("<u4").reshape(-1).astype(u32)


def lanes2(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
  """Wave64 masks held in SGPR pairs: (n,) u32 low and high halves -> (n, 64) bool per lane."""
  m = np.empty((np.shape(lo)[0] if np.ndim(lo) else np.shape(hi)[0], 2), u32)
  m[:, 0] = lo
  m[:, 1] = hi
  return np.unpackbits(m.view(u8), axis=1, bitorder="little").view(np.bool_)


def lanes64(mask: np.ndarray) -> np.ndarray:
  """(n,) u64 wave64 masks -> (n, 64) bool per lane."""
  m = np.ascontiguousarray(mask, dtype=u64)
  return np.unpackbits(m.view(u8).reshape(-1, 8), axis=1, bitorder="little").view(np.bool_)


def pack2(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(n, 64) bool -> the (n,) u32 low and high halves of the wave64 masks."""
  b = np.ascontiguousarray(bits, dtype=np.bool_)
  words = np.packbits(b, axis=1, bitorder="little").view("<u4")
  return words[:, 0].astype(u32), words[:, 1].astype(u32)


def all_ones2(lo: np.ndarray, hi: np.ndarray) -> bool:
  """Whether every wave's 64-lane mask (an SGPR pair) has all lanes."""
  return all_ones(lo) and all_ones(hi)


def all_ones(mask: np.ndarray) -> bool:
  """Whether every wave's mask has all 32 lanes (True for no waves). Run at the start of most blocks: a few waves
  are compared as Python ints, more by one AND reduction (not `(mask == FULL).all()`: two numpy calls, ~1 us)."""
  if mask.ndim == 1 and mask.size <= 8: return mask.tolist().count(0xFFFFFFFF) == mask.size
  return bool(np.bitwise_and.reduce(mask, axis=None) == FULL)


def lanes_shaped(x, shape: tuple) -> np.ndarray:
  """x with the lanes' shape (n, L): itself when it has it, else a read-only broadcast view (no copy)."""
  x = np.asarray(x)
  return x if x.shape == shape else np.broadcast_to(x, shape)


def vfix(x, shape: tuple) -> np.ndarray:
  """A VALU result as a fresh, writable (n, L) array (shape = (n, L))."""
  if isinstance(x, np.ndarray) and x.shape == shape and x.dtype == u32 and x.flags.writeable: return x
  return np.array(np.broadcast_to(x, shape))


def sfix(x, n: int, dtype=u32) -> np.ndarray:
  """A scalar result as a fresh (n,) array."""
  if isinstance(x, np.ndarray) and x.shape == (n,) and x.dtype == dtype and x.flags.writeable: return x
  return np.array(np.broadcast_to(np.asarray(x).astype(dtype), (n,)))


# ---- 64-bit pairs ----
def p64(lo, hi) -> np.ndarray:
  """Two u32 halves -> u64 (interleaving into a fresh buffer is the cheapest way in numpy)."""
  lo = np.asarray(lo)
  hi = np.asarray(hi)
  # (np.broadcast_shapes costs ~1.3 us: a register pair has halves of one shape)
  shape = lo.shape if lo.shape == hi.shape else np.broadcast_shapes(lo.shape, hi.shape)
  out = np.empty(shape + (2,), u32)
  out[..., 0] = lo
  out[..., 1] = hi
  return out.view(u64)[..., 0]


def lo32(x) -> np.ndarray:
  return np.asarray(x).astype(u32)


def hi32(x) -> np.ndarray:
  return (np.asarray(x).view(u64) >> u64(32)).astype(u32) if np.asarray(x).dtype != u64 else (x >> u64(32)).astype(u32)


def bits64(x) -> np.ndarray:
  """Any 64-bit typed array as u64."""
  x = np.asarray(x)
  if x.dtype == u64: return x
  if x.dtype.itemsize == 8: return x.view(u64)
  return x.astype(u64)


# ---- gfx9 SDWA sub-dword selects (MI300 ISA "SDWA": SEL 0-3 BYTE_0..3, 4/5 WORD_0/1, 6 DWORD) ----
_SEL_SHIFT = (0, 8, 16, 24, 0, 16, 0)
_SEL_BITS = (8, 8, 8, 8, 16, 16, 32)


def sdwa_sel(x, sel: int, sext: bool) -> np.ndarray:
  """The selected byte/word of x (u32), zero- or sign-extended to u32."""
  x = np.asarray(x, u32)
  sh, bits = _SEL_SHIFT[sel], _SEL_BITS[sel]
  if bits == 32: return x
  v = (x >> u32(sh)) & u32((1 << bits) - 1)
  if sext: v = ((v << u32(32 - bits)).view(i32) >> i32(32 - bits)).view(u32)
  return v


def sdwa_dst(old, r, sel: int, unused: int) -> np.ndarray:
  """A result r (u32) written into the DST_SEL field of the destination: the other bits zero (UNUSED_PAD),
  the field's sign bit repeated above it (UNUSED_SEXT) or those of old (UNUSED_PRESERVE)."""
  sh, bits = _SEL_SHIFT[sel], _SEL_BITS[sel]
  r = np.asarray(r, u32)
  if bits == 32: return r
  field = u32(((1 << bits) - 1) << sh)
  v = (r << u32(sh)) & field
  if unused == 2: return (np.asarray(old, u32) & ~field) | v
  if unused == 1:
    top = sh + bits
    v = ((v << u32(32 - top)).view(i32) >> i32(32 - top)).view(u32) if top < 32 else v
  return v


# ---- 16-bit halves ----
def half(x, hi: bool) -> np.ndarray:
  x = np.asarray(x, dtype=u32)
  return ((x >> u32(16)) if hi else (x & u32(0xFFFF))).astype(u16)


def put_half(old, val, hi: bool) -> np.ndarray:
  v = np.asarray(val).view(u16) if np.asarray(val).dtype.itemsize == 2 else np.asarray(val).astype(u16)
  v = v.astype(u32)
  if hi: return (old & u32(0xFFFF)) | (v << u32(16))
  return (old & u32(0xFFFF0000)) | v


def as_f32(x) -> np.ndarray:
  return np.asarray(x).astype(f32, copy=False)


def f32bits(x) -> np.ndarray:
  return np.asarray(x).astype(f32, copy=False).view(u32)


def f64bits(x) -> np.ndarray:
  return np.asarray(x).astype(f64, copy=False).view(u64)


def ibits(x) -> np.ndarray:
  """An integer-typed result as u32 (wraps)."""
  return np.asarray(x).astype(u32)


def ibits_new(x) -> np.ndarray:
  """An integer-typed result that is a new array (never a register) as u32: converted only when it is not u32
  already (ibits copies always)."""
  x = np.asarray(x)
  return x if x.dtype == u32 else x.astype(u32)


def ibits64(x) -> np.ndarray:
  return np.asarray(x).astype(i64, copy=False).view(u64) if np.asarray(x).dtype.kind == "i" else np.asarray(x).astype(u64)


# ---- float helpers (RDNA3 ISA semantics where they differ from numpy) ----
def clamp01(x):
  return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def fmax(a, b):
  return np.fmax(a, b)


def fmin(a, b):
  return np.fmin(a, b)


def frexp_mant(x):
  m, _ = np.frexp(x)
  return np.where(np.isfinite(x), m, x).astype(x.dtype)


def frexp_exp(x):
  _, e = np.frexp(x)
  return np.where(np.isfinite(x), e, 0).astype(i32)


def ldexp(x, e):
  return np.ldexp(x, np.clip(np.asarray(e, i64), -2000, 2000).astype(i32)).astype(x.dtype)


def fract(x):
  f = x - np.floor(x)
  one_minus = np.nextafter(x.dtype.type(1), x.dtype.type(0))
  return np.where(np.isfinite(x), np.minimum(f, one_minus), np.where(np.isinf(x), x.dtype.type(0), x)).astype(x.dtype)


def cvt_f_to_i(x, dtype):
  info = np.iinfo(dtype)
  xf = np.asarray(x, f64)
  r = np.where(np.isnan(xf), 0, np.clip(np.trunc(xf), info.min, info.max))
  return r.astype(dtype)


def cmp_class(x, mask):
  """V_CMP_CLASS: bit 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denorm, 5 -0, 6 +0, 7 +denorm, 8 +normal, 9 +inf."""
  x = np.asarray(x)
  mask = np.asarray(mask).astype(u32)
  ftype = x.dtype
  bits = x.view({2: u16, 4: u32, 8: u64}[ftype.itemsize])
  mant_bits = {2: 10, 4: 23, 8: 52}[ftype.itemsize]
  quiet = ((bits >> bits.dtype.type(mant_bits - 1)) & bits.dtype.type(1)).astype(bool)
  neg = np.signbit(x)
  tiny = np.finfo(ftype).tiny
  isnan = np.isnan(x)
  isinf = np.isinf(x)
  iszero = x == 0
  isden = (~iszero) & (np.abs(x) < tiny) & ~isnan
  isnorm = ~(isnan | isinf | iszero | isden)
  cls = np.where(isnan & ~quiet, 0, np.where(isnan, 1, 0))
  cls = np.where(isinf, np.where(neg, 2, 9), cls)
  cls = np.where(isnorm, np.where(neg, 3, 8), cls)
  cls = np.where(isden, np.where(neg, 4, 7), cls)
  cls = np.where(iszero, np.where(neg, 5, 6), cls)
  return ((mask >> cls.astype(u32)) & u32(1)).astype(bool)


def div_scale(s0, s1, s2, ftype):
  """V_DIV_SCALE_F32/F64 (RDNA3 ISA pseudocode): S0 is the value to scale (numerator or denominator), S1 the
  denominator, S2 the numerator. Returns (D, VCC lanes); scaling by 2**64 (f64: 2**128) where the quotient would
  leave the normal range, else D = S0 and VCC = 0.
  One deliberate difference from the pseudocode's text: where 1/den and num/den are both denormal, the document
  scales the (huge) denominator by 2**+128, which makes it inf and the division macro's result 0; the denominator is
  scaled by 2**-128 here (the quotient estimate is then 2**128 too big and V_DIV_FMAS scales it back), the only
  direction in which the macro the document describes (V_DIV_SCALE, V_RCP, Newton-Raphson, V_DIV_FMAS, V_DIV_FIXUP)
  gives the quotient. tests/emu/test_instructions.py pins both."""
  s0, s1, s2 = (np.asarray(v, ftype) for v in (s0, s1, s2))
  f64t = ftype == f64
  big = 128 if f64t else 64
  gap = 768 if f64t else 96
  tiny_exp = 53 if f64t else 23
  ubits = u64 if f64t else u32
  ebits, mbits = (11, 52) if f64t else (8, 23)
  def exponent(x):
    return ((x.view(ubits) >> ubits(mbits)) & ubits((1 << ebits) - 1)).astype(np.int64)
  with np.errstate(all="ignore"):
    tiny = np.finfo(ftype).tiny
    shape = np.broadcast(s0, s1, s2).shape
    s0, s1, s2 = (np.broadcast_to(v, shape) for v in (s0, s1, s2))
    e1, e2 = exponent(s1), exponent(s2)
    inv_den = np.abs(ftype(1) / s1) < tiny
    quot_den = np.abs(s2 / s1) < tiny
    up = np.ldexp(s0, big).astype(ftype)
    down = np.ldexp(s0, -big).astype(ftype)
    zero = (s1 == 0) | (s2 == 0)
    c1 = ~zero & (e2 - e1 >= gap)
    c2 = ~zero & ~c1 & (np.abs(s1) < tiny) & (s1 != 0)
    c3 = ~zero & ~c1 & ~c2 & inv_den & quot_den
    c4 = ~zero & ~c1 & ~c2 & ~c3 & inv_den
    c5 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & quot_den
    c6 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & ~c5 & (e2 <= tiny_exp)
    d = s0
    d = np.where(c1 & (s0 == s1), up, d)
    d = np.where(c2, up, d)
    d = np.where(c3 & (s0 == s1), down, d)   # a huge denominator: scaled down (up it would overflow to inf)
    d = np.where(c4, down, d)
    d = np.where(c5 & (s0 == s2), up, d)
    d = np.where(c6, up, d)
    d = np.where(zero, ftype(np.nan), d)
    vcc = c1 | c3 | c5
  return d.astype(ftype), vcc


def div_fmas(a, b, c, vcc, ftype):
  """V_DIV_FMAS_F32/F64: fma(S0, S1, S2), where VCC is set scaled by 2**64 (f64: 2**128) when S2's exponent is above
  the bias (the scaled quotient estimate is too small: V_DIV_SCALE scaled the denominator up) and by 2**-64 (2**-128)
  otherwise (the numerator was scaled up, or the denominator down). The ISA pseudocode's text has a fixed 2**32
  (f64: 2**64), which undoes neither of V_DIV_SCALE's scalings (2**+-64, f64 2**+-128, in both directions): the
  division macro needs the factor that undoes the one V_DIV_SCALE applied."""
  r = np.array(fma64(a, b, c) if ftype == f64 else fma32(a, b, c), ftype)
  big, bias, mbits, ub = (128, 1023, 52, u64) if ftype == f64 else (64, 127, 23, u32)
  exp = ((np.asarray(c, ftype).view(ub) >> ub(mbits)) & ub(2 * bias + 1)).astype(np.int64)
  scale = np.broadcast_to(np.where(exp > bias, big, -big), r.shape)
  vcc = np.broadcast_to(np.asarray(vcc, bool), r.shape)
  # the scaling is part of the one rounding (a denormal quotient rounded twice would be off by an ulp): exactly, for
  # the lanes with VCC and finite operands (the division macro's rare extreme cases)
  aa, bb, cc = (np.broadcast_to(np.asarray(v, ftype), r.shape) for v in (a, b, c))
  with np.errstate(all="ignore"):
    out = np.where(vcc, np.ldexp(r, scale).astype(ftype), r).astype(ftype)
    exact = vcc & np.isfinite(aa) & np.isfinite(bb) & np.isfinite(cc)
  if exact.any():
    from fractions import Fraction
    for i in zip(*np.nonzero(exact)):
      v = (Fraction(float(aa[i])) * Fraction(float(bb[i])) + Fraction(float(cc[i]))) * Fraction(2) ** int(scale[i])
      out[i] = exact_round(v, ftype, zero_sign=bool(np.signbit(r[i])))
  return out


def div_fixup(s0, s1, s2, ftype):
  """V_DIV_FIXUP_F16/F32/F64, s0 = quotient estimate, s1 = denominator, s2 = numerator. The RDNA3 ISA pseudocode's
  cases, first match wins: a NaN numerator, then a NaN denominator, quieted; 0/0 and inf/inf the default NaN with the
  sign bit set (0xfe00 / 0xffc00000 / 0xfff8000000000000); x/0 and inf/y +-inf; x/inf and 0/y +-0; exponent(num) -
  exponent(den) below -(mantissa bits + bias) (-25, -150, -1075: the quotient rounds to 0) +-UNDERFLOW, taken as
  +-0; a denominator exponent of all ones +-OVERFLOW, taken as +-inf; else +-|s0|, the sign being sign(s1) ^ sign(s2),
  and +-inf where s0 is a NaN (an overflowed estimate)."""
  q, den, num = (np.asarray(v, ftype) for v in (s0, s1, s2))
  ub = {2: u16, 4: u32, 8: u64}[np.dtype(ftype).itemsize]
  nbits = 8 * np.dtype(ftype).itemsize
  mbits = {16: 10, 32: 23, 64: 52}[nbits]
  emask = (1 << (nbits - mbits - 1)) - 1
  quiet = ub(1 << (mbits - 1))
  default_nan = np.asarray(ub(((1 << (nbits - mbits + 1)) - 1) << (mbits - 1)), ub).view(ftype)   # sign, exponent, quiet
  exponent = lambda x: ((x.view(ub) >> ub(mbits)) & ub(emask)).astype(np.int64)
  with np.errstate(all="ignore"):
    sign = np.signbit(den) ^ np.signbit(num)
    zero, inf = np.where(sign, ftype(-0.0), ftype(0.0)), np.where(sign, ftype(-np.inf), ftype(np.inf))
    # the last case: +-|s0|, and +-OVERFLOW (inf) for a NaN estimate: the division macro's estimate of a quotient past
    # the range is inf and its residual -inf, which V_DIV_FMAS makes a NaN (the pseudocode's text leaves this case
    # out; the division it is the last step of needs it)
    r = np.where(np.isnan(q), inf, np.where(sign, -np.abs(q), np.abs(q)))
    r = np.where(exponent(den) == emask, inf, r)
    r = np.where(exponent(num) - exponent(den) < -(mbits + emask // 2), zero, r)
    r = np.where(np.isinf(den) | (num == 0), zero, r)
    r = np.where((den == 0) | np.isinf(num), inf, r)
    r = np.where(((den == 0) & (num == 0)) | (np.isinf(den) & np.isinf(num)), default_nan, r)
    r = np.where(np.isnan(den), (den.view(ub) | quiet).view(ftype), r)
    r = np.where(np.isnan(num), (num.view(ub) | quiet).view(ftype), r)
  return np.asarray(r).astype(ftype)


# ---- integer helpers ----
def clz32(x):
  """Count of leading zeros (x != 0), -1 (all ones) for 0: V_CLZ_I32_U32 / S_CLZ_I32_U32."""
  x = np.asarray(x, u32)
  _, e = np.frexp(x.astype(f64))
  return np.where(x == 0, u32(0xFFFFFFFF), (32 - e).astype(u32)).astype(u32)


def ctz32(x):
  x = np.asarray(x, u32)
  low = (x & (~x + u32(1))).astype(f64)
  _, e = np.frexp(low)
  return np.where(x == 0, u32(0xFFFFFFFF), (e - 1).astype(u32)).astype(u32)


def popcount(x):
  return np.bitwise_count(np.asarray(x)).astype(u32)


def bfe_u(x, off, width):
  x = np.asarray(x, u32)
  off = np.asarray(off, u32) & u32(31)
  width = np.asarray(width, u32) & u32(31)
  mask = ((u64(1) << width.astype(u64)) - u64(1)).astype(u32)
  return (x >> off) & mask


def bfe_i(x, off, width):
  v = bfe_u(x, off, width)
  width = np.asarray(width, u32) & u32(31)
  sh = (u32(32) - width) & u32(31)
  r = ((v << sh).view(i32) >> sh.astype(i32)).view(u32)
  return np.where(width == 0, u32(0), r)


def mul_hi_u32(a, b):
  return ((np.asarray(a, u32).astype(u64) * np.asarray(b, u32).astype(u64)) >> u64(32)).astype(u32)


def mul_hi_i32(a, b):
  return ((np.asarray(a).view(i32).astype(i64) * np.asarray(b).view(i32).astype(i64)) >> i64(32)).astype(u32)


def brev32(x):
  """Bit reverse of u32 values (any shape, scalars included)."""
  x = np.asarray(x, u32)
  for sh, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF), (16, 0x0000FFFF)):
    x = ((x >> u32(sh)) & u32(m)) | ((x & u32(m)) << u32(sh))
  return x


def med3f(a, b, c):
  return np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))


def med3i(a, b, c):
  return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def pack16(lo, hi):
  """Two 16-bit values (any 16-bit dtype) -> u32 lo | hi << 16."""
  lo = np.asarray(lo)
  hi = np.asarray(hi)
  lo = lo.view(u16) if lo.dtype.itemsize == 2 else lo.astype(u16)
  hi = hi.view(u16) if hi.dtype.itemsize == 2 else hi.astype(u16)
  return lo.astype(u32) | (hi.astype(u32) << u32(16))


def pk_rtz(a, b):
  """V_CVT_PK_RTZ_F16_F32: round toward zero to f16."""
  def rtz(x):
    x = np.asarray(x, f32)
    h = x.astype(f16)
    over = np.abs(h.astype(f32)) > np.abs(x)
    toward = np.nextafter(h, f16(0))
    return np.where(over & np.isfinite(x), toward, h).astype(f16)
  return pack16(rtz(a), rtz(b))


def cls32(x):
  x = np.asarray(x).view(i32) if np.asarray(x).dtype == u32 else np.asarray(x, i32)
  y = np.where(x < 0, ~x, x).astype(u32)
  c = clz32(y)
  return np.where((x == 0) | (x == -1), u32(0xFFFFFFFF), c - u32(1)).astype(u32)


def sat_i32(x):
  return np.clip(x, -2**31, 2**31 - 1).astype(i32)


def sext24(x):
  x = np.asarray(x, u32)
  return ((x << u32(8)).view(i32) >> i32(8)).astype(i64)


def perm(s0, s1, sel):
  """V_PERM_B32: byte select from {s0, s1} by the bytes of sel (RDNA3 ISA)."""
  data = p64(s1, s0)
  sel = np.asarray(sel, u32)
  out = np.zeros(np.broadcast(data, sel).shape, u32)
  for k in range(4):
    b = ((sel >> u32(8 * k)) & u32(0xFF)).astype(u64)
    byte = ((data >> (np.minimum(b, u64(7)) * u64(8))) & u64(0xFF)).astype(u32)
    sign_src = {8: 15, 9: 31, 10: 47, 11: 63}
    r = byte
    for code, bit in sign_src.items():
      r = np.where(b == code, np.where((data >> u64(bit)) & u64(1), u32(0xFF), u32(0)), r)
    r = np.where(b == 12, u32(0), np.where(b >= 13, u32(0xFF), r))
    out |= r.astype(u32) << u32(8 * k)
  return out


def wqm(x):
  x = np.asarray(x, u32)
  out = np.zeros_like(x)
  for q in range(8):
    nib = (x >> u32(4 * q)) & u32(0xF)
    out |= np.where(nib != 0, u32(0xF), u32(0)) << u32(4 * q)
  return out


def quadmask(x):
  x = np.asarray(x, u32)
  out = np.zeros_like(x)
  for q in range(8):
    out |= np.where(((x >> u32(4 * q)) & u32(0xF)) != 0, u32(1), u32(0)) << u32(q)
  return out


def ftz(x):
  """Flush denormals to zero of the same sign (a denormal mode of 'flush')."""
  x = np.asarray(x)
  if x.dtype.kind != "f": return x
  tiny = np.finfo(x.dtype).tiny
  return np.where(np.abs(x) < tiny, np.copysign(x.dtype.type(0), x), x).astype(x.dtype)


# ---- V_TRIG_PREOP_F64 (RDNA3 ISA pseudocode: 53-bit segments of the 1201-bit fraction of 2/pi) ----
_TRIG_TABLE = None


def _pi_fixed(bits: int) -> int:
  """floor(pi * 2**bits) by Machin's formula in integer arithmetic (with guard bits)."""
  guard = bits + 32
  one = 1 << guard
  def arctan_inv(x: int) -> int:
    total, term, k, sign = 0, one // x, 1, 1
    x2 = x * x
    while term:
      total += sign * (term // k)
      term //= x2
      k += 2
      sign = -sign
    return total
  return (4 * (4 * arctan_inv(5) - arctan_inv(239))) >> 32


def _trig_table():
  global _TRIG_TABLE
  if _TRIG_TABLE is None:
    two_over_pi = (1 << (1202 + 1400)) // _pi_fixed(1400)     # floor(2/pi * 2**1201): the 1201-bit fraction
    mask = (1 << 53) - 1
    _TRIG_TABLE = np.array([float(((two_over_pi << sh) >> (1201 - 53)) & mask) for sh in range(31 * 53 + 2048)], f64)
  return _TRIG_TABLE


def trig_preop(x, seg):
  x = np.asarray(x, f64)
  exp = ((x.view(u64) >> u64(52)) & u64(0x7FF)).astype(np.int64)
  shift = (np.asarray(seg).astype(np.int64) & 31) * 53 + np.where(exp > 1077, exp - 1077, 0)
  scale = -53 - shift + np.where(exp >= 1968, 128, 0)
  table = _trig_table()
  return np.ldexp(table[np.clip(shift, 0, table.size - 1)], scale.astype(np.int32)).astype(f64)


# ---- less common VALU helpers (RDNA3 ISA pseudocode) ----
def norm16(x, signed: bool):
  """Float -> 16-bit normalised integer (round to nearest, saturating): V_CVT_NORM_I16/U16 and the packed forms."""
  x = np.asarray(x, f64)
  scale = 32767.0 if signed else 65535.0
  lo = -1.0 if signed else 0.0
  v = np.rint(np.clip(np.nan_to_num(x), lo, 1.0) * scale)
  return v.astype(i16) if signed else v.astype(u16)


def cvt_pk_u8(x, sel, old):
  """V_CVT_PK_U8_F32: round f32 to u8 (saturating) into byte sel[1:0] of old."""
  byte = np.clip(np.rint(np.nan_to_num(np.asarray(x, f64))), 0, 255).astype(u32)
  sh = (np.asarray(sel, u32) & u32(3)) * u32(8)
  return (np.asarray(old, u32) & ~(u32(0xFF) << sh)) | (byte << sh)


def sad_u8(a, b, masked: bool = False):
  a, b = np.asarray(a, u32), np.asarray(b, u32)
  total = np.zeros(np.broadcast(a, b).shape, u32)
  for k in range(4):
    x = ((a >> u32(8 * k)) & u32(0xFF)).astype(np.int64)
    y = ((b >> u32(8 * k)) & u32(0xFF)).astype(np.int64)
    d = np.abs(x - y).astype(u32)
    if masked: d = np.where(y == 0, u32(0), d)     # V_MSAD_U8: reference bytes of 0 are skipped
    total = total + d
  return total


def sad_u16(a, b):
  a, b = np.asarray(a, u32), np.asarray(b, u32)
  total = np.zeros(np.broadcast(a, b).shape, u32)
  for k in range(2):
    x = ((a >> u32(16 * k)) & u32(0xFFFF)).astype(np.int64)
    y = ((b >> u32(16 * k)) & u32(0xFFFF)).astype(np.int64)
    total = total + np.abs(x - y).astype(u32)
  return total


def lerp_u8(a, b, c):
  """V_LERP_U8: per byte ((a + b + (c & 1)) >> 1)."""
  a, b, c = np.asarray(a, u32), np.asarray(b, u32), np.asarray(c, u32)
  out = np.zeros(np.broadcast(a, b, c).shape, u32)
  for k in range(4):
    sh = u32(8 * k)
    x, y, z = ((v >> sh) & u32(0xFF) for v in (a, b, c))
    out |= (((x + y + (z & u32(1))) >> u32(1)) & u32(0xFF)) << sh
  return out


def dot2_f16(a, b, c):
  """V_DOT2_F16_F16: a.lo*b.lo + a.hi*b.hi + c, rounded once to f16."""
  al, ah = half(a, False).view(f16), half(a, True).view(f16)
  bl, bh = half(b, False).view(f16), half(b, True).view(f16)
  return (np.asarray(al, f64) * bl + np.asarray(ah, f64) * bh + np.asarray(c, f64)).astype(f16)


def dot_int(a, b, c, bits: int, sa: bool, sb: bool, signed_acc: bool):
  """V_DOT4_I32_IU8 / V_DOT4_U32_U8 / V_DOT8_I32_IU4 / V_DOT8_U32_U4: sum of the products of the 8- or 4-bit
  elements plus c (sa/sb: element signedness of each operand), wrapping to 32 bits."""
  a, b = np.asarray(a, u32), np.asarray(b, u32)
  c = np.asarray(c, u32)
  total = c.view(i32).astype(np.int64) if signed_acc else c.astype(np.int64)
  mask = (1 << bits) - 1
  for k in range(32 // bits):
    x = ((a >> u32(bits * k)) & u32(mask)).astype(np.int64)
    y = ((b >> u32(bits * k)) & u32(mask)).astype(np.int64)
    if sa: x = np.where(x >> (bits - 1), x - (1 << bits), x)
    if sb: y = np.where(y >> (bits - 1), y - (1 << bits), y)
    total = total + x * y
  return total.astype(u32)


def ctz64(x):
  x = np.asarray(x, u64)
  lo, hi = x.astype(u32), (x >> u64(32)).astype(u32)
  return np.where(lo != 0, ctz32(lo), np.where(hi != 0, ctz32(hi) + u32(32), u32(0xFFFFFFFF))).astype(u32)


def clz64(x):
  x = np.asarray(x, u64)
  lo, hi = x.astype(u32), (x >> u64(32)).astype(u32)
  return np.where(hi != 0, clz32(hi), np.where(lo != 0, clz32(lo) + u32(32), u32(0xFFFFFFFF))).astype(u32)
