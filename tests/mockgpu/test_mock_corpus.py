"""The OpenCL C corpus (tests/fixtures/opencl) on the mock GPU through mock KFD ioctls: PM4 DISPATCH_DIRECT and AQL
kernel-dispatch packets, results compared with numpy; faults and the instruction budget."""
import ctypes
import struct

import numpy as np
import pytest

from hcq.config import Config
from hcq.errors import GPUFault
from mock_kfd_harness import Harness
from tests.fixtures.opencl.kernels import KERNELS, Buffer


def launch(h, k, data, queue, via="pm4", overrides=None):
  prog = h.load(k.code_object())
  mems, args = {}, []
  for a in k.args:
    if isinstance(a, Buffer):
      mem = mems[a.name] = h.alloc(max(a.nbytes, 4096), "gtt")
      mem.write(data[a.name].tobytes())
      args.append((overrides or {}).get(a.name, mem.va))
    else: args.append(data[a.name])
  sig = h.signals
  sig.u64()[0] = 0
  if via == "pm4":
    queue.submit(prog.pm4_dispatch(args, k.groups, k.local_size) + h.release_signal(sig.va, 1))
  else:
    kernarg = prog.kernargs(args, k.groups, k.local_size)
    grid = [g * l for g, l in zip(k.groups, k.local_size)]
    pkt = struct.pack("<HHHHHHIIIIIQQQQ", 2 | (1 << 8), 3, *k.local_size, 0, *grid, prog.private_fixed,
                      prog.group_fixed, prog.kd_addr, kernarg, 0, 0)
    slot = (queue.put // 16) % (queue.ring.size // 64)
    ctypes.memmove(queue.ring.va + 64 * slot + 4, pkt[4:], 60)
    ctypes.c_uint32.from_address(queue.ring.va + 64 * slot).value = struct.unpack_from("<I", pkt)[0]
    queue.put += 16
    queue.commit()
  end = h.os.monotonic() + 60
  while queue.rptr * queue.unit < queue.put * 4:
    queue.raise_new_error()
    assert h.os.monotonic() < end, "the dispatch did not finish"
    h.os.sleep(0.001)
  return {b.name: np.frombuffer(mems[b.name].read(b.nbytes), b.dtype) for b in k.outputs}


@pytest.fixture(scope="module")
def h():
  har = Harness()
  har.pm4q, har.aqlq = har.queue("compute"), har.queue("aql")
  yield har
  har.os.close()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_corpus_kernel_matches_numpy(h, name):
  k = KERNELS[name]
  data = k.inputs(seed=3)
  h.kernarg_put = 0
  k.check(launch(h, k, data, h.pm4q), data)


@pytest.mark.parametrize("name", ["vadd", "matmul_tiled", "private_array"])
def test_corpus_kernel_through_aql(h, name):
  k = KERNELS[name]
  data = k.inputs(seed=4)
  h.kernarg_put = 0
  k.check(launch(h, k, data, h.aqlq, via="aql"), data)


def test_dispatch_observers_see_the_launch(h):
  seen = []
  h.gpu.dispatch_observers.append(lambda q, launch: seen.append(launch))
  k = KERNELS["matmul_tiled"]
  h.kernarg_put = 0
  launch(h, k, k.inputs(), h.pm4q)
  h.gpu.dispatch_observers.clear()
  (l,) = seen
  assert l["grid"] == k.groups and l["block"] == k.local_size and l["lds_bytes"] == 2048
  assert [l["sh"][0x207 + i] for i in range(3)] == list(k.local_size)   # COMPUTE_NUM_THREAD_X/Y/Z


def test_unmapped_read_is_a_gpu_fault_with_that_address():
  h = Harness()
  k = KERNELS["copy_u32"]
  bad = 0x7E1234560000
  with pytest.raises(GPUFault) as e: launch(h, k, k.inputs(), h.queue("compute"), overrides={"src": bad})
  assert e.value.address == bad and e.value.kind == "page fault"
  _, events = h.wait(timeout_ms=10)
  assert events[1].memory_exception_data.va == bad and events[1].memory_exception_data.gpu_id == h.gpu_id
  h.os.close()


def test_endless_kernel_hits_the_instruction_budget():
  h = Harness(Config(mock_instruction_budget=20_000))
  k = KERNELS["uniform_loop"]
  data = k.inputs()
  data["iters"] = np.int32(2**31 - 1)
  with pytest.raises(GPUFault, match="instruction budget of 20000") as e: launch(h, k, data, h.queue("compute"))
  assert e.value.kind == "instruction budget"
  h.os.close()
