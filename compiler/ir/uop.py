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

import enum
import math
import weakref
from dataclasses import dataclass, field

from .dtypes import AddrSpace, DType, PtrDType, dtypes, join, literal_dtype
from .ops import GroupOp, Ops


class CompileError(Exception):
  """An error in a UOp graph; .uop is the UOp it is about (when there is one)."""
  def __init__(self, msg: str, uop: "UOp | None" = None):
    super().__init__(msg)
    self.uop = uop


class UOpTypeError(CompileError, TypeError):
  """An ill-typed UOp: the operands' types do not meet, or the op does not apply to them."""


class AxisType(enum.Enum):
  GLOBAL = "global"   # becomes a gidx SPECIAL (one work-group per index)
  LOCAL = "local"     # becomes a lidx SPECIAL (one work-item per index)
  LOOP = "loop"       # a serial loop in each work-item
  REDUCE = "reduce"   # a serial loop reduced by REDUCE

  def __repr__(self): return f"AxisType.{self.name}"


@dataclass(frozen=True)
class BufferArg:
  """The arg of PARAM (a kernel argument) and BUFFER (a LOCAL or REG placeholder)."""
  slot: int
  dtype: DType
  size: int                        # flat number of elements
  addrspace: AddrSpace = AddrSpace.GLOBAL
  readonly: bool = False
  shape: tuple | None = None       # for multi-index .index(i, j); storage is always flat


@dataclass(frozen=True)
class VarArg:
  """The arg of DEFINE_VAR: a scalar integer kernel argument with known bounds."""
  slot: int
  name: str
  vmin: int
  vmax: int
  dtype: DType = dtypes.weakint


@dataclass(frozen=True)
class KernelInfo:
  name: str = "kernel"
  global_size: tuple | None = None   # filled by lowering from the SPECIALs
  local_size: tuple | None = None


def _arg_key(arg):
  """A cache key that tells 1, 1.0 and True apart, and 0.0 from -0.0."""
  if isinstance(arg, float): return (float, arg.hex() if not math.isnan(arg) else "nan")
  if isinstance(arg, tuple): return (tuple, tuple(_arg_key(a) for a in arg))
  if isinstance(arg, (bool, int)): return (type(arg), arg)
  return arg


def _short(u: "UOp", limit: int = 400) -> str:
  text = repr(u)
  return text if len(text) <= limit else text[:limit] + " ...)"


class UOp:
  __slots__ = ("op", "src", "arg", "tag", "dtype", "_cache", "__weakref__")
  _ucache: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()

  def __new__(cls, op: Ops, src: tuple = (), arg=None, tag=None):
    src = tuple(src)
    key = (op, src, _arg_key(arg), tag)
    try:
      found = cls._ucache.get(key)
    except TypeError:
      raise CompileError(f"UOp({op!r}) arg {arg!r} is not hashable") from None
    if found is not None: return found
    for s in src:
      if not isinstance(s, UOp): raise CompileError(f"UOp({op!r}, arg={arg!r}): source {s!r} is not a UOp")
    self = object.__new__(cls)
    self.op, self.src, self.arg, self.tag, self._cache = op, src, arg, tag, None
    self.dtype = _derive_dtype(self)
    cls._ucache[key] = self
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
    if c is None: c = self._cache = {}
    if name not in c:
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
  def vmin(self): return self._cached("vminmax", _vminmax)[0]
  @property
  def vmax(self): return self._cached("vminmax", _vminmax)[1]

  @property
  def ranges(self) -> frozenset:
    """The RANGEs this UOp is inside: the ranges it depends on that no END or REDUCE on the way has closed."""
    return self._cached("ranges", _ranges)

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
    """The value of a CONST or a typed constant CAST(CONST); None for anything else."""
    if self.op is Ops.CONST: return self.arg
    if self.op is Ops.CAST and self.src[0].op is Ops.CONST:
      from .dtypes import truncate
      return truncate(self.src[0].arg, self.arg)
    return None

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


# ---------------------------------------------------------------------------------------------------------------
# dtype derivation

def _fail(u: UOp, why: str):
  raise UOpTypeError(f"ill-typed {u.op.name}: {why} in {_short(u)}", u)


def _derive_dtype(u: UOp):
  op, src, arg = u.op, u.src, u.arg
  if op is Ops.CONST:
    if src: _fail(u, "CONST takes no sources")
    try: return literal_dtype(arg)
    except TypeError as e: _fail(u, str(e))
  if op in GroupOp.Memory:
    if not isinstance(arg, BufferArg): _fail(u, f"{op.name} arg must be a BufferArg, got {arg!r}")
    return PtrDType(arg.dtype, arg.addrspace, arg.size)
  if op in (Ops.CAST, Ops.BITCAST):
    if not isinstance(arg, DType) or len(src) != 1: _fail(u, f"{op.name} needs one source and a dtype arg")
    if isinstance(src[0].dtype, PtrDType) or src[0].dtype == dtypes.void: _fail(u, f"cannot {op.name} a {src[0].dtype!r}")
    if op is Ops.BITCAST and (src[0].dtype.itemsize != arg.itemsize or arg.is_weak):
      _fail(u, f"BITCAST from {src[0].dtype!r} to {arg!r} changes the size")
    return arg
  if op in (Ops.INS, Ops.CUSTOM):
    if not (isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], (DType, PtrDType))):
      _fail(u, f"{op.name} arg must be (op or fmt, dtype), got {arg!r}")
    return arg[1]
  if op is Ops.DEFINE_VAR:
    if not isinstance(arg, VarArg): _fail(u, f"DEFINE_VAR arg must be a VarArg, got {arg!r}")
    return arg.dtype
  if op in (Ops.SPECIAL, Ops.RANGE):
    if len(src) != 1 or not src[0].dtype.is_int: _fail(u, f"{op.name} needs one integer source (its size)")
    return src[0].dtype
  if op in (Ops.SINK, Ops.GROUP, Ops.LINEAR, Ops.NOOP, Ops.END, Ops.BARRIER, Ops.IF, Ops.ENDIF, Ops.TUPLE,
            Ops.PROGRAM, Ops.COPY):
    return dtypes.void
  if op is Ops.STORE:
    if len(src) < 2 or src[0].op is not Ops.INDEX: _fail(u, "STORE needs (INDEX, value)")
    base = src[0].dtype.base
    if join(base, src[1].dtype) != base: _fail(u, f"storing a {src[1].dtype!r} into a buffer of {base!r}")
    return dtypes.void
  if op is Ops.INDEX:
    if len(src) not in (2, 3) or not isinstance(src[0].dtype, PtrDType): _fail(u, "INDEX needs (buffer, index[, gate])")
    if not src[1].dtype.is_int: _fail(u, f"index of type {src[1].dtype!r} is not an integer")
    if len(src) == 3 and not src[2].dtype.is_bool: _fail(u, f"gate of type {src[2].dtype!r} is not a bool")
    return src[0].dtype
  if op is Ops.LOAD:
    if not src or not isinstance(src[0].dtype, PtrDType): _fail(u, "LOAD needs an INDEX")
    return src[0].dtype.base
  if op in (Ops.AFTER, Ops.REDUCE):
    if not src: _fail(u, f"{op.name} needs a source")
    return src[0].dtype
  if op is Ops.CALL:
    if not src: _fail(u, "CALL needs a body")
    return dtypes.void
  if op is Ops.GETTUPLE:
    if len(src) != 1 or src[0].op is not Ops.CALL or src[0].src[0].op is not Ops.TUPLE:
      _fail(u, "GETTUPLE reads a CALL whose body is a TUPLE")
    body = src[0].src[0]
    if not isinstance(arg, int) or not 0 <= arg < len(body.src): _fail(u, f"GETTUPLE index {arg!r} out of range")
    return body.src[arg].dtype
  if op in GroupOp.ALU: return _alu_dtype(u)
  _fail(u, "no dtype rule for this op")


def _alu_dtype(u: UOp):
  op, src = u.op, u.src
  want = 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3
  if len(src) != want: _fail(u, f"{op.name} takes {want} sources, got {len(src)}")
  for s in src:
    if isinstance(s.dtype, PtrDType) or s.dtype == dtypes.void: _fail(u, f"operand of type {s.dtype!r} is not a value")
  if op is Ops.WHERE:
    if not src[0].dtype.is_bool: _fail(u, f"WHERE condition of type {src[0].dtype!r} is not a bool")
    dt = join(src[1].dtype, src[2].dtype)
    if dt is None: _fail(u, f"mismatched dtypes {src[1].dtype!r} and {src[2].dtype!r}")
    return dt
  if op in (Ops.SHL, Ops.SHR):
    if not (src[0].dtype.is_int and src[1].dtype.is_int): _fail(u, f"shift of {src[0].dtype!r} by {src[1].dtype!r}")
    return src[0].dtype
  dt = src[0].dtype
  for s in src[1:]:
    nd = join(dt, s.dtype)
    if nd is None: _fail(u, f"mismatched dtypes {dt!r} and {s.dtype!r}")
    dt = nd
  if op in GroupOp.IntOnly and not dt.is_int: _fail(u, f"{op.name} needs integers, got {dt!r}")
  if op in GroupOp.FloatOnly and not dt.is_float: _fail(u, f"{op.name} needs floats, got {dt!r}")
  if op in (Ops.AND, Ops.OR, Ops.XOR, Ops.NOT) and dt.is_float: _fail(u, f"{op.name} needs integers or bools, got {dt!r}")
  if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG) and dt.is_bool:
    _fail(u, f"{op.name} on bools")
  if op in GroupOp.Comparison: return dtypes.bool
  return dt


# ---------------------------------------------------------------------------------------------------------------
# value bounds (vmin, vmax), per node; sources are already computed (see UOp._cached)

def _vminmax(u: UOp):
  dt = u.dtype
  if isinstance(dt, PtrDType) or dt == dtypes.void: return (0, 0)
  lo_t, hi_t = dt.bounds
  op, src = u.op, u.src
  cv = u.const_value
  if cv is not None: return (cv, cv)

  def fit(lo, hi):
    if dt.kind in ("int", "uint") and (lo < lo_t or hi > hi_t): return (lo_t, hi_t)
    return (lo, hi)
  mm = [s._cache["vminmax"] for s in src]
  if op in (Ops.RANGE, Ops.SPECIAL): return (0, max(0, mm[0][1] - 1))
  if op is Ops.DEFINE_VAR: return (u.arg.vmin, u.arg.vmax) if dt.is_int else (lo_t, hi_t)
  if not (dt.is_int or dt.is_bool): return (lo_t, hi_t)
  if any(isinstance(v, float) and math.isinf(v) for m in mm for v in m) and op not in GroupOp.Comparison | {Ops.WHERE}:
    return (lo_t, hi_t)
  if op is Ops.ADD: return fit(mm[0][0] + mm[1][0], mm[0][1] + mm[1][1])
  if op is Ops.SUB: return fit(mm[0][0] - mm[1][1], mm[0][1] - mm[1][0])
  if op is Ops.NEG and not dt.is_bool: return fit(-mm[0][1], -mm[0][0])
  if op is Ops.MUL:
    corners = [a * b for a in mm[0] for b in mm[1]]
    return fit(min(corners), max(corners))
  if op is Ops.MAX: return (max(mm[0][0], mm[1][0]), max(mm[0][1], mm[1][1]))
  if op is Ops.AFTER: return mm[0]
  if op is Ops.CAST:
    if src[0].dtype.is_int or src[0].dtype.is_bool: return fit(int(mm[0][0]), int(mm[0][1]))
    return (lo_t, hi_t)
  if op in (Ops.FLOORDIV, Ops.IDIV):
    (a0, a1), (b0, b1) = mm
    if b0 > 0 or b1 < 0:
      if op is Ops.FLOORDIV: corners = [a // b for a in (a0, a1) for b in (b0, b1)]
      else: corners = [_tdiv(a, b) for a in (a0, a1) for b in (b0, b1)]
      return fit(min(corners), max(corners))
    return (lo_t, hi_t)
  if op is Ops.FLOORMOD:
    (a0, a1), (b0, b1) = mm
    if b0 > 0:
      if a0 >= 0 and a1 < b0: return (a0, a1)
      return (0, b1 - 1)
    if b1 < 0: return (b0 + 1, 0)
    return (lo_t, hi_t)
  if op is Ops.IMOD:
    (a0, a1), (b0, b1) = mm
    if b0 > 0 or b1 < 0:
      m = max(abs(b0), abs(b1)) - 1
      if a0 >= 0: return (0, min(m, a1))
      if a1 <= 0: return (max(-m, a0), 0)
      return (-m, m)
    return (lo_t, hi_t)
  if op in GroupOp.Comparison:
    (a0, a1), (b0, b1) = mm
    if op is Ops.CMPLT:
      if a1 < b0: return (True, True)
      if a0 >= b1: return (False, False)
    else:
      if a0 == a1 == b0 == b1: return (op is Ops.CMPEQ, op is Ops.CMPEQ)
      if a1 < b0 or b1 < a0: return (op is Ops.CMPNE, op is Ops.CMPNE)
    return (False, True)
  if op is Ops.WHERE:
    (c0, c1) = mm[0]
    if c0 == c1: return mm[1] if c0 else mm[2]
    return (min(mm[1][0], mm[2][0]), max(mm[1][1], mm[2][1]))
  if dt.is_bool:
    if op is Ops.NOT: return (not mm[0][1], not mm[0][0])
    if op is Ops.AND: return (mm[0][0] and mm[1][0], mm[0][1] and mm[1][1])
    if op is Ops.OR: return (mm[0][0] or mm[1][0], mm[0][1] or mm[1][1])
    return (False, True)
  if op in (Ops.AND, Ops.OR, Ops.XOR) and mm[0][0] >= 0 and mm[1][0] >= 0:
    if op is Ops.AND: return (0, min(mm[0][1], mm[1][1]))
    return (0, (1 << max(int(mm[0][1]).bit_length(), int(mm[1][1]).bit_length())) - 1)
  if op is Ops.SHL and mm[1][0] == mm[1][1] and 0 <= mm[1][0] < 64:
    return fit(mm[0][0] << mm[1][0], mm[0][1] << mm[1][0])
  if op is Ops.SHR and mm[1][0] >= 0 and mm[0][0] >= 0 and mm[1][1] < 64:
    return (mm[0][0] >> mm[1][1], mm[0][1] >> mm[1][0])
  return (lo_t, hi_t)


def _tdiv(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def _ranges(u: UOp) -> frozenset:
  if u.op is Ops.RANGE: return frozenset({u}) | u.src[0]._cache["ranges"]
  acc = frozenset()
  for s in u.src: acc |= s._cache["ranges"]
  if u.op in (Ops.END, Ops.REDUCE): acc -= frozenset(u.src[1:])
  return acc


# ---------------------------------------------------------------------------------------------------------------
# repr: a Python expression that rebuilds the graph; nodes used more than once are named once with a walrus

def render_repr(root: UOp) -> str:
  users: dict[UOp, int] = {}
  for u in root.toposort():
    for s in u.src: users[s] = users.get(s, 0) + 1
  names: dict[UOp, str] = {}
  out: list[str] = []
  stack: list = [root]
  while stack:
    item = stack.pop()
    if isinstance(item, str): out.append(item); continue
    u = item
    if u in names: out.append(names[u]); continue
    if users.get(u, 0) > 1:
      names[u] = f"x{len(names)}"
      out.append(f"{names[u]}:=")
    head = f"UOp({u.op!r}, arg={u.arg!r}" + (f", tag={u.tag!r}" if u.tag is not None else "") + ", src=("
    out.append(head)
    stack.append("))")
    for i in reversed(range(len(u.src))):
      stack.append("," if i == len(u.src) - 1 else ", ")
      stack.append(u.src[i])
  return "".join(out)


def repr_namespace() -> dict:
  """The names an eval() of repr(uop) needs."""
  from . import dtypes as dtypes_mod
  return {"UOp": UOp, "Ops": Ops, "dtypes": dtypes, "DType": DType, "PtrDType": PtrDType, "AddrSpace": AddrSpace,
          "BufferArg": BufferArg, "VarArg": VarArg, "KernelInfo": KernelInfo, "AxisType": AxisType,
          "inf": math.inf, "nan": math.nan, "dtypes_mod": dtypes_mod}


def eval_repr(text: str) -> UOp:
  return eval(text, repr_namespace())  # noqa: S307 - the text is a UOp repr
