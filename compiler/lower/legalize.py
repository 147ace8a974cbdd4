"""Rewrite what the target can't do natively into what it can.

Python's floor division and modulo (FLOORDIV/FLOORMOD) become C's truncating IDIV/IMOD: directly when the bounds
show both operands non-negative, else with a correction where the remainder is non-zero and the signs differ.
"""
from __future__ import annotations

from ..ir import Ops, PatternMatcher, UOp, UPat
from .target import Target


def _nonneg(a: UOp, b: UOp) -> bool: return a.vmin >= 0 and b.vmin > 0


def _pow2(b: UOp):
  c = b.const_value
  return c if isinstance(c, int) and c > 0 and c & (c - 1) == 0 else None


def floordiv(ctx: Target, x: UOp):
  if Ops.FLOORDIV in ctx.native_ops: return None
  a, b = x.src
  if _nonneg(a, b):
    if ctx.shifts_for_pow2 and _pow2(b): return a >> (_pow2(b).bit_length() - 1)
    return a.idiv(b)
  q, r = a.idiv(b), a.imod(b)
  fix = r.ne(0) & (r < 0).ne(b < 0)
  return fix.where(q - 1, q)


def floormod(ctx: Target, x: UOp):
  if Ops.FLOORMOD in ctx.native_ops: return None
  a, b = x.src
  if _nonneg(a, b):
    if ctx.shifts_for_pow2 and _pow2(b): return a & (_pow2(b) - 1)
    return a.imod(b)
  r = a.imod(b)
  fix = r.ne(0) & (r < 0).ne(b < 0)
  return fix.where(r + b, r)


def expand(ctx: Target, x: UOp):
  if x.op in ctx.native_ops: return None
  s = x.src
  if x.op is Ops.MULACC: return s[0] * s[1] + s[2]
  if x.op is Ops.MAX: return (s[0] < s[1]).where(s[1], s[0])
  if x.op is Ops.NEG: return s[0] * -1
  if x.op is Ops.SUB: return s[0] + s[1] * -1
  if x.op is Ops.CMPNE and Ops.CMPEQ in ctx.native_ops: return s[0].eq(s[1]).logical_not()
  return None


pm_legalize = PatternMatcher([
  (UPat(Ops.FLOORDIV, name="x"), floordiv),
  (UPat(Ops.FLOORMOD, name="x"), floormod),
  (UPat((Ops.MULACC, Ops.MAX, Ops.NEG, Ops.SUB, Ops.CMPNE), name="x"), expand),
], name="legalize")
