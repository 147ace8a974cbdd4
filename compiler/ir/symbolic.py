"""Symbolic simplification: constant folding, algebraic identities, interval folding, division/modulo, index
canonicalization. One PatternMatcher, `symbolic`; `simplify(u)` runs it to a fixed point.

Exactness: identities on fixed-width integers hold modulo 2**bits (they are ring identities); rules that are only
true on unbounded integers (division and modulo algebra, moving constants across a comparison) apply to weak ints
(index arithmetic), whose values the bounds describe exactly. Float rules are limited to x*1 and x+0.
"""
from __future__ import annotations

from .dtypes import DType, dtypes, truncate
from .evaluate import EvalError, exec_alu
from .ops import GroupOp, Ops
from .rewrite import PatternMatcher, UPat, graph_rewrite
from .uop import UOp


def _c(u: UOp):
  return u.const_value


def _k(value, dt: DType) -> UOp:
  return UOp.const(truncate(value, dt) if not dt.is_weak else value, dt)


def fold_constants(x: UOp):
  vals = [_c(s) for s in x.src]
  if any(v is None for v in vals): return None
  try: return _k(exec_alu(x.op, x.dtype, vals), x.dtype)
  except (EvalError, OverflowError, ValueError): return None


def fold_bounds(x: UOp):
  """An integer or bool ALU node whose bounds are one value is that value."""
  if not (x.dtype.is_int or x.dtype.is_bool) or x.op in (Ops.CONST,): return None
  lo, hi = x.vmin, x.vmax
  if lo == hi and not isinstance(lo, float): return _k(lo, x.dtype)
  return None


def _is_int(u: UOp) -> bool: return u.dtype.is_int
def _weak(u: UOp) -> bool: return u.dtype == dtypes.weakint


def simplify_add(x: UOp):
  a, b = x.src
  ca, cb = _c(a), _c(b)
  if cb is not None and cb == 0 and not x.dtype.is_bool: return a
  if ca is not None and ca == 0 and not x.dtype.is_bool: return b
  if not _is_int(x): return None
  if ca is not None and cb is None: return b + a                        # constants to the right
  if cb is not None and a.op is Ops.ADD and _c(a.src[1]) is not None:    # (y + c1) + c2
    return a.src[0] + _k(_c(a.src[1]) + cb, x.dtype)
  if cb is None and a.op is Ops.ADD and _c(a.src[1]) is not None:        # (y + c) + b -> (y + b) + c
    return (a.src[0] + b) + a.src[1]
  if cb is None and b.op is Ops.ADD and _c(b.src[1]) is not None:        # a + (y + c) -> (a + y) + c
    return (a + b.src[0]) + b.src[1]
  # x//c*c + x%c -> x (floor division and modulo always recombine), also one level down a sum
  if _weak(x):
    r = _divmod_join(a, b)
    if r is not None: return r
    if a.op is Ops.ADD:
      for i in (0, 1):
        r = _divmod_join(a.src[i], b)
        if r is not None: return a.src[1 - i] + r
  # collect like terms: x*c1 + x*c2, x + x, x*c + x
  ta, fa = _term(a)
  tb, fb = _term(b)
  if ta is tb and ta is not None: return ta * _k(fa + fb, x.dtype)
  if a.op is Ops.ADD:   # (y + t*f1) + t*f2 -> y + t*(f1+f2)
    t1, f1 = _term(a.src[1])
    if t1 is tb and t1 is not None: return a.src[0] + t1 * _k(f1 + fb, x.dtype)
  return None


def _divmod_join(p: UOp, q: UOp):
  """x when {p, q} is {x//c*c, x%c}, else None."""
  for m, r in ((p, q), (q, p)):
    if m.op is Ops.MUL and m.src[0].op is Ops.FLOORDIV and r.op is Ops.FLOORMOD and m.src[0].src[0] is r.src[0] and \
       _c(m.src[1]) is not None and _c(m.src[1]) == _c(m.src[0].src[1]) == _c(r.src[1]):
      return r.src[0]
  return None


def _term(u: UOp):
  """(t, factor) with u == t*factor for a constant factor; (None, 0) for a constant."""
  if _c(u) is not None: return None, 0
  if u.op is Ops.MUL and _c(u.src[1]) is not None: return u.src[0], _c(u.src[1])
  return u, 1


def simplify_sub(x: UOp):
  a, b = x.src
  if _c(b) is not None and _c(b) == 0: return a
  if a is b and _is_int(x): return _k(0, x.dtype)
  if _is_int(x) and _c(b) is not None: return a + _k(-_c(b), x.dtype)   # x - c -> x + (-c)
  if _weak(x): return a + b * _k(-1, x.dtype)                           # canonical sums of terms
  return None


def simplify_mul(x: UOp):
  a, b = x.src
  ca, cb = _c(a), _c(b)
  if cb is not None and cb == 1: return a
  if ca is not None and ca == 1: return b
  if not _is_int(x): return None
  if ca is not None and cb is None: return b * a
  if cb == 0: return _k(0, x.dtype)
  if cb is not None and a.op is Ops.MUL and _c(a.src[1]) is not None: return a.src[0] * _k(_c(a.src[1]) * cb, x.dtype)
  if cb is not None and a.op is Ops.ADD and _c(a.src[1]) is not None:   # (y + c1) * c2 -> y*c2 + c1*c2
    return a.src[0] * b + _k(_c(a.src[1]) * cb, x.dtype)
  return None


def simplify_neg(x: UOp):
  if x.src[0].op is Ops.NEG: return x.src[0].src[0]
  if _is_int(x): return x.src[0] * _k(-1, x.dtype)
  return None


def simplify_floordiv(x: UOp):
  a, b = x.src
  c = _c(b)
  if c is None or c == 0: return None
  if c == 1: return a
  if not _weak(x):
    if c > 0 and a.vmin >= 0 and a.vmax < c: return _k(0, x.dtype)
    return None
  if c == -1: return a * -1
  if a.op is Ops.MUL and _c(a.src[1]) is not None and _c(a.src[1]) % c == 0:   # (y*c1)//c -> y*(c1//c)
    return a.src[0] * (_c(a.src[1]) // c)
  if a.op is Ops.ADD:
    for i in (0, 1):   # (y + t*k*c)//c -> y//c + t*k ; floor division makes this exact for any sign
      t, f = _term(a.src[i])
      other = a.src[1 - i]
      if t is None:
        if _c(a.src[i]) % c == 0: return other // c + _c(a.src[i]) // c
      elif f % c == 0: return other // c + t * (f // c)
  if a.op is Ops.FLOORDIV and _c(a.src[1]) is not None and _c(a.src[1]) > 0 and c > 0:
    return a.src[0] // (_c(a.src[1]) * c)
  if c > 0 and a.vmin // c == a.vmax // c: return _k(a.vmin // c, x.dtype)
  return None


def simplify_floormod(x: UOp):
  a, b = x.src
  c = _c(b)
  if c is None or c == 0: return None
  if c in (1, -1): return _k(0, x.dtype)
  if c > 0 and a.vmin >= 0 and a.vmax < c: return a
  if not _weak(x): return None
  if a.op is Ops.MUL and _c(a.src[1]) is not None and _c(a.src[1]) % c == 0: return _k(0, x.dtype)
  if a.op is Ops.ADD:
    for i in (0, 1):   # (y + t*k*c) % c -> y % c
      t, f = _term(a.src[i])
      other = a.src[1 - i]
      if t is None:
        k = _c(a.src[i])
        if k % c == 0: return other % c
        if c > 0 and not 0 <= k < c: return (other + k % c) % c
      elif f % c == 0: return other % c
  if a.op is Ops.FLOORMOD and _c(a.src[1]) is not None and c > 0 and _c(a.src[1]) > 0 and _c(a.src[1]) % c == 0:
    return a.src[0] % c
  if c > 0 and a.vmin // c == a.vmax // c: return a - (a.vmin // c) * c
  return None


def simplify_truncdiv(x: UOp):
  a, b = x.src
  c = _c(b)
  if c == 1: return a if x.op is Ops.IDIV else _k(0, x.dtype)
  if c is not None and c > 0 and a.vmin >= 0 and a.vmax < c: return _k(0, x.dtype) if x.op is Ops.IDIV else a
  return None


def simplify_bits(x: UOp):
  a, b = x.src
  ca, cb = _c(a), _c(b)
  if ca is not None and cb is None: return x.replace(src=(b, a))
  if x.dtype.is_bool:
    if cb is not None:
      if x.op is Ops.AND: return a if cb else _k(False, x.dtype)
      if x.op is Ops.OR: return _k(True, x.dtype) if cb else a
      if x.op is Ops.XOR: return a.logical_not() if cb else a
  elif cb == 0:
    return _k(0, x.dtype) if x.op is Ops.AND else a
  if a is b: return a if x.op in (Ops.AND, Ops.OR) else _k(0 if not x.dtype.is_bool else False, x.dtype)
  return None


def simplify_shift(x: UOp):
  if _c(x.src[1]) == 0: return x.src[0]
  return None


def simplify_max(x: UOp):
  a, b = x.src
  if a is b: return a
  if _is_int(x):
    if a.vmin >= b.vmax: return a
    if b.vmin >= a.vmax: return b
  return None


def simplify_cmp(x: UOp):
  a, b = x.src
  if a is b and (_is_int(a) or a.dtype.is_bool): return _k(x.op is not Ops.CMPLT and x.op is Ops.CMPEQ, dtypes.bool)
  cb = _c(b)
  if x.op is Ops.CMPLT and _weak(a) and cb is not None:
    if a.op is Ops.ADD and _c(a.src[1]) is not None: return a.src[0] < (cb - _c(a.src[1]))
    if a.op is Ops.MUL and _c(a.src[1]) is not None and _c(a.src[1]) > 0:
      return a.src[0] < -((-cb) // _c(a.src[1]))   # y*k < c  <=>  y < ceil(c/k)
  if x.op in (Ops.CMPEQ, Ops.CMPNE) and _c(a) is not None and cb is None: return x.replace(src=(b, a))
  return None


def simplify_not(x: UOp):
  a = x.src[0]
  if a.op is Ops.NOT: return a.src[0]
  if a.op is Ops.CMPLT and _is_int(a.src[0]):   # not (p < q)  <=>  q < p + 1
    return a.src[1] < a.src[0] + 1 if _weak(a.src[0]) else None
  if a.op is Ops.CMPEQ: return a.src[0].ne(a.src[1])
  if a.op is Ops.CMPNE: return a.src[0].eq(a.src[1])
  return None


def simplify_where(x: UOp):
  c, a, b = x.src
  if _c(c) is not None: return a if _c(c) else b
  if a is b: return a
  if x.dtype.is_bool and _c(a) is True and _c(b) is False: return c
  if x.dtype.is_bool and _c(a) is False and _c(b) is True: return c.logical_not()
  return None


def simplify_cast(x: UOp):
  s = x.src[0]
  if s.dtype == x.arg: return s
  if s.op is not Ops.CONST and _c(s) is not None:
    v = _c(s)
    if x.arg.is_int and isinstance(v, float): return None
    return _k(v if not x.arg.is_float else float(v), x.arg)
  return None


symbolic = PatternMatcher([
  (UPat(GroupOp.ALU, name="x"), fold_constants),
  (UPat(GroupOp.ALU - {Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE}, name="x"), fold_bounds),
  (UPat(GroupOp.Comparison, name="x"), fold_bounds),
  (UPat(Ops.ADD, name="x"), simplify_add),
  (UPat(Ops.SUB, name="x"), simplify_sub),
  (UPat(Ops.MUL, name="x"), simplify_mul),
  (UPat(Ops.NEG, name="x"), simplify_neg),
  (UPat(Ops.FLOORDIV, name="x"), simplify_floordiv),
  (UPat(Ops.FLOORMOD, name="x"), simplify_floormod),
  (UPat((Ops.IDIV, Ops.IMOD), name="x"), simplify_truncdiv),
  (UPat((Ops.AND, Ops.OR, Ops.XOR), name="x"), simplify_bits),
  (UPat((Ops.SHL, Ops.SHR), name="x"), simplify_shift),
  (UPat(Ops.MAX, name="x"), simplify_max),
  (UPat(GroupOp.Comparison, name="x"), simplify_cmp),
  (UPat(Ops.NOT, name="x"), simplify_not),
  (UPat(Ops.WHERE, name="x"), simplify_where),
  (UPat(Ops.CAST, name="x"), simplify_cast),
], name="symbolic")


def simplify(u: UOp) -> UOp:
  return graph_rewrite(u, symbolic, name="symbolic")
