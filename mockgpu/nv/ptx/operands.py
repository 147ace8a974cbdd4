"""Operand readers and destination writers compiled once per instruction: closures over the batch state S.

S.R is the register file: one numpy array per register (its declared type's dtype, one element per thread), or a
0-d array when every thread of the batch holds the same value (a uniform value: a parameter, %ntid, a loop bound;
numpy broadcasts it wherever it meets per-thread values, so an instruction computes it once, not once per thread).
An array in S.R is never written in place (a masked write builds a new one), so `mov` may share arrays between
registers and the zero-filled starting value is one array for all."""
from __future__ import annotations

import numpy as np

from .memspace import LOCAL_WINDOW, SHARED_WINDOW
from .model import DTYPES, Operand, PTXError
from .semantics import UNSIGNED, cast_bits


class Ctx:
  """What compiling one kernel needs: register numbers and types, variables, the instruction being compiled."""

  def __init__(self, kernel):
    self.kernel = kernel
    self.index = {name: i for i, name in enumerate(kernel.registers)}
    self.rtype = [DTYPES[t] for t in kernel.registers.values()]
    self.index["%%cc"] = len(self.rtype)   # CC.CF of the extended-precision instructions (instrs.CC)
    self.rtype.append(DTYPES["u32"])
    self.ins = None
    self.reads: set = set()    # registers read / written by what was compiled since the last reset
    self.writes: set = set()

  def error(self, msg: str) -> PTXError:
    ins = self.ins
    return PTXError(f"{self.kernel.name}: {msg}", ins.line if ins else None, ins.text if ins else "")

  def reg(self, name: str, write: bool = False) -> int:
    i = self.index.get(name)
    if i is None: raise self.error(f"register {name} is not declared")
    (self.writes if write else self.reads).add(i)
    return i


def imm_value(v, t: str):
  dt = np.dtype(DTYPES[t])
  if t == "pred": return np.bool_(bool(v))
  if dt.kind == "f":
    if isinstance(v, int) and t in ("f32", "f64") and v != 0: return dt.type(float(v))
    if isinstance(v, int) and t == "f16": return np.array(v & 0xFFFF, np.uint16).view(np.float16)[()]
    return np.array(v).astype(dt)[()]
  if isinstance(v, float):   # a float literal in an integer-typed operand (mov.b32 %r, 0f3F800000): its bits
    k = dt.itemsize
    raw = np.array(v, {2: np.float16, 4: np.float32, 8: np.float64}[k]).view(UNSIGNED[k])
    return raw.view(dt)[()]
  return np.array(int(v) & ((1 << (8 * dt.itemsize)) - 1), UNSIGNED[dt.itemsize]).view(dt)[()]


def sym_address(ctx: Ctx, name: str, off: int = 0, generic: bool = False):
  """(constant value or None, run-time function) of a variable's address in its own space (shared/local offset,
  global host address, param offset). generic=True gives the generic address (cvta of it)."""
  k = ctx.kernel
  v = k.variables.get(name)
  if v is not None:
    if v.space == "shared":
      base = dynamic_shared_offset(k) if v.offset < 0 else v.offset
      return base + off + (SHARED_WINDOW if generic else 0), None
    if v.space == "local": return v.offset + off + (LOCAL_WINDOW if generic else 0), None
    return None, (lambda S: S.gaddr[name] + off)
  for p in k.params:
    if p.name == name: return p.offset + off, None
  raise ctx.error(f"unknown symbol {name}")


def dynamic_shared_offset(kernel) -> int:
  return (kernel.static_shared_bytes + 15) // 16 * 16


def rd(ctx: Ctx, o: Operand, t: str):
  """A reader S -> value of PTX type t."""
  dt = np.dtype(DTYPES[t])
  if o.kind == "reg":
    i = ctx.reg(o.name)
    rdt = np.dtype(ctx.rtype[i])
    if rdt == np.bool_ or dt == np.bool_:
      if rdt != np.bool_: raise ctx.error(f"{o.name} is not a predicate")
      return (lambda S: ~S.R[i]) if o.neg else (lambda S: S.R[i])
    if rdt == dt: return lambda S: S.R[i]
    if rdt.itemsize == dt.itemsize: return lambda S: S.R[i].view(dt)   # the same bits seen as another type
    return lambda S: cast_bits(S.R[i], dt)
  if o.kind == "imm":
    c = imm_value(o.value, t)
    return lambda S: c
  if o.kind == "sreg":
    name = o.name
    return lambda S: cast_bits(S.sreg(name), dt)
  if o.kind == "sym":
    const, fn = sym_address(ctx, o.name, int(o.value))
    if fn is None:
      c = imm_value(const, t)
      return lambda S: c
    return lambda S: np.array(fn(S), np.uint64).astype(dt)[()]
  raise ctx.error(f"operand {o.kind} cannot be read as .{t}")


def wr(ctx: Ctx, o: Operand, t: str):
  """A writer (S, value of PTX type t, mask or None) -> None."""
  if o.kind == "sink": return lambda S, v, m: None
  if o.kind != "reg": raise ctx.error("the destination is not a register")
  i = ctx.reg(o.name, write=True)
  rdt = np.dtype(ctx.rtype[i])
  dt = np.dtype(DTYPES[t])
  if (rdt == np.bool_) != (dt == np.bool_): raise ctx.error(f"{o.name} (.{ctx.kernel.registers[o.name]}) cannot hold .{t}")
  same = rdt == dt

  def w(S, v, m):
    v = np.asarray(v)
    if not same: v = cast_bits(v, rdt)
    elif v.dtype != rdt: v = v.astype(rdt)
    if m is None:                      # every thread writes: a uniform value stays one value
      S.R[i] = v if v.ndim == 0 or v.shape[0] == S.n else np.full(S.n, v, rdt)
      return
    if v.ndim == 0 or v.shape[0] != S.n: v = np.full(S.n, v, rdt)
    old = S.R[i]
    if old.ndim == 0: old = np.full(S.n, old, rdt)
    S.R[i] = blend(S, old, v, m)
  return w


def blend(S, old: np.ndarray, new: np.ndarray, m: np.ndarray) -> np.ndarray:
  """where(m, new, old) as bit operations: old ^ ((old ^ new) & M) with M all ones where m (np.where with an irregular
  mask is 10x slower). M is kept per mask and size while the same mask array comes again (the block's group)."""
  if old.dtype == np.bool_: return (old & ~m) | (new & m)
  k = old.dtype.itemsize
  cache = S.__dict__.setdefault("_blend", {})
  key = cache.get("key")
  if key is not m:
    cache.clear()
    cache["key"] = m
  M = cache.get(k)
  if M is None: M = cache[k] = np.negative(m.astype(UNSIGNED[k]))
  u = UNSIGNED[k]
  t = np.bitwise_xor(old.view(u), new.view(u))
  np.bitwise_and(t, M, out=t)
  np.bitwise_xor(t, old.view(u), out=t)
  return t.view(old.dtype)


def address_register(ctx: Ctx, o: Operand):
  """(register number, signed byte offset) of an [%reg+imm] operand whose register holds an address (4 or 8 bytes),
  else None: what Spaces.indexed() takes."""
  if o.kind != "addr" or o.base is None or o.base.kind != "reg": return None
  i = ctx.index.get(o.base.name)
  if i is None or np.dtype(ctx.rtype[i]).itemsize not in (4, 8): return None
  off = int(o.value) & (2**64 - 1)
  return i, off - (1 << 64) if off >= 1 << 63 else off


def address(ctx: Ctx, o: Operand):
  """An [addr] operand -> reader S -> uint64 address (scalar or array)."""
  if o.kind != "addr": raise ctx.error("expected an [address] operand")
  off = np.uint64(int(o.value) & (2**64 - 1))
  b = o.base
  if b is None: return lambda S: off
  if b.kind == "reg":
    i = ctx.reg(b.name)
    rdt = np.dtype(ctx.rtype[i])
    if rdt.itemsize == 8:
      if rdt == np.uint64: return lambda S: S.R[i] + off
      return lambda S: S.R[i].view(np.uint64) + off
    if rdt.itemsize == 4:   # 32-bit addresses (shared/local/param windows): zero-extended
      return lambda S: cast_bits(S.R[i], np.uint32).astype(np.uint64) + off
    raise ctx.error(f"{b.name} is too narrow for an address")
  if b.kind == "sym":
    const, fn = sym_address(ctx, b.name, int(o.value))
    if fn is None:
      c = np.uint64(const)
      return lambda S: c
    return lambda S: np.uint64(fn(S))
  if b.kind == "imm": c = np.uint64(int(b.value) + int(o.value)); return lambda S: c
  raise ctx.error("unsupported address")
