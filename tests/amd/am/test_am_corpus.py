"""Every kernel of the OpenCL corpus (tests/fixtures/opencl) on MOCKPCI+AMD: the AM driver booted with AMD's real
firmware, kernels through the mock's PM4 engine and RDNA3 emulator, results checked against numpy; synchronous and
threaded device models."""
import numpy as np
import pytest

import hcq
from hcq.config import Config
from tests.fixtures.opencl.kernels import KERNELS, Buffer


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "threaded"])
def dev(request, fw_dir):
  d = hcq.open("MOCKPCI+AMD", Config(mock_threaded=request.param, timeout_s=30, firmware_dir=fw_dir))
  yield d
  d.close()


def run(dev, k, data):
  bufs = {b.name: dev.alloc(b.nbytes) for b in k.buffers}
  for b in k.buffers: dev.copyin(bufs[b.name], data[b.name])
  prog = dev.load(k.code_object(dev.arch))     # the VF (a V710) is gfx1101
  args = [bufs[a.name] if isinstance(a, Buffer) else data[a.name].item() for a in k.args]
  prog(*args, global_size=k.groups, local_size=k.local_size, wait=True)
  out = {b.name: np.frombuffer(dev.copyout(bufs[b.name]), b.dtype) for b in k.outputs}
  for buf in bufs.values(): dev.free(buf)    # the VA range and page tables are used again, and again flushed
  return out


# the default suite runs these (as tests/mockgpu/test_mock_hcq_open.py does for MOCK+AMD); -m slow runs every kernel
NAMES = ["vadd", "saxpy", "lds_reduce", "matmul_tiled", "half2_fma", "private_array", "atomics_global", "ids2d"]


@pytest.mark.parametrize("name", [n if n in NAMES else pytest.param(n, marks=pytest.mark.slow) for n in sorted(KERNELS)])
def test_corpus_on_mockpci(dev, name):
  k = KERNELS[name]
  data = k.inputs(seed=11)
  k.check(run(dev, k, data), data)
