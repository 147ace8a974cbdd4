"""Variants of our own BNXT driver that send other (legal) layouts, written by us from the facts they exercise.

RefLayoutDev / RefLayoutQP send what issue 35 says a hardware-proven driver of the reference lineage sends to real
Thor2 NICs (its code is not available to us; these reproduce the described layouts and sequences only):
  - the backing-store context-init byte at ctx_init_offset *bytes* into each entry (Linux writes it at 4 x the offset:
    bnxt_en bnxt.c bnxt_init_ctx_initializer);
  - CREATE_QP without VARIABLE_SIZED_WQE_ENABLED (static mode) while the WQEs are written as compact 16-byte slots
    and the SQ doorbell index counts slots (BNXTQP._place, as in variable mode);
  - a one-page SQ page list (level 0) with the MSN table on the page after it, outside the list.
StaticQP is a static-mode QP laid out as Linux's qplib does it (qplib_fp.c bnxt_qplib_post_send and
bnxt_qplib_required_slots: every WQE takes 128 bytes; qplib_res.h bnxt_qplib_ring_prod_db: the doorbell index is
hwq->prod / max_slot, max_slot 8, so it counts WQEs; bnxt_qplib_fill_msn_search: start_idx is hwq->prod in slots).
"""
from __future__ import annotations

import struct

from hcq.autogen import bnxt as hsi
from hcq.drivers.bnxt import doorbell
from hcq.drivers.bnxt.device import BNXTDev
from hcq.drivers.bnxt.dma import PAGE
from hcq.drivers.bnxt.poll import poll_until
from hcq.drivers.bnxt.qp import SLOT, BNXTQP

STATIC_WQE = 128                   # roce_hsi.h struct sq_send
STATIC_WQES = PAGE // STATIC_WQE   # static-mode WQEs in one page: sq_size counts WQEs in static mode


class RefLayoutDev(BNXTDev):
  """Writes the context-init byte at ctx_init_offset bytes (not 4-byte units)."""

  @staticmethod
  def _ctx_init(buf, n: int, entry_size: int, value: int, offset: int) -> None:
    for e in range(n): buf.view[e * entry_size + offset] = value


class RefLayoutQP(BNXTQP):
  """Static-mode CREATE_QP over one described page (sq_size STATIC_WQES), the MSN table on the next page (outside the
  page list); WQEs and the doorbell as in variable mode (compact 16-byte slots, slot index)."""

  def _sq_layout(self):
    self.sq = self.dev._dma(2 * PAGE, "SQ and MSN table")
    self.msn_off, self.msn_entries = PAGE, STATIC_WQES     # roundup_pow_of_two(sq_size) entries in static mode
    self.sq_prod = doorbell.RingIndex(PAGE // SLOT)         # slots of the one page
    return STATIC_WQES, 0, self.sq.paddrs[0], 0


class StaticQP(BNXTQP):
  """Static-mode QP as Linux lays it out: sq_size WQEs of 128 bytes, the MSN table (roundup_pow_of_two(sq_size)
  entries) on the page after them in the same queue page list, the doorbell index counting WQEs."""

  def __init__(self, dev, sq_wqes: int = STATIC_WQES, **kw):
    self.sq_wqes = sq_wqes
    super().__init__(dev, **kw)

  def _sq_layout(self):
    sq_bytes = self.sq_wqes * STATIC_WQE
    self.msn_off = -(-sq_bytes // PAGE) * PAGE
    self.msn_entries = 1 << (self.sq_wqes - 1).bit_length()
    self.sq = self.dev._dma(self.msn_off + self.msn_entries * 8, "static SQ")
    pt = self.dev._pbl(self.sq, queue=True, what="static SQ")
    self.sq_prod = doorbell.RingIndex(self.sq_wqes)         # counts WQEs
    return self.sq_wqes, pt.level, pt.base, 0

  def _place(self, wqe: bytes) -> int:
    k = self.sq_prod.slot
    self.sq.write(k * STATIC_WQE, wqe.ljust(STATIC_WQE, b"\0"))
    self.sq_prod.advance(1)
    return k * (STATIC_WQE // SLOT)      # the MSN entry's start_idx counts slots: 8 per static WQE


def write_wqe(qp: BNXTQP, wqe_type: int, remote_va: int, rkey: int, local_va: int, lkey: int, size: int,
              signalled: bool = True) -> None:
  """Place one WQE of any type with one SGE (an sq_rdma_hdr-shaped header) and its MSN entry, without ringing."""
  hdr = hsi.struct_sq_rdma_hdr(wqe_type=wqe_type, flags=hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP if signalled else 0,
                               wqe_size=3, length=size, remote_va=remote_va, remote_key=rkey)
  start = qp._place(bytes(hdr) + bytes(hsi.struct_sq_sge(va_or_pa=local_va, l_key=lkey, size=size)))
  npkts = max(1, -(-size // qp.pmtu))
  entry = (start << hsi.SQ_MSN_SEARCH_START_IDX_SFT) | \
          (((qp.psn + npkts) & 0xFFFFFF) << hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT) | qp.psn
  qp.sq.write(qp.msn_off + (qp.msn % qp.msn_entries) * 8, struct.pack("<Q", entry))
  qp.msn += 1
  qp.psn = (qp.psn + npkts) & 0xFFFFFF


def ring(qp: BNXTQP) -> None:
  qp.dev.ring_db(qp.qpn, doorbell.SQ, qp.sq_prod.slot, qp.sq_prod.epoch)


def open_variant(os, nic, cls=RefLayoutDev, ip="10.0.200.5"):
  from hcq.drivers.system.pci import PCIDevice
  dev = cls(PCIDevice(os, nic.addr), os, os.config)
  if ip: dev.set_ip(ip)
  return dev


class SendRecvQP(BNXTQP):
  """A QP with a receive queue and its own receive CQ, posting SEND and RECV as Linux's bnxt_re does (qplib_fp.c
  bnxt_qplib_post_send: sq_send_hdr + SGEs; bnxt_qplib_post_recv: rq_wqe_hdr RCV with wr_id[0], then the SGEs;
  RQ WQE stride sizeof(rq_wqe_hdr) + 16 * rq_sge; the RQ doorbell index counts WQEs)."""
  RQ_WQES, RQ_SGE = 16, 2

  def _rq_fields(self) -> dict:
    self.rcq = self.dev._dma(16 * 32, "receive CQ")
    self.rcq_cons = doorbell.RingIndex(16)
    r = self.dev.rcfw.call("create_cq", cq_handle=self.rcq.va, cq_size=16, pbl=self.rcq.paddrs[0],
                           pg_size_lvl=hsi.CMDQ_CREATE_CQ_LVL_LVL_0 | hsi.CMDQ_CREATE_CQ_PG_SIZE_PG_4K,
                           cq_fco_cnq_id=self.dev.nq_id & hsi.CMDQ_CREATE_CQ_CNQ_ID_MASK)
    self.rcq_id = r.xid
    self.rq_stride = 32 + 16 * self.RQ_SGE
    self.rq = self.dev._dma(self.RQ_WQES * self.rq_stride, "RQ")
    pt = self.dev._pbl(self.rq, queue=True, what="RQ")
    self.rq_prod = doorbell.RingIndex(self.RQ_WQES)
    return dict(rq_size=self.RQ_WQES, rq_pbl=pt.base, rq_pg_size_rq_lvl=pt.level | hsi.CMDQ_CREATE_QP_RQ_PG_SIZE_PG_4K,
                rq_fwo_rq_sge=self.RQ_SGE << hsi.CMDQ_CREATE_QP_RQ_SGE_SFT, rcq_cid=self.rcq_id)

  def post_recv(self, sges: list[tuple[int, int, int]], wr_id: int, ring: bool = True) -> None:
    """One RECV WQE of (va, lkey, size) SGEs."""
    k = self.rq_prod.slot
    body = b"".join(bytes(hsi.struct_sq_sge(va_or_pa=va, l_key=key, size=n)) for va, key, n in sges) or bytes(16)
    hdr = hsi.struct_rq_wqe_hdr(wqe_type=hsi.RQ_WQE_HDR_WQE_TYPE_RCV, wqe_size=2 + max(1, len(sges)))
    hdr.wr_id[0] = wr_id
    self.rq.write(k * self.rq_stride, (bytes(hdr) + body).ljust(self.rq_stride, b"\0"))
    self.rq_prod.advance(1)
    if ring: self.dev.ring_db(self.qpn, hsi.DBC_DBC_TYPE_RQ, self.rq_prod.slot, self.rq_prod.epoch)

  def post_send(self, local_va: int, lkey: int, size: int) -> None:
    """One signalled SEND (one SGE) and its MSN entry; rings the SQ doorbell."""
    hdr = hsi.struct_sq_send_hdr(wqe_type=hsi.SQ_BASE_WQE_TYPE_SEND, flags=hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP,
                                 wqe_size=3, length=size)
    start = self._place(bytes(hdr) + bytes(hsi.struct_sq_sge(va_or_pa=local_va, l_key=lkey, size=size)))
    npkts = max(1, -(-size // self.pmtu))
    entry = (start << hsi.SQ_MSN_SEARCH_START_IDX_SFT) | \
            (((self.psn + npkts) & 0xFFFFFF) << hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT) | self.psn
    self.sq.write(self.msn_off + (self.msn % self.msn_entries) * 8, struct.pack("<Q", entry))
    self.msn += 1
    self.psn = (self.psn + npkts) & 0xFFFFFF
    ring(self)

  def poll_recv(self, timeout_s: float):
    """The next cq_res_rc on the receive CQ."""
    def poll():
      cqe = hsi.struct_cq_res_rc.from_buffer_copy(self.rcq.read(self.rcq_cons.slot * 32, 32))
      if (cqe.cqe_type_toggle & hsi.CQ_RES_RC_TOGGLE) != 1 - self.rcq_cons.epoch: return False, "no CQE"
      self.rcq_cons.advance()
      self.dev.ring_db(self.rcq_id, doorbell.CQ, self.rcq_cons.slot, self.rcq_cons.epoch)
      return True, cqe

    return poll_until(self.dev.os, poll, timeout_s, f"{self.name}: receive completion on CQ {self.rcq_id:#x}", "a CQE")

  def __init__(self, dev, rnr_retry: int = 7, **kw):
    self.rnr_retry_cnt = rnr_retry
    super().__init__(dev, **kw)

  def _modify(self, state: str, mask: int, **fields) -> None:
    if state == "RTR": fields["min_rnr_timer"] = 1      # IBTA vol. 1 Table 45 code 1: 0.01 ms
    if state == "RTS": fields["rnr_retry"] = self.rnr_retry_cnt
    super()._modify(state, mask, **fields)
