"""The emulator's arithmetic helpers against exact rationals (Python's Fraction; float(Fraction) rounds correctly)."""
from fractions import Fraction

import numpy as np

from hcq.mockgpu.amd.emu import rt


def _round_f32(v: Fraction) -> np.float32:
  """Round a rational to the nearest f32, ties to even (candidates around the f64 rounding)."""
  f = np.float32(float(v))
  cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
  return min(cands, key=lambda t: (abs(Fraction(float(t)) - v), int(np.float32(t).view(np.uint32)) & 1))


def test_fma64_is_correctly_rounded():
  rng = np.random.default_rng(11)
  n = 3000
  a, b = rng.standard_normal(n), rng.standard_normal(n)
  c = -(a * b) + rng.standard_normal(n) * 1e-17       # heavy cancellation
  c[:1000] = rng.standard_normal(1000) * 1e-30         # c far below the product
  got = rt.fma64(a, b, c)
  exp = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)]
  np.testing.assert_array_equal(got, np.array(exp))


def test_fma32_is_correctly_rounded():
  rng = np.random.default_rng(12)
  n = 3000
  a = rng.standard_normal(n).astype(np.float32)
  b = rng.standard_normal(n).astype(np.float32)
  c = (-(a.astype(np.float64) * b)).astype(np.float32) + (rng.standard_normal(n) * 1e-6).astype(np.float32)
  got = rt.fma32(a, b, c)
  exp = [_round_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]
  np.testing.assert_array_equal(got, np.array(exp, np.float32))


def _pi_decimal(digits: int):
  """pi by the series in the Python decimal module's documentation (independent of rt's Machin formula)."""
  from decimal import Decimal, getcontext
  getcontext().prec = digits + 2
  three = Decimal(3)
  lasts, t, s, n, na, d, da = 0, three, 3, 1, 0, 0, 24
  while s != lasts:
    lasts = s
    n, na = n + na, na + 8
    d, da = d + da, da + 32
    t = (t * n) / d
    s += t
  return +s


def test_trig_preop_segments_sum_to_two_over_pi():
  segs = rt.trig_preop(np.ones(4), np.arange(4))          # 4 x 53 bits of 2/pi
  total = sum(Fraction(float(v)) for v in segs)
  two_over_pi = 2 / Fraction(_pi_decimal(90))
  assert abs(total - two_over_pi) < Fraction(1, 2 ** 210)


def test_all_ones_and_p64_match_numpy_for_few_and_many_waves():
  """rt.all_ones and rt.p64 take shortcuts for a few waves / halves of one shape: same answers as plain numpy."""
  rng = np.random.default_rng(5)
  values = np.array([0xFFFFFFFF, 0xFFFFFFFE, 0x7FFFFFFF, 0, 1], np.uint32)
  for n in (0, 1, 2, 8, 9, 64, 2048):
    for _ in range(50):
      m = rng.choice(values, n, p=[0.9, 0.025, 0.025, 0.025, 0.025])
      assert rt.all_ones(m) == bool((m == 0xFFFFFFFF).all()), (n, m)
    lo, hi = rng.integers(0, 2**32, (2, n, 32), dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(rt.p64(lo, hi), lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(32))
    s_lo, s_hi = lo[:, 0].copy(), hi[:, 0].copy()      # (n,) halves: an SGPR pair
    np.testing.assert_array_equal(rt.p64(s_lo, s_hi), s_lo.astype(np.uint64) | s_hi.astype(np.uint64) << np.uint64(32))
  # halves of different shapes still broadcast (a scalar half, an SGPR against a VGPR)
  np.testing.assert_array_equal(rt.p64(np.uint32(1), np.arange(3, dtype=np.uint32)),
                                np.uint64(1) | np.arange(3, dtype=np.uint64) << np.uint64(32))
