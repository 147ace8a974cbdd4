"""The compute queue through its MQD: AM fills struct v11_compute_mqd in memory and loads the HQD from it; the mock CP
reads the MQD when the queue activates (a field that disagrees with its register is named) and saves the queue's
read and write pointers into it on a dequeue."""
import pytest

import hcq
from hcq.autogen.amd import v11_structs as V
from hcq.config import Config
from hcq.drivers.amd import pm4
from hcq.drivers.amd.am import mqd as mqdmod
from hcq.drivers.amd.kfd import RPTR_OFFSET, WPTR_OFFSET
from hcq.errors import DeviceError
from hcq.mockgpu.amd.am.discovery import GC_HWID

MQD = V.struct_v11_compute_mqd


@pytest.fixture
def dev(fw_dir):
  d = hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir))
  yield d
  d.close()


def compute_queue(dev):
  (q,) = [q for q in dev.session._queues if q.kind == "compute"]
  return q


def mqd_of(q, dev) -> MQD:
  """The MQD as it is in VRAM (read through the VRAM BAR view, as the driver wrote it)."""
  return MQD.from_buffer_copy(dev.session.am.vram.read(q.mqd.vram.offset, mqdmod.MQD_SIZE))


def test_the_mqd_decodes_to_the_queue(dev):
  q = compute_queue(dev)
  m = mqd_of(q, dev)
  assert m.header == 0xC0310800 and m.cp_hqd_active == 1 and m.cp_hqd_vmid == 0
  assert (m.cp_mqd_base_addr_hi << 32) | m.cp_mqd_base_addr_lo == q.mqd.va
  assert (m.cp_hqd_pq_base_hi << 40) | (m.cp_hqd_pq_base_lo << 8) == q.ring.va
  assert 4 << ((m.cp_hqd_pq_control & 0x3F) + 1) == q.ring.size          # QUEUE_SIZE: log2(ring dwords) - 1
  assert (m.cp_hqd_pq_rptr_report_addr_hi << 32) | m.cp_hqd_pq_rptr_report_addr_lo == q.gart.va + RPTR_OFFSET
  assert (m.cp_hqd_pq_wptr_poll_addr_hi << 32) | m.cp_hqd_pq_wptr_poll_addr_lo == q.gart.va + WPTR_OFFSET
  eop = (m.cp_hqd_eop_base_addr_hi << 40) | (m.cp_hqd_eop_base_addr_lo << 8)
  assert eop in dev.session._mems and 4 << ((m.cp_hqd_eop_control & 0x3F) + 1) == dev.session._mems[eop].size
  doorbell = mqdmod.GC.REGS["CP_HQD_PQ_DOORBELL_CONTROL"].decode(m.cp_hqd_pq_doorbell_control)
  assert doorbell["DOORBELL_EN"] == 1 and doorbell["DOORBELL_OFFSET"] * 4 == q.doorbell_offset
  # the HQD registers hold what the MQD says, field by field (the mock's register file)
  gpu = dev.owned_os.devices[0]
  for field, reg in mqdmod.HQD_REGISTERS:
    if reg != "CP_HQD_DEQUEUE_REQUEST":
      assert gpu.regs.values.get(gpu.regs.addr(GC_HWID, "gc_11_0_0", reg), 0) == getattr(m, field), field
  assert gpu.cp.mqds[("compute", 1, 0, 0)] == q.mqd.va


def test_a_dequeue_saves_the_pointers_into_the_mqd(dev):
  q = compute_queue(dev)
  for _ in range(3): dev.submit_pm4(pm4.nop(4))
  wptr = dev.owned_os.memview(q.gart.va + WPTR_OFFSET, 8).cast("Q")[0]
  assert wptr > 0
  dev.session._stop_queue(q)
  m = mqd_of(q, dev)
  assert m.cp_hqd_active == 0
  assert (m.cp_hqd_pq_wptr_hi << 32) | m.cp_hqd_pq_wptr_lo == wptr
  assert m.cp_hqd_pq_rptr == wptr % (q.ring.size // 4)                  # everything ran: the read pointer caught up
  dev.session._queues.remove(q)


def reactivate(dev, q):
  r = dev.session.am.gc_regs
  r.write("GRBM_GFX_CNTL", MEID=1, PIPEID=0, QUEUEID=0)
  try: r.write("CP_HQD_ACTIVE", ACTIVE=1)
  finally: r.write("GRBM_GFX_CNTL", 0)


def test_a_corrupted_mqd_field_is_named_by_the_cp(dev):
  q = compute_queue(dev)
  dev.session._stop_queue(q)
  reactivate(dev, q)                     # the MQD as the dequeue left it maps the queue again
  dev.session._stop_queue(q)
  m = mqd_of(q, dev)
  m.cp_hqd_pq_base_lo ^= 0x10            # the ring moved in the MQD, not in the HQD
  dev.session.am.vram.write(q.mqd.vram.offset, bytes(m))
  with pytest.raises(DeviceError, match=r"HQD me 1 pipe 0 queue 0: MQD at 0x[0-9a-f]+ has cp_hqd_pq_base_lo = "):
    reactivate(dev, q)
  dev.session.am.gc_regs.write("CP_MQD_BASE_ADDR", 0)
  dev.session.am.gc_regs.write("CP_MQD_BASE_ADDR_HI", 0)
  with pytest.raises(DeviceError, match=r"activated without an MQD \(CP_MQD_BASE_ADDR is 0\)"): reactivate(dev, q)
  dev.session._queues.remove(q)


def test_the_hqd_part_of_the_mqd_is_the_register_block():
  """Each field of the MQD's HQD part sits where its register sits after CP_MQD_BASE_ADDR (the pairing load_hqd uses)."""
  base = mqdmod.GC.REGS["CP_MQD_BASE_ADDR"].offset
  pairs = dict(mqdmod.HQD_REGISTERS)
  assert pairs["cp_hqd_pq_base_lo"] == "CP_HQD_PQ_BASE" and pairs["cp_hqd_eop_control"] == "CP_HQD_EOP_CONTROL"
  assert pairs["cp_mqd_control"] == "CP_MQD_CONTROL" and pairs["cp_hqd_pq_wptr_hi"] == "CP_HQD_PQ_WPTR_HI"
  for field, reg in mqdmod.HQD_REGISTERS:
    assert (getattr(MQD, field).offset - MQD.cp_mqd_base_addr_lo.offset) // 4 == mqdmod.GC.REGS[reg].offset - base


def test_the_mqd_written_through_the_bar_is_flushed_before_the_hqd_is_loaded(fw_dir, monkeypatch):
  """The MQD lives in VRAM and the CPU writes it through the VRAM BAR: those writes sit in HDP until it is flushed,
  so the flush comes after the MQD is filled and before the HQD that makes the CP use it is loaded."""
  from hcq.drivers.amd.am.nbio import NBIO
  events = []
  build, load, flush = mqdmod.compute_mqd, mqdmod.load_hqd, NBIO.hdp_flush
  monkeypatch.setattr(mqdmod, "compute_mqd", lambda *a, **k: events.append("mqd") or build(*a, **k))
  monkeypatch.setattr(mqdmod, "load_hqd", lambda *a, **k: events.append("load") or load(*a, **k))
  monkeypatch.setattr(NBIO, "hdp_flush", lambda self: events.append("flush") or flush(self))
  d = hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir))
  try:
    i = events.index("mqd")
    assert "flush" in events[i:events.index("load", i)], events[i:]
  finally: d.close()
