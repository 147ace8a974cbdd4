"""GLOBAL and LOCAL ranges become SPECIALs (gidxN: the work-group index, lidxN: the work-item index in its group).

Ranges of one kind are numbered by axis id. More than three of a kind are folded into the third dimension
(index = (special // stride) % size). A size beyond the target's limit is an error naming the RANGE.
"""
from __future__ import annotations

import math

from ..ir import AxisType, CompileError, Ops, PatternMatcher, UOp, UPat, graph_rewrite
from ..ir.uop import _short
from .target import Target


def _size(r: UOp) -> int:
  n = r.src[0].const_value
  if n is None: raise CompileError(f"a {r.arg[1].name} range needs a constant size: {_short(r)}", r)
  return int(n)


def _drop_mapped(e: UOp):
  keep = tuple(r for r in e.src[1:] if r.op is Ops.RANGE)
  if len(keep) == len(e.src) - 1: return None
  return UOp(Ops.END, (e.src[0], *keep)) if keep else e.src[0]


def gpudims(sink: UOp, target: Target) -> UOp:
  by_op = sink.by_op()
  taken = {u.arg for u in by_op.get(Ops.SPECIAL, ())}
  mapping: dict[UOp, UOp] = {}
  for kind, prefix, limits in ((AxisType.GLOBAL, "gidx", target.max_global), (AxisType.LOCAL, "lidx", target.max_local)):
    rs = sorted((u for u in by_op.get(Ops.RANGE, ()) if u.arg[1] is kind), key=lambda r: r.arg[0])
    if not rs: continue
    clash = [n for n in taken if n.startswith(prefix)]
    if clash: raise CompileError(f"{kind.name} ranges and explicit {', '.join(sorted(clash))} in one kernel: {_short(rs[0])}", rs[0])
    direct, folded = rs[:2] if len(rs) > 3 else rs, rs[2:] if len(rs) > 3 else []
    for dim, r in enumerate(direct):
      n = _size(r)
      if n > limits[dim]: raise CompileError(f"{kind.name} range of {n} exceeds the {target.name} limit {limits[dim]} "
                                             f"for {prefix}{dim}: {_short(r)}", r)
      mapping[r] = UOp.special(n, f"{prefix}{dim}")
    if folded:
      sizes = [_size(r) for r in folded]
      total = math.prod(sizes)
      if total > limits[2]: raise CompileError(f"{len(folded)} {kind.name} ranges fold to {total} > {limits[2]}: {_short(folded[0])}", folded[0])
      sp, stride = UOp.special(total, f"{prefix}2"), total
      for r, n in zip(folded, sizes):
        stride //= n
        mapping[r] = (sp // stride) % n
    if kind is AxisType.LOCAL and math.prod(_size(r) for r in rs) > target.max_local_threads:
      raise CompileError(f"{math.prod(_size(r) for r in rs)} work-items per group exceed {target.max_local_threads}: {_short(rs[0])}", rs[0])
  for u in by_op.get(Ops.REDUCE, ()):
    if any(r in mapping for r in u.src[1:]):
      raise CompileError(f"REDUCE over a GLOBAL/LOCAL range: {_short(u)}", u)
  if not mapping: return sink
  pm = PatternMatcher([(UPat(Ops.RANGE, name="r"), lambda ctx, r: ctx.get(r)),
                       (UPat(Ops.END, name="e"), _drop_mapped)], name="gpudims")
  return graph_rewrite(sink, pm, ctx=mapping, bottom_up=True)


def launch_dims(sink: UOp) -> tuple[tuple, tuple]:
  """(global_size, local_size) from the SPECIALs of a kernel (1 where a dimension is unused)."""
  gs, ls = [1, 1, 1], [1, 1, 1]
  for u in sink.by_op().get(Ops.SPECIAL, ()):
    n = u.src[0].const_value
    if n is None: raise CompileError(f"SPECIAL {u.arg} needs a constant size: {_short(u)}", u)
    (gs if u.arg.startswith("g") else ls)[int(u.arg[4:])] = int(n)
  return tuple(gs), tuple(ls)
