"""REDUCE becomes a register accumulator:

    acc = BUFFER(REG, 1 element)
    acc[0] = identity                          (after the enclosing ranges: re-initialised each outer iteration)
    acc[0] = acc[0] <op> value                 (inside the reduced ranges, ended by them)
    result = acc.after(that END)[0]
"""
from __future__ import annotations

import math

from ..ir import AddrSpace, BufferArg, CompileError, Ops, PatternMatcher, UOp, UPat, dtypes
from ..ir.uop import _short


def _storage(dt):
  return {"weakint": dtypes.int32, "weakfloat": dtypes.float32}.get(dt.kind, dt)


def _identity(op: Ops, dt):
  if op is Ops.ADD: return 0.0 if dt.is_float else 0
  if op is Ops.MUL: return 1.0 if dt.is_float else 1
  if op is Ops.MAX: return -math.inf if dt.is_float else dt.bounds[0]
  raise CompileError(f"no identity for a {op.name} reduction")


class ReduceContext:
  def __init__(self, first_slot: int): self.slot = first_slot


def lower_reduce(ctx: ReduceContext, r: UOp):
  val, rs = r.src[0], r.src[1:]
  if not rs: return val
  if r.arg not in (Ops.ADD, Ops.MUL, Ops.MAX): raise CompileError(f"unsupported reduction {r.arg}: {_short(r)}", r)
  dt = _storage(r.dtype)
  acc = UOp(Ops.BUFFER, (), BufferArg(ctx.slot, dt, 1, AddrSpace.REG))
  ctx.slot += 1
  outer = sorted(r.ranges, key=lambda x: x.arg[0])
  init = (acc.after(*outer) if outer else acc).index(0).store(UOp.const(_identity(r.arg, dt)))
  cur = acc.after(init, *rs).index(0)
  old = cur.load()
  new = old + val if r.arg is Ops.ADD else old * val if r.arg is Ops.MUL else old.maximum(val)
  upd = cur.store(new).end(*rs)
  return acc.after(upd).index(0).load()


pm_reduce = PatternMatcher([(UPat(Ops.REDUCE, name="r"), lower_reduce)], name="reduce_to_acc")


def first_free_slot(sink: UOp) -> int:
  slots = [u.arg.slot for u in sink.by_op().get(Ops.BUFFER, ())]
  return max(slots, default=-1) + 1
