"""Lowering cost (issue #20), held by counts: the chain is x = x * 3 + 1 on a loaded int32, the one symbolic rewrites
most (every step folds into x * c1 + c2). The time is spent per node a pass builds: test_nodes_built_per_step pins
that count, whatever the machine's speed. How long lowering takes (the target: a 10,000-node chain in < 0.2 s) is
measured by bench/compile.py, not asserted here (no test asserts a duration)."""
from __future__ import annotations

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler.ir import uop as uop_module
from hcq.compiler.lower import lower


def mul_add_chain(nodes: int) -> UOp:
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for _ in range(nodes // 2): v = v * 3 + 1
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo("chain"))


def test_nodes_built_per_step(monkeypatch):
  """Each step of the chain, (y*c1 + c2)*3 + 1, costs the symbolic pass 8 new UOps: the two nodes rebuilt on
  rewritten sources, y*(3*c1), y*(3*c1) + 3*c2, its + 1 folded into y*(3*c1) + (3*c2+1), and three literals, one
  node each. Rules used to build intermediate nodes a later rewrite discarded ((y*c1)*3, CAST(CONST) pairs): 13."""
  sink = mul_add_chain(2_000)
  built = 0

  class CountingRef(uop_module._Ref):   # the cache's reference, made once per UOp built (never for one it returns)
    __slots__ = ()

    def __new__(cls, *a):
      nonlocal built
      built += 1
      return super().__new__(cls, *a)
  monkeypatch.setattr(uop_module, "_Ref", CountingRef)
  lower(sink, "c")
  # a few dozen more for the rest of the kernel and the passes after symbolic; a few less where a node an earlier test
  # built (a small literal, the kernel's loads) is still in the cache and returned, not built
  assert 8 * 1_000 - 50 <= built <= 8 * 1_000 + 100
