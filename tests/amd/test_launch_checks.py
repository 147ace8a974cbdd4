"""Launch checks from a kernel's metadata, made before anything is submitted: .reqd_workgroup_size and
.max_flat_workgroup_size (clang-19 code objects), Buffers of another device or freed ones, named errors."""
import struct
import subprocess

import numpy as np
import pytest

from hcq import DeviceError

REQD_CL = """
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void fixed(__global uint *out) {
  out[__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x()] = __builtin_amdgcn_workgroup_size_x();
}
__kernel __attribute__((amdgpu_flat_work_group_size(1, 128)))
void small(__global uint *out) { out[__builtin_amdgcn_workitem_id_x()] = 1; }
__kernel void dyn(__global float *o, __local float *a, __local float4 *b) {
  uint t = __builtin_amdgcn_workitem_id_x(), n = __builtin_amdgcn_workgroup_size_x();
  a[t] = t; b[t] = (float4)(1000 + t);
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  o[__builtin_amdgcn_workgroup_id_x() * n + t] = a[(t + 1) % n] + b[n - 1 - t].w;
}
"""


def _build(source: str) -> bytes:
  import tempfile
  from pathlib import Path
  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "k.cl").write_text(source)
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib",
                    "-O2", "-c", str(tmp / "k.cl"), "-o", str(tmp / "k.o")], check=True)
    subprocess.run(["ld.lld-19", "-shared", str(tmp / "k.o"), "-o", str(tmp / "k.co")], check=True)
    return (tmp / "k.co").read_bytes()


@pytest.fixture(scope="module")
def reqd_code():
  return _build(REQD_CL)


def _submitted(dev): return (dev.compute.ring.submits, dev.timeline.value, dev.compute.ring.put_dw)


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_a_required_work_group_size_is_enforced_before_submit(fake_dev, reqd_code):
  dev, _ = fake_dev
  prog = dev.load(reqd_code, "fixed")
  assert prog.kernel.reqd_workgroup_size == (64, 1, 1)   # what clang wrote into the metadata
  out = dev.alloc(4096)
  before = _submitted(dev)
  for local in [(32,), (64, 2), (128,)]:
    with pytest.raises(DeviceError, match=r"kernel fixed: compiled for a work-group size of \(64, 1, 1\)"):
      prog(out, global_size=(1,), local_size=local)
  assert _submitted(dev) == before
  prog(out, global_size=(2,), local_size=(64,))   # the required size itself launches
  dev.synchronize()
  assert _submitted(dev) != before


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_max_flat_work_group_size_from_the_metadata(fake_dev, reqd_code):
  dev, _ = fake_dev
  prog = dev.load(reqd_code, "small")
  assert prog.kernel.max_flat_workgroup_size == 128
  out = dev.alloc(4096)
  before = _submitted(dev)
  with pytest.raises(DeviceError, match="256 threads, more than the kernel's maximum of 128"):
    prog(out, global_size=(1,), local_size=(16, 16))
  assert _submitted(dev) == before


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_the_required_size_runs_right_on_the_mock(reqd_code):
  import hcq
  from hcq.config import Config
  with hcq.open("MOCK+AMD", Config(timeout_s=5.0)) as dev:
    prog = dev.load(reqd_code, "fixed")
    out = dev.alloc(2 * 64 * 4)
    dev.copyin(out, bytes(out.size))
    prog(out, global_size=(2,), local_size=(64,), wait=True)
    assert np.array_equal(np.frombuffer(dev.copyout(out), np.uint32), np.full(128, 64, np.uint32))


def test_buffers_of_another_device_or_freed_ones_are_refused(fake_dev, demo_code):
  from hcq.drivers.hcq import Buffer
  dev, _ = fake_dev
  vadd = dev.load(demo_code, "vadd")
  a, gone = dev.alloc(256), dev.alloc(256)
  dev.free(gone)
  stranger = Buffer(object(), a.va, 256)
  stranger.device = type("Other", (), {"name": "other device"})()
  before = _submitted(dev)
  with pytest.raises(DeviceError, match=r"argument 2 \(float\*, 8 bytes\) Buffer\(.*\) was freed"):
    vadd(a, a, gone, 4, global_size=(1,), local_size=(64,))
  with pytest.raises(DeviceError, match="argument 0 .* belongs to another device \\(other device\\)"):
    vadd(stranger, a, a, 4, global_size=(1,), local_size=(64,))
  with pytest.raises(DeviceError, match="argument 1 .* was freed"):
    dev.bind(vadd, a, gone, a, 4, global_size=(1,), local_size=(64,))
  assert _submitted(dev) == before


def test_launch_sizes_as_lists_or_ints_share_one_shape(fake_dev, demo_code):
  dev, _ = fake_dev
  vadd = dev.load(demo_code, "vadd")
  a = dev.alloc(1024)
  vadd(a, a, a, 256, global_size=[4], local_size=[64, 1])
  vadd(a, a, a, 256, global_size=4, local_size=64)
  vadd(a, a, a, 256, global_size=(4, 1, 1), local_size=(64, 1, 1))
  dev.synchronize()
  assert len({id(s) for s in vadd._shapes.values()}) == 1


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_hidden_arguments_of_an_unoptimized_kernel(fake_dev, tmp_path):
  """clang -O0 lists every code object v5 hidden argument: the launch shape ones are filled, hidden_queue_ptr points
  at the queue descriptor, the features hcq does not provide (hostcall, heap, device enqueue) stay zero."""
  import ctypes
  import struct
  from hcq.drivers.amd import pm4
  dev, osi = fake_dev
  (tmp_path / "z.cl").write_text("__kernel void z(__global int *o) { o[0] = 1; }")
  subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib",
                  "-O0", "-c", str(tmp_path / "z.cl"), "-o", str(tmp_path / "z.o")], check=True)
  subprocess.run(["ld.lld-19", "-shared", str(tmp_path / "z.o"), "-o", str(tmp_path / "z.co")], check=True)
  prog = dev.load((tmp_path / "z.co").read_bytes(), "z")
  kinds = {a.kind: a for a in prog.layout.hidden}
  assert {"hidden_queue_ptr", "hidden_hostcall_buffer", "hidden_heap_v1", "hidden_grid_dims"} <= set(kinds)
  out = dev.alloc(64)
  prog(out, global_size=(3, 2), local_size=(8, 4))
  dev.synchronize()
  regs = osi.dispatches[-1][0]
  sgpr = 0
  for name, n in prog.user_sgprs:             # the kernarg pointer's place among the enabled user SGPRs
    if name == "kernarg_segment_ptr": break
    sgpr += n
  ka = regs[pm4.COMPUTE_USER_DATA_0 + sgpr] | regs[pm4.COMPUTE_USER_DATA_0 + sgpr + 1] << 32
  raw = ctypes.string_at(ka, prog.layout.segment_size)
  def val(kind): a = kinds[kind]; return int.from_bytes(raw[a.offset:a.offset + a.size], "little")
  assert struct.unpack_from("<Q", raw, 0)[0] == out.va
  assert [val(f"hidden_block_count_{d}") for d in "xyz"] == [3, 2, 1]
  assert [val(f"hidden_group_size_{d}") for d in "xyz"] == [8, 4, 1]
  assert val("hidden_grid_dims") == 2 and val("hidden_queue_ptr") == dev.queue_desc_va
  assert val("hidden_hostcall_buffer") == val("hidden_heap_v1") == val("hidden_default_queue") == 0


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_local_pointer_arguments_get_lds_blocks_sized_at_launch(fake_dev, reqd_code):
  """A __local pointer argument takes its size in bytes; the kernarg holds its LDS offset (after the static LDS,
  aligned to .pointee_align) and COMPUTE_PGM_RSRC2.LDS_SIZE covers all blocks."""
  import ctypes
  from hcq.drivers.amd import pm4
  dev, osi = fake_dev
  prog = dev.load(reqd_code, "dyn")
  assert [a.align for a in prog.layout.explicit] == [0, 4, 16]      # what clang wrote (.pointee_align)
  out = dev.alloc(4096)
  prog(out, 40 * 4, 40 * 16, global_size=(1,), local_size=(40,))
  dev.synchronize()
  regs = osi.dispatches[-1][0]
  ka = regs[pm4.COMPUTE_USER_DATA_0] | regs[pm4.COMPUTE_USER_DATA_0 + 1] << 32
  a_off, b_off = struct.unpack_from("<II", ctypes.string_at(ka + 8, 8))
  assert (a_off, b_off) == (0, 160)                                 # 160 is already 16-byte aligned
  lds = 160 + 640
  assert (regs[pm4.COMPUTE_PGM_RSRC1 + 1] >> 15) & 0x1FF == (lds + 511) // 512
  before = _submitted(dev)
  for args, msg in [((out, 1.5, 16), "argument 1 .* pass its size in bytes"),
                    ((out, 64 << 10, 16), "needs 65552 bytes of LDS"),
                    ((out, 16), "takes 3 arguments")]:
    with pytest.raises(DeviceError, match=msg): prog(*args, global_size=(1,), local_size=(40,))
  assert _submitted(dev) == before


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_local_pointer_arguments_run_right_on_the_mock(reqd_code):
  import hcq
  from hcq.config import Config
  with hcq.open("MOCK+AMD", Config(timeout_s=5.0)) as dev:
    prog = dev.load(reqd_code, "dyn")
    n, groups = 64, 2
    out = dev.alloc(n * groups * 4)
    prog(out, n * 4, n * 16, global_size=(groups,), local_size=(n,), wait=True)
    t = np.arange(n)
    want = np.tile(((t + 1) % n) + 1000 + (n - 1 - t), groups).astype(np.float32)
    assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), want)
    bound = dev.bind(prog, out, n * 4, n * 16, global_size=(groups,), local_size=(n,))
    dev.copyin(out, bytes(out.size))
    bound(wait=True)
    assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), want)


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_a_code_object_with_undefined_symbols_is_refused_at_load(fake_dev):
  """clang -nogpulib code that calls printf needs __printf_alloc from the device libraries: the linked object keeps a
  relocation against the undefined symbol, which would otherwise point into the image's own headers."""
  dev, _ = fake_dev
  code = _build("__kernel void say(__global float *o) { printf(\"%f\\n\", o[0]); }\n"
                "__kernel void quiet(__global float *o) { o[0] = 1; }")
  for name in ("say", "quiet"):        # the whole code object, as ROCr's loader does
    with pytest.raises(DeviceError, match="the code object needs __printf_alloc, which it does not define"):
      dev.load(code, name)
