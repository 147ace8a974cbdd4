"""The receive queue of an RC QP: RECV WQEs as Linux's bnxt_re posts them, scatter of SEND payloads, and the
responder's cq_res_rc completions.

Facts (Linux 6.12 drivers/infiniband/hw/bnxt_re):
  - CREATE_QP gives rq_size (WQEs), rq_pbl, rq_pg_size_rq_lvl and rq_fwo_rq_sge, the SGEs per RECV WQE: 6 in static
    mode, rq->max_sge in variable mode (qplib_fp.c bnxt_qplib_create_qp). A RECV WQE is sizeof(rq_wqe_hdr) 32 bytes
    plus 16 per SGE (ib_verbs.h bnxt_re_get_rwqe_size; ib_verbs.c bnxt_re_setup_rwqe_size), so the RQ is rq_size
    WQEs of that stride.
  - bnxt_qplib_post_recv: rq_wqe_hdr.wqe_type RCV (0x80), wqe_size = 2 + SGEs (one zero-length SGE when none),
    wr_id[0] the software index; the SGEs from byte 32. The RQ doorbell (DBC_DBC_TYPE_RQ) rings hwq->prod / max_slot
    with max_slot = wqe_size / 16 (qplib_res.h bnxt_qplib_ring_prod_db, qplib_fp.h bnxt_qplib_set_rq_max_slot): the
    index counts WQEs, its epoch flips when it wraps rq_size.
  - the completion is a cq_res_rc on the receive CQ: length, qp_handle, the toggle, status, flags (RDMA_SEND) and
    srq_or_rq_wr_id = wr_id[0] (qplib_fp.c bnxt_qplib_cq_process_res_rc).
"""
from __future__ import annotations

import dataclasses
import struct

from ...autogen import bnxt as hsi
from .state import CQ, QP

RQE_HDR = 32
SGE = 16
MR_LOCAL_WRITE = hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE


class RecvError(Exception):
  """A SEND the receive queue cannot take; .status is the cq_res_rc status of the RECV it fails."""

  def __init__(self, status: int, msg: str, wr_id: int = 0):
    self.status, self.wr_id = status, wr_id
    super().__init__(msg)


@dataclasses.dataclass
class Receive:
  """A RECV WQE taken for the SEND message in progress."""
  index: int              # absolute RQ index
  wr_id: int
  sges: list              # (MR, offset in the MR, bytes)
  capacity: int
  filled: int = 0


def rq_stride(nsge: int) -> int:
  return RQE_HDR + SGE * nsge


def take(fw, qp: QP) -> Receive | None:
  """The next posted RECV WQE, checked (type, size, SGEs: registered lkeys with LOCAL_WRITE, inside their MRs);
  None when the driver has posted none (the responder answers RNR NAK). RecvError for a malformed WQE."""
  if qp.rq_cons >= qp.rq_prod: return None
  index = qp.rq_cons
  qp.rq_cons += 1
  where = f"QP {qp.qpn:#x} RQ WQE {index % qp.rq_depth}"
  raw = qp.rq.read((index % qp.rq_depth) * qp.rq_stride, qp.rq_stride)
  hdr = hsi.struct_rq_wqe_hdr.from_buffer_copy(raw[:RQE_HDR])
  wr_id = hdr.wr_id[0] & hsi.CQ_RES_RC_SRQ_OR_RQ_WR_ID_MASK
  if hdr.wqe_type != hsi.RQ_WQE_HDR_WQE_TYPE_RCV:
    raise RecvError(hsi.CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR,
                    f"{where}: wqe_type {hdr.wqe_type:#x} is not RCV ({hsi.RQ_WQE_HDR_WQE_TYPE_RCV:#x})", wr_id)
  nsge = hdr.wqe_size - 2
  if not 0 <= nsge <= qp.rq_sge:
    raise RecvError(hsi.CQ_RES_RC_STATUS_LOCAL_QP_OPERATION_ERR,
                    f"{where}: wqe_size {hdr.wqe_size} is not 2 + at most rq_sge {qp.rq_sge} SGEs", wr_id)
  sges, capacity = [], 0
  for i in range(nsge):
    sge = hsi.struct_sq_sge.from_buffer_copy(raw[RQE_HDR + SGE * i:RQE_HDR + SGE * (i + 1)])
    if not sge.size: continue
    mr = fw.mrs.get(sge.l_key)
    if mr is None or not mr.access & MR_LOCAL_WRITE:
      raise RecvError(hsi.CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR,
                      f"{where}: SGE {i} lkey {sge.l_key:#x} is " +
                      ("not registered" if mr is None else "registered without LOCAL_WRITE"), wr_id)
    if not (mr.va <= sge.va_or_pa and sge.va_or_pa + sge.size <= mr.va + mr.size):
      raise RecvError(hsi.CQ_RES_RC_STATUS_LOCAL_PROTECTION_ERR,
                      f"{where}: SGE {i} [{sge.va_or_pa:#x}, +{sge.size:#x}) is outside MR {mr.key:#x}", wr_id)
    sges.append((mr, sge.va_or_pa - mr.va, sge.size))
    capacity += sge.size
  return Receive(index, wr_id, sges, capacity)


def scatter(rx: Receive, payload: bytes) -> bool:
  """Write the next payload of the message into the RECV's SGEs; False (nothing written) when it does not fit."""
  if rx.filled + len(payload) > rx.capacity: return False
  off, pos = rx.filled, 0
  for mr, mr_off, n in rx.sges:
    if pos >= len(payload): break
    if off >= n:
      off -= n
      continue
    take_n = min(n - off, len(payload) - pos)
    mr.mem.write(mr_off + off, payload[pos:pos + take_n])
    pos += take_n
    off = 0
  rx.filled += len(payload)
  return True


def complete(nic, qp: QP, wr_id: int, length: int, status: int) -> None:
  """Post a cq_res_rc on the QP's receive CQ: the body first, then the toggle byte."""
  cq: CQ = qp.rcq
  if cq.prod - cq.cons >= cq.depth:
    nic.error(f"CQ {cq.id:#x} overflow: {cq.prod - cq.cons} CQEs not consumed (CQ doorbell missing?)")
    return
  toggle = 1 - ((cq.prod // cq.depth) & 1)
  cqe = hsi.struct_cq_res_rc(length=length, qp_handle=qp.handle, status=status,
                             flags=hsi.CQ_RES_RC_FLAGS_RDMA_SEND, srq_or_rq_wr_id=wr_id & 0xFFFFF,
                             cqe_type_toggle=hsi.CQ_RES_RC_CQE_TYPE_RES_RC | toggle)
  raw = bytes(cqe)
  at = struct.calcsize("<IIQQ")     # the cqe_type_toggle byte
  off = (cq.prod % cq.depth) * len(raw)
  cq.mem.write(off, raw[:at])
  cq.mem.write(off + at + 1, raw[at + 1:])
  cq.mem.write(off + at, raw[at:at + 1])
  cq.prod += 1
