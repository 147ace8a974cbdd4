"""Kernels that exercise the RDNA3 backend's features beyond the compiler-core examples. Each returns a Case: the
sink, its arguments (ndarrays for buffers, ints for scalars) and the launch; the reference is the C backend's
result on the same arguments (and numpy where a formula is handy)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hcq.compiler import AddrSpace, AxisType, KernelInfo, UOp, dtypes


@dataclass
class Case:
  name: str
  sink: UOp
  args: list
  outputs: list          # slots written by the kernel
  global_size: tuple
  local_size: tuple
  float_rtol: float = 1e-5


def _rng(seed): return np.random.default_rng(seed)


def _p(slot, arr, readonly=True):
  return UOp.param(slot, dtypes.from_numpy(arr.dtype), arr.size, readonly=readonly)


def _gid(n, local):
  return UOp.special(n // local, "gidx0") * local + UOp.special(local, "lidx0")


def f16_arith(n=256) -> Case:
  """f16 add/sub/mul/max/compare/select and f16 <-> f32 conversions, loaded and stored as 16-bit."""
  a = (_rng(1).standard_normal(n) * 4).astype(np.float16)
  b = (_rng(2).standard_normal(n) * 4).astype(np.float16)
  o16, o32, c16 = np.zeros(n, np.float16), np.zeros(n, np.float32), np.zeros(n, np.float16)
  A, B, O, P, Q = _p(0, a), _p(1, b), _p(2, o16, False), _p(3, o32, False), _p(4, c16, False)
  i = _gid(n, 64)
  x, y = A.index(i).load(), B.index(i).load()
  v = (x < y).where(x * y - x, (x + y).maximum(y * 0.5))
  w = v.cast(dtypes.float32) * 3.0 + y.cast(dtypes.float32)
  # f16 constants through b32 instructions (v_cndmask, v_mov): their bits, not an f32 inline constant
  c = (x < 0.0).cast(dtypes.float16) + (y < x).where(UOp.const(1.0, dtypes.float16), UOp.const(-2.5, dtypes.float16))
  sink = UOp.sink(O.index(i).store(v), P.index(i).store(w), Q.index(i).store(c), arg=KernelInfo("f16_arith"))
  return Case("f16_arith", sink, [a, b, o16, o32, c16], [2, 3, 4], (n // 64, 1, 1), (64, 1, 1))


def conversions(n=256) -> Case:
  """int <-> float (signed and unsigned), float -> int truncation, 8/16-bit wraparound, bool -> int."""
  rng = _rng(3)
  f = (rng.standard_normal(n) * 1000).astype(np.float32)
  i = rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)
  u = rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
  outs = [np.zeros(n, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int32),
          np.zeros(n, np.int32), np.zeros(n, np.uint32)]
  F, I, U = _p(0, f), _p(1, i), _p(2, u)
  O = [_p(3 + k, o, False) for k, o in enumerate(outs)]
  g = _gid(n, 32)
  x, y, z = F.index(g).load(), I.index(g).load(), U.index(g).load()
  vals = [x.cast(dtypes.int32), y.cast(dtypes.float32), z.cast(dtypes.float32),
          (y.cast(dtypes.int8).cast(dtypes.int32) + y.cast(dtypes.int16).cast(dtypes.int32) * 3),
          (x < 0.0).cast(dtypes.int32) + (y.cast(dtypes.uint16) + 7).cast(dtypes.int32),
          (x * x).cast(dtypes.uint32) + z.cast(dtypes.uint8).cast(dtypes.uint32)]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("conversions"))
  return Case("conversions", sink, [f, i, u, *outs], [3, 4, 5, 6, 7, 8], (n // 32, 1, 1), (32, 1, 1))


def transcendental(n=256) -> Case:
  """exp2, log2, sqrt, reciprocal, trunc, division, negation on f32."""
  rng = _rng(4)
  a = rng.uniform(0.1, 20, n).astype(np.float32)
  b = rng.uniform(-8, 8, n).astype(np.float32)
  outs = [np.zeros(n, np.float32) for _ in range(6)]
  A, B = _p(0, a), _p(1, b)
  O = [_p(2 + k, o, False) for k, o in enumerate(outs)]
  g = _gid(n, 64)
  x, y = A.index(g).load(), B.index(g).load()
  vals = [y.exp2(), x.log2(), x.sqrt(), x.recip(), (y * 3.7).alu(__import__("hcq").compiler.Ops.TRUNC), y / x - (-y)]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("transcendental"))
  return Case("transcendental", sink, [a, b, *outs], [2, 3, 4, 5, 6, 7], (n // 64, 1, 1), (64, 1, 1))


def int_div_runtime(n=512) -> Case:
  """C's truncating / and % by runtime divisors (both signs), and Python's // and % on the same."""
  rng = _rng(5)
  a = rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)
  b = (rng.integers(1, 100000, n) * rng.choice([-1, 1], n)).astype(np.int32)
  b[:8] = [1, -1, 2**31 - 1, -2**31, 3, -7, 65536, 12345]
  outs = [np.zeros(n, np.int32) for _ in range(4)]
  A, B = _p(0, a), _p(1, b)
  O = [_p(2 + k, o, False) for k, o in enumerate(outs)]
  g = _gid(n, 64)
  x, y = A.index(g).load(), B.index(g).load()
  vals = [x.idiv(y), x.imod(y), x // y, x % y]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("int_div_runtime"))
  return Case("int_div_runtime", sink, [a, b, *outs], [2, 3, 4, 5], (n // 64, 1, 1), (64, 1, 1))


def uint_div(n=512) -> Case:
  """uint32 division and modulo by runtime values and by constants (magic multiplication and shifts)."""
  rng = _rng(6)
  a = rng.integers(0, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
  b = rng.integers(1, 2**32 - 1, n, dtype=np.uint64).astype(np.uint32)
  b[:64] = rng.integers(1, 300, 64).astype(np.uint32)
  a[:4] = [0xFFFFFFFF, 0xFFFFFFFE, 0, 0x80000000]
  outs = [np.zeros(n, np.uint32) for _ in range(6)]
  A, B = _p(0, a), _p(1, b)
  O = [_p(2 + k, o, False) for k, o in enumerate(outs)]
  g = _gid(n, 64)
  x, y = A.index(g).load(), B.index(g).load()
  vals = [x.idiv(y), x.imod(y), x.idiv(7), x.imod(1000), x.idiv(3) + x.imod(641), x.idiv(16) ^ x.imod(64)]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("uint_div"))
  return Case("uint_div", sink, [a, b, *outs], [2, 3, 4, 5, 6, 7], (n // 64, 1, 1), (64, 1, 1))


def int_div_const(n=512) -> Case:
  """Signed division by constants: truncating (idiv/imod by 7, -3, 10) and floor (// and % by 5) on +-values."""
  a = _rng(7).integers(-2**31, 2**31 - 1, n).astype(np.int32)
  a[:4] = [-2**31, 2**31 - 1, -1, 0]
  outs = [np.zeros(n, np.int32) for _ in range(5)]
  A = _p(0, a)
  O = [_p(1 + k, o, False) for k, o in enumerate(outs)]
  g = _gid(n, 64)
  x = A.index(g).load()
  vals = [x.idiv(7), x.imod(7), x.idiv(-3) + x.imod(-3), x // 5 + x % 5, x.idiv(10) * 3 + x.imod(10)]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("int_div_const"))
  return Case("int_div_const", sink, [a, *outs], [1, 2, 3, 4, 5], (n // 64, 1, 1), (64, 1, 1))


def divergent_loop(n=128) -> Case:
  """A loop whose trip count differs per work-item (read from memory): EXEC-masked loop, lanes leave early."""
  rng = _rng(8)
  trips = rng.integers(0, 40, n).astype(np.int32)
  a = rng.integers(-100, 100, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  T, A, O = _p(0, trips), _p(1, a), _p(2, out, False)
  g = _gid(n, 32)
  acc = UOp.placeholder(1, dtypes.int32, 0, AddrSpace.REG)
  init = acc.index(0).store(A.index(g).load())
  r = UOp.range(T.index(g).load(), 0, AxisType.LOOP)
  cur = acc.after(init, r).index(0)
  loop = cur.store(cur.load() * 3 + r - (cur.load() >> 2)).end(r)
  sink = O.index(g).store(acc.after(loop).index(0).load()).sink(arg=KernelInfo("divergent_loop"))
  return Case("divergent_loop", sink, [trips, a, out], [2], (n // 32, 1, 1), (32, 1, 1))


def nested_runtime_loops(rows=8, cols=48) -> Case:
  """Two nested scalar loops with runtime trip counts (kernel arguments), a non-unrolled constant loop of 100."""
  a = _rng(9).standard_normal((rows, cols)).astype(np.float32)
  out = np.zeros((rows, 64), np.float32)
  A, O = _p(0, a), _p(1, out, False)
  n_r, n_c = UOp.variable("nr", 0, rows, slot=2), UOp.variable("nc", 0, cols, slot=3)
  lane = UOp.special(64, "lidx0")
  i = UOp.range(n_r, 0, AxisType.REDUCE)
  j = UOp.range(n_c, 1, AxisType.REDUCE)
  k = UOp.range(100, 2, AxisType.REDUCE)
  s = (A.index(i * cols + j).load() * lane.cast(dtypes.float32)).reduce(i, j)
  t = (k.cast(dtypes.float32) * 0.25).reduce(k)
  sink = O.index(UOp.special(rows, "gidx0") * 64 + lane).store(s + t).sink(arg=KernelInfo("nested_loops"))
  return Case("nested_runtime_loops", sink, [a, out, 5, 37], [1], (rows, 1, 1), (64, 1, 1))


def lds_transpose(n=32, t=8) -> Case:
  """A 2-D work-group transposes a tile through LDS: work-item (x, y) stores element (y, x), reads (x, y) after
  the barrier; 2-D work-group ids and packed 2-D work-item ids."""
  a = _rng(10).integers(-1000, 1000, (n, n)).astype(np.int32)
  out = np.zeros((n, n), np.int32)
  A, O = _p(0, a), _p(1, out, False)
  lx, ly = UOp.special(t, "lidx0"), UOp.special(t, "lidx1")
  gx, gy = UOp.special(n // t, "gidx0"), UOp.special(n // t, "gidx1")
  tile = UOp.placeholder((t, t), dtypes.int32, 0, AddrSpace.LOCAL)
  st = tile.index(ly, lx).store(A.index((gy * t + ly) * n + gx * t + lx).load())
  v = tile.after(st).index(lx, ly).load()
  sink = O.index((gx * t + ly) * n + gy * t + lx).store(v + 1).sink(arg=KernelInfo("lds_transpose"))
  return Case("lds_transpose", sink, [a, out], [1], (n // t, n // t, 1), (t, t, 1))


def select_minmax(n=256) -> Case:
  """max on f32 and i32/u32, min via negation, nested selects on bool masks combined with and/or/xor/not."""
  rng = _rng(11)
  a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  ia, ib = rng.integers(-50, 50, n).astype(np.int32), rng.integers(-50, 50, n).astype(np.int32)
  of, oi, ou = np.zeros(n, np.float32), np.zeros(n, np.int32), np.zeros(n, np.uint32)
  A, B, IA, IB = _p(0, a), _p(1, b), _p(2, ia), _p(3, ib)
  OF, OI, OU = _p(4, of, False), _p(5, oi, False), _p(6, ou, False)
  g = _gid(n, 64)
  x, y, p, q = A.index(g).load(), B.index(g).load(), IA.index(g).load(), IB.index(g).load()
  c1, c2 = x < y, p < q
  c3 = (c1 ^ c2) | ((p.eq(q)).logical_not() & c1.eq(c2))
  f = c3.where(x.maximum(y), -((-x).maximum(-y)))
  i = (c1 & c2.logical_not()).where(p.maximum(q), q * 2 - p)
  u = c2.where(p.cast(dtypes.uint32).maximum(q.cast(dtypes.uint32)), (c1 < c2).cast(dtypes.uint32))
  sink = UOp.sink(OF.index(g).store(f), OI.index(g).store(i), OU.index(g).store(u), arg=KernelInfo("select_minmax"))
  return Case("select_minmax", sink, [a, b, ia, ib, of, oi, ou], [4, 5, 6], (n // 64, 1, 1), (64, 1, 1))


def narrow_memory(n=256) -> Case:
  """int8 and uint16 loads (sign/zero extension), int16 and uint8 stores (wraparound)."""
  rng = _rng(12)
  a = rng.integers(-128, 127, n).astype(np.int8)
  b = rng.integers(0, 65535, n).astype(np.uint16)
  o16, o8 = np.zeros(n, np.int16), np.zeros(n, np.uint8)
  A, B, O16, O8 = _p(0, a), _p(1, b), _p(2, o16, False), _p(3, o8, False)
  g = _gid(n, 64)
  x, y = A.index(g).load(), B.index(g).load()
  v16 = x.cast(dtypes.int16) * 300 + y.cast(dtypes.int16)
  v8 = (y >> 3).cast(dtypes.uint8) + x.cast(dtypes.uint8) * 5
  sink = UOp.sink(O16.index(g).store(v16), O8.index(g).store(v8), arg=KernelInfo("narrow_memory"))
  return Case("narrow_memory", sink, [a, b, o16, o8], [2, 3], (n // 64, 1, 1), (64, 1, 1))


def uniform_scalar_math(n=256) -> Case:
  """Integer arithmetic on kernel arguments and work-group ids (SALU: s_mul, s_lshl, s_ashr, s_max, s_xor) feeding
  per-lane address and value computations."""
  a = _rng(13).integers(-1000, 1000, n * 2).astype(np.int32)
  out = np.zeros(n, np.int32)
  A, O = _p(0, a), _p(1, out, False)
  s = UOp.variable("s", -50, 50, slot=2, dtype=dtypes.int32)
  t = UOp.variable("t", 0, 100, slot=3, dtype=dtypes.int32)
  gx = UOp.special(n // 32, "gidx0").cast(dtypes.int32)
  u = ((s * t + gx * 7) >> 1).maximum(t ^ 5) - (gx << 2)
  g = gx * 32 + UOp.special(32, "lidx0")
  sink = O.index(g).store(A.index(g + t).load() * u + s).sink(arg=KernelInfo("uniform_scalar"))
  return Case("uniform_scalar_math", sink, [a, out, -17, 42], [1], (n // 32, 1, 1), (32, 1, 1))


def grid_3d() -> Case:
  """3-D work-group ids and 3-D work-item ids (packed in v0: x | y << 10 | z << 20)."""
  shape = (3, 4, 5, 2, 3, 4)     # gz, gy, gx, lz, ly, lx
  out = np.zeros(int(np.prod(shape)), np.int32)
  O = _p(0, out, False)
  gx, gy, gz = UOp.special(5, "gidx0"), UOp.special(4, "gidx1"), UOp.special(3, "gidx2")
  lx, ly, lz = UOp.special(4, "lidx0"), UOp.special(3, "lidx1"), UOp.special(2, "lidx2")
  flat = ((((gz * 4 + gy) * 5 + gx) * 2 + lz) * 3 + ly) * 4 + lx
  val = gx * 100000 + gy * 10000 + gz * 1000 + lx * 100 + ly * 10 + lz
  sink = O.index(flat).store(val).sink(arg=KernelInfo("grid3d"))
  return Case("grid_3d", sink, [out], [0], (5, 4, 3), (4, 3, 2))


def big_offsets(n=6000) -> Case:
  """Constant index offsets beyond the 13-bit global offset field and LDS offsets beyond 4 KiB."""
  a = _rng(14).integers(-9, 9, n).astype(np.int32)
  out = np.zeros(64, np.int32)
  A, O = _p(0, a), _p(1, out, False)
  l = UOp.special(64, "lidx0")
  buf = UOp.placeholder(2048, dtypes.int32, 0, AddrSpace.LOCAL)
  st = buf.index(l + 1500).store(A.index(l + 5000).load() + A.index(l + 1000).load() + A.index(l).load())
  sink = O.index(l).store(buf.after(st).index(l + 1500).load() * 2 + A.index(l + 1024).load()).sink(
    arg=KernelInfo("big_offsets"))
  return Case("big_offsets", sink, [a, out], [1], (1, 1, 1), (64, 1, 1))


def transcendental_sin(n=256) -> Case:
  """sin (v_sin_f32 takes revolutions: the backend scales by 1/(2 pi)) on moderate arguments."""
  a = _rng(15).uniform(-3, 3, n).astype(np.float32)
  out = np.zeros(n, np.float32)
  A, O = _p(0, a), _p(1, out, False)
  g = _gid(n, 64)
  sink = O.index(g).store(A.index(g).load().sin() * 2.0).sink(arg=KernelInfo("sin"))
  return Case("transcendental_sin", sink, [a, out], [1], (n // 64, 1, 1), (64, 1, 1), float_rtol=1e-4)


def lds_mirror_two_waves() -> Case:
  """64 work-items (two waves) exchange through LDS: l reads what 63-l stored, so the barrier must hold both waves;
  then a write-after-read of the same tile (the pipeline adds the second barrier)."""
  out = np.zeros(4 * 64, np.int32)
  O = _p(0, out, False)
  g, l = UOp.special(4, "gidx0"), UOp.special(64, "lidx0")
  tile = UOp.placeholder(64, dtypes.int32, 0, AddrSpace.LOCAL)
  x = tile.after(tile.index(l).store(g * 1000 + l)).index(63 - l).load()
  second = tile.after(x).index(l).store(l * 7 + g)
  y = tile.after(second).index((l + 1) % 64).load()
  sink = O.index(g * 64 + l).store(x * 100 + y).sink(arg=KernelInfo("mirror"))
  return Case("lds_mirror_two_waves", sink, [out], [0], (4, 1, 1), (64, 1, 1))


def private_array_dynamic(n=128) -> Case:
  """A private array filled in a loop and read at an index loaded from memory: it lives in scratch (the private
  segment), addressed by a VGPR (scratch_load/store with SVE) and by constants (offset field only)."""
  rng = _rng(16)
  a = rng.integers(-1000, 1000, n * 16).astype(np.int32)
  sel = rng.integers(0, 16, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  A, S, O = _p(0, a), _p(1, sel), _p(2, out, False)
  g = _gid(n, 32)
  p = UOp.placeholder(16, dtypes.int32, 0, AddrSpace.REG)
  j = UOp.range(16, 0, AxisType.LOOP)
  fill = p.index(j).store(A.index(g * 16 + j).load() * 3 + j).end(j)
  k = S.index(g).load()
  v = p.after(fill).index(k).load() + p.after(fill).index(15 - k).load() * 2 + p.after(fill).index(5).load()
  sink = O.index(g).store(v).sink(arg=KernelInfo("private_dynamic"))
  return Case("private_array_dynamic", sink, [a, sel, out], [2], (n // 32, 1, 1), (32, 1, 1))


def reversed_index(n=128) -> Case:
  """out[i] = a[31 - lidx + 32 gidx] + a[lidx]: an index whose register part (-lidx) is negative must not be split
  from its constant (the saddr form's VGPR offset is unsigned: it would address 4 GiB past the buffer)."""
  a = _rng(12).integers(-1000, 1000, n).astype(np.int32)
  out = np.zeros(n, np.int32)
  A, O = _p(0, a), _p(1, out, False)
  g, l = UOp.special(n // 32, "gidx0"), UOp.special(32, "lidx0")
  sink = O.index(g * 32 + l).store(A.index(g * 32 + 31 - l).load() + A.index(g * 32 + l).load()).sink(
    arg=KernelInfo("reversed_index"))
  return Case("reversed_index", sink, [a, out], [1], (n // 32, 1, 1), (32, 1, 1))


def register_spills(n=300) -> Case:
  """300 loaded values kept live at once (a product chain reads the first-loaded ones last): more than the 256
  VGPRs, so the allocator spills to scratch and reloads."""
  a = _rng(17).uniform(0.9, 1.1, n * 64).astype(np.float32)
  out = np.zeros(64, np.float32)
  A, O = _p(0, a), _p(1, out, False)
  l = UOp.special(64, "lidx0")
  vals = [A.index(l * n + k).load() for k in range(n)]
  prod, total = vals[0], vals[0]
  for k in range(1, n): prod = prod * vals[n - k]
  for v in vals[1:]: total = total + v
  sink = O.index(l).store(prod * 1e-3 + total).sink(arg=KernelInfo("spills"))
  return Case("register_spills", sink, [a, out], [1], (1, 1, 1), (64, 1, 1))


ALL = [reversed_index, f16_arith, conversions, transcendental, int_div_runtime, uint_div, int_div_const, divergent_loop,
       nested_runtime_loops, lds_transpose, select_minmax, narrow_memory, uniform_scalar_math, grid_3d, big_offsets,
       transcendental_sin, lds_mirror_two_waves, private_array_dynamic, register_spills]
