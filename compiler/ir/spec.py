"""Spec verifiers: PatternMatchers whose rules return True (valid) or False (invalid), checked over every node.

  kernel_spec   a kernel as the DSL builds it (before lowering)
  lowered_spec  after the lowering pipeline, before linearization: no REDUCE, no GLOBAL/LOCAL ranges, no weak types
  linear_spec   the elements of a LINEAR kernel

verify(root, spec) raises CompileError naming the first invalid UOp. Rules raise themselves when they can say more
(a store to a read-only param, a range that is never ended).
"""
from __future__ import annotations

from .args import Invalid
from .dtypes import PtrDType
from .ops import GroupOp
from .rewrite import _ANY, PatternMatcher, UPat
from .uop import AxisType, CompileError, UOp, _short
from .ops import O


def _store_ok(st: UOp) -> bool:
  buf = st.src[0].buffer
  if buf.op is O.PARAM and buf.arg.readonly:
    raise CompileError(f"store to read-only PARAM slot {buf.arg.slot}: {_short(st)}", st)
  return True


def _sink_ok(sink: UOp) -> bool:
  # a kernel without a RANGE is in none (only a RANGE brings one): its nodes' ranges need not be worked out here
  if O.RANGE in sink.by_op() and sink.ranges:
    r = sorted(sink.ranges, key=lambda r: r.arg[0])[0]
    raise CompileError(f"RANGE axis {r.arg[0]} ({r.arg[1].name}) is never ended: close it with .end(range) or "
                       f".reduce(range): {_short(r)}", r)
  return True


def _end_ok(e: UOp) -> bool:
  for r in e.src[1:]:
    if r.op is not O.RANGE: raise CompileError(f"END closes a {r.op.name}, not a RANGE: {_short(e)}", e)
  return True


def _index_ok(i: UOp) -> bool:
  """An ungated index whose bounds are known (not just its type's) must stay inside the buffer."""
  size, idx = i.src[0].dtype.size, i.src[1]
  lo_t, hi_t = idx.dtype.bounds
  if len(i.src) == 2 and lo_t < idx.vmin < 0:
    raise CompileError(f"index can be negative (as low as {idx.vmin}) into a buffer of {size}: {_short(i)}", i)
  if len(i.src) == 2 and size and size <= idx.vmax < hi_t:
    raise CompileError(f"index can reach {idx.vmax}, past the end of a buffer of {size}: {_short(i)}", i)
  return True


def _accept() -> bool:
  """The rule of a node valid by its op alone (verify decides those without calling it: _fast_paths)."""
  return True


def _invalid_used(c: UOp):
  raise CompileError("an INVALID index (from i.valid(c) on an index value) is used as a value; it belongs in "
                     f".index(): {_short(c)}", c)


_common = [
  (UPat(O.CONST, arg=Invalid, name="c"), _invalid_used),
  (UPat((O.PARAM, O.BUFFER, O.CONST, O.DEFINE_VAR)), _accept),
  (UPat(O.SPECIAL, name="s"), lambda s: s.arg[:4] in ("gidx", "lidx")),
  (UPat(O.INDEX, name="i"), _index_ok),
  (UPat(O.LOAD, src=(UPat(O.INDEX),), allow_any_len=True), _accept),
  (UPat(O.STORE, src=(UPat(O.INDEX), UPat()), name="st"), _store_ok),
  (UPat(O.AFTER), _accept),   # a buffer (or a value) once its other sources are done
  (UPat(O.BARRIER), _accept),
  (UPat(O.GROUP), _accept),
  (UPat((O.CAST, O.BITCAST)), _accept),
  (UPat(GroupOp.ALU), _accept),
  (UPat(O.CUSTOM), _accept),
  (UPat(O.END, name="e"), _end_ok),
]

kernel_spec = PatternMatcher(_common + [
  (UPat(O.RANGE, name="r"), lambda r: isinstance(r.arg, tuple) and isinstance(r.arg[1], AxisType)),
  (UPat(O.REDUCE, name="r"), lambda r: all(s.op is O.RANGE for s in r.src[1:]) and r.arg in (O.ADD, O.MUL, O.MAX)),
  (UPat(O.SINK, name="sink"), _sink_ok),
], name="kernel_spec")


def _weak_node(x: UOp):
  """After dtype commitment only literals may stay weak: False for any other weak node, None to go on."""
  if x.op is not O.CONST and not isinstance(x.dtype, PtrDType) and x.dtype.is_weak: return False
  return None


lowered_spec = PatternMatcher([
  (UPat(name="x"), _weak_node),
  (UPat(O.RANGE, name="r"), lambda r: r.arg[1] in (AxisType.LOOP, AxisType.REDUCE)),
  (UPat(O.SINK, name="sink"), _sink_ok),
  (UPat((O.FLOORDIV, O.FLOORMOD, O.REDUCE)), lambda: False),
] + _common, name="lowered_spec")


_linear_ops = {O.PARAM, O.BUFFER, O.CONST, O.DEFINE_VAR, O.SPECIAL, O.RANGE, O.END, O.INDEX, O.LOAD,
               O.STORE, O.AFTER, O.BARRIER, O.IF, O.ENDIF, O.CAST, O.BITCAST, O.CUSTOM, O.GROUP,
               O.SINK} | set(GroupOp.ALU)


_ACCEPT, _WEAK_THEN_ACCEPT = 1, 2
_FAST: dict = {}   # spec -> {op: _ACCEPT | _WEAK_THEN_ACCEPT | (weak, guards)} (see _fast_paths)


def _fast_paths(spec: PatternMatcher) -> dict:
  """The ops whose verdict needs no trip through spec.rewrite: their rules (in the order it tries them) are at most
  _weak_node, then rules that match by the arg alone (UPat(op, arg=X): _invalid_used for the INVALID literal), then
  one that accepts every node of the op (UPat(op) with _accept). verify decides those nodes inline, with the same
  result as spec.rewrite: _ACCEPT, _WEAK_THEN_ACCEPT, or (weak, ((arg, capture name, rule), ...)). Most nodes of a
  kernel are such (ALU ops, literals, casts)."""
  got = _FAST.get(spec)
  if got is None:
    got = _FAST[spec] = {}
    for op, rules in spec.pdict.items():
      weak, guards = False, []
      for pat, fn, early, takes_ctx, bare in rules:
        plain = pat.dtype is None and pat.src is None and not takes_ctx and not early
        if fn is _weak_node and plain and pat.op is None and pat.arg is _ANY and not guards:
          weak = True
          continue
        if plain and pat.op is not None and pat.arg is not _ANY:
          guards.append((pat.arg, pat.name, fn))
          continue
        if fn is _accept and plain and pat.arg is _ANY:
          got[op] = (weak, tuple(guards)) if guards else _WEAK_THEN_ACCEPT if weak else _ACCEPT
        break
  return got


def _guarded(u: UOp, weak: bool, guards: tuple):
  """spec.rewrite's answer for a node whose rules are _fast_paths' (weak, guards) then an accepting one."""
  if weak and _weak_node(u) is not None: return False
  arg = u.arg
  for want, name, fn in guards:   # UPat.match of UPat(op, arg=want[, name]): the arg's type and value
    if type(want) is type(arg) and want == arg:
      ret = fn(**{name: u}) if name is not None else fn()
      if ret is not None and ret is not u: return ret
  return True


def verify(root: UOp, spec: PatternMatcher) -> bool:
  """Check every node of the graph under root with spec; raise CompileError naming the first invalid one."""
  fast = _fast_paths(spec)
  for u in root.toposort():
    how = fast.get(u.op)
    if how is _ACCEPT: continue
    if how is _WEAK_THEN_ACCEPT:   # _weak_node(u) is None, inlined
      dt = u.dtype
      ok = u.op is O.CONST or dt.__class__ is PtrDType or not dt.is_weak
    elif how is not None:   # _guarded(u, *how), inlined for a node its guards leave alone (a literal: CONST)
      weak, guards = how
      dt = u.dtype
      if weak and not (u.op is O.CONST or dt.__class__ is PtrDType or not dt.is_weak): ok = False   # _weak_node
      else:
        arg = u.arg
        ok = True
        for want, _, _ in guards:
          if type(want) is type(arg) and want == arg:
            ok = _guarded(u, False, guards)
            break
    else: ok = spec.rewrite(u)
    if ok is not True:
      why = "no rule accepts it" if ok is None else "it breaks a rule"
      raise CompileError(f"{spec.name}: invalid {u.op.name} ({why}): {_short(u)}", u)
  return True


def verify_linear(lin: UOp) -> bool:
  """A LINEAR kernel: known ops, no weak types but literals, sources before users, RANGE/END and IF/ENDIF nested."""
  seen, stack = set(), []
  for u in lin.src:
    if u.op not in _linear_ops: raise CompileError(f"linear_spec: {u.op.name} can't appear in a LINEAR: {_short(u)}", u)
    for s in u.src:
      if s not in seen: raise CompileError(f"linear_spec: {u.op.name} comes before its source {s.op.name}: {_short(u)}", u)
      if s.op is O.CONST and s.dtype.is_weak and u.op is not O.CAST:
        raise CompileError(f"linear_spec: an untyped literal feeds {u.op.name}: {_short(u)}", u)
    if u in seen: raise CompileError(f"linear_spec: {u.op.name} appears twice: {_short(u)}", u)
    if u.op in (O.RANGE, O.IF): stack.append(u)
    if u.op in (O.END, O.ENDIF):
      if not stack or stack[-1] is not u.src[0]:
        raise CompileError(f"linear_spec: {u.op.name} does not close the innermost open block: {_short(u)}", u)
      stack.pop()
    if u.op is not O.CONST and not isinstance(u.dtype, PtrDType) and u.dtype.is_weak:
      raise CompileError(f"linear_spec: {u.op.name} still has a weak type: {_short(u)}", u)
    seen.add(u)
  if stack: raise CompileError(f"linear_spec: {stack[-1].op.name} is never closed: {_short(stack[-1])}", stack[-1])
  return True
