"""Issue #17 through the public API: hcq's PTX backend, compiled by dev.compile() on MOCK+NV (H200: sm_90) and run by
the mock GPU, gives the C backend's results for the feature kernels (f16, conversions that saturate with NaN -> 0,
int div/mod with negative operands, LOCAL-memory reductions with barriers, divergent and nested loops, 3-D grids,
...), on the same inputs."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import hcq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "backend"))
import amd_kernels  # noqa: E402  (tests/backend: the feature kernels)
from amd_reference import assert_same, run_c  # noqa: E402


@pytest.fixture(scope="module")
def dev():
  with hcq.open("MOCK+NV") as d: yield d


@pytest.mark.parametrize("make", amd_kernels.ALL, ids=[f.__name__ for f in amd_kernels.ALL])
def test_feature_kernels_on_mock_nv_give_the_c_backends_answer(dev, make):
  c = make()
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  prog = dev.compile(c.sink)
  bufs, args = {}, []
  for slot, a in enumerate(c.args):
    if isinstance(a, np.ndarray):
      b = bufs[slot] = dev.alloc(max(a.nbytes, 4))
      dev.copyin(b, a)
      args.append(b)
    else: args.append(a.item() if hasattr(a, "item") else a)
  prog(*args, global_size=c.global_size, local_size=c.local_size)
  for slot in c.outputs:
    want = ref[slot]
    got = np.frombuffer(dev.copyout(bufs[slot]), want.dtype)[:want.size].reshape(want.shape)
    assert_same(got, want, rtol=c.float_rtol, what=f"{c.name} slot {slot} on MOCK+NV vs the C backend")
  for b in bufs.values(): dev.free(b)
