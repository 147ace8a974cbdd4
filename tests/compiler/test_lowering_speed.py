"""Lowering speed (issue #20): the target is >= 50,000 ALU nodes/s, a 10,000-node chain lowered in < 0.2 s (it took
~2 s when #20 was filed). The chain is x = x * 3 + 1 on a loaded int32, the one symbolic rewrites most (every step
folds into x * c1 + c2). Thread CPU time, so that other processes on the machine don't count. The time is spent
per node a pass builds: test_nodes_built_per_step pins that count, whatever the machine's speed."""
from __future__ import annotations

import time

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler.ir import uop as uop_module
from hcq.compiler.lower import lower


def mul_add_chain(nodes: int) -> UOp:
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for _ in range(nodes // 2): v = v * 3 + 1
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo("chain"))


def lowering_seconds(nodes: int) -> float:
  sink = mul_add_chain(nodes)
  t0 = time.thread_time()
  lower(sink, "c")
  return time.thread_time() - t0


def test_10000_node_chain_lowers_in_under_half_a_second():
  # looser than the target, for CI's two slow cores (best of two: a collection of the garbage of other tests may land
  # in one); before #20's work it took ~1.1 s on this machine, ~0.7 s after the first round, now ~0.18 s
  assert min(lowering_seconds(10_000) for _ in range(2)) < 0.5


def test_nodes_built_per_step(monkeypatch):
  """Each step of the chain, (y*c1 + c2)*3 + 1, costs the symbolic pass 8 new UOps: the two nodes rebuilt on
  rewritten sources, y*(3*c1), y*(3*c1) + 3*c2, its + 1 folded into y*(3*c1) + (3*c2+1), and three literals, one
  node each. Rules used to build intermediate nodes a later rewrite discarded ((y*c1)*3, CAST(CONST) pairs): 13."""
  sink = mul_add_chain(2_000)
  built = 0
  derive = uop_module.derive_dtype

  def counting(u):   # called once per UOp built (never for one the hash-consing cache returns)
    nonlocal built
    built += 1
    return derive(u)
  monkeypatch.setattr(uop_module, "derive_dtype", counting)
  lower(sink, "c")
  assert built <= 8 * 1_000 + 100   # a few dozen for the rest of the kernel and the passes after symbolic


@pytest.mark.slow
def test_10000_node_chain_meets_the_target():
  assert min(lowering_seconds(10_000) for _ in range(3)) < 0.2
