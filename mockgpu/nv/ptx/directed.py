"""Float arithmetic with the directed rounding modifiers .rz/.rm/.rp (PTX ISA 9.1, 9.7.3.3-8, 9.7.3.13, 9.7.3.15:
add, sub, mul, fma, div, rcp, sqrt .rnd = {.rn, .rz, .rm, .rp}, "mantissa LSB rounds towards zero / negative infinity /
positive infinity"; what nvcc and clang emit for __fadd_rz, __fmul_ru, __fdiv_rd, __fsqrt_ru, __frcp_rz, __fmaf_rd,
__dadd_rz and the like).

Each result is the exact value rounded once in the given direction. The exact value is carried as a float64 `x` and
the sign of what x misses (`res`: exact - x as a sign, or a value of that sign), from error-free transforms: an f32
product is exact in f64; a sum's error comes from TwoSum; a quotient's and a square root's from the fma residue
a - q * b and a - s * s (the f64 fma of the RDNA3 emulator's helpers is correctly rounded, so the residue, which is
representable, is exact). The f64 fma's directed rounding takes the rare exact path through rationals.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ... import floats as _rt

f32, f64 = np.float32, np.float64
MODES = ("rz", "rm", "rp")


def _two_sum(a, b):
  s = a + b
  bb = s - a
  e = (a - (s - bb)) + (b - bb)
  return s, np.where(np.isfinite(s), e, 0.0)


def _round(x, res, dt, mode: str):
  """x + (something of res's sign, smaller than an ulp of x in dt's precision) rounded toward `mode` in dt."""
  x, res = np.asarray(x, f64), np.asarray(res, f64)
  with np.errstate(all="ignore"):
    r = x.astype(dt)
    back = r.astype(f64)
    above = (back > x) | ((back == x) & (res < 0))     # r is above the exact value
    below = (back < x) | ((back == x) & (res > 0))
    if mode == "rz": down, up = above & (back > 0), below & (back < 0)
    elif mode == "rm": down, up = above, np.zeros_like(above)
    else: down, up = np.zeros_like(below), below
    # the exact value is nonzero and finite: a step never crosses zero (r and the value have one sign)
    r = np.where(down, np.nextafter(r, dt(-np.inf)), r)
    r = np.where(up, np.nextafter(r, dt(np.inf)), r)
    # an overflow of finite operands: rz/rm/rp keep the largest finite value where they round toward it
    big = np.isinf(r) & np.isfinite(x) if dt == f32 else np.zeros(r.shape, bool)
  return np.where(big & ((mode == "rz") | ((mode == "rm") & (r > 0)) | ((mode == "rp") & (r < 0))),
                  np.copysign(np.finfo(dt).max, r), r).astype(dt)


def _zero_sign(r, a, b, mode: str, negate_b: bool = False):
  """IEEE 754's sign of an exact zero sum: +0 except under round-down (-0), and -0 + -0 = -0 in every mode."""
  if mode != "rm": return r
  sb = np.signbit(b) ^ negate_b
  both_plus = ~np.signbit(a) & ~sb
  return np.where((r == 0) & ~both_plus, -0.0, r).astype(r.dtype)


def add(a, b, dt, mode: str, sub: bool = False):
  a, b = np.asarray(a, dt), np.asarray(b, dt)
  with np.errstate(all="ignore"):
    if dt == f32:
      x, e = _two_sum(a.astype(f64), (-b if sub else b).astype(f64))
      r = _round(x, e, f32, mode)
    else:
      s, e = _two_sum(a, -b if sub else b)
      r = _overflow64(_step64(s, e, mode), a, -b if sub else b, mode)
  return _zero_sign(r, a, b, mode, sub)


def mul(a, b, dt, mode: str):
  a, b = np.asarray(a, dt), np.asarray(b, dt)
  with np.errstate(all="ignore"):
    if dt == f32: return _round(a.astype(f64) * b.astype(f64), 0.0, f32, mode)   # exact in f64
    p = a * b
    e = np.where(np.isfinite(p), _rt.fma64(a, b, -p), 0.0)
    return _overflow64(_step64(p, e, mode), a, b, mode, product=True)


def fma(a, b, c, dt, mode: str):
  a, b, c = np.asarray(a, dt), np.asarray(b, dt), np.asarray(c, dt)
  with np.errstate(all="ignore"):
    if dt == f32:
      x, e = _two_sum(a.astype(f64) * b.astype(f64), c.astype(f64))   # the product exact, the sum error-free
      return _round(x, e, f32, mode)
  shape = np.broadcast(a, b, c).shape
  out = np.empty(shape, f64)
  for i, (x, y, z) in enumerate(zip(*(np.broadcast_to(v, shape).reshape(-1) for v in (a, b, c)))):
    out.reshape(-1)[i] = _fma64_exact(float(x), float(y), float(z), mode)
  return out


def div(a, b, dt, mode: str):
  a, b = np.asarray(a, dt), np.asarray(b, dt)
  with np.errstate(all="ignore"):
    A, B = a.astype(f64), b.astype(f64)
    q = A / B
    r = np.where(np.isfinite(q) & (q != 0), _rt.fma64(-q, B, A), 0.0)   # A - q B: its sign over B's is the miss
    res = r * np.sign(B)
    if dt == f32: return _round(q, res, f32, mode)
    return _overflow64(_step64(q, res, mode), a, b, mode, quotient=True)


def sqrt(a, dt, mode: str):
  a = np.asarray(a, dt)
  with np.errstate(all="ignore"):
    A = a.astype(f64)
    s = np.sqrt(A)
    res = np.where(np.isfinite(s) & (s > 0), _rt.fma64(-s, s, A), 0.0)
    if dt == f32: return _round(s, res, f32, mode)
    return _step64(s, res, mode)


def rcp(a, dt, mode: str):
  return div(np.ones_like(np.asarray(a, dt)), a, dt, mode)


def _step64(x, res, mode: str):
  """x (an f64 rounded to nearest) moved one step where the exact value x + res lies the other way of the mode."""
  x, res = np.asarray(x, f64), np.asarray(res, f64)
  if mode == "rz": down, up = (res < 0) & (x > 0), (res > 0) & (x < 0)
  elif mode == "rm": down, up = res < 0, np.zeros(x.shape, bool)
  else: down, up = np.zeros(x.shape, bool), res > 0
  x = np.where(down, np.nextafter(x, -np.inf), x)
  return np.where(up, np.nextafter(x, np.inf), x)


def _overflow64(r, a, b, mode: str, product: bool = False, quotient: bool = False):
  """An f64 result that overflowed from finite operands: rz, and rm/rp on the side they round toward zero, give the
  largest finite value instead of an infinity."""
  big = np.isinf(r) & np.isfinite(a) & np.isfinite(b)
  if quotient: big &= b != 0
  keep = (mode == "rz") | ((mode == "rm") & (r > 0)) | ((mode == "rp") & (r < 0))
  return np.where(big & keep, np.copysign(np.finfo(f64).max, r), r)


def _fma64_exact(x: float, y: float, z: float, mode: str) -> float:
  """a * b + c for one lane of fma.{rz,rm,rp}.f64, rounded once in the mode (rationals: exact)."""
  if not all(np.isfinite([x, y, z])): return float(np.float64(x) * np.float64(y) + np.float64(z))
  exact = Fraction(x) * Fraction(y) + Fraction(z)
  if exact == 0:        # IEEE 754: the sign both zero terms share, else +0 (-0 when rounding down)
    sp, sz = bool(np.signbit(x) ^ np.signbit(y)), bool(np.signbit(z))
    if x * y == 0 and z == 0 and sp == sz: return -0.0 if sp else 0.0
    return -0.0 if mode == "rm" else 0.0
  try: near = float(exact)            # correctly rounded to nearest
  except OverflowError: near = float(np.copysign(np.inf, 1.0 if exact > 0 else -1.0))
  if np.isinf(near):
    keep = mode == "rz" or (mode == "rm" and near > 0) or (mode == "rp" and near < 0)
    return float(np.copysign(np.finfo(f64).max, near)) if keep else near
  diff = exact - Fraction(near)
  return float(_step64(np.float64(near), np.float64(1.0 if diff > 0 else -1.0 if diff < 0 else 0.0), mode))
