"""Random expression kernels (fixed seeds): per-lane int32/uint32/float32 values from memory and kernel arguments,
combined by random ops, constants of all sizes (inline, literal), compares and selects; the result is stored.
Both backends run the same kernel; results must agree exactly (ints) or to 1e-5 (floats)."""
from __future__ import annotations

import random

import numpy as np

from hcq.compiler import AxisType, KernelInfo, Ops, UOp, dtypes
from hcq.compiler.lower import lower
from amd_kernels import Case

INT_CONSTS = [0, 1, 2, 3, 7, 16, 31, 64, 65, -1, -16, -17, 100, 1000, 12345, -99999, 2**31 - 1, -2**31, 0x55555555]
FLOAT_CONSTS = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 4.0, -4.0, 0.15915494, 3.25, -1e-3, 1e4, 7.0]


def _int_expr(rng: random.Random, leaves, depth: int):
  if depth == 0 or rng.random() < 0.2:
    return rng.choice(leaves) if rng.random() < 0.75 else UOp.const(rng.choice(INT_CONSTS), dtypes.int32)
  a, b = _int_expr(rng, leaves, depth - 1), _int_expr(rng, leaves, depth - 1)
  k = rng.randrange(19)
  if k == 14: return (a.cast(dtypes.uint32) >> rng.randrange(0, 31)).cast(dtypes.int32)
  if k == 15: return a.cast(dtypes.uint32).idiv(b.cast(dtypes.uint32) | 1).cast(dtypes.int32)
  if k == 16: return a.cast(dtypes.int16).cast(dtypes.int32) + b.cast(dtypes.uint8).cast(dtypes.int32)
  if k == 17: return ((a & 0xFFFF).cast(dtypes.float32) * 0.5).cast(dtypes.int32)
  if k == 18: return (a.cast(dtypes.uint32) < b.cast(dtypes.uint32)).where(a.cast(dtypes.uint32).imod(1000), 7).cast(dtypes.int32)
  if k == 0: return a + b
  if k == 1: return a - b
  if k == 2: return a * b
  if k == 3: return a & b
  if k == 4: return a | b
  if k == 5: return a ^ b
  if k == 6: return a << rng.randrange(0, 31)
  if k == 7: return a >> rng.randrange(0, 31)
  if k == 8: return a.idiv(rng.choice([1, 2, 3, 7, 10, 64, 1000, -3, -8, 641]))
  if k == 9: return a.imod(rng.choice([2, 3, 7, 10, 64, 1000, -5, 641]))
  if k == 10: return a.maximum(b)
  if k == 11: return (a < b).where(a, b * 3)
  if k == 12: return (a.eq(b) | (a > 5)).where(b, -a)
  d = b | 1   # never zero
  return a.idiv(d) + a.imod(d)


def _float_expr(rng: random.Random, leaves, ints, depth: int):
  if depth == 0 or rng.random() < 0.2:
    if rng.random() < 0.15: return rng.choice(ints).cast(dtypes.float32) * 0.001
    return rng.choice(leaves) if rng.random() < 0.75 else UOp.const(rng.choice(FLOAT_CONSTS), dtypes.float32)
  a, b = _float_expr(rng, leaves, ints, depth - 1), _float_expr(rng, leaves, ints, depth - 1)
  k = rng.randrange(9)
  if k == 0: return a + b
  if k == 1: return a - b
  if k == 2: return a * b
  if k == 3: return a.maximum(b)
  if k == 4: return (a < b).where(a, b)
  if k == 5: return (a.ne(b) & (a > 0.25)).where(a * 0.5, b + 1.0)
  if k == 6: return -a
  if k == 7: return a * b + 1.5
  return (a * a + 1.0).sqrt()


def random_case(seed: int, n: int = 128) -> Case:
  rng = random.Random(seed)
  nprng = np.random.default_rng(seed)
  ia = nprng.integers(-2**31, 2**31 - 1, n).astype(np.int32)
  ib = nprng.integers(-1000, 1000, n).astype(np.int32)
  fa = nprng.standard_normal(n).astype(np.float32)
  oi, of = np.zeros(n, np.int32), np.zeros(n, np.float32)
  IA, IB = UOp.param(0, dtypes.int32, n, True), UOp.param(1, dtypes.int32, n, True)
  FA = UOp.param(2, dtypes.float32, n, True)
  OI, OF = UOp.param(3, dtypes.int32, n), UOp.param(4, dtypes.float32, n)
  s = UOp.variable("s", -100, 100, slot=5, dtype=dtypes.int32)
  g = UOp.special(n // 32, "gidx0") * 32 + UOp.special(32, "lidx0")
  x, y, f = IA.index(g).load(), IB.index(g).load(), FA.index(g).load()
  ints = [x, y, s, g.cast(dtypes.int32), s * 3 + UOp.special(n // 32, "gidx0").cast(dtypes.int32)]
  ie = _int_expr(rng, ints, 4)
  fe = _float_expr(rng, [f, f * 2.0, (f * f).sqrt()], ints, 4)
  sink = UOp.sink(OI.index(g).store(ie), OF.index(g).store(fe), arg=KernelInfo(f"random{seed}"))
  args = [ia, ib, fa, oi, of, rng.randrange(-100, 100)]
  # the kernel's arguments are the parameters that survive simplification, in slot order
  used = sorted({u.arg.slot for u in lower(sink, "c").src if u.op in (Ops.PARAM, Ops.DEFINE_VAR)})
  return Case(f"random_{seed}", sink, [args[k] for k in used], [used.index(3), used.index(4)], (n // 32, 1, 1),
              (32, 1, 1))


def random_loop_case(seed: int, n: int = 96) -> Case:
  """Random loop nests: each of one or two nested REDUCE ranges has a small constant (unrolled), a larger constant
  (scalar loop), a kernel-argument (scalar loop, runtime) or a per-lane loaded trip count (EXEC-masked loop); the body
  mixes loads, the counters and a kernel argument; the store is gated."""
  rng = random.Random(1000 + seed)
  nprng = np.random.default_rng(1000 + seed)
  a = nprng.integers(-1000, 1000, 256).astype(np.int32)
  trips = nprng.integers(0, 9, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  A, T, O = UOp.param(0, dtypes.int32, 256, True), UOp.param(1, dtypes.int32, n, True), UOp.param(2, dtypes.int32, n)
  s = UOp.variable("s", 0, 20, slot=3, dtype=dtypes.int32)
  g = UOp.special(n // 32, "gidx0") * 32 + UOp.special(32, "lidx0")
  ends = []
  for _ in range(rng.choice([1, 2])):
    kind = rng.randrange(4)
    ends.append(rng.randrange(1, 9) if kind == 0 else rng.randrange(17, 26) if kind == 1 else s if kind == 2 else
                T.index(g).load())
  rs = [UOp.range(e, k, AxisType.REDUCE) for k, e in enumerate(ends)]
  idx = g * 7 + s
  for k, r in enumerate(rs): idx = idx + r * (3 + k)
  v = A.index(idx & 255).load()
  leaves = [v, g.cast(dtypes.int32), s] + [r.cast(dtypes.int32) for r in rs]
  body = _int_expr(rng, leaves, 2) ^ v
  total = body.reduce(*rs)
  sink = O.index(g).valid((g & 3).ne(1)).store(total * 3 + s).sink(arg=KernelInfo(f"loops{seed}"))
  args = [a, trips, out, rng.randrange(0, 20)]
  used = sorted({u.arg.slot for u in lower(sink, "c").src if u.op in (Ops.PARAM, Ops.DEFINE_VAR)})
  return Case(f"loops_{seed}", sink, [args[k] for k in used], [used.index(2)], (n // 32, 1, 1), (32, 1, 1))


def _half_expr(rng: random.Random, leaves, depth: int):
  if depth == 0 or rng.random() < 0.2:
    if rng.random() < 0.8: return rng.choice(leaves)
    return UOp.const(rng.choice([0.0, 0.5, 1.0, -2.0, 3.25, 0.1]), dtypes.float16)
  a, b = _half_expr(rng, leaves, depth - 1), _half_expr(rng, leaves, depth - 1)
  k = rng.randrange(7)
  if k == 0: return a + b
  if k == 1: return a - b
  if k == 2: return a * b
  if k == 3: return a.maximum(b)
  if k == 4: return (a < b).where(a, b)
  if k == 5: return (a.cast(dtypes.float32) * 0.5).cast(dtypes.float16)
  return -a


def random_half_case(seed: int, n: int = 64) -> Case:
  """Random f16 expressions (each op rounded to f16 on both sides: the results must be bit-identical)."""
  rng = random.Random(2000 + seed)
  x = np.random.default_rng(seed).uniform(-4, 4, n).astype(np.float16)
  y = np.random.default_rng(seed + 1).uniform(-4, 4, n).astype(np.float16)
  X, Y, O = UOp.param(0, dtypes.float16, n, True), UOp.param(1, dtypes.float16, n, True), UOp.param(2, dtypes.float16, n)
  g = UOp.special(n // 32, "gidx0") * 32 + UOp.special(32, "lidx0")
  sink = O.index(g).store(_half_expr(rng, [X.index(g).load(), Y.index(g).load()], 4)).sink(arg=KernelInfo(f"h{seed}"))
  args = [x, y, np.zeros(n, np.float16)]
  used = sorted({u.arg.slot for u in lower(sink, "c").src if u.op in (Ops.PARAM, Ops.DEFINE_VAR)})
  return Case(f"half_{seed}", sink, [args[k] for k in used], [used.index(2)], (n // 32, 1, 1), (32, 1, 1))
