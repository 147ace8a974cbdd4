"""Real clang-19 output (OpenCL C, code object v5, for gfx1100 and for gfx1200 and gfx942) run on the emulator,
results compared with numpy."""
import numpy as np
import pytest

from hcq.mockgpu.amd.emu import GPUMemory

from . import clbuild
from .cases import CASES
from .loader import HostBuffers, Kernel

pytestmark = [pytest.mark.tools("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")]


@pytest.mark.parametrize("mcpu", ["gfx1100", "gfx1200", "gfx942"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_numpy(name, mcpu):
  if not clbuild.available(): pytest.skip("clang-19 / rocm-device-libs missing")
  source, run = CASES[name]
  from . import cases
  flags = {"subgroups": cases.SUBGROUP_FLAGS, "generic_ptrs": cases.GENERIC_FLAGS}.get(name, ())
  blob = clbuild.build(source, flags, mcpu)
  bufs = HostBuffers(GPUMemory())
  run(Kernel(bufs, blob, name), bufs, np.random.default_rng(1234))
