"""The OpenCL corpus built for gfx1200 (RDNA4, wave32) and gfx942 (CDNA3, wave64) (tests/fixtures/opencl/hsaco/
<mcpu>/, built by build.py) run directly on the emulator's dispatch() through the test loader, each kernel checked
against its numpy reference: the RDNA4 and CDNA3 counterpart of test_fixture_corpus.py."""
import pytest

from hcq.mockgpu.amd.emu import GPUMemory
from tests.fixtures.opencl import kernels

from .loader import HostBuffers, Kernel, run_corpus_kernel


@pytest.mark.parametrize("mcpu", ["gfx1200", "gfx942"])
@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_fixture_kernel(mcpu, name):
  k = kernels.KERNELS[name]
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, k.code_object(mcpu), k.name)
  assert (prog.arch, prog.wave_size) == (mcpu, 64 if mcpu == "gfx942" else 32)
  run_corpus_kernel(bufs, prog, k, kernels)
