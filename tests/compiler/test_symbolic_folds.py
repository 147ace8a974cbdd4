"""Masked folds and loop reasoning in symbolic (issue #20): (x & m) // 2**k, (x & m) >> k, (x & m) % 2**k and a mask
a value fits in fold from the bounds of x & m; inside a loop over range(n) the induction variable is below n (i < n,
(i + 1) // n and (i + 1) % n for i in range(n - 1)); a REDUCE accumulator is bounded by its trip count. Each kernel
is checked folded (no division, modulo, shift or comparison left after symbolic) and run on hcq.open("CPU") and
hcq.open("MOCK+AMD") against numpy."""
import numpy as np
import pytest

import hcq
from hcq.compiler import AxisType, KernelInfo, Ops, UOp, dtypes
from hcq.compiler.ir.symbolic import simplify
from hcq.compiler.lower import lower

I32, F32 = dtypes.int32, dtypes.float32
FOLDED = {Ops.FLOORDIV, Ops.FLOORMOD, Ops.IDIV, Ops.IMOD, Ops.SHR, Ops.CMPLT}


@pytest.fixture(scope="module", params=["CPU", "MOCK+AMD"])
def dev(request):
  with hcq.open(request.param) as d: yield d


def run(dev, sink, arrays, scalars=(), grid=(1, 1, 1)):
  bufs = []
  for a in arrays:
    b = dev.alloc(max(a.nbytes, 1))
    dev.copyin(b, a)
    bufs.append(b)
  dev.compile(sink)(*bufs, *scalars, global_size=grid, local_size=(1, 1, 1), wait=True)
  return [np.frombuffer(dev.copyout(b), a.dtype).reshape(a.shape).copy() for a, b in zip(arrays, bufs)]


def ops_after_symbolic(sink) -> set: return {u.op for u in lower(sink, "c", until="symbolic").toposort()}


# ---------- masked folds ----------

def test_masked_folds():
  x = UOp.variable("x", -100, 100)
  assert simplify((x & 7) // 8).const_value == 0            # the mask's bits are all below k
  assert simplify((x & 7) >> 3).const_value == 0
  assert simplify((x & 0xF0) % 16).const_value == 0          # ... all from k up
  assert simplify((x & 7) % 8) is simplify(x & 7)            # the modulo keeps every bit of the mask
  assert simplify((x & 0xFF) % 16) is simplify(x & 15)       # it keeps the mask's low k bits
  assert simplify(x & -1) is x                                # every bit
  i = UOp.range(16, 0)
  assert simplify(i & 15) is i and simplify(i & 31) is i      # the value fits in the mask: dropped
  assert simplify(i & 7).op is Ops.AND                        # it does not
  y = UOp.param(0, I32, 1).index(0).load()                    # any int32, negative ones included
  assert simplify((y & 7) // 8).const_value == 0 and simplify((y & 3) < 4).const_value is True
  assert (y & 12).vmin == 0 and (y & 12).vmax == 12           # one non-negative operand bounds an AND


def _masked_kernel(n=64):
  a, out = UOp.param(0, I32, n, readonly=True), UOp.param(1, I32, (n, 6))
  g = UOp.special(n, "gidx0")
  x = a.index(g).load()
  vals = [(x & 7) // 8, (x & 7) >> 3, (x & 0xFF) % 16, (x & 0xF0) % 16, (g & 63).cast(I32), (x & 12) % 8]
  return out.index(g, 0).store(vals[0]).sink(*(out.index(g, j).store(v) for j, v in enumerate(vals) if j),
                                             arg=KernelInfo("masked"))


def test_masked_kernel_folds():
  ops = ops_after_symbolic(_masked_kernel())
  assert not ops & FOLDED, ops & FOLDED


def test_masked_kernel_runs(dev):
  n = 64
  a = np.random.default_rng(7).integers(-2**31, 2**31 - 1, n, dtype=np.int32)
  a[:4] = [-1, -256, 255, 0]
  _, got = run(dev, _masked_kernel(n), [a, np.full((n, 6), -7, np.int32)], grid=(n, 1, 1))
  want = np.stack([(a & 7) // 8, (a & 7) >> 3, (a & 0xFF) % 16, (a & 0xF0) % 16, np.arange(n), (a & 12) % 8], 1)
  np.testing.assert_array_equal(got, want.astype(np.int32))


# ---------- loop reasoning ----------

def test_induction_variable_is_below_its_bound():
  n = UOp.variable("n", 2, 64, slot=1)
  r = UOp.range(n, 1)
  assert simplify(r < n).const_value is True                  # i < n inside range(n), n unknown until launch
  assert simplify(n < r + 1).const_value is False             # i >= n never
  assert simplify(r + 1 < n).op is Ops.CMPLT                  # the last iteration has i + 1 == n
  assert simplify(r < n + 3).const_value is True
  r2 = UOp.range(n - 1, 2)
  assert simplify((r2 + 1) // n).const_value == 0             # the back edge: i + 1 <= n - 1 < n
  assert simplify((r2 + 1) % n) is simplify(r2 + 1)
  assert simplify(r2 + 1 < n).const_value is True
  m = UOp.variable("m", 1, 8, slot=3)
  assert simplify(UOp.range(m, 4) < n).op is Ops.CMPLT        # another variable's range says nothing


def test_reduce_accumulator_is_bounded_by_its_trip_count():
  y = UOp.param(0, I32, 16).index(UOp.range(4, 0, AxisType.REDUCE)).load()
  acc = (y & 3).reduce(UOp.range(4, 0, AxisType.REDUCE))
  assert (acc.vmin, acc.vmax) == (0, 12)
  assert simplify(acc // 16).const_value == 0 and simplify(acc < 13).const_value is True
  n = UOp.variable("n", 0, 5, slot=1)
  sym = (y & 3).reduce(UOp.range(n, 1, AxisType.REDUCE))
  assert (sym.vmin, sym.vmax) == (0, 15)
  big = UOp.variable("v", 0, 2**30, slot=2).reduce(UOp.range(8, 2, AxisType.REDUCE))   # int32 storage would wrap
  assert big.vmax == big.dtype.bounds[1]


def _loop_kernel():
  """for r < n: o[r] = a[r.valid(r < n)] * 2;  for r2 < n - 1: q[r2] = (r2 + 1) // n * 100 + (r2 + 1) % n;
  s[g] = sum_k (b[4g + k] & 3), stored as (s // 16) * 1000 + (s < 13 ? s : -1)."""
  n = UOp.variable("n", 2, 64, slot=5)
  a, o = UOp.param(0, F32, 64, readonly=True), UOp.param(1, F32, 64)
  q, b, s = UOp.param(2, I32, 64), UOp.param(3, I32, 64, readonly=True), UOp.param(4, I32, 16)
  r, r2 = UOp.loop(n, 10), UOp.loop(n - 1, 11)
  st1 = o.index(r).store(a.index(r.valid(r < n)).load() * 2).end(r)
  st2 = q.index(r2).store(((r2 + 1) // n * 100 + (r2 + 1) % n).cast(I32)).end(r2)
  g, k = UOp.special(16, "gidx0"), UOp.range(4, 12, AxisType.REDUCE)
  acc = (b.index(g * 4 + k).load() & 3).reduce(k)
  st3 = s.index(g).store(acc // 16 * 1000 + (acc < 13).where(acc, -1))
  return st1.sink(st2, st3, arg=KernelInfo("loops"))


def test_loop_kernel_folds():
  lowered = lower(_loop_kernel(), "c", until="symbolic")
  ops = {u.op for u in lowered.toposort()}
  assert not ops & FOLDED, ops & FOLDED
  assert all(len(u.src) == 2 for u in lowered.toposort() if u.op is Ops.INDEX)   # the gate r < n is gone


def test_loop_kernel_runs(dev):
  a = np.arange(64, dtype=np.float32) + 0.5
  b = np.random.default_rng(3).integers(-1000, 1000, 64, dtype=np.int32)
  for n in (2, 37, 64):
    o, q, s = np.full(64, -1, np.float32), np.full(64, -1, np.int32), np.full(16, -1, np.int32)
    _, o, q, _, s = run(dev, _loop_kernel(), [a, o, q, b, s], scalars=(n,), grid=(16, 1, 1))
    want_o = np.full(64, -1, np.float32)
    want_o[:n] = a[:n] * 2
    want_q = np.full(64, -1, np.int32)
    want_q[:n - 1] = np.arange(1, n)
    np.testing.assert_array_equal(o, want_o)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(s, (b.reshape(16, 4) & 3).sum(1))
