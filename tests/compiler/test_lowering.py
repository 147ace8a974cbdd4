"""The lowering pipeline: spec checks between passes, the linear form, and clear errors on bad input."""
import numpy as np
import pytest

import hcq
from hcq.compiler import (AddrSpace, AxisType, CompileError, KernelInfo, Ops, PatternMatcher, RewriteError, UOp,
                          UOpTypeError, UPat, dtypes, graph_rewrite)
from hcq.compiler import examples
from hcq.compiler.ir.evaluate import evaluate
from hcq.compiler.ir.spec import kernel_spec, lowered_spec, verify, verify_linear
from hcq.compiler.lower import PIPELINE, lower


def _nodes(u, op): return [x for x in u.toposort() if x.op is op]


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_spec_holds_between_passes(make):
  sink = make().sink
  verify(sink, kernel_spec)
  for name, _ in PIPELINE:
    out = lower(sink, "c", until=name)
    assert out.op is Ops.SINK and not out.ranges, f"after {name}"
    if name in ("commit_dtypes", "verify_lowered"): verify(out, lowered_spec)
  verify_linear(lower(sink, "c"))


def test_pipeline_is_named_and_ordered():
  names = [n for n, _ in PIPELINE]
  assert names.index("gpudims") < names.index("reduce_to_acc") < names.index("barriers") < names.index("legalize") \
    < names.index("commit_dtypes")


def test_linear_form():
  lin = lower(examples.matmul_tiled().sink)
  ops = [u.op for u in lin.src]
  assert lin.op is Ops.LINEAR and lin.arg.global_size == (8, 8, 1) and lin.arg.local_size == (8, 8, 1)
  assert not {Ops.AFTER, Ops.REDUCE, Ops.FLOORDIV, Ops.FLOORMOD, Ops.SINK} & set(ops)
  assert ops.count(Ops.RANGE) == 2 and ops.count(Ops.END) == 2 and ops.count(Ops.BARRIER) == 2
  # the write-after-read barrier opens the K-tile loop, the read-after-write one follows the tile stores
  first_range = ops.index(Ops.RANGE)
  assert ops[first_range + 1] is Ops.BARRIER
  second_range = ops.index(Ops.RANGE, first_range + 1)
  stores = [i for i, u in enumerate(lin.src) if u.op is Ops.STORE and i < second_range and i > first_range]
  assert len(stores) == 2 and all(s < second_range - 1 for s in stores)
  assert Ops.BARRIER in ops[stores[-1]:second_range]
  for u in lin.src: assert not (u.dtype.is_weak if not hasattr(u.dtype, "base") else False) or u.op is Ops.CONST


def test_gated_store_becomes_if_endif():
  lin = lower(examples.gated_stencil().sink)
  ops = [u.op for u in lin.src]
  i = ops.index(Ops.IF)
  assert ops[i:i + 4] == [Ops.IF, Ops.INDEX, Ops.STORE, Ops.ENDIF]
  assert lin.src[i + 3].src[0] is lin.src[i] and len(lin.src[i + 1].src) == 2


def test_reduce_becomes_a_register_accumulator():
  sink = lower(examples.matmul_naive().sink, until="reduce_to_acc")
  assert not _nodes(sink, Ops.REDUCE)
  regs = [b for b in _nodes(sink, Ops.BUFFER) if b.arg.addrspace is AddrSpace.REG]
  assert len(regs) == 1 and regs[0].arg.size == 1


def test_global_ranges_become_specials_within_limits():
  sink = lower(examples.matmul_naive().sink, until="gpudims")
  assert sorted(s.arg for s in _nodes(sink, Ops.SPECIAL)) == ["gidx0", "gidx1", "lidx0"]
  assert all(r.arg[1] is AxisType.REDUCE for r in _nodes(sink, Ops.RANGE))
  big = UOp.range(2000, 0, AxisType.LOCAL)
  bad = UOp.param(0, dtypes.int32, 2000).index(big).store(1).end(big).sink()
  with pytest.raises(CompileError, match="LOCAL range of 2000 exceeds the c limit 1024 for lidx0"): lower(bad)


def test_more_than_three_global_ranges_fold_into_the_third(tmp_path):
  rs = [UOp.range(n, i, AxisType.GLOBAL) for i, n in enumerate((2, 3, 4, 5))]
  out = UOp.param(0, dtypes.int32, 120)
  flat = ((rs[0] * 3 + rs[1]) * 4 + rs[2]) * 5 + rs[3]
  sink = out.index(flat).store(flat * 7).end(*rs).sink(arg=KernelInfo("fold"))
  lin = lower(sink)
  assert lin.arg.global_size == (2, 3, 20)
  with hcq.open("CPU") as dev:
    b = dev.alloc(480)
    dev.compile(sink)(b, global_size=lin.arg.global_size, local_size=(1, 1, 1))
    np.testing.assert_array_equal(np.frombuffer(dev.copyout(b), np.int32), np.arange(120) * 7)


def test_weak_ints_commit_to_int32_or_int64_from_bounds():
  g = UOp.special(64, "gidx0")
  buf = UOp.param(0, dtypes.float32, 64)
  small = lower(buf.index(g).store(1.0).sink(), until="commit_dtypes")
  assert {s.dtype for s in _nodes(small, Ops.SPECIAL)} == {dtypes.int32}
  huge = UOp.param(1, dtypes.float32, 1 << 34)
  big = lower(huge.index(g * (1 << 28)).store(1.0).sink(), until="commit_dtypes")
  idx = _nodes(big, Ops.INDEX)[0].src[1]
  assert idx.dtype == dtypes.int64 and {s.dtype for s in _nodes(big, Ops.SPECIAL)} == {dtypes.int32}
  lit = _nodes(lower(buf.index(g).store(2.5).sink(), until="commit_dtypes"), Ops.STORE)[0].src[1]
  assert lit.dtype == dtypes.float32


def test_a_typed_literal_stays_one_cast_of_a_const():
  # commit_dtypes used to type the CONST inside an already typed CAST(CONST) again: CAST(CAST(CONST)), which the C
  # backend printed as a variable instead of an inline literal
  buf = UOp.param(0, dtypes.int32, 4)
  lin = lower(buf.index(0).store(buf.index(1).load() * UOp.const(7, dtypes.int32)).sink(arg=KernelInfo("k")), "c")
  casts = [u for u in lin.src if u.op is Ops.CAST]
  assert casts and all(u.src[0].op is Ops.CONST for u in casts)
  mul = next(u for u in lin.src if u.op is Ops.MUL)
  assert mul.src[1].op is Ops.CAST and mul.src[1].const_value == 7


def test_floor_division_legalized_to_truncating_division_is_exact():
  x = UOp.variable("x", -50, 50)
  for d in (-7, -2, 3, 8):
    for e in (x // d, x % d):
      sink = lower(UOp.param(0, dtypes.int32, 1).index(0).store(e).sink(), until="legalize")
      val = _nodes(sink, Ops.STORE)[0].src[1]
      assert not _nodes(val, Ops.FLOORDIV) and not _nodes(val, Ops.FLOORMOD)
      for v in range(-50, 51):
        assert evaluate(val, {x: v}) == evaluate(e, {x: v})


# ---------------- bad input: clear errors that name the UOp, never a RecursionError

def test_store_to_read_only_param():
  a = UOp.param(0, dtypes.float32, 16, readonly=True)
  g = UOp.special(16, "gidx0")
  with pytest.raises(CompileError, match="store to read-only PARAM slot 0") as e:
    lower(a.index(g).store(1.0).sink())
  assert e.value.uop.op is Ops.STORE


def test_unended_range():
  out = UOp.param(0, dtypes.int32, 8)
  r = UOp.range(8, 3, AxisType.LOOP)
  with pytest.raises(CompileError, match="RANGE axis 3 \\(LOOP\\) is never ended") as e:
    lower(out.index(r).store(r).sink())
  assert e.value.uop is r


def test_mismatched_dtypes():
  f = UOp.param(0, dtypes.float32, 4).index(0).load()
  i = UOp.param(1, dtypes.int64, 4).index(0).load()
  with pytest.raises(UOpTypeError, match="ill-typed CMPLT: mismatched dtypes dtypes.float32 and dtypes.int64 in UOp"):
    f < i


def test_out_of_bounds_index_is_caught():
  out = UOp.param(0, dtypes.int32, 8)
  g = UOp.special(16, "gidx0")
  with pytest.raises(CompileError, match="index can reach 15, past the end of a buffer of 8"):
    lower(out.index(g).store(1).sink())


def test_rewrite_that_never_settles():
  x = UOp.special(8, "gidx0")
  commute = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("b")), name="n"),
                             lambda a, b, n: UOp(Ops.ADD, (b, a)))])
  with pytest.raises(RewriteError) as e:
    graph_rewrite(x + 1, commute, step_limit=100)
  assert "UOp(Ops.ADD" in str(e.value) and e.value.uop is not None


def test_deep_kernel_lowers_without_recursion_error():
  out = UOp.param(0, dtypes.int32, 1)
  v = UOp.param(1, dtypes.int32, 1).index(0).load()
  for i in range(1500): v = (v ^ i) + 1   # 3000 nodes deep: three times Python's recursion limit
  lin = lower(out.index(0).store(v).sink())
  assert len(lin.src) > 3000


def test_legalization_follows_the_target_capabilities():
  from hcq.compiler.ir.ops import GroupOp
  from hcq.compiler.lower.target import Target
  lacking = {Ops.MAX, Ops.NEG, Ops.SUB, Ops.CMPNE, Ops.FLOORDIV, Ops.FLOORMOD, Ops.MULACC}
  t = Target("small", native_ops=frozenset(GroupOp.ALU - lacking), shifts_for_pow2=True)
  x, y = UOp.variable("x", 0, 100), UOp.variable("y", -20, 20)
  e = (x // 8 + x % 16).maximum(y) - (-y) + UOp(Ops.MULACC, (x, y, UOp.const(3))) + (x.ne(y)).where(1, 0)
  sink = lower(UOp.param(0, dtypes.int32, 1).index(0).store(e).sink(), t, until="legalize")
  val = _nodes(sink, Ops.STORE)[0].src[1]
  assert not {u.op for u in val.toposort()} & lacking
  assert _nodes(val, Ops.SHR) and _nodes(val, Ops.AND)   # x // 8 and x % 16 with x >= 0
  for xv in range(0, 101, 7):
    for yv in range(-20, 21, 3):
      assert evaluate(val, {x: xv, y: yv}) == evaluate(e, {x: xv, y: yv})


def test_calls_with_a_tuple_body_are_functions():
  fx, fy = UOp.variable("x", 0, 0, slot=0, dtype=dtypes.float32), UOp.variable("y", 0, 0, slot=1, dtype=dtypes.float32)
  f = UOp(Ops.TUPLE, (fx * fy + 1.0, fx - fy))
  tbl = UOp.param(0, dtypes.float32, 4, readonly=True)            # a buffer formal: g(tbl, k) = tbl[k] * 2
  k = UOp.variable("k", 0, 3, slot=1)
  g = UOp(Ops.TUPLE, (tbl.index(k).load() * 2.0,))
  n = 16
  A, B = UOp.param(0, dtypes.float32, n, True), UOp.param(1, dtypes.float32, n, True)
  T, O = UOp.param(2, dtypes.float32, 4, True), UOp.param(3, dtypes.float32, n)
  i = UOp.special(n, "gidx0")
  a, b = A.index(i).load(), B.index(i).load()
  v = UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (f, a, b)),), 0) + UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (f, b, a)),), 1) \
    + UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (g, T, i % 4)),), 0)
  sink = O.index(i).store(v).sink(arg=KernelInfo("calls"))
  assert not _nodes(lower(sink, until="inline_calls"), Ops.CALL)
  av, bv = np.arange(n, dtype=np.float32), np.arange(n, dtype=np.float32)[::-1] * 0.5
  tv = np.array([1, 10, 100, 1000], np.float32)
  with hcq.open("CPU") as dev:
    bufs = [dev.alloc(x.nbytes) for x in (av, bv, tv, av)]
    for b_, x in zip(bufs, (av, bv, tv)): dev.copyin(b_, x)
    dev.compile(sink)(*bufs, global_size=(n, 1, 1), local_size=(1, 1, 1))
    got = np.frombuffer(dev.copyout(bufs[3]), np.float32)
  np.testing.assert_allclose(got, av * bv + 1 + (bv - av) + tv[np.arange(n) % 4] * 2, rtol=1e-6)
  bad = UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (g, A, i)),), 0)   # A has 16 floats: fine; an int buffer is not
  lower(O.index(i).store(bad).sink())
  ints = UOp.param(4, dtypes.int32, 4)
  with pytest.raises(CompileError, match="CALL argument 0 is a PtrDType\\(dtypes.int32"):
    lower(O.index(i).store(UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (g, ints, i)),), 0)).sink())


def test_lowering_pauses_the_cyclic_collector_and_restores_it():
  import gc
  from hcq.compiler.lower import gc_paused
  assert gc.isenabled()
  with gc_paused(): assert not gc.isenabled()
  assert gc.isenabled()
  with pytest.raises(CompileError):   # an error inside the pipeline turns it back on too
    lower(UOp.param(0, dtypes.int32, 4, readonly=True).index(0).store(1).sink())
  assert gc.isenabled()
  gc.disable()
  try:
    lower(UOp.param(0, dtypes.int32, 4).index(0).store(1).sink())
    assert not gc.isenabled()   # left as the caller had it
  finally:
    gc.enable()


def test_barrier_in_a_loop_whose_trip_count_depends_on_the_work_item():
  """Such a kernel hung the CPU runner until the device timeout (work-items meet the barrier different numbers of
  times); now it is refused when it is compiled, naming the barrier and the loop."""
  lx = 4
  out, ns = UOp.param(0, dtypes.int32, lx), UOp.param(1, dtypes.int32, lx, readonly=True)
  tile = UOp.placeholder(lx, dtypes.int32, 0, AddrSpace.LOCAL)

  def kernel(trip):
    r = UOp.range(trip, 0, AxisType.LOOP)
    st = tile.index(l).store(r.cast(dtypes.int32))
    return out.index(l).store(tile.after(st).index((l + 1) % lx).load()).end(r).sink()
  l = UOp.special(lx, "lidx0")
  with pytest.raises(CompileError, match="BARRIER inside loop 0 whose trip count depends on the work-item .lidx0.") as e:
    lower(kernel(ns.index(l).load()))
  assert e.value.uop.op is Ops.BARRIER
  lower(kernel(ns.index(0).load()))                       # the same trip count for every work-item: fine
  lower(kernel(ns.index(UOp.special(2, "gidx0")).load()))  # per work-group is uniform inside the group: fine
