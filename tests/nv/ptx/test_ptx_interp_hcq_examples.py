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


def _inputs(prog, rng) -> list:
  """Arguments for a coverage kernel: random buffers (the second operand of the integer ALU kernels within 1..7, so
  that shifts and divisions stay defined in the IR), outputs zeroed, scalars 5."""
  from hcq.compiler import dtypes
  args = []
  for slot, kind, dt, size, ro in prog.params:
    npdt = np.dtype(dtypes.to_numpy(dt))
    if kind != "buffer": args.append(5); continue
    if npdt.kind == "f": a = (rng.standard_normal(size) * 50).astype(npdt)
    elif npdt.kind == "b": a = rng.integers(0, 2, size).astype(npdt)
    elif slot == 1 and prog.name.startswith("alu_"): a = rng.integers(1, 8, size).astype(npdt)
    else:
      info = np.iinfo(npdt)
      a = rng.integers(info.min, info.max, size, dtype=npdt, endpoint=True)
    if not ro: a[:] = 0
    args.append(a)
  return args


def _coverage():
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "backend"))
  import test_ptx  # noqa: E402  (the PTX backend's every-dtype/op/conversion kernels)
  return test_ptx.COVERAGE


@pytest.mark.parametrize("name,build", _coverage(), ids=[c[0] for c in _coverage()])
def test_every_dtype_op_and_conversion_gives_the_c_backends_answer(name, build):
  """The PTX backend's coverage kernels (every ALU op on every dtype, every conversion, literals, scalar arguments)
  on the interpreter against the C backend. f16 MULACC may differ by one f16 ulp (PTX rounds x*y and then the sum;
  the C backend's _Float16 expression can round once) and f64 transcendentals have f32 precision in hcq's PTX."""
  from hcq.compiler.backend.ptx import PTX_TARGETS, render_ptx
  from hcq.compiler.lower import lower
  sink = build()
  prog = render_ptx(lower(sink, PTX_TARGETS["sm_90"]), "sm_90")
  args = _inputs(prog, np.random.default_rng(0))
  ref = run_c(sink, args, prog.global_size, prog.local_size)
  got, _ = run_ptx(sink, args, prog.global_size, prog.local_size)
  # alu_float32 includes sin.approx.f32, whose PTX ISA bound (9.1) is 2^-20.5 absolute in [-2pi, 2pi] but 2^-14.7 in
  # [-100pi, 100pi]: the mock may use all of it, as hardware may
  rtol = {"alu_float16": 1e-3, "alu_float64": 1e-4, "alu_float32": 2**-14.7}.get(name, 1e-6)
  for slot, kind, dt, size, ro in prog.params:
    if kind == "buffer" and not ro:
      assert_same(got[slot], ref[slot], rtol=rtol, what=f"{name} slot {slot} vs the C backend")
