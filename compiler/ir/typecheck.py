"""dtype derivation: the type of a UOp from its op, sources and arg; an ill-typed UOp raises UOpTypeError naming it."""
from __future__ import annotations

from .args import BufferArg, Invalid, VarArg
from .dtypes import DType, PtrDType, dtypes, join, literal_dtype
from .errors import UOpTypeError, short as _short
from .ops import GroupOp, O, Ops

def _fail(u, why: str):
  raise UOpTypeError(f"ill-typed {u.op.name}: {why} in {_short(u)}", u)


def derive_dtype(u):
  """The dtype of u (called once, when u is built)."""
  op, src, arg = u.op, u.src, u.arg
  if op in _ARITY: return _alu_dtype(u)   # the most frequent case first (the branches below are disjoint from it)
  if op is O.CONST:
    if src: _fail(u, "CONST takes no sources")
    if arg is Invalid: return dtypes.weakint   # the INVALID index (see UOp.valid)
    try: return literal_dtype(arg)
    except TypeError as e: _fail(u, str(e))
  if op in GroupOp.Memory:
    if not isinstance(arg, BufferArg): _fail(u, f"{op.name} arg must be a BufferArg, got {arg!r}")
    return PtrDType(arg.dtype, arg.addrspace, arg.size)
  if op in (O.CAST, O.BITCAST):
    if not isinstance(arg, DType) or len(src) != 1: _fail(u, f"{op.name} needs one source and a dtype arg")
    if isinstance(src[0].dtype, PtrDType) or src[0].dtype == dtypes.void: _fail(u, f"cannot {op.name} a {src[0].dtype!r}")
    if op is O.BITCAST and (src[0].dtype.itemsize != arg.itemsize or arg.is_weak):
      _fail(u, f"BITCAST from {src[0].dtype!r} to {arg!r} changes the size")
    if op is O.CAST: CASTS_CHECKED.add((arg, src[0].dtype))
    return arg
  if op in (O.INS, O.CUSTOM):
    if not (isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[1], (DType, PtrDType))):
      _fail(u, f"{op.name} arg must be (op or fmt, dtype), got {arg!r}")
    return arg[1]
  if op is O.DEFINE_VAR:
    if not isinstance(arg, VarArg): _fail(u, f"DEFINE_VAR arg must be a VarArg, got {arg!r}")
    return arg.dtype
  if op in (O.SPECIAL, O.RANGE):
    if len(src) != 1 or not src[0].dtype.is_int: _fail(u, f"{op.name} needs one integer source (its size)")
    return src[0].dtype
  if op in (O.SINK, O.GROUP, O.LINEAR, O.NOOP, O.END, O.BARRIER, O.IF, O.ENDIF, O.TUPLE,
            O.PROGRAM, O.COPY):
    return dtypes.void
  if op is O.STORE:
    if len(src) < 2 or src[0].op is not O.INDEX: _fail(u, "STORE needs (INDEX, value)")
    base = src[0].dtype.base
    if join(base, src[1].dtype) != base: _fail(u, f"storing a {src[1].dtype!r} into a buffer of {base!r}")
    return dtypes.void
  if op is O.INDEX:
    if len(src) not in (2, 3) or not isinstance(src[0].dtype, PtrDType): _fail(u, "INDEX needs (buffer, index[, gate])")
    if not src[1].dtype.is_int: _fail(u, f"index of type {src[1].dtype!r} is not an integer")
    if len(src) == 3 and not src[2].dtype.is_bool: _fail(u, f"gate of type {src[2].dtype!r} is not a bool")
    return src[0].dtype
  if op is O.LOAD:
    if not src or not isinstance(src[0].dtype, PtrDType): _fail(u, "LOAD needs an INDEX")
    return src[0].dtype.base
  if op in (O.AFTER, O.REDUCE):
    if not src: _fail(u, f"{op.name} needs a source")
    return src[0].dtype
  if op is O.CALL:
    if not src: _fail(u, "CALL needs a body")
    return dtypes.void
  if op is O.GETTUPLE:
    if len(src) != 1 or src[0].op is not O.CALL or src[0].src[0].op is not O.TUPLE:
      _fail(u, "GETTUPLE reads a CALL whose body is a TUPLE")
    body = src[0].src[0]
    if not isinstance(arg, int) or not 0 <= arg < len(body.src): _fail(u, f"GETTUPLE index {arg!r} out of range")
    return body.src[arg].dtype
  _fail(u, "no dtype rule for this op")


_ARITY = {op: 1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3 for op in GroupOp.ALU}
_VOID = dtypes.void


CASTS_CHECKED: set = set()   # (target dtype, source dtype) of the CASTs found well-typed: UOp.__new__ types them at once
_ALU_MEMO: dict = {}   # (op, operand dtypes...) -> result dtype, for the combinations seen well-typed already


def _alu_dtype(u):
  """The result type of an ALU node: looked up by (op, operand types) once that combination was checked (DTypes and
  Ops hash and compare in C), else checked and remembered."""
  src = u.src
  key = (u.op, src[0].dtype, src[1].dtype) if len(src) == 2 else (u.op, *(s.dtype for s in src))
  dt = _ALU_MEMO.get(key)
  if dt is None: dt = _ALU_MEMO[key] = _check_alu(u)
  return dt


def _check_alu(u):
  op, src = u.op, u.src
  want = _ARITY[op]
  if len(src) != want: _fail(u, f"{op.name} takes {want} sources, got {len(src)}")
  for s in src:
    if s.dtype.__class__ is PtrDType or s.dtype == _VOID: _fail(u, f"operand of type {s.dtype!r} is not a value")
  if op is O.WHERE:
    if not src[0].dtype.is_bool: _fail(u, f"WHERE condition of type {src[0].dtype!r} is not a bool")
    dt = join(src[1].dtype, src[2].dtype)
    if dt is None: _fail(u, f"mismatched dtypes {src[1].dtype!r} and {src[2].dtype!r}")
    return dt
  if op in (O.SHL, O.SHR):
    if not (src[0].dtype.is_int and src[1].dtype.is_int): _fail(u, f"shift of {src[0].dtype!r} by {src[1].dtype!r}")
    return src[0].dtype
  dt = src[0].dtype
  for s in src[1:]:
    nd = join(dt, s.dtype)
    if nd is None: _fail(u, f"mismatched dtypes {dt!r} and {s.dtype!r}")
    dt = nd
  if op in GroupOp.IntOnly and not dt.is_int: _fail(u, f"{op.name} needs integers, got {dt!r}")
  if op in GroupOp.FloatOnly and not dt.is_float: _fail(u, f"{op.name} needs floats, got {dt!r}")
  if op in (O.AND, O.OR, O.XOR, O.NOT) and dt.is_float: _fail(u, f"{op.name} needs integers or bools, got {dt!r}")
  if op in (O.ADD, O.SUB, O.MUL, O.NEG) and dt.is_bool:
    _fail(u, f"{op.name} on bools")
  if op in GroupOp.Comparison: return dtypes.bool
  return dt
