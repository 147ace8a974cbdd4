"""The mock NIC's RoCE data path: the requester (SQ doorbell -> WQEs -> RDMA WRITE frames; ACK/NAK -> CQEs; an ACK
timer with go-back-N retransmission) and the responder (PSN, QP state, rkey, access and bounds checks; DMA into the
MR; ACK or NAK). Rules: reference bnxt_roce.md §2.5 and §3.6; formats: roce_hsi.h via the generated bindings.
"""
from __future__ import annotations

import ctypes
import struct
import threading
import time

from ...autogen import bnxt as hsi
from . import frames as fr
from .state import PSN_MASK, QP, Outstanding

NAK_TO_STATUS = {fr.AETH_NAK_INVALID_REQ: hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR,
                 fr.AETH_NAK_REMOTE_ACCESS: hsi.CQ_REQ_STATUS_REMOTE_ACCESS_ERR,
                 fr.AETH_NAK_REMOTE_OP: hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR}
MR_REMOTE_WRITE = hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE     # MR encoding (0x4)
QP_REMOTE_WRITE = hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE       # QP encoding (0x2): they differ (reference §1.12)
TIMER_TICK_S = 0.005


def psn_le(a: int, b: int) -> bool:
  """a <= b in 24-bit serial arithmetic."""
  return ((b - a) & PSN_MASK) < 0x800000


class LocalError(Exception):
  def __init__(self, status: int, msg: str):
    self.status = status
    super().__init__(msg)


class Engine:
  def __init__(self, nic):
    self.nic = nic
    self.drops: dict[str, int] = {}
    self.ip_id = 0
    self._stop = threading.Event()
    self._timer = threading.Thread(target=self._timer_loop, name=f"bnxt-{nic.addr}-timer", daemon=True)
    self._timer.start()

  @property
  def fw(self): return self.nic.fw

  def drop(self, reason: str, detail: str = "") -> None:
    self.drops[reason] = self.drops.get(reason, 0) + 1
    self.nic.log(f"RX drop ({reason}) {detail}")

  # ================================================================ requester
  def sq_doorbell(self, qpn: int, index: int, epoch: int) -> None:
    qp = self.fw.qps.get(qpn)
    if qp is None:
      self.nic.error(f"SQ doorbell for unknown QP {qpn:#x}")
      return
    oldest = min([qp.sq_cons] + [o.start_slot for o in qp.outstanding])
    new = self.nic.advance(f"SQ of QP {qpn:#x}", qp.sq_prod, qp.sq_depth, index, epoch, oldest + qp.sq_depth)
    if new is None: return
    qp.sq_prod = new
    if qp.state == "ERR":
      while qp.sq_cons < qp.sq_prod: self._flush_one(qp)
      return
    if qp.state != "RTS":
      self.nic.error(f"SQ doorbell on QP {qpn:#x} in state {qp.state}: posting needs RTS; WQEs not executed")
      qp.sq_cons = qp.sq_prod
      return
    while qp.sq_cons < qp.sq_prod and qp.state == "RTS":
      start = qp.sq_cons
      try: self._execute(qp)
      except LocalError as e:
        self.nic.log(f"QP {qpn:#x}: local error {e}")
        self.complete(qp, qp.sq_cons % qp.sq_depth, e.status)
        self._to_error(qp)
      if qp.sq_cons == start: break

  def _wqe_bytes(self, qp: QP, slot_abs: int, nslots: int) -> bytes:
    return b"".join(qp.sq.read(((slot_abs + i) % qp.sq_depth) * 16, 16) for i in range(nslots))

  def _execute(self, qp: QP) -> None:
    start = qp.sq_cons
    head = hsi.struct_sq_rdma_hdr.from_buffer_copy(self._wqe_bytes(qp, start, 2))
    size = head.wqe_size if qp.variable else 8
    if qp.variable and qp.sq_prod - start < head.wqe_size:
      qp.sq_cons = qp.sq_prod
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR, f"WQE of {head.wqe_size} slots beyond the producer")
    qp.sq_cons = start + (size if qp.variable else 1)
    if head.wqe_type != hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR, f"WQE type {head.wqe_type:#x} is not RDMA WRITE")
    if head.wqe_size < 3:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR, f"wqe_size {head.wqe_size} leaves no room for an SGE")
    raw = self._wqe_bytes(qp, start, head.wqe_size) if qp.variable else qp.sq.read((start % qp.sq_depth) * 128, 128)
    payload, total = b"", 0
    for i in range(head.wqe_size - 2):
      sge = hsi.struct_sq_sge.from_buffer_copy(raw[32 + 16 * i:48 + 16 * i])
      mr = self.fw.mrs.get(sge.l_key)
      if mr is None:
        raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR, f"SGE {i}: lkey {sge.l_key:#x} is not registered")
      if not (mr.va <= sge.va_or_pa and sge.va_or_pa + sge.size <= mr.va + mr.size):
        raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR,
                         f"SGE {i}: [{sge.va_or_pa:#x}, +{sge.size:#x}) is outside MR {mr.key:#x}")
      payload += mr.mem.read(sge.va_or_pa - mr.va, sge.size)
      total += sge.size
    if total != head.length:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR, f"SGEs hold {total} bytes, the WQE says {head.length}")
    segs = fr.segment(head.length, qp.pmtu)
    first = qp.sq_psn
    if qp.msn_entries:
      idx = qp.wqe_count % qp.msn_entries
      got = struct.unpack("<Q", qp.sq.read(qp.msn_off + idx * 8, 8))[0]
      want = ((start % qp.sq_depth) << hsi.SQ_MSN_SEARCH_START_IDX_SFT) | \
             (((first + len(segs)) & PSN_MASK) << hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT) | first
      if got != want:
        self.nic.error(f"QP {qp.qpn:#x}: MSN table entry {idx} is {got:#018x}, expected {want:#018x} "
                       f"(start slot {start % qp.sq_depth}, PSN {first}..{first + len(segs)})")
    qp.wqe_count += 1
    out = []
    for n, (op, off, sz) in enumerate(segs):
      psn = (first + n) & PSN_MASK
      reth = fr.Reth(head.remote_va, head.remote_key, head.length) if op in fr.WITH_RETH else None
      out.append((psn, self._frame(qp, op, psn, ackreq=n == len(segs) - 1, reth=reth, payload=payload[off:off + sz])))
    qp.sq_psn = (first + len(segs)) & PSN_MASK
    signalled = bool(head.flags & hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP)
    o = Outstanding(first, (first + len(segs) - 1) & PSN_MASK, qp.sq_cons, signalled, out, start)
    qp.outstanding.append(o)
    if len(qp.outstanding) == 1: qp.retries = 0
    for _, frame in out: self.nic.phy.transmit(frame)
    qp.last_tx = time.monotonic()      # the ACK timer runs from the last packet sent

  def _frame(self, qp: QP, opcode: int, psn: int, ackreq=False, reth=None, aeth=None, payload=b"") -> bytes:
    sgid = self.fw.gids[qp.sgid_index][0]
    self.ip_id = (self.ip_id + 1) & 0xFFFF
    return fr.build(fr.RoceFrame(qp.dest_mac, self.nic.mac, sgid[12:16], qp.dgid[12:16], opcode, qp.dest_qpn, psn,
                                 sport=0xC000 | ((qp.qpn ^ qp.dest_qpn) & 0x3FFF), ackreq=ackreq, pkey=qp.pkey,
                                 reth=reth, aeth=aeth, payload=payload, ip_id=self.ip_id))

  def complete(self, qp: QP, sq_cons_idx: int, status: int) -> None:
    cq = qp.scq
    if cq.prod - cq.cons >= cq.depth:
      self.nic.error(f"CQ {cq.id:#x} overflow: {cq.prod - cq.cons} CQEs not consumed (CQ doorbell missing?)")
      return
    toggle = 1 - ((cq.prod // cq.depth) & 1)
    cqe = hsi.struct_cq_req(qp_handle=qp.handle, sq_cons_idx=sq_cons_idx & 0xFFFF, status=status,
                            cqe_type_toggle=(hsi.CQ_REQ_CQE_TYPE_REQ << hsi.CQ_REQ_CQE_TYPE_SFT) | toggle)
    raw = bytes(cqe)
    off = (cq.prod % cq.depth) * ctypes.sizeof(cqe)
    cq.mem.write(off, raw[:24])                          # body first
    cq.mem.write(off + 25, raw[25:])
    cq.mem.write(off + 24, raw[24:25])                   # then the toggle byte
    cq.prod += 1

  def _retire(self, qp: QP, o: Outstanding, status: int) -> None:
    if o.signalled or status != hsi.CQ_REQ_STATUS_OK: self.complete(qp, o.end_slot % qp.sq_depth, status)

  def _flush_one(self, qp: QP) -> None:
    head = hsi.struct_sq_rdma_hdr.from_buffer_copy(self._wqe_bytes(qp, qp.sq_cons, 2))
    qp.sq_cons += max(1, head.wqe_size) if qp.variable else 1
    self.complete(qp, qp.sq_cons % qp.sq_depth, hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR)

  def _to_error(self, qp: QP) -> None:
    qp.state = "ERR"
    for o in qp.outstanding: self._retire(qp, o, hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR)
    qp.outstanding = []
    while qp.sq_cons < qp.sq_prod: self._flush_one(qp)

  def _ack(self, qp: QP, f: fr.RoceFrame) -> None:
    if qp.state not in ("RTS", "SQD"):
      self.drop("ack_qp_state", f"QP {qp.qpn:#x} in {qp.state}")
      return
    syn = f.aeth.syndrome
    if f.aeth.is_ack:
      done = [o for o in qp.outstanding if psn_le(o.last_psn, f.psn)]
      if done:
        qp.retries = 0
        qp.last_tx = time.monotonic()
      for o in done:
        qp.outstanding.remove(o)
        self._retire(qp, o, hsi.CQ_REQ_STATUS_OK)
      return
    if not f.aeth.is_nak:
      self.drop("rnr_nak", f"syndrome {syn:#x} is not modelled")
      return
    # a NAK acknowledges everything before its PSN
    for o in [o for o in qp.outstanding if psn_le(o.last_psn, (f.psn - 1) & PSN_MASK)]:
      qp.outstanding.remove(o)
      self._retire(qp, o, hsi.CQ_REQ_STATUS_OK)
    if syn == fr.AETH_NAK_PSN_SEQ:
      self._retransmit(qp, from_psn=f.psn, why=f"NAK PSN sequence error at {f.psn}")
      return
    status = NAK_TO_STATUS.get(syn, hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR)
    self.nic.log(f"QP {qp.qpn:#x}: NAK {syn:#x} ({fr.NAK_NAMES.get(syn, '?')}) at PSN {f.psn}")
    if qp.outstanding:
      o = qp.outstanding.pop(0)
      self._retire(qp, o, status)
    self._to_error(qp)

  def _retransmit(self, qp: QP, from_psn: int | None, why: str) -> None:
    qp.retries += 1
    if qp.retries > qp.retry_cnt:
      self.nic.log(f"QP {qp.qpn:#x}: retry count {qp.retry_cnt} exhausted ({why})")
      if qp.outstanding: self._retire(qp, qp.outstanding.pop(0), hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR)
      self._to_error(qp)
      return
    self.nic.log(f"QP {qp.qpn:#x}: retransmission {qp.retries}/{qp.retry_cnt} ({why})")
    for o in qp.outstanding:
      for psn, frame in o.frames:
        if from_psn is None or psn_le(from_psn, psn): self.nic.phy.transmit(frame)
    qp.last_tx = time.monotonic()

  def _timer_loop(self) -> None:
    while not self._stop.wait(TIMER_TICK_S):
      try: self._timer_tick()
      except Exception as e:   # a failure (a DMA fault, a model bug) must not stop the timer silently: record it
        self.nic.error(f"ACK timer failed: {type(e).__name__}: {e}")

  def _timer_tick(self) -> None:
    with self.nic.lock:
      now = time.monotonic()
      for qp in list(self.fw.qps.values()):
        if qp.state != "RTS" or not qp.outstanding or not qp.timeout: continue
        if now - qp.last_tx > 4.096e-6 * (1 << qp.timeout):
          self._retransmit(qp, None, "ACK timeout")

  # ================================================================ responder
  def receive(self, frame: bytes) -> None:
    with self.nic.lock:
      try: f = fr.parse(frame)
      except fr.FrameError as e:
        self.drop(e.reason, str(e))
        return
      if not self.fw.rx_steered(f.dst_mac):
        self.drop("no_l2_filter", f"dst MAC {f.dst_mac.hex(':')}")
        return
      if not any(gid[12:16] == f.dst_ip for gid, _ in self.fw.gids.values()):
        self.drop("unknown_dip", f"{'.'.join(map(str, f.dst_ip))}")
        return
      qp = self.fw.qps.get(f.destqp)
      if qp is None:
        self.drop("unknown_qp", f"QP {f.destqp:#x}")
        return
      if f.pkey != qp.pkey:
        self.drop("pkey", f"P_Key {f.pkey:#x}")
        return
      if f.opcode == fr.RC_ACKNOWLEDGE: self._ack(qp, f)
      else: self._request(qp, f)

  def _reply(self, qp: QP, psn: int, syndrome: int) -> None:
    self.nic.phy.transmit(self._frame(qp, fr.RC_ACKNOWLEDGE, psn, aeth=fr.Aeth(syndrome, qp.resp_msn)))

  def _nak(self, qp: QP, psn: int, syndrome: int, why: str) -> None:
    self.nic.log(f"QP {qp.qpn:#x}: NAK {syndrome:#x} at PSN {psn}: {why}")
    self._reply(qp, psn, syndrome)
    if syndrome != fr.AETH_NAK_PSN_SEQ:
      qp.state = "ERR"
      qp.rx_msg = None

  def _request(self, qp: QP, f: fr.RoceFrame) -> None:
    if qp.state not in ("RTR", "RTS"):
      self.drop("qp_state", f"QP {qp.qpn:#x} in {qp.state}")
      return
    if f.opcode not in (fr.RC_RDMA_WRITE_FIRST, fr.RC_RDMA_WRITE_MIDDLE, fr.RC_RDMA_WRITE_LAST, fr.RC_RDMA_WRITE_ONLY):
      self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"opcode {f.opcode:#x} is not modelled")
      return
    d = (f.psn - qp.epsn) & PSN_MASK
    if d:
      if d >= 0x800000:   # a duplicate: acknowledge again, write nothing
        if f.ackreq: self._reply(qp, (qp.epsn - 1) & PSN_MASK, fr.AETH_ACK)
      elif not qp.nak_sent:
        qp.nak_sent = True
        self._nak(qp, qp.epsn, fr.AETH_NAK_PSN_SEQ, f"PSN {f.psn}, expected {qp.epsn}")
      return
    qp.nak_sent = False
    n = len(f.payload)
    if f.opcode in fr.WITH_RETH:
      if qp.rx_msg is not None:
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, "a new message before the last one ended")
      r = f.reth
      mr = self.fw.mrs.get(r.rkey)
      if mr is None: return self._nak(qp, f.psn, fr.AETH_NAK_REMOTE_ACCESS, f"rkey {r.rkey:#x} is not registered")
      if not mr.access & MR_REMOTE_WRITE:
        return self._nak(qp, f.psn, fr.AETH_NAK_REMOTE_ACCESS, f"MR {r.rkey:#x} lacks REMOTE_WRITE")
      if not qp.access & QP_REMOTE_WRITE:
        return self._nak(qp, f.psn, fr.AETH_NAK_REMOTE_ACCESS, f"QP {qp.qpn:#x} access lacks REMOTE_WRITE")
      if not (mr.va <= r.va and r.va + r.dmalen <= mr.va + mr.size):
        return self._nak(qp, f.psn, fr.AETH_NAK_REMOTE_ACCESS,
                         f"[{r.va:#x}, +{r.dmalen:#x}) is outside MR {r.rkey:#x} [{mr.va:#x}, +{mr.size:#x})")
      if f.opcode == fr.RC_RDMA_WRITE_ONLY and not (n == r.dmalen and n <= qp.pmtu):
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"ONLY with {n} bytes, DMA length {r.dmalen}")
      if f.opcode == fr.RC_RDMA_WRITE_FIRST and not (n == qp.pmtu and r.dmalen > qp.pmtu):
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"FIRST with {n} bytes at PMTU {qp.pmtu}")
      msg = (mr, r.va, r.dmalen)
    else:
      if qp.rx_msg is None: return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, "MIDDLE/LAST without a FIRST")
      msg = qp.rx_msg
      left = msg[2]
      if f.opcode == fr.RC_RDMA_WRITE_MIDDLE and not (n == qp.pmtu and left > qp.pmtu):
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"MIDDLE with {n} bytes, {left} left")
      if f.opcode == fr.RC_RDMA_WRITE_LAST and not (0 < n <= qp.pmtu and n == left):
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"LAST with {n} bytes, {left} left")
    mr, va, left = msg
    if n: mr.mem.write(va - mr.va, f.payload)
    qp.epsn = (qp.epsn + 1) & PSN_MASK
    if f.opcode in (fr.RC_RDMA_WRITE_LAST, fr.RC_RDMA_WRITE_ONLY):
      qp.rx_msg = None
      qp.resp_msn = (qp.resp_msn + 1) & PSN_MASK
    else:
      qp.rx_msg = (mr, va + n, left - n)
    if f.ackreq: self._reply(qp, f.psn, fr.AETH_ACK)

  def close(self) -> None:
    self._stop.set()
    if self._timer is not threading.current_thread(): self._timer.join(timeout=1)
