"""Kernels through the public API on MOCK+NV (H200: HOPPER_COMPUTE_A + QMD v4; AD102: ADA_COMPUTE_A + QMD v3): the
CUDA-style corpus (tests/fixtures/cuda) and hcq's own compiler's PTX give numpy's results; timed launches, faults
with their address, timeouts that name what was waited for, the clear error of a cubin on the mock."""
import struct

import numpy as np
import pytest

import hcq
from hcq.compiler import queue as Q
from hcq.config import Config
from hcq.drivers.hcq.engine import PREVIOUS_VALUE, V_PREV
from hcq.drivers.hcq.runtime import Submission
from hcq.drivers.nv import open_device
from hcq.mockgpu import mock_nv_os
from tests.fixtures.cuda.kernels import KERNELS

GPUS = ["H200", "AD102", "B200"]


def _open(gpu="H200", **kw):
  os = mock_nv_os(Config(**kw), gpu=gpu)
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  return dev


@pytest.fixture(scope="module", params=GPUS)
def dev(request):
  d = _open(request.param)
  yield d
  d.close()


def run_spec(dev, spec, seed=0):
  """Launch a corpus kernel through the public API; returns (outputs, inputs)."""
  prog = dev.load(spec.ptx().encode(), name=spec.name)
  data = spec.inputs(seed)
  bufs, args = {}, []
  for a in spec.args:
    if hasattr(a, "count"):
      b = bufs[a.name] = dev.alloc(max(a.nbytes, 4))
      dev.copyin(b, data[a.name])
      args.append(b)
    else:
      v = data[a.name]
      args.append(v.item() if hasattr(v, "item") else v)   # a scalar, or the bytes of a struct passed by value
  if spec.dynamic_shared: args.append(spec.dynamic_shared)
  prog(*args, global_size=spec.grid, local_size=spec.block)
  outs = {a.name: np.frombuffer(dev.copyout(bufs[a.name]), a.dtype) for a in spec.outputs}
  for b in bufs.values(): dev.free(b)
  return outs, data


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_corpus_gives_numpys_results(dev, name):
  spec = KERNELS[name]
  outs, data = run_spec(dev, spec)
  spec.check(outs, data)


def test_hcqs_own_ptx_runs_through_dev_compile(dev):
  from hcq.compiler.examples import ALL
  for example in ALL:
    ex = example()
    prog = dev.compile(ex.sink)
    bufs, args = {}, []
    for slot, a in enumerate(ex.args):
      if isinstance(a, np.ndarray):
        b = bufs[slot] = dev.alloc(max(a.nbytes, 4))
        dev.copyin(b, a)
        args.append(b)
      else: args.append(a.item() if hasattr(a, "item") else a)
    prog(*args, global_size=ex.global_size, local_size=ex.local_size)
    for slot, want in ex.expected.items():
      got = np.frombuffer(dev.copyout(bufs[slot]), want.dtype).reshape(want.shape)
      # float sums in another order than numpy's: the examples' own tolerance class (tests/backend: rtol 1e-4)
      np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{ex.name} slot {slot}")


VADD = KERNELS["vadd"]


def test_timed_launch_reads_the_semaphore_timestamps(dev):
  prog = dev.load(VADD.ptx().encode())
  n = 1024
  a, b, c = (dev.alloc(4 * n) for _ in range(3))
  t = prog(a, b, c, n, global_size=4, local_size=256, wait=True)
  assert 0 < t < 5
  assert dev.timer_end.timestamp >= dev.timer_start.timestamp > 0


def test_arguments_are_checked_before_anything_is_submitted(dev):
  prog = dev.load(VADD.ptx().encode())
  with pytest.raises(hcq.DeviceError, match="kernel vadd: takes 4 arguments"):
    prog(1, 2, global_size=1, local_size=1)
  buf = dev.alloc(64)
  with pytest.raises(hcq.DeviceError, match=r"argument .*\(\.u32\): needs an integer"):
    prog(buf, buf, buf, "x", global_size=1, local_size=1)


def test_an_access_outside_mapped_memory_is_a_gpu_fault_with_its_address():
  with _open() as dev:
    prog = dev.load(VADD.ptx().encode())
    good = dev.alloc(4096)
    bad_va = 0x7654_3210_0000
    with pytest.raises(hcq.GPUFault) as e:
      prog(good, good, type(good)(dev, bad_va, 4096), 16, global_size=1, local_size=16, wait=True)
    assert e.value.address is not None and bad_va <= e.value.address < bad_va + 64
    with pytest.raises(hcq.DeviceError, match="faulted earlier"):
      prog(good, good, good, 16, global_size=1, local_size=16)


def test_a_cubin_on_the_mock_is_a_clear_error():
  # the driver loads a cubin as it would on hardware (it does not know the GPU is a mock); the mock's SM, which runs
  # PTX only, stops the channel at the launch and says why
  from tests.nv.test_cubin import synthetic_cubin
  amd_header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(11) + struct.pack("<H", 224) + bytes(42)     # EM_AMDGPU
  with _open() as dev:
    prog = dev.load(synthetic_cubin())
    buf = dev.alloc(64)
    with pytest.raises(hcq.QueueError, match=r"robust-channel error 13 .*\[mock diagnosis\].* is SASS without its PTX: "
                                             r"the mock NV GPU runs PTX only"):
      prog(buf, 1, global_size=1, local_size=1, wait=True)
  with _open() as dev:
    with pytest.raises(hcq.DeviceError, match="an ELF for machine 224 is not a CUDA cubin"):
      dev.load(amd_header)


def test_hcq_demo_runs_on_the_mock_nv_gpu(capsys):
  from hcq.cli import main
  assert main(["demo", "--device", "MOCK+NV", "-n", "1000", "-m", "20"]) == 0
  out = capsys.readouterr().out
  assert "vector add" in out and "matmul" in out and "FAIL" not in out


def test_a_wait_the_host_never_satisfies_times_out_naming_it():
  with _open(timeout_s=0.3) as dev:
    never = dev.signals.alloc(0, name="a signal nobody sets")
    cmd = dev.compute.build(Q.queue("compute", Q.wait(Q.signal(9, "never"), PREVIOUS_VALUE)))
    from hcq.drivers.hcq.cmdbuf import link
    cmd = link(cmd, {("param", 9): never.va})
    with Submission(dev, dev.compute, "a wait for a signal nobody sets") as sub: sub.add(cmd.fill({V_PREV: 1}))
    with pytest.raises(hcq.Timeout, match="a wait for a signal nobody sets on the compute engine"):
      dev.synchronize()


SPIN = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 p)
{
  .reg .b32 %r<2>;
  mov.u32 %r1, 0;
$L_loop:
  add.u32 %r1, %r1, 1;
  bra.uni $L_loop;
}
"""


def test_an_endless_kernel_times_out_naming_the_kernel_and_close_stops_it():
  dev = _open(timeout_s=0.3, mock_threaded=True)
  prog = dev.load(SPIN)
  prog(0, global_size=1, local_size=32)
  with pytest.raises(hcq.Timeout, match="kernel spin on the compute engine"):
    dev.synchronize()
  dev.close()         # the mock's stop callback ends the kernel: close does not hang


def test_the_synchronous_mock_stops_an_endless_kernel_at_its_time_limit():
  with _open(timeout_s=0.3) as dev:
    prog = dev.load(SPIN)
    with pytest.raises(hcq.QueueError, match="timed out: a kernel ran past the time limit"):
      prog(0, global_size=1, local_size=32, wait=True)


def test_dynamic_shared_memory_size_is_the_last_argument(dev):
  spec = KERNELS["dyn_shared"]
  prog = dev.load(spec.ptx().encode())
  buf = dev.alloc(4096)
  with pytest.raises(hcq.DeviceError, match="dynamic shared memory: give its size in bytes as a last argument"):
    prog(buf, buf, global_size=1, local_size=32)
  with pytest.raises(hcq.DeviceError, match="exceed the"):
    prog(buf, buf, 1 << 20, global_size=1, local_size=32)


def test_launch_parameters_land_in_constant_buffer_0_per_the_cuda_abi(dev):
  """A QMD built per launch: the mock reads the parameters at the GPU's parameter base; a .u8 then .u64 parameter
  shows the natural alignment (the .u64 at offset 8)."""
  ptx = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry packed(.param .u8 a, .param .u64 out, .param .f32 x)
{
  .reg .b16 %h<2>;
  .reg .b32 %r<3>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<2>;
  ld.param.u8 %h1, [a];
  ld.param.u64 %rd1, [out];
  ld.param.f32 %f1, [x];
  cvt.u32.u16 %r1, %h1;
  st.global.u32 [%rd1], %r1;
  st.global.f32 [%rd1+4], %f1;
  ret;
}
"""
  prog = dev.load(ptx)
  assert [(p.name, p.offset) for p in prog.kernel.params] == [("a", 0), ("out", 8), ("x", 16)]
  out = dev.alloc(8)
  prog(200, out, 2.5, global_size=1, local_size=1)
  assert struct.unpack("<If", dev.copyout(out)) == (200, 2.5)


@pytest.mark.parametrize("name", ["vadd", "reduce_shared", "atomics"])
def test_the_threaded_mock_gives_the_same_results(name):
  with _open(mock_threaded=True) as dev:
    spec = KERNELS[name]
    outs, data = run_spec(dev, spec)
    spec.check(outs, data)


@pytest.mark.parametrize("gpu,major", [("H200", 4), ("AD102", 3), ("B200", 5)])
def test_the_qmd_of_a_shape_holds_the_launch_in_the_gpus_layout(gpu, major):
  from hcq.autogen.nv.tables import qmd
  with _open(gpu) as dev:
    prog = dev.load(VADD.ptx().encode())
    shape = prog.shape((3, 2, 1), (64, 2, 1), False)
    q = qmd.decode(qmd.for_major(major), bytes(shape.qmd))
    assert q["QMD_MAJOR_VERSION"] == major
    grid = ("CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT") if major == 3 else ("GRID_WIDTH", "GRID_HEIGHT")
    assert (q[grid[0]], q[grid[1]]) == (3, 2)
    assert (q["CTA_THREAD_DIMENSION0"], q["CTA_THREAD_DIMENSION1"]) == (64, 2) and q["CONSTANT_BUFFER_VALID_0"] == 1
    pc = (q["PROGRAM_ADDRESS_LOWER_SHIFTED4"] | q["PROGRAM_ADDRESS_UPPER_SHIFTED4"] << 32) << 4 if major == 5 else \
      q["PROGRAM_ADDRESS_LOWER"] | q["PROGRAM_ADDRESS_UPPER"] << 32
    assert pc == prog.code_va


def test_local_memory_is_set_up_on_the_compute_channel_before_a_kernel_that_needs_it():
  from hcq.drivers.nv import gpfifo as G
  with _open() as dev:
    start = dev.compute.ring.put_dw
    dev._ensure_local(100)
    words = list(dev.compute.ring.ring[start:dev.compute.ring.put_dw])
    names = [p[1] for p in G.decode_pushbuffer(words)]
    assert "compute.SET_SHADER_LOCAL_MEMORY_A" in names and "compute.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A" in names
    assert dev._local_per_thread == 128
    dev._ensure_local(64)              # smaller: nothing new
    assert dev.compute.ring.put_dw == start + len(words)


def test_nv_without_nvidia_ko_is_a_clear_error(tmp_path):
  with pytest.raises(hcq.DeviceError, match="cannot open /dev/nvidiactl"):
    hcq.open("NV", Config(dev_root=str(tmp_path)))


def test_a_full_gpfifo_on_a_faulted_channel_raises_the_fault_at_once():
  from hcq.drivers.nv import gpfifo as G
  with _open(timeout_s=3) as dev:
    eng = dev.compute
    gpu = dev.owned_os.devices[0].gpus[0]
    ch = next(c for c in gpu.channels if c.handle == eng.channel.handle)
    gpu._fail(ch, hcq.GPUFault("test fault", address=0x1234000, kind="page fault"))
    saved = eng.gp_put
    eng.gp_put = (eng.userd_u32[G.USERD_GP_GET // 4] - 1) % eng.entries    # every entry in use: GPGet never moves
    try:    # the fault, not the Timeout a wait for ring space would end in after 3 s
      with pytest.raises(hcq.GPUFault, match="compute channel stopped") as e: eng._wait_entry()
    finally: eng.gp_put = saved
    assert e.value.address == 0x1234000


@pytest.mark.parametrize("gpu", ["H200", "AD102"])
def test_the_mocks_launch_cache_sees_a_change_of_constant_buffer_0s_size(gpu):
  # CONSTANT_BUFFER_SIZE_SHIFTED4_0 shares a dword with constant buffer 0's upper address bits (V03 dword 33, V04 49)
  from hcq.drivers.nv.qmd import set_field
  with _open(gpu) as dev:
    prog = dev.load(VADD.ptx().encode())
    buf = dev.alloc(4096)
    prog(buf, buf, buf, 16, global_size=1, local_size=16, wait=True)
    shape = prog.shape(1, 16, True)
    set_field(shape.qmd, dev.qmd_layout, "CONSTANT_BUFFER_SIZE_SHIFTED4_0", 1)   # 16 bytes: no room for the parameters
    with pytest.raises(hcq.QueueError, match="graphics engine exception"):
      prog(buf, buf, buf, 16, global_size=1, local_size=16, wait=True)
    gpu_ = dev.owned_os.devices[0].gpus[0]
    assert any("constant buffer 0 of 16 bytes is too small" in str(c.last_error) for c in gpu_.channels)


def test_local_memory_set_up_by_racing_threads_ends_with_the_largest():
  import threading
  import time
  from hcq.drivers.nv import gpfifo as G
  with _open() as dev:
    orig = dev.session.alloc
    def slow_alloc(size, kind="vram", cpu_access=False):
      # the smaller local memory's allocation takes longer: unlocked, it would be set up last
      time.sleep(0.05 if size > small_total else 0.25)
      return orig(size, kind=kind, cpu_access=cpu_access)
    dev._ensure_local(32)
    small_total = dev._local.size                        # the size of the smaller set-up below (32 bytes per thread)
    dev._local_per_thread = 0                            # as if nothing was set up yet
    dev.session.alloc = slow_alloc
    small = threading.Thread(target=dev._ensure_local, args=(32,))
    large = threading.Thread(target=dev._ensure_local, args=(4096,))
    small.start()
    time.sleep(0.02)
    large.start()
    small.join()
    large.join()
    assert dev._local_per_thread == 4096 and dev._local.size > small_total
    # and the GPU was told the larger one last
    sets = [f for _, n, f in G.decode_pushbuffer(list(dev.compute.ring.ring[:dev.compute.ring.put_dw]))
            if n.endswith("SET_SHADER_LOCAL_MEMORY_B")]
    assert sets[-1][-1] == f"= {dev._local.va & 0xFFFFFFFF:#x}"
