"""The project's OpenCL corpus (tests/fixtures/opencl: committed gfx1100 code objects + numpy references) run
directly on the emulator's dispatch() through the test loader (no KFD, no PM4)."""
import pytest

from hcq.mockgpu.amd.emu import GPUMemory
from tests.fixtures.opencl import kernels

from .loader import HostBuffers, Kernel, run_corpus_kernel


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_fixture_kernel(name):
  k = kernels.KERNELS[name]
  bufs = HostBuffers(GPUMemory())
  run_corpus_kernel(bufs, Kernel(bufs, k.code_object(), k.name), k, kernels)
