"""Real clang-19 output (OpenCL C, code object v5, for gfx1100 in wave32 and wave64, gfx1200 and gfx942) run on the
emulator, results compared with numpy."""
import numpy as np
import pytest

from hcq.mockgpu.amd.emu import GPUMemory

from . import clbuild
from .cases import CASES
from .loader import HostBuffers, Kernel

pytestmark = [pytest.mark.tools("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")]


# gfx1100-wave64: RDNA3 code compiled for waves of 64 (-mwavefrontsize64: the kernel descriptor says so)
@pytest.mark.parametrize("target", ["gfx1100", "gfx1100-wave64", "gfx1200", "gfx942"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_numpy(name, target):
  if not clbuild.available(): pytest.skip("clang-19 / rocm-device-libs missing")
  source, run = CASES[name]
  from . import cases
  flags = {"subgroups": cases.SUBGROUP_FLAGS, "generic_ptrs": cases.GENERIC_FLAGS}.get(name, ())
  mcpu, _, wave = target.partition("-")
  blob = clbuild.build(source, tuple(flags) + (("-mwavefrontsize64",) if wave else ()), mcpu)
  bufs = HostBuffers(GPUMemory())
  k = Kernel(bufs, blob, name)
  assert k.wave_size == (64 if wave or mcpu == "gfx942" else 32)
  run(k, bufs, np.random.default_rng(1234))
