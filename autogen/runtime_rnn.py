"""What a generated rnndb module (autogen/rnndb.py) needs at import: its data block turned into names.

    REGISTERS: name -> Register(name, offset, stride)   (stride 0: a plain register; else REG_X(i) = offset + stride*i)
    FIELDS:    name -> Field(name, low, high, shr, flag)
    ENUMS:     enum name -> {value name: value}
and in the module's namespace: REG_X (an int, or a function of the index), X__MASK, X__SHIFT, X(value) (the value
shifted right by shr, then into place: what the hardware field holds) and, for a one-bit flag, X = its mask.
"""
from __future__ import annotations

import struct
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
  kind: str = "uint"      # how encode() takes a value: uint, int (masked), float (f32 / f16 bits), fixed/ufixed (radix)
  radix: int = 0

  @property
  def mask(self) -> int: return ((1 << (self.high - self.low + 1)) - 1) << self.low

  def encode(self, value) -> int:
    """value into place, as the C header's X(val) computes it: a float field takes the value's f32 bits (f16 for a
    16-bit field), a fixed/ufixed one value * 2^radix truncated toward zero, an int one its two's complement masked
    to the field; a number must then fit the field (after dropping the shr low bits, which must be 0)."""
    width = self.high - self.low + 1
    if self.kind == "float":
      bits = struct.unpack("<H", struct.pack("<e", value))[0] if width == 16 else struct.unpack("<I", struct.pack("<f", value))[0]
      return (bits << self.low) & self.mask
    if self.kind in ("fixed", "ufixed"): value = int(value * (1 << self.radix))
    if self.kind in ("int", "fixed"): value &= (1 << width) - 1
    if not isinstance(value, int): raise TypeError(f"{self.name}: takes an integer, not {type(value).__name__}")
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
      f = fields[a[0]] = Field(a[0], int(a[1]), int(a[2]), int(a[3]), a[4] == "1", *(a[5:6] + [int(x) for x in a[6:7]]))
      if f.flag: ns[a[0]] = f.mask
      else:
        ns[a[0] + "__MASK"], ns[a[0] + "__SHIFT"], ns[a[0]] = f.mask, f.low, f.encode
    elif kind == "E":
      enums.setdefault(a[0], {})[a[1]] = int(a[2], 0)
      ns[a[1]] = int(a[2], 0)
  return registers, fields, enums
