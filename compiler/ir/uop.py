"""UOp: the one node type of hcq's IR.

A UOp is (op, src, arg, tag): immutable and hash-consed. Building a UOp equal to a live one returns that very object
(the cache holds weak references, so unused graphs are freed), which makes `is` the equality test and lets every
graph be a DAG with shared nodes.

The dtype is not a field: it is derived from op, src and arg when the UOp is built (and an ill-typed UOp is refused
there, with an error that names it). Ops whose type cannot be derived carry it in their arg: CAST/BITCAST (the
dtype), PARAM/BUFFER (a BufferArg: slot, dtype, flat size, address space), INS ((op, dtype)), CUSTOM ((fmt, dtype)).

Every traversal here is iterative: deep graphs never raise RecursionError.
"""
from __future__ import annotations

import itertools
import math
import threading
import weakref
from _weakref import _remove_dead_weakref

from .args import AxisType, BufferArg, Invalid, KernelInfo, VarArg  # noqa: F401 - re-exported
from .bounds import ranges_of, vminmax
from .errors import CompileError, UOpTypeError, short as _short  # noqa: F401 - re-exported
from .typecheck import _ALU_MEMO, _ARITY as _ALU_ARITY, CASTS_CHECKED as _CASTS_CHECKED, derive_dtype
from .dtypes import AddrSpace, DType, PtrDType, dtypes, truncate
from .ops import O, Ops


_CACHE_LOCK = threading.Lock()
# the arg of each LOAD/STORE of a volatile buffer, and the axis of each UOp.loop() without one: a fresh number makes
# the UOp distinct from every other (hash-consing would otherwise make two equal accesses, or two loops, one)
_FRESH = itertools.count()
_LOOP_AXIS0 = 1 << 20   # UOp.loop's own axis ids start here, apart from the small ones kernels choose


def _arg_key(arg):
  """A cache key that tells 1, 1.0 and True apart, and 0.0 from -0.0: a plain int is its own key (_PLAIN_ARGS), any
  other arg is tagged with its class (so no arg that merely equals an int, True or np.int64(1), shares its key)."""
  if isinstance(arg, float): return (float, arg.hex() if not math.isnan(arg) else "nan")
  if isinstance(arg, tuple): return (tuple, tuple(_arg_key(a) if a.__class__ is not int else a for a in arg))
  return (arg.__class__, arg)


# args that are their own cache key (None, the most frequent: ALU nodes have none; int: literals); the others go
# through _arg_key
_PLAIN_ARGS = frozenset({type(None), int, str, DType})
_CONST, _CAST = O.CONST, O.CAST
_LITERAL_DTYPES = {int: dtypes.weakint, float: dtypes.weakfloat, bool: dtypes.bool}
_NARROW = 8   # _toposort: a node of more sources than this keeps an iterator over them on the stack


class _Ref(weakref.ref):
  """The cache's weak reference to a UOp, with the UOp's cache key (to drop the entry when the UOp dies). Built in C:
  weakref.KeyedRef's __new__ and __init__ are Python code, which made it the dearest part of building a UOp."""
  __slots__ = ("key",)


def _forget(ref: _Ref):
  """A UOp of the cache died: drop its entry (unless the key was given to a newer UOp already; atomic in C, as
  WeakValueDictionary does it)."""
  _remove_dead_weakref(_UCACHE, ref.key)


class UOp:
  __slots__ = ("op", "src", "arg", "tag", "dtype", "_cache", "_cv", "_mm", "_rg", "__weakref__")
  # key -> weak reference to the live UOp. A plain dict of _Refs: WeakValueDictionary's get and set are Python
  # code, and every UOp a pass builds goes through here.
  _ucache: dict = {}

  def __new__(cls, op: Ops, src: tuple = (), arg=None, tag=None):
    if src.__class__ is not tuple: src = tuple(src)
    key = (op, src, arg if arg.__class__ in _PLAIN_ARGS else _arg_key(arg), tag)
    try:
      ref = cls._ucache.get(key)
    except TypeError:
      raise CompileError(f"UOp({op!r}) arg {arg!r} is not hashable") from None
    if ref is not None:
      found = ref()
      if found is not None: return found
    for s in src:
      if s.__class__ is not UOp and not isinstance(s, UOp):
        raise CompileError(f"UOp({op!r}, arg={arg!r}): source {s!r} is not a UOp")
    self = object.__new__(cls)
    self.op = op; self.src = src; self.arg = arg; self.tag = tag
    self._cache = self._mm = self._rg = None
    # an ALU node of operand types already checked (nearly every node a pass builds) takes its type from
    # typecheck's memo here, without the two calls derive_dtype makes for it (same answer: typecheck._alu_dtype)
    dt = None
    if op in _ALU_ARITY:
      dt = _ALU_MEMO.get((op, src[0].dtype, src[1].dtype) if len(src) == 2 else (op, *[s.dtype for s in src]))
    elif op is _CONST and not src: dt = _LITERAL_DTYPES.get(arg.__class__)   # dtypes.literal_dtype, by exact class
    elif op is _CAST and len(src) == 1 and (arg, src[0].dtype) in _CASTS_CHECKED: dt = arg
    self.dtype = dt if dt is not None else derive_dtype(self)
    # the literal's value, kept at hand: every rule asks (None for anything else, an INVALID index included)
    if op is _CONST: self._cv = None if arg is Invalid else arg
    elif op is _CAST and src[0].op is _CONST and src[0].arg is not Invalid: self._cv = truncate(src[0].arg, arg)
    else: self._cv = None
    new = _Ref(self, _forget)
    new.key = key
    # two threads building the same UOp must end with one object: setdefault inserts atomically, and the one that
    # finds another's live UOp there returns it; a dead entry not dropped yet is replaced under the lock
    ref = cls._ucache.setdefault(key, new)
    if ref is new: return self
    found = ref()
    if found is not None: return found
    with _CACHE_LOCK:
      ref = cls._ucache.get(key)
      found = ref() if ref is not None else None
      if found is not None: return found
      cls._ucache[key] = new
    return self

  def __reduce__(self): return (UOp, (self.op, self.src, self.arg, self.tag))
  def __copy__(self): return self
  def __deepcopy__(self, memo): return self

  def replace(self, **kw) -> "UOp":
    return UOp(kw.get("op", self.op), kw.get("src", self.src), kw.get("arg", self.arg), kw.get("tag", self.tag))

  def rtag(self, tag) -> "UOp": return self.replace(tag=tag)

  # ---------- graph walks (iterative) ----------
  def toposort(self) -> list["UOp"]:
    """Every UOp of the graph, sources before users, in a stable depth-first order. Remembered (the graph under a
    UOp never changes): the passes that each look at the whole kernel walk it once, not once each.
    The remembered walk ("below") leaves self out: a UOp holding itself through its cache would be a reference cycle,
    and every graph a pass walked would then live on until the cyclic collector found it (after a compile, which
    pauses the collector: a collection over every node of every intermediate graph)."""
    c = self._cache
    if c is not None and "below" in c:
      out = list(c["below"])
      out.append(self)
      return out
    out = self._toposort()
    if c is None: c = self._cache = {}
    c["below"] = tuple(out[:-1])
    return out

  def by_op(self) -> dict:
    """op -> the tuple of the graph's nodes of that op, in toposort order (the ops absent have no key). Remembered
    as the toposort is (the nodes below self; self is added to each answer): the passes that look for a few ops
    (PARAMs, RANGEs, LOCAL BUFFERs...) read their lists, not a walk of the whole kernel each. Never modify it."""
    c = self._cache
    if c is None or "by_op" not in c:
      if c is None or "below" not in c: self.toposort()
      c = self._cache
      groups: dict = {}
      for u in c["below"]:
        g = groups.get(u.op)
        if g is None: groups[u.op] = [u]
        else: g.append(u)
      c["by_op"] = {op: tuple(g) for op, g in groups.items()}
    below = c["by_op"]
    return {**below, self.op: below.get(self.op, ()) + (self,)}

  def _toposort(self) -> list["UOp"]:
    """A depth-first walk in source order, each node after its sources (what the recursive walk gives). The stack
    holds the open nodes themselves: back at a node, its sources are scanned again from the first, and those seen
    already are skipped (a DAG: a seen source is placed already), which gives the order an iterator per node would,
    without making one per node. A wide node (a SINK or LINEAR of many sources) keeps an iterator (no rescans); a
    leaf is placed as soon as it is met."""
    out, seen = [], {self}
    stack: list = [self if len(self.src) <= _NARROW else (self, iter(self.src))]
    push, pop, see, emit = stack.append, stack.pop, seen.add, out.append
    while stack:
      u = stack[-1]
      if u.__class__ is tuple: u, it = u
      else: it = u.src
      for s in it:
        if s not in seen:
          see(s)
          if s.src:
            push(s if len(s.src) <= _NARROW else (s, iter(s.src)))
            break
          emit(s)
      else:
        pop(); emit(u)
    return out

  def _fill(self, attr: str, compute):
    """compute(u) into slot attr of self and of every node under it that lacks it, sources first, iteratively (a deep
    graph never recurses); the value for self."""
    stack = [(self, False)]
    while stack:
      u, ready = stack.pop()
      if getattr(u, attr) is not None: continue
      if ready: setattr(u, attr, compute(u)); continue
      stack.append((u, True))
      for s in u.src:
        if getattr(s, attr) is None: stack.append((s, False))
    return getattr(self, attr)

  # the bounds are asked of nearly every node a pass builds: they live in a slot of their own (no dict lookups)
  @property
  def vmin(self):
    mm = self._mm
    return (mm if mm is not None else self._bounds())[0]
  @property
  def vmax(self):
    mm = self._mm
    return (mm if mm is not None else self._bounds())[1]

  def _bounds(self) -> tuple:
    """(vmin, vmax), computed once; the sources first (iteratively) where they are not analysed yet."""
    for s in self.src:
      if s._mm is None:
        if s.src: break
        cv = s._cv   # a leaf (a literal a rule just built, most often): no walk needed
        s._mm = (cv, cv) if cv is not None else vminmax(s)
    else:
      mm = self._mm = vminmax(self)
      return mm
    return self._fill("_mm", vminmax)

  @property
  def ranges(self) -> frozenset:
    """The RANGEs this UOp is inside: the ranges it depends on that no END or REDUCE on the way has closed. In a slot
    of its own, as the bounds."""
    rg = self._rg
    if rg is not None: return rg
    for s in self.src:
      if s._rg is None:
        c = self._cache
        if c is not None and "below" in c:   # the walk is known (a sink a pass checks): sources come first in it
          for u in c["below"]:
            if u._rg is None: u._rg = ranges_of(u)
          rg = self._rg = ranges_of(self)
          return rg
        return self._fill("_rg", ranges_of)
    rg = self._rg = ranges_of(self)
    return rg

  # ---------- constants ----------
  @staticmethod
  def const(value, dtype: DType | None = None) -> "UOp":
    """A literal: weak (int, float) or bool; with a non-weak dtype, CAST(CONST) of that type."""
    c = UOp(O.CONST, (), value)
    if dtype is None or dtype == c.dtype: return c
    if dtype.is_bool: return UOp(O.CONST, (), bool(value))
    return UOp(O.CAST, (c,), dtype)

  @property
  def const_value(self):
    """The value of a CONST or a typed constant CAST(CONST); None for anything else (an INVALID index included)."""
    return self._cv

  def _u(self, x) -> "UOp": return x if isinstance(x, UOp) else UOp.const(x)

  # ---------- kernel DSL ----------
  @staticmethod
  def param(slot: int, dtype: DType, shape, readonly: bool = False, volatile: bool = False) -> "UOp":
    """A buffer kernel argument in slot. shape: a flat size or a tuple of dims (storage is flat, `.index(i, j)` takes
    one index per dim, the last dim fastest). A dim may be an integer UOp of DEFINE_VARs, a size known only at launch:
    the buffer then holds up to the largest size the variables' ranges allow, which is what bounds checks use.
    readonly: stores are refused. volatile: every .load()/.store() of it is an access of its own, never merged with
    an equal one, hoisted out of the loops its users are in, or dropped (C: a `volatile` pointer)."""
    dims = shape if isinstance(shape, tuple) else (shape,)
    if not dims: raise CompileError(f"param {slot}: empty shape")
    for d in dims: _check_dim(slot, d)
    size = math.prod(d.vmax if isinstance(d, UOp) else d for d in dims)
    # a plain flat size keeps shape None: the arg (and every existing kernel's repr) is what it always was
    keep = len(dims) > 1 or any(isinstance(d, UOp) for d in dims)
    return UOp(O.PARAM, (), BufferArg(slot, dtype, size, AddrSpace.GLOBAL, readonly, dims if keep else None,
                                        bool(volatile)))

  @staticmethod
  def placeholder(shape, dtype: DType, slot: int, addrspace: AddrSpace = AddrSpace.LOCAL) -> "UOp":
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return UOp(O.BUFFER, (), BufferArg(slot, dtype, math.prod(shape), addrspace, False, shape))

  @staticmethod
  def variable(name: str, vmin: int, vmax: int, slot: int = 0, dtype: DType = dtypes.weakint) -> "UOp":
    """A scalar integer kernel argument in [vmin, vmax] (weak: lowering gives it int32 or int64 from the bounds)."""
    return UOp(O.DEFINE_VAR, (), VarArg(slot, name, vmin, vmax, dtype))

  @staticmethod
  def special(n, name: str) -> "UOp":
    if not (name[:4] in ("gidx", "lidx") and name[4:].isdigit()):
      raise CompileError(f"special {name!r}: the name must be gidxN or lidxN")
    return UOp(O.SPECIAL, (UOp.const(n) if not isinstance(n, UOp) else n,), name)

  @staticmethod
  def range(n, axis_id: int, axis_type: AxisType = AxisType.LOOP) -> "UOp":
    return UOp(O.RANGE, (UOp.const(n) if not isinstance(n, UOp) else n,), (axis_id, axis_type))

  @staticmethod
  def loop(n, axis_id: int | None = None) -> "UOp":
    """A serial loop 0 <= i < n in each work-item: UOp.range(n, axis_id, AxisType.LOOP). Without an axis_id it gets
    a fresh one, so that every UOp.loop(n) is a loop of its own (two equal RANGEs would be one loop)."""
    return UOp.range(n, _LOOP_AXIS0 + next(_FRESH) if axis_id is None else axis_id, AxisType.LOOP)

  @staticmethod
  def invalid() -> "UOp":
    """The INVALID index: `i.valid(c)` is c.where(i, UOp.invalid())."""
    return UOp(O.CONST, (), Invalid)

  @staticmethod
  def group(*srcs) -> "UOp": return UOp(O.GROUP, srcs)

  def index(self, *idx) -> "UOp":
    """The address of an element: one index, or one per dim of a buffer with a shape. An index made by
    `i.valid(c)` gates the INDEX: buf.index(i.valid(c)) is buf.index(i).valid(c)."""
    if not isinstance(self.dtype, PtrDType): raise CompileError(f"index of a non-buffer {_short(self)}", self)
    gates, plain = [], []
    for i in idx:
      i, g = _split_valid(self._u(i))
      plain.append(i)
      if g is not None: gates.append(g)
    if len(plain) > 1:
      base = self.buffer
      shape = base.arg.shape
      if shape is None or len(shape) != len(plain):
        raise CompileError(f"{len(plain)} indices into {_short(base)} of shape {shape}", self)
      flat = plain[0]
      for i, n in zip(plain[1:], shape[1:]): flat = flat * n + i
      plain = [flat]
    out = UOp(O.INDEX, (self, plain[0]))
    for g in gates: out = out.valid(g)
    return out

  @property
  def buffer(self) -> "UOp":
    """The PARAM/BUFFER under INDEX and AFTER."""
    u = self
    while u.op in (O.INDEX, O.AFTER, O.LOAD): u = u.src[0]
    return u

  def valid(self, cond) -> "UOp":
    """A gate, spelled on the address or on the index value, with one meaning.
    On an INDEX: the same address, gated: a load gives 0 and a store does nothing where cond is false (and memory is
    not touched there); gates accumulate with AND.
    On an integer index value: c.where(i, INVALID), an index that is no address where cond is false; .index() of it
    is the gated INDEX above, and arithmetic on it stays gated ((i.valid(c) + 1) is (i + 1).valid(c))."""
    cond = self._u(cond)
    if self.op is O.INDEX:
      if len(self.src) == 3: cond = self.src[2] & cond
      return UOp(O.INDEX, (self.src[0], self.src[1], cond))
    if isinstance(self.dtype, PtrDType) or not self.dtype.is_int:
      raise CompileError(f"valid() applies to an INDEX or an integer index value, not {_short(self)}", self)
    if not cond.dtype.is_bool:
      raise CompileError(f"valid() condition of type {cond.dtype!r} is not a bool: {_short(cond)}", cond)
    i, g = _split_valid(self)
    if g is not None: cond = g & cond
    return cond.where(i, UOp.invalid())

  def _access_arg(self):
    """A LOAD/STORE's arg: None, or a fresh number for a volatile buffer (each access its own UOp)."""
    buf = self.buffer
    return next(_FRESH) if buf.op is O.PARAM and buf.arg.volatile else None

  def load(self, *deps) -> "UOp": return UOp(O.LOAD, (self, *deps), self._access_arg())
  def store(self, value) -> "UOp": return UOp(O.STORE, (self, self._u(value)), self._access_arg())

  def end(self, *ends) -> "UOp":
    """Close ranges: END(self, *ranges), the effects of self done for every index of each range. A bool among them is
    a condition (a conditional END, an `if` block): self's effects happen only where every condition holds, inside
    the ranges (`for r: if c: self`). It gates each INDEX self reaches (its stores do nothing, its loads touch no
    memory where a condition is false), so a guard like `i < n` protects the block's loads too."""
    conds = [e for e in ends if isinstance(e, UOp) and not isinstance(e.dtype, PtrDType) and e.dtype.is_bool]
    ranges = tuple(e for e in ends if not any(e is c for c in conds))
    x = self
    if conds:
      cond = conds[0]
      for c in conds[1:]: cond = cond & c
      x = _gate_block(self, cond)
    return UOp(O.END, (x, *ranges)) if ranges else x

  def reduce(self, *ranges, arg=O.ADD) -> "UOp": return UOp(O.REDUCE, (self, *ranges), arg)
  def barrier(self) -> "UOp": return UOp(O.BARRIER, (self,))
  def after(self, *deps) -> "UOp": return UOp(O.AFTER, (self, *deps))
  def sink(self, *more, arg=None) -> "UOp": return UOp(O.SINK, (self, *more), arg)

  # ---------- ALU ----------
  def alu(self, op: Ops, *srcs) -> "UOp":
    srcs = (self, *(self._u(s) for s in srcs))
    if any(s.op is O.WHERE and s.src[2].op is O.CONST and s.src[2].arg is Invalid for s in srcs):
      return _alu_on_valid(op, srcs)
    return UOp(op, srcs)
  def cast(self, dtype: DType) -> "UOp": return self if self.dtype == dtype else UOp(O.CAST, (self,), dtype)
  def bitcast(self, dtype: DType) -> "UOp": return UOp(O.BITCAST, (self,), dtype)
  def where(self, a, b) -> "UOp": return UOp(O.WHERE, (self, self._u(a), self._u(b)))
  def eq(self, x) -> "UOp": return self.alu(O.CMPEQ, x)
  def ne(self, x) -> "UOp": return self.alu(O.CMPNE, x)
  def maximum(self, x) -> "UOp": return self.alu(O.MAX, x)
  def idiv(self, x) -> "UOp": return self.alu(O.IDIV, x)   # C's truncating division
  def imod(self, x) -> "UOp": return self.alu(O.IMOD, x)   # C's remainder (sign of the dividend)
  def sqrt(self) -> "UOp": return self.alu(O.SQRT)
  def exp2(self) -> "UOp": return self.alu(O.EXP2)
  def log2(self) -> "UOp": return self.alu(O.LOG2)
  def sin(self) -> "UOp": return self.alu(O.SIN)
  def recip(self) -> "UOp": return self.alu(O.RECIP)
  def logical_not(self) -> "UOp": return self.alu(O.NOT)

  def __add__(self, x): return self.alu(O.ADD, x)
  def __radd__(self, x): return self._u(x).alu(O.ADD, self)
  def __sub__(self, x): return self.alu(O.SUB, x)
  def __rsub__(self, x): return self._u(x).alu(O.SUB, self)
  def __mul__(self, x): return self.alu(O.MUL, x)
  def __rmul__(self, x): return self._u(x).alu(O.MUL, self)
  def __floordiv__(self, x): return self.alu(O.FLOORDIV, x)
  def __rfloordiv__(self, x): return self._u(x).alu(O.FLOORDIV, self)
  def __mod__(self, x): return self.alu(O.FLOORMOD, x)
  def __rmod__(self, x): return self._u(x).alu(O.FLOORMOD, self)
  def __truediv__(self, x): return self.alu(O.FDIV, x)
  def __rtruediv__(self, x): return self._u(x).alu(O.FDIV, self)
  def __and__(self, x): return self.alu(O.AND, x)
  def __rand__(self, x): return self._u(x).alu(O.AND, self)
  def __or__(self, x): return self.alu(O.OR, x)
  def __ror__(self, x): return self._u(x).alu(O.OR, self)
  def __xor__(self, x): return self.alu(O.XOR, x)
  def __rxor__(self, x): return self._u(x).alu(O.XOR, self)
  def __lshift__(self, x): return self.alu(O.SHL, x)
  def __rlshift__(self, x): return self._u(x).alu(O.SHL, self)
  def __rshift__(self, x): return self.alu(O.SHR, x)
  def __rrshift__(self, x): return self._u(x).alu(O.SHR, self)
  def __lt__(self, x): return self.alu(O.CMPLT, x)
  def __gt__(self, x): return self._u(x).alu(O.CMPLT, self)
  def __le__(self, x): return self._u(x).alu(O.CMPLT, self).logical_not()
  def __ge__(self, x): return self.alu(O.CMPLT, x).logical_not()
  def __neg__(self): return self.alu(O.NEG)
  def __invert__(self): return self.alu(O.NOT)
  # == stays identity (hash-consing makes it structural equality); use .eq()/.ne() to build comparisons
  __hash__ = object.__hash__

  def __bool__(self):
    raise CompileError(f"a UOp has no truth value (did you mean .where(), or a Python value?): {_short(self)}", self)

  def __repr__(self) -> str: return render_repr(self)


_UCACHE = UOp._ucache   # the cache itself, as a global: _forget runs for every UOp that dies


def _split_valid(i: UOp) -> tuple:
  """(index, gate) of a gated index value c.where(i, INVALID); (i, None) for any other."""
  if i.op is O.WHERE and i.src[2].op is O.CONST and i.src[2].arg is Invalid: return i.src[1], i.src[0]
  return i, None


def _alu_on_valid(op: Ops, srcs: tuple) -> UOp:
  """Integer arithmetic on gated index values is gated by all their gates; anything else of an INVALID is refused."""
  gates, plain = [], []
  for s in srcs:
    v, g = _split_valid(s)
    plain.append(v)
    if g is not None: gates.append(g)
  out = UOp(op, tuple(plain))
  if op is O.WHERE or not out.dtype.is_int or out.dtype.is_bool:
    raise CompileError(f"{op.name} of a gated index value (i.valid(c)) is not an index: use it in .index(), or gate "
                       f"the INDEX: {_short(out)}", out)
  cond = gates[0]
  for g in gates[1:]: cond = cond & g
  return cond.where(out, UOp.invalid())


def _check_dim(slot: int, d):
  """A param dim: an int >= 0, or an integer UOp >= 0 built of DEFINE_VARs and constants (known at launch)."""
  if isinstance(d, bool) or not isinstance(d, (int, UOp)):
    raise CompileError(f"param {slot}: a size must be an int or an integer UOp, got {d!r}")
  if isinstance(d, int):
    if d < 0: raise CompileError(f"param {slot}: size {d} is negative")
    return
  if isinstance(d.dtype, PtrDType) or not d.dtype.is_int:
    raise CompileError(f"param {slot}: size {_short(d)} is not an integer", d)
  bad = next((u for u in d.toposort() if u.op not in _LAUNCH_OPS), None)
  if bad is not None:
    raise CompileError(f"param {slot}: size {_short(d)} must be known at launch (DEFINE_VARs and constants), not "
                       f"depend on a {bad.op.name}", d)
  if d.vmin < 0: raise CompileError(f"param {slot}: size {_short(d)} can be negative (as low as {d.vmin})", d)


_LAUNCH_OPS = frozenset({O.CONST, O.DEFINE_VAR, O.CAST, O.ADD, O.SUB, O.MUL, O.FLOORDIV, O.FLOORMOD,
                         O.IDIV, O.IMOD, O.MAX, O.SHL, O.SHR, O.AND, O.OR, O.XOR, O.WHERE,
                         O.CMPLT, O.CMPEQ, O.CMPNE, O.NOT, O.NEG})


def _gate_block(x: UOp, cond: UOp) -> UOp:
  """x with every INDEX it reaches gated by cond (see UOp.end). The condition's own graph is left as it is: its loads
  decide the gate, they are not under it. A BARRIER in the block is refused: work-items would not all reach it."""
  keep = set(cond.toposort())
  new: dict = {}
  for u in x.toposort():
    if u in keep: new[u] = u; continue
    if u.op is O.BARRIER:
      raise CompileError(f"a BARRIER inside a conditional END: work-items where the condition is false would never "
                         f"reach it: {_short(u)}", u)
    src = tuple(new[s] for s in u.src)
    v = u if src == u.src else u.replace(src=src)
    new[u] = v.valid(cond) if v.op is O.INDEX else v
  return new[x]


def render_repr(root: "UOp") -> str:
  from .printer import render_repr as render
  return render(root)


def repr_namespace() -> dict:
  from .printer import repr_namespace as ns
  return ns(UOp)


def eval_repr(text: str) -> "UOp":
  from .printer import eval_repr as ev
  return ev(text, UOp)
