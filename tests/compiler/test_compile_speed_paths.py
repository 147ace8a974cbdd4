"""The shortcuts of the compile-speed work (issue #30) decide what the slow paths they replace decide: UOp.by_op's
groups are the toposort filtered by op, verify's inline verdicts are spec.rewrite's, the worklist dce removes what
the round-by-round one did, the sink with its launch dimensions keeps a toposort equal to a fresh walk, and the
Python work of a compile grows linearly with the kernel (counted in function calls: deterministic, no timing). That
the generated code is unchanged by this work is tests/compiler/test_codegen_golden.py's job."""
from __future__ import annotations

import cProfile
import gc
import pstats

import pytest

from hcq.compiler import CompileError, KernelInfo, Ops, UOp, dtypes
from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.amd.isel_mir import MInst, Spec, VReg
from hcq.compiler.backend.amd.isel_opt import dce, has_side_effect
from hcq.compiler.examples import ALL
from hcq.compiler.ir.spec import _fast_paths, _guarded, _weak_node, kernel_spec, lowered_spec, verify
from hcq.compiler.lower import _with_arg, lower


def chain(nodes: int) -> UOp:
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(nodes // 2): v = (v ^ i) + 1
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{nodes}"))


@pytest.mark.parametrize("make", ALL[:6], ids=lambda f: f.__name__)
def test_by_op_is_the_toposort_grouped_by_op(make):
  sink = make().sink
  groups = sink.by_op()
  order = sink.toposort()
  assert set(groups) == {u.op for u in order}
  for op, nodes in groups.items(): assert nodes == tuple(u for u in order if u.op is op)
  assert sink.by_op() == groups and "by_op" in sink._cache   # remembered with the toposort


@pytest.mark.parametrize("until,spec", [("verify_kernel", kernel_spec), ("verify_lowered", lowered_spec)])
@pytest.mark.parametrize("make", ALL, ids=lambda f: f.__name__)
def test_verify_shortcuts_agree_with_the_rules(make, until, spec):
  """Every node verify decides without a rule call gets the verdict spec.rewrite gives it."""
  sink = lower(make().sink, "c", until=until)
  fast = _fast_paths(spec)
  decided = [u for u in sink.toposort() if u.op in fast]
  assert decided   # (the shortcut is used: ALU nodes, literals, casts...)
  for u in decided:
    how = fast[u.op]
    inline = True if how == 1 else (_weak_node(u) is None) if how == 2 else _guarded(u, *how)
    assert inline is spec.rewrite(u) is True, u
  assert {Ops.ADD, Ops.MUL, Ops.CAST, Ops.CONST} <= fast.keys()


def test_verify_shortcut_still_rejects_an_invalid_literal():
  """The INVALID index used as a value is refused by its own rule (an arg-guarded one, decided inline)."""
  bad = UOp.param(0, dtypes.int32, 4).index(0).store(UOp.invalid().cast(dtypes.int32))
  for spec in (kernel_spec, lowered_spec):
    assert isinstance(_fast_paths(spec)[Ops.CONST], tuple)
    with pytest.raises(CompileError, match="an INVALID index .* is used as a value"): verify(bad.sink(), spec)


def test_verify_shortcut_still_rejects_a_weak_node():
  """lowered_spec's weak-type rule is part of the shortcut: a node left weak (a DEFINE_VAR, an ADD of it) is refused,
  as before; kernel_spec accepts both."""
  weak = UOp.variable("n", 0, 10) + 1
  assert Ops.DEFINE_VAR in _fast_paths(lowered_spec) and Ops.ADD in _fast_paths(lowered_spec)
  sink = UOp.param(0, dtypes.int32, 16).index(weak).store(UOp.const(1, dtypes.int32)).sink(arg=KernelInfo("k"))
  with pytest.raises(CompileError, match=r"lowered_spec: invalid DEFINE_VAR \(it breaks a rule\)"):
    verify(sink, lowered_spec)
  with pytest.raises(CompileError, match=r"lowered_spec: invalid ADD \(it breaks a rule\)"):
    _verify_nodes([weak], lowered_spec)
  verify(sink, kernel_spec)


def _verify_nodes(nodes, spec):
  """verify's loop over given nodes only (the ADD without its DEFINE_VAR before it)."""
  from hcq.compiler.ir import spec as spec_mod
  class Root:
    def toposort(self): return list(nodes)
  return spec_mod.verify(Root(), spec)


def _dce_by_rounds(code):
  """dce as it was: remove every instruction without side effects whose defined registers nothing reads, until none."""
  while True:
    used = set()
    for m in code: used.update(m.regs_used())
    keep = [m for m in code if has_side_effect(m) or any(d in used or d.fixed is not None for d in m.regs_defined())]
    if len(keep) == len(code): return keep
    code = keep


def test_worklist_dce_removes_what_the_rounds_removed():
  a, b, c, d, e, f, loop1, loop2 = (VReg("v") for _ in range(8))
  fixed = VReg("v", fixed=0)
  code = [
    MInst("v_mov_b32_e32", {"vdst": a}, {"src0": fixed}),            # read by b only: dies with b, c (second round)
    MInst("v_add_nc_u32_e64", {"vdst": b}, {"src0": a, "src1": a}),
    MInst("v_add_nc_u32_e64", {"vdst": c}, {"src0": b, "src1": b}),  # read by nothing
    MInst("v_mov_b32_e32", {"vdst": d}, {"src0": fixed}),            # stored: stays
    MInst("v_add_nc_u32_e64", {"vdst": loop1}, {"src0": loop2, "src1": d}),   # read each other only: both stay
    MInst("v_add_nc_u32_e64", {"vdst": loop2}, {"src0": loop1, "src1": d}),
    MInst("v_mov_b32_e32", {"vdst": fixed}, {"src0": e}),            # defines a fixed register: stays (and keeps e)
    MInst("v_mov_b32_e32", {"vdst": e}, {"src0": f}),
    MInst("s_mov_b32", {"sdst": Spec(126)}, {"ssrc0": f}),           # writes EXEC: a side effect
    MInst("global_store_b32", {}, {"addr": d, "data": d}),
    MInst("s_endpgm"),
  ]
  want = _dce_by_rounds(list(code))
  got = dce(list(code))
  assert got == want
  assert code[0] not in got and code[2] not in got and code[4] in got and code[6] in got


def test_sink_with_launch_dims_keeps_a_true_toposort():
  from hcq.compiler.examples import matmul_tiled_kernel
  sink = lower(matmul_tiled_kernel(16, 4), "c", until="verify_lowered")
  sink.by_op()
  new = _with_arg(sink, KernelInfo("other", (4, 4, 1), (4, 4, 1)))
  fresh = UOp(Ops.SINK, new.src, KernelInfo("other", (4, 4, 1), (4, 4, 1)))
  assert fresh is new
  walked = new._toposort()
  assert new.toposort() == walked and walked[-1] is new
  assert new.by_op()[Ops.SINK] == (new,)


def _calls(sink: UOp, target: str) -> int:
  """Python function calls of compiling sink (after a collection: one that starts inside the profile would count the
  weak-reference callbacks of other tests' dead graphs)."""
  gc.collect()
  pr = cProfile.Profile()
  pr.enable()
  compile_kernel(sink, target)
  pr.disable()
  return pstats.Stats(pr).total_calls


@pytest.mark.parametrize("target", ["c", "gfx1100", "gfx1200", "gfx942", "sm_90"])
def test_compile_work_is_linear_in_kernel_size(target):
  """Python function calls of a compile of N, 2N and 4N ALU nodes: the second increment is about twice the first (a
  quadratic pass would make it ~4x). Increments, not totals, after a first compile that pays for imports and caches
  (ALU result types, mnemonic tables) the later ones find filled. Literals of their own (v ^ (i + 70001)) + 3, so that no node
  is shared with a kernel another test left alive."""
  def kernel(nodes: int) -> UOp:
    v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
    for i in range(nodes // 2): v = (v ^ (i + 70001)) + 3
    return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"lin{nodes}"))
  # the objects alive now (the rest of the session's: in the whole suite, millions) are collected once and frozen
  # out of the collector's sight for the test (gc.freeze), so that _calls' collections walk only what the test's own
  # compiles left, not the whole heap four times over; the counts are the same (what may die meanwhile is not walked)
  gc.collect()
  gc.freeze()
  try:
    _calls(kernel(100), target)   # (imports and caches of the target's first compile in this process)
    c1, c2, c4 = (_calls(kernel(n), target) for n in (200, 400, 800))
  finally:
    gc.unfreeze()
  assert (c4 - c2) / (c2 - c1) <= 2.2, (target, c1, c2, c4)


def test_a_walked_graph_is_freed_without_the_cyclic_collector():
  """The remembered walk leaves the root out: a sink that was walked (toposort, by_op, ranges) is freed as soon as
  nothing holds it, not at the next cyclic collection (compile pauses that collector: every graph a pass walked
  would otherwise live to the end of the compile, and the first collection after it would walk them all)."""
  import weakref
  was = gc.isenabled()
  gc.disable()
  try:
    sink = chain(50)
    sink.toposort(); sink.by_op(); assert not sink.ranges
    ref = weakref.ref(sink)
    del sink
    assert ref() is None
  finally:
    if was: gc.enable()
