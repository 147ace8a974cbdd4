"""What a generated rnndb module (autogen/rnndb.py) needs at import: its data block turned into names.

    REGISTERS: name -> Register(name, offset, stride)   (stride 0: a plain register; else REG_X(i) = offset + stride*i)
    FIELDS:    name -> Field(name, low, high, shr, flag)
    ENUMS:     enum name -> {value name: value}
and in the module's namespace: REG_X (an int, or a function of the index), X__MASK, X__SHIFT, X(value) (the value
shifted right by shr, then into place: what the hardware field holds) and, for a one-bit flag, X = its mask.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Register:
  name: str
  offset: int
  stride: int = 0

  def __call__(self, i: int = 0) -> int:
    if not self.stride and i: raise IndexError(f"{self.name} is not an array register (index {i})")
    return self.offset + self.stride * i


@dataclass(frozen=True)
class Field:
  name: str
  low: int
  high: int
  shr: int
  flag: bool

  @property
  def mask(self) -> int: return ((1 << (self.high - self.low + 1)) - 1) << self.low

  def encode(self, value: int) -> int:
    """value into place; it must fit the field (after dropping the shr low bits, which must be 0)."""
    if self.shr and value & ((1 << self.shr) - 1):
      raise ValueError(f"{self.name}: {value:#x} has bits below {1 << self.shr:#x} set (the field drops {self.shr} bits)")
    v = value >> self.shr
    if v < 0 or v > self.mask >> self.low: raise ValueError(f"{self.name}: {value:#x} does not fit bits {self.high}:{self.low}")
    return v << self.low

  def decode(self, word: int) -> int:
    return ((word & self.mask) >> self.low) << self.shr


def install(ns: dict, data: str):
  registers, fields, enums = {}, {}, {}
  for line in data.splitlines():
    if not line: continue
    kind, *a = line.split()
    if kind == "R":
      r = registers[a[0]] = Register(a[0], int(a[1], 0))
      ns[a[0]] = r.offset
    elif kind == "A":
      r = registers[a[0]] = Register(a[0], int(a[1], 0), int(a[2], 0))
      ns[a[0]] = r
    elif kind == "F":
      f = fields[a[0]] = Field(a[0], int(a[1]), int(a[2]), int(a[3]), a[4] == "1")
      if f.flag: ns[a[0]] = f.mask
      else:
        ns[a[0] + "__MASK"], ns[a[0] + "__SHIFT"], ns[a[0]] = f.mask, f.low, f.encode
    elif kind == "E":
      enums.setdefault(a[0], {})[a[1]] = int(a[2], 0)
      ns[a[1]] = int(a[2], 0)
  return registers, fields, enums
