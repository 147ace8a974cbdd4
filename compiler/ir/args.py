"""The args of the UOps that carry structured data: RANGE axis types, PARAM/BUFFER, DEFINE_VAR, SINK."""
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
