"""Symbolic simplification: constant folding, algebraic identities, interval folding, division/modulo, index
canonicalization. One PatternMatcher, `symbolic`; `simplify(u)` runs it to a fixed point.

Exactness: identities on fixed-width integers hold modulo 2**bits (they are ring identities); rules that are only
true on unbounded integers (division and modulo algebra, moving constants across a comparison) apply to weak ints
(index arithmetic), whose values the bounds describe exactly. Float rules are limited to x*1 and x+0.
"""
from __future__ import annotations

from .dtypes import DType, dtypes, truncate
from .evaluate import EvalError, exec_alu
from .ops import GroupOp
from .rewrite import PatternMatcher, UPat, graph_rewrite
from .bounds import vminmax
from .uop import UOp
from .ops import O


def _c(u: UOp):
  return u._cv   # const_value, read without the property's call: the rules ask it of every operand


def _k(value, dt: DType) -> UOp:
  """A constant of type dt: what a rule returns for a whole node."""
  return UOp.const(truncate(value, dt) if not dt.is_weak else value, dt)


def _lit(value, dt: DType, other: UOp) -> UOp:
  """The constant operand of a binary node of type dt whose other operand is `other`. Next to an operand of type dt a
  weak literal (of dt's value) is enough: the node still has type dt, and the literal is one node, not a CAST(CONST)
  pair (commit_dtypes types it from its slot, as it does the DSL's own literals)."""
  if other.dtype is dt and dt.is_int:
    lo, hi = dt.bounds   # (weak ints: unbounded) a value in range needs no wrapping
    return UOp(O.CONST, (), value if lo <= value <= hi else truncate(value, dt))
  return _k(value, dt)


# Rules build their results with these two: a term times a constant, a term plus a constant, already in the form the
# rules would rewrite them to (no intermediate node that a later rewrite would discard).
def _mulk(t: UOp, c, dt: DType) -> UOp:
  """t * c in a node of type dt: (y*c1)*c folds into y*(c1*c), *1 and *0 vanish."""
  if c == 1 and t.dtype == dt: return t
  if c == 0: return _k(0, dt)
  if t.op is O.MUL and t.dtype == dt:
    c1 = t.src[1]._cv
    if c1 is not None: return _mulk(t.src[0], c1 * c, dt)
  return UOp(O.MUL, (t, _lit(c, dt, t)))


def _addk(t: UOp, c, dt: DType) -> UOp:
  """t + c in a node of type dt: (y+c1)+c folds into y+(c1+c), +0 vanishes."""
  if c == 0 and t.dtype == dt: return t
  if t.op is O.ADD and t.dtype == dt:
    c1 = t.src[1]._cv
    if c1 is not None: return _addk(t.src[0], c1 + c, dt)
  return UOp(O.ADD, (t, _lit(c, dt, t)))


def fold_constants(x: UOp):
  vals = []
  for s in x.src:
    v = s._cv
    if v is None: return None
    vals.append(v)
  try: return _k(exec_alu(x.op, x.dtype, vals), x.dtype)
  except (EvalError, OverflowError, ValueError): return None


def fold_bounds(x: UOp):
  """An integer or bool ALU node whose bounds are one value is that value."""
  if not (x.dtype.is_int or x.dtype.is_bool) or x.op in (O.CONST,): return None
  lo, hi = x._mm or x._bounds()
  if lo == hi and not isinstance(lo, float): return _k(lo, x.dtype)
  return None


def _is_int(u: UOp) -> bool: return u.dtype.is_int
def _weak(u: UOp) -> bool: return u.dtype == dtypes.weakint


def simplify_add(x: UOp):
  a, b = x.src
  ca, cb = a._cv, b._cv
  if cb is not None and ca is None:   # t + c (the usual sum): of the rules below only these three can apply
    if cb == 0 and not x.dtype.is_bool: return a
    if x.dtype.is_int and a.op is O.ADD and a.src[1]._cv is not None:   # (y + c1) + c2
      return _addk(a.src[0], a.src[1]._cv + cb, x.dtype)
    return None
  if cb is not None and cb == 0 and not x.dtype.is_bool: return a
  if ca is not None and ca == 0 and not x.dtype.is_bool: return b
  if not _is_int(x): return None
  if ca is not None and cb is None: return b + a                        # constants to the right
  if cb is not None and a.op is O.ADD and a.src[1]._cv is not None:    # (y + c1) + c2
    return _addk(a.src[0], a.src[1]._cv + cb, x.dtype)
  if cb is None and a.op is O.ADD and a.src[1]._cv is not None:        # (y + c) + b -> (y + b) + c
    return (a.src[0] + b) + a.src[1]
  if cb is None and b.op is O.ADD and b.src[1]._cv is not None:        # a + (y + c) -> (a + y) + c
    return (a + b.src[0]) + b.src[1]
  # x//c*c + x%c -> x (floor division and modulo always recombine), also one level down a sum
  if _weak(x):
    r = _divmod_join(a, b)
    if r is not None: return r
    if a.op is O.ADD:
      for i in (0, 1):
        r = _divmod_join(a.src[i], b)
        if r is not None: return a.src[1 - i] + r
  # collect like terms: x*c1 + x*c2, x + x, x*c + x
  ta, fa = _term(a)
  tb, fb = _term(b)
  if ta is tb and ta is not None: return ta * _k(fa + fb, x.dtype)
  if a.op is O.ADD:   # (y + t*f1) + t*f2 -> y + t*(f1+f2)
    t1, f1 = _term(a.src[1])
    if t1 is tb and t1 is not None: return a.src[0] + t1 * _k(f1 + fb, x.dtype)
  return None


def _divmod_join(p: UOp, q: UOp):
  """x when {p, q} is {x//c*c, x%c}, else None."""
  for m, r in ((p, q), (q, p)):
    if m.op is O.MUL and m.src[0].op is O.FLOORDIV and r.op is O.FLOORMOD and m.src[0].src[0] is r.src[0] and \
       m.src[1]._cv is not None and m.src[1]._cv == m.src[0].src[1]._cv == r.src[1]._cv:
      return r.src[0]
  return None


def _term(u: UOp):
  """(t, factor) with u == t*factor for a constant factor; (None, 0) for a constant."""
  if u._cv is not None: return None, 0
  if u.op is O.MUL and u.src[1]._cv is not None: return u.src[0], u.src[1]._cv
  return u, 1


def simplify_sub(x: UOp):
  a, b = x.src
  if b._cv is not None and b._cv == 0: return a
  if a is b and _is_int(x): return _k(0, x.dtype)
  if _is_int(x) and b._cv is not None: return a + _k(-b._cv, x.dtype)   # x - c -> x + (-c)
  if _weak(x): return a + b * _k(-1, x.dtype)                           # canonical sums of terms
  return None


def simplify_mul(x: UOp):
  a, b = x.src
  ca, cb = a._cv, b._cv
  if cb is not None and cb == 1: return a
  if ca is not None and ca == 1: return b
  if not x.dtype.is_int: return None
  if ca is not None and cb is None: return b * a
  if cb == 0: return _k(0, x.dtype)
  if cb is not None and a.op is O.MUL and a.src[1]._cv is not None: return _mulk(a.src[0], a.src[1]._cv * cb, x.dtype)
  if cb is not None and a.op is O.ADD and a.src[1]._cv is not None:   # (y + c1) * c2 -> y*c2 + c1*c2
    return _addk(_mulk(a.src[0], cb, x.dtype), a.src[1]._cv * cb, x.dtype)
  return None


def simplify_neg(x: UOp):
  if x.src[0].op is O.NEG: return x.src[0].src[0]
  if _is_int(x): return x.src[0] * _k(-1, x.dtype)
  return None


def _range_offset(a: UOp):
  """(r, c) when a is r + c for a RANGE r and a constant c (c = 0: r itself), else None."""
  if a.op is O.RANGE: return a, 0
  if a.op is O.ADD and a.src[0].op is O.RANGE and a.src[1]._cv is not None: return a.src[0], a.src[1]._cv
  return None


def _below(a: UOp, b: UOp) -> bool:
  """a < b for every value the kernel can give them, where the bounds alone can't tell: a is r + c with r the index
  of a loop over range(n) (so r <= n - 1 on every iteration, the back edge included) and b - n >= c always, which the
  simplified difference b - n shows (n and b symbolic: b = n, n + 1, a DEFINE_VAR of n's, ...). Index arithmetic
  (weak ints) only: its values are exact, nothing wraps."""
  if a.vmax < b.vmin: return True
  rc = _range_offset(a)
  if rc is None or not (_weak(a) and _weak(b)): return False
  r, c = rc
  n = r.src[0]
  if not _weak(n): return False
  return simplify(b - n).vmin >= c


def simplify_floordiv(x: UOp):
  a, b = x.src
  c = b._cv
  if c is None:   # a // n with 0 <= a < n: 0 (n symbolic, a an induction variable of a loop bounded by n)
    return _k(0, x.dtype) if a.vmin >= 0 and _below(a, b) else None
  if c == 0: return None
  if c == 1: return a
  if not _weak(x):
    if c > 0 and a.vmin >= 0 and a.vmax < c: return _k(0, x.dtype)
    return None
  if c == -1: return a * -1
  if a.op is O.MUL and a.src[1]._cv is not None and a.src[1]._cv % c == 0:   # (y*c1)//c -> y*(c1//c)
    return a.src[0] * (a.src[1]._cv // c)
  if a.op is O.ADD:
    for i in (0, 1):   # (y + t*k*c)//c -> y//c + t*k ; floor division makes this exact for any sign
      t, f = _term(a.src[i])
      other = a.src[1 - i]
      if t is None:
        if _c(a.src[i]) % c == 0: return other // c + _c(a.src[i]) // c
      elif f % c == 0: return other // c + t * (f // c)
  if a.op is O.FLOORDIV and a.src[1]._cv is not None and a.src[1]._cv > 0 and c > 0:
    return a.src[0] // (a.src[1]._cv * c)
  if c > 0 and a.vmin // c == a.vmax // c: return _k(a.vmin // c, x.dtype)
  return None


def simplify_floormod(x: UOp):
  a, b = x.src
  c = b._cv
  if c is None: return a if a.vmin >= 0 and _below(a, b) else None   # a % n with 0 <= a < n
  if c == 0: return None
  if c in (1, -1): return _k(0, x.dtype)
  if c > 0 and a.vmin >= 0 and a.vmax < c: return a
  if c > 0 and c & (c - 1) == 0 and a.op is O.AND and a.src[1]._cv is not None:
    # (y & m) % 2**k keeps the low k bits of y & m (floor modulo by a power of two, in two's complement, for any sign
    # and width): y & (m & (2**k - 1)); the mask itself when m has no bit from k up, 0 when it has none below k
    m = a.src[1]._cv
    low = m & (c - 1)
    return a if low == m else a.src[0] & _lit(low, x.dtype, a.src[0])
  if not _weak(x): return None
  if a.op is O.MUL and a.src[1]._cv is not None and a.src[1]._cv % c == 0: return _k(0, x.dtype)
  if a.op is O.ADD:
    for i in (0, 1):   # (y + t*k*c) % c -> y % c
      t, f = _term(a.src[i])
      other = a.src[1 - i]
      if t is None:
        k = _c(a.src[i])
        if k % c == 0: return other % c
        if c > 0 and not 0 <= k < c: return (other + k % c) % c
      elif f % c == 0: return other % c
  if a.op is O.FLOORMOD and a.src[1]._cv is not None and c > 0 and a.src[1]._cv > 0 and a.src[1]._cv % c == 0:
    return a.src[0] % c
  if c > 0 and a.vmin // c == a.vmax // c: return a - (a.vmin // c) * c
  return None


def simplify_truncdiv(x: UOp):
  a, b = x.src
  c = b._cv
  if c == 1: return a if x.op is O.IDIV else _k(0, x.dtype)
  if c is not None and c > 0 and a.vmin >= 0 and a.vmax < c: return _k(0, x.dtype) if x.op is O.IDIV else a
  return None


def simplify_bits(x: UOp):
  a, b = x.src
  ca, cb = a._cv, b._cv
  if ca is not None and cb is None: return x.replace(src=(b, a))
  if x.dtype.is_bool:
    if cb is not None:
      if x.op is O.AND: return a if cb else _k(False, x.dtype)
      if x.op is O.OR: return _k(True, x.dtype) if cb else a
      if x.op is O.XOR: return a.logical_not() if cb else a
  elif cb == 0:
    return _k(0, x.dtype) if x.op is O.AND else a
  elif cb is not None and x.op is O.AND and cb == (x.dtype.bounds[1] if x.dtype.kind == "uint" else -1):
    return a   # every bit set: y & -1 (or a uint's all-ones) is y
  elif cb is not None and x.op is O.AND and a.vmin >= 0:
    # y & m is y when every bit y can have is set in m: y in [0, 2**j) and m's low j bits all ones (two's complement:
    # a negative m such as -1 counts its low bits as they are)
    low = (1 << int(a.vmax).bit_length()) - 1
    if cb & low == low: return a
  if a is b: return a if x.op in (O.AND, O.OR) else _k(0 if not x.dtype.is_bool else False, x.dtype)
  return None


def simplify_shift(x: UOp):
  if x.src[1]._cv == 0: return x.src[0]
  return None


def simplify_max(x: UOp):
  a, b = x.src
  if a is b: return a
  if _is_int(x):
    if a.vmin >= b.vmax: return a
    if b.vmin >= a.vmax: return b
  return None


def simplify_cmp(x: UOp):
  a, b = x.src
  if a is b and (_is_int(a) or a.dtype.is_bool): return _k(x.op is not O.CMPLT and x.op is O.CMPEQ, dtypes.bool)
  cb = b._cv
  if x.op is O.CMPLT and _weak(a) and _weak(b) and cb is None:
    # inside a loop over range(n): i + c < b holds when n - 1 + c < b always, and b < i + c never does when
    # b <= c always (i >= 0 is in the bounds already)
    if _below(a, b): return _k(True, dtypes.bool)
    if _range_offset(b) is not None and _below(b, a + 1): return _k(False, dtypes.bool)
  if x.op is O.CMPLT and _weak(a) and cb is not None:
    if a.op is O.ADD and a.src[1]._cv is not None: return a.src[0] < (cb - a.src[1]._cv)
    if a.op is O.MUL and a.src[1]._cv is not None and a.src[1]._cv > 0:
      return a.src[0] < -((-cb) // a.src[1]._cv)   # y*k < c  <=>  y < ceil(c/k)
  if x.op in (O.CMPEQ, O.CMPNE) and a._cv is not None and cb is None: return x.replace(src=(b, a))
  return None


def simplify_not(x: UOp):
  a = x.src[0]
  if a.op is O.NOT: return a.src[0]
  if a.op is O.CMPLT and _is_int(a.src[0]):   # not (p < q)  <=>  q < p + 1
    return a.src[1] < a.src[0] + 1 if _weak(a.src[0]) else None
  if a.op is O.CMPEQ: return a.src[0].ne(a.src[1])
  if a.op is O.CMPNE: return a.src[0].eq(a.src[1])
  return None


def simplify_where(x: UOp):
  c, a, b = x.src
  if c._cv is not None: return a if c._cv else b
  if a is b: return a
  if x.dtype.is_bool and a._cv is True and b._cv is False: return c
  if x.dtype.is_bool and a._cv is False and b._cv is True: return c.logical_not()
  return None


def simplify_cast(x: UOp):
  s = x.src[0]
  if s.dtype == x.arg: return s
  if s.op is not O.CONST and s._cv is not None:
    v = s._cv
    if x.arg.is_int and isinstance(v, float): return None
    return _k(v if not x.arg.is_float else float(v), x.arg)
  return None


_BY_OP = {O.ADD: simplify_add, O.SUB: simplify_sub, O.MUL: simplify_mul, O.NEG: simplify_neg,
          O.FLOORDIV: simplify_floordiv, O.FLOORMOD: simplify_floormod, O.IDIV: simplify_truncdiv,
          O.IMOD: simplify_truncdiv, O.AND: simplify_bits, O.OR: simplify_bits, O.XOR: simplify_bits,
          O.SHL: simplify_shift, O.SHR: simplify_shift, O.MAX: simplify_max, O.CMPLT: simplify_cmp,
          O.CMPEQ: simplify_cmp, O.CMPNE: simplify_cmp, O.NOT: simplify_not, O.WHERE: simplify_where}


def simplify_alu(x: UOp):
  """Every ALU node: constant folding, then folding by bounds, then the op's own identities (the first that applies).
  One rule dispatching by op rather than three rules per op: this runs on every node the pass builds."""
  for f in (fold_constants, fold_bounds, _BY_OP.get(x.op)):
    if f is None: return None
    r = f(x)
    if r is not None and r is not x: return r
  return None


def simplify_index(x: UOp):
  """A gate that always holds (i < n inside a loop over range(n), say) is no gate: the plain INDEX."""
  if len(x.src) == 3 and x.src[2]._cv is True: return UOp(O.INDEX, x.src[:2], x.arg, x.tag)
  return None


def _alu_rule(own):
  """simplify_alu for the nodes of one op, its steps inlined: constant folding (only when every operand is a
  literal: fold_constants gives None otherwise), folding by bounds (fold_bounds), then own, the op's identities.
  A rule per op (PatternMatcher.by_node calls it directly): the symbolic pass runs it on every node it builds."""
  def rule(x: UOp):
    for s in x.src:
      if s._cv is None: break
    else:
      r = fold_constants(x)
      if r is not None: return r
    dt = x.dtype
    if dt.is_int or dt.is_bool:
      mm = x._mm
      if mm is None:   # UOp._bounds, its usual cases inlined: every source analysed already, or a literal
        for s in x.src:
          if s._mm is None:
            if s.src:
              mm = x._bounds()
              break
            cv = s._cv
            s._mm = (cv, cv) if cv is not None else vminmax(s)
        if mm is None: mm = x._mm = vminmax(x)
      lo, hi = mm
      if lo == hi and not isinstance(lo, float): return _k(lo, dt)
    return own(x) if own is not None else None
  rule.__name__ = rule.__qualname__ = f"simplify_alu_{own.__name__ if own is not None else 'fold'}"
  return rule


symbolic = PatternMatcher([
  *[(UPat(op, name="x"), _alu_rule(_BY_OP.get(op))) for op in sorted(GroupOp.ALU, key=lambda o: o.value)],
  (UPat(O.CAST, name="x"), simplify_cast),
  (UPat(O.INDEX, name="x"), simplify_index),
], name="symbolic")


def simplify(u: UOp) -> UOp:
  return graph_rewrite(u, symbolic, name="symbolic")
