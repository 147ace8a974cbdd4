"""The PTX hcq's own compiler emits (compiler/backend/ptx.py) runs on the mock NV GPU's interpreter and gives the
C backend's results (and numpy's, for the examples) for every compiler example and every RDNA3 feature kernel
(issue #17's "runs on MOCK+NV", here at the interpreter level: no driver)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

from hcq.compiler import compile as hcq_compile
from hcq.compiler.examples import ALL
from hcq.mockgpu.nv.ptx import parse, run
from hcq.mockgpu.nv.ptx.model import DTYPES
from ptx_launch import HostMemory, pack_params

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "backend"))
import amd_kernels  # noqa: E402  (tests/backend: the feature kernels and the C-backend reference runner)
from amd_reference import assert_same, run_c  # noqa: E402


def run_ptx(sink, args, global_size, local_size, arch: str = "sm_90"):
  """(outputs: a copy of every argument array after the launch, stats) of hcq's PTX on the interpreter."""
  mod = parse(hcq_compile(sink, arch))
  (k,) = mod.kernels.values()
  hm = HostMemory()
  views, values = {}, []
  for slot, (arg, p) in enumerate(zip(args, k.params)):
    if isinstance(arg, np.ndarray):
      addr, views[slot] = hm.array(arg)
      values.append(addr)
    else: values.append(np.array(arg).astype(DTYPES[p.ptype]))
  stats = run(k, global_size, local_size, pack_params(k, values), hm.mem)
  return views, stats


@pytest.mark.parametrize("example", ALL, ids=lambda f: f.__name__)
def test_every_example_kernel_gives_numpys_and_the_c_backends_answer(example):
  ex = example()
  ref = run_c(ex.sink, ex.args, ex.global_size, ex.local_size)
  got, stats = run_ptx(ex.sink, ex.args, ex.global_size, ex.local_size)
  assert stats["thread_instructions"] > 0
  for slot, want in ex.expected.items():
    assert_same(got[slot], ref[slot], what=f"{ex.name} slot {slot} vs the C backend")
    assert_same(got[slot], want, what=f"{ex.name} slot {slot} vs numpy")


@pytest.mark.parametrize("make", amd_kernels.ALL, ids=[f.__name__ for f in amd_kernels.ALL])
def test_feature_kernels_give_the_c_backends_answer(make):
  """f16, int div/mod with negative operands, float->int saturation, LOCAL reductions with barriers, ..."""
  c = make()
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, _ = run_ptx(c.sink, c.args, c.global_size, c.local_size)
  for slot in c.outputs:
    assert_same(got[slot], ref[slot], rtol=c.float_rtol, what=f"{c.name} slot {slot} vs the C backend")
