"""OpenCL C kernels for the emulator tests, each with its launch and a numpy reference.

A case is (source, run) where run(k, bufs, rng) launches Kernel k and asserts the results against numpy.
"""
from __future__ import annotations

import numpy as np

CASES: dict[str, tuple[str, object]] = {}


def case(source: str):
  def deco(fn):
    CASES[fn.__name__] = (source, fn)
    return fn
  return deco


def i32(x):
  return np.asarray(x).astype(np.int64).astype(np.int32)


@case("""kernel void vadd(global const float *a, global const float *b, global float *c) {
  int i = get_global_id(0);
  c[i] = a[i] + b[i];
}""")
def vadd(k, bufs, rng):
  n = 4096
  a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  pc, c = bufs.array(np.zeros(n, np.float32))
  k(pa, pb, pc, grid=(n // 64, 1, 1), block=(64, 1, 1))
  np.testing.assert_array_equal(c, a + b)


@case("""kernel void copy_u32(global const uint *src, global uint *dst, uint n) {
  uint i = get_global_id(0);
  if (i < n) dst[i] = src[i];
}""")
def copy_u32(k, bufs, rng):
  n = 1000   # partial last work-group and partial waves
  src = rng.integers(0, 2**32, 1024, dtype=np.uint32)
  ps, _ = bufs.array(src)
  pd, d = bufs.array(np.zeros(1024, np.uint32))
  k(ps, pd, n, grid=(8, 1, 1), block=(125, 1, 1))
  np.testing.assert_array_equal(d[:n], src[:n])
  assert (d[n:] == 0).all()


@case("""kernel void saxpy(float alpha, global const float *x, global float *y, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i] + y[i];
}""")
def saxpy(k, bufs, rng):
  n = 3000
  x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  px, _ = bufs.array(x)
  py, out = bufs.array(y)
  k(np.float32(2.5), px, py, np.int32(n), grid=(3072 // 256, 1, 1), block=(256, 1, 1))
  # clang contracts alpha * x + y into v_fma_f32: compare with the fused result (exact product in f64)
  np.testing.assert_array_equal(out, (2.5 * x.astype(np.float64) + y).astype(np.float32))


@case("""kernel void bitops(global const uint *a, global const uint *b, global uint *out) {
  uint i = get_global_id(0);
  uint x = a[i], y = b[i];
  uint s = y & 31u;
  out[8 * i + 0] = (x & y) ^ (~x | y);
  out[8 * i + 1] = x << s;
  out[8 * i + 2] = x >> s;
  out[8 * i + 3] = (uint)((int)x >> s);
  out[8 * i + 4] = rotate(x, s);
  out[8 * i + 5] = popcount(x);
  out[8 * i + 6] = clz(x);
  out[8 * i + 7] = ctz(y);
}""")
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


@case("""kernel void branch(global const int *a, global int *out) {
  int i = get_global_id(0);
  int x = a[i];
  int r;
  if (x % 3 == 0) {
    r = x * 2;
  } else if (x % 3 == 1) {
    if (x > 50) r = x - 100;
    else r = -x;
  } else {
    r = x ^ 0x5a5a;
  }
  if (i & 1) r += 7;
  out[i] = r;
}""")
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


@case("""kernel void divergent_loop(global const uint *start, global uint *steps) {
  uint i = get_global_id(0);
  uint n = start[i];
  uint s = 0;
  while (n != 1u && s < 1000u) {
    n = (n & 1u) ? 3u * n + 1u : n >> 1;
    s++;
  }
  steps[i] = s;
}""")
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


@case("""kernel void uniform_loop(global const float *a, global float *out, int iters) {
  int i = get_global_id(0);
  float acc = 0.0f;
  float x = a[i];
  for (int k = 0; k < iters; k++) {
    acc = acc * 0.5f + x * (float)k;
  }
  out[i] = acc;
}""")
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


@case("""kernel void intdiv(global const int *a, global const int *b, global int *q, global int *r,
                   global uint *uq, global uint *ur, global long *q64) {
  int i = get_global_id(0);
  int x = a[i], y = b[i];
  q[i] = x / y;
  r[i] = x % y;
  uq[i] = (uint)x / (uint)y;
  ur[i] = (uint)x % (uint)y;
  q64[i] = ((long)x * 1000003L) / (long)y;
}""")
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


@case("""kernel void lds_reduce(global const float *in, global float *partial) {
  local float tmp[256];
  uint lid = get_local_id(0);
  tmp[lid] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint stride = get_local_size(0) / 2; stride > 0; stride >>= 1) {
    if (lid < stride) tmp[lid] += tmp[lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[get_group_id(0)] = tmp[0];
}""")
def lds_reduce(k, bufs, rng):
  groups = 16
  x = rng.integers(0, 100, groups * 256).astype(np.float32)
  px, _ = bufs.array(x)
  pp, out = bufs.array(np.zeros(groups, np.float32))
  k(px, pp, grid=(groups, 1, 1), block=(256, 1, 1))
  np.testing.assert_array_equal(out, x.reshape(groups, 256).sum(1))


@case("""kernel void lds_scan(global const int *in, global int *out) {
  local int buf[2][128];
  uint lid = get_local_id(0);
  int cur = 0;
  buf[0][lid] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = 1; off < 128; off <<= 1) {
    int v = buf[cur][lid];
    if (lid >= off) v += buf[cur][lid - off];
    buf[1 - cur][lid] = v;
    cur = 1 - cur;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  out[get_global_id(0)] = buf[cur][lid];
}""")
def lds_scan(k, bufs, rng):
  groups = 8
  x = rng.integers(-1000, 1000, groups * 128).astype(np.int32)
  px, _ = bufs.array(x)
  po, out = bufs.array(np.zeros(groups * 128, np.int32))
  k(px, po, grid=(groups, 1, 1), block=(128, 1, 1))
  np.testing.assert_array_equal(out, np.cumsum(x.reshape(groups, 128), 1).reshape(-1))


@case("""kernel void ids2d(global uint *out) {
  uint gx = get_global_id(0), gy = get_global_id(1);
  uint idx = (gy * get_global_size(0) + gx) * 8;
  out[idx + 0] = get_local_id(0);
  out[idx + 1] = get_local_id(1);
  out[idx + 2] = get_group_id(0);
  out[idx + 3] = get_group_id(1);
  out[idx + 4] = get_local_size(0);
  out[idx + 5] = get_local_size(1);
  out[idx + 6] = get_num_groups(0);
  out[idx + 7] = get_num_groups(1);
}""")
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


@case("""kernel void transpose2d(global const float *in, global float *out) {
  uint x = get_global_id(0), y = get_global_id(1);
  uint w = get_global_size(0), h = get_global_size(1);
  out[x * h + y] = in[y * w + x] * 2.0f + (float)x - (float)y;
}""")
def transpose2d(k, bufs, rng):
  W, H = 64, 48
  a = rng.random((H, W), dtype=np.float32)
  pa, _ = bufs.array(a)
  po, out = bufs.array(np.zeros((W, H), np.float32))
  k(pa, po, grid=(W // 16, H // 16, 1), block=(16, 16, 1))
  y, x = np.mgrid[0:H, 0:W]
  exp = (a * np.float32(2) + x.astype(np.float32) - y.astype(np.float32)).astype(np.float32).T
  np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)


@case("""#define TILE 16
kernel void matmul_tiled(global const float *A, global const float *B, global float *C, int M, int N, int K) {
  local float As[TILE][TILE];
  local float Bs[TILE][TILE];
  int col = get_global_id(0), row = get_global_id(1);
  int tx = get_local_id(0), ty = get_local_id(1);
  float acc = 0.0f;
  for (int t = 0; t < K; t += TILE) {
    As[ty][tx] = A[row * K + t + tx];
    Bs[ty][tx] = B[(t + ty) * N + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; k++) acc = fma(As[ty][k], Bs[k][tx], acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  C[row * N + col] = acc;
}""")
def matmul_tiled(k, bufs, rng):
  M, N, K = 32, 48, 64
  A = rng.integers(-4, 5, (M, K)).astype(np.float32)
  B = rng.integers(-4, 5, (K, N)).astype(np.float32)
  pa, _ = bufs.array(A)
  pb, _ = bufs.array(B)
  pc, C = bufs.array(np.zeros((M, N), np.float32))
  k(pa, pb, pc, np.int32(M), np.int32(N), np.int32(K), grid=(N // 16, M // 16, 1), block=(16, 16, 1))
  np.testing.assert_array_equal(C, A @ B)


@case("""kernel void minmax(global const int *a, global const float *f, global int *iout, global float *fout) {
  int i = get_global_id(0);
  int x = a[i];
  float y = f[i];
  iout[4 * i + 0] = min(x, 100) + max(x, -100);
  iout[4 * i + 1] = clamp(x, -50, 50);
  iout[4 * i + 2] = mad24(x & 0xfff, 37, -x);
  iout[4 * i + 3] = convert_int_rtz(y * 3.0f) + abs(x);
  fout[2 * i + 0] = fmin(y, 0.5f) + fmax(y, -0.5f);
  fout[2 * i + 1] = clamp(y, -1.0f, 1.0f) * (float)x;
}""")
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


@case("""kernel void float4_ops(global const float4 *a, global const float4 *b, global float4 *out, global float *dots) {
  int i = get_global_id(0);
  float4 x = a[i], y = b[i];
  out[i] = x * y + x.wzyx;
  dots[i] = dot(x, y);
}""")
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


@case("""kernel void int64(global const ulong *a, global const ulong *b, global ulong *out) {
  int i = get_global_id(0);
  ulong x = a[i], y = b[i];
  out[4 * i + 0] = x * y + 0x123456789abcdefUL;
  out[4 * i + 1] = (x >> (y & 63)) | (y << 3);
  out[4 * i + 2] = mul_hi(x, y);
  out[4 * i + 3] = ((long)x < (long)y) ? x - y : y - x;
}""")
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


@case("""#pragma OPENCL EXTENSION cl_khr_fp16 : enable
kernel void fp16(global const half *a, global const half *b, global half *out) {
  int i = get_global_id(0);
  half x = a[i], y = b[i];
  half t = x * y;
  out[2 * i] = t + x;
  out[2 * i + 1] = (x > y) ? x - y : y - x;
}""")
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


@case("""#pragma OPENCL EXTENSION cl_khr_fp16 : enable
kernel void half2_fma(global const half2 *a, global const half2 *b, global const half2 *c, global half2 *out) {
  int i = get_global_id(0);
  half2 x = a[i], y = b[i], z = c[i];
  out[i] = fma(x, y, z) * (half2)(0.5h, 2.0h);
}""")
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


@case("""kernel void f64(global const double *a, global const double *b, global double *out) {
  int i = get_global_id(0);
  double x = a[i], y = b[i];
  out[4 * i + 0] = fma(x, y, 1.0);
  out[4 * i + 1] = x / y;
  out[4 * i + 2] = sqrt(y);
  out[4 * i + 3] = (double)((long)(x * 1000.0)) + (double)i;
}""")
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


@case("""kernel void math(global const float *a, global const float *b, global float *out) {
  int i = get_global_id(0);
  float x = a[i], y = b[i];
  out[8 * i + 0] = sin(x);
  out[8 * i + 1] = cos(x);
  out[8 * i + 2] = exp(x * 0.25f);
  out[8 * i + 3] = log(y);
  out[8 * i + 4] = sqrt(y);
  out[8 * i + 5] = pow(y, 1.5f);
  out[8 * i + 6] = atan2(x, y);
  out[8 * i + 7] = floor(x) + fabs(x);
}""")
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


@case("""kernel void native_math(global const float *a, global const float *b, global float *out) {
  int i = get_global_id(0);
  float x = a[i], y = b[i];
  out[6 * i + 0] = native_sin(x);
  out[6 * i + 1] = native_cos(x);
  out[6 * i + 2] = native_exp2(x * 0.25f);
  out[6 * i + 3] = native_log2(y);
  out[6 * i + 4] = native_recip(y);
  out[6 * i + 5] = native_rsqrt(y);
}""")
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


@case("""kernel void private_array(global const int *idx, global int *out) {
  int i = get_global_id(0);
  volatile int arr[64];
  for (int k = 0; k < 64; k++) arr[k] = k * i + (k ^ 5);
  int s = 0;
  for (int k = 0; k < 8; k++) s += arr[(idx[i] + 7 * k) & 63];
  out[i] = s;
}""")
def private_array(k, bufs, rng):
  n = 128
  idx = rng.integers(0, 1000, n).astype(np.int32)
  pi, _ = bufs.array(idx)
  po, out = bufs.array(np.zeros(n, np.int32))
  k(pi, po, grid=(n // 64, 1, 1), block=(64, 1, 1))
  exp = [sum(((j := (int(idx[i]) + 7 * kk) & 63) * i + (j ^ 5)) for kk in range(8)) for i in range(n)]
  np.testing.assert_array_equal(out, np.array(exp, np.int32))


@case("""kernel void atomics_global(global const uint *in, global uint *hist, global uint *maxv, global int *sum) {
  uint i = get_global_id(0);
  uint v = in[i];
  atomic_inc(&hist[v & 63u]);
  atomic_max(maxv, v);
  atomic_add(sum, (int)(v & 0xffu));
}""")
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


@case("""kernel void atomics_lds(global const uint *in, global uint *hist) {
  local uint lh[32];
  uint lid = get_local_id(0);
  if (lid < 32) lh[lid] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  atomic_add(&lh[in[get_global_id(0)] % 32u], 1u);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < 32) atomic_add(&hist[lid], lh[lid]);
}""")
def atomics_lds(k, bufs, rng):
  n = 1024
  x = rng.integers(0, 1000, n).astype(np.uint32)
  px, _ = bufs.array(x)
  ph, hist = bufs.array(np.zeros(32, np.uint32))
  k(px, ph, grid=(n // 128, 1, 1), block=(128, 1, 1))
  np.testing.assert_array_equal(hist, np.bincount(x % 32, minlength=32))


@case("""kernel void empty(void) {}""")
def empty(k, bufs, rng):
  st = k(grid=(4, 1, 1), block=(64, 1, 1))
  assert st.waves == 8
