"""A GPU queue drives the NIC (issue 34): the mock fabric carries a GPU engine's stores to the NIC's BAR, GPU buffers
are NIC memory regions from their pages, and kernel -> GPU-posted RDMA WRITE -> kernel runs with no CPU in the data or
control path (loopback in one process)."""
import struct

import numpy as np
import pytest

from hcq.compiler import queue as Q
from hcq.config import Config
from hcq.drivers.bnxt import doorbell
from hcq.drivers.bnxt.gpuq import GPUPoster
from hcq.drivers.bnxt.qp import CompletionError
from hcq.drivers.amd.kernels import demo_code_object
from hcq.drivers.hcq import memops, p2p
from hcq.drivers.hcq.runtime import Submission
from hcq.drivers.system.linux import LinuxOS
from hcq.errors import DeviceError, OSCallError, Timeout


def submit(gpu, *elements):
  cb = gpu.compute.build(Q.queue("compute", *elements))
  with Submission(gpu, gpu.compute, "test") as sub: sub.add(cb.fill({}))
  gpu.wait_value(sub.value)


def spy_bar_writes(f) -> list:
  """(bar, offset, value, width) of every write that reaches the NIC model from now on."""
  seen = []
  orig = f.model.mmio_write
  f.model.mmio_write = lambda bar, off, value, width: (seen.append((bar, off, value, width)), orig(bar, off, value, width))
  return seen


def test_gpu_store_reaches_the_nic_doorbell(fabric):
  f = fabric(gpus=1)
  seen = spy_bar_writes(f)
  # a CQ doorbell that hands back nothing (consumer index 0, epoch 0) is legal at any time
  value = doorbell.encode(f.a.cq_id, doorbell.CQ, 0, 0)
  submit(f.gpus[0], memops.store64(f.poster.db_va, value))
  assert seen == [(2, f.nic.db_off, value, 8)]
  assert f.model.errors == []


def test_doorbell_in_two_halves_is_refused_by_the_nic(fabric):
  f = fabric(gpus=1)
  value = doorbell.encode(f.a.cq_id, doorbell.CQ, 0, 0)
  # WRITE_DATA stores dword by dword: the NIC sees two 32-bit writes and reports the driver bug
  submit(f.gpus[0], memops.write(f.poster.db_va, struct.pack("<Q", value)))
  assert any("a doorbell is one 64-bit store" in e for e in f.model.errors), f.model.errors


def test_bulk_access_to_a_peer_window_faults(fabric):
  f = fabric(gpus=1)
  gpu = f.gpus[0]
  buf = gpu.alloc(64, host=True)
  # the SDMA copy faults (the mock refuses bulk accesses to a peer BAR); KFD reports the faulting page
  with pytest.raises(DeviceError, match=f"{f.poster.db_va & ~0xFFF:#x}"):
    gpu.wait_value(gpu.copy_async(f.poster.db_va, buf.va, 64))


def test_linux_names_the_missing_bar_exporter(fabric):
  with pytest.raises(OSCallError, match="no dma-buf exporter for a PCI BAR"):
    LinuxOS(Config()).export_bar_dmabuf("/sys/bus/pci/devices/0000:41:00.0/resource2", 4096, 0x10000)
  # on such a kernel, mapping the doorbell page into a KFD GPU fails naming the GPU, the page and the reason
  f = fabric(gpus=1)
  f.os.export_bar_dmabuf = lambda *a, **kw: LinuxOS.export_bar_dmabuf(f.os, *a, **kw)
  with pytest.raises(DeviceError, match=r"KFD\+AMD:0.*cannot map bnxt .* doorbell page .*no dma-buf exporter"):
    GPUPoster(f.b, f.gpus[0])


def test_gpu_buffer_registered_from_its_pages(fabric):
  f = fabric(gpus=1)
  gpu = f.gpus[0]
  buf = gpu.alloc(3 * 4096 + 100, host=True)
  pages = gpu.dma_pages(buf)
  assert len(pages) == 4 and pages == f.os.phys_addrs(buf.va, 4 * 4096)
  local, remote = p2p.register(f.nic, gpu, buf)
  assert local.lkey == remote.rkey and local.va == buf.va
  mr = f.model.fw.mrs[local.lkey] if hasattr(f.model.fw, "mrs") else None
  if mr is not None: assert mr.va == buf.va
  with pytest.raises(DeviceError, match="VRAM"):
    gpu.dma_pages(gpu.alloc(4096))


@pytest.mark.parametrize("n", [256, 3000])
def test_kernel_rdma_kernel_loopback(fabric, n):
  """kernel on GPU 0 -> RDMA WRITE posted and completed by GPU 0's queue -> GPU 1's queue waits for the flag -> kernel
  on GPU 1; the host submits everything first and waits only at the end."""
  f = fabric(gpus=2)
  g0, g1 = f.gpus
  code = demo_code_object()
  vadd0, vadd1 = g0.load(code, "vadd"), g1.load(code, "vadd")
  rng = np.random.default_rng(n)
  a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
  nbytes = 4 * n
  ba, bb, bc = (g0.alloc(nbytes, host=True) for _ in range(3))
  g0.copyin(ba, a.tobytes()); g0.copyin(bb, b.tobytes())
  dst, out = g1.alloc(nbytes, host=True), g1.alloc(nbytes, host=True)
  slot, flag = g0.alloc(8, host=True), g1.alloc(8, host=True)
  src_l, _ = p2p.register(f.nic, g0, bc)
  _, dst_r = p2p.register(f.nic, g1, dst)
  slot_l, _ = p2p.register(f.nic, g0, slot)
  _, flag_r = p2p.register(f.nic, g1, flag)
  # GPU 1 first: its queue waits for the flag, then runs its kernel on what arrived
  arrived = p2p.wait_arrival(g1, flag.va, 1)
  vadd1(dst, dst, out, n, global_size=(n,), local_size=(64,))
  vadd0(ba, bb, bc, n, global_size=(n,), local_size=(64,))
  seen = spy_bar_writes(f)
  sent = p2p.rdma_write(g0, f.poster, src_l, dst_r, nbytes, flag=(slot_l, flag_r, 1))
  p2p.wait(g0, sent, f.poster)
  # the GPU rang the NIC: two SQ doorbells (payload, flag), two CQ doorbells (both completions handed back), each one
  # 64-bit store; the CPU wrote none of them
  kinds = [(bar, width, value >> 60) for bar, _off, value, width in seen]
  assert kinds == [(2, 8, doorbell.SQ >> 28), (2, 8, doorbell.SQ >> 28), (2, 8, doorbell.CQ >> 28), (2, 8, doorbell.CQ >> 28)]
  g1.synchronize()
  assert arrived < g1.timeline.value
  got = np.frombuffer(g1.copyout(out), dtype=np.float32)
  np.testing.assert_array_equal(got, 2 * (a + b))
  assert f.model.errors == []


def setup_pair(f, n):
  g0, g1 = f.gpus
  src, dst, slot, flag = g0.alloc(n, host=True), g1.alloc(n, host=True), g0.alloc(8, host=True), g1.alloc(8, host=True)
  return (p2p.register(f.nic, g0, src)[0], p2p.register(f.nic, g1, dst)[1], p2p.register(f.nic, g0, slot)[0],
          p2p.register(f.nic, g1, flag)[1], src, dst, flag)


def test_lost_packet_is_retried_by_the_nic(fabric):
  f = fabric(gpus=2, qp_timeout=8, faults="drop=1+2")      # the first packets vanish: the NIC resends them
  n = 4096
  src_l, dst_r, slot_l, flag_r, src, dst, flag = setup_pair(f, n)
  data = np.arange(n, dtype=np.uint8).tobytes()
  f.gpus[0].copyin(src, data)
  arrived = p2p.wait_arrival(f.gpus[1], flag.va, 7)
  p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, n, flag=(slot_l, flag_r, 7)), f.poster)
  f.gpus[1].wait_value(arrived)
  assert f.gpus[1].copyout(dst) == data
  assert f.model.errors == [] and f.model.phy.stats["fault_dropped"] == 2
  assert any("retransmission" in m for m in f.model.messages), f.model.messages


def test_remote_that_never_answers_times_out_naming_qp_and_psn(fabric):
  f = fabric(gpus=2, timeout_s=0.5)
  f.nic.set_loopback(False)       # nothing comes back: no ACK, the requester keeps retrying
  src_l, dst_r, *_ = setup_pair(f, 4096)
  psn = f.a.psn
  with pytest.raises(Timeout, match=rf"QP {f.a.qpn:#x}: completion of RDMA WRITE of 4096 bytes .*\(PSN {psn:#x}\)"):
    p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 4096), f.poster)


def test_error_completion_is_named(fabric):
  f = fabric(gpus=2, timeout_s=1.0)
  src_l, dst_r, *_ = setup_pair(f, 4096)
  bad = p2p.Remote(dst_r.va, dst_r.rkey ^ 0x100, dst_r.size)     # a key the responder does not know: NAK
  with pytest.raises(CompletionError, match=r"QP .*RDMA WRITE of 4096 bytes .*posted by the GPU queue completed with status \d+ \(REMOTE_ACCESS_ERR\)"):
    p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, bad, 4096), f.poster)


def test_diagnosis_names_the_failing_submission_after_the_cq_wrapped(fabric):
  """Many good copies (the 16-entry CQ wraps: old entries' toggle bits change), then one that never completes: the
  timeout names that one's PSN, not an old entry's."""
  f = fabric(gpus=2, timeout_s=0.5)
  src_l, dst_r, *_ = setup_pair(f, 4096)
  for _ in range(20): p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 64), f.poster)
  assert f.poster.pending == {}
  f.nic.set_loopback(False)
  psn = f.a.psn
  with pytest.raises(Timeout, match=rf"\(PSN {psn:#x}\)"):
    p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 64), f.poster)


def test_copy_engine_writes_and_waits_but_rings_no_doorbell(fabric):
  """SDMA: WRITE_LINEAR for the stores, POLL_REGMEM for both waits; a single 64-bit store is refused by name."""
  f = fabric(gpus=1)
  gpu = f.gpus[0]
  buf = gpu.alloc(4096, host=True)
  cb = gpu.copy.build(Q.queue("copy", memops.write(buf.va + 16, struct.pack("<3I", 5, 6, 7)),
                              memops.wait_eq(buf.va + 20, 0x6, 0xF), memops.wait_ge(buf.va + 24, 7)))
  with Submission(gpu, gpu.copy, "test") as sub: sub.add(cb.fill({}))
  gpu.wait_value(sub.value)
  assert struct.unpack_from("<3I", buf.cpu_view, 16) == (5, 6, 7)
  with pytest.raises(DeviceError, match="single 64-bit store .* copy engine"):
    gpu.copy.build(Q.queue("copy", memops.store64(f.poster.db_va, 0)))


@pytest.mark.parametrize("use_native", [True, False])
def test_kernel_store_to_a_peer_window_faults_on_both_emulator_paths(fabric, monkeypatch, use_native):
  """A shader's global store into the NIC's doorbell page (a peer window of the GPU's command processors) is not a
  store the mock's emulator makes: the native (C) block path faults there exactly as the numpy path does, naming
  the address, and nothing reaches the NIC (the native path checks the same range table, which holds no window)."""
  from hcq.drivers.hcq.device import Buffer
  from hcq.mockgpu.amd.emu import native
  if use_native and not native.compiler(): pytest.skip("no C compiler: the emulator runs numpy only")
  monkeypatch.setattr(native, "MIN_WAVES", 0)
  monkeypatch.setattr(native, "ENABLED", use_native)
  f = fabric(gpus=1)
  gpu = f.gpus[0]
  n = 1024
  a, b = gpu.alloc(4 * n, host=True), gpu.alloc(4 * n, host=True)
  page = f.poster.db_va & ~0xFFF
  window = Buffer(gpu, page, 4 * n, kind="peer window")     # the kernel's output pointer aimed at the window
  vadd = gpu.load(demo_code_object(), "vadd")
  seen = spy_bar_writes(f)
  before = native.RUNS
  with pytest.raises((DeviceError, Timeout), match=f"{page:#x}"):
    vadd(a, b, window, n, global_size=(n // 64,), local_size=(64,), wait=True)
  assert (native.RUNS > before) == use_native
  assert seen == []
