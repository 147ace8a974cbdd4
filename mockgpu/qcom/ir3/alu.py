"""cat1-cat4: mov/cov, the two-source ALU operations (CAT2), mad/sel (CAT3) and the SFU (CAT4); each builder returns
run(F, D, i), i the (rptN) step."""
from __future__ import annotations

import numpy as np

from .values import COND, F16, M32, S16, S32, S8, U16, U32, U8, b16, b32, f16, f32, from_value, sext, to_value
from .operands import _dst, _special, absneg, src_reader


# cat1: mov / cov
def _mov(d):
  f = d.fields
  st, dt, rnd = f["SRC_TYPE"], f["DST_TYPE"], f.get("ROUND", 0)
  src_half = st in (F16, U16, S16, U8, S8)
  dst_half = dt in (F16, U16, S16, U8, S8)
  dst = _dst(d)
  src = src_reader(f["SRC"], src_half, d.ctx, float_op=st == F16)
  r_src = f.get("SRC_R", 0)
  same = st == dt or {st, dt} <= {U32, S32} or {st, dt} <= {U16, S16}
  def run(F, D, i):
    bits = src(F, i * r_src)
    out = bits if same else from_value(to_value(bits, st), dt, rnd)
    F.write(dst + i, out, dst_half and not _special(dst))
  return run


# cat2
def _fop(fn):
  def make(full):
    def op(a, b):
      x, y = (f32(a), f32(b)) if full else (f16(a), f16(b))
      with np.errstate(all="ignore"): r = fn(x, y)
      return b32(r) if full else b16(r)
    return op
  return make


def _iop(fn, signed):
  def make(full):
    w, mask = (32, M32) if full else (16, 0xFFFF)
    def op(a, b):
      x, y = (sext(a, w), sext(b, w)) if signed else (np.asarray(a, np.uint32).astype(np.int64) & mask,
                                                        np.asarray(b, np.uint32).astype(np.int64) & mask)
      return (np.asarray(fn(x, y, w)).astype(np.int64) & mask).astype(np.uint32)
    return op
  return make


def _frnd(fn):
  return _fop(lambda x, y: fn(x))


def _clz(x, w):
  x = np.asarray(x, np.int64)
  out = np.full(x.shape, w, np.int64)
  for b in range(w - 1, -1, -1):
    hit = ((x >> b) & 1).astype(bool) & (out == w)
    out[hit] = w - 1 - b
  return out


def _bfrev(x, w):
  x = np.asarray(x, np.int64)
  out = np.zeros_like(x)
  for b in range(w): out |= ((x >> b) & 1) << (w - 1 - b)
  return out


def _cbits(x, w):
  x = np.asarray(x, np.int64)
  return sum(((x >> b) & 1) for b in range(w))


def _rndaz(x): return np.copysign(np.floor(np.abs(x) + 0.5), x)


# name -> (operand kind for modifiers, factory(full) -> fn(a, b) on raw bits, compare?)
CAT2 = {
  "add.f": ("f", _fop(np.add)), "mul.f": ("f", _fop(np.multiply)), "min.f": ("f", _fop(np.fmin)),
  "max.f": ("f", _fop(np.fmax)), "sign.f": ("f", _frnd(np.sign)), "absneg.f": ("f", _frnd(lambda x: x)),
  "floor.f": ("f", _frnd(np.floor)), "ceil.f": ("f", _frnd(np.ceil)), "rndne.f": ("f", _frnd(np.rint)),
  "rndaz.f": ("f", _frnd(_rndaz)), "trunc.f": ("f", _frnd(np.trunc)),
  "add.u": ("s", _iop(lambda x, y, w: x + y, False)), "add.s": ("s", _iop(lambda x, y, w: x + y, True)),
  "sub.u": ("s", _iop(lambda x, y, w: x - y, False)), "sub.s": ("s", _iop(lambda x, y, w: x - y, True)),
  "min.u": ("s", _iop(lambda x, y, w: np.minimum(x, y), False)), "min.s": ("s", _iop(lambda x, y, w: np.minimum(x, y), True)),
  "max.u": ("s", _iop(lambda x, y, w: np.maximum(x, y), False)), "max.s": ("s", _iop(lambda x, y, w: np.maximum(x, y), True)),
  "absneg.s": ("s", _iop(lambda x, y, w: x, True)),
  "and.b": ("b", _iop(lambda x, y, w: x & y, False)), "or.b": ("b", _iop(lambda x, y, w: x | y, False)),
  "xor.b": ("b", _iop(lambda x, y, w: x ^ y, False)), "not.b": ("b", _iop(lambda x, y, w: ~x, False)),
  "shl.b": ("b", _iop(lambda x, y, w: x << (y & (w - 1)), False)),
  "shr.b": ("b", _iop(lambda x, y, w: x >> (y & (w - 1)), False)),
  "ashr.b": ("b", _iop(lambda x, y, w: (sext(x, w) >> (y & (w - 1))), False)),
  "mul.u24": ("s", _iop(lambda x, y, w: (x & 0xFFFFFF) * (y & 0xFFFFFF), False)),
  "mul.s24": ("s", _iop(lambda x, y, w: sext(x & 0xFFFFFF, 24) * sext(y & 0xFFFFFF, 24), False)),
  # mull.u multiplies the low 16 bits of each source (Mesa maps nir umul_low to it, ir3_compiler_nir.c; nir_opcodes.py:
  # umul_low = (src0 & 0xffff) * (src1 & 0xffff)); a 32-bit multiply is ir3_nir_imul.py's
  # imadsh_mix16(b, a, imadsh_mix16(a, b, umul_low(a, b)))
  "mull.u": ("s", _iop(lambda x, y, w: ((x & 0xFFFF) * (y & 0xFFFF)) & ((1 << w) - 1), False)),
  "bfrev.b": ("b", _iop(lambda x, y, w: _bfrev(x, w), False)), "clz.b": ("b", _iop(lambda x, y, w: _clz(x, w), False)),
  "cbits.b": ("b", _iop(lambda x, y, w: _cbits(x, w), False)),
  "getbit.b": ("b", _iop(lambda x, y, w: (x >> (y & (w - 1))) & 1, False)),
  "cmps.f": ("f", None), "cmps.u": ("s", None), "cmps.s": ("s", None),
}


def _sh(b): return (np.asarray(b, np.uint32) & 31).view(np.int32)


# full-width integer and bit operations computed on the raw uint32 bits: the same results as the int64 forms above
# (a 32-bit register wraps modulo 2^32; a product's low 32 bits are the uint32 product's) without the conversions
FAST32 = {
  "add.u": np.add, "add.s": np.add, "sub.u": np.subtract, "sub.s": np.subtract,
  "and.b": np.bitwise_and, "or.b": np.bitwise_or, "xor.b": np.bitwise_xor, "not.b": lambda a, b: np.invert(a),
  "min.u": np.minimum, "max.u": np.maximum,
  "min.s": lambda a, b: np.minimum(a.view(np.int32), b.view(np.int32)).view(np.uint32),
  "max.s": lambda a, b: np.maximum(a.view(np.int32), b.view(np.int32)).view(np.uint32),
  "shl.b": lambda a, b: np.left_shift(a, _sh(b).view(np.uint32)),
  "shr.b": lambda a, b: np.right_shift(a, _sh(b).view(np.uint32)),
  "ashr.b": lambda a, b: np.right_shift(a.view(np.int32), _sh(b)).view(np.uint32),
  "getbit.b": lambda a, b: np.right_shift(a, _sh(b).view(np.uint32)) & np.uint32(1),
  "mul.u24": lambda a, b: (a & np.uint32(0xFFFFFF)) * (b & np.uint32(0xFFFFFF)),
  "mull.u": lambda a, b: (a & np.uint32(0xFFFF)) * (b & np.uint32(0xFFFF)),
}


def _fast32(fn):
  def op(a, b):
    return np.asarray(fn(np.asarray(a, np.uint32), np.asarray(b, np.uint32)), np.uint32)
  return op


def _cat2(d):
  f, name = d.fields, d.name
  kind, make = CAT2[name]
  full = bool(f.get("FULL", 1))
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  ops = []
  for k in ("SRC1", "SRC2"):
    if k in f and hasattr(f[k], "fields") and f[k].fields:
      op = f[k]
      ops.append((src_reader(op, not full, d.ctx, float_op=kind == "f"), op.fields.get("ABSNEG", 0), f.get(f"{k}_R", 0)))
  sat = f.get("SAT", 0)
  if make is None:                                  # compare: 1 or 0
    cmp = COND[f["COND"]]
    def compute(a, b):
      if kind == "f": x, y = (f32(a), f32(b)) if full else (f16(a), f16(b))
      elif name == "cmps.s": x, y = sext(a, 32 if full else 16), sext(b, 32 if full else 16)
      else: x, y = (np.asarray(a, np.uint32) & (M32 if full else 0xFFFF)), (np.asarray(b, np.uint32) & (M32 if full else 0xFFFF))
      return cmp(x, y).astype(np.uint32)
    conv = None
  else:
    compute = _fast32(FAST32[name]) if full and name in FAST32 else make(full)
    conv = kind == "f" and dst_half == full         # (dst conversion) a float result of the other precision
  if len(ops) == 2 and not ops[0][1] and not ops[1][1] and not (sat and kind == "f") and not conv:
    (ra, _, rra), (rb, _, rrb) = ops
    def run2(F, D, i):                            # the common form: two sources, no modifiers, no conversion
      F.write(dst + i, compute(ra(F, i * rra), rb(F, i * rrb)), dst_half)
    return run2
  def run(F, D, i):
    vals = [absneg(r(F, i * rr), mod, kind, not full) for r, mod, rr in ops]
    if len(vals) == 1: vals.append(vals[0])
    out = compute(vals[0], vals[1])
    if sat and kind == "f":
      out = b32(np.clip(f32(out), 0, 1)) if full else b16(np.clip(f16(out), 0, 1))
    if conv: out = b16(f32(out).astype(np.float16)) if full else b32(f16(out).astype(np.float32))
    F.write(dst + i, out, dst_half)
  return run


# cat3
CAT3 = {"mad.f32", "mad.f16", "mad.u24", "mad.s24", "mad.u16", "mad.s16", "sel.b32", "sel.b16", "madsh.m16"}
# sel.f32/f16/s32/s16: Mesa documents no semantics for them (ir3 emits only sel.b16/b32): the mock refuses them
UNDOCUMENTED = {"sel.f32", "sel.f16", "sel.s32", "sel.s16"}


def _cat3(d):
  f, name = d.fields, d.name
  full = bool(f.get("FULL", 1))
  half = not full
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  ctx = dict(d.ctx, immed=f.get("IMMED_ENCODING", 0))
  r1, r2, r3 = (src_reader(f[k], half, ctx, float_op=name.startswith("mad.f")) for k in ("SRC1", "SRC2", "SRC3"))
  n1, n2, n3 = f.get("SRC1_NEG", 0), f.get("SRC2_NEG", 0), f.get("SRC3_NEG", 0)
  rr = (f.get("SRC1_R", 0), f.get("SRC2_R", 0), f.get("SRC3_R", 0))
  w, mask = (32, M32) if full else (16, 0xFFFF)
  def run(F, D, i):
    a, b, c = r1(F, i * rr[0]), r2(F, i * rr[1]), r3(F, i * rr[2])
    if name == "madsh.m16":
      # nir_opcodes.py imadsh_mix16: ((src0 >> 16) * (src1 & 0xffff) << 16) + src2
      x = np.asarray(a, np.int64) >> 16 & 0xFFFF
      y = np.asarray(b, np.int64) & 0xFFFF
      out = (((x * y) << 16) + (np.asarray(c, np.int64) & M32) & M32).astype(np.uint32)
    elif name.startswith("mad.f"):
      x, y, z = (f32(a), f32(b), f32(c)) if full else (f16(a), f16(b), f16(c))
      if n1: x = -x
      if n2: y = -y
      if n3: z = -z
      with np.errstate(all="ignore"): out = (x * y) + z
      out = b32(out) if full else b16(out)
    elif name.startswith("mad."):
      signed = name[4] == "s"
      bits = 24 if name.endswith("24") else 16
      x = sext(a & ((1 << bits) - 1), bits) if signed else (np.asarray(a, np.int64) & ((1 << bits) - 1))
      y = sext(b & ((1 << bits) - 1), bits) if signed else (np.asarray(b, np.int64) & ((1 << bits) - 1))
      z = sext(c, w) if signed else np.asarray(c, np.int64) & mask
      if n1: x = -x
      if n3: z = -z
      out = ((x * y + z) & mask).astype(np.uint32)
    else:                                           # sel.b16/b32: src2 != 0 ? src1 : src3
      cond = (np.asarray(b, np.uint32) & mask) != 0
      if n2: cond = ~cond
      out = np.where(cond, np.broadcast_to(a, (F.n,)), np.broadcast_to(c, (F.n,))).astype(np.uint32)
    F.write(dst + i, out, dst_half)
  return run


# cat4
CAT4 = {"rcp": lambda x: 1 / x, "rsq": lambda x: 1 / np.sqrt(x), "log2": np.log2, "exp2": np.exp2, "sin": np.sin,
        "cos": np.cos, "sqrt": np.sqrt, "hrsq": lambda x: 1 / np.sqrt(x), "hlog2": np.log2, "hexp2": np.exp2}


def _cat4(d):
  f, fn = d.fields, CAT4[d.name]
  full = bool(f.get("FULL", 1)) and not d.name.startswith("h")
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  src = src_reader(f["SRC"], not full, d.ctx, float_op=True)
  mod, rr = f["SRC"].fields.get("ABSNEG", 0), f.get("SRC_R", 0)
  def run(F, D, i):
    x = absneg(src(F, i * rr), mod, "f", not full)
    with np.errstate(all="ignore"):
      v = fn(f32(x).astype(np.float64) if full else f16(x).astype(np.float64))
    F.write(dst + i, b16(v.astype(np.float16)) if dst_half else b32(v.astype(np.float32)), dst_half)
  return run
