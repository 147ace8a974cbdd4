"""Volatile buffers (UOp.param(..., volatile=True)): each LOAD of one runs where its users run.

A load belongs to the loops its sources depend on, so linearize places a loop-invariant load before the loop (it
hoists it). For a volatile buffer every iteration must read memory again: a LOAD whose users are all inside a LOOP or
REDUCE range the load itself does not depend on gets that range as an ordering source (LOAD(index, *deps, range)),
which puts it inside the loop. Distinct loads stay distinct because the DSL gives each volatile access its own arg.
"""
from __future__ import annotations

from ..ir import Ops, PatternMatcher, UOp, UPat, graph_rewrite


def _volatile(u: UOp) -> bool:
  if u.op is not Ops.LOAD: return False
  buf = u.src[0].buffer
  return buf.op is Ops.PARAM and buf.arg.volatile


def pin_volatile_loads(sink: UOp, target=None) -> UOp:
  users: dict[UOp, list] = {}
  for u in sink.toposort():
    for s in u.src: users.setdefault(s, []).append(u)
  pin: dict[UOp, UOp] = {}
  for ld, us in users.items():
    if not _volatile(ld): continue
    inside = frozenset.intersection(*(u.ranges for u in us)) - ld.ranges
    if inside:
      pin[ld] = ld.replace(src=ld.src + tuple(sorted(inside, key=lambda r: r.arg[0])))
  if not pin: return sink
  return graph_rewrite(sink, PatternMatcher([(UPat(Ops.LOAD, name="x"), lambda ctx, x: ctx.get(x))],
                                            name="pin_volatile"), ctx=pin, bottom_up=True)
