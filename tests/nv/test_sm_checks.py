"""What the SM reads of a launch, modelled by the mock and written by the driver (issue 27, blocking items 4-6 and the
QMD's other SM fields): %ntid/%nctaid from constant bank 0, the high local memory window with the SASS stack's 0x240
bytes, SHARED_MEMORY_SIZE with the 1 KiB reserve, the register count, the release semaphores, SASS_VERSION, program
prefetch, shared memory carve-outs. Each driver step has a mutation test: without it the mock refuses or the results
are wrong, with a named reason."""
import struct

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.nv import device as nv_device, open_device, program as nv_program, qmd
from hcq.drivers.nv.qmd import set_field
from hcq.mockgpu import mock_nv_os

GPUS = ["H200", "AD102", "B200"]

HEAD = ".version 7.0\n.target sm_80\n.address_size 64\n"
# out[i] = (ntid.x, nctaid.x, ntid.y, nctaid.y) for every thread i = ctaid.x * ntid.x + tid.x
DIMS_PTX = HEAD + """
.visible .entry dims(.param .u64 out) {
  .reg .b32 %r<12>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mov.u32 %r4, %nctaid.x;
  mov.u32 %r6, %ntid.y; mov.u32 %r7, %nctaid.y;
  mad.lo.s32 %r5, %r1, %r2, %r3;
  mul.wide.u32 %rd3, %r5, 16; add.s64 %rd4, %rd2, %rd3;
  st.global.v4.u32 [%rd4], {%r2, %r4, %r6, %r7};
  ret;
}
"""
# a thread's 256-byte local array, its last word written and read back: out[tid] = tid
LOCAL_PTX = HEAD + """
.visible .entry stack(.param .u64 out) {
  .local .align 4 .b8 depot[256];
  .reg .b32 %r<4>; .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd3, depot; cvta.local.u64 %rd4, %rd3;
  st.u32 [%rd4+252], %r1;
  ld.u32 %r2, [%rd4+252];
  mul.wide.u32 %rd5, %r1, 4; add.s64 %rd6, %rd2, %rd5;
  st.global.u32 [%rd6], %r2;
  ret;
}
"""
# a CTA's 4 KiB static shared array, its last word written by thread 0 and read by all: out[tid] = 77
SHARED_PTX = HEAD + """
.visible .entry sh(.param .u64 out) {
  .shared .align 4 .b8 buf[4096];
  .reg .b32 %r<4>; .reg .b64 %rd<6>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  mov.u32 %r3, 77;
  @!%p1 st.shared.u32 [buf+4092], %r3;
  bar.sync 0;
  ld.shared.u32 %r2, [buf+4092];
  mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r2;
  ret;
}
"""
# extern (dynamic) shared memory of the launch's size: its last word written and read back by thread 0
DYN_PTX = HEAD + """
.extern .shared .align 16 .b8 dyn[];
.visible .entry dynsh(.param .u64 out, .param .u32 n) {
  .reg .b32 %r<4>; .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1; ld.param.u32 %r1, [n];
  sub.u32 %r2, %r1, 4; mov.u32 %r3, 99;
  cvt.u64.u32 %rd3, %r2; mov.u64 %rd4, dyn; add.s64 %rd5, %rd4, %rd3;
  st.shared.u32 [%rd5], %r3;
  ld.shared.u32 %r3, [%rd5];
  st.global.u32 [%rd2], %r3;
  ret;
}
"""


def _open(gpu="H200", **kw):
  os = mock_nv_os(Config(**kw), gpu=gpu)
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  return dev


@pytest.fixture(params=GPUS)
def dev(request):
  d = _open(request.param)
  yield d
  d.close()


def _dims(dev, grid, block):
  prog = dev.load(DIMS_PTX.encode())
  n = grid * block
  out = dev.alloc(16 * n)
  prog(out, global_size=grid, local_size=block, wait=True)
  return np.frombuffer(dev.copyout(out), np.uint32).reshape(n, 4)


def test_ntid_and_nctaid_are_read_from_constant_bank_0(dev):
  got = _dims(dev, 3, 64)
  assert (got == [64, 3, 1, 1]).all()


def test_a_driver_that_does_not_write_blockdim_and_griddim_gets_wrong_results(dev, monkeypatch):
  orig = nv_program.NVProgram.shape_data
  def without_dims(self, shape):
    orig(self, shape)
    shape.dims = bytes(len(shape.dims))        # the driver step of c[0][0x0..0x18] left out
  monkeypatch.setattr(nv_program.NVProgram, "shape_data", without_dims)
  prog = dev.load(DIMS_PTX.encode())
  out = dev.alloc(16 * 64)
  prog(out, global_size=1, local_size=64, wait=True)
  got = np.frombuffer(dev.copyout(out), np.uint32).reshape(64, 4)
  assert (got[:1] == 0).all()     # %ntid read 0: thread i wrote to slot i * 0 + ... = only slot 0 with zeros
  assert not (got == [64, 1, 1, 1]).all()


def test_a_local_array_fits_the_high_window_with_the_stacks_reserve(dev):
  prog = dev.load(LOCAL_PTX.encode())
  out = dev.alloc(4 * 128)
  prog(out, global_size=2, local_size=64, wait=True)
  assert list(np.frombuffer(dev.copyout(out), np.uint32)[:64]) == list(range(64))
  fields = qmd.decode(dev.qmd_layout, prog.shape(2, 64, False).qmd)
  high = fields.get("SHADER_LOCAL_MEMORY_HIGH_SIZE", fields.get("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 0) << 4)
  assert high >= 256 + 0x240
  assert fields.get("SHADER_LOCAL_MEMORY_LOW_SIZE", fields.get("SHADER_LOCAL_MEMORY_LOW_SIZE_SHIFTED4", 0)) == 0


def test_a_high_window_without_the_0x240_reserve_faults_naming_it(monkeypatch):
  monkeypatch.setattr(nv_device, "LOCAL_RESERVE", 0)     # the driver step of + 0x240 left out
  with _open("AD102") as dev:
    prog = dev.load(LOCAL_PTX.encode())
    out = dev.alloc(4 * 64)
    with pytest.raises(hcq.QueueError, match=r"robust-channel error 13 .*\[mock diagnosis\].*local memory access .*"
                                             r"high local memory window is 0x100 bytes.*0x240"):
      prog(out, global_size=1, local_size=64, wait=True)


def test_shared_memory_size_holds_the_reserve_and_the_last_static_word_is_reachable(dev):
  prog = dev.load(SHARED_PTX.encode())
  out = dev.alloc(4 * 64)
  prog(out, global_size=1, local_size=64, wait=True)
  assert (np.frombuffer(dev.copyout(out), np.uint32) == 77).all()
  fields = qmd.decode(dev.qmd_layout, prog.shape(1, 64, False).qmd)
  size = fields["SHARED_MEMORY_SIZE"] if "SHARED_MEMORY_SIZE" in fields else fields["SHARED_MEMORY_SIZE_SHIFTED7"] << 7
  assert size == 0x400 + 4096


def test_shared_memory_size_without_the_reserve_faults_naming_it(monkeypatch):
  monkeypatch.setattr(nv_device, "shared_memory_size", lambda n: (n + 127) // 128 * 128)   # the reserve left out
  with _open("H200") as dev:
    prog = dev.load(SHARED_PTX.encode())
    out = dev.alloc(4 * 64)
    with pytest.raises(hcq.QueueError, match=r"\[mock diagnosis\].*shared memory access of 4 bytes at offset 0xffc "
                                             r"beyond the CTA's 3072 bytes \(the QMD's SHARED_MEMORY_SIZE is 0x1000, "
                                             r"of which the SM reserves the first 0x400\)") as e:
      prog(out, global_size=1, local_size=64, wait=True)
    # nvidia.ko's name of the SM exception; the PTX-without-SASS hint is for illegal instructions only
    assert "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address" in str(e.value)
    assert "without SASS" not in str(e.value)


@pytest.mark.parametrize("gpu,big", [("H200", 227 << 10), ("AD102", 99 << 10)])
def test_the_largest_dynamic_shared_memory_uses_the_largest_carve_out(gpu, big):
  with _open(gpu) as dev:
    prog = dev.load(DYN_PTX.encode())
    out = dev.alloc(64)
    prog(out, big, big, global_size=1, local_size=32, wait=True)
    assert np.frombuffer(dev.copyout(out), np.uint32)[0] == 99
    f = qmd.decode(dev.qmd_layout, prog.shape(1, 32, False, big).qmd)
    top = {"H200": 228, "AD102": 100}[gpu]
    assert f["SHARED_MEMORY_SIZE"] == top << 10
    assert f["MIN_SM_CONFIG_SHARED_MEM_SIZE"] == f["TARGET_SM_CONFIG_SHARED_MEM_SIZE"] == top // 4 + 1
    assert f["MAX_SM_CONFIG_SHARED_MEM_SIZE"] == top // 4 + 1
    with pytest.raises(hcq.DeviceError, match="exceed the .* bytes a CTA may have"):
      prog(out, big, big + 1024, global_size=1, local_size=32, wait=True)


@pytest.mark.parametrize("gpu,sass", [("H200", 0x90), ("AD102", 0x89), ("B200", 0xA0)])
def test_sass_version_and_program_prefetch_are_set(gpu, sass):
  with _open(gpu) as dev:
    prog = dev.load(DIMS_PTX.encode())
    f = qmd.decode(dev.qmd_layout, prog.shape(1, 32, False).qmd)
    assert f["SASS_VERSION"] == sass
    assert f["PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED"] | f["PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED"] << 32 == prog.code_va >> 8
    assert f["PROGRAM_PREFETCH_SIZE"] == min(prog.code_size >> 8, 0x1FF) and prog.code_size > 0


def test_a_register_count_the_sm_cannot_hold_is_refused_by_the_driver_and_the_mock():
  with _open("H200") as dev:
    prog = dev.load(DIMS_PTX.encode())
    out = dev.alloc(16 * 1024)
    prog.kernel.registers = 255
    with pytest.raises(hcq.DeviceError, match="64 K registers at 255 registers a thread"):
      prog(out, global_size=1, local_size=1024, wait=True)
    prog.kernel.registers = 32
    shape = prog.shape(1, 1024, True)
    set_field(shape.qmd, dev.qmd_layout, "REGISTER_COUNT", 255)      # past the driver's check: the SM refuses
    with pytest.raises(hcq.QueueError, match=r"\[mock diagnosis\].*REGISTER_COUNT of 255 for a CTA of 1024 threads"):
      prog(out, global_size=1, local_size=1024, wait=True)


@pytest.mark.parametrize("gpu", GPUS)
def test_the_qmds_release_semaphores_are_written_when_the_grid_is_done(gpu):
  with _open(gpu) as dev:
    prog = dev.load(DIMS_PTX.encode())
    out, sem = dev.alloc(16 * 32), dev.alloc(64, host=True)
    shape = prog.shape(1, 32, True)
    L = dev.qmd_layout
    names = ([("RELEASE0_ENABLE", "RELEASE0_STRUCTURE_SIZE", "RELEASE0_ADDRESS_LOWER", "RELEASE0_ADDRESS_UPPER",
               "RELEASE0_PAYLOAD_LOWER", "RELEASE1_ENABLE", "RELEASE1_STRUCTURE_SIZE", "RELEASE1_ADDRESS_LOWER",
               "RELEASE1_ADDRESS_UPPER", "RELEASE1_PAYLOAD_LOWER")] if dev.qmd_major == 3 else
             [(f"RELEASE_ENABLE_0", "RELEASE_STRUCTURE_SIZE_0", "RELEASE_SEMAPHORE0_ADDR_LOWER",
               "RELEASE_SEMAPHORE0_ADDR_UPPER", "RELEASE_SEMAPHORE0_PAYLOAD_LOWER", "RELEASE_ENABLE_1",
               "RELEASE_STRUCTURE_SIZE_1", "RELEASE_SEMAPHORE1_ADDR_LOWER", "RELEASE_SEMAPHORE1_ADDR_UPPER",
               "RELEASE_SEMAPHORE1_PAYLOAD_LOWER")])[0]
    four, one = qmd.VALUES["RELEASE_STRUCTURE_SIZE"]["SEMAPHORE_FOUR_WORDS"], qmd.VALUES["RELEASE_STRUCTURE_SIZE"]["SEMAPHORE_ONE_WORD"]
    for (en, size, lo, hi, pay), (where, value, kind) in zip((names[:5], names[5:]), ((0, 0x1234, four), (32, 0x55, one))):
      a = sem.va + where
      for n, v in ((en, 1), (size, kind), (lo, a & 0xFFFFFFFF), (hi, a >> 32), (pay, value)): set_field(shape.qmd, L, n, v)
    dev.copyin(sem, bytes(64))
    prog(out, global_size=1, local_size=32, wait=True)
    got = dev.copyout(sem)
    assert struct.unpack_from("<Q", got, 0)[0] == 0x1234 and struct.unpack_from("<Q", got, 8)[0] > 0   # payload, clock
    assert struct.unpack_from("<I", got, 32)[0] == 0x55 and struct.unpack_from("<I", got, 36)[0] == 0  # one word only


def test_an_unsupported_instruction_keeps_the_xid_and_adds_the_mocks_diagnosis():
  bad = HEAD + ".visible .entry k(.param .u64 out) {\n  .reg .b32 %r<4>;\n  mov.u32 %r1, 1;\n  frobnicate.b32 %r2, %r1;\n  ret;\n}\n"
  with _open("H200") as dev:
    prog = dev.load(bad.encode())
    out = dev.alloc(64)
    with pytest.raises(hcq.QueueError) as e: prog(out, global_size=1, local_size=1, wait=True)
    msg = str(e.value)
    assert "robust-channel error 13 (graphics engine exception)" in msg
    assert "NVRM: Xid (PCI:0000:40:00): 13" in msg and "[mock diagnosis]" in msg
    assert "line 7" in msg and "frobnicate" in msg


@pytest.mark.parametrize("gpu", ["H200", "AD102"])
def test_copy_completion_is_the_copy_engines_flushed_64_bit_semaphore_release(gpu):
  from hcq.compiler import queue as Q
  from hcq.drivers.hcq.cmdbuf import link
  from hcq.drivers.hcq.runtime import Submission
  with _open(gpu) as dev:
    gpu_ = dev.owned_os.devices[0].gpus[0]
    buf = dev.alloc(4096)
    dev.copyin(buf, bytes(range(256)) * 16)
    assert dev.copyout(buf) == bytes(range(256)) * 16
    # the copy channel signals with the copy engine's own release, each one flushing the copies before it
    assert gpu_.stats.get("copy_releases", 0) >= 2 and gpu_.stats.get("unflushed_releases", 0) == 0
    sig = dev.signals.alloc(0, name="copy release")
    cmd = link(dev.copy.build(Q.queue("copy", Q.store(Q.signal(9, "s"), (1 << 40) + 5))), {("param", 9): sig.va})
    with Submission(dev, dev.copy, "a 64-bit copy-engine release") as sub: sub.add(cmd.fill({}))
    dev.synchronize()
    assert sig.value == (1 << 40) + 5                             # SEMAPHORE_PAYLOAD_SIZE TWO_WORD: the upper word too


def test_local_memory_behind_the_windows_must_hold_the_high_window():
  with _open("H200") as dev:
    # the driver's sizing of SET_SHADER_LOCAL_MEMORY_NON_THROTTLED done for 1 warp slot an SM instead of 64
    dev.session.gr = dict(dev.session.gr, max_warps_per_sm=1)
    prog = dev.load(LOCAL_PTX.encode())
    out = dev.alloc(4 * 64)
    with pytest.raises(hcq.QueueError, match=r"\[mock diagnosis\].*SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives \d+ bytes "
                                             r"a TPC; the QMD's high local window of 0x\w+ bytes a thread needs"):
      prog(out, global_size=1, local_size=64, wait=True)


def test_the_error_notifiers_second_record_is_a_timestamp_not_a_fault_address(monkeypatch):
  text = HEAD + """.visible .entry k(.param .u64 out) {
  .reg .b64 %rd<3>;
  mov.u64 %rd1, 0x7000dead0000;
  st.global.u64 [%rd1], %rd1;
  ret;
}
"""
  with _open("H200") as dev:
    prog = dev.load(text.encode())
    out = dev.alloc(64)
    monkeypatch.setattr(dev.os, "kernel_log", lambda limit=256: [])     # a kernel log the process may not read
    with pytest.raises(hcq.GPUFault) as e: prog(out, global_size=1, local_size=1, wait=True)
    assert e.value.address is None and "MMU fault" in str(e.value)    # not the notifier's bytes 16..24
    ch = dev.channels["compute"]
    n = bytes(ch.notifier.cpu[:24])
    assert struct.unpack_from("<Q", n, 16)[0] == struct.unpack_from("<Q", n, 0)[0]    # the same clock, twice
    monkeypatch.undo()
  with _open("H200") as dev:                                            # with the log: its "faulted @" address
    prog = dev.load(text.encode())
    out = dev.alloc(64)
    with pytest.raises(hcq.GPUFault) as e: prog(out, global_size=1, local_size=1, wait=True)
    assert e.value.address == 0x7000DEAD0000
