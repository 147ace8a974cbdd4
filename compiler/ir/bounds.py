"""Per-node facts computed once and kept in a slot of the UOp: value bounds (vmin, vmax: UOp._mm) and the set of
RANGEs a node is inside (UOp.ranges: UOp._rg). Each function sees its sources' results already computed."""
from __future__ import annotations

import math

from .dtypes import PtrDType, dtypes
from .ops import GroupOp, O

_INF_OK = GroupOp.Comparison | {O.WHERE}
_INF = (float("inf"), float("-inf"))


def _has_inf(mm) -> bool:
  for lo, hi in mm:
    # an int bound (nearly all of them) is never infinite: told apart by its class, without the tuple search
    if (lo.__class__ is not int and lo in _INF) or (hi.__class__ is not int and hi in _INF): return True
  return False


def vminmax(u) -> tuple:
  """(vmin, vmax) of u's value; a storage type's bounds where nothing better is known. The sources' bounds are known
  (their _mm slot is set): UOp._bounds sees to it."""
  dt = u.dtype
  src = u.src
  if len(src) == 2 and dt.kind == "int":
    # the most frequent node first: two sources and a signed fixed-width type (no literal, pointer, RANGE or
    # DEFINE_VAR has two sources), the steps of the general path below that apply to it, in its order
    op = u.op
    bounds = dt.bounds
    a, b = mm = (src[0]._mm, src[1]._mm)
    if a is bounds or b is bounds:   # the saturated shortcut (see below)
      if op in _WRAP_ALL: return bounds
      if op is O.MUL and (a is not bounds or b != (0, 0)) and (b is not bounds or a != (0, 0)): return bounds
    if not (a[0].__class__ is int and a[1].__class__ is int and b[0].__class__ is int and b[1].__class__ is int) and \
       op not in _INF_OK and _has_inf(mm): return bounds
    f = _BY_OP.get(op)
    if f is None: return bounds
    lo, hi = r = f(u, dt, mm)
    return bounds if lo < bounds[0] or hi > bounds[1] else r
  if dt.__class__ is PtrDType or dt is _VOID: return (0, 0)   # (DTypes are interned: == is identity)
  cv = u._cv
  if cv is not None: return (cv, cv)
  op = u.op
  if op in (O.RANGE, O.SPECIAL): return (0, max(0, u.src[0]._mm[1] - 1))
  if op is O.DEFINE_VAR: return (u.arg.vmin, u.arg.vmax) if dt.is_int else dt.bounds
  if not (dt.is_int or dt.is_bool): return dt.bounds
  if len(src) == 2:   # most nodes: the two sources' bounds, and the test for an infinite one on plain ints skipped
    a, b = mm = (src[0]._mm, src[1]._mm)
    # a signed fixed-width ADD/SUB/XOR/OR with an operand that may be any value of the type may be any value too
    # (_add/_sub: the sum leaves the range unless the other is 0 and the result is the whole range; _bits: a negative
    # operand gives the type's bounds): the answer without the arithmetic (a saturated operand holds dt.bounds itself)
    if (a is dt.bounds or b is dt.bounds) and dt.kind == "int":
      if op in _WRAP_ALL: return dt.bounds
      # _mul: times anything but exactly 0 the product covers the type (x1, and x(0..1), give the whole range; other
      # factors leave it)
      if op is O.MUL and (a is not dt.bounds or b != (0, 0)) and (b is not dt.bounds or a != (0, 0)):
        return dt.bounds
    if not (a[0].__class__ is int and a[1].__class__ is int and b[0].__class__ is int and b[1].__class__ is int) and \
       op not in _INF_OK and _has_inf(mm): return dt.bounds
  else:
    mm = [s._mm for s in src]
    if op not in _INF_OK and _has_inf(mm): return dt.bounds
  f = _BY_OP.get(op)
  if f is None: return dt.bounds
  lo, hi = r = f(u, dt, mm)
  if dt.kind in _FIXED and (lo < dt.bounds[0] or hi > dt.bounds[1]): return dt.bounds
  return r


_VOID = dtypes.void
_WRAP_ALL = frozenset({O.ADD, O.SUB, O.XOR, O.OR})
_FIXED = ("int", "uint")   # the kinds whose values wrap: a result outside the type's range says nothing


def _add(u, dt, mm): return (mm[0][0] + mm[1][0], mm[0][1] + mm[1][1])
def _sub(u, dt, mm): return (mm[0][0] - mm[1][1], mm[0][1] - mm[1][0])
def _neg(u, dt, mm): return dt.bounds if dt.is_bool else (-mm[0][1], -mm[0][0])


def _mul(u, dt, mm):
  (a0, a1), (b0, b1) = mm
  c = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
  return (min(c), max(c))


def _max(u, dt, mm): return (max(mm[0][0], mm[1][0]), max(mm[0][1], mm[1][1]))
def _after(u, dt, mm): return mm[0]


def _cast(u, dt, mm):
  if u.src[0].dtype.is_int or u.src[0].dtype.is_bool: return (int(mm[0][0]), int(mm[0][1]))
  return dt.bounds


def _div(u, dt, mm):
  (a0, a1), (b0, b1) = mm
  if b0 > 0 or b1 < 0:
    if u.op is O.FLOORDIV: corners = [a // b for a in (a0, a1) for b in (b0, b1)]
    else: corners = [tdiv(a, b) for a in (a0, a1) for b in (b0, b1)]
    return (min(corners), max(corners))
  return dt.bounds


def _floormod(u, dt, mm):
  (a0, a1), (b0, b1) = mm
  if b0 > 0:
    if a0 >= 0 and a1 < b0: return (a0, a1)
    return (0, b1 - 1)
  if b1 < 0: return (b0 + 1, 0)
  return dt.bounds


def _imod(u, dt, mm):
  (a0, a1), (b0, b1) = mm
  if b0 > 0 or b1 < 0:
    m = max(abs(b0), abs(b1)) - 1
    if a0 >= 0: return (0, min(m, a1))
    if a1 <= 0: return (max(-m, a0), 0)
    return (-m, m)
  return dt.bounds


def _cmp(u, dt, mm):
  (a0, a1), (b0, b1) = mm
  if u.op is O.CMPLT:
    if a1 < b0: return (True, True)
    if a0 >= b1: return (False, False)
  else:
    eq = u.op is O.CMPEQ
    if a0 == a1 == b0 == b1: return (eq, eq)
    if a1 < b0 or b1 < a0: return (not eq, not eq)
  return (False, True)


def _where(u, dt, mm):
  (c0, c1) = mm[0]
  if c0 == c1: return mm[1] if c0 else mm[2]
  return (min(mm[1][0], mm[2][0]), max(mm[1][1], mm[2][1]))


def _not(u, dt, mm): return (not mm[0][1], not mm[0][0]) if dt.is_bool else dt.bounds


def _bits(u, dt, mm):
  op = u.op
  if dt.is_bool:
    if op is O.AND: return (mm[0][0] and mm[1][0], mm[0][1] and mm[1][1])
    if op is O.OR: return (mm[0][0] or mm[1][0], mm[0][1] or mm[1][1])
    return (False, True)
  if mm[0][0] >= 0 and mm[1][0] >= 0:
    if op is O.AND: return (0, min(mm[0][1], mm[1][1]))
    return (0, (1 << max(int(mm[0][1]).bit_length(), int(mm[1][1]).bit_length())) - 1)
  if op is O.AND:   # one operand non-negative: the result has only its bits (two's complement), whatever the other
    for lo, hi in mm:
      if lo >= 0: return (0, hi)
  return dt.bounds


def _shl(u, dt, mm):
  if dt.is_bool: return dt.bounds
  if mm[1][0] == mm[1][1] and 0 <= mm[1][0] < 64: return (mm[0][0] << mm[1][0], mm[0][1] << mm[1][0])
  return dt.bounds


def _shr(u, dt, mm):
  if dt.is_bool: return dt.bounds
  if mm[1][0] >= 0 and mm[0][0] >= 0 and mm[1][1] < 64: return (mm[0][0] >> mm[1][1], mm[0][1] >> mm[1][0])
  return dt.bounds


def _reduce(u, dt, mm):
  """A loop-carried value: the accumulator of a REDUCE over its ranges, T iterations in all (T: the product of the
  ranges' trip counts, each within its end's bounds). A sum of T values in [lo, hi] is in [lo*T, hi*T]; a maximum is
  in [lo, hi], or the accumulator's start (the type's least value) when T can be 0."""
  tmin, tmax = 1, 1
  for r in u.src[1:]:
    e0, e1 = r.src[0]._mm
    tmin, tmax = tmin * max(0, e0), tmax * max(0, e1)
  (lo, hi) = mm[0]
  if u.arg is O.ADD: out = (min(lo * tmin, lo * tmax), max(hi * tmin, hi * tmax))
  elif u.arg is O.MAX: out = (lo, hi) if tmin >= 1 else None
  else: out = None
  # a weak-int accumulator is stored as int32 (reduce_to_acc): what it holds is exact only within int32
  if out is None or (dt.is_weak and not (-(1 << 31) <= out[0] and out[1] < (1 << 31))): return dt.bounds
  return out


_BY_OP = {O.REDUCE: _reduce, O.ADD: _add, O.SUB: _sub, O.NEG: _neg, O.MUL: _mul, O.MAX: _max, O.AFTER: _after,
          O.CAST: _cast, O.FLOORDIV: _div, O.IDIV: _div, O.FLOORMOD: _floormod, O.IMOD: _imod,
          O.CMPLT: _cmp, O.CMPEQ: _cmp, O.CMPNE: _cmp, O.WHERE: _where, O.NOT: _not, O.AND: _bits,
          O.OR: _bits, O.XOR: _bits, O.SHL: _shl, O.SHR: _shr}


def tdiv(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def ranges_of(u) -> frozenset:
  """The RANGEs u depends on that no END or REDUCE on the way closed."""
  if u.op is O.RANGE: return frozenset({u}) | u.src[0]._rg
  acc = _NO_RANGES
  for s in u.src:   # most nodes are in no range, or in their sources' ranges: those sets are shared, not rebuilt
    r = s._rg
    if r and r is not acc: acc = acc | r if acc else r
  if u.op in (O.END, O.REDUCE): acc -= frozenset(u.src[1:])
  return acc


_NO_RANGES = frozenset()
