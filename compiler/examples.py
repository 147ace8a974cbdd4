"""Acceptance kernels written with the DSL, each with its inputs and numpy's answer.

Any backend can run them: allocate one buffer per ndarray argument (in slot order), pass ints as they are, launch
with global_size/local_size, and compare the output slots with `expected` (ints exactly, floats to 1e-5 relative).
    for ex in all_examples(): run ex.sink with ex.args on your device; check ex.expected
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import AddrSpace, AxisType, KernelInfo, UOp, dtypes


@dataclass
class Example:
  name: str
  sink: UOp
  args: list            # per slot: an ndarray (a buffer, copied in) or an int (a scalar)
  expected: dict        # slot -> ndarray the buffer must hold afterwards
  global_size: tuple
  local_size: tuple


def _rng(seed): return np.random.default_rng(seed)


def _p(slot, arr: np.ndarray, readonly=True) -> UOp:
  return UOp.param(slot, dtypes.from_numpy(arr.dtype), arr.size, readonly=readonly)


def elementwise_add(n=1024, local=32) -> Example:
  a, b = _rng(1).standard_normal(n).astype(np.float32), _rng(2).standard_normal(n).astype(np.float32)
  out = np.zeros(n, np.float32)
  A, B, C = _p(0, a), _p(1, b), _p(2, out, readonly=False)
  i = UOp.special(n // local, "gidx0") * local + UOp.special(local, "lidx0")
  sink = C.index(i).store(A.index(i).load() + B.index(i).load()).sink(arg=KernelInfo("add"))
  return Example("add", sink, [a, b, out], {2: a + b}, (n // local, 1, 1), (local, 1, 1))


def elementwise_fma(n=1000) -> Example:
  """d = a*b + c over GLOBAL/LOCAL ranges (lowered to SPECIALs); n not a multiple of the group: gated store."""
  a, b, c = (_rng(s).standard_normal(n).astype(np.float32) for s in (3, 4, 5))
  out = np.zeros(n, np.float32)
  A, B, Cc, D = _p(0, a), _p(1, b), _p(2, c), _p(3, out, readonly=False)
  local = 64
  g, l = UOp.range((n + local - 1) // local, 0, AxisType.GLOBAL), UOp.range(local, 1, AxisType.LOCAL)
  i = g * local + l
  ok = i < n
  v = A.index(i).valid(ok).load() * B.index(i).valid(ok).load() + Cc.index(i).valid(ok).load()
  sink = D.index(i).valid(ok).store(v).end(g, l).sink(arg=KernelInfo("fma"))
  ref = (a * b).astype(np.float32) + c
  return Example("fma", sink, [a, b, c, out], {3: ref}, ((n + local - 1) // local, 1, 1), (local, 1, 1))


def int_bitops(n=512) -> Example:
  """Integer bit ops, shifts, Python floor // and %, and C's truncating forms, on negative numbers too."""
  rng = _rng(6)
  a = rng.integers(-10000, 10000, n).astype(np.int32)
  b = rng.integers(1, 50, n).astype(np.int32) * rng.choice([-1, 1], n).astype(np.int32)
  outs = [np.zeros(n, np.int32) for _ in range(5)]
  A, B = _p(0, a), _p(1, b)
  O = [_p(2 + k, o, readonly=False) for k, o in enumerate(outs)]
  i = UOp.special(n // 64, "gidx0") * 64 + UOp.special(64, "lidx0")
  x, y = A.index(i).load(), B.index(i).load()
  vals = [((x & 0x0FF0) | (x ^ y)) << 2, (x >> 3) ^ (y << 1), x // y, x % y, x.idiv(y) * 1000 + x.imod(y)]
  sink = UOp.sink(*[o.index(i).store(v) for o, v in zip(O, vals)], arg=KernelInfo("bitops"))
  ref = [((a & 0x0FF0) | (a ^ b)) << 2, (a >> 3) ^ (b << 1), a // b, a % b,
         (np.trunc(a / b).astype(np.int32) * 1000 + np.fmod(a, b)).astype(np.int32)]
  return Example("int_bitops", sink, [a, b, *outs], {2 + k: r.astype(np.int32) for k, r in enumerate(ref)},
                 (n // 64, 1, 1), (64, 1, 1))


def where_compare(n=256) -> Example:
  rng = _rng(7)
  a = rng.standard_normal(n).astype(np.float32)
  b = rng.standard_normal(n).astype(np.float32)
  ai = rng.integers(-5, 5, n).astype(np.int32)
  out_f, out_i = np.zeros(n, np.float32), np.zeros(n, np.int32)
  A, B, AI, OF, OI = _p(0, a), _p(1, b), _p(2, ai), _p(3, out_f, False), _p(4, out_i, False)
  i = UOp.special(n, "gidx0")
  x, y, k = A.index(i).load(), B.index(i).load(), AI.index(i).load()
  f = (x < y).where(x * 2.0, y - 1.0)
  j = (k.eq(0) | (k > 3)).where(k + 100, k.ne(-2).where(k * k, -7))
  sink = UOp.sink(OF.index(i).store(f), OI.index(i).store(j), arg=KernelInfo("where"))
  ref_f = np.where(a < b, a * np.float32(2), b - np.float32(1)).astype(np.float32)
  ref_i = np.where((ai == 0) | (ai > 3), ai + 100, np.where(ai != -2, ai * ai, -7)).astype(np.int32)
  return Example("where", sink, [a, b, ai, out_f, out_i], {3: ref_f, 4: ref_i}, (n, 1, 1), (1, 1, 1))


def grid_2d(h=24, w=40, local=8) -> Example:
  """out[y, x] = a[y, x] * 3 + x - y on gidx0 (column groups) x lidx0 and gidx1 (rows)."""
  a = _rng(8).integers(-100, 100, (h, w)).astype(np.int32)
  out = np.zeros((h, w), np.int32)
  A, O = _p(0, a), _p(1, out, False)
  x = UOp.special(w // local, "gidx0") * local + UOp.special(local, "lidx0")
  y = UOp.special(h, "gidx1")
  sink = O.index(y * w + x).store(A.index(y * w + x).load() * 3 + x - y).sink(arg=KernelInfo("grid2d"))
  xs, ys = np.meshgrid(np.arange(w), np.arange(h))
  return Example("grid_2d", sink, [a, out], {1: (a * 3 + xs - ys).astype(np.int32)}, (w // local, h, 1), (local, 1, 1))


def runtime_loop(rows=16, cols=64, n=37) -> Example:
  """out[r] = sum(a[r, :n]) with n a runtime kernel argument (the loop's trip count)."""
  a = _rng(9).standard_normal((rows, cols)).astype(np.float32)
  out = np.zeros(rows, np.float32)
  A, O = _p(0, a), _p(1, out, False)
  trip = UOp.variable("n", 0, cols, slot=2)
  r = UOp.special(rows, "gidx0")
  k = UOp.range(trip, 0, AxisType.REDUCE)
  total = A.index(r * cols + k).load().reduce(k)
  sink = O.index(r).store(total).sink(arg=KernelInfo("rowsum"))
  ref = np.array([np.sum(a[i, :n], dtype=np.float32) for i in range(rows)], np.float32)
  return Example("runtime_loop", sink, [a, out, n], {1: ref}, (rows, 1, 1), (1, 1, 1))


def gated_stencil(n=100) -> Example:
  """out[i] = a[i-1] + 2 a[i] + a[i+1], loads gated off at the edges (reading 0 there); 128 work-items for 100."""
  a = _rng(10).integers(-50, 50, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  A, O = _p(0, a), _p(1, out, False)
  i = UOp.special(4, "gidx0") * 32 + UOp.special(32, "lidx0")
  inside = i < n
  left = A.index(i - 1).valid((i > 0) & inside).load()
  mid = A.index(i).valid(inside).load()
  right = A.index(i + 1).valid(i < n - 1).load()
  sink = O.index(i).valid(inside).store(left + mid * 2 + right).sink(arg=KernelInfo("stencil"))
  pad = np.concatenate([[0], a, [0]]).astype(np.int32)
  return Example("gated_stencil", sink, [a, out], {1: pad[:-2] + 2 * pad[1:-1] + pad[2:]}, (4, 1, 1), (32, 1, 1))


def local_reduction(groups=8, local=64) -> Example:
  """Each work-group sums its 64 elements in LOCAL memory by halving steps, with a barrier between steps."""
  a = _rng(11).integers(-1000, 1000, groups * local).astype(np.int32)
  out = np.zeros(groups, np.int32)
  A, O = _p(0, a), _p(1, out, False)
  g, l = UOp.special(groups, "gidx0"), UOp.special(local, "lidx0")
  tile = UOp.placeholder(local, dtypes.int32, 0, AddrSpace.LOCAL)
  st = tile.index(l).store(A.index(g * local + l).load())
  step = local // 2
  while step >= 1:
    cur = tile.after(st)                 # the pipeline puts a barrier here (read after write)
    st = cur.index(l).valid(l < step).store(cur.index(l).load() + cur.index(l + step).valid(l < step).load())
    step //= 2
  sink = O.index(g).valid(l.eq(0)).store(tile.after(st).index(0).load()).sink(arg=KernelInfo("local_sum"))
  return Example("local_reduction", sink, [a, out], {1: a.reshape(groups, local).sum(1).astype(np.int32)},
                 (groups, 1, 1), (local, 1, 1))


def matmul_naive(n=64, local=16) -> Example:
  a = _rng(12).standard_normal((n, n)).astype(np.float32)
  b = _rng(13).standard_normal((n, n)).astype(np.float32)
  out = np.zeros((n, n), np.float32)
  A, B, C = _p(0, a), _p(1, b), _p(2, out, False)
  i = UOp.range(n, 0, AxisType.GLOBAL)
  jg, jl = UOp.range(n // local, 1, AxisType.GLOBAL), UOp.range(local, 2, AxisType.LOCAL)
  j = jg * local + jl
  k = UOp.range(n, 3, AxisType.REDUCE)
  acc = (A.index(i * n + k).load() * B.index(k * n + j).load()).reduce(k)
  sink = C.index(i * n + j).store(acc).end(i, jg, jl).sink(arg=KernelInfo("matmul_naive"))
  return Example("matmul_naive", sink, [a, b, out], {2: a @ b}, (n, n // local, 1), (local, 1, 1))


def matmul_tiled(n=64, tile=8) -> Example:
  """C = A @ B with T x T tiles of A and B staged in LOCAL memory, an outer loop over K tiles and an inner loop
  over the tile; barriers: after the tile stores (explicit) and before overwriting a tile (implicit)."""
  a = _rng(14).standard_normal((n, n)).astype(np.float32)
  b = _rng(15).standard_normal((n, n)).astype(np.float32)
  out = np.zeros((n, n), np.float32)
  sink = matmul_tiled_kernel(n, tile)
  return Example("matmul_tiled", sink, [a, b, out], {2: a @ b}, (n // tile, n // tile, 1), (tile, tile, 1))


def matmul_tiled_kernel(n=64, tile=8) -> UOp:
  A, B = UOp.param(0, dtypes.float32, n * n, True), UOp.param(1, dtypes.float32, n * n, True)
  C = UOp.param(2, dtypes.float32, n * n)
  lx, ly = UOp.special(tile, "lidx0"), UOp.special(tile, "lidx1")
  row = UOp.special(n // tile, "gidx1") * tile + ly
  col = UOp.special(n // tile, "gidx0") * tile + lx
  As = UOp.placeholder((tile, tile), dtypes.float32, 0, AddrSpace.LOCAL)
  Bs = UOp.placeholder((tile, tile), dtypes.float32, 1, AddrSpace.LOCAL)
  kt = UOp.range(n // tile, 0, AxisType.REDUCE)
  k = UOp.range(tile, 1, AxisType.REDUCE)
  st_a = As.index(ly, lx).store(A.index(row * n + kt * tile + lx).load())
  st_b = Bs.index(ly, lx).store(B.index((kt * tile + ly) * n + col).load())
  ready = UOp.group(st_a, st_b).barrier()
  prod = As.after(ready).index(ly, k).load() * Bs.after(ready).index(k, lx).load()
  return C.index(row * n + col).store(prod.reduce(kt, k)).sink(arg=KernelInfo("matmul_tiled"))


def register_accumulator(groups=8, per=16) -> Example:
  """A REG placeholder used by hand: initialised, updated inside a LOOP (after(init, r) puts the load in the loop),
  read after the loop's END. Each work-item also writes `per` running prefix values in the same loop."""
  a = _rng(16).integers(-100, 100, groups * per).astype(np.int32)
  total, prefix = np.zeros(groups, np.int32), np.zeros(groups * per, np.int32)
  A, T, P = _p(0, a), _p(1, total, False), _p(2, prefix, False)
  g = UOp.special(groups, "gidx0")
  acc = UOp.placeholder(1, dtypes.int32, 0, AddrSpace.REG)
  init = acc.index(0).store(0)
  r = UOp.range(per, 0, AxisType.LOOP)
  cur = acc.after(init, r).index(0)
  new = cur.load() + A.index(g * per + r).load()
  loop = UOp.group(cur.store(new), P.index(g * per + r).store(new)).end(r)
  sink = T.index(g).store(acc.after(loop).index(0).load()).sink(arg=KernelInfo("reg_acc"))
  rows = a.reshape(groups, per)
  return Example("register_accumulator", sink, [a, total, prefix],
                 {1: rows.sum(1).astype(np.int32), 2: np.cumsum(rows, 1).reshape(-1).astype(np.int32)},
                 (groups, 1, 1), (1, 1, 1))


ALL = [elementwise_add, elementwise_fma, int_bitops, where_compare, grid_2d, runtime_loop, gated_stencil,
       local_reduction, matmul_naive, matmul_tiled, register_accumulator]


def all_examples() -> list[Example]:
  return [f() for f in ALL]
