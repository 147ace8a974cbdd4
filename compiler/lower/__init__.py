"""The lowering pipeline: a kernel SINK from the DSL -> a LINEAR instruction list that a backend renders.

The pipeline (PIPELINE, in order; each entry is a named pass, most of them a PatternMatcher run by graph_rewrite):

  inline_calls    GETTUPLE(CALL(TUPLE(...), *args), i) -> result i of the body with its formals bound to args
  verify_kernel   kernel_spec: stores into read-only params, unended ranges, ... (raises naming the UOp)
  gpudims         GLOBAL/LOCAL RANGEs -> SPECIAL gidxN / lidxN within the target's limits; their ENDs vanish
  symbolic        constant folding, identities, bounds, index canonicalization
  pin_volatile    a LOAD of a volatile param gets the loops its users are in as sources: it is never hoisted
  reduce_to_acc   REDUCE -> a REG accumulator (init store, update store inside the ranges, load after the END)
  split_ends      END(x, r1, r2) -> END(END(x, r2), r1); several ENDs of one RANGE merge into END(GROUP(...), r)
  barriers        implicit BARRIERs for LOCAL memory: read-after-write (AFTER) and write-after-read (in loops)
  legalize        ops the target lacks (FLOORDIV/FLOORMOD -> IDIV/IMOD, MAX, MULACC, ...)
  commit_dtypes   weak ints -> int32/int64 from their bounds; weak floats -> float32; literals typed by their slot
  verify_lowered  lowered_spec
  linearize       priority toposort respecting range nesting -> LINEAR
  (regalloc.py    loop-aware live ranges and a linear-scan register allocator over the LINEAR form, for backends)

The lowered, linearized form (what a backend such as an RDNA3 instruction selector consumes):

  LINEAR(src=(e0, e1, ...), arg=KernelInfo(name, global_size, local_size)); every source of an element is an
  earlier element, and every element is a distinct UOp (equal ones, e.g. two loads of one address at different
  times, are told apart by a tag), so a map from element to register is well defined. Every element has a storage dtype (no weak types; literals are CONST or CAST(CONST) typed):
    PARAM      arg BufferArg(slot, dtype, size, GLOBAL, readonly, shape, volatile): a pointer kernel argument
               (size: the most elements it can hold; a volatile one's LOADs/STOREs each carry their own arg)
    DEFINE_VAR arg VarArg(slot, name, vmin, vmax, dtype): a scalar kernel argument; args are ordered by slot
    BUFFER     arg BufferArg(slot, dtype, size, LOCAL | REG): LOCAL is shared by the work-group, REG is private
    SPECIAL    src (size,) arg "gidxN" (work-group index) or "lidxN" (work-item index in the group)
    CONST / CAST(CONST)  literals: a typed literal is CAST(CONST(python value), dtype); a bool literal is CONST(True)
               (a weak-typed CONST element only ever feeds such a CAST)
    RANGE      src (end,) arg (axis_id, AxisType.LOOP|REDUCE): `for (i = 0; i < end; i++) {`
    END        src (RANGE,): the `}` of that loop (ranges nest properly)
    IF         src (gate,) ... ENDIF src (IF,): a gated store sits between them
    BARRIER    src () arg seq: every work-item of the group waits here (never inside an IF)
    INDEX      src (buffer, index[, gate]): the address of element `index` (a pointer typed PtrDType)
    LOAD       src (INDEX,), arg None (a number for a volatile buffer): a gated INDEX loads 0 where the gate is false
               (and does not access memory there)
    STORE      src (INDEX, value): INDEX is never gated here (see IF)
    ALU ops    ADD SUB MUL IDIV IMOD FDIV MAX AND OR XOR SHL SHR CMPLT CMPEQ CMPNE WHERE NEG NOT SQRT EXP2 LOG2 SIN
               RECIP TRUNC MULACC: operands have the element's dtype (comparisons: bool result); IDIV/IMOD truncate
    CAST / BITCAST  arg the dtype
  No AFTER, SINK, GROUP, REDUCE, FLOORDIV or FLOORMOD remain.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Callable

from ..ir import AddrSpace, KernelInfo, PatternMatcher, UOp, UPat, graph_rewrite
from ..ir.spec import kernel_spec, lowered_spec, verify, verify_linear
from ..ir.symbolic import symbolic
from .calls import inline_calls
from .barriers import loaded_local_buffers, pm_barriers
from .commit import commit_dtypes
from .gpudims import gpudims, launch_dims
from .legalize import pm_legalize
from .linearize import linearize
from .volatile import pin_volatile_loads
from .reduce import ReduceContext, first_free_slot, pm_reduce
from .target import C_TARGET, TARGETS, Target
from ..ir.ops import O


def _split_multi_end(e: UOp):
  if len(e.src) <= 2: return None
  # innermost range first: a range nested in another depends on it (more ranges); ties: the last listed is innermost
  rs = sorted(enumerate(e.src[1:]), key=lambda p: (len(p[1].ranges), p[0]), reverse=True)
  out = e.src[0]
  for _, r in rs: out = UOp(O.END, (out, r))
  return out


def split_ends(sink: UOp, target: Target) -> UOp:
  if O.END not in _ops(sink): return sink
  sink = graph_rewrite(sink, PatternMatcher([(UPat(O.END, name="e"), _split_multi_end)], name="split_ends"))
  by_range: dict[UOp, list] = {}
  for u in sink.by_op().get(O.END, ()): by_range.setdefault(u.src[1], []).append(u)
  merge = {}
  for r, es in by_range.items():
    if len(es) > 1:
      merged = UOp(O.END, (UOp(O.GROUP, tuple(e.src[0] for e in es)), r))
      for e in es: merge[e] = merged
  if not merge: return sink
  return graph_rewrite(sink, PatternMatcher([(UPat(O.END, name="e"), lambda ctx, e: ctx.get(e))], name="merge_ends"),
                       ctx=merge, bottom_up=True)


def _ops(sink: UOp):
  """The ops of the kernel (a set-like view): a pass whose rules match none of them is not run. A walk of the whole
  graph per pass (a graph_rewrite) costs as much as the rest of lowering on a large kernel; the nodes by op are
  remembered per sink (UOp.by_op), so the passes that leave the sink as it is share one grouping."""
  return sink.by_op().keys()


def _verify_kernel(sink, target): verify(sink, kernel_spec); return sink
def _verify_lowered(sink, target): verify(sink, lowered_spec); return sink
def _symbolic(sink, target): return graph_rewrite(sink, symbolic, name="symbolic")


def _reduce(sink, target):
  if O.REDUCE not in _ops(sink): return sink
  return graph_rewrite(sink, pm_reduce, ctx=ReduceContext(first_free_slot(sink)))


def _barriers(sink, target):
  if not any(u.arg.addrspace is AddrSpace.LOCAL for u in sink.by_op().get(O.BUFFER, ())): return sink
  return graph_rewrite(sink, pm_barriers, ctx=loaded_local_buffers(sink))


def _legalize(sink, target):
  if _ops(sink).isdisjoint(pm_legalize.pdict.keys() - target.native_ops): return sink   # every rule leaves native ops
  return graph_rewrite(sink, pm_legalize, ctx=target)


def _commit(sink, target): return commit_dtypes(sink)


PIPELINE: list[tuple[str, Callable]] = [
  ("inline_calls", inline_calls),
  ("verify_kernel", _verify_kernel),
  ("gpudims", gpudims),
  ("symbolic", _symbolic),
  ("pin_volatile", pin_volatile_loads),
  ("reduce_to_acc", _reduce),
  ("split_ends", split_ends),
  ("barriers", _barriers),
  ("legalize", _legalize),
  ("commit_dtypes", _commit),
  ("verify_lowered", _verify_lowered),
]


@contextlib.contextmanager
def gc_paused():
  """Python's cyclic collector off while a pass builds a large acyclic graph: its full collections walk every live
  UOp again and again, which made lowering a 16,000-node chain about twice as slow as linear (UOp graphs hold no
  reference cycles; whatever cycles a failing pass leaves are collected once the collector is back on)."""
  was_on = gc.isenabled()
  if was_on: gc.disable()
  try: yield
  finally:
    if was_on: gc.enable()


def lower(sink: UOp, target: Target | str = C_TARGET, until: str | None = None, verify_each: bool = False) -> UOp:
  """Run the pipeline on a kernel sink and return the LINEAR form. until: stop after that pass and return the sink.
  verify_each: check kernel_spec-level sanity between passes (used by tests)."""
  with gc_paused(): return _lower(sink, target, until, verify_each)


def _lower(sink: UOp, target: Target | str, until: str | None, verify_each: bool) -> UOp:
  if isinstance(target, str): target = TARGETS[target]
  if sink.op is not O.SINK: sink = UOp(O.SINK, (sink,), KernelInfo())
  for name, fn in PIPELINE:
    sink = fn(sink, target)
    if verify_each: verify_linearizable(sink)
    if name == until: return sink
  check_local_memory(sink, target)
  check_barriers_uniform(sink)
  gs, ls = launch_dims(sink)
  info = sink.arg if isinstance(sink.arg, KernelInfo) else KernelInfo()
  sink = _with_arg(sink, dataclasses.replace(info, global_size=gs, local_size=ls))
  lin = linearize(sink)
  if verify_each: verify_linear(lin)
  return lin


def _with_arg(sink: UOp, arg) -> UOp:
  """sink with another arg; its graph is the same, so are the nodes below it: linearize's walk of a
  large kernel is not made again."""
  new = sink.replace(arg=arg)
  if new is not sink and new._cache is None and sink._cache is not None and "below" in sink._cache and \
     sink not in new.src:
    # the nodes below are the same (UOp.toposort remembers them without the root), so are their groups by op
    new._cache = {k: sink._cache[k] for k in ("below", "by_op") if k in sink._cache}
  return new


def check_local_memory(sink: UOp, target: Target):
  from ..ir import AddrSpace, CompileError
  from ..ir.uop import _short
  locals_ = [u for u in sink.by_op().get(O.BUFFER, ()) if u.arg.addrspace is AddrSpace.LOCAL]
  total = sum(u.arg.size * u.arg.dtype.itemsize for u in locals_)
  if total > target.local_memory_bytes:
    raise CompileError(f"{total} bytes of LOCAL memory exceed the {target.name} limit of {target.local_memory_bytes}: "
                       f"{_short(locals_[0])}", locals_[0])


def check_barriers_uniform(sink: UOp):
  """Every work-item of a group must meet a BARRIER the same number of times: a barrier inside a loop whose trip
  count depends on the work-item (a lidx) would leave the others waiting for ever (on a GPU: undefined)."""
  from ..ir import CompileError
  from ..ir.uop import _short
  for u in sink.by_op().get(O.BARRIER, ()):
    for r in u.ranges:
      lid = next((s for s in r.src[0].toposort() if s.op is O.SPECIAL and s.arg.startswith("lidx")), None)
      if lid is not None:
        raise CompileError(f"a BARRIER inside loop {r.arg[0]} whose trip count depends on the work-item ({lid.arg}): "
                           f"work-items would reach it different numbers of times; loop: {_short(r, 300)}", u)


def verify_linearizable(sink: UOp):
  """Between passes: the graph is a SINK whose every node has a dtype (construction checked it) and no dangling
  range (what every pass must preserve)."""
  from ..ir.spec import _sink_ok
  return _sink_ok(sink)


__all__ = ["PIPELINE", "lower", "linearize", "Target", "TARGETS", "C_TARGET", "launch_dims"]
