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
from hcq.drivers.amd.codeobject import parse


def test_open_discovers_the_gpu_node_and_queues(fake_dev):
  dev, osi = fake_dev
  assert dev.arch == "gfx1100" and dev.iface.gpu_id == 4242
  types = sorted(q["type"] for q in osi.queues.values())
  assert types == [0, 1]  # KFD_IOC_QUEUE_TYPE_COMPUTE, KFD_IOC_QUEUE_TYPE_SDMA
  assert osi.event_page is not None and dev.iface.mailbox_va == dev.iface.event_page.va + 8 * dev.iface.event_id


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
  kd = co.kernels["vadd"].kd
  prog = dev.load(demo_code, "vadd")
  a, b, c = dev.alloc(1024), dev.alloc(1024), dev.alloc(1024)
  prog(a, b, c, 256, global_size=(4, 1, 1), local_size=(64, 1, 1))
  dev.synchronize()
  regs, grid, initiator = osi.dispatches[-1]
  assert grid == (4, 1, 1) and initiator & pm4.INITIATOR_CS_W32_EN and initiator & 1
  entry = regs[pm4.COMPUTE_PGM_LO] << 8 | regs[pm4.COMPUTE_PGM_LO + 1] << 40
  assert entry == prog.image_va + co.kernels["vadd"].kd_offset + kd.kernel_code_entry_byte_offset
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
  assert ctypes.string_at(prog.image_va, len(co.image)) == co.relocated(prog.image_va)
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
  t0 = dev.os.monotonic()
  with pytest.raises(Timeout) as e: dev.synchronize()
  assert 0.5 <= dev.os.monotonic() - t0 < 1.5
  assert e.value.expected == dev.timeline.value and e.value.last_seen == dev.timeline.value - 1
  never.value = 1
  osi._ring(0)
  dev.synchronize()


def _submitted(osi, dev):
  return dev.compute.submits, len(osi.dispatches)


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
  with pytest.raises(DeviceError, match="has 3 kernels"): dev.load(demo_code)


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_code_object_for_another_target_is_refused(fake_dev, tmp_path):
  dev, osi = fake_dev
  from build_kernels import build
  other = build("gfx1030", str(tmp_path / "gfx1030.hsaco"))
  before = _submitted(osi, dev)
  with pytest.raises(DeviceError, match="code object is for gfx1030, this device is gfx1100"):
    dev.load(open(other, "rb").read())
  assert _submitted(osi, dev) == before
