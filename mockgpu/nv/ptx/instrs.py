"""Instruction -> closure f(S, m) (m: the executing threads' mask, None for all of the batch), one builder per opcode.

Control flow (bra, ret, exit, bar.sync) is not here: the executor handles it between basic blocks."""
from __future__ import annotations

import numpy as np

from . import directed, semantics as sem
from .memspace import LOCAL_WINDOW, SHARED_WINDOW
from .model import DTYPES, TYPE_BYTES, Operand
from .operands import Ctx, address, address_register, rd, wr

FLOAT_T = {"f16", "f32", "f64", "bf16", "f16x2", "bf16x2"}
ROUND = {"rn", "rz", "rm", "rp"}
IROUND = {"rni", "rzi", "rmi", "rpi"}
SPACES = ("global", "shared", "local", "param", "const")
_IGNORED_MODS = {"volatile", "relaxed", "acquire", "release", "acq_rel", "weak", "sys", "gpu", "cta", "cluster",
                 "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "sync", "aligned", "noftz", "mmio"}
BUILDERS: dict = {}


def builder(*names):
  def deco(fn):
    for n in names: BUILDERS[n] = fn
    return fn
  return deco


def _type(ctx: Ctx, ins, k: int = -1) -> str:
  ts = ins.types
  if not ts: raise ctx.error(f"{ins.op} without a type")
  return ts[k]


def _ops(ins, n: int, ctx: Ctx):
  if len(ins.operands) != n: raise ctx.error(f"{ins.op} takes {n} operands, got {len(ins.operands)}")
  return ins.operands


def _directed(ins, t):
  """The directed rounding mode (.rz/.rm/.rp) of an f32/f64 add, sub, mul, fma, mad, div, rcp or sqrt, else None
  (directed.py computes those)."""
  if t not in ("f32", "f64"): return None
  return next((m for m in ins.mods if m in directed.MODES), None)


def _float_wrap(ctx, ins, t, fn, directed_ok: bool = False):
  """Applies .ftz (f32: subnormal inputs and results flushed to zero) and .sat (results clamped to [0, 1], NaN -> 0);
  a directed rounding mode is refused unless fn computes it (directed_ok)."""
  mods = set(ins.mods)
  bad = mods & {"rz", "rm", "rp"}
  if bad and not directed_ok:            # (f16/bf16 arithmetic has .rn only: 9.7.4.1-4)
    raise ctx.error(f"rounding .{bad.pop()} of {ins.op}.{t} is not supported by the mock")
  ftz = "ftz" in mods and t == "f32"
  sat = "sat" in mods
  if not ftz and not sat: return fn

  def g(*xs):
    if ftz: xs = [sem.ftz32(x) for x in xs]
    r = fn(*xs)
    if ftz: r = sem.ftz32(r)
    if sat: r = sem.sat01(r)
    return r
  return g


def _halves(fn, lanes_t="f16"):
  """A packed f16x2 / bf16x2 operation: fn on each 16-bit half."""
  def g(*xs):
    outs = []
    for sh in (0, 16):
      parts = [(np.asarray(x).astype(np.uint32) >> np.uint32(sh)).astype(np.uint16) for x in xs]
      if lanes_t == "f16": r = fn(*[p.view(np.float16) for p in parts]).astype(np.float16).view(np.uint16)
      else: r = sem.f32_to_bf16(fn(*[sem.bf16_to_f32(p) for p in parts]))
      outs.append(np.asarray(r).astype(np.uint32) << np.uint32(sh))
    return outs[0] | outs[1]
  return g


def _halves_bits(fn):
  """A packed bf16x2 operation whose fn takes f32 values and returns bf16 bits, on each 16-bit half."""
  def g(*xs):
    outs = []
    for sh in (0, 16):
      parts = [sem.bf16_to_f32((np.asarray(x).astype(np.uint32) >> np.uint32(sh)).astype(np.uint16)) for x in xs]
      outs.append(np.asarray(fn(*parts)).astype(np.uint32) << np.uint32(sh))
    return outs[0] | outs[1]
  return g


def _rt_fma_odd(a, b, c):
  from ... import floats
  return floats._fma_round_to_odd(a, b, c)


def _bf16(fn):
  def g(*xs): return sem.f32_to_bf16(fn(*[sem.bf16_to_f32(x) for x in xs]))
  return g


def _nary(ctx, ins, fn, t, nsrc):
  ops = _ops(ins, nsrc + 1, ctx)
  d = wr(ctx, ops[0], t)
  srcs = [rd(ctx, o, t) for o in ops[1:]]
  if nsrc == 1:
    a = srcs[0]
    return lambda S, m: d(S, fn(a(S)), m)
  if nsrc == 2:
    a, b = srcs
    return lambda S, m: d(S, fn(a(S), b(S)), m)
  a, b, c = srcs
  return lambda S, m: d(S, fn(a(S), b(S), c(S)), m)


def _float_fn(ctx, ins, t, f64fn, nsrc):
  """A float operation given as a function of float64 values (exact there for add/sub/mul of f16 and bf16)."""
  if t in ("f32", "f64"): fn = f64fn
  elif t == "f16": fn = lambda *xs: sem.via64(f64fn, np.float16, *xs)
  elif t == "bf16": fn = _bf16(lambda *xs: sem.via64(f64fn, np.float32, *xs))
  elif t == "f16x2": fn = _halves(lambda *xs: sem.via64(f64fn, np.float16, *xs))
  elif t == "bf16x2": fn = _halves(lambda *xs: sem.via64(f64fn, np.float32, *xs), "bf16")
  else: raise ctx.error(f"{ins.op}.{t} is not supported")
  return _nary(ctx, ins, _float_wrap(ctx, ins, t, fn), t, nsrc)


# ---------------------------------------------------------------------------------------------- arithmetic
CC = "%%cc"   # the carry flag CC.CF: a hidden per-thread register (so masks and compaction treat it as any other)


def _add3(x, y, cin):
  """x + y + cin (unsigned, wrapping) and its carry-out."""
  s1 = x + y
  c1 = s1 < x
  s2 = s1 + cin
  return s2, c1 | (s2 < s1)


def _sub_borrow(x, y, bin_):
  """x - y - bin (unsigned, wrapping) and its borrow-out (PTX's CC.CF in subtraction chains)."""
  d = x - y - bin_
  return d, (x < y) | ((x == y) & (bin_ != 0))


@builder("addc", "subc", "madc")
def _carry_chain(ctx, ins):
  """add.cc/addc/sub.cc/subc/mad{.lo,.hi}.cc/madc ("Extended-Precision Integer Arithmetic Instructions"): CC.CF is a
  carry for additions and a borrow for subtractions (subc: d = a - (b + CF))."""
  t = _type(ctx, ins)
  U = sem.UNSIGNED[TYPE_BYTES[t]]
  op = ins.op.rstrip("c") if ins.op != "madc" else "mad"
  cin = ins.op in ("addc", "subc", "madc")
  cout = "cc" in ins.mods
  ops = ins.operands
  d = wr(ctx, ops[0], t)
  srcs = [rd(ctx, o, t) for o in ops[1:]]
  rcc = rd(ctx, Operand("reg", name=CC), "u32") if cin else None
  wcc = wr(ctx, Operand("reg", name=CC), "u32") if cout else None
  hi = "hi" in ins.mods

  def f(S, m):
    xs = [np.asarray(sem.cast_bits(np.asarray(r(S)), U)) for r in srcs]
    c = np.asarray(rcc(S)).astype(U) if cin else U(0)
    if op == "sub": r, flag = _sub_borrow(xs[0], xs[1], c)
    else:
      x = (sem.mulhi(xs[0], xs[1]) if hi else xs[0] * xs[1]) if op == "mad" else xs[0]
      r, flag = _add3(x, xs[-1] if op == "mad" else xs[1], c)
    d(S, sem.cast_bits(r, DTYPES[t]), m)
    if wcc is not None: wcc(S, np.asarray(flag).astype(np.uint32), m)
  return f


@builder("add", "sub")
def _addsub(ctx, ins):
  t = _type(ctx, ins)
  if "cc" in ins.mods: return _carry_chain(ctx, ins)
  neg = ins.op == "sub"
  mode = _directed(ins, t)
  if mode:
    dt = DTYPES[t]
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b: directed.add(a, b, dt, mode, neg), True), t, 2)
  if t in ("u16x2", "s16x2"):   # 9.7.1.1/2: each 16-bit half, wrapping
    return _nary(ctx, ins, _int_halves((lambda a, b: a - b) if neg else (lambda a, b: a + b), t), "b32", 2)
  if t in FLOAT_T: return _float_fn(ctx, ins, t, (lambda a, b: a - b) if neg else (lambda a, b: a + b), 2)
  if "sat" in ins.mods:
    return _nary(ctx, ins, lambda a, b: sem.sat_s32(a.astype(np.int64) - b if neg else a.astype(np.int64) + b), t, 2)
  return _nary(ctx, ins, (lambda a, b: a - b) if neg else (lambda a, b: a + b), t, 2)


@builder("mul")
def _mul(ctx, ins):
  t = _type(ctx, ins)
  mode = _directed(ins, t)
  if mode:
    dt = DTYPES[t]
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b: directed.mul(a, b, dt, mode), True), t, 2)
  if t in FLOAT_T: return _float_fn(ctx, ins, t, lambda a, b: a * b, 2)
  mods = set(ins.mods)
  if "wide" in mods:
    wt = t[0] + str(int(t[1:]) * 2)
    d, a, b = _ops(ins, 3, ctx)
    dw, ra, rb = wr(ctx, d, wt), rd(ctx, a, t), rd(ctx, b, t)
    return lambda S, m: dw(S, sem.mulwide(ra(S), rb(S)), m)
  if "hi" in mods: return _nary(ctx, ins, sem.mulhi, t, 2)
  return _nary(ctx, ins, lambda a, b: a * b, t, 2)


@builder("mul24", "mad24")
def _mul24(ctx, ins):
  t = _type(ctx, ins)
  hi = "hi" in ins.mods
  def f24(a, b):
    a64, b64 = (np.asarray(x).astype(np.int64) for x in (a, b))
    if t[0] == "s": a64, b64 = ((x << 40) >> 40 for x in (a64, b64))
    else: a64, b64 = a64 & 0xFFFFFF, b64 & 0xFFFFFF
    p = a64 * b64
    return ((p >> 16) if hi else p).astype(np.uint64).astype(np.uint32).view(DTYPES[t])
  if ins.op == "mul24": return _nary(ctx, ins, f24, t, 2)
  return _nary(ctx, ins, lambda a, b, c: f24(a, b) + c, t, 3)


@builder("mad", "fma")
def _mad(ctx, ins):
  t = _type(ctx, ins)
  mods = set(ins.mods)
  mode = _directed(ins, t)
  if mode:
    dt = DTYPES[t]
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b, c: directed.fma(a, b, c, dt, mode), True), t, 3)
  if t in FLOAT_T:
    if "relu" in mods and t in ("f32", "f64"): raise ctx.error(f"{ins.op}.relu.{t} is not a PTX form")
    if t in ("f32", "f64") or (t == "f16" and "relu" not in mods):
      dt = DTYPES[t]
      return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b, c: sem.fma(a, b, c, dt)), t, 3)
    relu = "relu" in mods    # fma.relu (9.7.4.4): a negative result is +0, a NaN the canonical NaN
    bf = lambda a, b, c: sem.f64_to_bf16(_rt_fma_odd(a, b, c))   # one rounding: through an f64 rounded to odd
    if t in ("f16", "f16x2"):
      g = lambda a, b, c: sem.fma(a, b, c, np.float16)
      if relu: g = lambda a, b, c, g=g: sem.relu16(np.asarray(g(a, b, c), np.float16).view(np.uint16), "f16").view(np.float16)
      if t == "f16" and relu: return _nary(ctx, ins, g, t, 3)
      if t == "f16x2": return _nary(ctx, ins, _halves(g), t, 3)
    if t in ("bf16", "bf16x2"):
      h = (lambda a, b, c: sem.relu16(bf(a, b, c), "bf16")) if relu else bf
      if t == "bf16": return _nary(ctx, ins, lambda a, b, c: h(sem.bf16_to_f32(a), sem.bf16_to_f32(b), sem.bf16_to_f32(c)), t, 3)
      return _nary(ctx, ins, _halves_bits(h), t, 3)
    raise ctx.error(f"{ins.op}.{t} is not supported")
  if "cc" in mods: return _carry_chain(ctx, ins)
  if "wide" in mods:
    wt = t[0] + str(int(t[1:]) * 2)
    d, a, b, c = _ops(ins, 4, ctx)
    dw, ra, rb, rc = wr(ctx, d, wt), rd(ctx, a, t), rd(ctx, b, t), rd(ctx, c, wt)
    return lambda S, m: dw(S, sem.mulwide(ra(S), rb(S)) + rc(S), m)
  if "hi" in mods:
    if "sat" in mods: return _nary(ctx, ins, lambda a, b, c: sem.sat_s32(sem.mulhi(a, b).astype(np.int64) + c), t, 3)
    return _nary(ctx, ins, lambda a, b, c: sem.mulhi(a, b) + c, t, 3)
  return _nary(ctx, ins, lambda a, b, c: a * b + c, t, 3)


@builder("div")
def _div(ctx, ins):
  t = _type(ctx, ins)
  if t == "f32" and "approx" in ins.mods:      # a * (1/b), within 2 ulp (semantics.div_approx32)
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, sem.div_approx32), t, 2)
  if t == "f32" and "full" in ins.mods:        # IEEE division within 2 ulp
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b: sem.within_bound(
      "div", np.asarray(a, np.float32).astype(np.float64) / np.asarray(b, np.float32).astype(np.float64),
      np.asarray(a, np.float32).view(np.uint32) ^ np.asarray(b, np.float32).view(np.uint32))), t, 2)
  mode = _directed(ins, t)
  if mode:
    dt = DTYPES[t]
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda a, b: directed.div(a, b, dt, mode), True), t, 2)
  if t in FLOAT_T: return _float_fn(ctx, ins, t, lambda a, b: a / b, 2)   # .rn (and f64): exact
  return _nary(ctx, ins, sem.idiv, t, 2)


@builder("rem")
def _rem(ctx, ins): return _nary(ctx, ins, sem.irem, _type(ctx, ins), 2)


@builder("abs", "neg")
def _absneg(ctx, ins):
  t = _type(ctx, ins)
  if t in ("f16", "bf16", "f16x2", "bf16x2"):   # sign-bit operations on the bits
    k = TYPE_BYTES[t]
    sign = np.array(0x80008000 if k == 4 else 0x8000, DTYPES["b32" if k == 4 else "b16"])[()]
    raw = "b32" if k == 4 else "b16"
    ops = _ops(ins, 2, ctx)
    d, a = wr(ctx, ops[0], raw), rd(ctx, ops[1], raw)
    if ins.op == "neg": return lambda S, m: d(S, a(S) ^ sign, m)
    return lambda S, m: d(S, a(S) & ~sign, m)
  fn = np.abs if ins.op == "abs" else np.negative
  if t in FLOAT_T: return _nary(ctx, ins, _float_wrap(ctx, ins, t, fn), t, 1)
  return _nary(ctx, ins, fn, t, 1)


def _int_halves(fn, t: str, relu: bool = False):
  """fn on the two 16-bit halves of .u16x2/.s16x2 operands (signed for s16x2), each result wrapped to 16 bits;
  relu: negative halves become 0 (min/max.relu.s16x2)."""
  dt = np.int16 if t == "s16x2" else np.uint16
  def g(a, b):
    out = np.uint32(0)
    for sh in (0, 16):
      x, y = ((np.asarray(v).astype(np.uint32) >> np.uint32(sh)).astype(np.uint16).view(dt).astype(np.int64) for v in (a, b))
      r = fn(x, y)
      if relu: r = np.maximum(r, 0)
      out = out | ((np.asarray(r).astype(np.int64) & 0xFFFF).astype(np.uint32) << np.uint32(sh))
    return out
  return g


@builder("min", "max")
def _minmax(ctx, ins):
  t = _type(ctx, ins)
  nan = "NaN" in ins.mods
  if t in ("u16x2", "s16x2"):   # 9.7.1.12/13: per half; .relu (s16x2) clamps each at 0
    return _nary(ctx, ins, _int_halves(np.minimum if ins.op == "min" else np.maximum, t, "relu" in ins.mods), "b32", 2)
  if "relu" in ins.mods:
    if t != "s32": raise ctx.error(f"{ins.op}.relu.{t} is not supported by the mock")
    f = np.minimum if ins.op == "min" else np.maximum
    return _nary(ctx, ins, lambda a, b: np.maximum(f(a, b), np.int32(0)), t, 2)
  if t in FLOAT_T:
    if ("xorsign" in ins.mods) != ("abs" in ins.mods):   # 9.7.3.11: ".xorsign requires .abs"; .abs alone has 3 inputs
      raise ctx.error(f"{ins.op}.{'.'.join(ins.mods)} is not supported by the mock (only .xorsign.abs)")
    g = (lambda a, b: sem.fmin(a, b, nan)) if ins.op == "min" else (lambda a, b: sem.fmax(a, b, nan))
    f = (lambda a, b: sem.xorsign_abs(g, a, b)) if "xorsign" in ins.mods else g
    if t == "f16x2": return _nary(ctx, ins, _halves(f), t, 2)
    if t == "bf16x2": return _nary(ctx, ins, _halves(f, "bf16"), t, 2)
    if t == "bf16": return _nary(ctx, ins, _bf16(f), t, 2)
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, f), t, 2)
  return _nary(ctx, ins, np.minimum if ins.op == "min" else np.maximum, t, 2)


@builder("and", "or", "xor")
def _logic(ctx, ins):
  t = _type(ctx, ins)
  fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.op]
  return _nary(ctx, ins, fn, t, 2)


@builder("not")
def _not(ctx, ins): return _nary(ctx, ins, np.invert, _type(ctx, ins), 1)


@builder("cnot")
def _cnot(ctx, ins):
  t = _type(ctx, ins)
  return _nary(ctx, ins, lambda a: (a == 0).astype(DTYPES[t]), t, 1)


@builder("shl", "shr")
def _shift(ctx, ins):
  t = _type(ctx, ins)
  d, a, b = _ops(ins, 3, ctx)
  dw, ra, rb = wr(ctx, d, t), rd(ctx, a, t), rd(ctx, b, "u32")
  fn = sem.shl if ins.op == "shl" else sem.shr
  return lambda S, m: dw(S, fn(ra(S), rb(S)), m)


@builder("shf")
def _shf(ctx, ins):
  """shf.{l,r}.{wrap,clamp}.b32 d, a, b, c: funnel shift of the 64-bit {b:a}."""
  d, a, b, c = _ops(ins, 4, ctx)
  dw, ra, rb, rc = wr(ctx, d, "b32"), rd(ctx, a, "b32"), rd(ctx, b, "b32"), rd(ctx, c, "u32")
  left, wrap = "l" in ins.mods, "wrap" in ins.mods

  def f(S, m):
    x = (np.asarray(rb(S)).astype(np.uint64) << np.uint64(32)) | np.asarray(ra(S)).astype(np.uint64)
    n = np.asarray(rc(S)).astype(np.uint64)
    n = n & np.uint64(31) if wrap else np.minimum(n, np.uint64(32))
    r = (x << n) >> np.uint64(32) if left else x >> n
    dw(S, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), m)
  return f


@builder("popc", "clz", "brev", "bfind")
def _bits(ctx, ins):
  t = _type(ctx, ins)
  d, a = _ops(ins, 2, ctx)
  ra = rd(ctx, a, t)
  if ins.op == "brev":
    dw = wr(ctx, d, t)
    return lambda S, m: dw(S, sem.brev(ra(S)), m)
  dw = wr(ctx, d, "u32")
  fn = {"popc": sem.popc, "clz": sem.clz}.get(ins.op) or (lambda x: sem.bfind(x, "shiftamt" in ins.mods))
  return lambda S, m: dw(S, fn(ra(S)), m)


@builder("bfe")
def _bfe(ctx, ins):
  t = _type(ctx, ins)
  d, a, b, c = _ops(ins, 4, ctx)
  dw, ra, rb, rc = wr(ctx, d, t), rd(ctx, a, t), rd(ctx, b, "u32"), rd(ctx, c, "u32")
  return lambda S, m: dw(S, sem.bfe(ra(S), rb(S), rc(S)), m)


@builder("bfi")
def _bfi(ctx, ins):
  t = _type(ctx, ins)
  d, a, b, c, e = _ops(ins, 5, ctx)
  dw, ra, rb, rc, re = wr(ctx, d, t), rd(ctx, a, t), rd(ctx, b, t), rd(ctx, c, "u32"), rd(ctx, e, "u32")
  return lambda S, m: dw(S, sem.bfi(ra(S), rb(S), rc(S), re(S)), m)


@builder("prmt")
def _prmt(ctx, ins):
  mode = next((x for x in ins.mods if x in sem.PRMT_MODES), None)
  if mode is None: return _nary(ctx, ins, sem.prmt, "b32", 3)
  return _nary(ctx, ins, lambda a, b, c: sem.prmt_mode(mode, a, b, c), "b32", 3)


@builder("sad")
def _sad(ctx, ins):
  t = _type(ctx, ins)
  if t not in ("u16", "u32", "u64", "s16", "s32", "s64"): raise ctx.error(f"sad.{t} is not a PTX form")
  dt = DTYPES[t]
  return _nary(ctx, ins, lambda a, b, c: sem.sad(a, b, c, dt), t, 3)


@builder("bmsk")
def _bmsk(ctx, ins):
  mode = "wrap" if "wrap" in ins.mods else "clamp"
  return _nary(ctx, ins, lambda a, b: sem.bmsk(a, b, mode), "u32", 2)


@builder("szext")
def _szext(ctx, ins):
  t = _type(ctx, ins)
  if t not in ("u32", "s32"): raise ctx.error(f"szext.{t} is not a PTX form")
  mode, signed = "wrap" if "wrap" in ins.mods else "clamp", t == "s32"
  return _nary(ctx, ins, lambda a, b: sem.szext(a, b, mode, signed), "u32", 2)


@builder("fns")
def _fns(ctx, ins):
  d, a, b, c = _ops(ins, 4, ctx)
  dw, ra, rb, rc = wr(ctx, d, "b32"), rd(ctx, a, "b32"), rd(ctx, b, "u32"), rd(ctx, c, "s32")
  return lambda S, m: dw(S, sem.fns(ra(S), rb(S), rc(S)), m)


@builder("dp4a", "dp2a")
def _dp(ctx, ins):
  ts = ins.types
  if len(ts) != 2 or any(t not in ("u32", "s32") for t in ts): raise ctx.error(f"{ins.op} needs .atype.btype of .u32/.s32")
  sa, sb = ts[0] == "s32", ts[1] == "s32"
  ct = "s32" if sa or sb else "u32"
  d, a, b, c = _ops(ins, 4, ctx)
  dw, ra, rb, rc = wr(ctx, d, ct), rd(ctx, a, ts[0]), rd(ctx, b, ts[1]), rd(ctx, c, ct)
  if ins.op == "dp4a": fn = lambda x, y, z: sem.dp4a(x, y, z, sa, sb)
  else:
    hi = "hi" in ins.mods
    fn = lambda x, y, z: sem.dp2a(x, y, z, sa, sb, hi)
  return lambda S, m: dw(S, fn(ra(S), rb(S), rc(S)).view(np.int32) if ct == "s32" else fn(ra(S), rb(S), rc(S)), m)


@builder("lop3")
def _lop3(ctx, ins):
  """lop3.b32 d, a, b, c, immLut (9.7.8.6); the .BoolOp form with a predicate output is not modelled."""
  if len(ins.operands) != 5 or ins.operands[4].kind != "imm":
    raise ctx.error("lop3 is supported as lop3.b32 d, a, b, c, immLut (an immediate) only")
  lut = int(ins.operands[4].value) & 0xFF
  d, a, b, c = ins.operands[:4]
  dw, ra, rb, rc = wr(ctx, d, "b32"), rd(ctx, a, "b32"), rd(ctx, b, "b32"), rd(ctx, c, "b32")
  return lambda S, m: dw(S, sem.lop3(ra(S), rb(S), rc(S), lut), m)


@builder("copysign")
def _copysign(ctx, ins):
  t = _type(ctx, ins)
  return _nary(ctx, ins, lambda a, b: np.copysign(b, a), t, 2)   # copysign d, a, b: |b| with a's sign


# ---------------------------------------------------------------------------------------------- float math
_APPROX = {
  "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "rcp": lambda x: 1.0 / x, "ex2": np.exp2, "lg2": np.log2,
  "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
}


@builder("sqrt", "rsqrt", "rcp", "ex2", "lg2", "sin", "cos", "tanh")
def _math(ctx, ins):
  t = _type(ctx, ins)
  fn = _APPROX[ins.op]
  mode = _directed(ins, t) if ins.op in ("sqrt", "rcp") else None
  if mode:
    dt, g = DTYPES[t], directed.sqrt if ins.op == "sqrt" else directed.rcp
    return _nary(ctx, ins, _float_wrap(ctx, ins, t, lambda x: g(x, dt, mode), True), t, 1)
  if ins.op in ("sqrt", "rcp") and t in ("f32", "f64") and "approx" not in ins.mods:
    f = fn   # IEEE .rn: numpy's f32/f64 sqrt and division are correctly rounded
  elif t == "f32" and ins.op in sem.APPROX_BOUNDS:   # the ISA's .approx.f32 bound, deterministically used
    op = ins.op
    f = lambda x: sem.within_bound(op, sem.approx(fn, x, np.float64), x)
  else:
    dt = DTYPES[t] if t != "f16x2" else np.float16
    f = lambda x: sem.approx(fn, x, dt)
  if t == "f16x2": return _nary(ctx, ins, _halves(f), t, 1)
  if t == "bf16": return _nary(ctx, ins, _bf16(lambda x: sem.approx(fn, x, np.float32)), t, 1)
  return _nary(ctx, ins, _float_wrap(ctx, ins, t, f), t, 1)


@builder("testp")
def _testp(ctx, ins):
  t = _type(ctx, ins)
  d, a = _ops(ins, 2, ctx)
  dw, ra = wr(ctx, d, "pred"), rd(ctx, a, t)
  kind = next(m for m in ins.mods if m in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"))
  def test(x):
    x = np.asarray(x)
    if kind == "finite": return np.isfinite(x)
    if kind == "infinite": return np.isinf(x)
    if kind == "number": return ~np.isnan(x)
    if kind == "notanumber": return np.isnan(x)
    tiny = np.finfo(x.dtype).tiny
    # 9.7.3.1 testp: "As a special case, positive and negative zero are considered normal numbers."
    if kind == "normal": return np.isfinite(x) & ((np.abs(x) >= tiny) | (x == 0))
    return (np.abs(x) < tiny) & (x != 0)
  return lambda S, m: dw(S, test(ra(S)), m)


# ---------------------------------------------------------------------------------------------- compare/select
def compare(cmp: str, a, b, is_float: bool):
  if is_float:
    with np.errstate(invalid="ignore"):
      nan = np.isnan(a) | np.isnan(b)
      base = {"eq": lambda: a == b, "ne": lambda: (a != b) & ~nan, "lt": lambda: a < b, "le": lambda: a <= b,
              "gt": lambda: a > b, "ge": lambda: a >= b, "equ": lambda: (a == b) | nan, "neu": lambda: a != b,
              "ltu": lambda: ~(a >= b), "leu": lambda: ~(a > b), "gtu": lambda: ~(a <= b), "geu": lambda: ~(a < b),
              "num": lambda: ~nan, "nan": lambda: nan}
      return base[cmp]()
  return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
          "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}[cmp](a, b)


_CMPS = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
         "num", "nan"}
_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _cmp_reader(ctx, ins, t, a, b):
  cmp = next((m for m in ins.mods if m in _CMPS), None)
  if cmp is None: raise ctx.error(f"{ins.op} without a comparison")
  ra, rb = rd(ctx, a, t), rd(ctx, b, t)
  if t in ("bf16",):
    return lambda S: compare(cmp, sem.bf16_to_f32(ra(S)), sem.bf16_to_f32(rb(S)), True)
  isf = t in FLOAT_T
  return lambda S: compare(cmp, ra(S), rb(S), isf)


@builder("setp")
def _setp(ctx, ins):
  t = _type(ctx, ins)
  ops = ins.operands
  cr = _cmp_reader(ctx, ins, t, ops[1], ops[2])
  bop = next((m for m in ins.mods if m in _BOOL), None)
  c = rd(ctx, ops[3], "pred") if bop else None
  dst = ops[0].items if ops[0].kind == "pair" else [ops[0]]
  p = wr(ctx, dst[0], "pred")
  q = wr(ctx, dst[1], "pred") if len(dst) > 1 else None
  bfn = _BOOL.get(bop)

  def f(S, m):
    r = cr(S)
    if bfn is not None:
      cv = c(S)
      p(S, bfn(r, cv), m)
      if q: q(S, bfn(~r, cv), m)
    else:
      p(S, r, m)
      if q: q(S, ~r, m)
  return f


@builder("set")
def _set(ctx, ins):
  dt_, st = ins.types[0], ins.types[1]
  ops = ins.operands
  cr = _cmp_reader(ctx, ins, st, ops[1], ops[2])
  bop = next((m for m in ins.mods if m in _BOOL), None)
  c = rd(ctx, ops[3], "pred") if bop else None
  d = wr(ctx, ops[0], dt_)
  one = np.float32(1.0) if dt_ == "f32" else np.array(-1).astype(DTYPES[dt_])[()]
  zero = DTYPES[dt_](0)
  bfn = _BOOL.get(bop)

  def f(S, m):
    r = cr(S)
    if bfn is not None: r = bfn(r, c(S))
    d(S, np.where(r, one, zero), m)
  return f


@builder("selp")
def _selp(ctx, ins):
  t = _type(ctx, ins)
  dd, a, b, c = _ops(ins, 4, ctx)
  d, ra, rb, rc = wr(ctx, dd, t), rd(ctx, a, t), rd(ctx, b, t), rd(ctx, c, "pred")
  return lambda S, m: d(S, np.where(rc(S), ra(S), rb(S)), m)


@builder("slct")
def _slct(ctx, ins):
  t, ct = ins.types[0], ins.types[1]
  dd, a, b, c = _ops(ins, 4, ctx)
  d, ra, rb, rc = wr(ctx, dd, t), rd(ctx, a, t), rd(ctx, b, t), rd(ctx, c, ct)
  ftz = "ftz" in ins.mods
  return lambda S, m: d(S, np.where((sem.ftz32(rc(S)) if ftz and ct == "f32" else rc(S)) >= 0, ra(S), rb(S)), m)


# ---------------------------------------------------------------------------------------------- moves/conversions
@builder("mov")
def _mov(ctx, ins):
  t = _type(ctx, ins)
  d, a = _ops(ins, 2, ctx)
  k = TYPE_BYTES[t]
  if d.kind == "vec":   # unpack: mov.b64 {lo, hi}, x
    n = len(d.items)
    pt = f"b{8 * k // n}"
    ra = rd(ctx, a, t)
    ws = [wr(ctx, o, pt) for o in d.items]
    bits = np.uint64(8 * k // n)
    def unpack(S, m):
      x = np.asarray(ra(S)).astype(np.uint64)
      for j, w in enumerate(ws):
        w(S, sem.cast_bits((x >> (bits * np.uint64(j))), DTYPES[pt]), m)
    return unpack
  if a.kind == "vec":   # pack: mov.b64 x, {lo, hi}
    n = len(a.items)
    pt = f"b{8 * k // n}"
    rs = [rd(ctx, o, pt) for o in a.items]
    dw = wr(ctx, d, t)
    bits = np.uint64(8 * k // n)
    def pack(S, m):
      x = np.uint64(0)
      for j, r in enumerate(rs): x = x | (np.asarray(r(S)).astype(np.uint64) << (bits * np.uint64(j)))
      dw(S, sem.cast_bits(x, DTYPES[t]), m)
    return pack
  dw, ra = wr(ctx, d, t), rd(ctx, a, t)
  return lambda S, m: dw(S, ra(S), m)


@builder("cvta")
def _cvta(ctx, ins):
  t = _type(ctx, ins)
  d, a = _ops(ins, 2, ctx)
  to = "to" in ins.mods
  space = next((m for m in ins.mods if m in SPACES), "global")
  base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
  dw, ra = wr(ctx, d, t), rd(ctx, a, t)
  if base == 0: return lambda S, m: dw(S, ra(S), m)
  b = np.array(base, DTYPES[t])[()] if t.endswith("64") else None
  if to:
    if b is None: return lambda S, m: dw(S, ra(S), m)   # .u32: the low bits are the window offset
    return lambda S, m: dw(S, ra(S) - b, m)
  if b is None: raise ctx.error("cvta to a 32-bit generic address")
  return lambda S, m: dw(S, ra(S) + b, m)


@builder("cvt")
def _cvt(ctx, ins):
  ts = ins.types
  if len(ts) != 2:
    if ts[:1] == ["tf32"] and ts[1:] == ["f32"]: pass
    else: raise ctx.error("cvt needs a destination and a source type")
  dt_, st = ts
  mods = set(ins.mods)
  if dt_ in ("f16x2", "bf16x2") and st == "f32":   # cvt.frnd2{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b:
    d, a, b = _ops(ins, 3, ctx)                      # a into the upper half, b into the lower (9.7.9.21)
    half = "f16" if dt_ == "f16x2" else "bf16"
    one = _to_half(ctx, ins, half)
    dw, ra, rb = wr(ctx, d, "b32"), rd(ctx, a, "f32"), rd(ctx, b, "f32")
    return lambda S, m: dw(S, (one(ra(S)).astype(np.uint32) << np.uint32(16)) | one(rb(S)).astype(np.uint32), m)
  if dt_ == "tf32":
    if "rna" not in mods: raise ctx.error(f"cvt.{'.'.join(ins.mods)}.tf32.f32 is not supported by the mock (only .rna)")
    if "satfinite" in mods: raise ctx.error("cvt.rna.satfinite.tf32.f32 is not supported by the mock")
    d, a = _ops(ins, 2, ctx)
    dw, ra = wr(ctx, d, "b32"), rd(ctx, a, "f32")
    return lambda S, m: dw(S, sem.tf32_rna(ra(S)), m)
  if dt_ in ("f16", "bf16") and st == "f32" and mods & {"relu", "satfinite"}:
    d, a = _ops(ins, 2, ctx)
    one = _to_half(ctx, ins, dt_)
    dw, ra = wr(ctx, d, "b16"), rd(ctx, a, "f32")
    return lambda S, m: dw(S, one(ra(S)), m)
  if mods & {"relu", "satfinite"}:
    raise ctx.error(f"cvt.{'.'.join(ins.mods)}.{dt_}.{st} is not supported by the mock")
  d, a = _ops(ins, 2, ctx)
  dw, ra = wr(ctx, d, dt_), rd(ctx, a, st)
  fn = conversion(ctx, ins, dt_, st)
  return lambda S, m: dw(S, fn(ra(S)), m)


def _to_half(ctx, ins, half: str):
  """f32 -> f16/bf16 bits with the instruction's .rn/.rz, then .satfinite and .relu (9.7.9.21: .satfinite limits
  |x| to the largest finite value, a NaN staying NaN; .relu clamps negatives to 0, a NaN becoming canonical)."""
  mods = set(ins.mods)
  rnd = "rz" if "rz" in mods else "rn"
  if mods & {"rm", "rp", "rna"}: raise ctx.error(f"cvt.{'.'.join(ins.mods)} to .{half} is not supported by the mock")
  relu, satf = "relu" in mods, "satfinite" in mods

  def one(x):
    x = np.asarray(x, np.float32)
    if half == "f16":
      bits = sem.round_float(x.astype(np.float64), np.float16, rnd).view(np.uint16)
    else: bits = sem.f32_to_bf16(x, rnd)
    if satf: bits = sem.satfinite16(x, bits, half)
    if relu: bits = sem.relu16(bits, half)
    return np.asarray(bits).astype(np.uint16)
  return one


def conversion(ctx, ins, dt_: str, st: str):
  mods = set(ins.mods)
  rnd = next((m for m in ins.mods if m in ROUND | IROUND), "")
  sat, ftz = "sat" in mods, "ftz" in mods
  D, Sd = DTYPES[dt_], DTYPES[st]
  dfl, sfl = dt_ in FLOAT_T, st in FLOAT_T
  pre = (lambda x: sem.bf16_to_f32(x)) if st == "bf16" else (sem.ftz32 if ftz and st == "f32" else (lambda x: x))
  if dfl and dt_ not in ("f16", "f32", "f64", "bf16"): raise ctx.error(f"cvt to .{dt_} is not supported")
  if dt_ == "bf16":
    mode = "rz" if rnd == "rz" else "rn"
    if sfl: return lambda x: sem.f32_to_bf16(sem.round_float(np.asarray(pre(x)).astype(np.float64), np.float32, "rn"), mode)
    return lambda x: sem.f32_to_bf16(np.asarray(x).astype(np.float32), mode)
  if dfl and sfl:
    def ff(x):
      x = np.asarray(pre(x))
      if rnd in IROUND: r = sem._RINT[rnd](x).astype(D)
      elif np.dtype(D).itemsize < x.dtype.itemsize: r = sem.round_float(x, D, rnd or "rn")
      else: r = x.astype(D)
      if ftz and dt_ == "f32": r = sem.ftz32(r)
      return sem.sat01(r) if sat else r
    return ff
  if dfl:   # int -> float
    def fi(x):
      r = sem.int_to_float(x, D, rnd or "rn")
      return sem.sat01(r) if sat else r
    return fi
  if sfl:   # float -> int: saturating (PTX), NaN -> 0
    mode = rnd if rnd in IROUND else "rni"
    return lambda x: sem.float_to_int(pre(x), D, mode)
  # int -> int
  if sat:   # clamp to the destination's range (the bounds expressed in the source type)
    lo = Sd(max(np.iinfo(D).min, np.iinfo(Sd).min))
    hi = Sd(min(np.iinfo(D).max, np.iinfo(Sd).max))
    return lambda x: np.clip(np.asarray(x), lo, hi).astype(D)
  return lambda x: sem.cast_bits(np.asarray(x), D)


# ---------------------------------------------------------------------------------------------- memory
def _space(ins, default="generic"):
  return next((m for m in ins.mods if m in SPACES), default)


def _vec(ins) -> int:
  v = next((m for m in ins.mods if m in ("v2", "v4", "v8")), None)
  return int(v[1:]) if v else 1


def _sel(S, m):
  """The lanes of mask m (None: all), found once per mask: every masked memory instruction of a block asks."""
  if m is None: return None
  kept = S.__dict__.get("_sel")
  if kept is not None and kept[0] is m: return kept[1]
  sel = np.flatnonzero(m)
  S.__dict__["_sel"] = (m, sel)
  return sel


def _take(v, sel):
  v = np.asarray(v)
  if v.ndim == 0 or sel is None: return v
  return v[sel]


def _spread(S, vals, sel, dt):
  if sel is None: return vals
  out = np.zeros(S.n, dt)
  out[sel] = vals
  return out


@builder("ld", "ldu")
def _ld(ctx, ins):
  t = _type(ctx, ins)
  space = _space(ins)
  nvec = _vec(ins)
  d, a = _ops(ins, 2, ctx)
  k = TYPE_BYTES[t]
  mt = "b64" if t == "b128" else t
  dt = DTYPES[mt]
  ad = address(ctx, a)
  dests = d.items if d.kind == "vec" else [d]
  if len(dests) != nvec: raise ctx.error(f"ld.v{nvec} needs {nvec} destinations")
  if t == "b128": raise ctx.error("128-bit loads are not supported by the mock")
  ws = [wr(ctx, o, mt) for o in dests]
  step = np.uint64(k)
  areg = address_register(ctx, a)

  def f(S, m):
    if areg is not None:     # a register's address: Spaces.indexed when every lane's is valid, else the checked path
      R = S.R[areg[0]]       # (under a mask too: reading what an idle lane's address holds has no effect, and the
      if R.ndim:             # masked write keeps the idle lanes' registers)
        got = [S.sp.indexed(space, areg[0], R, areg[1] + k * j, dt, k) for j in range(len(ws))]
        if all(g is not None for g in got):
          for (arr, idx), w in zip(got, ws): w(S, arr[idx], m)
          return
    sel = _sel(S, m)
    if sel is not None and sel.size == 0: return
    base = _take(ad(S), sel)
    for j, w in enumerate(ws):
      vals = S.sp.load(space, base + step * np.uint64(j) if j else base, sel, dt, k)
      w(S, _spread(S, vals, sel, dt), m)
  f.memory = True
  return f


@builder("st")
def _st(ctx, ins):
  t = _type(ctx, ins)
  space = _space(ins)
  nvec = _vec(ins)
  a, s = _ops(ins, 2, ctx)
  k = TYPE_BYTES[t]
  dt = DTYPES[t]
  ad = address(ctx, a)
  srcs = s.items if s.kind == "vec" else [s]
  if len(srcs) != nvec: raise ctx.error(f"st.v{nvec} needs {nvec} sources")
  rs = [rd(ctx, o, t) for o in srcs]
  step = np.uint64(k)
  areg = address_register(ctx, a)

  def f(S, m):
    if m is None and areg is not None:        # every lane, a register's address: Spaces.indexed, else checked
      R = S.R[areg[0]]
      if R.ndim:
        got = [S.sp.indexed(space, areg[0], R, areg[1] + k * j, dt, k) for j in range(len(rs))]
        if all(g is not None for g in got):
          for (arr, idx), r in zip(got, rs): arr[idx] = r(S)
          return
    sel = _sel(S, m)
    if sel is not None and sel.size == 0: return
    base = _take(ad(S), sel)
    for j, r in enumerate(rs):
      S.sp.store(space, base + step * np.uint64(j) if j else base, sel, dt, k, _take(r(S), sel))
  return f


_ATOM = {
  "add": lambda o, b, c: o + b, "min": lambda o, b, c: np.minimum(o, b), "max": lambda o, b, c: np.maximum(o, b),
  "and": lambda o, b, c: o & b, "or": lambda o, b, c: o | b, "xor": lambda o, b, c: o ^ b,
  "exch": lambda o, b, c: b, "cas": lambda o, b, c: np.where(o == b, c, o),
  "inc": lambda o, b, c: np.where(o >= b, np.zeros((), o.dtype), o + np.ones((), o.dtype)),
  "dec": lambda o, b, c: np.where((o == 0) | (o > b), b, o - np.ones((), o.dtype)),
}


@builder("atom", "red")
def _atom(ctx, ins):
  t = _type(ctx, ins)
  space = _space(ins)
  op = next((m for m in ins.mods if m in _ATOM), None)
  if op is None: raise ctx.error(f"{ins.op} operation not supported")
  if _vec(ins) != 1: raise ctx.error("vector atomics are not supported by the mock")
  ops = ins.operands
  if ins.op == "atom": d, a, srcs = ops[0], ops[1], ops[2:]
  else: d, a, srcs = None, ops[0], ops[1:]
  k = TYPE_BYTES[t]
  at = t
  dt = DTYPES[at]
  fn = _ATOM[op]
  if t in ("f16x2", "bf16x2", "bf16"):     # atom/red .add.noftz and .min/.max on packed halves and bf16 (PTX ISA atom:
    # each half is its own atomic update of the same word, rounded to nearest even); exch/cas act on the bits
    arith = {"add": lambda x, y: x + y, "min": np.minimum, "max": np.maximum}.get(op)
    if arith is None and op not in ("exch", "cas"): raise ctx.error(f"{ins.op}.{op}.{t} is not a PTX form")
    if arith is not None:
      g = _halves(arith, "f16" if t == "f16x2" else "bf16") if t != "bf16" else _bf16(arith)
      dt = np.uint32 if t != "bf16" else np.uint16
      fn = lambda o, b, c, g=g, dt=dt: np.asarray(g(o, b)).astype(dt)
  if t in ("f32", "f64", "f16") and op == "add": fn = lambda o, b, c: (o.astype(np.float64) + b).astype(o.dtype) \
    if o.dtype == np.float16 else o + b
  ad = address(ctx, a)
  rb = rd(ctx, srcs[0], at)
  rc = rd(ctx, srcs[1], at) if op == "cas" else None
  dw = wr(ctx, d, at) if d is not None else None
  assoc = op == "add" and t not in FLOAT_T
  # the ufunc that is fn, step for step (integer min/max/and/or/xor, f32/f64 add: numpy rounds each f32/f64 add as
  # the GPU's atomic does), or the name of a run memspace._atomic_part computes directly (inc/dec: a closed form;
  # exch: the predecessor's value; cas: scalar steps); float min/max (NaN rules) and the 16-bit float forms have none
  ufunc = None
  if t not in FLOAT_T: ufunc = {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
                                "xor": np.bitwise_xor, "inc": "inc", "dec": "dec"}.get(op)
  elif t in ("f32", "f64") and op == "add": ufunc = np.add
  if op in ("exch", "cas") and t not in ("f16x2", "bf16x2", "bf16"): ufunc = op   # bit-exact moves and compares
  if op == "cas" and t in FLOAT_T: ufunc = None      # a float compare is not a bit compare (-0.0, NaN)

  def f(S, m):
    sel = _sel(S, m)
    if sel is not None and sel.size == 0: return
    old = S.sp.atomic(space, _take(ad(S), sel), sel, dt, k, fn, _take(rb(S), sel),
                      None if rc is None else _take(rc(S), sel), assoc, ufunc)
    if dw is not None: dw(S, _spread(S, old, sel, dt), m)
  return f


@builder("membar", "fence", "nanosleep", "prefetch", "prefetchu", "griddepcontrol", "pmevent", "discard",
         "applypriority", "createpolicy")
def _nop(ctx, ins): return None


# ---------------------------------------------------------------------------------------------- warp
def _membermask_check(ctx, ins, op):
  """A check of a .sync warp instruction's membermask (PTX ISA 9.1, shfl.sync / vote.sync: "the behavior is
  undefined if the executing thread is not in the membermask"; the instruction waits for the non-exited threads of
  the mask, so a named lane that exits is fine): an executing lane missing from its own mask is an error naming
  both. Returns (check, mask reader), (None, None) for an instruction without one."""
  if op is None: return None, None
  rm = rd(ctx, op, "b32")
  where = f"{ins.op}.{'.'.join(ins.mods)}"

  def check(S, m):
    mask = np.broadcast_to(np.asarray(rm(S)).astype(np.uint64), (S.n,))
    active = np.ones(S.n, bool) if m is None else m
    lane = S.laneid.astype(np.uint64)
    bad = np.flatnonzero(active & (((mask >> lane) & np.uint64(1)) == 0))
    if bad.size:
      t = int(bad[0])
      raise ctx.error(f"{where}: lane {int(lane[t])} executes it but its membermask {int(mask[t]):#010x} leaves it out")
    return mask
  return check, rm


@builder("shfl")
def _shfl(ctx, ins):
  mode = next((m for m in ins.mods if m in ("idx", "up", "down", "bfly")), None)
  if mode is None: raise ctx.error("shfl without a mode")
  ops = ins.operands
  dst = ops[0].items if ops[0].kind == "pair" else [ops[0]]
  dw = wr(ctx, dst[0], "b32")
  pw = wr(ctx, dst[1], "pred") if len(dst) > 1 else None
  ra, rb, rc = rd(ctx, ops[1], "b32"), rd(ctx, ops[2], "u32"), rd(ctx, ops[3], "u32")
  members, _ = _membermask_check(ctx, ins, ops[4] if "sync" in ins.mods and len(ops) > 4 else None)
  where = f"{ins.op}.{'.'.join(ins.mods)}"

  def f(S, m):
    mask = members(S, m) if members is not None else None
    lane = S.laneid.astype(np.int64)
    b = np.asarray(rb(S)).astype(np.int64) & 31
    c = np.asarray(rc(S)).astype(np.int64)
    cval, seg = c & 31, (c >> 8) & 31
    max_lane = (lane & seg) | (cval & ~seg)
    min_lane = lane & seg
    if mode == "up": j = lane - b; ok = j >= max_lane
    elif mode == "down": j = lane + b; ok = j <= max_lane
    elif mode == "bfly": j = lane ^ b; ok = j <= max_lane
    else: j = min_lane | (b & ~seg); ok = j <= max_lane
    ok = ok & (j < S.warp_len) & (j >= 0)
    src = np.where(ok, S.warp_base + j, np.arange(S.n))
    if mask is not None:       # "results are undefined if a thread sources a register from an inactive thread or a
      active = np.ones(S.n, bool) if m is None else m        # thread that is not in membermask"
      jj = np.where(ok, j, lane).astype(np.uint64)
      bad = np.flatnonzero(active & ok & ((((mask >> jj) & np.uint64(1)) == 0) | ~active[src]))
      if bad.size:
        t = int(bad[0])
        raise ctx.error(f"{where}: lane {int(lane[t])} reads lane {int(j[t])}, which is not in membermask "
                        f"{int(mask[t]):#010x} or does not execute it (undefined on hardware)")
    a = np.asarray(ra(S))
    if a.ndim == 0: a = np.full(S.n, a, np.uint32)
    dw(S, a[src], m)
    if pw: pw(S, ok, m)
  return f


@builder("vote")
def _vote(ctx, ins):
  mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
  ops = ins.operands
  rp = rd(ctx, ops[1], "pred")
  dw = wr(ctx, ops[0], "b32" if mode == "ballot" else "pred")
  members, _ = _membermask_check(ctx, ins, ops[2] if "sync" in ins.mods and len(ops) > 2 else None)

  def f(S, m):
    if members is not None: members(S, m)
    active = np.ones(S.n, bool) if m is None else m
    p = np.broadcast_to(np.asarray(rp(S)), (S.n,)) & active
    w = S.widx
    if mode == "ballot":
      bits = np.bincount(w, weights=np.where(p, np.exp2(S.laneid.astype(np.float64)), 0.0), minlength=S.nwarps)
      dw(S, bits.astype(np.uint64).astype(np.uint32)[w], m)
      return
    nyes = np.bincount(w, weights=p.astype(np.float64), minlength=S.nwarps)
    nact = np.bincount(w, weights=active.astype(np.float64), minlength=S.nwarps)
    if mode == "any": r = nyes > 0
    elif mode == "all": r = nyes == nact
    else: r = (nyes == 0) | (nyes == nact)
    dw(S, r[w], m)
  return f


@builder("redux")
def _redux(ctx, ins):
  """redux.sync.{add,min,max}.{u32,s32} / .{and,or,xor}.b32 d, a, membermask: the warp's active threads' reduction."""
  t = _type(ctx, ins)
  op = next((m for m in ins.mods if m in ("add", "min", "max", "and", "or", "xor")), None)
  if op is None or t not in ("u32", "s32", "b32"): raise ctx.error("unsupported redux.sync form")
  ops = ins.operands
  dw, ra = wr(ctx, ops[0], t), rd(ctx, ops[1], t)
  dt = np.dtype(DTYPES[t])
  ufunc = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor}[op]
  ident = {"add": 0, "min": np.iinfo(dt).max, "max": np.iinfo(dt).min, "and": np.iinfo(dt).max if dt.kind == "u" else -1,
           "or": 0, "xor": 0}[op]

  def f(S, m):
    a = np.broadcast_to(np.asarray(ra(S)), (S.n,))
    active = np.ones(S.n, bool) if m is None else m
    acc = np.full(S.nwarps, ident, dt)
    with np.errstate(all="ignore"): ufunc.at(acc, S.widx[active], a[active])
    dw(S, acc[S.widx], m)
  return f


@builder("match")
def _match(ctx, ins):
  """match.any.sync.b32/b64 d, a, membermask: the active lanes of the warp holding the same value;
  match.all.sync d[|p], a, membermask: the active lanes' mask if they all hold it, else 0 (p: whether they do)."""
  t = _type(ctx, ins)
  mode = "all" if "all" in ins.mods else "any"
  ops = ins.operands
  dst = ops[0].items if ops[0].kind == "pair" else [ops[0]]
  dw = wr(ctx, dst[0], "b32")
  pw = wr(ctx, dst[1], "pred") if len(dst) > 1 else None
  ra = rd(ctx, ops[1], t)

  def f(S, m):
    a = np.broadcast_to(np.asarray(ra(S)), (S.n,))
    active = np.ones(S.n, bool) if m is None else m
    same = np.zeros(S.n, np.uint32)
    act = np.zeros(S.n, np.uint32)
    for j in range(32):
      ok = j < S.warp_len
      src = np.where(ok, S.warp_base + j, 0)
      on = ok & active[src]
      bit = np.uint32(1 << j)
      same |= np.where(on & (a[src] == a), bit, np.uint32(0))
      act |= np.where(on, bit, np.uint32(0))
    if mode == "any": dw(S, same, m)
    else:
      eq = same == act
      dw(S, np.where(eq, act, np.uint32(0)), m)
      if pw: pw(S, eq, m)
  return f


@builder("activemask")
def _activemask(ctx, ins):
  dw = wr(ctx, ins.operands[0], "b32")

  def f(S, m):
    active = np.ones(S.n, bool) if m is None else m
    bits = np.bincount(S.widx, weights=np.where(active, np.exp2(S.laneid.astype(np.float64)), 0.0), minlength=S.nwarps)
    dw(S, bits.astype(np.uint64).astype(np.uint32)[S.widx], m)
  return f


@builder("trap")
def _trap(ctx, ins):
  from ....errors import GPUFault
  line = ins.line
  def f(S, m): raise GPUFault(f"trap instruction at PTX line {line}", kind="trap")
  return f


def compile_instr(ctx: Ctx, ins):
  ctx.ins = ins
  b = BUILDERS.get(ins.op)
  if b is None: raise ctx.error(f"instruction {ins.op} is not supported by the mock NV GPU")
  f = b(ctx, ins)
  if f is None: return None
  if ins.guard is not None:
    g = rd(ctx, Operand("reg", name=ins.guard[0]), "pred")
    neg = ins.guard[1]
    inner = f

    def guarded(S, m):
      p = g(S)
      p = ~p if neg else p
      inner(S, p if m is None else (p & m))
    return guarded
  return f

