"""Reference semantics of the ALU ops on Python values, and an evaluator for scalar UOp expressions.

Used by constant folding and by tests (a simplified expression must evaluate like the original).
Integer results wrap to their dtype's width; weak ints are unbounded; FLOORDIV/FLOORMOD follow Python, IDIV/IMOD C.
"""
from __future__ import annotations

import math

from .dtypes import DType, truncate
from .ops import Ops
from .uop import CompileError, UOp


def _tdiv(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def _fdiv(a, b):
  try: return a / b
  except ZeroDivisionError:
    if a == 0 or math.isnan(a): return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _shr(a: int, b: int, dt: DType) -> int:
  if dt.kind == "uint": return (a & ((1 << (8 * dt.itemsize)) - 1)) >> b
  return a >> b


class EvalError(CompileError):
  """The value is undefined (division by zero, shift out of range): it can't be folded."""


def exec_alu(op: Ops, dt: DType, vals: list):
  """The value of op applied to vals, as a variable of dtype dt holds it."""
  if dt.is_int and op in (Ops.FLOORDIV, Ops.FLOORMOD, Ops.IDIV, Ops.IMOD) and vals[1] == 0:
    raise EvalError(f"{op.name} by zero")
  if op in (Ops.SHL, Ops.SHR) and not (0 <= vals[1] < max(8 * dt.itemsize, 64)): raise EvalError(f"{op.name} by {vals[1]}")
  a = vals[0]
  b = vals[1] if len(vals) > 1 else None
  if op is Ops.ADD: r = a + b
  elif op is Ops.SUB: r = a - b
  elif op is Ops.MUL: r = a * b
  elif op is Ops.FDIV: r = _fdiv(a, b)
  elif op is Ops.FLOORDIV: r = a // b
  elif op is Ops.FLOORMOD: r = a % b
  elif op is Ops.IDIV: r = _tdiv(a, b)
  elif op is Ops.IMOD: r = a - b * _tdiv(a, b)
  elif op is Ops.MAX: r = max(a, b)
  elif op is Ops.AND: r = (a and b) if dt.is_bool else a & b
  elif op is Ops.OR: r = (a or b) if dt.is_bool else a | b
  elif op is Ops.XOR: r = (a != b) if dt.is_bool else a ^ b
  elif op is Ops.SHL: r = a << b
  elif op is Ops.SHR: r = _shr(a, b, dt)
  elif op is Ops.CMPLT: r = a < b
  elif op is Ops.CMPEQ: r = a == b
  elif op is Ops.CMPNE: r = a != b
  elif op is Ops.WHERE: r = vals[1] if a else vals[2]
  elif op is Ops.MULACC: r = a * b + vals[2]
  elif op is Ops.NEG: r = -a
  elif op is Ops.NOT: r = (not a) if dt.is_bool else ~a
  elif op is Ops.SQRT: r = math.sqrt(a) if a >= 0 else math.nan
  elif op is Ops.EXP2:
    try: r = 2.0 ** a
    except OverflowError: r = math.inf
  elif op is Ops.LOG2: r = math.log2(a) if a > 0 else (-math.inf if a == 0 else math.nan)
  elif op is Ops.SIN: r = math.sin(a) if math.isfinite(a) else math.nan
  elif op is Ops.RECIP: r = _fdiv(1.0, a)
  elif op is Ops.TRUNC: r = float(math.trunc(a)) if math.isfinite(a) else a
  else: raise EvalError(f"no reference semantics for {op.name}")
  return truncate(r, dt)


def evaluate(root: UOp, env: dict | None = None):
  """The value of a scalar expression; env maps DEFINE_VAR (or any leaf) UOps to values."""
  env = dict(env or {})
  for u in root.toposort():
    if u in env: continue
    if u.op is Ops.CONST: env[u] = u.arg
    elif u.op is Ops.CAST:
      env[u] = truncate(env[u.src[0]], u.arg)   # a float to an integer: dtypes.float_to_int
    elif u.op in (Ops.RANGE, Ops.SPECIAL, Ops.DEFINE_VAR, Ops.LOAD):
      raise EvalError(f"evaluate: no value given for {u.op.name} {u.arg!r}", u)
    else:
      env[u] = exec_alu(u.op, u.dtype, [env[s] for s in u.src])
  return env[root]
