"""CALLs whose body is a TUPLE are functions: GETTUPLE(CALL(TUPLE(results...), *args), i) becomes result i with the
body's formal parameters replaced by the arguments. A formal parameter is a PARAM (a buffer) or a DEFINE_VAR (a
scalar) of the body; its slot is the index of the argument it stands for. Other CALLs are opaque: a backend that
can't run them refuses them.
"""
from __future__ import annotations

from ..ir import CompileError, Ops, PatternMatcher, PtrDType, UOp, UPat, graph_rewrite
from ..ir.dtypes import join
from ..ir.uop import _short


def _formals(call: UOp) -> dict[UOp, UOp]:
  body, args = call.src[0], call.src[1:]
  out = {}
  for u in body.toposort():
    if u.op not in (Ops.PARAM, Ops.DEFINE_VAR): continue
    slot = u.arg.slot
    if slot >= len(args): raise CompileError(f"CALL passes {len(args)} arguments, its body uses slot {slot}: {_short(call, 300)}", call)
    a = args[slot]
    if u.op is Ops.PARAM:
      if not isinstance(a.dtype, PtrDType) or a.dtype.base != u.dtype.base or a.dtype.size < u.dtype.size:
        raise CompileError(f"CALL argument {slot} is a {a.dtype!r}, the body needs a {u.dtype!r}: {_short(call, 300)}", call)
    elif isinstance(a.dtype, PtrDType) or join(u.dtype, a.dtype) is None:
      raise CompileError(f"CALL argument {slot} is a {a.dtype!r}, the body needs a {u.dtype!r}: {_short(call, 300)}", call)
    out[u] = a
  return out


def _substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  """root with every key of mapping replaced by its value, all at once (a value is never substituted again)."""
  memo: dict[UOp, UOp] = {}
  for u in root.toposort():
    if u in mapping: memo[u] = mapping[u]
    else: memo[u] = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
  return memo[root]


def inline_gettuple(g: UOp, call: UOp):
  if call.src[0].op is not Ops.TUPLE: return None
  return _substitute(call.src[0].src[g.arg], _formals(call))


pm_inline_calls = PatternMatcher([(UPat(Ops.GETTUPLE, src=(UPat(Ops.CALL, name="call"),), name="g"), inline_gettuple)],
                                 name="inline_calls")


def inline_calls(sink: UOp, target) -> UOp:
  if Ops.GETTUPLE not in sink.by_op(): return sink
  return graph_rewrite(sink, pm_inline_calls, bottom_up=True)
