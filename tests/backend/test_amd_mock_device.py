"""The backend's code on MOCK+AMD through the public API: dev.compile(sink) -> Program; buffers copied in, launched
with the example's sizes, copied out; compared with the C backend (ints bit-exact, floats 1e-5 relative)."""
from __future__ import annotations

import numpy as np
import pytest

import amd_kernels
import hcq
from amd_reference import assert_same, run_c
from hcq.compiler import examples

pytestmark = pytest.mark.tools("cc")


@pytest.fixture(scope="module")
def dev():
  with hcq.open("MOCK+AMD") as d: yield d


def run_on(dev, sink, args, global_size, local_size, outputs):
  prog = dev.compile(sink)
  bufs = []
  for a in args:
    if isinstance(a, np.ndarray):
      b = dev.alloc(max(a.nbytes, 4))
      dev.copyin(b, a.tobytes())
      bufs.append(b)
    else: bufs.append(a)
  t = prog(*bufs, global_size=global_size, local_size=local_size, wait=True)
  assert t >= 0
  return {s: np.frombuffer(dev.copyout(bufs[s])[:args[s].nbytes], args[s].dtype).reshape(args[s].shape) for s in outputs}


CASES = [("ex_" + f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in amd_kernels.ALL]


@pytest.mark.parametrize("make", [f for _, f in CASES], ids=[n for n, _ in CASES])
def test_mock_amd_matches_c_backend(dev, make):
  c = make()
  outputs = list(c.expected) if hasattr(c, "expected") else c.outputs
  rtol = getattr(c, "float_rtol", 1e-5)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got = run_on(dev, c.sink, c.args, c.global_size, c.local_size, outputs)
  for s in outputs: assert_same(got[s], ref[s], rtol, what=f"{c.name} slot {s} on MOCK+AMD vs the C backend")


def test_program_reused_with_new_arguments(dev):
  ex = examples.runtime_loop(n=37)
  prog = dev.compile(ex.sink)
  a = ex.args[0]
  ba, bo = dev.alloc(a.nbytes), dev.alloc(16 * 4)
  dev.copyin(ba, a.tobytes())
  for n in (0, 5, 64):
    prog(ba, bo, n, global_size=ex.global_size, local_size=ex.local_size, wait=True)
    np.testing.assert_allclose(np.frombuffer(dev.copyout(bo), np.float32), a[:, :n].sum(1), rtol=1e-5, atol=1e-5)
