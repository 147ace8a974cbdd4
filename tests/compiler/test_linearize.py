"""Linearization: range nesting, loop order from dependencies, hoisting of loop-invariant code — checked on the
LINEAR form and by running the result on the CPU."""
import numpy as np
import pytest

import hcq
from hcq.compiler import AddrSpace, AxisType, KernelInfo, Ops, UOp, dtypes
from hcq.compiler.lower import lower

pytestmark = pytest.mark.tools("cc")


def run(sink, nbytes_per_slot, inputs=None, gs=(1, 1, 1), ls=(1, 1, 1), dtype=np.int32):
  with hcq.open("CPU") as dev:
    bufs = [dev.alloc(n) for n in nbytes_per_slot]
    for slot, arr in (inputs or {}).items(): dev.copyin(bufs[slot], arr)
    dev.compile(sink)(*bufs, global_size=gs, local_size=ls)
    return [np.frombuffer(dev.copyout(b), dtype) for b in bufs]


def test_second_loop_reads_what_the_first_wrote():
  """Loop B (axis 0) reads a REG array filled by loop A (axis 1): A must run first although B has the lower axis id."""
  out = UOp.param(0, dtypes.int32, 8)
  reg = UOp.placeholder(8, dtypes.int32, 0, AddrSpace.REG)
  ra, rb = UOp.range(8, 1), UOp.range(8, 0)
  fill = reg.index(ra).store(ra * ra).end(ra)
  sink = out.index(rb).store(reg.after(fill).index(7 - rb).load() + 1).end(rb).sink(arg=KernelInfo("two_loops"))
  lin = lower(sink)
  ranges = [u for u in lin.src if u.op is Ops.RANGE]
  assert [r.arg[0] for r in ranges] == [1, 0]
  (got,) = run(sink, [32])
  np.testing.assert_array_equal(got, (7 - np.arange(8)) ** 2 + 1)


def test_nested_loops_with_stores_at_two_levels_and_hoisting():
  out, rows = UOp.param(0, dtypes.int32, 4 * 5), UOp.param(1, dtypes.int32, 4)
  i, j = UOp.range(4, 0), UOp.range(5, 1)
  inner = out.index(i * 5 + j).store(i * 100 + j).end(j)
  sink = UOp.group(inner, rows.index(i).store(i * 7)).end(i).sink(arg=KernelInfo("nest"))
  lin = lower(sink)
  ops = [u.op for u in lin.src]
  r0, r1 = [k for k, o in enumerate(ops) if o is Ops.RANGE]
  e = [k for k, o in enumerate(ops) if o is Ops.END]
  assert r0 < r1 < e[0] < e[1] and lin.src[e[0]].src[0] is lin.src[r1]
  # i * 100 depends on i only: it is computed in the outer loop, before the inner one opens
  mul100 = next(k for k, u in enumerate(lin.src) if u.op is Ops.MUL and any(s.const_value == 100 for s in u.src))
  assert r0 < mul100 < r1
  got, got_rows = run(sink, [80, 16])
  np.testing.assert_array_equal(got.reshape(4, 5), np.arange(4)[:, None] * 100 + np.arange(5)[None, :])
  np.testing.assert_array_equal(got_rows, np.arange(4) * 7)


def test_two_ends_of_one_range_merge():
  a, b = UOp.param(0, dtypes.int32, 6), UOp.param(1, dtypes.int32, 6)
  r = UOp.range(6, 0)
  sink = UOp.sink(a.index(r).store(r).end(r), b.index(r).store(r * 2).end(r), arg=KernelInfo("merge"))
  lin = lower(sink)
  assert sum(u.op is Ops.RANGE for u in lin.src) == 1
  ga, gb = run(sink, [24, 24])
  np.testing.assert_array_equal(ga, np.arange(6)); np.testing.assert_array_equal(gb, np.arange(6) * 2)


def test_ends_given_inner_first_nest_that_way():
  out = UOp.param(0, dtypes.int32, 64)
  i = UOp.range(8, 0)
  j = UOp.range(8, 1)
  # END(END(store, i), j): i is closed inside j, so j is the outer loop
  body = out.index(i * 8 + j).store(1)
  sink = body.end(i).end(j).sink()
  lin = lower(sink)   # legal: END(END(store, i), j) nests i inside j
  assert [u.arg[0] for u in lin.src if u.op is Ops.RANGE] == [1, 0]


def test_reduce_inside_an_outer_loop_reinitialises_its_accumulator():
  a = np.arange(5 * 7, dtype=np.int32).reshape(5, 7) - 10
  A, out = UOp.param(0, dtypes.int32, 35, True), UOp.param(1, dtypes.int32, 5)
  i, j = UOp.range(5, 0, AxisType.LOOP), UOp.range(7, 1, AxisType.REDUCE)
  row_max = A.index(i * 7 + j).load().reduce(j, arg=Ops.MAX)
  row_sum = A.index(i * 7 + j).load().reduce(j)
  sink = out.index(i).store(row_sum * 100 + row_max).end(i).sink(arg=KernelInfo("rows"))
  _, got = run(sink, [140, 20], {0: a})
  np.testing.assert_array_equal(got, a.sum(1) * 100 + a.max(1))


def test_custom_op_renders_its_format():
  out = UOp.param(0, dtypes.int32, 4)
  r = UOp.range(4, 0)
  v = UOp(Ops.CUSTOM, (r.cast(dtypes.int32),), ("__builtin_popcount({0} * 7)", dtypes.int32))
  (got,) = run(out.index(r).store(v).end(r).sink(arg=KernelInfo("custom")), [16])
  np.testing.assert_array_equal(got, [bin(k * 7).count("1") for k in range(4)])


def test_loads_of_one_address_before_and_after_a_store_stay_distinct():
  """x1 = tile[l]; tile[l] = 5 (after x1); x2 = tile[l] (after the store): equal UOps once AFTER is gone."""
  a = np.arange(8, dtype=np.int32) + 1
  A, out = UOp.param(0, dtypes.int32, 8, True), UOp.param(1, dtypes.int32, 8)
  l = UOp.special(8, "lidx0")
  tile = UOp.placeholder(8, dtypes.int32, 0, AddrSpace.LOCAL)
  t1 = tile.after(tile.index(l).store(A.index(l).load()))
  x1 = t1.index(l).load()
  x2 = tile.after(t1.after(x1).index(l).store(5)).index(l).load()
  sink = out.index(l).store(x1 * 10 + x2).sink(arg=KernelInfo("twice"))
  lin = lower(sink)
  assert len(set(lin.src)) == len(lin.src)
  loads = [u for u in lin.src if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.BUFFER]
  assert len(loads) == 2 and loads[0] is not loads[1]
  _, got = run(sink, [32, 32], {0: a}, ls=(8, 1, 1))
  np.testing.assert_array_equal(got, a * 10 + 5)
