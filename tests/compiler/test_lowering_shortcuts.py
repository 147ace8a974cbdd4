"""The shortcuts of the lowering speed work of issue #30 (shared lowering, compiler/ir) decide what the general code
they bypass decides: the bounds of a saturated operand, the dtype UOp.__new__ takes from typecheck's memos, the
toposort without an iterator per node, graph_rewrite's direct call of a one-rule op. And the work per ALU node of
lowering, counted in Python function calls (deterministic, no timing), stays below what it was before that work
(about 107 and 116 calls per node for the two chains of bench/compile.py; that the generated code did not change is
test_output_unchanged.py's and test_codegen_golden.py's job)."""
from __future__ import annotations

import cProfile
import gc
import itertools
import pstats

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler.examples import ALL, matmul_tiled_kernel
from hcq.compiler.ir import Ops, PatternMatcher, UPat, graph_rewrite
from hcq.compiler.ir.ops import GroupOp
from hcq.compiler.ir import bounds as bounds_mod
from hcq.compiler.ir import typecheck
from hcq.compiler.ir.symbolic import simplify_alu, symbolic
from hcq.compiler.lower import lower

# value ranges of an int8 operand: a literal, small ranges, ones that reach a bound, and the whole type
RANGES = [(0, 0), (1, 1), (-1, -1), (2, 2), (0, 1), (-1, 0), (-3, 5), (0, 127), (-128, -128), (127, 127), (-128, 127)]


def _operand(lo: int, hi: int, slot: int) -> UOp:
  """An int8 value in [lo, hi]; the whole range as a LOAD (whose bounds are the type's own tuple, as a saturated
  result's are), a narrower one as a DEFINE_VAR cast to int8."""
  if (lo, hi) == dtypes.int8.bounds: return UOp.param(slot, dtypes.int8, 4, readonly=True).index(0).load()
  return UOp.variable(f"v{slot}", lo, hi, slot).cast(dtypes.int8)


@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.XOR, Ops.OR, Ops.MUL, Ops.AND])
def test_saturated_bounds_shortcut_agrees_with_the_arithmetic(op):
  """vminmax's answer for a signed op with a whole-range operand is what the interval arithmetic gives (clipped to
  the type where the result leaves it), for every pair of ranges."""
  full = dtypes.int8.bounds
  for (a0, a1), (b0, b1) in itertools.product(RANGES, RANGES):
    a, b = _operand(a0, a1, 1), _operand(b0, b1, 2)
    u = UOp(op, (a, b))
    assert u.dtype is dtypes.int8
    want = bounds_mod._BY_OP[op](u, dtypes.int8, [(a.vmin, a.vmax), (b.vmin, b.vmax)])
    if want[0] < full[0] or want[1] > full[1]: want = full
    assert (u.vmin, u.vmax) == tuple(want), (op, (a0, a1), (b0, b1))


def test_shortcut_dtypes_are_derive_dtypes():
  """The dtypes UOp.__new__ takes from the memos (ALU results, literals by class, checked CASTs) are derive_dtype's;
  an ill-typed node still reaches derive_dtype and is refused."""
  x = UOp.param(0, dtypes.int16, 4).index(0).load()
  nodes = [x + 1, x * x, x.cast(dtypes.float32), UOp.const(2.5), UOp.const(True), UOp.const(7), x.cast(dtypes.int64),
           (x < 3).where(x, 0)]
  for u in nodes + nodes:   # the second time from the memos
    assert u.dtype is typecheck.derive_dtype(u), u
  assert (dtypes.float32, dtypes.int16) in typecheck.CASTS_CHECKED
  with pytest.raises(Exception, match="BITCAST"): x.bitcast(dtypes.int32)
  with pytest.raises(Exception, match="ill-typed ADD"): UOp(Ops.ADD, (x, UOp.const(1.5)))
  with pytest.raises(Exception, match="ill-typed ADD"): UOp(Ops.ADD, (x,))


def _recursive_toposort(root: UOp) -> list:
  """The definition: a depth-first walk in source order, each node after its sources."""
  out, seen = [], set()
  def visit(u):
    if u in seen: return
    seen.add(u)
    for s in u.src: visit(s)
    out.append(u)
  visit(root)
  return out


@pytest.mark.parametrize("make", [*(lambda f=f: f().sink for f in ALL), lambda: matmul_tiled_kernel(16, 4),
                                  lambda: lower(matmul_tiled_kernel(16, 4), "c")])
def test_toposort_is_the_recursive_walk(make):
  """The toposort that rescans an open node's sources (an iterator only for a node of many, a LINEAR's) gives the
  recursive walk's order: for each example kernel, a matmul, and a LINEAR of many elements."""
  root = make()
  assert root._toposort() == _recursive_toposort(root)


def test_one_rule_ops_are_called_directly_with_the_same_result():
  """graph_rewrite calls symbolic's per-op ALU rule itself (PatternMatcher.by_node); the generic simplify_alu, run
  through PatternMatcher.rewrite, rewrites the same kernels to the same graphs."""
  generic = PatternMatcher([(UPat(tuple(GroupOp.ALU), name="x"), lambda *, x: simplify_alu(x)),
                            (UPat(Ops.CAST, name="x"), lambda *, x: symbolic.by_node[Ops.CAST](x)),
                            (UPat(Ops.INDEX, name="x"), lambda *, x: symbolic.by_node[Ops.INDEX](x))], name="generic")
  assert not generic.by_node and not generic.by_ctx_node   # (keyword-only rules: through PatternMatcher.rewrite)
  assert {Ops.ADD, Ops.MUL, Ops.XOR} <= symbolic.by_node.keys()
  for f in ALL:
    sink = lower(f().sink, "c", until="gpudims")
    assert graph_rewrite(sink, symbolic) is graph_rewrite(sink, generic), f.__name__


def _chain(steps: int, step) -> UOp:
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(steps): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"calls{steps}"))


def _lower_calls(sink: UOp) -> int:
  gc.collect()
  pr = cProfile.Profile()
  pr.enable()
  lower(sink, "c")
  pr.disable()
  return pstats.Stats(pr).total_calls


# bench/compile.py's chains, with an added literal of their own (no node shared with a kernel another test left alive)
@pytest.mark.parametrize("step,budget", [(lambda v, i: (v ^ i) + 90001, 90), (lambda v, i: v * 3 + 90001, 90)],
                         ids=["xor_add", "mul_add"])
def test_lowering_calls_per_alu_node(step, budget):
  """Python function calls (built-ins included) per ALU node of lowering, the increment from a 2,000- to a
  4,000-node chain: about 71 and 72 after the issue #30 work, 107 and 116 before it."""
  lower(_chain(25, step), "c")
  c1, c2 = _lower_calls(_chain(1000, step)), _lower_calls(_chain(2000, step))
  assert (c2 - c1) / 2000 <= budget, (c1, c2)


@pytest.mark.parametrize("make", [*(lambda f=f: f().sink for f in ALL), lambda: _chain(50, lambda v, i: (v ^ i) + 1)])
def test_linearize_shortcut_is_the_general_loop(make, monkeypatch):
  """A kernel with nothing linearize rewrites (no loop, barrier, AFTER, gated access) is its order less the SINK;
  the general loop gives the same LINEAR (forced here by counting every op as one it rewrites)."""
  import importlib
  linearize_mod = importlib.import_module("hcq.compiler.lower.linearize")   # (the package's name is the function)
  sink = lower(make(), "c", until="verify_lowered")
  fast = linearize_mod.linearize(sink)
  monkeypatch.setattr(linearize_mod, "_REWRITTEN", frozenset(Ops))
  assert linearize_mod.linearize(sink) is fast
