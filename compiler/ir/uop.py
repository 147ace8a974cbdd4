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

import math
import threading
import weakref
from _weakref import _remove_dead_weakref

from .args import AxisType, BufferArg, KernelInfo, VarArg  # noqa: F401 - re-exported
from .bounds import ranges_of, vminmax
from .errors import CompileError, UOpTypeError, short as _short  # noqa: F401 - re-exported
from .typecheck import derive_dtype
from .dtypes import AddrSpace, DType, PtrDType, dtypes, truncate
from .ops import Ops


_CACHE_LOCK = threading.Lock()
_UNSET = object()


def _arg_key(arg):
  """A cache key that tells 1, 1.0 and True apart, and 0.0 from -0.0."""
  if isinstance(arg, float): return (float, arg.hex() if not math.isnan(arg) else "nan")
  if isinstance(arg, tuple): return (tuple, tuple(_arg_key(a) for a in arg))
  if isinstance(arg, (bool, int)): return (type(arg), arg)
  return arg


def _forget(ref: weakref.KeyedRef):
  """A UOp of the cache died: drop its entry (unless the key was given to a newer UOp already; atomic in C, as
  WeakValueDictionary does it)."""
  _remove_dead_weakref(UOp._ucache, ref.key)


class UOp:
  __slots__ = ("op", "src", "arg", "tag", "dtype", "_cache", "_cv", "__weakref__")
  # key -> weak reference to the live UOp. A plain dict of KeyedRefs: WeakValueDictionary's get and set are Python
  # code, and every UOp a pass builds goes through here.
  _ucache: dict = {}

  def __new__(cls, op: Ops, src: tuple = (), arg=None, tag=None):
    src = tuple(src)
    key = (op, src, _arg_key(arg), tag)
    try:
      ref = cls._ucache.get(key)
    except TypeError:
      raise CompileError(f"UOp({op!r}) arg {arg!r} is not hashable") from None
    if ref is not None:
      found = ref()
      if found is not None: return found
    for s in src:
      if not isinstance(s, UOp): raise CompileError(f"UOp({op!r}, arg={arg!r}): source {s!r} is not a UOp")
    self = object.__new__(cls)
    self.op, self.src, self.arg, self.tag, self._cache, self._cv = op, src, arg, tag, None, _UNSET
    self.dtype = derive_dtype(self)
    with _CACHE_LOCK:   # two threads building the same UOp must end with one object
      ref = cls._ucache.get(key)
      if ref is not None:
        found = ref()
        if found is not None: return found
      cls._ucache[key] = weakref.KeyedRef(self, _forget, key)
    return self

  def __reduce__(self): return (UOp, (self.op, self.src, self.arg, self.tag))
  def __copy__(self): return self
  def __deepcopy__(self, memo): return self

  def replace(self, **kw) -> "UOp":
    return UOp(kw.get("op", self.op), kw.get("src", self.src), kw.get("arg", self.arg), kw.get("tag", self.tag))

  def rtag(self, tag) -> "UOp": return self.replace(tag=tag)

  # ---------- graph walks (iterative) ----------
  def toposort(self) -> list["UOp"]:
    """Every UOp of the graph, sources before users, in a stable depth-first order."""
    out, seen, stack = [], set(), [(self, False)]
    while stack:
      u, done = stack.pop()
      if done: out.append(u); continue
      if u in seen: continue
      seen.add(u)
      stack.append((u, True))
      for s in reversed(u.src):
        if s not in seen: stack.append((s, False))
    return out

  def _cached(self, name, compute):
    c = self._cache
    if c is not None:
      v = c.get(name)   # computed already (no fact is None)
      if v is not None: return v
    else: c = self._cache = {}
    for s in self.src:   # the usual case, a node built on analysed sources: no walk needed
      sc = s._cache
      if sc is None or name not in sc: break
    else:
      v = c[name] = compute(self)
      return v
    # fill the sources first (only those still missing it), iteratively, so that compute() never recurses deeply
    stack = [(self, False)]
    while stack:
      u, ready = stack.pop()
      uc = u._cache
      if uc is None: uc = u._cache = {}
      if name in uc: continue
      if ready: uc[name] = compute(u); continue
      stack.append((u, True))
      for s in u.src:
        if s._cache is None or name not in s._cache: stack.append((s, False))
    return c[name]

  @property
  def vmin(self): return self._cached("vminmax", vminmax)[0]
  @property
  def vmax(self): return self._cached("vminmax", vminmax)[1]

  @property
  def ranges(self) -> frozenset:
    """The RANGEs this UOp is inside: the ranges it depends on that no END or REDUCE on the way has closed."""
    return self._cached("ranges", ranges_of)

  # ---------- constants ----------
  @staticmethod
  def const(value, dtype: DType | None = None) -> "UOp":
    """A literal: weak (int, float) or bool; with a non-weak dtype, CAST(CONST) of that type."""
    c = UOp(Ops.CONST, (), value)
    if dtype is None or dtype == c.dtype: return c
    if dtype.is_bool: return UOp(Ops.CONST, (), bool(value))
    return UOp(Ops.CAST, (c,), dtype)

  @property
  def const_value(self):
    """The value of a CONST or a typed constant CAST(CONST); None for anything else (computed once: every rule asks)."""
    cv = self._cv
    if cv is _UNSET:
      if self.op is Ops.CONST: cv = self.arg
      elif self.op is Ops.CAST and self.src[0].op is Ops.CONST: cv = truncate(self.src[0].arg, self.arg)
      else: cv = None
      self._cv = cv
    return cv

  def _u(self, x) -> "UOp": return x if isinstance(x, UOp) else UOp.const(x)

  # ---------- kernel DSL ----------
  @staticmethod
  def param(slot: int, dtype: DType, size: int, readonly: bool = False) -> "UOp":
    if not isinstance(size, int) or size < 0: raise CompileError(f"param {slot}: size must be a flat int >= 0, got {size!r}")
    return UOp(Ops.PARAM, (), BufferArg(slot, dtype, size, AddrSpace.GLOBAL, readonly))

  @staticmethod
  def placeholder(shape, dtype: DType, slot: int, addrspace: AddrSpace = AddrSpace.LOCAL) -> "UOp":
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return UOp(Ops.BUFFER, (), BufferArg(slot, dtype, math.prod(shape), addrspace, False, shape))

  @staticmethod
  def variable(name: str, vmin: int, vmax: int, slot: int = 0, dtype: DType = dtypes.weakint) -> "UOp":
    """A scalar integer kernel argument in [vmin, vmax] (weak: lowering gives it int32 or int64 from the bounds)."""
    return UOp(Ops.DEFINE_VAR, (), VarArg(slot, name, vmin, vmax, dtype))

  @staticmethod
  def special(n, name: str) -> "UOp":
    if not (name[:4] in ("gidx", "lidx") and name[4:].isdigit()):
      raise CompileError(f"special {name!r}: the name must be gidxN or lidxN")
    return UOp(Ops.SPECIAL, (UOp.const(n) if not isinstance(n, UOp) else n,), name)

  @staticmethod
  def range(n, axis_id: int, axis_type: AxisType = AxisType.LOOP) -> "UOp":
    return UOp(Ops.RANGE, (UOp.const(n) if not isinstance(n, UOp) else n,), (axis_id, axis_type))

  @staticmethod
  def group(*srcs) -> "UOp": return UOp(Ops.GROUP, srcs)

  def index(self, *idx) -> "UOp":
    if not isinstance(self.dtype, PtrDType): raise CompileError(f"index of a non-buffer {_short(self)}", self)
    if len(idx) > 1:
      base = self.buffer
      shape = base.arg.shape
      if shape is None or len(shape) != len(idx):
        raise CompileError(f"{len(idx)} indices into {_short(base)} of shape {shape}", self)
      flat = self._u(idx[0])
      for i, n in zip(idx[1:], shape[1:]): flat = flat * n + i
      idx = (flat,)
    return UOp(Ops.INDEX, (self, self._u(idx[0])))

  @property
  def buffer(self) -> "UOp":
    """The PARAM/BUFFER under INDEX and AFTER."""
    u = self
    while u.op in (Ops.INDEX, Ops.AFTER, Ops.LOAD): u = u.src[0]
    return u

  def valid(self, cond) -> "UOp":
    if self.op is not Ops.INDEX: raise CompileError(f"valid() applies to an INDEX, not {_short(self)}", self)
    if len(self.src) == 3: cond = self.src[2] & cond
    return UOp(Ops.INDEX, (self.src[0], self.src[1], self._u(cond)))

  def load(self, *deps) -> "UOp": return UOp(Ops.LOAD, (self, *deps))
  def store(self, value) -> "UOp": return UOp(Ops.STORE, (self, self._u(value)))
  def end(self, *ranges) -> "UOp": return UOp(Ops.END, (self, *ranges))
  def reduce(self, *ranges, arg=Ops.ADD) -> "UOp": return UOp(Ops.REDUCE, (self, *ranges), arg)
  def barrier(self) -> "UOp": return UOp(Ops.BARRIER, (self,))
  def after(self, *deps) -> "UOp": return UOp(Ops.AFTER, (self, *deps))
  def sink(self, *more, arg=None) -> "UOp": return UOp(Ops.SINK, (self, *more), arg)

  # ---------- ALU ----------
  def alu(self, op: Ops, *srcs) -> "UOp": return UOp(op, (self, *(self._u(s) for s in srcs)))
  def cast(self, dtype: DType) -> "UOp": return self if self.dtype == dtype else UOp(Ops.CAST, (self,), dtype)
  def bitcast(self, dtype: DType) -> "UOp": return UOp(Ops.BITCAST, (self,), dtype)
  def where(self, a, b) -> "UOp": return UOp(Ops.WHERE, (self, self._u(a), self._u(b)))
  def eq(self, x) -> "UOp": return self.alu(Ops.CMPEQ, x)
  def ne(self, x) -> "UOp": return self.alu(Ops.CMPNE, x)
  def maximum(self, x) -> "UOp": return self.alu(Ops.MAX, x)
  def idiv(self, x) -> "UOp": return self.alu(Ops.IDIV, x)   # C's truncating division
  def imod(self, x) -> "UOp": return self.alu(Ops.IMOD, x)   # C's remainder (sign of the dividend)
  def sqrt(self) -> "UOp": return self.alu(Ops.SQRT)
  def exp2(self) -> "UOp": return self.alu(Ops.EXP2)
  def log2(self) -> "UOp": return self.alu(Ops.LOG2)
  def sin(self) -> "UOp": return self.alu(Ops.SIN)
  def recip(self) -> "UOp": return self.alu(Ops.RECIP)
  def logical_not(self) -> "UOp": return self.alu(Ops.NOT)

  def __add__(self, x): return self.alu(Ops.ADD, x)
  def __radd__(self, x): return self._u(x).alu(Ops.ADD, self)
  def __sub__(self, x): return self.alu(Ops.SUB, x)
  def __rsub__(self, x): return self._u(x).alu(Ops.SUB, self)
  def __mul__(self, x): return self.alu(Ops.MUL, x)
  def __rmul__(self, x): return self._u(x).alu(Ops.MUL, self)
  def __floordiv__(self, x): return self.alu(Ops.FLOORDIV, x)
  def __rfloordiv__(self, x): return self._u(x).alu(Ops.FLOORDIV, self)
  def __mod__(self, x): return self.alu(Ops.FLOORMOD, x)
  def __rmod__(self, x): return self._u(x).alu(Ops.FLOORMOD, self)
  def __truediv__(self, x): return self.alu(Ops.FDIV, x)
  def __rtruediv__(self, x): return self._u(x).alu(Ops.FDIV, self)
  def __and__(self, x): return self.alu(Ops.AND, x)
  def __rand__(self, x): return self._u(x).alu(Ops.AND, self)
  def __or__(self, x): return self.alu(Ops.OR, x)
  def __ror__(self, x): return self._u(x).alu(Ops.OR, self)
  def __xor__(self, x): return self.alu(Ops.XOR, x)
  def __rxor__(self, x): return self._u(x).alu(Ops.XOR, self)
  def __lshift__(self, x): return self.alu(Ops.SHL, x)
  def __rlshift__(self, x): return self._u(x).alu(Ops.SHL, self)
  def __rshift__(self, x): return self.alu(Ops.SHR, x)
  def __rrshift__(self, x): return self._u(x).alu(Ops.SHR, self)
  def __lt__(self, x): return self.alu(Ops.CMPLT, x)
  def __gt__(self, x): return self._u(x).alu(Ops.CMPLT, self)
  def __le__(self, x): return self._u(x).alu(Ops.CMPLT, self).logical_not()
  def __ge__(self, x): return self.alu(Ops.CMPLT, x).logical_not()
  def __neg__(self): return self.alu(Ops.NEG)
  def __invert__(self): return self.alu(Ops.NOT)
  # == stays identity (hash-consing makes it structural equality); use .eq()/.ne() to build comparisons
  __hash__ = object.__hash__

  def __bool__(self):
    raise CompileError(f"a UOp has no truth value (did you mean .where(), or a Python value?): {_short(self)}", self)

  def __repr__(self) -> str: return render_repr(self)


def render_repr(root: "UOp") -> str:
  from .printer import render_repr as render
  return render(root)


def repr_namespace() -> dict:
  from .printer import repr_namespace as ns
  return ns()


def eval_repr(text: str) -> "UOp":
  from .printer import eval_repr as ev
  return ev(text)
