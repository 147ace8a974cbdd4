"""Lowering speed (issue #20): the symbolic and dtype passes cost ~100 us per ALU node, a 10,000-node chain took
over a second to lower. The chain is x = x * 3 + 1 on a loaded int32, the one symbolic rewrites most (every step
folds into x * c1 + c2). Thread CPU time, so that other processes on the machine don't count."""
from __future__ import annotations

import time

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
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


def test_10000_node_chain_lowers_in_under_a_second():
  # generous for CI's two slow cores (best of two: a collection of the garbage of other tests may land in one);
  # before #20's work it took ~1.1 s on this machine, now ~0.7 s
  assert min(lowering_seconds(10_000) for _ in range(2)) < 1.0


@pytest.mark.slow
@pytest.mark.xfail(reason="#20's target (>= 50,000 ALU nodes/s) is not met yet: ~0.65 s on a fast core", strict=False)
def test_10000_node_chain_meets_the_target():
  assert lowering_seconds(10_000) < 0.2
