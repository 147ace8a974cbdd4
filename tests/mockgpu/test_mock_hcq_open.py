"""The corpus through hcq's public API on the mock: hcq.open("MOCK+AMD") (the KFD driver on MockOS), synchronous and
threaded device models."""
import numpy as np
import pytest

import hcq
from hcq.config import Config
from tests.fixtures.opencl.kernels import KERNELS, Buffer

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
  """A kernel reading a freed (unmapped) buffer: hcq.GPUFault with the buffer's address (threaded: through the KFD
  memory-exception event only)."""
  d = hcq.open("MOCK+AMD", Config(mock_threaded=threaded, timeout_s=10))
  try:
    k = KERNELS["copy_u32"]
    src, dst = d.alloc(4096 * 4), d.alloc(4096 * 4)
    prog = d.load(k.code_object())
    d.free(src)
    # a Buffer object for the freed range: the driver refuses the freed Buffer itself before submit
    stale = type(src)(d, src.va, src.size)
    with pytest.raises(hcq.GPUFault) as e:
      prog(stale, dst, 4000, global_size=k.groups, local_size=k.local_size, wait=True)
    assert e.value.address == src.va
  finally:
    try: d.close()
    except hcq.HCQError: pass


def _mock_threads():
  import threading
  return sorted(t.name for t in threading.enumerate() if t.name.startswith(("mock ", "bnxt-")))


@pytest.mark.parametrize("spec", ["MOCK+AMD", "MOCK+BNXT"])
def test_closing_a_device_closes_the_mock_hcq_open_made_for_it(spec):
  """hcq.open makes a MockOS for each mock device; dev.close() closes it: no worker thread, timer or socket of the
  mock outlives the device."""
  before = _mock_threads()
  d = hcq.open(spec, Config(mock_threaded=True, timeout_s=10))
  assert d.owned_os is not None and not d.owned_os.closed
  assert len(_mock_threads()) > len(before)   # the threaded GPU's worker, the NIC's timer and receive loop
  d.close()
  assert d.owned_os.closed and _mock_threads() == before


def test_a_failed_open_closes_the_mock_it_made(monkeypatch):
  """An opener that raises leaves nothing running."""
  import hcq.drivers.amd as amd
  before = _mock_threads()
  def refuse(*args, **kw): raise hcq.DeviceError("refused by the test")
  monkeypatch.setattr(amd, "open_device", refuse)
  with pytest.raises(hcq.DeviceError, match="refused by the test"):
    hcq.open("MOCK+AMD", Config(mock_threaded=True, timeout_s=10))
  assert _mock_threads() == before
