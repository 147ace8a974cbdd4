"""BNXTDev/BNXTQP on the mock Thor2: bring-up, RDMA WRITE in PHY loopback, error completions, timeouts, and the
driver bugs the mock reports."""
import os as pyos

import pytest

from hcq.drivers.bnxt import rcfw as rcfw_mod
from hcq.drivers.bnxt.doorbell import SQ
from hcq.drivers.bnxt.qp import BNXTQP, CompletionError
from hcq.errors import DeviceError, Timeout
from hcq.mockgpu.bnxt.pcap import read_pcap
from hcq.mockgpu.bnxt import frames as fr

from .harness import open_dev
from .oracles import tshark_rows




def loopback_pair(dev, pmtu=1024, **kw):
  a, b = BNXTQP(dev, pmtu=pmtu, **kw), BNXTQP(dev, pmtu=pmtu, **kw)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  return a, b


def pattern(n, seed=0):
  return bytes(((i * 131 + seed * 7 + (i >> 8)) & 0xFF) for i in range(n))


def test_bringup(mock):
  os, nic = mock(seed=3)
  dev = open_dev(os, nic)
  assert dev.mac == nic.mac and dev.db_off == 0x10000 and dev.chip_num == 0x1760
  assert dev.gid == bytes(10) + b"\xff\xff" + bytes([10, 0, 200, 5])
  # the GID table entry decodes to ::ffff:10.0.200.5 (add_gid's byte-reversed words) with the port MAC
  assert nic.fw.gids[dev.gid_index] == (dev.gid, nic.mac)
  assert nic.fw.bs_done and nic.fw.fw_initialized and nic.fw.rx_steered(nic.mac)
  assert nic.errors == []


@pytest.mark.parametrize("size,pmtu", [(1, 1024), (4096, 1024), (4096, 4096), (25, 4096), (4099, 1024)])
def test_loopback_write_sizes(mock, size, pmtu):
  os, nic = mock(seed=size)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, pmtu)
  src, dst = dev.alloc(size), dev.alloc(size)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  data = pattern(size, 1)
  src.write(0, data)
  a.rdma_write(dst.va, rk, src.va, lk, size)
  assert dst.read(0, size) == data
  assert dst.read(size, dst.size - size) == bytes(dst.size - size)
  assert nic.errors == [] and nic.engine.drops == {}


@pytest.mark.parametrize("pmtu", [1024, 4096])
def test_loopback_1mib(mock, pmtu):
  os, nic = mock(seed=pmtu)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, pmtu)
  size = 1 << 20
  src, dst = dev.alloc(size), dev.alloc(size)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  data = pyos.urandom(size)
  src.write(0, data)
  a.rdma_write(dst.va, rk, src.va, lk, size, timeout_s=60)
  assert dst.read(0, size) == data
  assert nic.phy.stats["tx"] >= size // pmtu + 1     # every packet went over the wire, plus the ACK
  assert nic.errors == []


def test_several_writes_wrap_queues(mock):
  """More WQEs than the CQ has entries and more slots than the SQ has: epochs and toggles flip correctly."""
  os, nic = mock(seed=9)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  for i in range(100):
    data = pattern(64, i)
    src.write(0, data)
    a.rdma_write(dst.va + 64 * (i % 64), rk, src.va, lk, 64)
    assert dst.read(64 * (i % 64), 64) == data
  assert nic.errors == []


@pytest.mark.tools("tshark")
def test_loopback_pcap_one_only_and_one_ack(mock, tmp_path):
  pcap = str(tmp_path / "lo.pcap")
  os, nic = mock(seed=5, pcap=pcap)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, b"x" * 25)
  a.rdma_write(dst.va + 8, rk, src.va, lk, 25)
  nic.phy.pcap.close()
  rows = tshark_rows(pcap)
  assert [r["bth.opcode"] for r in rows] == [fr.RC_RDMA_WRITE_ONLY, fr.RC_ACKNOWLEDGE]
  assert rows[0]["bth.destqp"] == b.qpn and rows[1]["bth.destqp"] == a.qpn
  assert (rows[0]["reth.va"], rows[0]["reth.r_key"], rows[0]["reth.dmalen"]) == (dst.va + 8, rk, 25)
  assert rows[0]["bth.padcnt"] == 3 and rows[1]["aeth.syndrome"] == 0x1f and rows[1]["aeth.msn"] == 1
  assert all(fr.check_icrc(f) for f in read_pcap(pcap))


def test_bad_rkey_is_remote_access_error_and_writes_nothing(mock, tmp_path):
  pcap = str(tmp_path / "nak.pcap")
  os, nic = mock(seed=7, pcap=pcap)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(8192), dev.alloc(8192)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, pattern(8192))
  with pytest.raises(CompletionError, match="REMOTE_ACCESS") as e:
    a.rdma_write(dst.va, rk ^ 0x00ABCD00, src.va, lk, 3000)
  assert e.value.status == 7 and e.value.status_name == "REMOTE_ACCESS_ERR"
  assert dst.read(0, dst.size) == bytes(dst.size)
  naks = [fr.parse(f) for f in read_pcap(pcap) if fr.parse(f).opcode == fr.RC_ACKNOWLEDGE]
  assert [n.aeth.syndrome for n in naks] == [fr.AETH_NAK_REMOTE_ACCESS]
  # the QP is in error now: the driver refuses further posts
  with pytest.raises(DeviceError, match="not RTS"): a.rdma_write(dst.va, rk, src.va, lk, 8)
  # out of bounds on a valid key is the same error
  c, d = loopback_pair(dev)
  with pytest.raises(CompletionError, match="REMOTE_ACCESS"): c.rdma_write(dst.va + 4096, rk, src.va, lk, 8192)
  assert dst.read(0, dst.size) == bytes(dst.size)


def test_qp_not_in_rts_is_refused(mock):
  os, nic = mock(seed=11)
  dev = open_dev(os, nic)
  qp = BNXTQP(dev)
  buf = dev.alloc(4096)
  key = dev.register_mr(buf)
  with pytest.raises(DeviceError, match="INIT, not RTS"): qp.rdma_write(buf.va, key, buf.va, key, 16)
  # a driver that rings the SQ doorbell anyway: the NIC refuses and says so
  dev.ring_db(qp.qpn, SQ, 3, 0)
  assert any("posting needs RTS" in e for e in nic.errors)


def test_hwrm_timeout_names_the_command(mock):
  os, nic = mock(seed=2, silent_hwrm={"func_qcfg"}, timeout_s=0.3)
  with pytest.raises(Timeout, match="HWRM func_qcfg") as e: open_dev(os, nic)
  assert "req_type 0x16" in str(e.value)


def test_hwrm_without_bus_master_times_out(mock):
  os, nic = mock(seed=2, timeout_s=0.3)
  from hcq.drivers.bnxt import device
  orig = device.PCI_COMMAND_MASTER
  device.PCI_COMMAND_MASTER = 0
  try:
    with pytest.raises(Timeout, match="HWRM ver_get"): open_dev(os, nic)
  finally:
    device.PCI_COMMAND_MASTER = orig
  assert any("bus mastering off" in e for e in nic.errors)


def test_dropped_frame_is_retransmitted(mock):
  os, nic = mock(seed=13, faults="drop=2")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  data = pattern(4096, 3)
  src.write(0, data)
  a.rdma_write(dst.va, rk, src.va, lk, 4096)
  assert dst.read(0, 4096) == data
  assert nic.phy.stats["fault_dropped"] == 1
  assert any("retransmission" in m for m in nic.messages)
  assert nic.errors == []


def test_corrupted_frame_fails_icrc_and_is_recovered(mock):
  os, nic = mock(seed=14, faults="corrupt=1")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, pattern(100))
  a.rdma_write(dst.va, rk, src.va, lk, 100)
  assert dst.read(0, 100) == pattern(100)
  assert nic.engine.drops.get("bad_icrc") == 1


def test_dropped_frame_without_retries_ends_in_retry_error(mock):
  os, nic = mock(seed=15, faults="drop=1+2+3+4+5")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, timeout=10, retry_cnt=2)     # 4 ms ACK timer, 2 retries
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  with pytest.raises(CompletionError, match="TRANSPORT_RETRY_CNT"): a.rdma_write(dst.va, rk, src.va, lk, 64)


def test_dropped_frame_without_timer_is_a_driver_timeout(mock):
  os, nic = mock(seed=16, faults="drop=1")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, timeout=0, retry_cnt=0)       # no ACK timer, no retries
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  with pytest.raises(Timeout, match="completion of RDMA WRITE"): a.rdma_write(dst.va, rk, src.va, lk, 64, timeout_s=0.5)


def test_mock_reports_wrong_doorbell_epoch(mock):
  os, nic = mock(seed=17)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  dev.ring_db(a.qpn, SQ, 3, 1)     # first pass: epoch must be 0
  assert any("epoch" in e for e in nic.errors)
  dev.ring_db(a.qpn, SQ, 9999, 0)
  assert any("beyond the ring depth" in e for e in nic.errors)


def test_mock_reports_missing_first_command_flag(mock, monkeypatch):
  os, nic = mock(seed=18, timeout_s=0.3)
  orig = rcfw_mod.RCFWChannel.start
  def start_without_first_flag(self):
    orig(self)
    self.first = False
  monkeypatch.setattr(rcfw_mod.RCFWChannel, "start", start_without_first_flag)
  with pytest.raises(Timeout, match="RCFW initialize_fw"): open_dev(os, nic)
  assert any("FIRMWARE_FIRST_FLAG" in e for e in nic.errors)


def test_mock_reports_credits_never_returned(mock):
  os, nic = mock(seed=19, timeout_s=0.3)
  dev = open_dev(os, nic)
  dev.rcfw.ring_db = lambda *a: None      # a driver that never hands CREQ entries back
  buf = dev.alloc(4096)
  with pytest.raises(Timeout, match="RCFW register_mr"):
    for _ in range(40): dev.register_mr(buf)
  assert any("did not return credits" in e for e in nic.errors)


def test_hcq_open_mock_bnxt():
  import hcq
  from hcq.config import Config
  dev = hcq.open("MOCK+BNXT", config=Config(timeout_s=5.0))
  try:
    assert type(dev).__name__ == "BNXTDev" and dev.pci.addr == "0000:41:00.0" and dev.chip_num == 0x1760
    assert dev.mac == bytes.fromhex("020000000001")
  finally:
    dev.close()
    dev.os.close()


def test_async_firmware_and_interleaved_creq_events(mock):
  """Firmware answering late (body, header, valid byte in that order) and async CREQ events between responses."""
  os, nic = mock(seed=21, async_fw=True, async_creq=True)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, pattern(4096, 5))
  a.rdma_write(dst.va, rk, src.va, lk, 4096)
  assert dst.read(0, 4096) == pattern(4096, 5)
  assert nic.errors == []


def test_reordered_frame_recovers(mock):
  os, nic = mock(seed=22, faults="reorder=2")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(8192), dev.alloc(8192)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, pattern(8192, 6))
  a.rdma_write(dst.va, rk, src.va, lk, 8192)
  assert dst.read(0, 8192) == pattern(8192, 6)
  assert nic.phy.stats["fault_reordered"] == 1 and nic.errors == []


def test_level2_memory_region(mock):
  """3 MiB = 768 pages: the MR's page table needs two levels."""
  os, nic = mock(seed=23)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, pmtu=4096)
  size = 3 << 20
  src, dst = dev.alloc(size), dev.alloc(size)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  assert dev._keep[-1].level == 2
  data = pyos.urandom(size)
  src.write(0, data)
  a.rdma_write(dst.va, rk, src.va, lk, size, timeout_s=60)
  assert dst.read(0, size) == data
  assert nic.errors == []


def test_mock_reports_wrong_msn_entry_and_split_doorbell(mock):
  os, nic = mock(seed=24)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  a.msn = 5            # the driver's MSN counter drifts from the WQE count: the entry lands in the wrong slot
  a.rdma_write(dst.va, rk, src.va, lk, 64)
  assert any("MSN table entry 0" in e for e in nic.errors)
  nic.errors.clear()
  dev.bar2.write32(dev.db_off, 0)    # half a doorbell
  assert any("one 64-bit store" in e for e in nic.errors)
  nic.errors.clear()
  dev.bar2.write64(dev.db_off + 8, 0)
  assert any("expected db_off" in e for e in nic.errors)


def test_without_phy_loopback_frames_leave_the_port(mock):
  """With lpbk NONE and no peer the frames go to 'the switch': the write cannot complete (so the loopback tests
  show that port_phy_cfg really turned loopback on)."""
  os, nic = mock(seed=25)
  dev = open_dev(os, nic)
  a, b = BNXTQP(dev, timeout=10, retry_cnt=1), BNXTQP(dev, timeout=10, retry_cnt=1)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, b"z" * 64)
  with pytest.raises(CompletionError, match="TRANSPORT_RETRY_CNT"): a.rdma_write(dst.va, rk, src.va, lk, 64)
  assert nic.phy.stats["tx_dropped_no_link"] == 2 and dst.read(0, 64) == bytes(64)
  dev.set_loopback(True)
  assert nic.phy.loopback
  dev.set_loopback(False)
  assert not nic.phy.loopback


def test_dropped_ack_is_recovered_by_the_ack_timer(mock):
  os, nic = mock(seed=26, faults="drop=2")       # frame 1 is the WRITE ONLY, frame 2 its ACK
  dev = open_dev(os, nic)
  # the ACK timer runs on the wall clock: 4.096 us << 14 = 67 ms and 7 retries, so that a loaded machine's slow
  # retransmission is not taken for a lost one (the recovery is what is checked, not its speed)
  a, b = loopback_pair(dev, timeout=14, retry_cnt=7)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  src.write(0, pattern(64, 8))
  a.rdma_write(dst.va, rk, src.va, lk, 64)
  assert dst.read(0, 64) == pattern(64, 8)
  assert any("ACK timeout" in m for m in nic.messages) and nic.errors == []


def test_one_driver_per_function(mock):
  os, nic = mock(seed=27)
  dev = open_dev(os, nic)
  with pytest.raises(DeviceError, match="in use"): open_dev(os, nic)
  assert os.held_locks() == [f"{os.config.lock_dir}/bnxt_{nic.addr}.lock"]
  dev.close()
  assert os.held_locks() == [] and nic.fw.qps == {}     # close reset the function
  open_dev(os, nic).close()


def test_a_failing_ack_timer_is_reported(mock):
  os, nic = mock(seed=18, faults="drop=1")
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, timeout=10, retry_cnt=3)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  def broken(*args): raise RuntimeError("model bug")
  nic.engine._retransmit = broken
  with pytest.raises(Timeout, match="completion of RDMA WRITE"): a.rdma_write(dst.va, rk, src.va, lk, 64, timeout_s=0.5)
  assert any("ACK timer failed: RuntimeError: model bug" in e for e in nic.errors)
  assert nic.engine._timer.is_alive()   # and it keeps ticking


def test_a_reset_that_fails_at_close_still_gives_the_device_back(mock, monkeypatch):
  """close() runs once: when the function's reset fails, the error is raised, the lock is released all the same (the
  next driver can open the function) and the DMA memory stays allocated (the function may still write to it)."""
  os, nic = mock(seed=28)
  dev = open_dev(os, nic)
  kept = list(dev._keep)
  real = dev.hwrm.call
  def call(name, **kw):
    if name == "func_reset": raise Timeout("func_reset completion", timeout_s=0.1)
    return real(name, **kw)
  monkeypatch.setattr(dev.hwrm, "call", call)
  with pytest.raises(Timeout): dev.close()
  assert os.held_locks() == [] and dev.closed and dev._keep == kept
  monkeypatch.undo()
  open_dev(os, nic).close()


def test_a_dma_fault_reading_a_message_fails_it_once(mock, monkeypatch):
  """The mock reads a message's bytes when it sends them: a DMA fault there completes that write with a local
  protection error and puts the QP in the error state, once (it used to repeat every 5 ms without completing)."""
  from hcq.errors import GPUFault
  os, nic = mock(seed=29)
  dev = open_dev(os, nic)
  a, b = loopback_pair(dev, timeout=12, retry_cnt=3)
  src, dst = dev.alloc(4096), dev.alloc(4096)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  real = nic.dma_read
  def faulty(pa, n):
    if pa == src.paddrs[0]: raise GPUFault("unmapped", address=pa, kind="page fault")
    return real(pa, n)
  monkeypatch.setattr(nic, "dma_read", faulty)
  with pytest.raises(CompletionError, match="LOCAL_PROTECTION"): a.rdma_write(dst.va, rk, src.va, lk, 64)
  import time
  time.sleep(0.05)                           # the transmit thread would have repeated it by now
  assert len([e for e in nic.errors if "DMA fault reading a message" in e]) == 1
