"""Data types of the UOp IR.

A DType is a scalar type (int32, float32, bool, ...). Two *weak* types stand for Python literals and index
arithmetic that have not been given a width yet: `weakint` (loop indices, SPECIALs, integer literals) and
`weakfloat` (float literals). A weak type takes the type of whatever it meets (`x_int16 + 1` is int16); lowering
commits what stays weak (weakint -> int32 or int64 from the value bounds, weakfloat -> float32).

PtrDType is the type of a memory object (PARAM, BUFFER, INDEX): element type, address space and flat size.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class AddrSpace(enum.Enum):
  GLOBAL = "global"   # kernel parameters: device memory
  LOCAL = "local"     # shared by the work-items of a work-group (LDS)
  REG = "reg"         # private to one work-item (registers)

  def __repr__(self): return f"AddrSpace.{self.name}"


_INTERNED: dict = {}


@dataclass(frozen=True, eq=False)
class DType:
  """Interned: building a DType equal to an existing one (and unpickling or copying one) gives that very object, so
  equality and hashing are the identity's, done in C (DTypes are compared on every UOp a pass builds)."""
  name: str
  itemsize: int     # bytes; 0 for void and the weak types (no storage)
  kind: str         # "int", "uint", "float", "bool", "void", "weakint", "weakfloat"
  cname: str        # the C spelling

  def __new__(cls, name: str, itemsize: int, kind: str, cname: str):
    key = (name, itemsize, kind, cname)
    d = _INTERNED.get(key)
    # setdefault is one step: two threads making the same new DType get one object (equality is identity)
    return d if d is not None else _INTERNED.setdefault(key, object.__new__(cls))

  # The flags and the bounds are asked for on every UOp a pass builds or matches: they are computed once here (as
  # properties they would cost a Python call each time).
  def __post_init__(self):
    k = self.kind
    for name, value in (("is_int", k in ("int", "uint", "weakint")), ("is_unsigned", k == "uint"),
                        ("is_float", k in ("float", "weakfloat")), ("is_weak", k in ("weakint", "weakfloat")),
                        ("is_bool", k == "bool"), ("bounds", self._bounds())):
      object.__setattr__(self, name, value)

  def __reduce__(self): return (DType, (self.name, self.itemsize, self.kind, self.cname))
  def __copy__(self): return self
  def __deepcopy__(self, memo): return self

  def __repr__(self): return f"dtypes.{self.name}"

  def _bounds(self) -> tuple:
    """(min, max) representable; weak ints are unbounded (Python ints)."""
    if self.kind == "bool": return (False, True)
    if self.kind == "int": return (-(1 << (8 * self.itemsize - 1)), (1 << (8 * self.itemsize - 1)) - 1)
    if self.kind == "uint": return (0, (1 << (8 * self.itemsize)) - 1)
    return (-float("inf"), float("inf"))


@dataclass(frozen=True, eq=True)
class PtrDType:
  """A pointer to size elements of base in an address space."""
  base: DType
  addrspace: AddrSpace
  size: int          # flat number of elements

  def __repr__(self): return f"PtrDType({self.base!r}, {self.addrspace!r}, {self.size})"
  @property
  def is_weak(self) -> bool: return False
  kind = "ptr"


class dtypes:  # noqa: N801 - a namespace, spelled like the reference lineage
  void = DType("void", 0, "void", "void")
  bool = DType("bool", 1, "bool", "_Bool")
  int8 = DType("int8", 1, "int", "signed char")
  int16 = DType("int16", 2, "int", "short")
  int32 = DType("int32", 4, "int", "int")
  int64 = DType("int64", 8, "int", "long long")
  uint8 = DType("uint8", 1, "uint", "unsigned char")
  uint16 = DType("uint16", 2, "uint", "unsigned short")
  uint32 = DType("uint32", 4, "uint", "unsigned int")
  uint64 = DType("uint64", 8, "uint", "unsigned long long")
  float16 = DType("float16", 2, "float", "_Float16")
  float32 = DType("float32", 4, "float", "float")
  float64 = DType("float64", 8, "float", "double")
  weakint = DType("weakint", 0, "weakint", "long long")
  weakfloat = DType("weakfloat", 0, "weakfloat", "float")

  ints = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
  floats = (float16, float32, float64)
  all = (void, bool, *ints, *floats, weakint, weakfloat)

  @staticmethod
  def from_numpy(np_dtype) -> DType:
    name = str(np_dtype)
    for d in dtypes.all:
      if d.name == name and not d.is_weak: return d
    raise TypeError(f"no hcq dtype for numpy dtype {np_dtype}")

  @staticmethod
  def to_numpy(dt: DType) -> str:
    if dt.is_weak or dt.kind == "void": raise TypeError(f"{dt!r} has no storage type")
    return dt.name


def literal_dtype(value) -> DType:
  """The (weak) type of a Python literal."""
  if isinstance(value, bool): return dtypes.bool
  if isinstance(value, int): return dtypes.weakint
  if isinstance(value, float): return dtypes.weakfloat
  raise TypeError(f"literal {value!r} of type {type(value).__name__} is not a bool, int or float")


def join(a: DType, b: DType) -> DType | None:
  """The type two operands meet at: equal types, or a weak type giving way to the other. None if they don't meet."""
  if a == b: return a
  if {a.kind, b.kind} == {"weakint", "weakfloat"}: return dtypes.weakfloat
  if a.is_weak and not b.is_weak: a, b = b, a
  # now b is weak (or neither is)
  if b.kind == "weakint" and (a.is_int or a.is_float): return a
  if b.kind == "weakfloat" and a.is_float: return a if a.kind == "float" else dtypes.weakfloat
  return None


def float_to_int(value: float, dt: DType) -> int:
  """The reference float -> integer conversion, as GPUs convert (RDNA3 v_cvt_i32_f32 / v_cvt_u32_f32): NaN is 0, the
  value is truncated toward zero and saturates at the 32-bit range of dt's signedness (64-bit for 8-byte and weak
  types); a narrower dt then keeps the low bits, as a narrowing of that 32-bit result does."""
  if math.isnan(value): return 0
  bits = 64 if dt.itemsize == 8 or dt.is_weak else 32
  lo, hi = (0, (1 << bits) - 1) if dt.kind == "uint" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
  if math.isinf(value): return hi if value > 0 else lo
  return min(max(math.trunc(value), lo), hi)


def truncate(value, dt: DType):
  """Wrap / convert a Python value to what a variable of type dt would hold (a float to an integer: float_to_int)."""
  if dt.kind == "bool": return bool(value)
  if isinstance(value, float) and dt.is_int: value = float_to_int(value, dt)
  if dt.kind in ("int", "uint"):
    v = int(value) & ((1 << (8 * dt.itemsize)) - 1)
    if dt.kind == "int" and v >= 1 << (8 * dt.itemsize - 1): v -= 1 << (8 * dt.itemsize)
    return v
  if dt.kind == "weakint": return int(value)
  if dt.kind == "float" and dt.itemsize == 4:
    import struct
    try: return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    except OverflowError: return float("inf") if value > 0 else float("-inf")
  if dt.is_float: return float(value)
  return value
