"""The AMD driver per GC IP version and queue type: the compute registers and cache-control packets come from the
GC version's generated modules (gc 9.4.3 for gfx942, 11.0.0, 12.0.0), and a multi-XCC part (gfx942) gets an AQL
compute queue (dispatch packets, its PM4 in indirect buffers run by vendor packets), which the mock processes.

The AQL path is exercised with gfx1100 code on a mock gfx1100 that reports 2 XCCs (the driver picks AQL by the XCC
count), so that it runs whatever the emulator's target support."""
import numpy as np
import pytest

from hcq.compiler import queue as Q
from hcq.config import Config
from hcq.drivers.amd import aql, open_device, pm4, sdma
from hcq.drivers.hcq.engine import TIMELINE
from hcq.errors import DeviceError
from hcq.mockgpu import mock_amd_os
from hcq.mockgpu.amd.gpu import GPUProperties
from tests.fixtures.opencl.kernels import KERNELS, Buffer


def test_compute_registers_come_from_the_gc_version():
  g9, g11, g12 = pm4.gc_registers((9, 4, 3)), pm4.gc_registers((11, 0, 0)), pm4.gc_registers((12, 0, 0))
  from hcq.autogen.amd import gc_9_4_3_compute as gc9
  assert g9.PGM_RSRC3 == gc9.regCOMPUTE_PGM_RSRC3 + 0x2000 - 0x2C00 == 0x22D     # 0x228 on gfx11/12
  assert (g11.PGM_RSRC3, g12.PGM_RSRC3, g9.PGM_LO, g9.USER_DATA_0) == (0x228, 0x228, 0x20C, 0x240)
  assert g9.INITIATOR_CS_W32_EN == 0 and g11.INITIATOR_CS_W32_EN == g12.INITIATOR_CS_W32_EN == 1 << 15
  assert (g9.tmpring_granule, g11.tmpring_granule) == (1024, 256)
  assert g12.tmpring_size(1, g12.max_wavesize) >> 12 == (1 << 18) - 1 and g9.max_wavesize == (1 << 13) - 1
  assert pm4.gc_registers((11, 0, 3)) is g11 and pm4.gc_registers((9, 4, 4)) is g9
  with pytest.raises(DeviceError, match=r"GC 10\.3\.0: no generated compute registers"): pm4.gc_registers((10, 3, 0))


def _device(props=None, threaded=False, target="gfx1100"):
  cfg = Config(timeout_s=5, mock_threaded=threaded, mock_gpu=target)
  os = mock_amd_os(cfg, props=props)
  return open_device("KFD", 0, os, cfg), os


@pytest.fixture(params=[False, True], ids=["synchronous", "threaded"])
def aql_dev(request):
  d, os = _device(GPUProperties(num_xcc=2), threaded=request.param)
  yield d
  d.close()
  os.close()


@pytest.mark.parametrize("target,ip,queue", [("gfx1100", (11, 0, 0), "compute"), ("gfx1200", (12, 0, 0), "compute"),
                                              ("gfx942", (9, 4, 3), "aql")])
def test_the_driver_reads_the_gc_version_and_picks_the_queue_type(target, ip, queue):
  d, os = _device(target=target)
  try:
    assert d.session.gc_ip == ip and d.regs.ip == ip and d.compute.ring.hwq.kind == queue
    assert d.aql == (queue == "aql") and d.soc15 == (ip[0] == 9)
  finally:
    d.close()
    os.close()


def test_gfx9_cache_packets_are_the_soc15_forms():
  d, os = _device(target="gfx942")
  try:
    words = list(d.compute.build(Q.queue("compute", Q.barrier(), Q.store(TIMELINE, 5))).template)
    names = [(name, fields) for _, name, fields in pm4.decode(words)]
    assert [n for n, _ in names] == ["ACQUIRE_MEM", "RELEASE_MEM"]
    assert words[0] == pm4.header(pm4.ACQUIRE_MEM, 6) and words[1] == pm4.COHER_ALL_SOC15
    assert words[8] & pm4.EOP_FLUSH_ALL_SOC15 == pm4.EOP_FLUSH_ALL_SOC15
  finally:
    d.close()
    os.close()


def _run(d, name, seed=3):
  k = KERNELS[name]
  data = k.inputs(seed=seed)
  prog = d.load(k.code_object(d.arch), k.name)
  args, bufs = [], {}
  for a in k.args:
    if isinstance(a, Buffer):
      b = bufs[a.name] = d.alloc(a.nbytes)
      d.copyin(b, data[a.name])
      args.append(b)
    else: args.append(data[a.name].item())
  prog(*args, global_size=k.groups, local_size=k.local_size, wait=True)
  k.check({b.name: np.frombuffer(d.copyout(bufs[b.name]), b.dtype) for b in k.outputs}, data)


@pytest.mark.parametrize("name", ["vadd", "matmul_tiled", "private_array", "atomics_lds", "ids2d"])
def test_kernels_run_through_aql_dispatch_packets(aql_dev, name):
  seen = []
  aql_dev.session.os.devices[0].gpus[0].dispatch_observers.append(lambda q, launch: seen.append(launch))
  _run(aql_dev, name)
  assert seen and all("packet" in l and "sh" not in l for l in seen)
  assert aql_dev.compute.ring.hwq.kind == "aql"


def test_bound_launches_run_in_order_on_aql(aql_dev):
  k = KERNELS["vadd"]
  prog = aql_dev.load(k.code_object(), k.name)
  n = 256
  a, b, c = (aql_dev.alloc(4 * n) for _ in range(3))
  aql_dev.copyin(a, np.arange(n, dtype=np.float32))
  aql_dev.copyin(b, np.ones(n, np.float32))
  # c = a + b, then a = c + b: the second must see the first's result
  bound = aql_dev.bind_many([(prog, (a, b, c), (n // 64,), (64,)), (prog, (c, b, a), (n // 64,), (64,))])
  for run in range(2):
    bound(wait=True)
  assert np.array_equal(np.frombuffer(aql_dev.copyout(a), np.float32), np.arange(n, dtype=np.float32) + 4)


def test_long_pm4_runs_take_several_vendor_packets_and_an_oversized_packet_is_refused(aql_dev):
  sig = aql_dev.alloc(4096, host=True)
  words = []
  for i in range(40):        # 40 WRITE_DATA of 5 dwords: 200 dwords, more than 3 IB slots
    words += [pm4.header(pm4.WRITE_DATA, 4), 1 << 8, (sig.va + 4 * i) & 0xFFFFFFFF, sig.va >> 32, i + 1]
  before = aql_dev.compute.ring.put_dw
  aql_dev.synchronize()
  aql_dev.wait_value(aql_dev.submit_pm4(words))
  assert list(np.frombuffer(aql_dev.copyout(sig), np.uint32)[:40]) == list(range(1, 41))
  assert (aql_dev.compute.ring.put_dw - before) // aql.PACKET_DWORDS >= 4
  with pytest.raises(DeviceError, match="exceeds an AQL indirect-buffer slot"):
    aql_dev.submit_pm4(pm4.nop(aql.IB_SLOT_DWORDS))
  _run(aql_dev, "vadd")      # the refused submission left nothing behind


def test_the_aql_queue_describes_itself_and_its_scratch_in_its_amd_queue_t():
  import struct
  d, os = _device(target="gfx942")
  try:
    q = d.compute.ring.hwq
    view = q.gart.cpu
    qtype, features, base = struct.unpack_from("<IIQ", view, aql.Q_TYPE)
    (size,) = struct.unpack_from("<I", view, aql.Q_SIZE)
    max_cu, max_wave = struct.unpack_from("<II", view, aql.Q_MAX_CU_ID)
    assert (qtype, features, base, size) == (0, 1, q.ring.va, q.ring.size // 64)
    assert (max_cu, max_wave) == (303, 31)                    # 304 CUs; 8 waves x 4 SIMDs
    _run(d, "private_array")                                   # a kernel with a private segment: scratch
    s = d.scratch
    tmpring, w0, w1, w2, w3, sbase, sbytes, lane = struct.unpack_from("<I4IQQI", view, aql.Q_TMPRING)
    assert (tmpring, sbase, sbytes, lane) == (s.tmpring, s.va, s.size // 8, s.per_thread)
    assert (w0, w1 & 0xFFFF, w1 >> 31, w2) == (s.va & 0xFFFFFFFF, s.va >> 32 & 0xFFFF, 1, s.size // 8)
    assert w3 >> 23 & 1 and (w3 >> 15) & 0xF == 4            # ADD_TID_ENABLE, DATA_FORMAT 32
    assert d.regs.tmpring_size(0, 1 << 13) == 0              # WAVESIZE of gfx9 is 13 bits: tmpring's fields masked
  finally:
    d.close()
    os.close()


@pytest.mark.parametrize("target,major", [("gfx1100", 6), ("gfx1200", 6), ("gfx942", 4)])
def test_the_copy_engine_takes_the_sdma_version_of_the_part(target, major):
  d, os = _device(target=target)
  try:
    assert d.session.sdma_ip[0] == {"gfx1100": 6, "gfx1200": 7, "gfx942": 4}[target] and d.sdma.major == major
    n = (5 << 20) + 12              # more than one SDMA 4 copy packet (4 MiB)
    words = list(d.copy.build(Q.queue("copy", Q.copy(Q.buffer(3, n), Q.buffer(4, n), n))).template)
    assert sum(1 for _, name, _ in sdma.decode(words) if name == "COPY_LINEAR") == (2 if major == 4 else 1)
    src = np.random.default_rng(1).integers(0, 255, n, np.uint8)
    a, b = d.alloc(n), d.alloc(n)
    d.copyin(a, src)
    d.wait_value(d.copy_async(b.va, a.va, n))
    assert np.array_equal(np.frombuffer(d.copyout(b), np.uint8), src)
  finally:
    d.close()
    os.close()


def test_without_ip_discovery_the_versions_follow_the_gfx_target(fake_dev):
  """A kernel without amdgpu's ip_discovery sysfs (before 5.19; the fake KFD has none): GC from the gfx target
  (gfx94x is GC 9.4.3), SDMA's major from GC's."""
  from hcq.drivers.amd.kfd import KFDSession
  dev, _ = fake_dev
  assert (dev.session.gc_ip, dev.session.sdma_ip, dev.regs.ip, dev.sdma.major) == ((11, 0, 0), (6, 0, 0), (11, 0, 0), 6)
  assert KFDSession._gc_from_gfx(90402) == (9, 4, 3) and KFDSession._gc_from_gfx(120001) == (12, 0, 0)


@pytest.mark.parametrize("threaded", [False, True], ids=["synchronous", "threaded"])
def test_a_single_xcc_gfx942_runs_pm4_with_its_gfx9_registers(threaded):
  """gfx942 on one XCC takes a PM4 queue: gc 9.4.3's registers (COMPUTE_PGM_RSRC3 at 0x22d), no CS_W32_EN, soc15
  cache packets, wave64 in the mock."""
  import dataclasses
  d, os = _device(dataclasses.replace(GPUProperties.for_target("gfx942"), num_xcc=1), threaded, target="gfx942")
  try:
    seen = []
    os.devices[0].gpus[0].dispatch_observers.append(lambda q, launch: seen.append(launch))
    assert not d.aql and d.compute.ring.hwq.kind == "compute"
    for name in ("vadd", "private_array", "matmul_tiled"): _run(d, name)
    assert all(l["wave_size"] == 64 and 0x22D in l["sh"] and not l["sh"].get(0x228) for l in seen)
    assert any(l["rsrc3"] for l in seen)                  # gfx942 kernels carry ACCUM_OFFSET in RSRC3
  finally:
    d.close()
    os.close()


def test_kernels_get_the_aql_queues_own_amd_queue_t_as_queue_pointer(aql_dev):
  """queue_ptr / hidden_queue_ptr point at the AQL queue's amd_queue_t (the one describe_queue fills); a PM4 device
  keeps a zeroed one of its own."""
  import struct
  hwq = aql_dev.compute.ring.hwq
  assert aql_dev.queue_desc_va == hwq.gart.va
  assert struct.unpack_from("<Q", hwq.gart.cpu, aql.Q_BASE_ADDRESS)[0] == hwq.ring.va
  d, os = _device()
  try: assert d.queue_desc_va not in (0, d.compute.ring.hwq.gart.va)
  finally:
    d.close()
    os.close()
