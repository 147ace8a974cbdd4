"""The AMD backend's share of compile time (issue #30: instruction selection, register allocation, waits, hazards,
encoding and the code-object writer after the shared lowering), counted in Python function calls per ALU node of the
bench's chain: deterministic, no timing (bench/compile.py times it). Before the backend speed work a 2,000-node chain
took 90-104 calls per node on gfx1100, gfx1200 and gfx942; it takes about 55-59 now. That the code is unchanged by
that work is test_amd_codegen_golden.py's job."""
from __future__ import annotations

import cProfile
import gc
import pstats

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler.backend.amd import isel_common
from hcq.compiler.backend.amd.render import TARGETS, code_object, compile_linear
from hcq.compiler.ir import Ops
from hcq.compiler.lower import lower

CALLS_PER_NODE_MAX = 70


def chain(nodes: int) -> UOp:
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(nodes // 2): v = (v ^ i) + 1
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{nodes}"))


def backend_calls(nodes: int, arch: str) -> int:
  lin = lower(chain(nodes), TARGETS[arch])
  gc.collect()
  pr = cProfile.Profile()
  pr.enable()
  code_object(compile_linear(lin, arch))
  pr.disable()
  return pstats.Stats(pr).total_calls


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942"])
def test_backend_work_per_alu_node(arch):
  backend_calls(100, arch)   # (the target's tables and caches, made on its first compile in this process)
  per_node = backend_calls(2000, arch) / 2000
  assert per_node <= CALLS_PER_NODE_MAX, f"{arch}: {per_node:.1f} Python calls per ALU node in the backend"


def test_selection_ops_are_the_irs_members():
  """isel_common.Ops is a plain namespace of the very Enum members (a faster attribute read, the same objects)."""
  assert {n: getattr(isel_common.Ops, n) for n in Ops.__members__} == dict(Ops.__members__)
  assert all(getattr(isel_common.Ops, n) is m for n, m in Ops.__members__.items())
