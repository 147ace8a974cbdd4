"""OpenCL C kernels for the emulator tests, each with its launch and a numpy reference.

A case is (source, run) where run(k, bufs, rng) launches Kernel k and asserts the results against numpy.
"""
from __future__ import annotations

import pathlib

import numpy as np

CASES: dict[str, tuple[str, object]] = {}
FIXTURE = object()  # @case(FIXTURE): the kernel is the shared corpus kernel tests/fixtures/opencl/<name>.cl
FIXTURE_DIR = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "opencl"


def case(source):
  """Register a case. Kernels that the shared corpus already has are read from it (one source for both), and are
  launched here with other shapes than the corpus test uses (partial waves, other grids)."""
  def deco(fn):
    src = (FIXTURE_DIR / f"{fn.__name__}.cl").read_text() if source is FIXTURE else source
    CASES[fn.__name__] = (src, fn)
    return fn
  return deco


def i32(x):
  return np.asarray(x).astype(np.int64).astype(np.int32)


@case(FIXTURE)
def vadd(k, bufs, rng):
  n = 4096
  a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  pc, c = bufs.array(np.zeros(n, np.float32))
  k(pa, pb, pc, grid=(n // 64, 1, 1), block=(64, 1, 1))
  np.testing.assert_array_equal(c, a + b)


@case(FIXTURE)
def copy_u32(k, bufs, rng):
  n = 1000   # partial last work-group and partial waves
  src = rng.integers(0, 2**32, 1024, dtype=np.uint32)
  ps, _ = bufs.array(src)
  pd, d = bufs.array(np.zeros(1024, np.uint32))
  k(ps, pd, n, grid=(8, 1, 1), block=(125, 1, 1))
  np.testing.assert_array_equal(d[:n], src[:n])
  assert (d[n:] == 0).all()


@case(FIXTURE)
def saxpy(k, bufs, rng):
  n = 3000
  x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  px, _ = bufs.array(x)
  py, out = bufs.array(y)
  k(np.float32(2.5), px, py, np.int32(n), grid=(3072 // 256, 1, 1), block=(256, 1, 1))
  # clang contracts alpha * x + y into v_fma_f32: compare with the fused result (exact product in f64)
  np.testing.assert_array_equal(out, (2.5 * x.astype(np.float64) + y).astype(np.float32))


@case(FIXTURE)
def bitops(k, bufs, rng):
  n = 512
  a = rng.integers(0, 2**32, n, dtype=np.uint32)
  b = rng.integers(0, 2**32, n, dtype=np.uint32)
  a[:4] = [0, 1, 0x80000000, 0xFFFFFFFF]
  b[:4] = [0, 0x80000000, 1, 0]
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(8 * n, np.uint32))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 8)
  s = b & 31
  rot = ((a.astype(np.uint64) << s) | (a.astype(np.uint64) >> ((32 - s) % 32))).astype(np.uint32)
  rot = np.where(s == 0, a, rot)
  clz = np.array([32 - int(v).bit_length() for v in a], np.uint32)
  ctz = np.array([(int(v) & -int(v)).bit_length() - 1 if v else 32 for v in b], np.uint32)
  exp = np.stack([(a & b) ^ (~a | b), a << s, a >> s, (a.view(np.int32) >> s.astype(np.int32)).view(np.uint32), rot,
                  np.array([bin(int(v)).count("1") for v in a], np.uint32), clz, ctz], 1)
  np.testing.assert_array_equal(out, exp)


@case(FIXTURE)
def branch(k, bufs, rng):
  n = 1024
  a = rng.integers(-1000, 1000, n).astype(np.int32)
  pa, _ = bufs.array(a)
  po, out = bufs.array(np.zeros(n, np.int32))
  k(pa, po, grid=(n // 128, 1, 1), block=(128, 1, 1))
  m = np.fmod(a, 3)
  r = np.where(m == 0, a * 2, np.where(m == 1, np.where(a > 50, a - 100, -a), a ^ 0x5A5A))
  r = r + np.where(np.arange(n) & 1, 7, 0)
  np.testing.assert_array_equal(out, r)


@case(FIXTURE)
def divergent_loop(k, bufs, rng):
  n = 256
  start = rng.integers(1, 5000, n).astype(np.uint32)
  ps, _ = bufs.array(start)
  po, out = bufs.array(np.zeros(n, np.uint32))
  k(ps, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  exp = []
  for v in start:
    v, s = int(v), 0
    while v != 1 and s < 1000:
      v = (3 * v + 1) & 0xFFFFFFFF if v & 1 else v >> 1
      s += 1
    exp.append(s)
  np.testing.assert_array_equal(out, np.array(exp, np.uint32))


@case(FIXTURE)
def uniform_loop(k, bufs, rng):
  n = 256
  a = rng.random(n, dtype=np.float32)
  pa, _ = bufs.array(a)
  po, out = bufs.array(np.zeros(n, np.float32))
  k(pa, po, np.int32(37), grid=(n // 64, 1, 1), block=(64, 1, 1))
  acc = np.zeros(n, np.float32)
  for j in range(37):
    acc = (acc.astype(np.float64) * 0.5 + a.astype(np.float64) * j).astype(np.float32)   # fma contraction
  np.testing.assert_allclose(out, acc, rtol=1e-6)


@case(FIXTURE)
def intdiv(k, bufs, rng):
  n = 512
  a = rng.integers(-2**31, 2**31, n).astype(np.int32)
  b = rng.integers(-70000, 70000, n).astype(np.int32)
  b[b == 0] = 3
  b[:4] = [1, -1, 7, 2**31 - 1]
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  outs = [bufs.array(np.zeros(n, t)) for t in (np.int32, np.int32, np.uint32, np.uint32, np.int64)]
  k(pa, pb, *[p for p, _ in outs], grid=(n // 64, 1, 1), block=(64, 1, 1))
  A, B = a.astype(np.int64), b.astype(np.int64)
  q = np.trunc(A / B).astype(np.int64)
  q = np.array([int(x / y) if abs(x) < 2**52 else 0 for x, y in zip(A, B)])
  q = np.array([(abs(int(x)) // abs(int(y))) * (1 if (x >= 0) == (y >= 0) else -1) for x, y in zip(A, B)])
  np.testing.assert_array_equal(outs[0][1], i32(q))
  np.testing.assert_array_equal(outs[1][1], i32(A - q * B))
  ua, ub = a.view(np.uint32), b.view(np.uint32)
  np.testing.assert_array_equal(outs[2][1], ua // ub)
  np.testing.assert_array_equal(outs[3][1], ua % ub)
  big = [int(x) * 1000003 for x in a]
  q64 = [(abs(x) // abs(int(y))) * (1 if (x >= 0) == (y >= 0) else -1) for x, y in zip(big, b)]
  np.testing.assert_array_equal(outs[4][1], np.array(q64, np.int64))


@case(FIXTURE)
def lds_reduce(k, bufs, rng):
  groups = 16
  x = rng.integers(0, 100, groups * 256).astype(np.float32)
  px, _ = bufs.array(x)
  pp, out = bufs.array(np.zeros(groups, np.float32))
  k(px, pp, grid=(groups, 1, 1), block=(256, 1, 1))
  np.testing.assert_array_equal(out, x.reshape(groups, 256).sum(1))


@case(FIXTURE)
def lds_scan(k, bufs, rng):
  groups = 8
  x = rng.integers(-1000, 1000, groups * 128).astype(np.int32)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(groups * 128, np.int32))
  k(px, po, grid=(groups, 1, 1), block=(128, 1, 1))
  np.testing.assert_array_equal(out, np.cumsum(x.reshape(groups, 128), 1).reshape(-1))


@case(FIXTURE)
def ids2d(k, bufs, rng):
  lx, ly, gx, gy = 8, 4, 3, 5
  W, H = lx * gx, ly * gy
  po, out = bufs.array(np.zeros(W * H * 8, np.uint32))
  k(po, grid=(gx, gy, 1), block=(lx, ly, 1))
  out = out.reshape(H, W, 8)
  y, x = np.mgrid[0:H, 0:W]
  exp = np.stack([x % lx, y % ly, x // lx, y // ly, np.full_like(x, lx), np.full_like(x, ly), np.full_like(x, gx),
                  np.full_like(x, gy)], -1)
  np.testing.assert_array_equal(out, exp)


@case(FIXTURE)
def transpose2d(k, bufs, rng):
  W, H = 64, 48
  a = rng.random((H, W), dtype=np.float32)
  pa, _ = bufs.array(a)
  po, out = bufs.array(np.zeros((W, H), np.float32))
  k(pa, po, grid=(W // 16, H // 16, 1), block=(16, 16, 1))
  y, x = np.mgrid[0:H, 0:W]
  exp = (a * np.float32(2) + x.astype(np.float32) - y.astype(np.float32)).astype(np.float32).T
  np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)


@case(FIXTURE)
def matmul_tiled(k, bufs, rng):
  M, N, K = 32, 48, 64
  A = rng.integers(-4, 5, (M, K)).astype(np.float32)
  B = rng.integers(-4, 5, (K, N)).astype(np.float32)
  pa, _ = bufs.array(A)
  pb, _ = bufs.array(B)
  pc, C = bufs.array(np.zeros((M, N), np.float32))
  k(pa, pb, pc, np.int32(M), np.int32(N), np.int32(K), grid=(N // 16, M // 16, 1), block=(16, 16, 1))
  np.testing.assert_array_equal(C, A @ B)


@case(FIXTURE)
def minmax(k, bufs, rng):
  n = 256
  a = rng.integers(-300, 300, n).astype(np.int32)
  f = ((rng.random(n) - 0.5) * 6).astype(np.float32)
  pa, _ = bufs.array(a)
  pf, _ = bufs.array(f)
  pi, io = bufs.array(np.zeros(4 * n, np.int32))
  pfo, fo = bufs.array(np.zeros(2 * n, np.float32))
  k(pa, pf, pi, pfo, grid=(n // 64, 1, 1), block=(64, 1, 1))
  io, fo = io.reshape(n, 4), fo.reshape(n, 2)
  np.testing.assert_array_equal(io[:, 0], np.minimum(a, 100) + np.maximum(a, -100))
  np.testing.assert_array_equal(io[:, 1], np.clip(a, -50, 50))
  np.testing.assert_array_equal(io[:, 2], (a & 0xFFF) * 37 - a)
  np.testing.assert_array_equal(io[:, 3], np.trunc(f * np.float32(3)).astype(np.int32) + np.abs(a))
  np.testing.assert_array_equal(fo[:, 0], np.minimum(f, np.float32(0.5)) + np.maximum(f, np.float32(-0.5)))
  np.testing.assert_array_equal(fo[:, 1], np.clip(f, -1, 1) * a.astype(np.float32))


@case(FIXTURE)
def float4_ops(k, bufs, rng):
  n = 128
  a = rng.integers(-8, 8, (n, 4)).astype(np.float32)
  b = rng.integers(-8, 8, (n, 4)).astype(np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros((n, 4), np.float32))
  pd, dots = bufs.array(np.zeros(n, np.float32))
  k(pa, pb, po, pd, grid=(n // 64, 1, 1), block=(64, 1, 1))
  np.testing.assert_array_equal(out, a * b + a[:, ::-1])
  np.testing.assert_array_equal(dots, (a * b).sum(1))


@case(FIXTURE)
def int64(k, bufs, rng):
  n = 128
  a = rng.integers(0, 2**64, n, dtype=np.uint64)
  b = rng.integers(0, 2**64, n, dtype=np.uint64)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(4 * n, np.uint64))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 4)
  M = 2**64
  exp = [[(int(x) * int(y) + 0x123456789ABCDEF) % M, ((int(x) >> (int(y) & 63)) | (int(y) << 3)) % M,
          (int(x) * int(y)) >> 64,
          (int(x) - int(y)) % M if np.int64(np.uint64(x).view(np.int64)) < np.uint64(y).view(np.int64)
          else (int(y) - int(x)) % M] for x, y in zip(a, b)]
  np.testing.assert_array_equal(out, np.array(exp, np.uint64))


@case(FIXTURE)
def fp16(k, bufs, rng):
  n = 256
  a = ((rng.random(n) - 0.5) * 20).astype(np.float16)
  b = ((rng.random(n) - 0.5) * 20).astype(np.float16)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(2 * n, np.float16))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 2)
  t = (a * b).astype(np.float16)
  # clang may contract x*y+x into one fma: accept either rounding
  fused = (a.astype(np.float64) * b + a).astype(np.float16)
  ok = (out[:, 0] == (t + a)) | (out[:, 0] == fused)
  assert ok.all(), (out[:, 0][~ok], (t + a)[~ok])
  np.testing.assert_array_equal(out[:, 1], np.where(a > b, a - b, b - a))


@case(FIXTURE)
def half2_fma(k, bufs, rng):
  n = 256
  a, b, c = (((rng.random((n, 2)) - 0.5) * 8).astype(np.float16) for _ in range(3))
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  pc, _ = bufs.array(c)
  po, out = bufs.array(np.zeros((n, 2), np.float16))
  k(pa, pb, pc, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  f = (a.astype(np.float64) * b + c).astype(np.float16)
  np.testing.assert_array_equal(out, (f * np.array([0.5, 2.0], np.float16)).astype(np.float16))


@case(FIXTURE)
def f64(k, bufs, rng):
  n = 128
  a = (rng.random(n) - 0.5) * 100
  b = rng.random(n) * 50 + 0.01
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(4 * n, np.float64))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 4)
  np.testing.assert_allclose(out[:, 0], a * b + 1.0, rtol=1e-15)
  np.testing.assert_array_equal(out[:, 1], a / b)
  np.testing.assert_array_equal(out[:, 2], np.sqrt(b))
  np.testing.assert_array_equal(out[:, 3], np.trunc(a * 1000.0) + np.arange(n))


@case(FIXTURE)
def math(k, bufs, rng):
  n = 256
  a = ((rng.random(n) - 0.5) * 20).astype(np.float32)
  b = (rng.random(n) * 100 + 1e-3).astype(np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(8 * n, np.float32))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 8).astype(np.float64)
  A, B = a.astype(np.float64), b.astype(np.float64)
  exp = np.stack([np.sin(A), np.cos(A), np.exp(A * 0.25), np.log(B), np.sqrt(B), B ** 1.5, np.arctan2(A, B),
                  np.floor(A) + np.abs(A)], 1)
  # OpenCL full-precision ulp limits are a few ulp: compare with a relative tolerance of a few f32 ulps
  np.testing.assert_allclose(out, exp, rtol=4e-6, atol=4e-7)


@case(FIXTURE)
def native_math(k, bufs, rng):
  n = 256
  a = ((rng.random(n) - 0.5) * 6).astype(np.float32)
  b = (rng.random(n) * 100 + 1e-3).astype(np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(6 * n, np.float32))
  k(pa, pb, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 6).astype(np.float64)
  A, B = a.astype(np.float64), b.astype(np.float64)
  exp = np.stack([np.sin(A), np.cos(A), np.exp2(A * 0.25), np.log2(B), 1 / B, 1 / np.sqrt(B)], 1)
  np.testing.assert_allclose(out, exp, rtol=1e-5, atol=1e-6)


@case(FIXTURE)
def private_array(k, bufs, rng):
  n = 128
  idx = rng.integers(0, 1000, n).astype(np.int32)
  pi, _ = bufs.array(idx)
  po, out = bufs.array(np.zeros(n, np.int32))
  k(pi, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  exp = [sum(((j := (int(idx[i]) + 7 * kk) & 63) * i + (j ^ 5)) for kk in range(8)) for i in range(n)]
  np.testing.assert_array_equal(out, np.array(exp, np.int32))


@case(FIXTURE)
def atomics_global(k, bufs, rng):
  n = 2048
  x = rng.integers(0, 2**31, n).astype(np.uint32)
  px, _ = bufs.array(x)
  ph, hist = bufs.array(np.zeros(64, np.uint32))
  pm, mx = bufs.array(np.zeros(1, np.uint32))
  ps, sm = bufs.array(np.zeros(1, np.int32))
  k(px, ph, pm, ps, grid=(n // 256, 1, 1), block=(256, 1, 1))
  np.testing.assert_array_equal(hist, np.bincount(x & 63, minlength=64))
  assert mx[0] == x.max()
  assert sm[0] == int((x & 0xFF).sum())


@case(FIXTURE)
def atomics_lds(k, bufs, rng):
  n = 1024
  x = rng.integers(0, 1000, n).astype(np.uint32)
  px, _ = bufs.array(x)
  ph, hist = bufs.array(np.zeros(32, np.uint32))
  k(px, ph, grid=(n // 128, 1, 1), block=(128, 1, 1))
  np.testing.assert_array_equal(hist, np.bincount(x % 32, minlength=32))


@case(FIXTURE)
def empty(k, bufs, rng):
  st = k(grid=(4, 1, 1), block=(64, 1, 1))
  assert st.waves == 4 * 64 // k.wave_size


@case("""kernel void ids3d(global uint *out) {
  size_t gx = get_global_id(0), gy = get_global_id(1), gz = get_global_id(2);
  size_t idx = ((gz * get_global_size(1) + gy) * get_global_size(0) + gx) * 4;
  out[idx + 0] = get_local_id(0) | (get_local_id(1) << 8) | (get_local_id(2) << 16);
  out[idx + 1] = get_group_id(0) | (get_group_id(1) << 8) | (get_group_id(2) << 16);
  out[idx + 2] = get_local_size(2) | (get_num_groups(2) << 8) | (get_work_dim() << 16);
  out[idx + 3] = get_local_linear_id();
}""")
def ids3d(k, bufs, rng):
  l, g = (4, 3, 5), (2, 3, 2)
  G = [a * b for a, b in zip(l, g)]
  po, out = bufs.array(np.zeros(G[0] * G[1] * G[2] * 4, np.uint32))
  k(po, grid=g, block=l)
  out = out.reshape(G[2], G[1], G[0], 4)
  z, y, x = np.mgrid[0:G[2], 0:G[1], 0:G[0]]
  lx, ly, lz = x % l[0], y % l[1], z % l[2]
  np.testing.assert_array_equal(out[..., 0], lx | (ly << 8) | (lz << 16))
  np.testing.assert_array_equal(out[..., 1], (x // l[0]) | ((y // l[1]) << 8) | ((z // l[2]) << 16))
  np.testing.assert_array_equal(out[..., 2], l[2] | (g[2] << 8) | (3 << 16))
  np.testing.assert_array_equal(out[..., 3], lx + l[0] * (ly + l[1] * lz))


@case("""kernel void atomics_rtn(global uint *ctr, global uint *ids, global int *mn, global uint *bits,
                          global uint *xchg, global uint *cas) {
  uint i = get_global_id(0);
  ids[i] = atomic_inc(ctr);
  atomic_min(mn, (int)(i * 7919u % 1000u) - 500);
  atomic_or(&bits[0], 1u << (i % 32u));
  atomic_and(&bits[1], ~(1u << (i % 31u)));
  atomic_xor(&bits[2], i);
  atomic_sub(&bits[3], i);
  xchg[i] = atomic_xchg(&xchg[1024], i);
  uint old = atomic_cmpxchg(&cas[0], i, i + 1);
  cas[1 + i] = old;
}""")
def atomics_rtn(k, bufs, rng):
  n = 512
  pc, ctr = bufs.array(np.zeros(1, np.uint32))
  pi, ids = bufs.array(np.zeros(n, np.uint32))
  pm, mn = bufs.array(np.array([1000], np.int32))
  pb, bits = bufs.array(np.array([0, 0xFFFFFFFF, 0, 0], np.uint32))
  px, xchg = bufs.array(np.full(1025, 0xAAAA, np.uint32))
  ps, cas = bufs.array(np.zeros(n + 1, np.uint32))
  k(pc, pi, pm, pb, px, ps, grid=(n // 128, 1, 1), block=(128, 1, 1))
  i = np.arange(n, dtype=np.uint32)
  assert ctr[0] == n and sorted(ids) == list(range(n))
  assert mn[0] == (i * 7919 % 1000).astype(np.int32).min() - 500
  assert bits[0] == 0xFFFFFFFF
  assert bits[1] == 0x80000000
  assert bits[2] == np.bitwise_xor.reduce(i)
  assert bits[3] == (-int(i.sum())) % 2**32
  # exchange: the returned values plus the final value are a permutation of the initial value and every i
  assert sorted(list(xchg[:n]) + [xchg[1024]]) == sorted([0xAAAA] + list(range(n)))
  # compare-and-swap chain: the counter only advances when the expected value matches
  assert cas[0] >= 1
  assert (cas[1:] <= cas[0]).all()


@case("""kernel void narrow_types(global const uchar *a, global const char *b, global const ushort *c,
                            global const short *d, global uchar *o8, global short *o16, global int *o32) {
  int i = get_global_id(0);
  o8[i] = (uchar)(a[i] + b[i]);
  o16[i] = (short)(c[i] - d[i]);
  o32[i] = (int)a[i] * (int)b[i] + (int)c[i] * (int)d[i];
}""")
def narrow_types(k, bufs, rng):
  n = 256
  a = rng.integers(0, 256, n).astype(np.uint8)
  b = rng.integers(-128, 128, n).astype(np.int8)
  c = rng.integers(0, 65536, n).astype(np.uint16)
  d = rng.integers(-32768, 32768, n).astype(np.int16)
  ps = [bufs.array(x)[0] for x in (a, b, c, d)]
  p8, o8 = bufs.array(np.zeros(n, np.uint8))
  p16, o16 = bufs.array(np.zeros(n, np.int16))
  p32, o32 = bufs.array(np.zeros(n, np.int32))
  k(*ps, p8, p16, p32, grid=(n // 64, 1, 1), block=(64, 1, 1))
  np.testing.assert_array_equal(o8, (a.astype(np.int32) + b).astype(np.uint8))
  np.testing.assert_array_equal(o16, (c.astype(np.int32) - d).astype(np.int16))
  np.testing.assert_array_equal(o32, a.astype(np.int32) * b + c.astype(np.int32) * d)


@case("""kernel void conversions(global const float *f, global const uint *u, global const int *s,
                           global float *of, global uint *ou, global int *oi) {
  int i = get_global_id(0);
  float x = f[i];
  of[4 * i + 0] = (float)u[i];
  of[4 * i + 1] = (float)s[i];
  of[4 * i + 2] = rint(x) + trunc(x) * 2.0f;
  of[4 * i + 3] = ceil(x) - round(x);
  ou[2 * i + 0] = convert_uint_sat(x * 1000.0f);
  ou[2 * i + 1] = convert_uint(fabs(x));
  oi[2 * i + 0] = convert_int_sat(x * 1e9f);
  oi[2 * i + 1] = convert_int_rte(x);
}""")
def conversions(k, bufs, rng):
  n = 256
  f = ((rng.random(n) - 0.5) * 200).astype(np.float32)
  f[:6] = [0.5, 1.5, -2.5, 2.5, -0.5, 1e5]
  u = rng.integers(0, 2**32, n, dtype=np.uint32)
  s = rng.integers(-2**31, 2**31, n).astype(np.int32)
  pf, _ = bufs.array(f)
  pu, _ = bufs.array(u)
  ps, _ = bufs.array(s)
  pof, of = bufs.array(np.zeros(4 * n, np.float32))
  pou, ou = bufs.array(np.zeros(2 * n, np.uint32))
  poi, oi = bufs.array(np.zeros(2 * n, np.int32))
  k(pf, pu, ps, pof, pou, poi, grid=(n // 64, 1, 1), block=(64, 1, 1))
  of, ou, oi = of.reshape(n, 4), ou.reshape(n, 2), oi.reshape(n, 2)
  np.testing.assert_array_equal(of[:, 0], u.astype(np.float32))
  np.testing.assert_array_equal(of[:, 1], s.astype(np.float32))
  np.testing.assert_array_equal(of[:, 2], np.rint(f) + np.trunc(f) * np.float32(2))
  rnd = np.sign(f) * np.floor(np.abs(f.astype(np.float64)) + 0.5)
  np.testing.assert_array_equal(of[:, 3], np.ceil(f) - rnd.astype(np.float32))
  x1000 = f * np.float32(1000)
  np.testing.assert_array_equal(ou[:, 0], np.clip(np.nan_to_num(np.trunc(x1000.astype(np.float64))), 0, 2**32 - 1)
                                .astype(np.uint32))
  np.testing.assert_array_equal(ou[:, 1], np.trunc(np.abs(f)).astype(np.uint32))
  big = (f * np.float32(1e9)).astype(np.float64)
  np.testing.assert_array_equal(oi[:, 0], np.clip(np.trunc(big), -2**31, 2**31 - 1).astype(np.int32))
  np.testing.assert_array_equal(oi[:, 1], np.rint(f).astype(np.int32))


@case("""kernel void lds64(global const double *in, global double *out, global long *lout) {
  local double t[128];
  local long l[128];
  uint lid = get_local_id(0);
  t[lid] = in[get_global_id(0)];
  l[lid] = (long)lid * -3000000000L;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[127 - lid] + t[(lid + 1) & 127];
  lout[get_global_id(0)] = l[lid ^ 1] + l[(lid + 64) & 127];
}""")
def lds64(k, bufs, rng):
  groups = 4
  x = rng.random(groups * 128)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(groups * 128))
  pl, lout = bufs.array(np.zeros(groups * 128, np.int64))
  k(px, po, pl, grid=(groups, 1, 1), block=(128, 1, 1))
  t = x.reshape(groups, 128)
  lid = np.arange(128)
  np.testing.assert_array_equal(out.reshape(groups, 128), t[:, 127 - lid] + t[:, (lid + 1) & 127])
  lv = lid.astype(np.int64) * -3000000000
  np.testing.assert_array_equal(lout.reshape(groups, 128), np.tile(lv[lid ^ 1] + lv[(lid + 64) & 127], (groups, 1)))


@case("""__attribute__((reqd_work_group_size(1024, 1, 1)))
kernel void big_group(global const uint *in, global uint *out) {
  local uint buf[1024];
  uint lid = get_local_id(0);
  buf[lid] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  uint acc = 0;
  for (uint k = 0; k < 1024; k += 97) acc += buf[(lid + k) & 1023];
  barrier(CLK_LOCAL_MEM_FENCE);
  buf[1023 - lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = buf[lid];
}""")
def big_group(k, bufs, rng):
  groups = 2
  x = rng.integers(0, 1000, groups * 1024).astype(np.uint32)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(groups * 1024, np.uint32))
  k(px, po, grid=(groups, 1, 1), block=(1024, 1, 1))
  t = x.reshape(groups, 1024)
  lid = np.arange(1024)
  acc = sum(t[:, (lid + kk) & 1023] for kk in range(0, 1024, 97))
  np.testing.assert_array_equal(out.reshape(groups, 1024), acc[:, 1023 - lid])


@case("""typedef struct { int a; float b; long c; } params_t;
kernel void struct_arg(params_t p, global float *out, global long *lout) {
  int i = get_global_id(0);
  out[i] = p.b * (float)(i + p.a);
  lout[i] = p.c + i;
}""")
def struct_arg(k, bufs, rng):
  n = 64
  raw = np.zeros(16, np.uint8)
  raw[0:4] = np.frombuffer(np.int32(5).tobytes(), np.uint8)
  raw[4:8] = np.frombuffer(np.float32(0.25).tobytes(), np.uint8)
  raw[8:16] = np.frombuffer(np.int64(-10**12).tobytes(), np.uint8)
  po, out = bufs.array(np.zeros(n, np.float32))
  pl, lout = bufs.array(np.zeros(n, np.int64))
  k(np.void(raw.tobytes()), po, pl, grid=(1, 1, 1), block=(64, 1, 1))
  np.testing.assert_array_equal(out, np.float32(0.25) * (np.arange(n) + 5).astype(np.float32))
  np.testing.assert_array_equal(lout, -10**12 + np.arange(n))


@case("""kernel void select_ops(global const int *a, global const int *b, global int *out, global float *fo) {
  int i = get_global_id(0);
  int x = a[i], y = b[i];
  out[4 * i + 0] = select(x, y, x < y);
  out[4 * i + 1] = bitselect(x, y, 0x0f0f0f0f);
  out[4 * i + 2] = mul_hi(x, y) + mad_hi(x, y, 3);
  out[4 * i + 3] = abs_diff(x, y) + hadd(x, y) + rhadd(x, y);
  float fx = (float)x / 7.0f;
  fo[2 * i + 0] = copysign(fx, (float)y) + fmod(fx, 3.0f);
  fo[2 * i + 1] = mad(fx, 0.5f, (float)y) - fdim(fx, 1.0f);
}""")
def select_ops(k, bufs, rng):
  n = 256
  # |a - b| < 2**31: rocm-device-libs computes abs_diff(int) as max(d, -d) of the wrapped difference
  a = rng.integers(-2**30, 2**30, n).astype(np.int32)
  b = rng.integers(-2**30, 2**30, n).astype(np.int32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(4 * n, np.int32))
  pf, fo = bufs.array(np.zeros(2 * n, np.float32))
  k(pa, pb, po, pf, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 4)
  A, B = a.astype(np.int64), b.astype(np.int64)
  np.testing.assert_array_equal(out[:, 0], np.where(a < b, b, a))
  np.testing.assert_array_equal(out[:, 1], (a & ~np.int32(0x0F0F0F0F)) | (b & np.int32(0x0F0F0F0F)))
  np.testing.assert_array_equal(out[:, 2], i32((A * B >> 32) + (A * B >> 32) + 3))
  np.testing.assert_array_equal(out[:, 3], i32(np.abs(A - B) + ((A + B) >> 1) + ((A + B + 1) >> 1)))
  fx = a.astype(np.float32) / np.float32(7)
  fo = fo.reshape(n, 2)
  np.testing.assert_allclose(fo[:, 0], np.copysign(fx, b.astype(np.float32)) + np.fmod(fx, np.float32(3)),
                             rtol=1e-6)
  # mad may or may not be fused and the terms cancel: tolerance relative to the operands' size
  exp1 = fx.astype(np.float64) * 0.5 + b - np.maximum(fx.astype(np.float64) - 1, 0)
  assert (np.abs(fo[:, 1] - exp1) <= 4e-7 * (np.abs(fx) + np.abs(b))).all()


SUBGROUP_FLAGS = ("-cl-std=CL2.0",)


@case("""kernel void subgroups(global const float *in, global float *out, global uint *o2) {
  uint i = get_global_id(0);
  float x = in[i];
  out[3 * i + 0] = work_group_reduce_add(x);
  out[3 * i + 1] = sub_group_scan_inclusive_add(x);
  out[3 * i + 2] = sub_group_reduce_add(x);
  o2[2 * i + 0] = sub_group_broadcast(i, 3) + get_sub_group_local_id();
  o2[2 * i + 1] = sub_group_reduce_max((uint)(x * 1000.0f)) + work_group_reduce_min(i);
}""")
def subgroups(k, bufs, rng):
  groups, lsz = 4, 128
  x = rng.integers(0, 64, groups * lsz).astype(np.float32)   # small integers: sums are exact in any order
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(3 * groups * lsz, np.float32))
  p2, o2 = bufs.array(np.zeros(2 * groups * lsz, np.uint32))
  k(px, po, p2, grid=(groups, 1, 1), block=(lsz, 1, 1))
  out, o2 = out.reshape(-1, 3), o2.reshape(-1, 2)
  i = np.arange(groups * lsz)
  W = k.wave_size              # a sub-group is a wave
  wg = x.reshape(groups, lsz)
  sg = x.reshape(-1, W)
  np.testing.assert_array_equal(out[:, 0], np.repeat(wg.sum(1), lsz))
  np.testing.assert_array_equal(out[:, 1], np.cumsum(sg, 1).reshape(-1))
  np.testing.assert_array_equal(out[:, 2], np.repeat(sg.sum(1), W))
  np.testing.assert_array_equal(o2[:, 0], (i // W) * W + 3 + i % W)
  np.testing.assert_array_equal(o2[:, 1], np.repeat((sg * 1000).astype(np.uint32).max(1), W) + (i // lsz) * lsz)


@case("""kernel void f64_math(global const double *a, global double *o) {
  int i = get_global_id(0);
  double x = a[i];
  o[4 * i + 0] = sin(x);
  o[4 * i + 1] = exp(x * 0.01);
  o[4 * i + 2] = log(fabs(x) + 1.0);
  o[4 * i + 3] = pow(fabs(x), 0.37);
}""")
def f64_math(k, bufs, rng):
  n = 256
  x = (rng.random(n) - 0.5) * 200
  x[:64] *= 1e6            # large arguments: sin's Payne-Hanek reduction (v_trig_preop_f64)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(4 * n))
  k(px, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  out = out.reshape(n, 4)
  with np.errstate(over="ignore"):   # exp overflows to inf for the large arguments, on both sides
    exp = np.stack([np.sin(x), np.exp(x * 0.01), np.log(np.abs(x) + 1.0), np.abs(x) ** 0.37], 1)
  np.testing.assert_allclose(out, exp, rtol=1e-14, atol=1e-15)


GENERIC_FLAGS = ("-cl-std=CL2.0",)


@case("""__attribute__((noinline)) void bump(int *p, int v) { p[0] += v; p[1] = atomic_fetch_add((volatile atomic_int *)(p + 2), v); }
kernel void generic_ptrs(global int *g, global int *out) {
  local int l[3 * 64];
  int priv[3 * 64];
  int i = get_local_id(0);
  for (int k = 0; k < 3; k++) { l[3 * i + k] = 0; priv[3 * i + k] = 10 * k; }
  barrier(CLK_LOCAL_MEM_FENCE);
  bump(g + 3 * i, i);
  bump(l + 3 * i, 2 * i);
  bump(priv + 3 * i, 3 * i);
  barrier(CLK_LOCAL_MEM_FENCE);
  out[3 * i] = l[3 * i] + l[3 * i + 1];
  out[3 * i + 1] = priv[3 * i] + priv[3 * i + 1] + priv[3 * i + 2];
  out[3 * i + 2] = l[3 * i + 2];
}""")
def generic_ptrs(k, bufs, rng):
  n = 64
  g = np.zeros(3 * n, np.int32)
  g[2::3] = 1000
  pg, gout = bufs.array(g)
  po, out = bufs.array(np.zeros(3 * n, np.int32))
  k(pg, po, grid=(1, 1, 1), block=(n, 1, 1))
  i = np.arange(n)
  # a non-inlined function on generic pointers (FLAT instructions, calls through s_swappc_b64) into global, local
  # and private memory
  np.testing.assert_array_equal(gout.reshape(n, 3), np.stack([i, np.full(n, 1000), 1000 + i], 1))
  np.testing.assert_array_equal(out[0::3], 2 * i + 0)                # l[0] = 2i, l[1] = old l[2] = 0
  np.testing.assert_array_equal(out[1::3], 3 * i + 20 + (20 + 3 * i))  # priv: 3i, old priv[2] = 20, 20 + 3i
  np.testing.assert_array_equal(out[2::3], 2 * i)


@case("""kernel void lane_moves(global const uint *in, global uint *out) {
  uint i = get_global_id(0);
  uint x = in[i];
  uint lane = __builtin_amdgcn_mbcnt_lo(~0u, 0u);
  out[3 * i + 0] = __builtin_amdgcn_ds_bpermute(((lane * 7) & 31) << 2, x);
  out[3 * i + 1] = __builtin_amdgcn_ds_swizzle(x, 0x041f);
  out[3 * i + 2] = __builtin_amdgcn_ds_permute(((lane + 3) & 31) << 2, x);
}""")
def lane_moves(k, bufs, rng):
  n = 128
  x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(3 * n, np.uint32))
  k(px, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  W = k.wave_size
  w = x.reshape(-1, W)
  lanes = np.arange(W)
  lane = np.minimum(lanes, 32)          # mbcnt_lo(~0, 0): the lanes below within EXEC_LO (all 32 from lane 32 on)
  out = out.reshape(-1, W, 3)
  np.testing.assert_array_equal(out[..., 0], w[:, (lane * 7) & 31])
  np.testing.assert_array_equal(out[..., 1], w[:, (lanes & ~31) | ((lanes & 31) ^ 1)])   # swizzle: per 32 lanes
  # ds_permute: lane l's value goes to lane (lane(l) + 3) & 31; lanes nothing is sent to read 0 (where several
  # lanes send to one lane (wave64), which one wins is not checked)
  dst = (lane + 3) & 31
  senders = [np.nonzero(dst == d)[0] for d in range(W)]
  for d, src in enumerate(senders):
    if len(src) == 1: np.testing.assert_array_equal(out[:, d, 2], w[:, src[0]])
    elif not len(src): assert (out[:, d, 2] == 0).all()
