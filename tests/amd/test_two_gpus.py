"""Two GPUs in one process: KFD takes one event page per process, so the devices share it (kfd_events.py); each
device keeps its own signal and fault events and reports only the faults of its GPU."""
import ctypes

import numpy as np
import pytest

from hcq import GPUFault
from hcq.config import Config
from hcq.drivers.amd import open_device
from hcq.drivers.amd.kernels import demo_code_object
from hcq.drivers.hcq import Buffer


@pytest.fixture(params=[False, True], ids=["synchronous", "threaded"])
def osi(request):
  from hcq.mockgpu import mock_amd_os
  with mock_amd_os(Config(timeout_s=5.0, mock_threaded=request.param), gpus=2) as osi: yield osi


def _round_trip(dev, seed):
  data = np.random.default_rng(seed).integers(0, 256, 100_001, dtype=np.uint8)
  buf = dev.alloc(data.size)
  dev.copyin(buf, data)
  assert dev.copyout(buf) == data.tobytes()


def test_two_gpus_of_one_process_share_the_event_page(osi):
  d0 = open_device("KFD", 0, osi, osi.config)
  d1 = open_device("KFD", 1, osi, osi.config)
  try:
    assert d0.session.gpu_id != d1.session.gpu_id
    assert d0.session.event_page is d1.session.event_page and d0.session.event_page.users == 2
    assert d0.session.event_id != d1.session.event_id and d0.session.mailbox_va != d1.session.mailbox_va
    for _ in range(3):
      _round_trip(d0, 1)
      _round_trip(d1, 2)
  finally:
    d0.close()                      # the first device goes first: the page stays for the second
  try:
    _round_trip(d1, 3)
    assert d1.session.event_page.users == 1
  finally:
    d1.close()
  again = open_device("KFD", 1, osi, osi.config)   # the page was freed with the last user: a new one is handed over
  try: _round_trip(again, 4)
  finally: again.close()


def _needs_emulator(dev):
  """A first launch (an empty kernel, waited for) before the test's own."""
  dev.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)


def test_a_fault_is_reported_by_the_device_of_the_faulting_gpu(osi):
  d0 = open_device("KFD", 0, osi, osi.config)
  d1 = open_device("KFD", 1, osi, osi.config)
  try:
    _needs_emulator(d1)
    vadd0, vadd1 = d0.load(demo_code_object(), "vadd"), d1.load(demo_code_object(), "vadd")
    a0, a1 = d0.alloc(1024), d1.alloc(1024)
    d0.copyin(a0, np.arange(256, dtype=np.float32))
    with pytest.raises(GPUFault) as e:
      vadd1(a1, Buffer(d1, 0x7000_0000_0000, 4096), a1, 64, global_size=(1,), local_size=(64,), wait=True)
    assert e.value.address is not None and 0x7000_0000_0000 <= e.value.address < 0x7000_0000_1000
    vadd0(a0, a0, a0, 256, global_size=(1,), local_size=(256,), wait=True)   # GPU 0 runs on
    assert np.array_equal(np.frombuffer(d0.copyout(a0), np.float32), 2 * np.arange(256, dtype=np.float32))
  finally:
    d0.close()
    try: d1.close()
    except GPUFault: pass       # its queues stopped at the fault


def test_a_fault_evicts_the_queues_of_every_device_of_the_process_on_that_gpu(osi):
  """Two devices of one process on GPU 0: KFD evicts the process's queues on a VM fault (kfd_dqm_evict_pasid) and
  signals the memory exception to the process, so the other device's next wait raises GPUFault with the address
  instead of running on (or timing out), and its kernel never runs. GPU 1 runs on."""
  a, b = open_device("KFD", 0, osi, osi.config), open_device("KFD", 0, osi, osi.config)
  other = open_device("KFD", 1, osi, osi.config)
  try:
    vadd_a, vadd_b = a.load(demo_code_object(), "vadd"), b.load(demo_code_object(), "vadd")
    ga, gb = a.alloc(1024), b.alloc(1024)
    b.copyin(gb, np.ones(256, np.float32))
    b.synchronize()             # the copy may still be queued (threaded mock): let it land before the fault
    with pytest.raises(GPUFault) as e:
      vadd_a(ga, Buffer(a, 0x7000_0000_0000, 4096), ga, 64, global_size=(1,), local_size=(64,), wait=True)
    fault = e.value.address
    assert fault is not None and 0x7000_0000_0000 <= fault < 0x7000_0000_1000
    with pytest.raises(GPUFault) as e:
      vadd_b(gb, gb, gb, 256, global_size=(1,), local_size=(256,))
      b.synchronize()
    assert e.value.address == fault and b.session.label in str(e.value)
    # the mock's VRAM is host memory at the buffer's address (GPU VA == host VA): b's vadd (1 + 1) did not run
    assert np.array_equal(np.frombuffer(ctypes.string_at(gb.va, 1024), np.float32), np.ones(256, np.float32))
    _round_trip(other, 5)                         # another GPU of the process is not evicted
  finally:
    for d in (other, b, a):
      try: d.close()
      except GPUFault: pass       # their queues stopped at the fault
