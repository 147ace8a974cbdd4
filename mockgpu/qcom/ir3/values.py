"""Constants of the modelled machine (a6xx), operand types, and the raw-bits <-> number conversions: registers
hold raw bits in uint32 arrays."""
from __future__ import annotations

import math

import numpy as np


BATCH = 16384                # fibers run together (whole work-groups; dispatch.py says why this many)
LOCAL_BYTES = 32 << 10       # shared memory per work-group (a6xx)
A0, A1, P0 = 61 * 4, 61 * 4 + 1, 62 * 4
M32 = 0xFFFFFFFF
FLUT = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e),
        1 / math.log2(10), math.log2(10), 4.0)
# #type: f16 f32 u16 u32 s16 s32 u8 s8
F16, F32, U16, U32, S16, S32, U8, S8 = range(8)
TYPE_BYTES = {F16: 2, F32: 4, U16: 2, U32: 4, S16: 2, S32: 4, U8: 1, S8: 1}
COND = {0: np.less, 1: np.less_equal, 2: np.greater, 3: np.greater_equal, 4: np.equal, 5: np.not_equal}


class Unsupported(Exception):
  pass


class OutOfState(Exception):
  """An instruction that names state the dispatch did not program (a constant past CONSTLEN, a register past the
  footprint, an IBO slot past NIBO): it faults when it runs."""


# ---- value helpers: registers hold raw bits in uint32 arrays
def f32(bits): return np.asarray(bits, np.uint32).view(np.float32)
def b32(x): return np.asarray(x, np.float32).view(np.uint32)
def f16(bits): return (np.asarray(bits, np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16)
def b16(x): return np.asarray(x, np.float16).view(np.uint16).astype(np.uint32)
def s32(bits): return np.asarray(bits, np.uint32).view(np.int32)
def sext(bits, width):
  v = np.asarray(bits, np.uint32).astype(np.int64) & ((1 << width) - 1)
  return np.where(v >> (width - 1), v - (1 << width), v)


def to_value(bits, t):
  """Raw register bits of type t -> numbers (float64 for floats, int64 for integers)."""
  if t == F16: return f16(bits).astype(np.float64)
  if t == F32: return f32(bits).astype(np.float64)
  if t in (U16, U8): return np.asarray(bits, np.uint32).astype(np.int64) & (0xFFFF if t == U16 else 0xFF)
  if t == U32: return np.asarray(bits, np.uint32).astype(np.int64)
  return sext(bits, {S16: 16, S32: 32, S8: 8}[t])


def from_value(v, t, rnd: int = 0):
  """Numbers -> raw bits of type t (float -> integer: rounding mode rnd, saturated to the type's range)."""
  v = np.asarray(v)
  if t == F16: return b16(v.astype(np.float16))
  if t == F32: return b32(v.astype(np.float32))
  if v.dtype.kind == "f":
    v = {0: np.trunc, 1: np.rint, 2: np.ceil, 3: np.floor}[rnd](np.nan_to_num(v, nan=0.0))
    width, signed = {U16: (16, 0), U32: (32, 0), S16: (16, 1), S32: (32, 1), U8: (8, 0), S8: (8, 1)}[t]
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    v = np.clip(v, lo, hi).astype(np.int64)
  mask = {U16: 0xFFFF, S16: 0xFFFF, U8: 0xFF, S8: 0xFF}.get(t, M32)
  return (v.astype(np.int64) & mask).astype(np.uint32)
