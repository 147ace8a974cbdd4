"""The reference lineage's spellings of the kernel DSL build unchanged in hcq (issue #20): valid() on an index value,
UOp.param with a shape tuple, symbolic sizes and volatile, UOp.loop, and a conditional END. Each kernel runs on
hcq.open("CPU") and hcq.open("MOCK+AMD") against numpy."""
import numpy as np
import pytest

import hcq
from hcq.compiler import AxisType, CompileError, KernelInfo, Ops, UOp, dtypes
from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.amd.render import GFX1100_TARGET
from hcq.compiler.lower import lower

pytestmark = pytest.mark.tools("cc")
F32 = dtypes.float32


@pytest.fixture(scope="module", params=["CPU", "MOCK+AMD"])
def dev(request):
  with hcq.open(request.param) as d: yield d


def run(dev, sink, arrays, scalars=(), grid=(1, 1, 1), block=(1, 1, 1)):
  """Launch sink with the numpy arrays as buffers (then the scalars); the arrays as the kernel left them."""
  bufs = []
  for a in arrays:
    b = dev.alloc(max(a.nbytes, 1))
    dev.copyin(b, a)
    bufs.append(b)
  dev.compile(sink)(*bufs, *scalars, global_size=grid, local_size=block, wait=True)
  return [np.frombuffer(dev.copyout(b), a.dtype).reshape(a.shape).copy() for a, b in zip(arrays, bufs)]


TARGETS = {"c": "c", "gfx1100": GFX1100_TARGET}


def linear_ops(sink, target="c"): return [u.op for u in lower(sink, TARGETS[target]).src]


# ---------- 1. valid() on an index value ----------

def _shifted_copy(spelling: str, n=50, shift=7):
  """out[g] = a[g + shift] where g + shift < n (else 0); odd[g] = g stored only for odd g."""
  a, out, odd = UOp.param(0, F32, n, readonly=True), UOp.param(1, F32, n), UOp.param(2, F32, n)
  g = UOp.special(n, "gidx0")
  j = g + shift
  if spelling == "value":
    ld = a.index(j.valid(j < n)).load()
    st = odd.index(g.valid((g % 2).eq(1))).store(g.cast(F32))
  else:
    ld = a.index(j).valid(j < n).load()
    st = odd.index(g).valid((g % 2).eq(1)).store(g.cast(F32))
  return out.index(g).store(ld).sink(st, arg=KernelInfo("shifted"))


def test_both_valid_spellings_are_one_kernel():
  by_value, by_index = _shifted_copy("value"), _shifted_copy("index")
  assert by_value is by_index
  for target in TARGETS.values():
    assert lower(by_value, target) is lower(by_index, target)
  assert compile_kernel(by_value, "gfx1100") == compile_kernel(by_index, "gfx1100")
  # the multi-index form, and gates that accumulate
  p = UOp.param(0, F32, (8, 4))
  i, k = UOp.range(8, 0), UOp.range(4, 1)
  assert p.index(i.valid(i < 5), k.valid(k > 0)) is p.index(i, k).valid(i < 5).valid(k > 0)
  assert p.index(i.valid(i < 5).valid(i > 1), k) is p.index(i, k).valid((i < 5) & (i > 1))
  # arithmetic on a gated index value stays gated
  assert p.index((i.valid(i < 5) + 1) * 4 + k) is p.index((i + 1) * 4 + k).valid(i < 5)


def test_valid_index_value_loads_zero_and_skips_stores(dev):
  n, shift = 50, 7
  a = np.arange(1, n + 1, dtype=np.float32)
  out, odd = np.full(n, -1, np.float32), np.full(n, -1, np.float32)
  _, got, got_odd = run(dev, _shifted_copy("value", n, shift), [a, out, odd], grid=(n, 1, 1))
  want = np.zeros(n, np.float32)
  want[:n - shift] = a[shift:]
  np.testing.assert_array_equal(got, want)
  want_odd = np.where(np.arange(n) % 2 == 1, np.arange(n), -1).astype(np.float32)
  np.testing.assert_array_equal(got_odd, want_odd)


def test_an_invalid_index_used_as_a_value_is_refused():
  g = UOp.special(8, "gidx0")
  out = UOp.param(0, dtypes.int32, 8)
  bad = out.index(g).store(g.valid(g < 4)).sink(arg=KernelInfo("bad"))
  with pytest.raises(CompileError, match="INVALID index"): lower(bad)
  with pytest.raises(CompileError, match="not an index"): g.valid(g < 4) < 3
  with pytest.raises(CompileError, match="integer index value"): g.cast(F32).valid(g < 4)
  with pytest.raises(CompileError, match="not a bool"): g.valid(g + 1)


# ---------- 2. UOp.param: shape tuples, symbolic sizes, volatile ----------

def test_param_with_a_shape_tuple_takes_one_index_per_dim(dev):
  a = np.arange(6 * 5, dtype=np.float32).reshape(6, 5)
  A, O = UOp.param(0, F32, (6, 5), readonly=True), UOp.param(1, F32, (5, 6))
  assert A.arg.size == 30 and A.dtype.size == 30
  i, k = UOp.special(6, "gidx0"), UOp.special(5, "lidx0")
  sink = O.index(k, i).store(A.index(i, k).load() * 2).sink(arg=KernelInfo("transpose"))
  _, got = run(dev, sink, [a, np.zeros((5, 6), np.float32)], grid=(6, 1, 1), block=(5, 1, 1))
  np.testing.assert_array_equal(got, a.T * 2)
  with pytest.raises(CompileError, match="3 indices"): A.index(i, k, k)
  with pytest.raises(CompileError, match="size"): UOp.param(0, F32, (4, -1))
  with pytest.raises(CompileError, match="size"): UOp.param(0, F32, (4, 2.0))


def test_param_with_a_symbolic_size(dev):
  """A buffer of n elements, n known at launch: bounds are checked against n's range, the loop runs n times."""
  n = UOp.variable("n", 1, 64, slot=2)
  A, O = UOp.param(0, F32, n, readonly=True), UOp.param(1, F32, (n, 2))
  assert A.arg.size == 64 and O.arg.size == 128 and O.arg.shape == (n, 2)
  r = UOp.loop(n)
  c = UOp.range(2, 7)
  sink = O.index(r, c).store(A.index(r).load() + c.cast(F32)).end(r, c).sink(arg=KernelInfo("symsize"))
  a = np.arange(64, dtype=np.float32)
  for trips in (1, 37):
    _, got = run(dev, sink, [a, np.full((64, 2), -1, np.float32)], scalars=(trips,))
    want = np.full((64, 2), -1, np.float32)
    want[:trips] = a[:trips, None] + np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(got, want)
  # the bounds check sees the largest size n's range allows: r + 1 reaches 64 in a buffer of at most 64
  over = O.index(r, c).store(A.index(r + 1).load()).end(r, c).sink(arg=KernelInfo("over"))
  with pytest.raises(CompileError, match="past the end of a buffer of 64"): lower(over)
  with pytest.raises(CompileError, match="known at launch"): UOp.param(0, F32, UOp.special(4, "gidx0"))
  with pytest.raises(CompileError, match="negative"): UOp.param(0, F32, UOp.variable("m", -2, 4))


def _two_reads(volatile: bool):
  """out[r] = flag[0] + flag[0] for r in a loop: two loads of one address, invariant in the loop."""
  flag = UOp.param(0, dtypes.int32, 1, volatile=volatile)
  out = UOp.param(1, dtypes.int32, 8)
  r = UOp.loop(8, 0)
  x, y = flag.index(0).load(), flag.index(0).load()
  return out.index(r).store(x + y).end(r).sink(arg=KernelInfo("two_reads"))


@pytest.mark.parametrize("target", ["c", "gfx1100"])
def test_volatile_loads_are_neither_merged_nor_hoisted(target):
  plain, vol = linear_ops(_two_reads(False), target), linear_ops(_two_reads(True), target)
  assert plain.count(Ops.LOAD) == 1 and plain.index(Ops.LOAD) < plain.index(Ops.RANGE)    # merged, hoisted
  assert vol.count(Ops.LOAD) == 2                                                         # both stay ...
  assert all(i > vol.index(Ops.RANGE) for i, op in enumerate(vol) if op is Ops.LOAD)      # ... in the loop
  assert "volatile int*" in compile_kernel(_two_reads(True), "c").source


def test_volatile_stores_are_not_merged(dev):
  flag = UOp.param(0, dtypes.int32, 2, volatile=True)
  a, b = flag.index(0).store(5), flag.index(0).store(5)
  assert a is not b
  sink = a.sink(b, flag.index(1).store(flag.index(0).load(b)), arg=KernelInfo("vstores"))
  assert linear_ops(sink).count(Ops.STORE) == 3
  (got,) = run(dev, sink, [np.zeros(2, np.int32)])
  np.testing.assert_array_equal(got, [5, 5])


def test_volatile_kernel_runs(dev):
  (_, got) = run(dev, _two_reads(True), [np.array([21], np.int32), np.zeros(8, np.int32)])
  np.testing.assert_array_equal(got, np.full(8, 42, np.int32))
  # a volatile value reduced over a loop is read in every iteration of it
  flag, out = UOp.param(0, dtypes.int32, 1, volatile=True), UOp.param(1, dtypes.int32, 1)
  r = UOp.range(5, 0, AxisType.REDUCE)
  sink = out.index(0).store(flag.index(0).load().reduce(r)).sink(arg=KernelInfo("vsum"))
  ops = linear_ops(sink)
  assert ops.index(Ops.LOAD) > ops.index(Ops.RANGE)
  (_, got) = run(dev, sink, [np.array([7], np.int32), np.zeros(1, np.int32)])
  assert got[0] == 35


# ---------- 3. UOp.loop and the conditional END ----------

def test_loop_is_a_loop_range_of_its_own():
  a, b = UOp.loop(8), UOp.loop(8)
  assert a is not b and a.op is Ops.RANGE and a.arg[1] is AxisType.LOOP and b.arg[1] is AxisType.LOOP
  assert UOp.loop(8, 3) is UOp.range(8, 3, AxisType.LOOP)


def test_conditional_end_guards_the_block_loads_included(dev):
  """64 work-items, 50 elements: `if g < 50` around the copy; without the guard the load would read past the end."""
  n = 50
  A, O = UOp.param(0, F32, n, readonly=True), UOp.param(1, F32, n)
  g = UOp.special(64, "gidx0")
  with pytest.raises(CompileError, match="past the end"): lower(O.index(g).store(A.index(g).load()).sink())
  sink = O.index(g).store(A.index(g).load() * 2).end(g < n).sink(arg=KernelInfo("guarded"))
  assert Ops.IF in linear_ops(sink)
  a = np.arange(n, dtype=np.float32)
  _, got = run(dev, sink, [a, np.zeros(n, np.float32)], grid=(64, 1, 1))
  np.testing.assert_array_equal(got, a * 2)


def test_conditional_end_inside_a_loop(dev):
  """for r in loop(8): if r % 3 != 0: out[g, r] = a[g, r] + r; the condition is per iteration."""
  A, O = UOp.param(0, F32, (4, 8), readonly=True), UOp.param(1, F32, (4, 8))
  g, r = UOp.special(4, "gidx0"), UOp.loop(8)
  sink = O.index(g, r).store(A.index(g, r).load() + r.cast(F32)).end(r, (r % 3).ne(0)).sink(arg=KernelInfo("ifloop"))
  a = np.arange(32, dtype=np.float32).reshape(4, 8)
  _, got = run(dev, sink, [a, np.full((4, 8), -1, np.float32)], grid=(4, 1, 1))
  cols = np.arange(8)
  want = np.where(cols % 3 != 0, a + cols, -1).astype(np.float32)
  np.testing.assert_array_equal(got, want)


def test_conditional_end_refuses_a_barrier():
  from hcq.compiler import AddrSpace
  tile = UOp.placeholder(8, F32, 0, AddrSpace.LOCAL)
  l = UOp.special(8, "lidx0")
  with pytest.raises(CompileError, match="BARRIER inside a conditional END"):
    tile.index(l).store(1.0).barrier().end(l < 4)


def test_the_new_forms_round_trip_through_repr_and_pickle():
  import pickle
  from hcq.compiler.ir import eval_repr
  n = UOp.variable("n", 1, 64, slot=2)
  p = UOp.param(0, F32, (n, 2), volatile=True)
  i = UOp.special(8, "gidx0")
  for u in (p, i.valid(i < 4), p.index(i.valid(i < 4), 1), p.index(0, 0).load(), UOp.loop(4)):
    assert eval_repr(repr(u)) is u
    assert pickle.loads(pickle.dumps(u)) is u
