"""Issue 35: the mock Thor2 accepts what real Thor2 accepts and refuses what it refuses, for layouts other than our
driver's default: the context-init byte, static WQE mode, an MSN table outside the SQ page list, completion order,
unmodelled WQE types. Driven by our own driver variants (variants.py)."""
import json
import subprocess
import sys

import pytest

from hcq.autogen import bnxt as hsi
from hcq.drivers.bnxt.qp import BNXTQP, CompletionError
from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import read_pcap

from .harness import open_dev
from .oracles import tshark_rows
from .variants import PAGE, RefLayoutDev, RefLayoutQP, SendRecvQP, StaticQP, open_variant, ring, write_wqe

OK, FLUSHED = hsi.CQ_REQ_STATUS_OK, hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR


def pattern(n, seed=0):
  return bytes(((i * 37 + seed * 11 + (i >> 7)) & 0xFF) for i in range(n))


def buffers(dev, size=8192):
  src, dst = dev.alloc(size), dev.alloc(size)
  return src, dst, dev.register_mr(src), dev.register_mr(dst)


def statuses(qp, n):
  return [qp.poll_cq(2.0, f"CQE {i}").status for i in range(n)]


def warnings(nic):
  return [m for m in nic.messages if m.startswith("WARNING func_backing_store_cfg_v2")]


# ---------------------------------------------------------------- 1. the context-init byte
def test_ctx_init_at_offset_bytes_is_accepted_and_warned_once_per_type(mock):
  os, nic = mock(seed=1)
  dev = open_variant(os, nic, RefLayoutDev)
  assert nic.errors == [] and nic.fw.bs_done
  w = warnings(nic)
  # the mock's QP (offset 2) and CQ (offset 1) types ask for an init byte; each is named once, with the entry
  assert len(w) == 2, w
  assert "type 0 (QP) instance 0: entry 0 lacks the context init value 0xff at byte 8" in w[0]
  assert "it is at byte 2 (ctx_init_offset read as bytes)" in w[0]
  assert "type 2 (CQ)" in w[1] and "at byte 4" in w[1]
  dev.close()
  open_variant(os, nic, RefLayoutDev)      # a second bring-up configures the backing store again: no new warning
  assert len(warnings(nic)) == 2 and nic.errors == []


def test_ctx_init_as_linux_writes_it_draws_no_warning(mock):
  os, nic = mock(seed=1)
  open_dev(os, nic)
  assert warnings(nic) == [] and nic.errors == []


# ---------------------------------------------------------------- 2. static WQE mode, as Linux's qplib lays it out
def test_static_mode_as_linux_lays_it_out_wraps_without_errors(mock):
  """128-byte WQEs, doorbell index in WQEs, MSN start_idx in slots (8 per WQE); 40 writes wrap a 32-WQE SQ."""
  os, nic = mock(seed=2)
  dev = open_dev(os, nic)
  a, b = StaticQP(dev, sq_wqes=32), BNXTQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  for i in range(40):
    data = pattern(100 + i, i)
    src.write(0, data)
    a.rdma_write(dst.va + 128 * i, rk, src.va, lk, len(data))
    assert dst.read(128 * i, len(data)) == data
  assert a.sq_prod.index == 40 and a.sq_prod.epoch == 1
  assert nic.fw.qps[a.qpn].sq_cons == 40 and not nic.fw.qps[a.qpn].variable
  assert nic.errors == []


def test_static_mode_takes_the_doorbell_index_in_wqes(mock):
  """The reference layout's doorbell index 3 (slots) names three 128-byte WQEs: WQE 0 is the WRITE, WQEs 1 and 2
  are zeros. The WRITE completes first; then WQE 1 fails (wqe_size 0, type 0 SEND) and WQE 2 is flushed."""
  os, nic = mock(seed=3)
  dev = open_dev(os, nic)        # our driver's bring-up: only the QP layout differs
  a, b = RefLayoutQP(dev), BNXTQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  src.write(0, pattern(300))
  a.rdma_write(dst.va, rk, src.va, lk, 300)             # raises unless its own CQE comes first and is OK
  assert dst.read(0, 300) == pattern(300)
  assert statuses(a, 2) == [hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR, FLUSHED]
  assert any("WQE 1 (SQ byte 128) (SEND): wqe_size 0 slots" in m for m in nic.messages)
  qp = nic.fw.qps[a.qpn]
  assert (qp.state, qp.sq_prod, qp.sq_cons) == ("ERR", 3, 3)
  assert nic.errors == []


# ---------------------------------------------------------------- completion order
def test_completions_are_in_order_then_error_and_flush(mock):
  """WRITE, WRITE with an unregistered lkey, WRITE under one doorbell: OK, the local error, then a flush; the first
  WRITE's data arrives, the third's does not."""
  os, nic = mock(seed=4)
  dev = open_dev(os, nic)
  a, b = BNXTQP(dev), BNXTQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  src.write(0, pattern(5000))
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, dst.va, rk, src.va, lk, 5000)
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, dst.va, rk, src.va, lk ^ 0x5500, 64)
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, dst.va + 6000, rk, src.va, lk, 64)
  ring(a)
  assert statuses(a, 3) == [OK, hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR, FLUSHED]
  assert dst.read(0, 5000) == pattern(5000) and dst.read(6000, 64) == bytes(64)
  assert nic.fw.qps[a.qpn].state == "ERR"
  # a later post to the QP in error is flushed
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_WRITE_WQE, dst.va, rk, src.va, lk, 8)
  ring(a)
  assert statuses(a, 1) == [FLUSHED]
  assert nic.errors == []


def pair(dev, cls=BNXTQP, **kw):
  a, b = cls(dev, **kw), cls(dev, **kw)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  return a, b


def test_unmodelled_wqe_type_is_refused_naming_its_type(mock):
  os, nic = mock(seed=5)
  dev = open_dev(os, nic)
  a, b = pair(dev)
  src, dst, lk, rk = buffers(dev)
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_READ_WQE, dst.va, rk, src.va, lk, 16)
  ring(a)
  assert statuses(a, 1) == [hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR]
  assert any("WQE type 0x6 (READ_WQE) is not modelled; the mock executes WRITE_WQE (0x4) and SEND (0x0) only" in m
             for m in nic.messages)
  assert nic.phy.stats["tx"] == 0


# ---------------------------------------------------------------- SEND and RECV, as bnxt_re posts them
@pytest.mark.tools("tshark")
def test_send_scatters_into_the_recv_sges_and_completes_on_both_sides(mock, tmp_path):
  pcap = str(tmp_path / "send.pcap")
  os, nic = mock(seed=20, pcap=pcap)
  dev = open_dev(os, nic)
  a, b = pair(dev, SendRecvQP)
  src, dst, lk, dk = buffers(dev)
  dst2 = dev.alloc(4096)
  dk2 = dev.register_mr(dst2)
  data = pattern(5000, 3)
  src.write(0, data)
  b.post_recv([(dst.va + 100, dk, 4000), (dst2.va, dk2, 4096)], wr_id=0x1234)
  a.post_send(src.va, lk, len(data))
  assert statuses(a, 1) == [OK]
  cqe = b.poll_recv(2.0)
  assert (cqe.status, cqe.length, cqe.srq_or_rq_wr_id, cqe.qp_handle) == (0, 5000, 0x1234, b.handle)
  assert cqe.cqe_type_toggle & hsi.CQ_RES_RC_CQE_TYPE_MASK == hsi.CQ_RES_RC_CQE_TYPE_RES_RC
  assert dst.read(100, 4000) == data[:4000] and dst2.read(0, 1000) == data[4000:]
  assert dst.read(0, 100) == bytes(100) and dst2.read(1000, 100) == bytes(100)
  nic.phy.pcap.close()
  rows = tshark_rows(pcap)
  assert [r["bth.opcode"] for r in rows] == [fr.RC_SEND_FIRST] + [fr.RC_SEND_MIDDLE] * 3 + [fr.RC_SEND_LAST,
                                                                                          fr.RC_ACKNOWLEDGE]
  assert all(r["reth.va"] is None for r in rows) and all(fr.check_icrc(f) for f in read_pcap(pcap))
  assert nic.errors == []


def test_send_before_its_recv_is_rnr_nakked_then_delivered(mock):
  os, nic = mock(seed=21)
  dev = open_dev(os, nic)
  a, b = pair(dev, SendRecvQP)
  src, dst, lk, dk = buffers(dev)
  src.write(0, pattern(64))
  a.post_send(src.va, lk, 64)
  deadline = 200
  while not any("RNR NAK" in m for m in nic.messages) and deadline:
    os.sleep(0.005)
    deadline -= 1
  assert any("finds no RECV WQE posted: RNR NAK" in m for m in nic.messages)
  b.post_recv([(dst.va, dk, 64)], wr_id=5)
  assert statuses(a, 1) == [OK]
  assert b.poll_recv(2.0).srq_or_rq_wr_id == 5 and dst.read(0, 64) == pattern(64)
  assert nic.errors == []


def test_send_without_recv_exhausts_the_rnr_retry_count(mock):
  os, nic = mock(seed=22)
  dev = open_dev(os, nic)
  a, b = pair(dev, SendRecvQP, rnr_retry=2)
  src, dst, lk, dk = buffers(dev)
  a.post_send(src.va, lk, 64)
  assert statuses(a, 1) == [hsi.CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR]
  assert sum("RNR NAK at PSN" in m for m in nic.messages) == 2 and nic.fw.qps[a.qpn].state == "ERR"


def test_send_longer_than_its_recv_fails_both_sides(mock):
  os, nic = mock(seed=23)
  dev = open_dev(os, nic)
  a, b = pair(dev, SendRecvQP)
  src, dst, lk, dk = buffers(dev)
  b.post_recv([(dst.va, dk, 100)], wr_id=9)
  b.post_recv([(dst.va + 200, dk, 100)], wr_id=10)
  a.post_send(src.va, lk, 200)
  assert statuses(a, 1) == [hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR]
  # the responder's RECV fails, the QP enters the error state and flushes the RECV after it, then a later one
  cqes = [b.poll_recv(2.0) for _ in range(2)]
  assert [(c.status, c.srq_or_rq_wr_id) for c in cqes] == [(hsi.CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR, 9),
                                                           (hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR, 10)]
  b.post_recv([(dst.va, dk, 100)], wr_id=11)
  c = b.poll_recv(2.0)
  assert (c.status, c.srq_or_rq_wr_id) == (hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR, 11)
  assert dst.read(0, 300) == bytes(300) and nic.fw.qps[b.qpn].state == "ERR"


def test_send_to_a_qp_without_a_receive_queue_is_an_invalid_request(mock):
  os, nic = mock(seed=24)
  dev = open_dev(os, nic)
  a, b = pair(dev)
  src, dst, lk, rk = buffers(dev)
  write_wqe(a, hsi.SQ_BASE_WQE_TYPE_SEND, 0, 0, src.va, lk, 16)
  ring(a)
  assert statuses(a, 1) == [hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR]
  assert any("which has no receive queue" in m for m in nic.messages)


# ---------------------------------------------------------------- 3. the MSN table outside the SQ page list
def test_msn_table_outside_the_page_list_faults_only_on_retransmission(mock):
  os, nic = mock(seed=6, faults="drop=1")
  dev = open_dev(os, nic)        # our driver's bring-up: only the QP layout differs
  a, b = RefLayoutQP(dev, timeout=10, retry_cnt=3), BNXTQP(dev)     # 4 ms ACK timer
  assert nic.errors == [] and a.qpn in nic.fw.qps                       # CREATE_QP accepted
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  with pytest.raises(CompletionError, match="LOCAL_PROTECTION"): a.rdma_write(dst.va, rk, src.va, lk, 64)
  want = a.sq.paddrs[0] + PAGE      # level 0: the table's address runs on from the one described page
  assert len(nic.errors) == 1 and f"fault reading MSN table entry 0 at {want:#x}" in nic.errors[0], nic.errors
  assert "level 0" in nic.errors[0]
  assert dst.read(0, 64) == bytes(64)


def test_msn_table_outside_the_page_list_is_never_read_without_loss(mock):
  os, nic = mock(seed=7)
  dev = open_dev(os, nic)        # our driver's bring-up: only the QP layout differs
  a, b = RefLayoutQP(dev), BNXTQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  a.sq.write(PAGE, b"\xee" * 64)      # whatever lies there: the requester does not read it
  src.write(0, pattern(64))
  a.rdma_write(dst.va, rk, src.va, lk, 64)
  assert dst.read(0, 64) == pattern(64) and nic.errors == []


# ---------------------------------------------------------------- the reference layout on the wire
@pytest.mark.tools("tshark")
def test_reference_layout_phy_loopback_pcap(mock, tmp_path):
  pcap = str(tmp_path / "ref.pcap")
  os, nic = mock(seed=8, pcap=pcap)
  dev = open_variant(os, nic, RefLayoutDev)
  a, b = RefLayoutQP(dev), RefLayoutQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  data = pattern(2500, 9)
  src.write(0, data)
  a.rdma_write(dst.va + 16, rk, src.va, lk, len(data))
  assert dst.read(16, len(data)) == data
  nic.phy.pcap.close()
  rows = tshark_rows(pcap)
  assert [r["bth.opcode"] for r in rows] == [fr.RC_RDMA_WRITE_FIRST, fr.RC_RDMA_WRITE_MIDDLE, fr.RC_RDMA_WRITE_LAST,
                                            fr.RC_ACKNOWLEDGE]
  assert (rows[0]["reth.va"], rows[0]["reth.r_key"], rows[0]["reth.dmalen"]) == (dst.va + 16, rk, len(data))
  assert [r["bth.destqp"] for r in rows] == [b.qpn] * 3 + [a.qpn]
  assert all(fr.check_icrc(f) for f in read_pcap(pcap))
  assert nic.errors == []


@pytest.mark.tools("tshark")
def test_reference_layout_two_processes_on_the_udp_wire(mock, tmp_path):
  pcap = str(tmp_path / "a.pcap")
  os, nic = mock(seed=10, pcap=pcap, mac=bytes.fromhex("020000000001"))
  dev = open_variant(os, nic, RefLayoutDev, ip="10.0.200.5")
  qp = RefLayoutQP(dev)
  src, _, lk, _ = buffers(dev)
  child = subprocess.Popen([sys.executable, "-m", "hcq.tests.bnxt.refpeer"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    def ask(obj=None):
      if obj is not None:
        child.stdin.write(json.dumps(obj) + "\n")
        child.stdin.flush()
      line = child.stdout.readline()
      assert line, f"the peer process exited: {child.stderr.read()}"
      return json.loads(line)

    peer = ask()
    dev.wire_connect(peer["wire"])
    qp.connect(peer["qpn"], bytes.fromhex(peer["gid"]), bytes.fromhex(peer["mac"]))
    assert ask({"qpn": qp.qpn, "gid": dev.gid.hex(), "mac": dev.mac.hex(), "wire": dev.wire_endpoint()})["ready"]
    data = pattern(3000, 4)
    src.write(0, data)
    qp.rdma_write(peer["va"], peer["rkey"], src.va, lk, len(data))
    got = ask({"read": len(data)})
    assert bytes.fromhex(got["data"]) == data
    assert got["errors"] == []
    ask_quit = json.dumps({"quit": True}) + "\n"
    child.stdin.write(ask_quit)
    child.stdin.flush()
    assert child.wait(timeout=30) == 0
  finally:
    if child.poll() is None: child.kill()
    child.wait()
  nic.phy.pcap.close()
  rows = tshark_rows(pcap)
  assert [r["bth.opcode"] for r in rows] == [fr.RC_RDMA_WRITE_FIRST, fr.RC_RDMA_WRITE_MIDDLE, fr.RC_RDMA_WRITE_LAST,
                                            fr.RC_ACKNOWLEDGE]
  assert (rows[0]["ip.src"], rows[0]["ip.dst"]) == ("10.0.200.5", "10.0.200.6")
  assert (rows[0]["reth.va"], rows[0]["reth.r_key"], rows[0]["reth.dmalen"]) == (peer["va"], peer["rkey"], len(data))
  assert rows[3]["bth.destqp"] == qp.qpn and rows[3]["aeth.syndrome"] == 0x1f
  assert all(fr.check_icrc(f) for f in read_pcap(pcap))
  assert nic.errors == []


def test_static_mode_retransmission_reads_the_msn_table_in_slots(mock):
  """A dropped packet: the requester finds the WQE through the MSN entry (start_idx 8 per static WQE) and resends."""
  os, nic = mock(seed=30, faults="drop=3")
  dev = open_dev(os, nic)
  a, b = StaticQP(dev, sq_wqes=32, timeout=10), BNXTQP(dev)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst, lk, rk = buffers(dev)
  for i in range(3):
    src.write(0, pattern(64, i))
    a.rdma_write(dst.va + 64 * i, rk, src.va, lk, 64)
    assert dst.read(64 * i, 64) == pattern(64, i)
  assert nic.phy.stats["fault_dropped"] == 1 and any("retransmission 1/" in m for m in nic.messages)
  assert nic.errors == []


def test_modify_qp_to_error_flushes_the_posted_recvs(mock):
  os, nic = mock(seed=31)
  dev = open_dev(os, nic)
  a, b = pair(dev, SendRecvQP)
  src, dst, lk, dk = buffers(dev)
  b.post_recv([(dst.va, dk, 64)], wr_id=1)
  b.post_recv([(dst.va + 64, dk, 64)], wr_id=2)
  b._modify("ERR", hsi.CMDQ_MODIFY_QP_MODIFY_MASK_STATE)
  got = [b.poll_recv(2.0) for _ in range(2)]
  assert [(c.status, c.srq_or_rq_wr_id) for c in got] == [(hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR, 1),
                                                          (hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR, 2)]
  assert nic.errors == []
