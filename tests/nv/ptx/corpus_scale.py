"""The CUDA corpus kernels (tests/fixtures/cuda/kernels.py) at the sizes a user launches: each spec's grid made about
`threads` threads (default 65,536), its buffers as large as the kernel then reads and writes, and numpy's reference
for the larger shape (the fixture's references that name the test's shape are restated here for any shape).

    from corpus_scale import scaled
    spec = scaled(KERNELS["local_array"], 65536)    # a Kernel like the fixture's; spec.check(outputs, data) as usual

A buffer that grows f-fold is filled by f calls of the fixture's own generator (each with its edge values first), so
the data has the fixture's distribution. Used by bench/ptx_interp.py (issue 33 P6) and tests/nv/ptx."""
from __future__ import annotations

import dataclasses

import numpy as np

from tests.fixtures.cuda.kernels import Buffer, Kernel, Scalar, _exact_fma


FIXED = {"atomics": ("hist",), "atomics_shared": ("hist",)}     # per-kernel buffers whose size is not per thread


def _grow(buf: Buffer, f: int, count: int | None = None) -> Buffer:
  count = buf.count * f if count is None else count
  init = buf.init
  if init is not None:
    def init(rng, _orig=buf.init, _n=count):
      parts, got = [], 0
      while got < _n:
        parts.append(np.asarray(_orig(rng)).reshape(-1))
        got += parts[-1].shape[0]
      return np.concatenate(parts)[:_n]
  return dataclasses.replace(buf, count=count, init=init)


def _args(spec: Kernel, f: int, counts: dict | None = None, scalars: dict | None = None) -> tuple:
  """Every buffer f times larger (or counts[name]), scalars replaced by scalars[name]."""
  counts, scalars, out = counts or {}, scalars or {}, []
  for a in spec.args:
    if isinstance(a, Buffer):
      if a.count == 1 or a.name in FIXED.get(spec.name, ()): out.append(a)   # counters, histograms keep their size
      else: out.append(_grow(a, f, counts.get(a.name)))
    elif isinstance(a, Scalar) and a.name in scalars: out.append(dataclasses.replace(a, value=scalars[a.name]))
    else: out.append(a)
  return tuple(out)


def _per_unique(ref, key: str):
  """An elementwise reference computed once per distinct value of input `key` (divergent's Python Collatz loop)."""
  def r(d):
    u, inv = np.unique(d[key], return_inverse=True)
    got = ref({**d, key: u})
    return {k: np.asarray(v)[inv.reshape(-1)] for k, v in got.items()}
  return r


def scaled(spec: Kernel, threads: int = 65536) -> Kernel:
  """spec with about `threads` threads (a whole number of its CTAs; 2-D/3-D grids grow in each dimension)."""
  T = spec.block[0] * spec.block[1] * spec.block[2]
  n0 = T * spec.grid[0] * spec.grid[1] * spec.grid[2]
  f = max(1, threads // n0)
  name = spec.name
  grid = (spec.grid[0] * f, spec.grid[1], spec.grid[2])
  ref, args, tol = spec.reference, _args(spec, f), spec.tolerance
  if name in ("vadd", "saxpy"):
    n = dict((a.name, a.value) for a in spec.args if isinstance(a, Scalar))["n"] * f
    args = _args(spec, f, scalars={"n": n})
    if name == "saxpy":
      ref = lambda d: {"y": _exact_fma(np.full(d["x"].shape[0], d["alpha"]), d["x"], d["y"], np.float32)}
  elif name == "divergent": ref = _per_unique(spec.reference, "in")
  elif name == "uniform_loop":
    nin = 300 * f
    args = _args(spec, f, counts={"in": nin}, scalars={"n": nin})
    iters = dict((a.name, a.value) for a in spec.args if isinstance(a, Scalar))["iters"]
    def ref(d, _it=iters, _n=nin, _t=n0 * f):
      x, i = d["in"].astype(np.int64), np.arange(_t)
      return {"out": sum(x[(i + k) % _n] * (k + 1) for k in range(_it))}
  elif name == "reduce_shared": ref = lambda d: {"out": d["in"].reshape(-1, 256).sum(axis=1)}
  elif name == "dyn_shared": ref = lambda d, _b=spec.block[0]: {"out": d["in"].reshape(-1, _b)[:, ::-1].reshape(-1)}
  elif name == "matmul_tiled":             # n x n matrices, one 16 x 16 tile per CTA: n*n threads
    side = max(64, int(round((n0 * f) ** 0.5)) // 16 * 16)
    args = _args(spec, 1, counts={m: side * side for m in "ABC"}, scalars={"n": side})
    grid = (side // 16, side // 16, 1)
    # |A|, |B| <= 1: the f32 sum of n products is within n * 2^-24 * n of the exact one (n = 64: the fixture's 1e-5)
    tol = {"C": ("abs", max(1e-5, side * side * 2.0**-24))}
    def ref(d, _n=side):
      a, b = d["A"].astype(np.float64).reshape(_n, _n), d["B"].astype(np.float64).reshape(_n, _n)
      return {"C": (a @ b).reshape(-1)}
  elif name == "grid2d":                   # w x h elements, grid (w/16, h/8)
    fy = 1
    while (2 * fy) * (2 * fy) <= f: fy *= 2
    fx = f // fy
    w, h = 64 * fx, 32 * fy
    grid = (4 * fx, 4 * fy, 1)
    args = _args(spec, fx * fy, scalars={"w": w, "h": h})
    ref = lambda d, _w=w, _h=h: {"out": d["in"].reshape(_h, _w).T.reshape(-1)}
  elif name == "grid3d":
    dims, d = [1, 1, 1], 0
    while dims[0] * dims[1] * dims[2] * 2 <= f: dims[d], d = dims[d] * 2, (d + 1) % 3
    fx, fy, fz = dims
    grid = (2 * fx, 3 * fy, 4 * fz)
    args = _args(spec, fx * fy * fz)
    def ref(d, _g=grid):
      X, Y, Z = _g[0] * 4, _g[1] * 2, _g[2] * 2
      z, y, x = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
      return {"out": (((x << 20) | (y << 10) | z) & 0xFFFFFFFF).reshape(-1)}
  elif name == "int128":                   # o[2i], o[2i+1] from x[i], x[i+1], x[i+2] (128-bit words)
    t = n0 * f
    args = _args(spec, f, counts={"x": 2 * (t + 2), "o": 2 * t})
    def ref(d, _t=t):
      x = d["x"].reshape(-1, 2)
      v = [int(lo) | int(hi) << 64 for lo, hi in x]
      r = [(v[i] * v[i + 1] + v[i + 2]) % 2**128 for i in range(_t)]
      return {"o": np.array([w for x in r for w in (x & (2**64 - 1), x >> 64)], np.uint64)}
  elif name == "struct_param":             # out[threadIdx.x]: every CTA writes the same 64 words
    args = spec.args
  return dataclasses.replace(spec, args=args, grid=grid, reference=ref, tolerance=tol)


def threads_of(spec: Kernel) -> int:
  return spec.block[0] * spec.block[1] * spec.block[2] * spec.grid[0] * spec.grid[1] * spec.grid[2]
