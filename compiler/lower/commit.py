"""Weak types get a width. A weak-int node (index arithmetic, RANGE, SPECIAL, DEFINE_VAR) becomes int32 when its
bounds fit, else int64 (and so does every weak-int node that uses an int64 one); weak floats become float32. A
literal takes the type of the operand slot it sits in (CAST(CONST) of that type), so after this pass only bare
literals of already-typed consumers would be weak, and there are none left: every operand has a storage type.
"""
from __future__ import annotations

from ..ir import PtrDType, UOp, dtypes
from ..ir.ops import GroupOp, O
from ..ir.uop import VarArg

_I32 = dtypes.int32.bounds
_ALU, _CONST = frozenset(GroupOp.ALU), O.CONST
_PLAIN_ALU = _ALU - GroupOp.Comparison - {O.WHERE}   # ALU ops whose every source takes the node's type


def _fits32(u: UOp) -> bool:
  lo, hi = u.vmin, u.vmax
  return _I32[0] <= lo and hi <= _I32[1]


def _literal(u: UOp, want) -> UOp:
  """A weak literal in a slot of type want (None: pick from the value)."""
  v = u.arg
  if want is None or want.is_weak:
    if isinstance(v, float): want = dtypes.float32
    else: want = dtypes.int32 if _I32[0] <= v <= _I32[1] else dtypes.int64
  if want.is_float: v = float(v)
  return UOp.const(v, want)


def commit_dtypes(sink: UOp) -> UOp:
  memo: dict[UOp, UOp] = {}
  chosen: dict[UOp, object] = {}   # original weak node -> committed dtype

  literals: dict = {}   # (weak literal, slot type) -> its typed form: a kernel repeats its few literals everywhere

  def fix(s: UOp, want) -> UOp:
    """The committed source s, in a slot of type want."""
    m = memo[s]
    if s.op is O.CONST and s.dtype.is_weak:
      lit = literals.get((s, want))
      if lit is None: lit = literals[(s, want)] = _literal(s, want)
      return lit
    if want is not None and not want.is_weak and not isinstance(m.dtype, PtrDType) and m.dtype != want and \
       s.dtype.is_weak:
      return m.cast(want)
    return m

  for u in sink.toposort():
    op, src = u.op, u.src
    dt = u.dtype
    if op is O.CONST:
      memo[u] = u
      continue
    if dt.__class__ is not PtrDType and dt.is_weak:
      if dt.kind == "weakfloat": new_dt = dtypes.float32
      else:
        wide = not _fits32(u) or any(chosen.get(s) is dtypes.int64 for s in src)
        new_dt = dtypes.int64 if wide else dtypes.int32
      chosen[u] = new_dt
    else:
      new_dt = dt
    if op in _PLAIN_ALU:   # fix(s, new_dt) for each source, inlined (the most frequent node: tested first)
      ns = []
      for s in src:
        m = memo[s]
        sdt = s.dtype
        if not sdt.is_weak: ns.append(m)   # a typed source (most of them): its committed form
        elif s.op is _CONST:
          lit = literals.get((s, new_dt))
          if lit is None: lit = literals[(s, new_dt)] = _literal(s, new_dt)
          ns.append(lit)
        elif new_dt is not None and not new_dt.is_weak and m.dtype.__class__ is not PtrDType and m.dtype != new_dt:
          ns.append(m.cast(new_dt))
        else: ns.append(m)
      new_src = tuple(ns)
      memo[u] = u if new_src == src else UOp(op, new_src, u.arg, u.tag)
      continue
    if op is O.DEFINE_VAR:
      memo[u] = UOp(op, (), VarArg(u.arg.slot, u.arg.name, u.arg.vmin, u.arg.vmax, new_dt)) if dt.is_weak else u
      continue
    if op in (O.RANGE, O.SPECIAL): new_src = (fix(src[0], new_dt),)
    elif op is O.WHERE: new_src = (memo[src[0]], fix(src[1], new_dt), fix(src[2], new_dt))
    elif op in GroupOp.Comparison:
      other = [memo[s].dtype for s in src if not (s.op is O.CONST and s.dtype.is_weak)]
      # literals only (a comparison a late pass made of constants): one type that holds them all, else each side
      # would take the width of its own value (int64 against int32)
      want = max(other, key=lambda d: d.itemsize) if other else max((_literal(s, None).dtype for s in src),
                                                                      key=lambda d: (d.is_float, d.itemsize))
      if want is not None and want.is_int and any(chosen.get(s) is dtypes.int64 for s in src): want = dtypes.int64
      new_src = tuple(fix(s, want) for s in src)
    elif op is O.STORE: new_src = (memo[src[0]], fix(src[1], src[0].dtype.base), *(memo[s] for s in src[2:]))
    elif op is O.INDEX:
      idx = fix(src[1], None)
      new_src = (memo[src[0]], idx, *(memo[s] for s in src[2:]))
    elif op is O.CAST and src[0].op is O.CONST: new_src = src   # a typed literal already: CAST(CONST) stays
    elif op in (O.CAST, O.BITCAST): new_src = (fix(src[0], None),)
    else: new_src = tuple(memo[s] if not (s.op is O.CONST and s.dtype.is_weak) else _literal(s, None) for s in src)
    memo[u] = u if new_src == src else UOp(op, new_src, u.arg, u.tag)   # UOps compare by identity: == is `is`
  return memo[sink]
