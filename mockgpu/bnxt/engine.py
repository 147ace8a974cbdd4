"""The mock NIC's RoCE data path: the requester (SQ doorbell -> WQEs; a transmit thread that sends their RDMA WRITE
packets within a window; ACK/NAK -> CQEs; an ACK timer with go-back-N retransmission) and the responder (PSN, QP
state, rkey, access and bounds checks; DMA into the MR; ACK or NAK). Rules: IBTA vol. 1 ch. 9.7 (reliable service)
and mockgpu/bnxt/README.md;
formats: roce_hsi.h via the generated bindings.

The SQ doorbell checks and takes WQEs and sends at most one batch of packets, so the driver's MMIO write returns at
once whatever the message size; the engine's thread sends the rest. Packets are built from the SGEs when they are
sent, at most `window` unacknowledged packets ahead (so the receiver's socket buffer is not overrun), with an ACK
requested every window/4 packets. The retry counter restarts whenever the responder's acknowledged PSN advances (IBA
retry semantics): a lossy wire costs retransmissions, not the connection, as long as each loss is followed by progress.
"""
from __future__ import annotations

import ctypes
import struct
import threading
import time

from ...autogen import bnxt as hsi
from ...errors import GPUFault
from . import frames as fr
from . import recv
from .state import PSN_MASK, QP, Outstanding

NAK_TO_STATUS = {fr.AETH_NAK_INVALID_REQ: hsi.CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR,
                 fr.AETH_NAK_REMOTE_ACCESS: hsi.CQ_REQ_STATUS_REMOTE_ACCESS_ERR,
                 fr.AETH_NAK_REMOTE_OP: hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR}
MR_REMOTE_WRITE = hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE     # MR encoding (0x4)
QP_REMOTE_WRITE = hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE       # QP encoding (0x2): they differ (roce_hsi.h)
TIMER_TICK_S = 0.005
TX_BATCH = 32               # packets sent per hold of the NIC lock: the receive thread gets its turn in between
FRAME_OVERHEAD = 1024       # what a datagram costs a socket buffer beyond its payload (headers, kernel bookkeeping)
WINDOW_MIN, WINDOW_MAX = 8, 512
STATIC_WQE_BYTES = 128      # roce_hsi.h struct sq_send: one static-mode WQE (qplib_fp.h bnxt_qplib_set_sq_max_slot)
RNR_PAUSE_S = 0.002
MODELLED_WQES = {hsi.SQ_BASE_WQE_TYPE_WRITE_WQE: "WRITE", hsi.SQ_BASE_WQE_TYPE_SEND: "SEND"}
WQE_NAMES = {getattr(hsi, n): n[len("SQ_BASE_WQE_TYPE_"):] for n in dir(hsi)
             if n.startswith("SQ_BASE_WQE_TYPE_") and n != "SQ_BASE_WQE_TYPE_LAST"}


def psn_le(a: int, b: int) -> bool:
  """a <= b in 24-bit serial arithmetic."""
  return ((b - a) & PSN_MASK) < 0x800000


def ack_timeout_s(exponent: int) -> float:
  """IBA local ACK timeout: 4.096 us * 2**exponent (0 = no timer)."""
  return 4.096e-6 * (1 << exponent) if exponent else 0.0


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
    self._wake = threading.Event()      # set by a doorbell or an ACK that opens the window
    self._timer = threading.Thread(target=self._timer_loop, name=f"bnxt-{nic.addr}-timer", daemon=True)
    self._timer.start()

  @property
  def fw(self): return self.nic.fw

  def drop(self, reason: str, detail: str = "") -> None:
    self.drops[reason] = self.drops.get(reason, 0) + 1
    self.nic.log(f"RX drop ({reason}) {detail}")

  def window(self, qp: QP) -> int:
    """Unacknowledged packets allowed in flight: what the receiving socket buffer holds, halved for safety (the
    peer's buffer is taken to be as large as this PHY's: both are mock NICs on this machine)."""
    return max(WINDOW_MIN, min(WINDOW_MAX, self.nic.phy.rx_buffer_bytes // (2 * (qp.pmtu + FRAME_OVERHEAD))))

  # ================================================================ requester: the doorbell takes WQEs
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
    while qp.sq_cons < qp.sq_prod and qp.state == "RTS" and not self._failing(qp):
      start = qp.sq_cons
      try: self._take(qp)
      except LocalError as e:
        self.nic.log(f"QP {qpn:#x}: local error {e}")
        self._fail_in_turn(qp, start, e.status)
      if qp.sq_cons == start: break
    # a first batch goes out now (bounded work, whatever the message size: a small write needs no thread switch);
    # the engine's thread sends the rest
    if qp.state == "RTS": self._send_or_fail(qp, TX_BATCH)
    if qp.tx_next < qp.posted: self._wake.set()

  @staticmethod
  def _failing(qp: QP) -> bool:
    """A WQE failed when taken and waits for the WQEs before it: nothing after it is taken (it will be flushed)."""
    return bool(qp.outstanding) and qp.outstanding[-1].status != hsi.CQ_REQ_STATUS_OK

  def _fail_in_turn(self, qp: QP, start: int, status: int) -> None:
    """A WQE failed when taken: it completes with its error after every WQE before it has completed (completions
    are in SQ order: IBTA vol. 1 ch. 10 work completions), then the QP moves to the error state and flushes what
    follows."""
    qp.outstanding.append(Outstanding(qp.posted, 0, qp.sq_cons, True, 0, 0, 0, [], start, status=status))
    if len(qp.outstanding) == 1: self._retire_through(qp, qp.una)

  def _wqe_bytes(self, qp: QP, slot_abs: int, nslots: int) -> bytes:
    return b"".join(qp.sq.read(((slot_abs + i) % qp.sq_depth) * 16, 16) for i in range(nslots))

  def _take(self, qp: QP) -> None:
    """Check the WQE at sq_cons and queue it for transmission (its packets are built when sent).

    Geometry (Linux qplib_fp.c bnxt_qplib_post_send, bnxt_qplib_required_slots; qplib_res.h bnxt_qplib_ring_prod_db,
    which rings hwq->prod / max_slot): in variable mode a WQE takes wqe_size 16-byte slots and the doorbell index
    counts slots (max_slot 1); in static mode every WQE takes 128 bytes (8 slots) whatever its wqe_size and the
    doorbell index counts WQEs (max_slot = sizeof(sq_send) / sizeof(sq_sge) = 8)."""
    start = qp.sq_cons
    if qp.variable:
      head = hsi.struct_sq_rdma_hdr.from_buffer_copy(self._wqe_bytes(qp, start, 2))
      where, limit = f"WQE at slot {start % qp.sq_depth}", None
      if qp.sq_prod - start < max(1, head.wqe_size):
        qp.sq_cons = qp.sq_prod
        raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
                         f"{where} ({_wqe_name(head.wqe_type)}) of {head.wqe_size} slots runs past the producer")
      qp.sq_cons = start + max(1, head.wqe_size)
    else:
      raw = qp.sq.read((start % qp.sq_depth) * STATIC_WQE_BYTES, STATIC_WQE_BYTES)
      head = hsi.struct_sq_rdma_hdr.from_buffer_copy(raw[:32])
      where = f"WQE {start % qp.sq_depth} (SQ byte {(start % qp.sq_depth) * STATIC_WQE_BYTES})"
      limit = STATIC_WQE_BYTES // 16
      qp.sq_cons = start + 1
    kind = _wqe_name(head.wqe_type)
    if head.wqe_size < 2:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
                       f"{where} ({kind}): wqe_size {head.wqe_size} slots, the 32-byte header alone takes 2")
    if limit and head.wqe_size > limit:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
                       f"{where} ({kind}): wqe_size {head.wqe_size} exceeds a static WQE's {limit} slots")
    if head.wqe_type not in MODELLED_WQES:
      # a deliberate refusal (mockgpu/bnxt/README.md): the type is named
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
                       f"{where}: WQE type {head.wqe_type:#x} ({kind}) is not modelled; the mock executes "
                       f"{' and '.join(f'{_wqe_name(t)} ({t:#x})' for t in MODELLED_WQES)} only")
    op = MODELLED_WQES[head.wqe_type]
    if op == "WRITE" and head.wqe_size < 3:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR,
                       f"{where}: wqe_size {head.wqe_size} leaves no room for an SGE")
    if qp.variable: raw = self._wqe_bytes(qp, start, head.wqe_size)
    sges, total = [], 0
    for i in range(head.wqe_size - 2):
      sge = hsi.struct_sq_sge.from_buffer_copy(raw[32 + 16 * i:48 + 16 * i])
      mr = self.fw.mrs.get(sge.l_key)
      if mr is None:
        raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR, f"SGE {i}: lkey {sge.l_key:#x} is not registered")
      if not (mr.va <= sge.va_or_pa and sge.va_or_pa + sge.size <= mr.va + mr.size):
        raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR,
                         f"SGE {i}: [{sge.va_or_pa:#x}, +{sge.size:#x}) is outside MR {mr.key:#x}")
      if sge.size: sges.append((mr, sge.va_or_pa - mr.va, sge.size))
      total += sge.size
    if total != head.length:
      raise LocalError(hsi.CQ_REQ_STATUS_LOCAL_LENGTH_ERR, f"SGEs hold {total} bytes, the WQE says {head.length}")
    npkts = max(1, -(-head.length // qp.pmtu))
    first = qp.sq_psn
    msn = qp.wqe_count
    # a deliberate strictness (mockgpu/bnxt/README.md): the entry is checked when the WQE is taken, although the
    # hardware reads it only to retransmit; a table outside the SQ page list is left alone until then
    if qp.msn_entries and not qp.msn_fault: self._msn_entry(qp, msn, start, first, npkts, "taken")
    qp.wqe_count += 1
    signalled = bool(head.flags & hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP)
    remote = (head.remote_va, head.remote_key) if op == "WRITE" else (0, 0)   # sq_send_hdr has no remote address
    qp.outstanding.append(Outstanding(qp.posted, npkts, qp.sq_cons, signalled, *remote, head.length, sges, start,
                                      msn=msn, kind=op))
    qp.posted += npkts
    qp.sq_psn = (first + npkts) & PSN_MASK

  def _msn_entry(self, qp: QP, msn: int, start: int, first: int, npkts: int, why: str) -> bool:
    """Read and check the MSN table entry of the WQE with requester MSN msn (qplib_fp.c bnxt_qplib_fill_msn_search:
    start_idx is the WQE's SQ slot, hwq->prod, which counts 16-byte slots in both modes: 8 per static WQE; then
    next PSN, start PSN). False, after recording a fault naming the address, when the table is outside the SQ page
    list or unmapped."""
    idx = msn % qp.msn_entries
    slot = (start % qp.sq_depth) * (1 if qp.variable else STATIC_WQE_BYTES // 16)
    if qp.msn_fault:
      self.nic.error(f"QP {qp.qpn:#x}: fault reading MSN table entry {idx} at {qp.msn_address(idx):#x} (WQE "
                     f"{why}, start slot {slot}): {qp.msn_fault}")
      return False
    try: got = struct.unpack("<Q", qp.sq.read(qp.msn_off + idx * 8, 8))[0]
    except GPUFault as e:
      self.nic.error(f"QP {qp.qpn:#x}: fault reading MSN table entry {idx} ({why}): {e}")
      return False
    want = (slot << hsi.SQ_MSN_SEARCH_START_IDX_SFT) | \
           (((first + npkts) & PSN_MASK) << hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT) | first
    if got != want:
      self.nic.error(f"QP {qp.qpn:#x}: MSN table entry {idx} is {got:#018x}, expected {want:#018x} "
                     f"(start slot {slot}, PSN {first}..{first + npkts}; WQE {why})")
    return True

  # ================================================================ requester: the transmit thread
  def _send_some(self, qp: QP, budget: int) -> int:
    """Send up to budget packets from tx_next while the window allows; returns how many were sent."""
    window, sent = self.window(qp), 0
    if qp.rnr_until:                    # waiting out an RNR NAK
      if time.monotonic() < qp.rnr_until: return 0
      qp.rnr_until = 0.0
    if qp.tx_next == qp.una: qp.timer_start = time.monotonic()   # nothing was in flight: the timer starts now
    for o in qp.outstanding:
      if sent >= budget: break
      if o.end <= qp.tx_next: continue
      every = max(1, window // 4)
      while qp.tx_next < o.end and sent < budget and qp.tx_next - qp.una < window:
        n = qp.tx_next - o.first
        # an ACK is requested on the message's last packet and every `every` packets, so the window keeps opening
        self.nic.phy.transmit(self._packet(qp, o, n, ackreq=n == o.npkts - 1 or n % every == every - 1))
        qp.tx_next += 1
        sent += 1
      if qp.tx_next < o.end: break
    return sent

  def _send_or_fail(self, qp: QP, budget: int) -> int:
    """_send_some; a DMA fault reading a message's bytes (memory unmapped since the WQE was checked) fails that
    message with a local protection error and moves the QP to the error state, once: it is not retried forever."""
    try: return self._send_some(qp, budget)
    except GPUFault as e:
      self.nic.error(f"QP {qp.qpn:#x}: DMA fault reading a message to send: {e}")
      if qp.outstanding: self.complete(qp, qp.outstanding.pop(0).end_slot % qp.sq_depth,
                                       hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR)
      self.to_error(qp)
      return 0

  def _packet(self, qp: QP, o: Outstanding, n: int, ackreq: bool) -> bytes:
    """Packet n of message o: FIRST/MIDDLE/LAST or ONLY of RDMA WRITE or SEND (IBTA vol. 1 ch. 9.4), its payload read
    from the SGEs now."""
    off = n * qp.pmtu
    size = min(qp.pmtu, o.length - off)
    only, first, middle, last = fr.SEGMENT_OPCODES[o.kind]
    if o.npkts == 1: op = only
    elif n == 0: op = first
    elif n == o.npkts - 1: op = last
    else: op = middle
    reth = fr.Reth(o.remote_va, o.rkey, o.length) if op in fr.WITH_RETH else None
    return self._frame(qp, op, qp.psn_of(o.first + n), ackreq=ackreq, reth=reth, payload=_gather(o.sges, off, size))

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

  def _retire_through(self, qp: QP, upto: int) -> None:
    """Complete, in SQ order, the messages that ended before packet `upto`; a WQE that failed when taken completes
    with its error in its turn and moves the QP to the error state, which flushes everything after it."""
    while qp.outstanding and qp.outstanding[0].end <= upto:
      o = qp.outstanding.pop(0)
      if o.status != hsi.CQ_REQ_STATUS_OK:
        self.complete(qp, o.end_slot % qp.sq_depth, o.status)
        self.to_error(qp)
        return
      self._retire(qp, o, hsi.CQ_REQ_STATUS_OK)

  def _flush_one(self, qp: QP) -> None:
    if qp.variable:
      head = hsi.struct_sq_rdma_hdr.from_buffer_copy(self._wqe_bytes(qp, qp.sq_cons, 2))
      qp.sq_cons = min(qp.sq_prod, qp.sq_cons + max(1, head.wqe_size))
    else: qp.sq_cons += 1
    self.complete(qp, qp.sq_cons % qp.sq_depth, hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR)

  def to_error(self, qp: QP) -> None:
    """The QP enters the error state: every WQE not yet completed on either queue completes as flushed, in order
    (IBTA vol. 1 ch. 10, the Error state; libibverbs ibv_poll_cq(3) IBV_WC_WR_FLUSH_ERR), and so does every WQE
    posted later (the doorbells flush them)."""
    qp.state = "ERR"
    for o in qp.outstanding: self._retire(qp, o, hsi.CQ_REQ_STATUS_WORK_REQUEST_FLUSHED_ERR)
    qp.outstanding = []
    qp.una = qp.tx_next = qp.posted
    while qp.sq_cons < qp.sq_prod: self._flush_one(qp)
    self._flush_rq(qp)

  def _flush_rq(self, qp: QP) -> None:
    if qp.rx_send is not None:
      recv.complete(self.nic, qp, qp.rx_send.wr_id, qp.rx_send.filled, hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR)
      qp.rx_send = None
    while qp.rq is not None and qp.rq_cons < qp.rq_prod:
      raw = qp.rq.read((qp.rq_cons % qp.rq_depth) * qp.rq_stride, recv.RQE_HDR)
      qp.rq_cons += 1
      wr_id = hsi.struct_rq_wqe_hdr.from_buffer_copy(raw).wr_id[0]
      recv.complete(self.nic, qp, wr_id, 0, hsi.CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR)

  def _acknowledged(self, qp: QP, upto: int) -> None:
    """The responder has every packet before number `upto`: retire the messages that ended, and when that is
    progress, restart the retry count and the ACK timer (IBA: retries count failures without progress)."""
    if upto <= qp.una: return
    qp.una = upto
    qp.tx_next = max(qp.tx_next, upto)
    qp.retries = qp.rnr_retries = 0
    qp.timer_start = time.monotonic()
    self._retire_through(qp, upto)
    self._wake.set()    # the window opened

  def _ack(self, qp: QP, f: fr.RoceFrame) -> None:
    if qp.state not in ("RTS", "SQD"):
      self.drop("ack_qp_state", f"QP {qp.qpn:#x} in {qp.state}")
      return
    syn = f.aeth.syndrome
    packet = qp.packet_of(f.psn)
    if f.aeth.is_ack:
      if packet is not None: self._acknowledged(qp, packet + 1)
      return
    if f.aeth.is_rnr_nak:
      self._rnr_nak(qp, f, packet)
      return
    if not f.aeth.is_nak:
      self.drop("reserved_aeth", f"syndrome {syn:#x} is neither ACK, RNR NAK nor NAK")
      return
    if packet is None and f.psn != qp.psn_of(qp.posted):
      self.drop("stale_nak", f"NAK {syn:#x} at PSN {f.psn}, outside {qp.psn_of(qp.una)}..{qp.psn_of(qp.posted)}")
      return
    self._acknowledged(qp, qp.posted if packet is None else packet)   # a NAK acknowledges everything before it
    if syn == fr.AETH_NAK_PSN_SEQ:
      self._retransmit(qp, f"NAK PSN sequence error at {f.psn}")
      return
    status = NAK_TO_STATUS.get(syn, hsi.CQ_REQ_STATUS_REMOTE_OPERATION_ERR)
    self.nic.log(f"QP {qp.qpn:#x}: NAK {syn:#x} ({fr.NAK_NAMES.get(syn, '?')}) at PSN {f.psn}")
    if qp.outstanding:
      o = qp.outstanding.pop(0)
      self._retire(qp, o, status)
    self.to_error(qp)

  def _rnr_nak(self, qp: QP, f: fr.RoceFrame, packet: int | None) -> None:
    """The responder had no RECV WQE for the SEND at f.psn: everything before it is acknowledged; the requester
    resends from there after a pause, at most rnr_retry times without progress (7: without limit, libibverbs
    ibv_modify_qp(3)).
    The pause is RNR_PAUSE_S, not the responder's RNR timer code (a deliberate leniency, mockgpu/bnxt/README.md)."""
    if packet is None:
      self.drop("stale_nak", f"RNR NAK at PSN {f.psn}, outside {qp.psn_of(qp.una)}..{qp.psn_of(qp.posted)}")
      return
    self._acknowledged(qp, packet)
    if qp.state != "RTS": return
    qp.rnr_retries += 1
    if qp.rnr_retry != 7 and qp.rnr_retries > qp.rnr_retry:
      self.nic.log(f"QP {qp.qpn:#x}: RNR retry count {qp.rnr_retry} exhausted at PSN {f.psn}")
      if qp.outstanding: self._retire(qp, qp.outstanding.pop(0), hsi.CQ_REQ_STATUS_RNR_NAK_RETRY_CNT_ERR)
      self.to_error(qp)
      return
    self.nic.log(f"QP {qp.qpn:#x}: RNR NAK at PSN {f.psn}, resending in {RNR_PAUSE_S * 1000:.0f} ms "
                 f"({qp.rnr_retries}/{'unlimited' if qp.rnr_retry == 7 else qp.rnr_retry})")
    qp.tx_next = qp.una
    qp.rnr_until = time.monotonic() + RNR_PAUSE_S
    qp.timer_start = qp.rnr_until
    self._wake.set()

  def _retransmit(self, qp: QP, why: str) -> None:
    """Go back N: resend from the oldest unacknowledged packet, unless the retry count is spent."""
    qp.retries += 1
    if qp.retries > qp.retry_cnt:
      self.nic.log(f"QP {qp.qpn:#x}: retry count {qp.retry_cnt} exhausted ({why})")
      if qp.outstanding: self._retire(qp, qp.outstanding.pop(0), hsi.CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR)
      self.to_error(qp)
      return
    # the requester finds the WQE to resend from through the MSN table (the only time it reads the table)
    o = next((o for o in qp.outstanding if o.end > qp.una), None)
    if o is not None and qp.msn_entries and \
       not self._msn_entry(qp, o.msn, o.start_slot, qp.psn_of(o.first), o.npkts, "to retransmit"):
      self.nic.log(f"QP {qp.qpn:#x}: retransmission from PSN {qp.psn_of(qp.una)} failed: MSN table unreadable")
      qp.outstanding.remove(o)
      self.complete(qp, o.end_slot % qp.sq_depth, hsi.CQ_REQ_STATUS_LOCAL_PROTECTION_ERR)
      self.to_error(qp)
      return
    self.nic.log(f"QP {qp.qpn:#x}: retransmission {qp.retries}/{qp.retry_cnt} from PSN {qp.psn_of(qp.una)} ({why})")
    qp.tx_next = qp.una
    qp.timer_start = time.monotonic()
    self._wake.set()

  def _timer_loop(self) -> None:
    """The engine's thread: sends what the window allows, and runs the ACK timers."""
    while not self._stop.is_set():
      self._wake.wait(TIMER_TICK_S)
      self._wake.clear()
      try: busy = self._transmit_tick()
      except Exception as e:   # a failure (a DMA fault, a model bug) must not stop the thread silently: record it
        self.nic.error(f"transmitter failed: {type(e).__name__}: {e}")
        busy = False
      try: self._timer_tick()
      except Exception as e:
        self.nic.error(f"ACK timer failed: {type(e).__name__}: {e}")
      if busy: self._wake.set()     # more to send: go round again without waiting

  def _transmit_tick(self) -> bool:
    """One batch of packets per QP with something to send; True when a QP could send more right away."""
    busy = False
    with self.nic.lock:
      for qp in list(self.fw.qps.values()):
        if qp.state != "RTS" or qp.tx_next >= qp.posted: continue
        self._send_or_fail(qp, TX_BATCH)
        busy |= qp.tx_next < qp.posted and qp.tx_next - qp.una < self.window(qp) and not qp.rnr_until
    return busy

  def _timer_tick(self) -> None:
    with self.nic.lock:
      now = time.monotonic()
      for qp in list(self.fw.qps.values()):
        limit = ack_timeout_s(qp.timeout)
        if qp.state != "RTS" or qp.una >= qp.tx_next or not limit: continue
        if now - qp.timer_start > limit:
          qp.timer_start = now        # restarted even if the retransmission below fails
          self._retransmit(qp, "ACK timeout")


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
      qp.rx_msg = None
      self.to_error(qp)

  def _request(self, qp: QP, f: fr.RoceFrame) -> None:
    if qp.state not in ("RTR", "RTS"):
      self.drop("qp_state", f"QP {qp.qpn:#x} in {qp.state}")
      return
    if f.opcode not in fr.WRITE_OPCODES + fr.SEND_OPCODES:
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
    if f.opcode in fr.SEND_OPCODES: return self._send_request(qp, f)
    n = len(f.payload)
    if f.opcode in fr.WITH_RETH:
      if qp.rx_msg is not None or qp.rx_send is not None:
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

  # ================================================================ responder: SEND into the receive queue
  def rq_doorbell(self, qpn: int, index: int, epoch: int) -> None:
    """RECV WQEs posted: the index counts WQEs (recv.py)."""
    qp = self.fw.qps.get(qpn)
    if qp is None:
      self.nic.error(f"RQ doorbell for unknown QP {qpn:#x}")
      return
    if qp.rq is None:
      self.nic.error(f"RQ doorbell for QP {qpn:#x}, which was created without a receive queue (rq_size 0)")
      return
    if qp.state == "RESET":
      self.nic.error(f"RQ doorbell on QP {qpn:#x} in RESET: RECVs are posted from INIT on (qplib_fp.c "
                     f"bnxt_qplib_post_recv)")
      return
    new = self.nic.advance(f"RQ of QP {qpn:#x}", qp.rq_prod, qp.rq_depth, index, epoch, qp.rq_cons + qp.rq_depth)
    if new is None: return
    qp.rq_prod = new
    if qp.state == "ERR": self._flush_rq(qp)

  def _send_request(self, qp: QP, f: fr.RoceFrame) -> None:
    """A SEND packet at the expected PSN: FIRST/ONLY take the next RECV WQE (none posted: RNR NAK, the PSN stays
    expected), each packet is scattered into its SGEs, LAST/ONLY complete it on the receive CQ."""
    n = len(f.payload)
    if f.opcode in (fr.RC_SEND_FIRST, fr.RC_SEND_ONLY):
      if qp.rx_msg is not None or qp.rx_send is not None:
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, "a new message before the last one ended")
      if qp.rq is None:
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"SEND to QP {qp.qpn:#x}, which has no receive queue")
      if (f.opcode == fr.RC_SEND_ONLY and n > qp.pmtu) or (f.opcode == fr.RC_SEND_FIRST and n != qp.pmtu):
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"{f.name} with {n} bytes at PMTU {qp.pmtu}")
      try: rx = recv.take(self.fw, qp)
      except recv.RecvError as e:
        recv.complete(self.nic, qp, e.wr_id, 0, e.status)
        return self._nak(qp, f.psn, fr.AETH_NAK_REMOTE_OP, str(e))
      if rx is None:
        self.nic.log(f"QP {qp.qpn:#x}: SEND at PSN {f.psn} finds no RECV WQE posted: RNR NAK")
        self._reply(qp, f.psn, fr.AETH_RNR_NAK | (qp.min_rnr_timer & 0x1F))
        return
      qp.rx_send = rx
    else:
      rx = qp.rx_send
      if rx is None: return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"{f.name} without a SEND_FIRST")
      if f.opcode == fr.RC_SEND_MIDDLE and n != qp.pmtu:
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"SEND_MIDDLE with {n} bytes at PMTU {qp.pmtu}")
      if f.opcode == fr.RC_SEND_LAST and not 0 < n <= qp.pmtu:
        return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ, f"SEND_LAST with {n} bytes at PMTU {qp.pmtu}")
    if not recv.scatter(rx, f.payload):
      qp.rx_send = None
      recv.complete(self.nic, qp, rx.wr_id, rx.filled, hsi.CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR)
      return self._nak(qp, f.psn, fr.AETH_NAK_INVALID_REQ,
                       f"SEND longer than the {rx.capacity} bytes of RQ WQE {rx.index % qp.rq_depth}")
    qp.epsn = (qp.epsn + 1) & PSN_MASK
    if f.opcode in (fr.RC_SEND_LAST, fr.RC_SEND_ONLY):
      recv.complete(self.nic, qp, rx.wr_id, rx.filled, hsi.CQ_RES_RC_STATUS_OK)
      qp.rx_send = None
      qp.resp_msn = (qp.resp_msn + 1) & PSN_MASK
    if f.ackreq: self._reply(qp, f.psn, fr.AETH_ACK)

  def close(self) -> None:
    self._stop.set()
    self._wake.set()
    if self._timer is not threading.current_thread(): self._timer.join(timeout=1)


def _wqe_name(wqe_type: int) -> str:
  """roce_hsi.h SQ_BASE_WQE_TYPE_* name of a WQE type."""
  return WQE_NAMES.get(wqe_type, "reserved type")


def _gather(sges: list, off: int, size: int) -> bytes:
  """Bytes [off, off+size) of the message the SGEs describe, read from the MRs now."""
  parts = []
  for mr, mr_off, n in sges:
    if off >= n:
      off -= n
      continue
    take = min(n - off, size)
    parts.append(mr.mem.read(mr_off + off, take))
    size -= take
    off = 0
    if not size: break
  return b"".join(parts)
