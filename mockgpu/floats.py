"""Correctly rounded float arithmetic numpy does not give: fused multiply-add in f16, f32 and f64 (one rounding, as
the hardware's FMA: IEEE 754-2008 fusedMultiplyAdd) and the rounding of an exact rational to a float type. Shared by
the AMD wave emulator (amd/emu/rt.py: V_FMA_*) and the NV mock's PTX interpreter (nv/ptx/semantics.py: fma.rn)."""
from __future__ import annotations

import numpy as np

u64 = np.uint64
f16, f32, f64 = np.float16, np.float32, np.float64


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
  """f64 fma, correctly rounded: a*b = p + e exactly (Veltkamp/Dekker), p + c = s + t exactly (TwoSum),
  r = s + (t + e). The error eu of t + e can only matter when s + (t + e) was a tie; those rare lanes are computed
  exactly with rationals."""
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
    u = t + e
    bu = u - t
    eu = (t - (u - bu)) + (e - bu)
    r = s + u
    br = r - s
    er = (s - (r - br)) + (u - br)                 # the final rounding error
    ok = np.isfinite(r) & np.isfinite(e) & np.isfinite(t)
    r = np.where(ok, r, p + c)
    # only a final sum that sat exactly on a tie can be rounded the wrong way by the dropped eu
    half = np.spacing(np.abs(r)) * 0.5
    risky = ok & (eu != 0) & ((np.abs(er) == half) | (np.abs(er) == half * 0.5))
    # the splitting overflows for operands near the top of the range (a*2^27 = inf: not ok) and the product's error
    # term loses bits below the denormals for |a*b| < 2^-969: those lanes, with finite operands, are exact too
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    risky |= finite & (~ok | ((np.abs(p) < f64(2.0**-968)) & (a != 0) & (b != 0)))
  idx = np.flatnonzero(risky)
  if idx.size:
    from fractions import Fraction
    shape = r.shape
    r = np.array(r, f64).reshape(-1)
    fa, fb, fc = (np.broadcast_to(v, shape).reshape(-1) for v in (a, b, c))
    for i in idx: r[i] = exact_round(Fraction(float(fa[i])) * Fraction(float(fb[i])) + Fraction(float(fc[i])), f64)
    r = r.reshape(shape)
  return r


def exact_round(x, ftype, zero_sign: bool = False):
  """A rational rounded once to ftype: nearest, ties to even, subnormals and overflow (to inf) included."""
  import math
  from fractions import Fraction
  if x == 0: return ftype(-0.0 if zero_sign else 0.0)
  mbits, emin, emax = {np.dtype(f64): (52, -1022, 1023), np.dtype(f32): (23, -126, 127),
                       np.dtype(f16): (10, -14, 15)}[np.dtype(ftype)]
  neg, x = x < 0, abs(x)
  e = x.numerator.bit_length() - x.denominator.bit_length()
  if Fraction(2) ** e > x: e -= 1                 # 2^e <= x < 2^(e+1)
  e = max(e, emin)                                # below the normals the quantum stays 2^(emin - mbits)
  m = round(x / Fraction(2) ** (e - mbits))       # Fraction.__round__: half to even
  if m >= 1 << (mbits + 1): m, e = m >> 1, e + 1  # rounded up to the next power of two (m even: exact)
  if e > emax: return ftype(-np.inf if neg else np.inf)
  v = math.ldexp(float(m), e - mbits)
  return ftype(-v if neg else v)
