"""Per-instruction value semantics on numpy arrays (one element per thread), as the PTX ISA defines them.

Integer arithmetic wraps; division and remainder truncate toward zero ("Integer Arithmetic Instructions: div, rem";
a zero divisor gives all ones for div and the dividend for rem, what NVIDIA GPUs return); shifts clamp the amount
("shl, shr": an amount >= the width gives 0, or the sign for shr.s). Floats are IEEE with round-to-nearest-even;
fma is correctly rounded (the RDNA3 emulator's helpers). The f32 .approx instructions (and div.full) are computed in
float64, then moved by a deterministic, input-dependent error within the bound the PTX ISA states for each (APPROX_BOUNDS:
its "Notes"/"Semantics" of ex2, lg2, sin, cos, tanh, rcp, sqrt, rsqrt, div), so a result is not the exact one, as on
hardware, and a test that holds on the mock holds within the ISA's tolerances; div.approx.f32 is a * (1/b), which is 0
for |b| in [2^126, 2^128] (1/b is subnormal, flushed).
"""
from __future__ import annotations

import numpy as np

from ... import floats as _floats

u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64

UNSIGNED = {1: u8, 2: u16, 4: u32, 8: u64}
SIGNED = {1: i8, 2: i16, 4: i32, 8: i64}


def arr(v, n: int, dt) -> np.ndarray:
  """v as a length-n array of dt (a broadcast scalar becomes a real array)."""
  v = np.asarray(v)
  if v.dtype != dt: v = cast_bits(v, dt)
  if v.ndim == 0 or v.shape[0] != n: return np.full(n, v, dt)
  return v


def cast_bits(v, to):
  """Reinterpret/extend/truncate v's bits as dtype `to` (PTX register-size rules): the same size is a bit cast, a
  narrower target keeps the low bits, a wider one sign-extends a signed source and zero-extends the rest."""
  v = np.asarray(v)
  src = v.dtype
  to = np.dtype(to)
  if src == to: return v
  if to == np.bool_: return v != 0
  if src == np.bool_: return v.astype(to)
  if src.itemsize == to.itemsize: return v.view(to)
  if src.kind == "f": v = v.view(UNSIGNED[src.itemsize]); src = v.dtype
  if to.itemsize < src.itemsize: return v.astype(UNSIGNED[to.itemsize]).view(to) if to.kind != "u" else v.astype(to)
  wide = (SIGNED if src.kind == "i" else UNSIGNED)[to.itemsize]
  r = v.astype(wide)
  return r if r.dtype == to else r.view(to)


# ---- integers ----
def idiv(a, b):
  a, b = np.asarray(a), np.asarray(b)
  with np.errstate(all="ignore"):
    if a.dtype.kind == "u":
      return np.where(b == 0, ~np.zeros((), a.dtype), a // np.where(b == 0, 1, b).astype(a.dtype)).astype(a.dtype)
    bb = np.where(b == 0, 1, b).astype(a.dtype)
    r = np.fmod(a, bb)
    q = ((a - r) // bb).astype(a.dtype)   # exact (a - r is a multiple); INT_MIN // -1 wraps to INT_MIN
    q = np.where(bb == -1, (-a).astype(a.dtype), q)
    return np.where(b == 0, np.array(-1, a.dtype), q).astype(a.dtype)


def irem(a, b):
  a, b = np.asarray(a), np.asarray(b)
  with np.errstate(all="ignore"):
    bb = np.where(b == 0, 1, b).astype(a.dtype)
    if a.dtype.kind == "i": bb = np.where(bb == -1, 1, bb).astype(a.dtype)
    r = np.fmod(a, bb) if a.dtype.kind == "i" else a % bb
    return np.where(b == 0, a, r).astype(a.dtype)


def shl(a, b):
  a = np.asarray(a)
  w = a.dtype.itemsize * 8
  b = np.asarray(b).astype(u32)
  s = np.minimum(b, w - 1).astype(a.dtype)
  return np.where(b >= w, np.zeros((), a.dtype), a << s).astype(a.dtype)


def shr(a, b):
  a = np.asarray(a)
  w = a.dtype.itemsize * 8
  b = np.asarray(b).astype(u32)
  s = np.minimum(b, w - 1).astype(a.dtype)
  if a.dtype.kind == "i": return (a >> s).astype(a.dtype)   # clamped: an arithmetic shift by w-1 fills the sign
  return np.where(b >= w, np.zeros((), a.dtype), a >> s).astype(a.dtype)


def _umulhi64(a, b):
  a, b = np.asarray(a).astype(u64), np.asarray(b).astype(u64)
  m32 = u64(0xFFFFFFFF)
  al, ah, bl, bh = a & m32, a >> u64(32), b & m32, b >> u64(32)
  ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
  mid = (ll >> u64(32)) + (lh & m32) + (hl & m32)
  return hh + (lh >> u64(32)) + (hl >> u64(32)) + (mid >> u64(32))


def mulhi(a, b):
  a, b = np.asarray(a), np.asarray(b)
  dt = a.dtype
  if dt.itemsize <= 4:
    wide = i64 if dt.kind == "i" else u64
    return ((a.astype(wide) * b.astype(wide)) >> (8 * dt.itemsize)).astype(dt)
  with np.errstate(all="ignore"):
    h = _umulhi64(a.view(u64) if dt.kind == "i" else a, b.view(u64) if dt.kind == "i" else b)
    if dt.kind == "i":
      h = h - np.where(a < 0, b.view(u64), u64(0)) - np.where(b < 0, a.view(u64), u64(0))
      return h.view(i64)
    return h


def mulwide(a, b):
  a, b = np.asarray(a), np.asarray(b)
  dt = a.dtype
  wide = (SIGNED if dt.kind == "i" else UNSIGNED)[dt.itemsize * 2]
  return a.astype(wide) * b.astype(wide)


def sat_s32(v):
  return np.clip(np.asarray(v, i64), -2**31, 2**31 - 1).astype(i32)


def popc(a):
  return np.bitwise_count(np.asarray(a)).astype(u32)


def _clz32(a):
  a = np.asarray(a).astype(u32)
  n = np.zeros(a.shape, u32)
  x = a.copy()
  for s in (16, 8, 4, 2, 1):
    top = x >> u32(32 - s) == 0
    n = np.where(top, n + u32(s), n)
    x = np.where(top, x << u32(s), x)
  return np.where(a == 0, u32(32), n).astype(u32)


def clz(a):
  a = np.asarray(a)
  if a.dtype.itemsize == 8:
    a = a.view(u64) if a.dtype.kind == "i" else a
    hi, lo = (a >> u64(32)).astype(u32), (a & u64(0xFFFFFFFF)).astype(u32)
    return np.where(hi != 0, _clz32(hi), u32(32) + _clz32(lo)).astype(u32)
  return _clz32(cast_bits(a, u32))


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], u8)


def brev(a):
  a = np.ascontiguousarray(np.asarray(a))
  k = a.dtype.itemsize
  b = _REV8[a.view(u8).reshape(a.shape + (k,))][..., ::-1]
  return np.ascontiguousarray(b).view(a.dtype).reshape(a.shape)


def bfind(a, shiftamt: bool):
  a = np.asarray(a)
  w = a.dtype.itemsize * 8
  x = np.where(a < 0, ~a, a) if a.dtype.kind == "i" else a
  x = cast_bits(x, UNSIGNED[a.dtype.itemsize])
  pos = (w - 1) - clz(x).astype(i64)
  none = pos < 0
  if shiftamt: pos = (w - 1) - pos
  return np.where(none, u32(0xFFFFFFFF), pos.astype(u32)).astype(u32)


def bfe(a, pos, ln):
  """bfe ("Integer Arithmetic Instructions: bfe"): the bits [pos, pos+len) of a that exist (below the width) go to
  the low bits; the rest is 0 (.u) or the sign bit a[min(pos+len-1, w-1)] (.s; 0 when len is 0)."""
  a = np.asarray(a)
  dt = a.dtype
  w = dt.itemsize * 8
  pos = np.asarray(pos).astype(i64) & 0xFF
  ln = np.asarray(ln).astype(i64) & 0xFF
  ua = cast_bits(a, UNSIGNED[dt.itemsize]).astype(u64)
  with np.errstate(all="ignore"):
    take = np.clip(np.minimum(ln, w - np.minimum(pos, w)), 0, 64)     # bits actually taken from a
    field = np.where(pos >= w, u64(0), ua >> np.minimum(pos, w - 1).astype(u64))
    mask = np.where(take >= 64, ~u64(0), (u64(1) << np.minimum(take, 63).astype(u64)) - u64(1))
    out = field & mask
    if dt.kind == "i":
      msb = np.minimum(pos + ln - 1, w - 1)
      sbit = (((ua >> np.maximum(msb, 0).astype(u64)) & u64(1)) != 0) & (ln > 0)
      out = np.where(sbit, out | ~mask, out)
  return out.astype(UNSIGNED[dt.itemsize]).view(dt) if w != 64 else out.view(dt)


def bfi(a, b, pos, ln):
  b = np.asarray(b)
  dt = b.dtype
  w = dt.itemsize * 8
  pos = np.asarray(pos).astype(i64) & 0xFF
  ln = np.asarray(ln).astype(i64) & 0xFF
  ua, ub = cast_bits(np.asarray(a), u64) if w == 64 else cast_bits(np.asarray(a), u32).astype(u64), \
           cast_bits(b, u64) if w == 64 else cast_bits(b, u32).astype(u64)
  with np.errstate(all="ignore"):
    lnc = np.minimum(ln, w)
    mask = np.where(lnc >= 64, ~u64(0), (u64(1) << np.minimum(lnc, 63).astype(u64)) - u64(1))
    sh = np.minimum(pos, 63).astype(u64)
    m = np.where(pos >= w, u64(0), mask << sh)
    r = (ub & ~m) | ((ua << sh) & m)
  r = r if w == 64 else (r & u64(0xFFFFFFFF)).astype(u32)
  return r.view(dt) if r.dtype != dt else r


def prmt(a, b, c):
  """prmt.b32 default mode: bytes {b, a} (a = bytes 0-3), each selector nibble picks one (bit 3: replicate its sign)."""
  a, b, c = (np.asarray(x).astype(u64) for x in (a, b, c))
  src = (b << u64(32)) | a
  r = np.zeros(np.broadcast(a, b, c).shape, u64)
  for i in range(4):
    sel = (c >> u64(4 * i)) & u64(0xF)
    byte = (src >> ((sel & u64(7)) * u64(8))) & u64(0xFF)
    byte = np.where((sel & u64(8)) != 0, np.where((byte & u64(0x80)) != 0, u64(0xFF), u64(0)), byte)
    r |= byte << u64(8 * i)
  return r.astype(u32)


# ---- floats ----
def ftz32(x):
  x = np.asarray(x)
  return np.where(np.abs(x) < np.float32(1.17549435e-38), np.copysign(np.float32(0), x), x).astype(f32)


def sat01(x):
  x = np.asarray(x)
  return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def fma(a, b, c, dt):
  if dt == f32: return _floats.fma32(a, b, c)
  if dt == f64: return _floats.fma64(a, b, c)
  if dt == f16: return _floats.fma16(a, b, c)
  raise TypeError(dt)


def via64(fn, dt, *xs):
  """fn computed in float64 and rounded once to dt (exact for f16 add/sub/mul: their results fit in 53 bits)."""
  with np.errstate(all="ignore"):
    return np.asarray(fn(*[np.asarray(x).astype(f64) for x in xs])).astype(dt)


# the canonical NaN of each float type: all exponent and fraction bits set (PTX ISA 9.1, 9.7.3.14 rcp.approx.ftz.f64:
# "a canonical NaN with encoding 0x7fffffff00000000", the f32 pattern 0x7fffffff in the upper word)
CANONICAL_NAN = {np.dtype(f16): u16(0x7FFF), np.dtype(f32): u32(0x7FFFFFFF), np.dtype(f64): u64(0x7FFFFFFFFFFFFFFF)}


def canonical_nan(dt):
  dt = np.dtype(dt)
  return np.array(CANONICAL_NAN[dt]).view(dt)[()]


def _minmax(a, b, nan: bool, is_max: bool):
  """min/max of the PTX ISA (9.1, 9.7.3.11/12 and 9.7.4.7/8, "Semantics"): one NaN operand gives the other (with .NaN:
  a canonical NaN), two give a canonical NaN, and -0.0 < +0.0 ("If values of both inputs are 0.0, then +0.0 > -0.0")."""
  a, b = np.asarray(a), np.asarray(b)
  with np.errstate(invalid="ignore"):
    if is_max: pick_a = (a > b) | ((a == b) & ~np.signbit(a))
    else: pick_a = (a < b) | ((a == b) & np.signbit(a))
    r = np.where(pick_a, a, b)
    an, bn = np.isnan(a), np.isnan(b)
    if nan: bad = an | bn
    else:
      r = np.where(an, b, np.where(bn, a, r))
      bad = an & bn
  return np.where(bad, canonical_nan(r.dtype), r).astype(r.dtype)


def fmin(a, b, nan: bool):
  return _minmax(a, b, nan, False)


def fmax(a, b, nan: bool):
  return _minmax(a, b, nan, True)


def xorsign_abs(fn, a, b):
  """min/max.xorsign.abs: fn of |a| and |b|, its sign bit the XOR of a's and b's (a NaN result keeps its own)."""
  a, b = np.asarray(a), np.asarray(b)
  r = np.asarray(fn(np.abs(a), np.abs(b)))
  neg = np.signbit(a) ^ np.signbit(b)
  return np.where(np.isnan(r), r, np.where(neg, -np.abs(r), np.abs(r))).astype(r.dtype)


def bf16_to_f32(bits):
  return (np.asarray(bits).astype(u32) << u32(16)).view(f32)


def f32_to_bf16(x, mode="rn"):
  u = np.asarray(x, f32).view(u32).astype(u64)
  nan = np.isnan(np.asarray(x, f32))
  if mode == "rz": r = u >> u64(16)
  else: r = (u + u64(0x7FFF) + ((u >> u64(16)) & u64(1))) >> u64(16)
  return np.where(nan, (u >> u64(16)) | u64(0x40), r).astype(u16)


def round_float(x, dt, mode: str):
  """x (a wider float) rounded to float type dt with PTX rounding mode rn/rz/rm/rp: the nearest-even result, moved
  one step toward zero / -inf / +inf where it went the other way."""
  x = np.asarray(x)
  with np.errstate(all="ignore"):
    r = x.astype(dt)
    if mode in ("rn", ""): return r
    back = r.astype(x.dtype)
    up, down = back > x, back < x       # rounded up / down (an overflow to inf counts as up)
    if mode == "rz":
      adj = np.where(x > 0, up, down)
      toward = np.zeros((), dt)
    elif mode == "rm": adj, toward = up, np.array(-np.inf, dt)
    else: adj, toward = down, np.array(np.inf, dt)
    return np.where(adj, np.nextafter(r, toward), r).astype(dt)


_RINT = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def float_to_int(x, dt, mode: str):
  """cvt.{rni,rzi,rmi,rpi}.int.float: rounded, clamped to dt's range (PTX saturates float->int). A NaN gives 0 when
  the source is not .f64 and the destination not 64-bit, else 1 << (width - 1) (PTX ISA 9.1, 9.7.9.21 cvt, "Integer
  Notes": MININT for a signed, (MAXINT >> 1) + 1 for an unsigned destination)."""
  x = np.asarray(x)
  nan_bits = np.dtype(dt).itemsize == 8 or x.dtype == f64
  if nan_bits:
    w = np.dtype(dt).itemsize * 8
    isnan = np.isnan(x)
    r = _float_to_int(x, dt, mode)
    return np.where(isnan, np.array(1 << (w - 1), UNSIGNED[w // 8]).view(dt), r).astype(dt)
  return _float_to_int(x, dt, mode)


def _float_to_int(x, dt, mode: str):
  x = np.asarray(x).astype(f64)
  with np.errstate(all="ignore"):
    r = _RINT.get(mode, np.rint)(x)
  info = np.iinfo(dt)
  lo, hi = float(info.min), float(info.max)
  if np.dtype(dt).itemsize < 8:
    return np.where(np.isnan(r), 0, np.clip(r, lo, hi)).astype(dt)
  big = r >= 2.0 ** (64 if info.min == 0 else 63)
  small = r <= lo
  safe = np.where(np.isnan(r) | big | small, 0, r)
  out = safe.astype(dt)
  out = np.where(big, dt(info.max), out)
  return np.where(small & ~np.isnan(r), dt(info.min), out).astype(dt)


def int_to_float(x, dt, mode: str):
  """cvt.{rn,rz,rm,rp}.float.int. 32-bit ints are exact in f64, so one directed rounding of that is right; a 64-bit
  int's f64 may itself be rounded, so the sign of its residue (x - f64(x), exact as an int) breaks the tie."""
  x = np.asarray(x)
  if mode in ("rn", ""):
    return x.astype(f64).astype(f16) if dt == f16 and x.dtype.itemsize < 8 else x.astype(dt)
  hi = x.astype(f64)
  if x.dtype.itemsize < 8: return round_float(hi, dt, mode)
  with np.errstate(all="ignore"):   # the residue is below 2^11 in size: modulo 2^64 arithmetic gives it exactly
    big = hi >= 2.0 ** 63
    hb = np.where(big, np.where(big & (hi < 2.0 ** 64), hi, 0).astype(u64),   # 2^64 (from u64 near the top): 0
                  np.where(big, 0, hi).astype(i64).view(u64))
    res = (x.view(u64) - hb).view(i64)
  r = x.astype(dt) if dt != f16 else x.astype(f32).astype(f16)
  rb = r.astype(f64)
  above = (rb > hi) | ((rb == hi) & (res < 0))                 # r > the exact x
  below = (rb < hi) | ((rb == hi) & (res > 0))
  if mode == "rz": dn, up = above & (hi > 0), below & (hi < 0)
  elif mode == "rm": dn, up = above, np.zeros_like(above)
  else: dn, up = np.zeros_like(below), below
  r = np.where(dn, np.nextafter(r, dt(-np.inf)), r)
  return np.where(up, np.nextafter(r, dt(np.inf)), r).astype(dt)


def approx(fn, x, dt):
  with np.errstate(all="ignore"):
    return fn(np.asarray(x).astype(f64)).astype(dt)


# the f32 error bounds of the PTX ISA (9.1, section 9.7.3 "Floating Point Instructions", each instruction's Notes):
# (kind, bound); "ulp" in units in the last place of the f32 result, "rel" relative, "abs" absolute; lg2, sin and cos
# depend on the input's range (bound_for)
APPROX_BOUNDS = {
  "ex2": ("ulp", 2),              # "The maximum ulp error is 2 ulp from correctly rounded result"
  "lg2": ("abs", 2.0 ** -22),     # "maximum absolute error is 2^-22 when the input operand is in the range (0.5, 2)";
                                  # outside it "maximum relative error is 2^-22"
  "sin": ("abs", 2.0 ** -20.5),   # "maximum absolute error": 2^-20.5 in [-2pi, 2pi], 2^-14.7 in [-100pi, 100pi]
  "cos": ("abs", 2.0 ** -20.5),   # the same table; outside [-100pi, 100pi] "no defined error guarantees"
  "tanh": ("rel", 2.0 ** -11),    # "maximum relative error over the entire floating point range is 2^-11"
  "rcp": ("ulp", 1),              # rcp.approx.f32: "The maximum ulp error is 1 across the full range of inputs"
  "sqrt": ("rel", 2.0 ** -23),    # sqrt.approx.f32: "maximum relative error ... is 2^-23"
  "rsqrt": ("rel", 2.0 ** -22.9), # rsqrt.approx.f32: "maximum relative error ... is 2^-22.9"
  "div": ("ulp", 2),              # div.approx.f32 for |b| in [2^-126, 2^126], div.full.f32: "maximum ulp error is 2"
}


def bound_for(op: str, x, e) -> tuple[np.ndarray, np.ndarray]:
  """(kind per element: 0 ulp, 1 rel, 2 abs; bound per element) of op at input x (exact result e)."""
  kind, bound = APPROX_BOUNDS[op]
  x = np.asarray(x, f64)
  code = {"ulp": 0, "rel": 1, "abs": 2}[kind]
  kinds, bounds = np.full(x.shape, code), np.full(x.shape, bound)
  if op == "lg2":
    outside = ~((x > 0.5) & (x < 2.0))
    kinds = np.where(outside, 1, kinds)
  elif op in ("sin", "cos"):
    ax = np.abs(x)
    bounds = np.where(ax <= 2 * np.pi, bound, np.where(ax <= 100 * np.pi, 2.0 ** -14.7, 0.0))
  return kinds, bounds


def _wobble(x) -> np.ndarray:
  """A deterministic value in [-1, 1] per element, from the input's bits (a multiplicative hash)."""
  bits = np.ascontiguousarray(np.asarray(x, f32)).view(u32).astype(u64)
  h = ((bits * u64(0x9E3779B1)) ^ (bits >> u64(7))) & u64(0xFFFFFFFF)
  return h.astype(f64) / 2147483647.5 - 1.0


def within_bound(op: str, exact, x, src=None) -> np.ndarray:
  """The exact result (float64) moved within the ISA's bound for op by an amount derived from the input x, then
  rounded to f32 (the move leaves room for the rounding's half ulp, so the f32 result is within the bound of the
  exact value); non-finite and zero results are the exact ones rounded. src: the operand the bound depends on
  (x itself when None)."""
  e = np.asarray(exact, f64)
  r = e.astype(f32)
  kinds, bounds = bound_for(op, x if src is None else src, e)
  with np.errstate(all="ignore"):
    half_ulp = 0.5 * np.abs(np.spacing(r)).astype(f64)
    allowed = np.where(kinds == 0, bounds * 2 * half_ulp, np.where(kinds == 1, bounds * np.abs(e), bounds))
    amp = np.maximum(allowed - half_ulp, 0.0) * 0.999
    out = (e + amp * _wobble(x)).astype(f32)
  keep = ~np.isfinite(r) | (r == 0) | ~np.isfinite(out)
  return np.where(keep, r, out).astype(f32)


def div_approx32(a, b) -> np.ndarray:
  """div.approx.f32: a * (1/b), within 2 ulp for |b| in [2^-126, 2^126]; for 2^126 < |b| < 2^128 a sign-preserving
  zero (NaN when a is infinite: inf * 0) (PTX ISA 9.1, div, Notes)."""
  a, b = np.asarray(a, f32), np.asarray(b, f32)
  with np.errstate(all="ignore"):
    inv = (1.0 / b.astype(f64))
    inv = np.where(np.abs(b.astype(f64)) > 2.0 ** 126, np.copysign(0.0, inv), inv)
    exact = a.astype(f64) * inv
  bits = np.broadcast_to(a, np.broadcast(a, b).shape).view(u32) ^ np.broadcast_to(b, np.broadcast(a, b).shape).view(u32)
  return within_bound("div", exact, bits.view(f32), src=np.zeros(bits.shape))


# ---- integer instructions of the PTX ISA's "Integer Arithmetic" section that clang-19 / nvcc emit for CUDA C
# intrinsics (__sad, __byte_perm with modes, __fns, __dp4a/__dp2a_lo/hi, bit masks)
PRMT_MODES = {   # byte i of the result as the selector c[1:0] picks it (PTX ISA, prmt: the f4e/b4e/rc8/ecl/ecr/rc16 table)
  "f4e": lambda c, i: c + i, "b4e": lambda c, i: (c - i) & 7, "rc8": lambda c, i: c,
  "ecl": lambda c, i: np.maximum(c, i), "ecr": lambda c, i: np.minimum(c, i), "rc16": lambda c, i: (c & 1) * 2 + (i & 1),
}


def prmt_mode(mode: str, a, b, c):
  a, b, c = (np.asarray(x).astype(u64) for x in (a, b, c))
  src = (b << u64(32)) | a
  sel = (c & u64(3)).astype(np.int64)
  r = np.zeros(np.broadcast(a, b, c).shape, u64)
  for i in range(4):
    k = np.asarray(PRMT_MODES[mode](sel, i)).astype(u64)
    r |= ((src >> (k * u64(8))) & u64(0xFF)) << u64(8 * i)
  return r.astype(u32)


def sad(a, b, c, dt):
  """sad: c + |a - b| (the difference taken in the type's signedness, the sum wrapping)."""
  bits = np.dtype(dt).itemsize * 8
  a64, b64, c64 = (np.asarray(x).astype(object if bits == 64 else np.int64) for x in (a, b, c))
  d = np.abs(a64 - b64)
  out = (c64 + d) % (1 << bits) if bits == 64 else (c64 + d) & ((1 << bits) - 1)
  return np.asarray(out).astype(np.uint64).astype(UNSIGNED[bits // 8]).view(dt) if bits == 64 else \
    np.asarray(out).astype(UNSIGNED[bits // 8]).view(dt)


def bmsk(a, b, mode: str):
  """bmsk.{clamp,wrap}.b32: a mask of b ones from bit a; .wrap takes both modulo 32, .clamp limits both to 32; bits
  past 31 are dropped."""
  a, b = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
  if mode == "wrap": a, b = a & 31, b & 31
  else: a, b = np.minimum(a, 32), np.minimum(b, 32)
  ones = ((np.int64(1) << b) - 1) << a
  return (ones & 0xFFFFFFFF).astype(u32)


def szext(a, b, mode: str, signed: bool):
  """szext.{clamp,wrap}.{s32,u32}: a's low b bits, sign- or zero-extended (b: .wrap modulo 32, .clamp at most 32)."""
  a, b = np.asarray(a).astype(u64), np.asarray(b).astype(np.int64)
  b = b & 31 if mode == "wrap" else np.minimum(b, 32)
  low = a & ((u64(1) << b.astype(u64)) - u64(1))
  if signed:
    neg = (b > 0) & (((low >> np.maximum(b - 1, 0).astype(u64)) & u64(1)) == u64(1))
    low = np.where(neg, low | (~((u64(1) << b.astype(u64)) - u64(1))), low)
  return (low & u64(0xFFFFFFFF)).astype(u32)


def _reverse32(v: np.ndarray) -> np.ndarray:
  """The 32 bits of each element of v (uint32) in reverse order (swap halves, bytes, nibbles, pairs, bits)."""
  v = (v >> u32(16)) | (v << u32(16))
  v = ((v >> u32(8)) & u32(0x00FF00FF)) | ((v & u32(0x00FF00FF)) << u32(8))
  v = ((v >> u32(4)) & u32(0x0F0F0F0F)) | ((v & u32(0x0F0F0F0F)) << u32(4))
  v = ((v >> u32(2)) & u32(0x33333333)) | ((v & u32(0x33333333)) << u32(2))
  return ((v >> u32(1)) & u32(0x55555555)) | ((v & u32(0x55555555)) << u32(1))


def fns(mask, base, offset):
  """fns.b32: the position of the |offset|-th set bit of mask from bit base (toward the MSB for a positive offset,
  the LSB for a negative one; offset 0: base itself if set), 0xffffffff when there is none (PTX ISA, fns).
  The bits on the searched side of base (base included) are kept, bit-reversed for a downward search; then the
  lowest set bit (m & -m) is taken off |offset| times: max |offset| steps of a few integer operations."""
  mask = np.asarray(mask).astype(u32)
  base = np.asarray(base).astype(np.int64)
  off = np.asarray(offset).astype(np.int32).astype(np.int64)
  shape = np.broadcast(mask, base, off).shape
  mask, base, off = (np.broadcast_to(x, shape) for x in (mask, base, off))
  inside = (base >= 0) & (base < 32)
  b = (base * inside).astype(u32)
  down = off < 0
  # the searchable bits: base and above (offset > 0), or base and below bit-reversed (offset < 0); an outside base
  # has none. (Shifting a uint32 by 32 is not defined in numpy: the masks are built from b < 32 only.)
  above = mask & ~((u32(1) << b) - u32(1))
  below = _reverse32(mask) & ~((u32(1) << (u32(31) - b)) - u32(1))
  m = np.where(down, below, above) * inside.astype(u32)
  count = np.abs(off)
  hit = np.zeros(shape, u32)
  for step in range(1, min(int(count.max(initial=0)), 32) + 1):     # (32 bits: no 33rd set bit)
    low = m & (~m + u32(1))
    hit |= low * (count == step).astype(u32)
    m ^= low
  pos = np.frexp(hit.astype(np.float64))[1].astype(np.int64) - 1          # the hit bit's index; -1: none
  pos = np.where(down, 31 - pos, pos)
  found = hit != 0
  zero = inside & (off == 0) & (((mask >> b) & u32(1)) != 0)
  return np.where(found, pos, np.where(zero, base, 0xFFFFFFFF)).astype(np.uint32)


def dp4a(a, b, c, a_signed: bool, b_signed: bool):
  """dp4a: c + the sum of the products of a's and b's four bytes (each signed or not per its type), wrapping."""
  acc = np.asarray(c).astype(np.int64)
  for i in range(4):
    x = (np.asarray(a).astype(np.int64) >> (8 * i)) & 0xFF
    y = (np.asarray(b).astype(np.int64) >> (8 * i)) & 0xFF
    if a_signed: x = np.where(x >= 128, x - 256, x)
    if b_signed: y = np.where(y >= 128, y - 256, y)
    acc = acc + x * y
  return (acc & 0xFFFFFFFF).astype(u32)


def dp2a(a, b, c, a_signed: bool, b_signed: bool, hi: bool):
  """dp2a.{lo,hi}: c + a's two 16-bit halves times two bytes of b (bytes 0,1 for .lo, 2,3 for .hi), wrapping."""
  acc = np.asarray(c).astype(np.int64)
  for i in range(2):
    x = (np.asarray(a).astype(np.int64) >> (16 * i)) & 0xFFFF
    y = (np.asarray(b).astype(np.int64) >> (8 * (i + (2 if hi else 0)))) & 0xFF
    if a_signed: x = np.where(x >= 32768, x - 65536, x)
    if b_signed: y = np.where(y >= 128, y - 256, y)
    acc = acc + x * y
  return (acc & 0xFFFFFFFF).astype(u32)



# ---- .relu / .satfinite / f64 -> bf16 (PTX ISA 9.1, 9.7.9.21 cvt "Saturation modifier", 9.7.4.4 fma .relu)
F16_MAX, BF16_MAX_BITS = 65504.0, 0x7F7F


def relu16(bits, kind: str):
  """.relu on 16-bit float bits (kind f16/bf16): negative results become +0, a NaN the canonical NaN 0x7fff."""
  b = np.asarray(bits).astype(u16)
  nan = ((b & u16(0x7FFF)) > u16(0x7C00)) if kind == "f16" else ((b & u16(0x7FFF)) > u16(0x7F80))
  neg = (b & u16(0x8000)) != 0
  return np.where(nan, u16(0x7FFF), np.where(neg, u16(0), b)).astype(u16)


def satfinite16(x64, bits, kind: str):
  """.satfinite for an f16/bf16 result `bits` of the value x64: |x| beyond the largest finite value gives that
  value with x's sign ("sign-preserved MAX_NORM"); a NaN stays NaN."""
  x64 = np.asarray(x64, f64)
  big = np.abs(x64) > (F16_MAX if kind == "f16" else float(bf16_to_f32(np.array(BF16_MAX_BITS, u16))))
  mx = u16(0x7BFF) if kind == "f16" else u16(BF16_MAX_BITS)
  sat = np.where(x64 < 0, mx | u16(0x8000), mx).astype(u16)
  return np.where(big & ~np.isnan(x64), sat, np.asarray(bits).astype(u16)).astype(u16)


def f64_to_bf16(v, mode: str = "rn"):
  """An f64 rounded once to bf16 (rn, or rz): through f32 rounded to odd (24 bits, > 8 + 2: no double rounding)."""
  v = np.asarray(v, f64)
  with np.errstate(all="ignore"):
    t = v.astype(f32)
    back = t.astype(f64)
    over = np.abs(back) > np.abs(v)
    t = np.where(over & np.isfinite(v), np.nextafter(t, f32(0)), t).astype(f32)
    inexact = (t.astype(f64) != v) & np.isfinite(v)
    t = np.where(inexact, (t.view(u32) | u32(1)).view(f32), t)
  return f32_to_bf16(t, mode)


def tf32_rna(x):
  """cvt.rna.tf32.f32: the f32 rounded to 10 fraction bits, ties away from zero, as .b32 with the low 13 bits 0."""
  b = np.asarray(x, f32).view(u32).astype(u64)
  nan = np.isnan(np.asarray(x, f32))
  r = ((b + u64(0x1000)) & u64(0xFFFFE000)).astype(u32)
  return np.where(nan, np.asarray(x, f32).view(u32), r).astype(u32)


def lop3(a, b, c, lut: int):
  """lop3.b32 (9.7.8.6): bit i of the result is bit (a_i b_i c_i) of immLut (a the MSB: F(0xF0, 0xCC, 0xAA) = lut)."""
  a, b, c = (np.asarray(v).astype(u32) for v in (a, b, c))
  out = np.zeros(np.broadcast(a, b, c).shape, u32)
  for i in range(8):
    if (lut >> i) & 1:
      out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
  return out
