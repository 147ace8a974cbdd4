"""fns.b32 (PTX ISA, "fns": find the n-th set bit) computed by taking the nearest set bit off |offset| times
(mockgpu/nv/ptx/semantics.fns) against a bit-by-bit walk written from the ISA's text, on random and edge inputs."""
from __future__ import annotations

import numpy as np

from hcq.mockgpu.nv.ptx import semantics as sem


def _walk(mask: int, base: int, off: int) -> int:
  if not 0 <= base < 32: return 0xFFFFFFFF
  if off == 0: return base if mask >> base & 1 else 0xFFFFFFFF
  n, pos, step = abs(off) - 1, base, 1 if off > 0 else -1
  while 0 <= pos < 32:
    if mask >> pos & 1:
      if n == 0: return pos
      n -= 1
    pos += step
  return 0xFFFFFFFF


def test_fns_matches_a_bit_by_bit_walk():
  rng = np.random.default_rng(0)
  N = 6000
  mask = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
  mask[:100], mask[100:200] = 0, 0xFFFFFFFF
  mask[200:300] = np.uint32(1) << rng.integers(0, 32, 100).astype(np.uint32)
  base = rng.integers(0, 40, N).astype(np.uint32)
  base[300:320] = 0xFFFFFFFF
  off = rng.integers(-34, 35, N).astype(np.int32)
  off[320:330], off[330:340] = -2**31, 2**31 - 1
  got = sem.fns(mask, base, off)
  want = np.array([_walk(int(a), int(b), int(c)) for a, b, c in zip(mask, base, off)], np.uint32)
  assert got.dtype == np.uint32 and np.array_equal(got, want), np.flatnonzero(got != want)[:5]
  # scalar (uniform) operands broadcast against per-thread ones
  assert sem.fns(np.uint32(0b1011), np.uint32(1), off[:64]).tolist() == [_walk(0b1011, 1, int(o)) for o in off[:64]]
