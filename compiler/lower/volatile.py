"""Volatile buffers (UOp.param(..., volatile=True)): each LOAD of one runs where its value is used.

A load belongs to the loops its sources depend on, so linearize places a loop-invariant load before the loop (it
hoists it). For a volatile buffer every iteration must read memory again: a LOAD whose value is only used inside
LOOP or REDUCE ranges it does not itself depend on gets those ranges as ordering sources (LOAD(index, *deps, range)),
which puts it, and what is computed from it, inside the loop. Distinct loads stay distinct because the DSL gives each
volatile access its own arg.
"""
from __future__ import annotations

from ..ir import Ops, PatternMatcher, UOp, UPat, graph_rewrite


def _volatile(u: UOp) -> bool:
  if u.op is not Ops.LOAD: return False
  buf = u.src[0].buffer
  return buf.op is Ops.PARAM and buf.arg.volatile


def _use_ranges(sink: UOp) -> dict:
  """For every node, the ranges it is used inside: its own, and those every use of its value is inside (an END or a
  REDUCE uses its source inside the ranges it closes). A loop-invariant ADD of a load that a store in a loop reads
  is used inside that loop, though linearize would compute it before."""
  nodes = sink.toposort()
  within: dict[UOp, frozenset | None] = {u: None for u in nodes}
  out: dict[UOp, frozenset] = {}
  for u in reversed(nodes):   # users before their sources
    use = u.ranges | (within[u] or frozenset())
    out[u] = use
    here = use | frozenset(u.src[1:]) if u.op in (Ops.END, Ops.REDUCE) else use
    for s in u.src:
      within[s] = here if within[s] is None else within[s] & here
  return out


def pin_volatile_loads(sink: UOp, target=None) -> UOp:
  if not any(u.arg.volatile for u in sink.by_op().get(Ops.PARAM, ())): return sink   # the usual kernel
  use = _use_ranges(sink)
  pin: dict[UOp, UOp] = {}
  for ld, rs in use.items():
    if not _volatile(ld): continue
    inside = frozenset(r for r in rs if r.op is Ops.RANGE) - ld.ranges
    if inside:
      pin[ld] = ld.replace(src=ld.src + tuple(sorted(inside, key=lambda r: r.arg[0])))
  if not pin: return sink
  return graph_rewrite(sink, PatternMatcher([(UPat(Ops.LOAD, name="x"), lambda ctx, x: ctx.get(x))],
                                            name="pin_volatile"), ctx=pin, bottom_up=True)
