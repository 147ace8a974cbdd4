"""The kernel descriptor's f32 denormal mode (COMPUTE_PGM_RSRC1 FLOAT_DENORM_MODE_32): OpenCL's default keeps
denormals; -cl-denorms-are-zero makes clang set the flush mode, and the emulator then flushes them."""
import numpy as np
import pytest

from hcq.mockgpu.amd.emu import GPUMemory

from . import clbuild
from .loader import HostBuffers, Kernel

pytestmark = [pytest.mark.tools("clang-19", "ld.lld-19", "llvm-dis-19", "llvm-as-19")]

SRC = """kernel void scale(global const float *a, global const float *b, global float *out) {
  int i = get_global_id(0);
  out[i] = a[i] * b[i];
}"""


@pytest.mark.parametrize("flags,flush", [((), False), (("-cl-denorms-are-zero",), True)])
def test_f32_denormal_mode(flags, flush):
  if not clbuild.available(): pytest.skip("clang-19 / rocm-device-libs missing")
  bufs = HostBuffers(GPUMemory())
  k = Kernel(bufs, clbuild.build(SRC, flags), "scale")
  assert ((k.rsrc1 >> 16) & 3) == (0 if flush else 3)
  a = np.array([1e-39, 3e-39, 1e-30, 2.0] * 16, np.float32)    # denormal inputs, a denormal product, normals
  b = np.array([2.0, 1.0, 1e-9, 3.0] * 16, np.float32)
  pa, _ = bufs.array(a)
  pb, _ = bufs.array(b)
  po, out = bufs.array(np.zeros(64, np.float32))
  k(pa, pb, po, grid=(1, 1, 1), block=(64, 1, 1))
  exact = a * b
  if flush:
    exp = np.where(np.abs(exact) < np.finfo(np.float32).tiny, np.float32(0), exact)
    exp = np.where(np.abs(a) < np.finfo(np.float32).tiny, np.float32(0), exp)
    np.testing.assert_array_equal(out, exp)
    assert (out[:3] == 0).all()
  else:
    np.testing.assert_array_equal(out, exact)
    assert (out[:3] != 0).all()
