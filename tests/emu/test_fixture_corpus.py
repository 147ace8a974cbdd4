"""The project's OpenCL corpus (tests/fixtures/opencl: committed gfx1100 code objects + numpy references) run
directly on the emulator's dispatch() through the test loader (no KFD, no PM4)."""
import pytest

from hcq.mockgpu.amd.emu import GPUMemory

from .loader import HostBuffers, Kernel

kernels = pytest.importorskip("tests.fixtures.opencl.kernels")


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_fixture_kernel(name):
  k = kernels.KERNELS[name]
  data = k.inputs(seed=0)
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, k.code_object(), k.name)
  args, outputs = [], {}
  for a in k.args:
    if isinstance(a, kernels.Scalar):
      args.append(data[a.name])
      continue
    addr, view = bufs.array(data[a.name])
    args.append(addr)
    outputs[a.name] = view
  prog(*args, grid=k.groups, block=k.local_size)
  k.check(outputs, data)
