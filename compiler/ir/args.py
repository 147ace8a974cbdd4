"""The args of the UOps that carry structured data: RANGE axis types, PARAM/BUFFER, DEFINE_VAR, SINK, and the
Invalid index value."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .dtypes import AddrSpace, DType, dtypes


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
  shape: tuple | None = None       # for multi-index .index(i, j); storage is always flat. A dim may be a UOp of
                                   # DEFINE_VARs (a size known at launch); size is then the largest it can be
  volatile: bool = False           # each LOAD/STORE of it is its own access: never merged, hoisted or dropped


class InvalidType:
  """The one value of the INVALID index constant (CONST arg Invalid): `i.valid(c)` is c.where(i, INVALID), an index
  that is no address where c is false. It only ever feeds .index(), which makes it the gate of a gated INDEX."""
  _the = None

  def __new__(cls):
    if cls._the is None: cls._the = object.__new__(cls)
    return cls._the

  def __repr__(self): return "Invalid"
  def __reduce__(self): return (InvalidType, ())


Invalid = InvalidType()


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
  """A kernel's name and, once lowering has read them from its SPECIALs, its launch dimensions."""
  name: str = "kernel"
  global_size: tuple | None = None   # filled by lowering from the SPECIALs
  local_size: tuple | None = None
