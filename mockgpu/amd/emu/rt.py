"""Run-time helpers called by translated blocks: lane masks, 64-bit pairs, float helpers, memory access, atomics.

Register values are uint32 numpy arrays: SGPRs (n,), VGPRs (n, 32), n = waves executing the block.
"""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64
LANE = np.arange(32, dtype=np.uint32)
LANE_BELOW = ((np.uint64(1) << LANE.astype(np.uint64)) - np.uint64(1)).astype(np.uint32)  # bits of lanes < L
FULL = np.uint32(0xFFFFFFFF)
# Apertures for FLAT (generic) addresses, above the 47-bit user address space so that they never alias host memory:
# the high dword of an address selects LDS (SHARED_HI) or the lane's private memory (PRIVATE_HI).
SHARED_HI = 0x10000
PRIVATE_HI = 0x20000


# ---- lane masks ----
def lanes(mask: np.ndarray) -> np.ndarray:
  """(n,) u32 wave masks -> (n, 32) bool per lane."""
  m = np.ascontiguousarray(mask, dtype=u32)
  return np.unpackbits(m.view(u8).reshape(-1, 4), axis=1, bitorder="little").view(np.bool_)


def pack(bits: np.ndarray) -> np.ndarray:
  """(n, 32) bool -> (n,) u32 wave masks."""
  b = np.ascontiguousarray(bits, dtype=np.bool_)
  return np.packbits(b, axis=1, bitorder="little").view("<u4").reshape(-1).astype(u32)


def all_ones(mask: np.ndarray) -> bool:
  return bool((mask == FULL).all())


def vfix(x, n: int) -> np.ndarray:
  """A VALU result as a fresh, writable (n, 32) array."""
  if isinstance(x, np.ndarray) and x.shape == (n, 32) and x.dtype == u32 and x.flags.writeable: return x
  return np.array(np.broadcast_to(x, (n, 32)))


def sfix(x, n: int, dtype=u32) -> np.ndarray:
  """A scalar result as a fresh (n,) array."""
  if isinstance(x, np.ndarray) and x.shape == (n,) and x.dtype == dtype and x.flags.writeable: return x
  return np.array(np.broadcast_to(np.asarray(x).astype(dtype), (n,)))


# ---- 64-bit pairs ----
def p64(lo, hi) -> np.ndarray:
  """Two u32 halves -> u64 (interleaving into a fresh buffer is the cheapest way in numpy)."""
  lo = np.asarray(lo)
  hi = np.asarray(hi)
  out = np.empty(np.broadcast_shapes(lo.shape, hi.shape) + (2,), u32)
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


def ibits64(x) -> np.ndarray:
  return np.asarray(x).astype(i64, copy=False).view(u64) if np.asarray(x).dtype.kind == "i" else np.asarray(x).astype(u64)


# ---- float helpers (RDNA3 ISA semantics where they differ from numpy) ----
def clamp01(x):
  return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def fmax(a, b):
  return np.fmax(a, b)


def fmin(a, b):
  return np.fmin(a, b)


def _fma_round_to_odd(a, b, c):
  """a*b + c for f32/f16 inputs as an f64 rounded to odd: the product is exact in f64, the sum's rounding error is
  recovered with TwoSum, and an inexact sum is replaced by its truncation with the lowest bit set. Rounding that to
  f32 or f16 (<= 24 bits, well under 53 - 2) then gives the correctly rounded fused result."""
  with np.errstate(all="ignore"):
    p = np.asarray(a, f64) * np.asarray(b, f64)
    c = np.asarray(c, f64)
    s = p + c
    bv = s - p
    e = (p - (s - bv)) + (c - bv)
    inexact = (e != 0) & np.isfinite(s) & np.isfinite(e)
    bits = s.view(u64)
    toward_zero = inexact & ((e < 0) != (s < 0))          # |exact| < |s|: step one ulp towards zero
    bits = np.where(toward_zero, bits - u64(1), bits)
    bits = np.where(inexact, bits | u64(1), bits)
  return bits.view(f64)


_F32_HALF_ULP, _F32_LOW_BITS = u64(1 << 28), u64((1 << 29) - 1)   # f64 bits below an f32 mantissa (29)
_F64_EXP, _F32_TINY_EXP = u64(0x7FF << 52), u64((1023 - 125) << 52)   # f64 exponent field; below: f32 denormals


def fma32(a, b, c):
  """Fused multiply-add in f32, correctly rounded. Fast path: a*b (exact in f64) + c rounded once to f64 is already
  correct unless that f64 sits exactly on an f32 rounding midpoint or in the f32 denormal range; only then the
  round-to-odd path runs."""
  s = np.asarray(a).astype(f64) * np.asarray(b).astype(f64) + np.asarray(c).astype(f64)
  bits = s.view(u64)
  risky = ((bits & _F32_LOW_BITS) == _F32_HALF_ULP) | ((bits & _F64_EXP) < _F32_TINY_EXP)
  r = s.astype(f32)
  idx = np.flatnonzero(risky)
  if idx.size:
    a, b, c = (np.broadcast_to(np.asarray(v), s.shape).reshape(-1)[idx] for v in (a, b, c))
    r.reshape(-1)[idx] = _fma_round_to_odd(a, b, c).astype(f32)
  return r


def fma16(a, b, c):
  return _fma_round_to_odd(a, b, c).astype(f16)


def fma64(a, b, c):
  """f64 fma via error-free transformations: a*b = p + e exactly (Veltkamp/Dekker), p + c = s + t exactly (TwoSum),
  result s + (t + e). Correctly rounded except in rare double-rounding cases."""
  a = np.asarray(a, f64)
  b = np.asarray(b, f64)
  c = np.asarray(c, f64)
  with np.errstate(all="ignore"):
    p = a * b
    sp = f64(134217729.0)
    ah = a * sp
    ah = ah - (ah - a)
    al = a - ah
    bh = b * sp
    bh = bh - (bh - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bv = s - p
    t = (p - (s - bv)) + (c - bv)
    r = s + (t + e)
    ok = np.isfinite(r) & np.isfinite(e) & np.isfinite(t)
  return np.where(ok, r, p + c)


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
  leave the normal range, else D = S0 and VCC = 0."""
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
    d = np.where(c3 & (s0 == s1), up, d)
    d = np.where(c4, down, d)
    d = np.where(c5 & (s0 == s2), up, d)
    d = np.where(c6, up, d)
    d = np.where(zero, ftype(np.nan), d)
    vcc = c1 | c3 | c5
  return d.astype(ftype), vcc


def div_fmas(a, b, c, vcc, ftype):
  r = fma64(a, b, c) if ftype == f64 else fma32(a, b, c)
  scale = 128 if ftype == f64 else 64
  return np.where(vcc, np.ldexp(r, scale).astype(ftype), r).astype(ftype)


def div_fixup(s0, s1, s2, ftype):
  """V_DIV_FIXUP: s0 = quotient estimate, s1 = denominator, s2 = numerator; handles the special cases."""
  q, den, num = (np.asarray(v, ftype) for v in (s0, s1, s2))
  with np.errstate(all="ignore"):
    sign = np.signbit(den) ^ np.signbit(num)
    inf = np.where(sign, ftype(-np.inf), ftype(np.inf))
    zero = np.where(sign, ftype(-0.0), ftype(0.0))
    r = np.where(sign, -np.abs(q), np.abs(q))
    r = np.where(np.isnan(q), np.nan, r)
    r = np.where((den == 0) & (num == 0), np.nan, np.where((den == 0) & ~np.isnan(num), inf, r))
    r = np.where(np.isinf(den) & np.isinf(num), np.nan, r)
    r = np.where(np.isinf(den) & np.isfinite(num), zero, r)
    r = np.where(np.isinf(num) & np.isfinite(den), inf, r)
    r = np.where(np.isnan(den) | np.isnan(num), np.nan, r)
  return r.astype(ftype)


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


# ---- memory ----
class MemAccess:
  """Memory access of one dispatch: global (host address space via GPUMemory), LDS, scratch."""

  def __init__(self, memory, lds: np.ndarray, lds_words: int, scratch: np.ndarray | None, scratch_words: int,
               scratch_base: int | None, wave_wg: np.ndarray):
    self.mem = memory
    self.lds = lds
    self.lds8 = lds.view(u8)
    self.lds_words = lds_words
    self.scratch = scratch
    self.scratch_words = scratch_words
    self.scratch_base = scratch_base
    self.wave_wg = wave_wg
    self.vb = u64(memory.VIEW_BASE)

  # -- global --
  def _active(self, addr, em, ef):
    addr = np.asarray(addr, u64)
    return addr if ef else addr[em]

  def _target(self, rng, dtype, shift: int):
    """(array, base address) to index global memory with: the mapped range's own view when the access stays in one
    range whose start is aligned for dtype, else the whole-address-space view."""
    if rng is not None and rng[0] % np.dtype(dtype).itemsize == 0: return self.mem.view(rng[0], dtype), u64(rng[0])
    return {0: self.mem.u8, 2: self.mem.u32, 3: self.mem.u64}[shift], self.vb

  def gload(self, addr, em, ef, ndw: int):
    """Load ndw dwords per lane from byte addresses addr (n, 32) u64; returns a list of (n, 32) u32."""
    addr = np.asarray(addr, u64)
    act = self._active(addr, em, ef)
    rng = self.mem.check(act, 4 * ndw, "global load")
    if act.size == 0: return [np.zeros(addr.shape, u32) for _ in range(ndw)]
    if not ef: addr = np.where(em, addr, act[0])
    if int(np.bitwise_or.reduce(act, axis=None)) & 3: return self._gload_bytes(addr, rng, ndw)
    arr, base = self._target(rng, u32, 2)
    w = ((addr - base) >> u64(2)).view(np.intp)
    if ndw == 1: return [arr[w]]
    return [arr[w + k] for k in range(ndw)]

  def _gload_bytes(self, addr, rng, ndw):
    arr, base = self._target(rng, u8, 0)
    b = (addr - base).view(np.intp)
    out = []
    for k in range(ndw):
      v = np.zeros(addr.shape, u32)
      for j in range(4): v |= arr[b + (4 * k + j)].astype(u32) << u32(8 * j)
      out.append(v)
    return out

  def gload_sub(self, addr, em, ef, nbytes: int, signed: bool):
    """A u8/i8/u16/i16 load, zero- or sign-extended to u32."""
    addr = np.asarray(addr, u64)
    act = self._active(addr, em, ef)
    rng = self.mem.check(act, nbytes, "global load")
    if act.size == 0: return np.zeros(addr.shape, u32)
    if not ef: addr = np.where(em, addr, act[0])
    arr, base = self._target(rng, u8, 0)
    b = (addr - base).view(np.intp)
    if nbytes == 1:
      v = arr[b]
      return (v.view(i8).astype(i32).view(u32) if signed else v.astype(u32))
    v = arr[b].astype(u16) | (arr[b + 1].astype(u16) << u16(8))
    return v.view(i16).astype(i32).view(u32) if signed else v.astype(u32)

  def gstore(self, addr, em, ef, data: list, nbytes: int | None = None):
    """Store dwords (list of (n,32) u32) or the low nbytes (1/2) of data[0] for active lanes."""
    size = nbytes or 4 * len(data)
    addr = np.asarray(addr, u64)
    if not ef:
      data = [np.broadcast_to(d, em.shape)[em] for d in data]
      addr = addr[em]
    else:
      data = [np.broadcast_to(d, addr.shape) for d in data]
    rng = self.mem.check(addr, size, "global store")
    if addr.size == 0: return
    if nbytes in (1, 2) or int(np.bitwise_or.reduce(addr, axis=None)) & 3:
      arr, base = self._target(rng, u8, 0)
      b = (addr - base).view(np.intp)
      for k in range(max(1, size // 4)):
        for j in range(min(4, size)): arr[b + (4 * k + j)] = ((data[k] >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    arr, base = self._target(rng, u32, 2)
    w = ((addr - base) >> u64(2)).view(np.intp)
    arr[w] = data[0]
    for k in range(1, len(data)): arr[w + k] = data[k]

  def gatomic(self, addr, em, ef, op: str, data, cmp, width: int):
    """Global atomic; returns the pre-op values (n, 32) (zeros for inactive lanes)."""
    addr = np.asarray(addr, u64)
    shape = addr.shape
    sel = np.broadcast_to(True, shape) if ef else em
    a = addr[sel]
    rng = self.mem.check(a, 4 * width, f"global atomic {op}")
    if a.size and (a & u64(4 * width - 1)).any():
      raise GPUFault(f"misaligned global atomic {op}", address=int(a[(a & u64(4 * width - 1)) != 0][0]),
                     kind="misaligned atomic")
    arr, base = self._target(rng, u64 if width == 2 else u32, 3 if width == 2 else 2)
    idx = ((a - base) >> u64(2 if width == 1 else 3)).astype(np.intp)
    d = np.broadcast_to(data, shape)[sel]
    c = None if cmp is None else np.broadcast_to(cmp, shape)[sel]
    old = atomic(arr, idx, op, d, c)
    out = np.zeros(shape, arr.dtype)
    out[sel] = old
    return out

  # -- LDS --
  def _lds_index(self, addr, wid, em, ef, nbytes, what):
    a = np.asarray(addr, u32).astype(np.int64)
    act = a if ef else a[em]
    if act.size and (act.min() < 0 or act.max() + nbytes > self.lds_words * 4):
      bad = act[(act < 0) | (act + nbytes > self.lds_words * 4)][0]
      raise GPUFault(f"LDS {what} of {nbytes} bytes outside the work-group's {self.lds_words * 4} bytes of LDS",
                     address=int(bad), kind="lds out of range")
    base = (self.wave_wg[wid].astype(np.int64) * (self.lds_words * 4))[:, None]
    b = a + base
    if not ef: b = np.where(em, b, 0)
    return b

  def lds_load(self, addr, wid, em, ef, nbytes: int, signed: bool = False):
    """Returns a list of u32 dwords (n,32) (nbytes >= 4) or one zero/sign-extended value (1/2 bytes)."""
    b = self._lds_index(addr, wid, em, ef, nbytes, "load")
    if nbytes < 4:
      v = self.lds8[b].astype(u32)
      if nbytes == 2: v |= self.lds8[b + 1].astype(u32) << u32(8)
      if signed:
        sh = u32(32 - 8 * nbytes)
        v = ((v << sh).view(i32) >> i32(32 - 8 * nbytes)).view(u32)
      return v
    if (b & 3).any():
      out = []
      for k in range(nbytes // 4):
        v = np.zeros(b.shape, u32)
        for j in range(4): v |= self.lds8[b + 4 * k + j].astype(u32) << u32(8 * j)
        out.append(v)
      return out
    w = b >> 2
    return [self.lds[w + k] for k in range(nbytes // 4)]

  def lds_store(self, addr, wid, em, ef, data: list, nbytes: int):
    b = self._lds_index(addr, wid, em, ef, nbytes, "store")
    shape = b.shape
    if not ef:
      b = b[em]
      data = [np.broadcast_to(d, shape)[em] for d in data]
    else:
      b = b.reshape(-1)
      data = [np.broadcast_to(d, shape).reshape(-1) for d in data]
    if nbytes < 4:
      self.lds8[b] = (data[0] & u32(0xFF)).astype(u8)
      if nbytes == 2: self.lds8[b + 1] = ((data[0] >> u32(8)) & u32(0xFF)).astype(u8)
      return
    if (b & 3).any():
      for k, d in enumerate(data):
        for j in range(4): self.lds8[b + 4 * k + j] = ((d >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    w = b >> 2
    for k, d in enumerate(data): self.lds[w + k] = d

  def lds_atomic(self, addr, wid, em, ef, op, data, cmp):
    b = self._lds_index(addr, wid, em, ef, 4, f"atomic {op}")
    shape = b.shape
    sel = np.broadcast_to(True, shape) if ef else em
    w = (b[sel] >> 2).astype(np.intp)
    if (b[sel] & 3).any(): raise GPUFault(f"misaligned LDS atomic {op}", kind="misaligned atomic")
    d = np.broadcast_to(data, shape)[sel]
    c = None if cmp is None else np.broadcast_to(cmp, shape)[sel]
    old = atomic(self.lds, w, op, d, c)
    out = np.zeros(shape, u32)
    out[sel] = old
    return out

  # -- scratch (lane-private) --
  def _scratch_index(self, offs, wid, em, ef, nbytes, what):
    o = np.asarray(offs).astype(np.int64)
    if o.ndim == 1: o = np.broadcast_to(o[:, None], (len(wid), 32))
    o = np.broadcast_to(o, (len(wid), 32))
    act = o if ef else o[em]
    limit = self.scratch_words * 4
    if act.size and (act.min() < 0 or act.max() + nbytes > limit):
      bad = act[(act < 0) | (act + nbytes > limit)][0]
      raise GPUFault(f"scratch {what} of {nbytes} bytes outside the lane's {limit} bytes of private memory",
                     address=int(bad), kind="scratch out of range")
    lane_global = np.asarray(wid, np.int64)[:, None] * 32 + np.arange(32, dtype=np.int64)
    b = lane_global * limit + o
    if not ef: b = np.where(em, b, 0)
    return b

  def _scratch_arrays(self):
    if self.scratch_base is not None:
      from .memory import host_view
      return host_view(self.scratch_base, self.scratch.size * 4, u32), None
    return self.scratch, None

  def scratch_load(self, offs, wid, em, ef, nbytes, signed=False):
    b = self._scratch_index(offs, wid, em, ef, nbytes, "load")
    s32 = self.scratch
    s8 = s32.view(u8)
    if nbytes < 4:
      v = s8[b].astype(u32)
      if nbytes == 2: v |= s8[b + 1].astype(u32) << u32(8)
      if signed:
        sh = u32(32 - 8 * nbytes)
        v = ((v << sh).view(i32) >> i32(32 - 8 * nbytes)).view(u32)
      return v
    if (b & 3).any():
      out = []
      for k in range(nbytes // 4):
        v = np.zeros(b.shape, u32)
        for j in range(4): v |= s8[b + 4 * k + j].astype(u32) << u32(8 * j)
        out.append(v)
      return out
    w = b >> 2
    return [s32[w + k] for k in range(nbytes // 4)]

  def scratch_store(self, offs, wid, em, ef, data, nbytes):
    b = self._scratch_index(offs, wid, em, ef, nbytes, "store")
    shape = b.shape
    sel = np.broadcast_to(True, shape) if ef else em
    b = b[sel]
    data = [np.broadcast_to(d, shape)[sel] for d in data]
    s32 = self.scratch
    s8 = s32.view(u8)
    if nbytes < 4 or (b & 3).any():
      for k in range(max(1, nbytes // 4)):
        for j in range(min(4, nbytes)): s8[b + 4 * k + j] = ((data[k] >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    w = b >> 2
    for k, d in enumerate(data): s32[w + k] = d

  # -- FLAT: generic addresses routed by aperture (RDNA3 ISA "Flat memory instructions": an address inside the
  # shared aperture reaches LDS, inside the private aperture the lane's scratch, anything else global memory) --
  def _route(self, addr, em, ef):
    addr = np.asarray(addr, u64)
    hi = addr >> u64(32)
    act = np.ones(addr.shape, bool) if ef else em
    lds = act & (hi == u64(SHARED_HI))
    pri = act & (hi == u64(PRIVATE_HI))
    return addr, act & ~(lds | pri), lds, pri, (addr & u64(0xFFFFFFFF))

  def fload(self, addr, wid, em, ef, nbytes: int, signed: bool = False):
    """A FLAT load: a list of dwords (nbytes >= 4) or one extended value (1/2 bytes), like gload/gload_sub."""
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any():
      return self.gload(addr, em, ef, nbytes // 4) if nbytes >= 4 else self.gload_sub(addr, em, ef, nbytes, signed)
    parts = []
    if glb.any():
      parts.append((glb, self.gload(addr, glb, False, nbytes // 4) if nbytes >= 4
                    else self.gload_sub(addr, glb, False, nbytes, signed)))
    if lds.any(): parts.append((lds, self.lds_load(off.astype(u32), wid, lds, False, nbytes, signed)))
    if pri.any(): parts.append((pri, self.scratch_load(off.astype(i64), wid, pri, False, nbytes, signed)))
    def merge(k=None):
      out = np.zeros(addr.shape, u32)
      for mask, res in parts: out = np.where(mask, res if k is None else res[k], out)
      return out
    return merge() if nbytes < 4 else [merge(k) for k in range(nbytes // 4)]

  def fstore(self, addr, wid, em, ef, data: list, nbytes: int | None = None):
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any(): return self.gstore(addr, em, ef, data, nbytes)
    size = nbytes or 4 * len(data)
    if glb.any(): self.gstore(addr, glb, False, data, nbytes)
    if lds.any(): self.lds_store(off.astype(u32), wid, lds, False, data, size)
    if pri.any(): self.scratch_store(off.astype(i64), wid, pri, False, data, size)

  def fatomic(self, addr, wid, em, ef, op: str, data, cmp, width: int):
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any(): return self.gatomic(addr, em, ef, op, data, cmp, width)
    if width != 1: raise GPUFault(f"64-bit FLAT atomic {op} on LDS or private memory is not supported",
                                  kind="illegal instruction")
    out = np.zeros(addr.shape, u32)
    if glb.any(): out = np.where(glb, self.gatomic(addr, glb, False, op, data, cmp, width), out)
    if lds.any(): out = np.where(lds, self.lds_atomic(off.astype(u32), wid, lds, False, op, data, cmp), out)
    if pri.any():
      # private memory belongs to one lane: the atomic is a plain read-modify-write
      old = self.scratch_load(off.astype(i64), wid, pri, False, 4)[0]
      d = np.broadcast_to(np.asarray(data, u32), addr.shape)
      c = None if cmp is None else np.broadcast_to(np.asarray(cmp, u32), addr.shape)
      self.scratch_store(off.astype(i64), wid, pri, False, [_apply(op, old, d, c, np.dtype(u32))], 4)
      out = np.where(pri, old, out)
    return out

  # -- scalar --
  def sload(self, addr, ndw: int):
    """SMEM load: addr (n,) u64 (dword aligned: the two low bits are ignored); returns a list of (n,) u32."""
    a = np.asarray(addr, u64) & ~u64(3)
    rng = self.mem.check(a, 4 * ndw, "scalar load")
    m, base = self._target(rng, u32, 2)
    w = ((a - base) >> u64(2)).astype(np.intp)
    return [m[w + k] for k in range(ndw)]


def atomic(arr: np.ndarray, idx: np.ndarray, op: str, d: np.ndarray, c) -> np.ndarray:
  """Apply op at arr[idx] element by element in order (lanes in wave order, then lane order); return the old
  values. Vectorised when the indices are unique, and for add/sub/min/max with duplicates."""
  dt = arr.dtype
  d = np.asarray(d).astype(dt) if op not in ("add_f32", "min_f32", "max_f32") else np.asarray(d).astype(u32)
  if idx.size == 0: return np.zeros(0, dt)
  order = np.argsort(idx, kind="stable")
  sidx = idx[order]
  unique = sidx.size < 2 or bool((sidx[1:] != sidx[:-1]).all())
  old = arr[idx]
  if unique:
    arr[idx] = _apply(op, old, d, c, dt)
    return old
  if op in ("add", "sub"):
    sd = d[order].astype(np.uint64)
    if op == "sub": sd = (np.uint64(0) - sd)
    start = np.ones(sidx.size, bool)
    start[1:] = sidx[1:] != sidx[:-1]
    cs = np.cumsum(sd, dtype=np.uint64)
    grp = np.cumsum(start) - 1
    first = np.nonzero(start)[0]
    base_cs = cs[first] - sd[first]
    excl = cs - sd - base_cs[grp]
    res_sorted = (arr[sidx].astype(np.uint64) + excl).astype(dt)
    ret = np.empty_like(res_sorted)
    ret[order] = res_sorted
    last = np.append(first[1:] - 1, sidx.size - 1)
    arr[sidx[first]] = (arr[sidx[first]].astype(np.uint64) + (cs[last] - base_cs)).astype(dt)
    return ret
  # general: a sequential loop over the lanes (rare: the compiler aggregates atomics per wave)
  ret = np.empty(idx.size, dt)
  cc = None if c is None else np.asarray(c).astype(dt)
  for k in range(idx.size):
    i = idx[k]
    o = arr[i]
    ret[k] = o
    arr[i] = _apply(op, np.array([o], dt), d[k:k + 1], None if cc is None else cc[k:k + 1], dt)[0]
  return ret


def _apply(op, old, d, c, dt):
  signed = {np.dtype(u32): i32, np.dtype(u64): i64}[np.dtype(dt)]
  if op == "add": return old + d
  if op == "sub": return old - d
  if op == "rsub": return d - old
  if op == "mskor": return (old & ~d) | np.asarray(c).astype(dt)    # DS_MSKOR: (MEM & ~DATA) | DATA2
  if op == "and": return old & d
  if op == "or": return old | d
  if op == "xor": return old ^ d
  if op == "swap": return d
  if op == "umin": return np.minimum(old, d)
  if op == "umax": return np.maximum(old, d)
  if op == "smin": return np.minimum(old.view(signed), d.view(signed)).view(dt)
  if op == "smax": return np.maximum(old.view(signed), d.view(signed)).view(dt)
  if op == "inc": return np.where(old >= d, dt.type(0) if hasattr(dt, "type") else 0, old + 1).astype(dt)
  if op == "dec": return np.where((old == 0) | (old > d), d, old - 1).astype(dt)
  if op == "cmpswap": return np.where(old == np.asarray(c).astype(dt), d, old).astype(dt)
  if op == "add_f32": return (old.view(f32) + d.view(f32)).view(u32)
  if op == "min_f32": return np.fmin(old.view(f32), d.view(f32)).view(u32)
  if op == "max_f32": return np.fmax(old.view(f32), d.view(f32)).view(u32)
  raise GPUFault(f"atomic {op} is not supported", kind="illegal instruction")


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


# ---- cross-lane (DPP16 / DPP8 / permlane; RDNA3 ISA "Data Parallel Processing") ----
_L = np.arange(32)
_ROW, _IN_ROW = _L // 16, _L % 16


def _dpp16_source(ctrl: int):
  """Source lane of each of the 32 lanes for a DPP16 control, -1 where out of the row."""
  if ctrl <= 0xFF:                                           # quad_perm
    sel = np.array([(ctrl >> (2 * (i % 4))) & 3 for i in range(32)])
    return (_L & ~3) + sel
  n = ctrl & 0xF
  if 0x101 <= ctrl <= 0x10F: src = _IN_ROW + n; return np.where(src < 16, _ROW * 16 + src, -1)   # row_shl
  if 0x111 <= ctrl <= 0x11F: src = _IN_ROW - n; return np.where(src >= 0, _ROW * 16 + src, -1)   # row_shr
  if 0x121 <= ctrl <= 0x12F: return _ROW * 16 + (_IN_ROW - n) % 16                              # row_ror
  if ctrl == 0x140: return _ROW * 16 + 15 - _IN_ROW                                             # row_mirror
  if ctrl == 0x141: return _ROW * 16 + (_IN_ROW & ~7) + 7 - (_IN_ROW & 7)                       # row_half_mirror
  if 0x150 <= ctrl <= 0x15F: return _ROW * 16 + n                                               # row_share
  if 0x160 <= ctrl <= 0x16F: return _ROW * 16 + (_IN_ROW ^ n)                                   # row_xmask
  raise GPUFault(f"DPP control {ctrl:#x} is not valid on gfx11", kind="illegal instruction")


def _gather_lanes(x, src, active, fi: int, bc: int, n: int):
  x = np.broadcast_to(x, (n, 32))
  ok = np.broadcast_to(src >= 0, (n, 32))
  idx = np.clip(src, 0, 31)
  vals = x[:, idx] if idx.ndim == 1 else np.take_along_axis(x, idx, axis=1)
  if not fi and active is not None:
    ok = ok & (active[:, idx] if idx.ndim == 1 else np.take_along_axis(active, idx, axis=1))
  vals = np.where(ok, vals, u32(0))
  write = ok | bool(bc)
  return vals, np.broadcast_to(write, (n, 32))


def dpp16(x, ctrl, bc, fi, row_mask, bank_mask, em, ef):
  n = np.shape(x)[0]
  vals, write = _gather_lanes(x, _dpp16_source(ctrl), None if ef else em, fi, bc, n)
  lane_ok = (((row_mask >> _ROW) & 1) & ((bank_mask >> ((_L % 16) // 4)) & 1)).astype(bool)
  return vals, write & lane_ok


def dpp8(x, lane_sel, fi, em, ef):
  n = np.shape(x)[0]
  src = (_L & ~7) + np.array([(lane_sel >> (3 * (i % 8))) & 7 for i in range(32)])
  return _gather_lanes(x, src, None if ef else em, fi, 0, n)


def permlane16(x, s1, s2, cross: bool, fi: int, bc: int, em, ef, n: int):
  """V_PERMLANE16_B32 / V_PERMLANEX16_B32: lane i of a row reads lane sel(i) of the same (x: the other) row, the
  4-bit selectors coming from s1 (lanes 0-7) and s2 (lanes 8-15)."""
  s1 = np.broadcast_to(np.asarray(s1, u32), (n,)).astype(np.int64)
  s2 = np.broadcast_to(np.asarray(s2, u32), (n,)).astype(np.int64)
  i = _IN_ROW[None, :]
  sel = np.where(i < 8, (s1[:, None] >> (4 * i)) & 15, (s2[:, None] >> (4 * (i - 8))) & 15)
  row = (1 - _ROW) if cross else _ROW
  src = row[None, :] * 16 + sel
  return _gather_lanes(x, src, None if ef else em, fi, bc, n)


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


def permute(data, addr, backward: bool, em, ef):
  """DS_BPERMUTE_B32 (lane l reads lane addr[l]/4) and DS_PERMUTE_B32 (lane l writes lane addr[l]/4); lanes are
  taken modulo 32; an inactive source lane reads as 0. Returns (values, lanes to write)."""
  data = np.asarray(data, u32)
  n = data.shape[0]
  act = np.ones((n, 32), bool) if ef else em
  lane = ((np.asarray(addr, u32) >> u32(2)) & u32(31)).astype(np.intp)
  rows = np.arange(n)[:, None]
  if backward:
    vals = np.where(act[rows, lane], data[rows, lane], u32(0))
    return vals, act
  out = np.zeros((n, 32), u32)
  # forward: scatter the active lanes in lane order (a later lane wins a collision)
  for l in range(32):
    sel = act[:, l]
    out[np.nonzero(sel)[0], lane[sel, l]] = data[sel, l]
  return out, act


def swizzle(data, offset: int, em, ef):
  """DS_SWIZZLE_B32: offset[15] = 1: quad permute (2 bits per lane of the quad); else bit-mask mode with
  and_mask = offset[4:0], or_mask = offset[9:5], xor_mask = offset[14:10] on the lane id within 32 lanes."""
  if offset & 0x8000:
    if offset >= 0xE000: raise GPUFault(f"ds_swizzle_b32 offset {offset:#x} (FFT/rotate modes) is not supported",
                                        kind="illegal instruction")
    src = (_L & ~3) + np.array([(offset >> (2 * (i % 4))) & 3 for i in range(32)])
  else:
    src = ((_L & (offset & 31)) | ((offset >> 5) & 31)) ^ ((offset >> 10) & 31)
  n = np.shape(data)[0]
  return _gather_lanes(data, src, None if ef else em, 0, 1, n)


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
