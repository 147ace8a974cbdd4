"""An NVIDIA GPU's GPFIFO channel drives the NIC (issue 34): the NIC's doorbell page in the GPU's address space through
an RM OS descriptor of I/O memory, the WQE/MSN stores, the doorbell and the CQE/arrival waits lowered to host-class
semaphore methods, and kernel -> GPU-posted RDMA WRITE -> kernel on MOCK+NV with the mock Thor2 in PHY loopback."""
import struct

import numpy as np
import pytest

from hcq.compiler import queue as Q
from hcq.drivers.bnxt import doorbell
from hcq.drivers.bnxt.gpuq import GPUPoster
from hcq.drivers.bnxt.qp import CQ_DEPTH, CompletionError
from hcq.drivers.hcq import memops, p2p
from hcq.drivers.hcq.runtime import Submission
from hcq.drivers.nv import gpfifo as G
from hcq.drivers.nv.demo import VADD_PTX
from hcq.errors import DeviceError, Timeout
from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import read_pcap

from tests.bnxt.oracles import tshark_rows
from .nv_harness import NVFabric


@pytest.fixture
def nvfabric():
  made = []
  def factory(**kw):
    f = NVFabric(**kw)
    made.append(f)
    return f
  yield factory
  for f in made: f.close()


def spy_bar_writes(f) -> list:
  seen = []
  orig = f.model.mmio_write
  f.model.mmio_write = lambda bar, off, value, width: (seen.append((bar, off, value, width)), orig(bar, off, value, width))
  return seen


def submit(gpu, *elements, engine="compute"):
  eng = getattr(gpu, engine)
  cb = eng.build(Q.queue(engine, *elements))
  with Submission(gpu, eng, "test") as sub: sub.add(cb.fill({}))
  gpu.wait_value(sub.value)


def methods(gpu, *elements) -> list:
  """(method, data) of the host-class methods one element program lowers to."""
  words = list(gpu.compute.build(Q.queue("compute", *elements)).fill({}))
  return [(name.split(".")[-1], int(v.split("= ")[1], 16)) for _, name, (_, v) in G.decode_pushbuffer(words)]


def sem_ops(gpu, *elements) -> list:
  """(address, payload, SEM_EXECUTE) of each semaphore operation in the lowered program."""
  out, cur = [], {}
  for name, v in methods(gpu, *elements):
    cur[name] = v
    if name == "SEM_EXECUTE":
      out.append((cur["SEM_ADDR_LO"] | cur["SEM_ADDR_HI"] << 32, cur["SEM_PAYLOAD_LO"] | cur["SEM_PAYLOAD_HI"] << 32, v))
  return out


def test_lowering_uses_the_host_semaphore_operations(nvfabric):
  f = nvfabric(gpus=1)
  g = f.gpus[0]
  a = 0x10_0000_1000
  # stores: 64-bit releases where two dwords start 8-byte aligned, else 32-bit; every release after WFI
  ops = sem_ops(g, memops.write(a + 4, struct.pack("<4I", 1, 2, 3, 4)))
  rel = G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI
  assert ops == [(a + 4, 1, rel), (a + 8, 2 | 3 << 32, rel | G.SEM_PAYLOAD_64), (a + 16, 4, rel)]
  assert sem_ops(g, memops.store64(a, 0xAB << 40 | 5)) == [(a, 0xAB << 40 | 5, rel | G.SEM_PAYLOAD_64)]
  # waits: == on the whole word, one bit set (ACQ_AND), one bit clear (ACQ_NOR with the other bits), unsigned >=
  assert sem_ops(g, memops.wait_eq(a, 7)) == [(a, 7, G.SEM_OP_ACQUIRE)]
  assert sem_ops(g, memops.wait_eq(a, 1, 1)) == [(a, 1, G.SEM_OP_ACQ_AND)]
  assert sem_ops(g, memops.wait_eq(a, 0, 1)) == [(a, 0xFFFFFFFE, G.SEM_OP_ACQ_NOR)]
  assert sem_ops(g, memops.wait_ge(a, 9)) == [(a, 9, G.SEM_OP_ACQ_STRICT_GEQ)]
  with pytest.raises(DeviceError, match="no semaphore acquire"):
    g.compute.build(Q.queue("compute", memops.wait_eq(a, 0x100, 0x1FF)))


def test_semaphore_waits_on_the_mock(nvfabric):
  """The lowered waits block until memory satisfies them and release the channel after (both bit polarities)."""
  f = nvfabric(gpus=1, timeout_s=0.5)
  g = f.gpus[0]
  buf = g.alloc(64, host=True)
  for engine in ("compute", "copy"):
    submit(g, memops.write(buf.va, struct.pack("<4I", 0x10, 0, 6, 0)), engine=engine)
    submit(g, memops.wait_eq(buf.va, 0x10, 0x10), memops.wait_eq(buf.va, 0, 1), memops.wait_ge(buf.va + 8, 6),
           memops.wait_eq(buf.va + 8, 6), engine=engine)
  with pytest.raises(Timeout):
    submit(g, memops.wait_eq(buf.va, 0, 0x10))       # bit 4 is set: never satisfied, bounded by the timeout


def test_gpu_semaphore_reaches_the_nic_doorbell(nvfabric):
  f = nvfabric(gpus=1)
  seen = spy_bar_writes(f)
  value = doorbell.encode(f.a.cq_id, doorbell.CQ, 0, 0)
  submit(f.gpus[0], memops.store64(f.poster.db_va, value))
  assert seen == [(2, f.nic.db_off, value, 8)]           # one 64-bit write: a 64-bit release
  assert f.model.errors == []
  assert f.poster.db_va < 1 << 40          # SEM_ADDR_HI holds address bits 39:32


def test_doorbell_in_two_releases_is_refused_by_the_nic(nvfabric):
  f = nvfabric(gpus=1)
  value = doorbell.encode(f.a.cq_id, doorbell.CQ, 0, 0)
  submit(f.gpus[0], memops.write(f.poster.db_va + 4, struct.pack("<2I", value & 0xFFFFFFFF, value >> 32)))
  assert f.model.errors, "two 32-bit stores at +4, +8 are no doorbell"


def test_copy_engine_into_the_peer_window_faults(nvfabric):
  f = nvfabric(gpus=1)
  g = f.gpus[0]
  buf = g.alloc(64, host=True)
  with pytest.raises(DeviceError, match=f"{f.poster.db_va & ~0xFFF:#x}"):
    g.wait_value(g.copy_async(f.poster.db_va, buf.va, 64))


def test_rm_refuses_the_peer_mapping_without_permission(nvfabric):
  f = nvfabric(gpus=1)
  rm = next(d.rm for d in f.os.devices if hasattr(d, "rm"))
  rm.peer_mapping_override = False         # not root, no NVreg PeerMappingOverride=1
  before = dict(f.os.io_maps)
  with pytest.raises(DeviceError, match=r"RM\+NV:0: .*doorbell page.*NV_ERR_INSUFFICIENT_PERMISSIONS.*"
                                        r"PeerMappingOverride=1"):
    f.gpus[0].map_peer_bar(f.nic.pci, 2, 4096, 0, "bnxt doorbell page")
  assert f.os.io_maps == before            # the process's I/O mapping of the BAR went with the failure


def test_nv_refuses_foreign_host_memory_and_vram_pages(nvfabric):
  f = nvfabric(gpus=1)
  g = f.gpus[0]
  with pytest.raises(DeviceError, match="QueueMemory"):
    g.map_host(0x7000_0000_0000, 4096, "a NIC's SQ")
  with pytest.raises(DeviceError, match="VRAM"):
    g.dma_pages(g.alloc(4096))
  buf = g.alloc(3 * 4096 + 8, host=True)
  assert g.dma_pages(buf) == f.os.phys_addrs(buf.va, 4 * 4096)


def _setup(f, n):
  g0, g1 = f.gpus
  src, dst, slot, flag = g0.alloc(n, host=True), g1.alloc(n, host=True), g0.alloc(8, host=True), g1.alloc(8, host=True)
  return (p2p.register(f.nic, g0, src)[0], p2p.register(f.nic, g1, dst)[1], p2p.register(f.nic, g0, slot)[0],
          p2p.register(f.nic, g1, flag)[1], src, dst, flag)


@pytest.mark.tools("tshark")
@pytest.mark.parametrize("n", [256, 3000])
def test_kernel_rdma_kernel_loopback_nv(nvfabric, tmp_path, n):
  """kernel on GPU 0 -> RDMA WRITE posted and completed by GPU 0's compute channel -> GPU 1's channel waits for the
  flag -> kernel on GPU 1, checked against numpy; the wire's capture decodes in tshark as RoCEv2."""
  pcap = str(tmp_path / "nv.pcap")
  f = nvfabric(gpus=2, pcap=pcap)
  g0, g1 = f.gpus
  vadd0, vadd1 = g0.load(VADD_PTX, "vadd"), g1.load(VADD_PTX, "vadd")
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
  grid = (-(-n // 64),)
  arrived = p2p.wait_arrival(g1, flag.va, 1)
  vadd1(dst, dst, out, n, global_size=grid, local_size=(64,))
  vadd0(ba, bb, bc, n, global_size=grid, local_size=(64,))
  seen = spy_bar_writes(f)
  sent = p2p.rdma_write(g0, f.poster, src_l, dst_r, nbytes, flag=(slot_l, flag_r, 1))
  p2p.wait(g0, sent, f.poster)
  kinds = [(bar, width, value >> 60) for bar, _off, value, width in seen]
  assert kinds == [(2, 8, doorbell.SQ >> 28)] * 2 + [(2, 8, doorbell.CQ >> 28)] * 2
  g1.synchronize()
  assert arrived < g1.timeline.value
  np.testing.assert_array_equal(np.frombuffer(g1.copyout(out), dtype=np.float32), 2 * (a + b))
  assert f.model.errors == []
  f.close()                 # the capture is complete once the NIC is closed
  rows = tshark_rows(pcap)
  writes = [r for r in rows if r["bth.opcode"] in (6, 7, 8, 10)]
  assert writes and writes[0]["reth.va"] == dst.va and writes[0]["reth.dmalen"] == nbytes
  assert writes[-1]["bth.opcode"] == 10 and writes[-1]["reth.va"] == flag.va and writes[-1]["reth.dmalen"] == 8
  frames = read_pcap(pcap)
  assert len(frames) == len(rows) and all(fr.check_icrc(x) for x in frames)


def test_lost_packet_is_retried_nv(nvfabric):
  f = nvfabric(gpus=2, qp_timeout=8, faults="drop=1+2")
  n = 4096
  src_l, dst_r, slot_l, flag_r, src, dst, flag = _setup(f, n)
  data = np.arange(n, dtype=np.uint8).tobytes()
  f.gpus[0].copyin(src, data)
  arrived = p2p.wait_arrival(f.gpus[1], flag.va, 7)
  p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, n, flag=(slot_l, flag_r, 7)), f.poster)
  f.gpus[1].wait_value(arrived)
  assert f.gpus[1].copyout(dst) == data
  assert f.model.errors == [] and f.model.phy.stats["fault_dropped"] == 2


def test_remote_that_never_answers_times_out_naming_qp_and_psn_nv(nvfabric):
  f = nvfabric(gpus=2, timeout_s=0.5)
  f.nic.set_loopback(False)
  src_l, dst_r, *_ = _setup(f, 4096)
  psn = f.a.psn
  with pytest.raises(Timeout, match=rf"QP {f.a.qpn:#x}: completion of RDMA WRITE of 4096 bytes .*\(PSN {psn:#x}\)"):
    p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 4096), f.poster)


def test_error_completion_is_named_when_the_gpu_sees_it(nvfabric):
  """A NAK'd write: the GPU's wait ends on the entry's toggle bit, and p2p.wait names the QP, PSN and status from
  the entry, not from a device timeout (the timeline value was reached)."""
  f = nvfabric(gpus=2, timeout_s=30.0)
  src_l, dst_r, *_ = _setup(f, 4096)
  bad = p2p.Remote(dst_r.va, dst_r.rkey ^ 0x100, dst_r.size)
  psn = f.a.psn
  value = p2p.rdma_write(f.gpus[0], f.poster, src_l, bad, 4096)
  with pytest.raises(CompletionError, match=rf"RDMA WRITE of 4096 bytes .*\(PSN {psn:#x}\), posted by the GPU queue "
                                            r"completed with status \d+ \(REMOTE_ACCESS_ERR\)") as e:
    p2p.wait(f.gpus[0], value, f.poster)
  assert not isinstance(e.value.__cause__, Timeout) and f.gpus[0].timeline.value >= value
  assert f.a.state == "ERR" and f.poster.pending == {}


def test_unchecked_completions_are_bounded_by_the_cq(nvfabric):
  f = nvfabric(gpus=2)
  src_l, dst_r, *_ = _setup(f, 4096)
  values = [p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 64) for _ in range(CQ_DEPTH)]
  with pytest.raises(DeviceError, match=f"{CQ_DEPTH} completions .* not checked yet"):
    p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 64)
  p2p.wait(f.gpus[0], values[-1], f.poster)
  p2p.wait(f.gpus[0], p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 64), f.poster)


def test_retry_exhaustion_ends_the_gpu_wait_with_the_qp_and_psn(nvfabric):
  """A silent remote and a NIC that gives up (retry_cnt 1, ~1 ms ACK timeout): its TRANSPORT_RETRY_CNT_ERR entry ends
  the GPU channel's acquire, and p2p.wait names the QP, the PSN and the status long before the 30 s device timeout
  (the timeline value was reached: no Timeout behind it)."""
  f = nvfabric(gpus=2, timeout_s=30.0, qp_timeout=8, retry_cnt=1)
  f.nic.set_loopback(False)
  src_l, dst_r, *_ = _setup(f, 4096)
  psn = f.a.psn
  value = p2p.rdma_write(f.gpus[0], f.poster, src_l, dst_r, 4096)
  with pytest.raises(CompletionError, match=rf"QP {f.a.qpn:#x}: RDMA WRITE of 4096 bytes .*\(PSN {psn:#x}\).* "
                                            r"\(TRANSPORT_RETRY_CNT_ERR\)") as e:
    p2p.wait(f.gpus[0], value, f.poster)
  assert not isinstance(e.value.__cause__, Timeout) and f.gpus[0].timeline.value >= value
  assert any("retry count 1 exhausted" in m for m in f.model.messages)


def test_mock_host_refuses_a_misaligned_64_bit_semaphore(nvfabric):
  """dev_pbdma.ref.txt SEM_EXECUTE: a 64-bit payload needs an 8-byte aligned address (else NV_PBDMA_INTR_0_SEMAPHORE):
  the mock stops the channel; what memops.store64 would never emit, written as raw methods."""
  from array import array
  f = nvfabric(gpus=1, timeout_s=2.0)
  g = f.gpus[0]
  buf = g.alloc(64, host=True)
  words = G.method(G.SUBC_HOST, G.SEM_ADDR_LO, (buf.va + 4) & 0xFFFFFFFF, (buf.va + 4) >> 32, 1, 0,
                   G.SEM_OP_RELEASE | G.SEM_PAYLOAD_64)
  with Submission(g, g.compute, "a misaligned release") as sub: sub.add(array("I", words))
  with pytest.raises(DeviceError, match="not 8-byte aligned"):
    g.wait_value(sub.value)
  assert bytes(buf.cpu_view[:16]) == bytes(16)


def test_mock_rm_judges_os_descriptors_as_nvidia_ko_does(nvfabric):
  """escape.c RmAllocOsDescriptor wants MAPPING NO_MAP; I/O memory must be UNCACHED and CONTIGUOUS
  (osCreateOsDescriptorFromIoMemory) and is never mapped to the CPU (os_desc_mem.c NEVER_MAP)."""
  from hcq.autogen.nv import series as nv_series
  from hcq.drivers.nv.rm import RMError
  f = nvfabric(gpus=1)
  iface = f.gpus[0].session
  m = iface.rm
  io = f.os.map_bar_io(f.nic.pci.resource_path(2), 4096, 0, "doorbell page")
  host = f.gpus[0].alloc(4096, host=True)

  def alloc(addr, **fl):
    flags = 0
    for k, v in fl.items(): flags |= nv_series.drf(m, f"NVOS02_FLAGS_{k}", v)
    iface._handles += 1
    a = m.nv_ioctl_nvos02_parameters_with_fd(params=m.NVOS02_PARAMETERS(
      hRoot=iface.root, hObjectParent=iface.device, hObjectNew=iface._handles, hClass=m.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
      pMemory=addr, limit=4095, flags=flags), fd=-1)
    iface._escape(iface.dev, m.NV_ESC_RM_ALLOC_MEMORY, a, "test")
    return iface._handles

  with pytest.raises(RMError, match="NV_ERR_INVALID_FLAGS"):       # host memory, MAPPING DEFAULT
    alloc(host.va, PHYSICALITY="NONCONTIGUOUS", COHERENCY="CACHED")
  alloc(host.va, PHYSICALITY="NONCONTIGUOUS", COHERENCY="CACHED", MAPPING="NO_MAP")     # what rm.py sends
  with pytest.raises(RMError, match="NV_ERR_INVALID_FLAGS"):       # I/O memory, cached and non-contiguous
    alloc(io.addr, PHYSICALITY="NONCONTIGUOUS", COHERENCY="CACHED", MAPPING="NO_MAP")
  handle = alloc(io.addr, PHYSICALITY="CONTIGUOUS", COHERENCY="UNCACHED", MAPPING="NO_MAP")
  fd = iface._device_fd()
  with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"):
    iface._map_to_cpu(handle, 4096, fd)
  fd.close()
  io.close()
