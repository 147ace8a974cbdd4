"""Random kernels (tests/backend/amd_random.py: integer/float expressions, loop nests, f16) compiled for gfx1200,
gfx942, gfx1101 and gfx1102 (RDNA3: gfx1100's encodings, their own user SGPR and VGPR rules) give the C backend's
results on the wave emulator of that target, decode under llvm-objdump-19
--mcpu=<target> as our disassembler prints them, and carry none of the target's hazards."""
from __future__ import annotations

import numpy as np
import pytest

from amd_emu_runner import run
from amd_reference import assert_same, objdump_agrees, run_c
from hcq.compiler import compile as hcq_compile
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.backend.amd.hazard_check import check_hazards

TARGETS = ("gfx1200", "gfx942", "gfx1101", "gfx1102")


def _check(c, arch):
  blob = hcq_compile(c.sink, arch)
  (k,) = CodeObject.parse(blob).kernels.values()
  assert check_hazards(k.code, arch) == []
  objdump_agrees(blob, arch)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, _ = run(blob, [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in c.args], c.global_size,
               c.local_size, arch=arch)
  return ref, got


@pytest.mark.tools("cc", "llvm-objdump-19")
@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("seed", range(10))
def test_random_expressions(arch, seed):
  from amd_random import random_case
  c = random_case(seed)
  ref, got = _check(c, arch)
  for slot in c.outputs:
    want, have = ref[slot], got[slot]
    if want.dtype.kind == "f":
      fin = np.isfinite(want)
      assert np.array_equal(np.isnan(want), np.isnan(have))
      assert_same(have[fin], want[fin], 1e-5, what=f"{c.name} slot {slot} on {arch}")
    else: assert_same(have, want, what=f"{c.name} slot {slot} on {arch}")


@pytest.mark.tools("cc", "llvm-objdump-19")
@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("seed", range(6))
def test_random_loop_nests(arch, seed):
  from amd_random import random_loop_case
  c = random_loop_case(seed)
  ref, got = _check(c, arch)
  for slot in c.outputs: assert_same(got[slot], ref[slot], what=f"{c.name} slot {slot} on {arch}")


@pytest.mark.tools("cc", "llvm-objdump-19")
@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("seed", range(4))
def test_random_f16_expressions_bit_exact(arch, seed):
  from amd_random import random_half_case
  c = random_half_case(seed)
  ref, got = _check(c, arch)
  for slot in c.outputs:
    r, h = ref[slot], got[slot]
    assert np.array_equal(np.isnan(r), np.isnan(h))
    np.testing.assert_array_equal(h[~np.isnan(r)], r[~np.isnan(r)], err_msg=f"{c.name} on {arch}")


def _wide_and_scalar_sinks():
  import test_amd_scalar
  import test_amd_wide
  out = [(name, lambda mk=mk: mk()[0]) for name, mk in test_amd_wide.CASES.items()]
  for mk in (test_amd_scalar.many_scalar_args_kernel, test_amd_scalar.many_buffers_kernel,
             test_amd_scalar.uniform_loads_kernel):
    out.append((mk.__name__, lambda mk=mk: (lambda r: r[0] if isinstance(r, tuple) else r.sink)(mk())))
  return out


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("name,make", _wide_and_scalar_sinks(), ids=[n for n, _ in _wide_and_scalar_sinks()])
def test_64bit_and_sgpr_spilling_kernels_have_no_hazards(arch, name, make):
  """int64/f64 sequences and SGPR spills (v_readlane results feeding scalar and memory operands) through each
  target's hazard rules."""
  (k,) = CodeObject.parse(hcq_compile(make(), arch)).kernels.values()
  assert check_hazards(k.code, arch) == []
