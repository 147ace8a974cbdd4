"""The corpus through hcq's public API on the mock: hcq.open("MOCK+AMD") (the KFD driver on MockOS), synchronous and
threaded device models."""
import numpy as np
import pytest

import hcq
from hcq.config import Config
from tests.fixtures.opencl.kernels import KERNELS, Buffer
from test_mock_corpus import emulator_ready

pytestmark = pytest.mark.skipif(not emulator_ready(), reason="the RDNA3 wave emulator (mockgpu/amd/emu) is not there yet")

NAMES = ["vadd", "saxpy", "lds_reduce", "matmul_tiled", "half2_fma", "private_array", "atomics_global", "ids2d"]


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "threaded"])
def dev(request):
  d = hcq.open("MOCK+AMD", Config(mock_threaded=request.param, timeout_s=30))
  yield d
  d.close()


def run(dev, k, data):
  bufs = {b.name: dev.alloc(b.nbytes) for b in k.buffers}
  for b in k.buffers: dev.copyin(bufs[b.name], data[b.name])
  prog = dev.load(k.code_object())
  args = [bufs[a.name] if isinstance(a, Buffer) else data[a.name].item() for a in k.args]
  prog(*args, global_size=k.groups, local_size=k.local_size, wait=True)
  return {b.name: np.frombuffer(dev.copyout(bufs[b.name]), b.dtype) for b in k.outputs}


@pytest.mark.parametrize("name", NAMES)
def test_corpus_through_hcq_open(dev, name):
  k = KERNELS[name]
  data = k.inputs(seed=7)
  k.check(run(dev, k, data), data)


@pytest.mark.parametrize("threaded", [False, True], ids=["sync", "threaded"])
def test_fault_through_hcq_open(threaded):
  """A kernel reading freed (unmapped) memory: hcq.GPUFault with the buffer's address (threaded: through the KFD
  memory-exception event only). The driver refuses a Buffer it freed before submitting, so the kernel gets a stale
  handle to the same address, as a caller that kept only the address would."""
  from hcq.drivers.hcq import Buffer as DeviceBuffer
  d = hcq.open("MOCK+AMD", Config(mock_threaded=threaded, timeout_s=10))
  try:
    k = KERNELS["copy_u32"]
    src, dst = d.alloc(4096 * 4), d.alloc(4096 * 4)
    prog = d.load(k.code_object())
    d.free(src)
    stale = DeviceBuffer(d, src.va, src.size)
    with pytest.raises(hcq.GPUFault) as e:
      prog(stale, dst, 4000, global_size=k.groups, local_size=k.local_size, wait=True)
    assert e.value.address == src.va
  finally:
    try: d.close()
    except hcq.HCQError: pass
