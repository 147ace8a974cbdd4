"""AMDDevice over a fake /dev/kfd (tests/amd/fakekfd.py): the ioctl sequence, the registers of a launch, kernarg
contents, copies, faults, timeouts and argument errors, without an emulator."""
import ctypes
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from hcq import DeviceError, GPUFault, Timeout
from hcq.drivers.amd import pm4
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.drivers.amd.program import image_at


def parse(data): return CodeObject.parse(data)


def test_open_discovers_the_gpu_node_and_queues(fake_dev):
  dev, osi = fake_dev
  assert dev.arch == "gfx1100" and dev.session.gpu_id == 4242
  types = sorted(q["type"] for q in osi.queues.values())
  assert types == [0, 1]  # KFD_IOC_QUEUE_TYPE_COMPUTE, KFD_IOC_QUEUE_TYPE_SDMA
  assert osi.event_page is not None and dev.session.mailbox_va == dev.session.event_page.mem.va + 8 * dev.session.event_id


@pytest.mark.parametrize("size,offset", [(1, 0), (1, 7), ((1 << 20) + 3, 5), ((64 << 20) - 3, 1)])
def test_copy_round_trips_are_byte_exact(fake_dev, size, offset):
  dev, osi = fake_dev
  buf = dev.alloc(size + offset + 5)
  data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
  dev.copyin(buf, data, offset=offset)
  assert dev.copyout(buf, size, offset=offset) == data
  dev.free(buf)


def test_launch_programs_the_compute_registers_from_the_kernel_descriptor(fake_dev, demo_code):
  dev, osi = fake_dev
  co = parse(demo_code)
  kd = co.kernels["vadd"].descriptor
  prog = dev.load(demo_code, "vadd")
  a, b, c = dev.alloc(1024), dev.alloc(1024), dev.alloc(1024)
  prog(a, b, c, 256, global_size=(4, 1, 1), local_size=(64, 1, 1))
  dev.synchronize()
  regs, grid, initiator = osi.dispatches[-1]
  assert grid == (4, 1, 1) and initiator & pm4.INITIATOR_CS_W32_EN and initiator & 1
  entry = regs[pm4.COMPUTE_PGM_LO] << 8 | regs[pm4.COMPUTE_PGM_LO + 1] << 40
  assert entry == prog.image_va + co.kernels["vadd"].descriptor_address + kd.kernel_code_entry_byte_offset
  assert regs[pm4.COMPUTE_PGM_RSRC1] == kd.compute_pgm_rsrc1 | (1 << 20)
  assert regs[pm4.COMPUTE_PGM_RSRC1 + 1] == kd.compute_pgm_rsrc2
  assert [regs[pm4.COMPUTE_NUM_THREAD_X + i] for i in range(3)] == [64, 1, 1]
  ka = regs[pm4.COMPUTE_USER_DATA_0] | regs[pm4.COMPUTE_USER_DATA_0 + 1] << 32
  raw = ctypes.string_at(ka, 288)
  assert struct.unpack_from("<QQQI", raw) == (a.va, b.va, c.va, 256)
  assert struct.unpack_from("<III", raw, 32) == (4, 1, 1)      # hidden_block_count_*
  assert struct.unpack_from("<HHH", raw, 44) == (64, 1, 1)     # hidden_group_size_*
  assert dev.timeline.signal.value == dev.timeline.value


def test_kernel_image_is_uploaded_relocated(fake_dev, demo_code):
  dev, osi = fake_dev
  prog = dev.load(demo_code, "empty")
  co = parse(demo_code)
  assert ctypes.string_at(prog.image_va, len(co.image)) == image_at(co, prog.image_va)
  assert ctypes.c_uint32.from_address(prog.entry).value == 0xBFB00000  # s_endpgm (llvm-objdump-19 of demo.hsaco)


def test_timed_launch_returns_seconds(fake_dev, demo_code):
  dev, osi = fake_dev
  t = dev.load(demo_code, "empty")(global_size=(1,), local_size=(1,), wait=True)
  assert isinstance(t, float) and 0 <= t < 1


def test_gpu_fault_event_is_raised_with_its_address(fake_dev):
  dev, osi = fake_dev
  osi.pending_fault = 0xDEAD000
  never = dev.signals.alloc(0)
  dev.submit_pm4(pm4.wait_reg_mem(never.va, 1))  # the queue stalls as after a fault
  with pytest.raises(GPUFault) as e: dev.synchronize()
  assert e.value.address == 0xDEAD000 and e.value.kind == "page not present"
  never.value = 1
  osi._ring(0)
  osi.pending_fault = None


def test_an_impossible_wait_times_out_within_the_configured_time(fake_dev):
  dev, osi = fake_dev
  never = dev.signals.alloc(0, name="never signal")
  dev.submit_pm4(pm4.wait_reg_mem(never.va, 1))
  with pytest.raises(Timeout) as e: dev.synchronize()
  assert e.value.timeout_s == dev.timeout_s and f"after {dev.timeout_s:g} s" in str(e.value)   # not timed: named
  assert e.value.expected == dev.timeline.value and e.value.last_seen == dev.timeline.value - 1
  never.value = 1
  osi._ring(0)
  dev.synchronize()


def _submitted(osi, dev):
  return dev.compute.ring.submits, len(osi.dispatches)


def test_argument_errors_are_raised_before_anything_is_submitted(fake_dev, demo_code):
  dev, osi = fake_dev
  prog = dev.load(demo_code, "vadd")
  a = dev.alloc(64)
  before = _submitted(osi, dev)
  with pytest.raises(DeviceError, match="takes 4 arguments"): prog(a, a, a, global_size=(1,), local_size=(64,))
  with pytest.raises(DeviceError, match="needs a Buffer"): prog(a, 3, a, 4, global_size=(1,), local_size=(64,))
  with pytest.raises(DeviceError, match="needs an integer"): prog(a, a, a, 4.0, global_size=(1,), local_size=(64,))
  with pytest.raises(DeviceError, match="zero"): prog(a, a, a, 4, global_size=(0,), local_size=(64,))
  with pytest.raises(DeviceError, match="maximum"): prog(a, a, a, 4, global_size=(1,), local_size=(1024, 2))
  assert _submitted(osi, dev) == before
  with pytest.raises(DeviceError, match="no kernel 'nope'.*empty, vadd, matmul"): dev.load(demo_code, "nope")
  assert list(dev.load(demo_code)) == ["empty", "vadd", "matmul"]   # no name, several kernels: a Module of them


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_code_object_for_another_target_is_refused(fake_dev, tmp_path):
  dev, osi = fake_dev
  from build_kernels import build
  other = build("gfx1030", str(tmp_path / "gfx1030.hsaco"))
  before = _submitted(osi, dev)
  with pytest.raises(DeviceError, match="code object is for gfx1030, this device is gfx1100"):
    dev.load(open(other, "rb").read())
  assert _submitted(osi, dev) == before


def test_bound_launch_runs_through_an_indirect_buffer(fake_dev, demo_code):
  dev, osi = fake_dev
  prog = dev.load(demo_code, "vadd")
  a, b, c = dev.alloc(1024), dev.alloc(1024), dev.alloc(1024)
  bound = dev.bind(prog, a, b, c, 200, global_size=(1,), local_size=(256,))
  before_dw, before_disp = dev.compute.ring.put_dw, len(osi.dispatches)
  for _ in range(3): tv = bound()
  dev.synchronize()
  assert dev.timeline.signal.value == tv
  assert len(osi.dispatches) == before_disp + 3 and len(osi.ibs) == 3
  # per run the ring holds one INDIRECT_BUFFER packet and the timeline signal, nothing else
  per_run = (dev.compute.ring.put_dw - before_dw) // 3
  assert per_run == 4 + len(dev.compute.signal_cmd)
  regs = osi.dispatches[-1][0]
  ka = regs[pm4.COMPUTE_USER_DATA_0] | regs[pm4.COMPUTE_USER_DATA_0 + 1] << 32
  assert ka == bound.recording.kernargs.va
  assert struct.unpack_from("<QQQI", ctypes.string_at(ka, 28)) == (a.va, b.va, c.va, 200)
  with pytest.raises(DeviceError, match="takes 4 arguments"): dev.bind(prog, a, global_size=(1,), local_size=(64,))


def test_a_launch_after_an_unfinished_copy_waits_for_it_on_the_device(fake_dev, demo_code):
  dev, osi = fake_dev
  prog = dev.load(demo_code, "vadd")
  a = dev.alloc(4096)
  osi.held.add(1)                      # the SDMA engine does not run yet
  dev.copyin(a, b"\x01" * 4096)
  copy_tv = dev.timeline.value
  prog(a, a, a, 1024, global_size=(4,), local_size=(256,))
  ring = list(dev.compute.ring.ring[:dev.compute.ring.put_dw])
  waits = [f for _, name, f in pm4.decode(ring) if name == "WAIT_REG_MEM"]
  assert waits and f"reference={copy_tv:#x}" in waits[-1] and f"addr={dev.timeline.signal.va:#x}" in waits[-1]
  assert osi.dispatches == [] or all(d[1] != (4, 1, 1) for d in osi.dispatches)   # blocked behind the copy
  osi.held.clear()
  osi.run_all()
  assert osi.dispatches[-1][1] == (4, 1, 1)
  dev.synchronize()


def test_scratch_sizing_follows_the_tmpring_layout(fake_dev):
  dev, osi = fake_dev
  # fake topology: 192 SIMDs / 2 per CU = 96 CUs, 12 arrays / 2 per engine = 6 SEs, 32 scratch slots per CU
  s = dev.scratch_for(20)
  waves, wavesize = 96 * 32 // 6, (64 * 20 + 255) // 256          # WAVES per SE, WAVESIZE in 256-byte units
  assert s.tmpring == waves | (wavesize << 12)
  assert s.size == waves * 6 * wavesize * 256
  assert dev.scratch_for(8) is s                                   # smaller needs reuse it
  bigger = dev.scratch_for(1000)
  assert bigger is not s and bigger.tmpring >> 12 == (64 * 1000 + 255) // 256


def test_alloc_kinds_map_to_kfd_flags(fake_dev):
  from hcq.autogen import kfd
  dev, osi = fake_dev
  dbuf, hbuf = dev.alloc(100), dev.alloc(100, host=True)
  dflags, hflags = osi.handles[dbuf.handle.handle][2], osi.handles[hbuf.handle.handle][2]
  assert dflags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM and not dflags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
  assert dbuf.cpu_view is None                                     # device memory without a large BAR: no CPU view
  assert hflags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT and hflags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
  assert hbuf.cpu_view is not None and len(hbuf.cpu_view) >= 100
  assert osi.handles[dbuf.handle.handle][0] == dbuf.va             # GPU VA == the CPU VA reserved for it
  dev.free(dbuf)
  assert dbuf.handle.handle not in osi.handles
  with pytest.raises(DeviceError, match="freed twice"): dev.free(dbuf)
  with pytest.raises(DeviceError, match="was freed"): dev.copyin(dbuf, b"x")


@pytest.fixture
def small_rings_dev(monkeypatch):
  from hcq.config import Config
  from hcq.drivers.amd import device as device_mod
  from hcq.drivers.amd import open_device
  from hcq.drivers.hcq import runtime
  from fakekfd import FakeKFDOS
  monkeypatch.setattr(device_mod, "RING_SIZE", 4096)          # 1024 dwords
  monkeypatch.setattr(runtime, "LAUNCH_DATA_SIZE", 8192)      # 25 vadd kernarg segments (288 B + alignment)
  osi = FakeKFDOS(Config(timeout_s=0.3))
  dev = open_device("KFD", 0, osi, osi.config)
  yield dev, osi
  osi.held.clear()
  osi.run_all()
  dev.close()


def test_rings_wrap_around_and_kernargs_are_reused_safely(small_rings_dev, demo_code):
  dev, osi = small_rings_dev
  prog = dev.load(demo_code, "vadd")
  a = dev.alloc(64)
  for n in range(500):          # ~27 dwords per repeat launch: the compute ring wraps ~13 times, the kernarg ring ~20 times
    prog(a, a, a, n, global_size=(1,), local_size=(64,))
  dev.synchronize()
  assert dev.compute.ring.put_dw > 10 * 1024
  vadd = [d for d in osi.dispatches if d[1] == (1, 1, 1)]
  assert len(vadd) == 500
  regs = vadd[-1][0]
  ka = regs[pm4.COMPUTE_USER_DATA_0] | regs[pm4.COMPUTE_USER_DATA_0 + 1] << 32
  assert struct.unpack_from("<QQQI", ctypes.string_at(ka, 28)) == (a.va, a.va, a.va, 499)


def test_a_full_ring_waits_for_space_and_never_overwrites(small_rings_dev, demo_code):
  dev, osi = small_rings_dev
  prog = dev.load(demo_code, "empty")
  osi.held.add(0)              # the compute engine stops reading
  with pytest.raises(Timeout, match="ring space"):
    for _ in range(100): prog(global_size=(1,), local_size=(1,))
  written = dev.compute.ring.put_dw
  assert written <= 1024 + dev.compute.ring.rptr[0]          # never more than one ring ahead of the read pointer
  osi.held.clear()
  osi.run_all()
  assert dev.compute.ring.rptr[0] == written


def test_compute_queue_context_save_sizes_follow_kfd_queue_c(fake_dev):
  dev, osi = fake_dev
  q = next(q for q in osi.queues.values() if q["type"] == 0)
  # gfx1100 with 96 CUs (fake topology): waves = 96 * 32; control stack = align(40 + waves * 12 + 8, 4 KiB);
  # work-group data = align(96 * (0x60000 + 0x4000 + 0x10000 + 0x1000), 4 KiB) (Linux 6.12 kfd_queue.c)
  waves = 96 * 32
  ctl = (40 + waves * 12 + 8 + 4095) // 4096 * 4096
  assert q["ctl_stack_size"] == ctl and q["cwsr_size"] == ctl + 96 * 0x75000
  assert q["eop_size"] >= 4096


def test_open_errors_name_the_device_and_close_what_was_opened():
  from hcq.config import Config
  from hcq.drivers.amd import open_device
  from fakekfd import FakeKFDOS
  osi = FakeKFDOS(Config())
  with pytest.raises(DeviceError, match="KFD\\+AMD:1: the KFD topology lists 1 GPU"):
    open_device("KFD", 1, osi, osi.config)
  with pytest.raises(DeviceError, match="interface 'SPI' is not supported"):
    open_device("SPI", 0, osi, osi.config)
  with pytest.raises(DeviceError, match=r"PCI\+AMD:0: 0 AMD GPU\(s\) AM can boot \(none\); no device 0"):
    open_device("PCI", 0, osi, osi.config)


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_shipped_demo_code_object_matches_a_fresh_build(tmp_path, demo_code):
  from build_kernels import build
  assert open(build("gfx1100", str(tmp_path / "demo.hsaco")), "rb").read() == demo_code, \
    "drivers/amd/kernels/demo.hsaco is stale: run tests/amd/build_kernels.py"


def test_a_closed_device_refuses_everything(demo_code):
  from hcq.config import Config
  from hcq.drivers.amd import open_device
  from fakekfd import FakeKFDOS
  osi = FakeKFDOS(Config())
  with open_device("KFD", 0, osi, osi.config) as dev:
    prog = dev.load(demo_code, "empty")
    buf = dev.alloc(16)
  for call in (lambda: prog(global_size=(1,), local_size=(1,)), lambda: dev.alloc(16), lambda: dev.copyin(buf, b"x"),
               lambda: dev.copyout(buf), lambda: dev.synchronize(), lambda: dev.load(demo_code, "empty")):
    with pytest.raises(DeviceError, match="closed"): call()
  assert osi.handles == {}     # every allocation was freed
  dev.close()                  # closing twice is fine
