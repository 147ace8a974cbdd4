"""RC queue pairs, completion queues and memory regions over the RCFW channel; RDMA WRITE on the send queue.

Formats (roce_hsi.h; Linux bnxt_re qplib_fp.c bnxt_qplib_post_send): an RDMA WRITE WQE is `sq_rdma_hdr` (32 B) plus
one `sq_sge`
(16 B) = 3 slots of 16 B; the SQ is created in variable-WQE mode (sizes and the doorbell index count slots, as the
kernel does on P7); for hardware retransmission each WQE also gets an 8-byte `sq_msn_search` entry (start slot, start
PSN, next PSN) in the MSN table that follows the SQ pages. A `cq_req` CQE (32 B) is new when its toggle bit equals
1 - the CQ's pass parity.
"""
from __future__ import annotations

import ctypes
import struct

from ...autogen import bnxt as hsi
from ...errors import DeviceError
from . import doorbell
from .dma import PAGE as PAGE_SIZE, DMABuffer, PageTable
from .poll import poll_until

SLOT = 16
CQE_SIZE = 32
CQ_DEPTH = 16
SQ_SLOTS = 256               # the kernel aligns variable-mode SQs to 256 slots
MSN_ENTRIES = SQ_SLOTS // 2  # kernel: roundup_pow2(sq slots) / 2 in variable mode (qplib_fp.c bnxt_qplib_create_qp)
WRITE_WQE_SLOTS = 3
STATES = {getattr(hsi, f"CMDQ_MODIFY_QP_NEW_STATE_{s}"): s for s in ("RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR")}
CQ_STATUS = {getattr(hsi, n): n[len("CQ_REQ_STATUS_"):] for n in dir(hsi) if n.startswith("CQ_REQ_STATUS_")}
PMTU_CODES = {256: hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_256, 512: hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_512,
              1024: hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_1024, 2048: hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_2048,
              4096: hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_4096}
M = hsi  # modify_qp mask bits: CMDQ_MODIFY_QP_MODIFY_MASK_*
MASK_INIT = M.CMDQ_MODIFY_QP_MODIFY_MASK_STATE | M.CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS | M.CMDQ_MODIFY_QP_MODIFY_MASK_PKEY
MASK_RTR = (MASK_INIT | M.CMDQ_MODIFY_QP_MODIFY_MASK_DGID | M.CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT | M.CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU | M.CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER | M.CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID)
MASK_RTS = (M.CMDQ_MODIFY_QP_MODIFY_MASK_STATE | M.CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT | M.CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY | M.CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC |
            M.CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN)
QP_ACCESS = hsi.CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE | hsi.CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE
MR_ACCESS = hsi.CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE | hsi.CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE
PSN_MASK = 0xFFFFFF


class CompletionError(DeviceError):
  """A work request completed with an error status; .status is the cq_req code, .status_name its name."""

  def __init__(self, qp: str, status: int, what: str):
    self.status, self.status_name = status, CQ_STATUS.get(status, "unknown")
    super().__init__(f"{qp}: {what} completed with status {status} ({self.status_name})")


def register_mr(dev, buf: DMABuffer, access: int | None = None) -> int:
  """RCFW register_mr over buf's pages (its page table level follows the page count); returns lkey == rkey."""
  return register_pages(dev, buf.paddrs, buf.va, buf.size, access)


def register_pages(dev, paddrs: list[int], va: int, size: int, access: int | None = None, what: str = "MR") -> int:
  """RCFW register_mr over any memory given by the physical addresses of its 4 KiB pages (host DMA memory, a GPU
  buffer's pages: host-visible memory, or VRAM through the GPU's BAR), seen by remote peers at va; returns
  lkey == rkey. The page table is the same format whatever the memory (qplib_sp.c bnxt_qplib_reg_mr)."""
  if size <= 0 or len(paddrs) * PAGE_SIZE < size or any(p % PAGE_SIZE for p in paddrs):
    raise DeviceError(f"{dev.name} {what}: {len(paddrs)} page addresses do not cover {size:#x} bytes in 4 KiB pages")
  pt = PageTable(dev.os, list(paddrs), what=f"{dev.name} {what}")
  dev._keep.append(pt)
  r = dev.rcfw.call("register_mr", flags=hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR, access=MR_ACCESS if access is None else access,
                    log2_pg_size_lvl=pt.level | (12 << hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_SFT),
                    log2_pbl_pg_size=12, pbl=pt.base, va=va, mr_size=size)
  return r.xid


class BNXTQP:
  """One RC QP with its own CQ (send completions only). timeout is the IB local ACK timeout exponent (4.096 us *
  2**timeout; 16 = 268 ms; 0 = no ACK timer), retry_cnt the retransmissions allowed. queue_memory(size, what) gives
  the SQ's and CQ's memory (default: the NIC driver's DMA buffers); another device's memory (a GPU's host-visible
  buffers, drivers/hcq/p2p.py QueueMemory) serves when that device posts and completes the work: any object with .va,
  .size, .paddrs (4 KiB pages), .write(offset, data) and .read(offset, size)."""

  def __init__(self, dev, pmtu: int = 1024, timeout: int = 16, retry_cnt: int = 7, queue_memory=None):
    if pmtu not in PMTU_CODES: raise DeviceError(f"{dev.name}: path MTU {pmtu} is not one of {sorted(PMTU_CODES)}")
    self.dev, self.pmtu, self.ack_timeout, self.retry_cnt = dev, pmtu, timeout, retry_cnt
    self._queue_memory = queue_memory or dev._dma
    self.cq = self._queue_memory(CQ_DEPTH * CQE_SIZE, "CQ")
    self.cq_cons = doorbell.RingIndex(CQ_DEPTH)
    r = dev.rcfw.call("create_cq", cq_handle=self.cq.va, cq_size=CQ_DEPTH, pbl=self.cq.paddrs[0],
                      pg_size_lvl=hsi.CMDQ_CREATE_CQ_LVL_LVL_0 | hsi.CMDQ_CREATE_CQ_PG_SIZE_PG_4K,
                      cq_fco_cnq_id=dev.nq_id & hsi.CMDQ_CREATE_CQ_CNQ_ID_MASK)
    self.cq_id = r.xid
    sq_size, sq_level, sq_pbl, qp_flags = self._sq_layout()
    self.handle = self.sq.va
    fields = dict(qp_handle=self.handle, type=hsi.CMDQ_CREATE_QP_TYPE_RC, qp_flags=qp_flags,
                  sq_pg_size_sq_lvl=sq_level | hsi.CMDQ_CREATE_QP_SQ_PG_SIZE_PG_4K, sq_size=sq_size,
                  sq_fwo_sq_sge=1, scq_cid=self.cq_id, rcq_cid=self.cq_id, pd_id=0, sq_pbl=sq_pbl)
    r = dev.rcfw.call("create_qp", **{**fields, **self._rq_fields()})
    self.qpn = r.xid
    self.name = f"{dev.name} QP {self.qpn:#x}"
    self.msn = 0
    self.psn = 0
    self.state = "RESET"
    self._modify("INIT", MASK_INIT, access=QP_ACCESS, pkey=0xFFFF)

  def _sq_layout(self) -> tuple[int, int, int, int]:
    """Allocate the SQ (self.sq, self.msn_off, self.msn_entries, self.sq_prod); returns CREATE_QP's (sq_size,
    page-table level, page-table base, qp_flags). Variable-WQE mode: SQ_SLOTS 16-byte slots, then the MSN table on the following page,
    all in one queue page list (qplib_fp.c bnxt_qplib_create_qp: the table is the queue's aux area)."""
    self.sq = self._queue_memory(SQ_SLOTS * SLOT + MSN_ENTRIES * 8, "SQ")
    self.msn_off, self.msn_entries = SQ_SLOTS * SLOT, MSN_ENTRIES
    self.sq_prod = doorbell.RingIndex(SQ_SLOTS)     # the doorbell's producer index, in slots
    pt = self.dev._pbl(self.sq, queue=True, what="SQ")
    return SQ_SLOTS, pt.level, pt.base, hsi.CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED

  def _rq_fields(self) -> dict:
    """CREATE_QP's receive-queue fields (they replace the defaults); none: this QP only sends RDMA WRITEs (a SEND to
    it is refused)."""
    return {}

  def _modify(self, state: str, mask: int, **fields) -> None:
    code = getattr(hsi, f"CMDQ_MODIFY_QP_NEW_STATE_{state}")
    self.dev.rcfw.call("modify_qp", qp_cid=self.qpn, modify_mask=mask, qp_type=hsi.CMDQ_CREATE_QP_TYPE_RC,
                       network_type_en_sqd_async_notify_new_state=code | hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4,
                       **fields)
    self.state = state

  def connect(self, remote_qpn: int, remote_gid: bytes, remote_mac: bytes, rq_psn: int = 0, sq_psn: int = 0) -> None:
    """INIT -> RTR (the path to the remote QP) -> RTS."""
    if self.dev.gid_index is None: raise DeviceError(f"{self.name}: connect before set_ip (no source GID)")
    if len(remote_gid) != 16 or len(remote_mac) != 6: raise DeviceError(f"{self.name}: GID is 16 bytes, MAC 6")
    self._modify("RTR", MASK_RTR, access=QP_ACCESS, pkey=0xFFFF,
                 dgid=(ctypes.c_uint32 * 4)(*struct.unpack("<4I", remote_gid)),       # network order, kept as is
                 sgid_index=self.dev.gid_index, hop_limit=64,
                 dest_mac=(ctypes.c_uint16 * 3)(*struct.unpack("<3H", remote_mac)),
                 path_mtu_pingpong_push_enable=PMTU_CODES[self.pmtu], rq_psn=rq_psn, min_rnr_timer=0,
                 max_dest_rd_atomic=4, dest_qp_id=remote_qpn)
    self.psn = sq_psn & PSN_MASK
    self._modify("RTS", MASK_RTS, access=QP_ACCESS, timeout=self.ack_timeout, retry_cnt=self.retry_cnt, rnr_retry=7,
                 max_rd_atomic=1, sq_psn=self.psn)

  def rdma_write(self, remote_va: int, rkey: int, local_va: int, lkey: int, size: int,
                 timeout_s: float | None = None) -> None:
    """Post one signalled RDMA WRITE and wait for its completion; raises CompletionError on an error status."""
    start_slot = self._place(self._write_wqe(remote_va, rkey, local_va, lkey, size))
    offset, entry = self._msn_entry(start_slot, size)
    self.sq.write(offset, entry)
    self.dev.ring_db(self.qpn, doorbell.SQ, self.sq_prod.slot, self.sq_prod.epoch)
    cqe = self.poll_cq(self.dev.timeout_s if timeout_s is None else timeout_s, f"RDMA WRITE of {size} bytes")
    if cqe.status != hsi.CQ_REQ_STATUS_OK:
      self.state = "ERR"
      raise CompletionError(self.name, cqe.status, f"RDMA WRITE of {size} bytes to {remote_va:#x} (rkey {rkey:#x})")

  def _write_wqe(self, remote_va: int, rkey: int, local_va: int, lkey: int, size: int) -> bytes:
    if self.state != "RTS": raise DeviceError(f"{self.name}: RDMA WRITE refused, the QP is in {self.state}, not RTS")
    hdr = hsi.struct_sq_rdma_hdr(wqe_type=hsi.SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE, flags=hsi.SQ_RDMA_HDR_FLAGS_SIGNAL_COMP,
                                 wqe_size=WRITE_WQE_SLOTS, length=size, remote_va=remote_va, remote_key=rkey)
    return bytes(hdr) + bytes(hsi.struct_sq_sge(va_or_pa=local_va, l_key=lkey, size=size))

  def _msn_entry(self, start_slot: int, size: int) -> tuple[int, bytes]:
    """The MSN table entry of the WQE at start_slot (its offset in the SQ buffer, its bytes); advances the MSN and
    the PSN by the message's packets."""
    npkts = max(1, -(-size // self.pmtu))
    entry = (start_slot << hsi.SQ_MSN_SEARCH_START_IDX_SFT) | \
            (((self.psn + npkts) & PSN_MASK) << hsi.SQ_MSN_SEARCH_NEXT_PSN_SFT) | self.psn
    offset = self.msn_off + (self.msn % self.msn_entries) * 8
    self.msn += 1
    self.psn = (self.psn + npkts) & PSN_MASK
    return offset, struct.pack("<Q", entry)

  def _wqe_stores(self, wqe: bytes) -> tuple[int, list]:
    """Reserve the slots of a WQE at the producer: (its start slot, the stores (offset in the SQ, 16 bytes) that
    place it). Variable mode: the WQE takes len/16 slots and the doorbell index counts slots (qplib_fp.c
    bnxt_qplib_post_send)."""
    start, n = self.sq_prod.slot, len(wqe) // SLOT
    stores = [(((start + i) % SQ_SLOTS) * SLOT, wqe[i * SLOT:(i + 1) * SLOT]) for i in range(n)]
    self.sq_prod.advance(n)
    return start, stores

  def _place(self, wqe: bytes) -> int:
    """Write a WQE at the producer and advance it; returns the WQE's start slot (for its MSN table entry)."""
    start, stores = self._wqe_stores(wqe)
    for offset, data in stores: self.sq.write(offset, data)
    return start

  def prepare_write(self, remote_va: int, rkey: int, local_va: int, lkey: int, size: int) -> tuple[list, int]:
    """Reserve the SQ slots, the MSN table entry and the PSNs of one signalled RDMA WRITE for a poster that is not the
    CPU (a GPU queue: gpuq.py): returns the stores that post it ((offset in the SQ buffer, bytes): the WQE slot by
    slot, then its MSN entry) and the doorbell value to write after them (one 64-bit store at BAR2 + db_off), to be
    issued in that order. Variable-mode layout (this class's)."""
    start_slot, stores = self._wqe_stores(self._write_wqe(remote_va, rkey, local_va, lkey, size))
    stores.append(self._msn_entry(start_slot, size))
    return stores, doorbell.encode(self.qpn, doorbell.SQ, self.sq_prod.slot, self.sq_prod.epoch)

  def take_completion(self) -> tuple[int, int, int]:
    """Reserve the next CQE for a consumer that is not the CPU (a GPU queue): (its offset in the CQ buffer, the toggle
    bit that makes it new, the CQ doorbell value that returns it after it was read)."""
    offset, toggle = self.cq_cons.slot * CQE_SIZE, 1 - self.cq_cons.epoch
    self.cq_cons.advance()
    return offset, toggle, doorbell.encode(self.cq_id, doorbell.CQ, self.cq_cons.slot, self.cq_cons.epoch)

  def poll_cq(self, timeout_s: float, what: str):
    def poll():
      cqe = hsi.struct_cq_req.from_buffer_copy(self.cq.read(self.cq_cons.slot * CQE_SIZE, CQE_SIZE))
      if (cqe.cqe_type_toggle & hsi.CQ_REQ_TOGGLE) != 1 - self.cq_cons.epoch:
        return False, f"toggle {cqe.cqe_type_toggle & 1}"
      self.dev.os.memory_barrier()
      self.cq_cons.advance()
      self.dev.ring_db(self.cq_id, doorbell.CQ, self.cq_cons.slot, self.cq_cons.epoch)
      if cqe.qp_handle != self.handle:
        raise DeviceError(f"{self.name}: CQE for qp_handle {cqe.qp_handle:#x}, expected {self.handle:#x}")
      return True, cqe

    return poll_until(self.dev.os, poll, timeout_s, f"{self.name}: completion of {what} on CQ {self.cq_id:#x} slot "
                      f"{self.cq_cons.slot}", f"toggle {1 - self.cq_cons.epoch}")
