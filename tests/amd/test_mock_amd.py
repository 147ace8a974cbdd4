"""The AMD driver through hcq.open("MOCK+AMD") and the public API (DESIGN.md §4): the OpenCL corpus with numpy
references, copies, faults, timeouts, argument errors, and the acceptance timings of `hcq demo` and a fresh process.

Kernel execution needs the wave emulator of the mock; where the mock reports it as not implemented yet, the tests
that run kernels skip saying so (copies, waits and errors still run)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import hcq
from hcq import DeviceError, GPUFault, Timeout
from hcq.config import Config
from hcq.drivers.amd import pm4
from hcq.drivers.amd.kernels import demo_code_object
from hcq.drivers.hcq import Buffer
from tests.fixtures.opencl.kernels import KERNELS as CORPUS
from tests.fixtures.opencl.kernels import Buffer as KBuf



def _open(timeout_s=1.0, threaded=False):
  return hcq.open("MOCK+AMD", Config(timeout_s=timeout_s, mock_threaded=threaded))


@pytest.fixture
def dev():
  d = _open()
  yield d
  d.close()


@pytest.fixture(params=[False, True], ids=["synchronous", "threaded"])
def both_dev(request):
  """The mock in both modes: running queues inside the doorbell write, and in a background thread (where a missing
  wait in the driver shows up as wrong data)."""
  d = _open(threaded=request.param)
  yield d
  d.close()


def _needs_emulator(d):
  """A first launch (an empty kernel, waited for) before the test's own."""
  d.load(demo_code_object(), "empty")(global_size=(1,), local_size=(1,), wait=True)


def _run_corpus_kernel(d, name, mcpu="gfx1100"):
  k = CORPUS[name]
  data = k.inputs(seed=3)
  prog = d.load(k.code_object(mcpu), k.name)
  args, bufs = [], {}
  for a in k.args:
    if isinstance(a, KBuf):
      b = bufs[a.name] = d.alloc(a.nbytes)
      d.copyin(b, data[a.name])
      args.append(b)
    else: args.append(data[a.name].item())
  prog(*args, global_size=k.groups, local_size=k.local_size, wait=True)
  k.check({b.name: np.frombuffer(d.copyout(bufs[b.name]), b.dtype) for b in k.outputs}, data)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_kernel_through_the_public_api(dev, name):
  _needs_emulator(dev)
  _run_corpus_kernel(dev, name)


@pytest.fixture(scope="module", params=[(t, m) for t in ("gfx1200", "gfx942") for m in (False, True)],
                ids=lambda p: f"{p[0]}-{'threaded' if p[1] else 'synchronous'}")
def target_dev(request):
  """The mock posing as another target (HCQ_MOCK_GPU), in both modes; one device per target and mode (the kernels
  of a target share it, as a program's launches do)."""
  target, threaded = request.param
  d = hcq.open("MOCK+AMD", Config(timeout_s=10.0, mock_threaded=threaded, mock_gpu=target))
  yield d
  d.close()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_kernel_on_each_target(target_dev, name):
  """Every fixture kernel, built for the device's target, gives numpy's results: gfx1200 through PM4, gfx942 (wave64)
  through its AQL queue."""
  _run_corpus_kernel(target_dev, name, target_dev.arch)


@pytest.mark.parametrize("size,offset", [(1, 0), (1, 3), ((1 << 20) + 1, 7), ((64 << 20) - 5, 3)])
def test_copy_round_trips_are_byte_exact(both_dev, size, offset):
  dev = both_dev
  buf = dev.alloc(size + offset + 9)
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
  dev.copyin(buf, data, offset=offset)
  assert dev.copyout(buf, size, offset=offset) == data.tobytes()
  # the bytes around the copied range are untouched (zero)
  assert dev.copyout(buf, offset, 0) == bytes(offset)
  assert dev.copyout(buf, 9, offset + size) == bytes(9)
  dev.free(buf)


def test_vector_add_and_matmul_of_the_demo(both_dev):
  dev = both_dev
  _needs_emulator(dev)
  code = demo_code_object()
  vadd, matmul = dev.load(code, "vadd"), dev.load(code, "matmul")
  a = np.arange(1000, dtype=np.float32)
  b = np.full(1000, 0.5, np.float32)
  da, db, dc = dev.alloc(4000), dev.alloc(4000), dev.alloc(4000)
  dev.copyin(da, a); dev.copyin(db, b)
  t = vadd(da, db, dc, 1000, global_size=(4,), local_size=(256,), wait=True)
  assert t > 0 and np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b)
  x = np.random.default_rng(0).standard_normal((48, 48)).astype(np.float32)
  dx, dz = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
  dev.copyin(dx, x)
  matmul(dx, dx, dz, 48, 48, 48, global_size=(3, 3), local_size=(16, 16), wait=True)
  assert np.allclose(np.frombuffer(dev.copyout(dz), np.float32).reshape(48, 48), x @ x, rtol=1e-4, atol=1e-4)


def test_faulting_kernel_raises_gpu_fault_with_the_address(both_dev):
  dev = both_dev
  _needs_emulator(dev)
  vadd = dev.load(demo_code_object(), "vadd")
  good = dev.alloc(4096)
  bad = Buffer(dev, 0x7000_0000_0000, 4096)   # an address nothing maps
  with pytest.raises(GPUFault) as e:
    vadd(good, bad, good, 64, global_size=(1,), local_size=(64,), wait=True)
  assert e.value.address is not None and 0x7000_0000_0000 <= e.value.address < 0x7000_0000_1000
  assert dev.session.label in str(e.value)                # the message names the device
  submits = dev.compute.ring.submits
  with pytest.raises(DeviceError, match="faulted earlier .* nothing more is submitted"):
    vadd(good, good, good, 64, global_size=(1,), local_size=(64,))
  assert dev.compute.ring.submits == submits


def test_an_impossible_wait_times_out_within_the_configured_time():
  d = _open(timeout_s=0.5)
  try:
    never = d.signals.alloc(0, name="never signal")
    d.submit_pm4(pm4.wait_reg_mem(never.va, 1))
    with pytest.raises(Timeout) as e: d.synchronize()
    assert e.value.timeout_s == 0.5 and f"after {0.5:g} s" in str(e.value)   # the configured time, said so
    assert e.value.expected == d.timeline.value
  finally:
    never.value = 1  # let the queue finish so that closing completes
    d.close()


def test_closing_after_a_timeout_does_not_wait_again():
  d = _open(timeout_s=1.0)
  never = d.signals.alloc(0, name="never signal")
  d.submit_pm4(pm4.wait_reg_mem(never.va, 1))
  with pytest.raises(Timeout): d.synchronize()
  waits = []
  d.wait_value = lambda value: waits.append(value)      # counted, not timed
  d.close()                                   # destroys the stuck queue instead of waiting for it a second time
  assert waits == [] and d.closed


def test_errors_before_anything_is_submitted(dev, tmp_path):
  code = demo_code_object()
  vadd = dev.load(code, "vadd")
  a = dev.alloc(256)
  before = (dev.compute.ring.submits, dev.timeline.value)
  for call, msg in [(lambda: vadd(a, a, global_size=(1,), local_size=(64,)), "takes 4 arguments"),
                    (lambda: vadd(a, a, 1.5, 4, global_size=(1,), local_size=(64,)), "needs a Buffer"),
                    (lambda: vadd(a, a, a, "4", global_size=(1,), local_size=(64,)), "needs an integer"),
                    (lambda: vadd(a, a, a, 4, global_size=(0, 1, 1), local_size=(64,)), "zero"),
                    (lambda: dev.load(code, "missing"), "no kernel 'missing'")]:
    with pytest.raises(DeviceError, match=msg): call()
  assert (dev.compute.ring.submits, dev.timeline.value) == before


def _python(code: str, timeout=60):
  # as after an installation: Python may cache bytecode (this sandbox sets PYTHONDONTWRITEBYTECODE, which makes
  # every process compile every module from source)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
  env["HCQ_DEV"] = "MOCK+AMD"
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, cwd="/")


def _demo_ok(r):
  assert r.returncode == 0, r.stdout + r.stderr
  assert "ok" in r.stdout and "FAIL" not in r.stdout


DEMO = "import sys; from hcq.cli import main; sys.exit(main(['demo']))"


def test_hcq_demo_in_a_fresh_process_exits_0_with_results_checked(dev):
  _needs_emulator(dev)
  r = _python(DEMO)
  _demo_ok(r)
  assert r.stdout.startswith("device: ") and "vector add" in r.stdout and "matmul" in r.stdout


# the fresh-process and `hcq demo` start-up times (0.5 s, 1 s) are measured by bench/startup.py: no test asserts a
# duration


def test_bound_launch_repeats_through_an_indirect_buffer(both_dev):
  dev = both_dev
  _needs_emulator(dev)
  vadd = dev.load(demo_code_object(), "vadd")
  x = np.arange(512, dtype=np.float32)
  dx, dy = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
  dev.copyin(dx, x)
  dev.copyin(dy, np.zeros(512, np.float32))
  bound = dev.bind(vadd, dx, dy, dy, 512, global_size=(2,), local_size=(256,))   # y = x + y, three times
  for _ in range(3): bound()
  dev.synchronize()
  assert np.array_equal(np.frombuffer(dev.copyout(dy), np.float32), 3 * x)


DISPATCH_PTR_CL = """
typedef struct { ushort header, setup, wg_x, wg_y, wg_z, r0; uint grid_x, grid_y, grid_z, priv, group;
                 ulong kernel_object, kernarg_address; } packet_t;
__kernel void probe(__global uint *out, uint tag) {
  __constant packet_t *p = (__constant packet_t *)__builtin_amdgcn_dispatch_ptr();
  if (__builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workgroup_id_x() == 0) {
    out[0] = p->wg_x; out[1] = p->grid_x; out[2] = p->grid_y; out[3] = tag;
    out[4] = (uint)p->kernarg_address; out[5] = (uint)(p->kernarg_address >> 32);
  }
}
"""


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_dispatch_pointer_user_sgprs_come_before_the_kernarg_pointer(dev, tmp_path):
  _needs_emulator(dev)
  src = tmp_path / "probe.cl"
  src.write_text(DISPATCH_PTR_CL)
  obj, co = tmp_path / "probe.o", tmp_path / "probe.hsaco"
  subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib",
                  "-O2", "-c", str(src), "-o", str(obj)], check=True)
  subprocess.run(["ld.lld-19", "-shared", str(obj), "-o", str(co)], check=True)
  prog = dev.load(co.read_bytes(), "probe")
  assert [n for n, _ in prog.user_sgprs] == ["dispatch_ptr", "kernarg_segment_ptr"]
  out = dev.alloc(64)
  dev.copyin(out, bytes(64))
  prog(out, 0xC0FFEE, global_size=(3, 2), local_size=(32,), wait=True)
  got = np.frombuffer(dev.copyout(out, 24), np.uint32)
  assert list(got[:4]) == [32, 96, 2, 0xC0FFEE]
  kernarg = int(got[4]) | int(got[5]) << 32
  assert dev.launch_data.va <= kernarg < dev.launch_data.va + dev.launch_data.size


def test_second_mock_gpu_by_index():
  import hcq as h
  d = h.open("MOCK+AMD:1", Config(timeout_s=1.0))
  with d:
    with _open() as d0:
      assert d.session.gpu_id != d0.session.gpu_id
    buf = d.alloc(1000)
    d.copyin(buf, bytes(range(250)) * 4)
    assert d.copyout(buf) == bytes(range(250)) * 4


def test_host_buffers_are_copied_by_the_cpu_and_usable_by_kernels(dev):
  _needs_emulator(dev)
  vadd = dev.load(demo_code_object(), "vadd")
  a = np.arange(256, dtype=np.float32)
  ha, hc = dev.alloc(a.nbytes, host=True), dev.alloc(a.nbytes, host=True)
  submits = dev.copy.ring.submits
  dev.copyin(ha, a)
  assert dev.copy.ring.submits == submits          # no SDMA copy for host-visible memory
  vadd(ha, ha, hc, 256, global_size=(1,), local_size=(256,))
  assert np.array_equal(np.frombuffer(dev.copyout(hc), np.float32), 2 * a)   # copyout waited for the kernel


@pytest.mark.parametrize("threaded", [False, True], ids=["synchronous", "threaded"])
def test_an_invalid_packet_is_a_queue_error_and_the_device_still_closes(threaded):
  from hcq import HCQError, QueueError
  d = _open(timeout_s=0.5, threaded=threaded)
  try:
    with pytest.raises(HCQError) as e:
      d.submit_pm4([pm4.header(0xEE, 1), 0])     # opcode 0xEE: no such PM4 packet
      d.synchronize()
    assert isinstance(e.value, (QueueError, GPUFault))
    if isinstance(e.value, QueueError): assert e.value.opcode == 0xEE and e.value.offset is not None
    with pytest.raises(DeviceError, match="faulted earlier"): d.synchronize()
  finally:
    d.close()


def test_bound_sequence_of_launches_runs_in_order(both_dev):
  dev = both_dev
  _needs_emulator(dev)
  code = demo_code_object()
  vadd, matmul = dev.load(code, "vadd"), dev.load(code, "matmul")
  m = 16
  x = np.random.default_rng(1).standard_normal((m, m)).astype(np.float32)
  dx, dy, dz = dev.alloc(x.nbytes), dev.alloc(x.nbytes), dev.alloc(x.nbytes)
  dev.copyin(dx, x)
  # y = x + x, then z = y @ x: the second launch reads what the first wrote
  bound = dev.bind_many([(vadd, (dx, dx, dy, m * m), (1,), (256,)), (matmul, (dy, dx, dz, m, m, m), (1, 1), (16, 16))])
  bound(wait=True)
  assert np.allclose(np.frombuffer(dev.copyout(dz), np.float32).reshape(m, m), (x + x) @ x, rtol=1e-4, atol=1e-4)
  with pytest.raises(DeviceError, match="takes 6 arguments"): dev.bind_many([(matmul, (dx,), (1,), (1,))])


def test_a_blocking_wait_asks_for_one_interrupt_at_its_value():
  """Submissions carry no interrupt; a host that blocks (threaded mock: the device runs on its own) asks for one at
  the awaited timeline value: WAIT_REG_MEM for it, then a store to the interrupt request signal that interrupts."""
  d = _open(timeout_s=5.0, threaded=True)
  try:
    _needs_emulator(d)
    matmul = d.load(demo_code_object(), "matmul")
    x = d.alloc(64 * 64 * 4)
    d.copyin(x, np.ones(64 * 64, np.float32))
    start = d.compute.ring.put_dw
    matmul(x, x, x, 64, 64, 64, global_size=(4, 4), local_size=(16, 16), wait=True)
    tv = d.timeline.value
    packets = pm4.decode(list(d.compute.ring.ring[start:d.compute.ring.put_dw]))
    names = [p[1] for p in packets]
    assert names.count("DISPATCH_DIRECT") == 1
    releases = [p for p in packets if p[1] == "RELEASE_MEM"]
    assert sum("int_sel=2" in " ".join(f) for _, _, f in releases) <= 1     # the launch itself does not interrupt
    if d.irq_signal.value:                      # the host did block (the kernel was not done after the busy polls)
      assert d.irq_signal.value == tv and names[-3:] == ["WAIT_REG_MEM", "RELEASE_MEM", "RELEASE_MEM"]
      assert f"reference={tv:#x}" in " ".join(packets[-3][2]) and "int_sel=2" in " ".join(packets[-1][2])
  finally:
    d.close()
