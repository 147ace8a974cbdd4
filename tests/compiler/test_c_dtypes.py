"""The C backend's arithmetic on every storage dtype against numpy: wraparound, shifts, both divisions, casts,
float functions."""
import zlib

import numpy as np
import pytest

import hcq
from hcq.compiler import KernelInfo, UOp, dtypes

pytestmark = pytest.mark.tools("cc")
N = 64
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]


@pytest.fixture(scope="module")
def dev():
  with hcq.open("CPU") as d: yield d


def run(dev, sink, arrays):
  bufs = []
  for a in arrays:
    b = dev.alloc(a.nbytes); dev.copyin(b, a); bufs.append(b)
  dev.compile(sink)(*bufs, global_size=(N, 1, 1), local_size=(1, 1, 1))
  return [np.frombuffer(dev.copyout(b), a.dtype) for b, a in zip(bufs, arrays)]


def int_inputs(name):
  info = np.iinfo(name)
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  a = rng.integers(info.min + 1, info.max, N, dtype=name, endpoint=True)
  b = rng.integers(1, min(info.max, 50), N, dtype=name, endpoint=True)
  if info.min < 0: b = (b * rng.choice([-1, 1], N)).astype(name)
  return a, b


@pytest.mark.parametrize("name", INTS)
def test_integer_ops(dev, name):
  dt = getattr(dtypes, name)
  a, b = int_inputs(name)
  bits = 8 * a.itemsize
  sh = (np.arange(N) % bits).astype(name)
  i = UOp.special(N, "gidx0")
  A, B, S = (UOp.param(k, dt, N, True) for k in range(3))
  x, y, s = A.index(i).load(), B.index(i).load(), S.index(i).load()
  exprs = [x + y, x - y, x * y, x.maximum(y), (x < y).where(x, y), x & y, x | y, x ^ y, x << s, x >> s,
           x.idiv(y), x.imod(y), x // y, x % y, x * 3 + 7, ~x]
  with np.errstate(over="ignore"):
    want = [a + b, a - b, a * b, np.maximum(a, b), np.where(a < b, a, b), a & b, a | b, a ^ b, a << sh, a >> sh,
            np.array([abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1) for p, q in zip(a.tolist(), b.tolist())],
                     dtype=object).astype(name),
            np.fmod(a, b), a // b, a % b, (a * np.array(3, name) + np.array(7, name)).astype(name), ~a]
  outs = [np.zeros(N, name) for _ in exprs]
  O = [UOp.param(3 + k, dt, N) for k in range(len(exprs))]
  sink = UOp.sink(*[o.index(i).store(e) for o, e in zip(O, exprs)], arg=KernelInfo(f"ops_{name}"))
  got = run(dev, sink, [a, b, sh, *outs])[3:]
  for k, (g, w) in enumerate(zip(got, want)):
    np.testing.assert_array_equal(g, w.astype(name), err_msg=f"{name} expression #{k}")


@pytest.mark.parametrize("name", FLOATS)
def test_float_ops(dev, name):
  dt = getattr(dtypes, name)
  rng = np.random.default_rng(3)
  a = rng.uniform(-10, 10, N).astype(name)
  b = rng.uniform(0.5, 4, N).astype(name)
  i = UOp.special(N, "gidx0")
  A, B = UOp.param(0, dt, N, True), UOp.param(1, dt, N, True)
  x, y = A.index(i).load(), B.index(i).load()
  ax = (x < 0).where(-x, x)
  exprs = [x * y + 1.5, x / y, ax.sqrt(), (x / 4).exp2(), (ax + 1).log2(), x.sin(), y.recip(), x.maximum(y),
           x.cast(dtypes.int32).cast(dt), (x < y).where(x, y * 2)]
  want = [a * b + np.array(1.5, name), a / b, np.sqrt(np.abs(a)), np.exp2(a / np.array(4, name)),
          np.log2(np.abs(a) + np.array(1, name)), np.sin(a), np.array(1, name) / b, np.maximum(a, b),
          np.trunc(a).astype(name), np.where(a < b, a, b * np.array(2, name))]
  outs = [np.zeros(N, name) for _ in exprs]
  O = [UOp.param(2 + k, dt, N) for k in range(len(exprs))]
  sink = UOp.sink(*[o.index(i).store(e) for o, e in zip(O, exprs)], arg=KernelInfo(f"fops_{name}"))
  got = run(dev, sink, [a, b, *outs])[2:]
  for k, (g, w) in enumerate(zip(got, want)):
    np.testing.assert_allclose(g, w.astype(name), rtol=1e-5, atol=1e-6, err_msg=f"{name} expression #{k}")


def test_casts_and_bitcast(dev):
  f = np.array([1.0, -2.5, 3.75, 1e9, -0.0, 0.5] * (N // 6) + [7.0] * (N % 6), np.float32)
  i = UOp.special(N, "gidx0")
  F = UOp.param(0, dtypes.float32, N, True)
  x = F.index(i).load()
  exprs = [x.bitcast(dtypes.uint32), x.cast(dtypes.int64), x.cast(dtypes.float64).cast(dtypes.float32) * 2,
           (x.cast(dtypes.int32) & 0xFF).cast(dtypes.uint8), (x < 1).cast(dtypes.int32)]
  outs = [np.zeros(N, np.uint32), np.zeros(N, np.int64), np.zeros(N, np.float32), np.zeros(N, np.uint8), np.zeros(N, np.int32)]
  O = [UOp.param(1 + k, getattr(dtypes, str(o.dtype)), N) for k, o in enumerate(outs)]
  got = run(dev, UOp.sink(*[o.index(i).store(e) for o, e in zip(O, exprs)], arg=KernelInfo("casts")), [f, *outs])[1:]
  np.testing.assert_array_equal(got[0], f.view(np.uint32))
  np.testing.assert_array_equal(got[1], np.trunc(f).astype(np.int64))
  np.testing.assert_array_equal(got[2], f * 2)
  np.testing.assert_array_equal(got[3], (np.trunc(f).astype(np.int32) & 0xFF).astype(np.uint8))
  np.testing.assert_array_equal(got[4], (f < 1).astype(np.int32))



SPECIAL_FLOATS = [np.nan, np.inf, -np.inf, 1e10, -1e10, 3e9, -3.9, 3.9, -0.5, 300.0, -129.0, 65536.5, 2.0**63, -2.0**63]
# dtypes.float_to_int: NaN -> 0; truncate; saturate at the 32-bit range of the signedness (64-bit for 8-byte types);
# narrower types keep the low bits. Worked out by hand from that rule:
HAND = [("int32", 1e10, 2**31 - 1), ("int32", np.nan, 0), ("int32", -np.inf, -2**31), ("uint32", -3.9, 0),
        ("uint32", 3e9, 3000000000), ("int8", 300.0, 44), ("int8", 1e10, -1), ("uint8", -129.0, 0),
        ("int16", 65536.5, 0), ("int64", 2.0**63, 2**63 - 1), ("int64", -2.0**63, -2**63), ("uint64", 1e10, 10**10)]


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_is_defined_everywhere_and_folds_the_same(dev, src):
  """Out-of-range and NaN conversions (undefined in C; INT_MIN on x86) follow dtypes.float_to_int at run time and in
  constant folding alike."""
  with np.errstate(over="ignore"): f = np.array((SPECIAL_FLOATS * (N // len(SPECIAL_FLOATS) + 1))[:N], dtype=src)
  vals = [float(v) for v in f]
  i = UOp.special(N, "gidx0")
  x = UOp.param(0, getattr(dtypes, src), N, True).index(i).load()
  outs = [np.zeros(N, name) for name in INTS]
  O = [UOp.param(1 + k, getattr(dtypes, name), N) for k, name in enumerate(INTS)]
  got = run(dev, UOp.sink(*[o.index(i).store(x.cast(getattr(dtypes, name))) for o, name in zip(O, INTS)],
                          arg=KernelInfo(f"f2i_{src}")), [f, *outs])[1:]
  by_type = dict(zip(INTS, got))
  for name, g in by_type.items():
    folded = [UOp.const(v).cast(getattr(dtypes, name)).const_value for v in vals]
    assert g.tolist() == folded, f"{src} -> {name}: run time {g.tolist()} vs constant folding {folded}"
  if src == "float64":
    for name, v, want in HAND:
      assert by_type[name][vals.index(v) if v == v else 0] == want, (name, v)


def test_nan_and_inf_literals_cast_to_int_compile(dev):
  """CAST of a NaN / inf literal to an integer used to raise a bare ValueError / OverflowError from vmin."""
  i = UOp.special(N, "gidx0")
  exprs = [UOp.const(float("nan")).cast(dtypes.int32) + i, UOp.const(float("inf")).cast(dtypes.int32) - i,
           UOp.const(float("-inf")).cast(dtypes.uint8) + i]
  assert [e.src[0].vmin for e in exprs] == [0, 2**31 - 1, 0]
  outs = [np.zeros(N, np.int32), np.zeros(N, np.int32), np.zeros(N, np.uint8)]
  O = [UOp.param(k, getattr(dtypes, str(o.dtype)), N) for k, o in enumerate(outs)]
  got = run(dev, UOp.sink(*[o.index(i).store(e) for o, e in zip(O, exprs)], arg=KernelInfo("nan_lit")), outs)
  n = np.arange(N)
  assert got[0].tolist() == n.tolist() and got[1].tolist() == (2**31 - 1 - n).tolist() and got[2].tolist() == n.tolist()
