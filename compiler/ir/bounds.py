"""Per-node facts computed once and cached on the UOp (see UOp._cached): value bounds (vmin, vmax) and the set of
RANGEs a node is inside. Each function sees its sources' results already computed."""
from __future__ import annotations

import math

from .dtypes import PtrDType, dtypes
from .ops import GroupOp, Ops

_INF_OK = GroupOp.Comparison | {Ops.WHERE}
_INF = (float("inf"), float("-inf"))


def _has_inf(mm) -> bool:
  for lo, hi in mm:
    if lo in _INF or hi in _INF: return True
  return False


def vminmax(u) -> tuple:
  """(vmin, vmax) of u's value; a storage type's bounds where nothing better is known."""
  dt = u.dtype
  if isinstance(dt, PtrDType) or dt == dtypes.void: return (0, 0)
  lo_t, hi_t = dt.bounds
  op, src = u.op, u.src
  cv = u.const_value
  if cv is not None: return (cv, cv)

  def fit(lo, hi):
    if dt.kind in ("int", "uint") and (lo < lo_t or hi > hi_t): return (lo_t, hi_t)
    return (lo, hi)
  mm = [s._cache["vminmax"] for s in src]
  if op in (Ops.RANGE, Ops.SPECIAL): return (0, max(0, mm[0][1] - 1))
  if op is Ops.DEFINE_VAR: return (u.arg.vmin, u.arg.vmax) if dt.is_int else (lo_t, hi_t)
  if not (dt.is_int or dt.is_bool): return (lo_t, hi_t)
  if op not in _INF_OK and _has_inf(mm): return (lo_t, hi_t)
  if op is Ops.ADD: return fit(mm[0][0] + mm[1][0], mm[0][1] + mm[1][1])
  if op is Ops.SUB: return fit(mm[0][0] - mm[1][1], mm[0][1] - mm[1][0])
  if op is Ops.NEG and not dt.is_bool: return fit(-mm[0][1], -mm[0][0])
  if op is Ops.MUL:
    corners = [a * b for a in mm[0] for b in mm[1]]
    return fit(min(corners), max(corners))
  if op is Ops.MAX: return (max(mm[0][0], mm[1][0]), max(mm[0][1], mm[1][1]))
  if op is Ops.AFTER: return mm[0]
  if op is Ops.CAST:
    if src[0].dtype.is_int or src[0].dtype.is_bool: return fit(int(mm[0][0]), int(mm[0][1]))
    return (lo_t, hi_t)
  if op in (Ops.FLOORDIV, Ops.IDIV):
    (a0, a1), (b0, b1) = mm
    if b0 > 0 or b1 < 0:
      if op is Ops.FLOORDIV: corners = [a // b for a in (a0, a1) for b in (b0, b1)]
      else: corners = [tdiv(a, b) for a in (a0, a1) for b in (b0, b1)]
      return fit(min(corners), max(corners))
    return (lo_t, hi_t)
  if op is Ops.FLOORMOD:
    (a0, a1), (b0, b1) = mm
    if b0 > 0:
      if a0 >= 0 and a1 < b0: return (a0, a1)
      return (0, b1 - 1)
    if b1 < 0: return (b0 + 1, 0)
    return (lo_t, hi_t)
  if op is Ops.IMOD:
    (a0, a1), (b0, b1) = mm
    if b0 > 0 or b1 < 0:
      m = max(abs(b0), abs(b1)) - 1
      if a0 >= 0: return (0, min(m, a1))
      if a1 <= 0: return (max(-m, a0), 0)
      return (-m, m)
    return (lo_t, hi_t)
  if op in GroupOp.Comparison:
    (a0, a1), (b0, b1) = mm
    if op is Ops.CMPLT:
      if a1 < b0: return (True, True)
      if a0 >= b1: return (False, False)
    else:
      if a0 == a1 == b0 == b1: return (op is Ops.CMPEQ, op is Ops.CMPEQ)
      if a1 < b0 or b1 < a0: return (op is Ops.CMPNE, op is Ops.CMPNE)
    return (False, True)
  if op is Ops.WHERE:
    (c0, c1) = mm[0]
    if c0 == c1: return mm[1] if c0 else mm[2]
    return (min(mm[1][0], mm[2][0]), max(mm[1][1], mm[2][1]))
  if dt.is_bool:
    if op is Ops.NOT: return (not mm[0][1], not mm[0][0])
    if op is Ops.AND: return (mm[0][0] and mm[1][0], mm[0][1] and mm[1][1])
    if op is Ops.OR: return (mm[0][0] or mm[1][0], mm[0][1] or mm[1][1])
    return (False, True)
  if op in (Ops.AND, Ops.OR, Ops.XOR) and mm[0][0] >= 0 and mm[1][0] >= 0:
    if op is Ops.AND: return (0, min(mm[0][1], mm[1][1]))
    return (0, (1 << max(int(mm[0][1]).bit_length(), int(mm[1][1]).bit_length())) - 1)
  if op is Ops.SHL and mm[1][0] == mm[1][1] and 0 <= mm[1][0] < 64:
    return fit(mm[0][0] << mm[1][0], mm[0][1] << mm[1][0])
  if op is Ops.SHR and mm[1][0] >= 0 and mm[0][0] >= 0 and mm[1][1] < 64:
    return (mm[0][0] >> mm[1][1], mm[0][1] >> mm[1][0])
  return (lo_t, hi_t)


def tdiv(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def ranges_of(u) -> frozenset:
  """The RANGEs u depends on that no END or REDUCE on the way closed."""
  if u.op is Ops.RANGE: return frozenset({u}) | u.src[0]._cache["ranges"]
  acc = frozenset()
  for s in u.src: acc |= s._cache["ranges"]
  if u.op in (Ops.END, Ops.REDUCE): acc -= frozenset(u.src[1:])
  return acc
