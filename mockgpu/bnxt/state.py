"""Object tables of the mock Thor2 firmware: rings, CQs, QPs, MRs, GIDs; and page-table walking."""
from __future__ import annotations

import dataclasses
import struct

PAGE = 4096
PTE_VALID, PTE_LAST, PTE_NEXT_TO_LAST = 0x1, 0x2, 0x4   # roce_hsi.h PTU_PTE_*
PSN_MASK = 0xFFFFFF


class ModelError(Exception):
  """A driver bug the model detected while executing a command: becomes an error status plus an entry in nic.errors."""


def walk_pbl(dma_read, base: int, level: int, npages: int, what: str, queue: bool = False) -> list[int]:
  """The physical pages a (base, level) page table describes; checks VALID bits and, for queues, LAST/NEXT_TO_LAST."""
  if level == 0:
    if npages > 1: raise ModelError(f"{what}: level 0 describes one page, {npages} needed")
    if base % PAGE: raise ModelError(f"{what}: level 0 base {base:#x} is not page-aligned")
    return [base]
  if level == 1:
    ptes = struct.unpack(f"<{npages}Q", dma_read(base, 8 * npages))
  elif level == 2:
    nleaf = (npages + 511) // 512
    pdes = struct.unpack(f"<{nleaf}Q", dma_read(base, 8 * nleaf))
    ptes = []
    for i, pde in enumerate(pdes):
      if not pde & PTE_VALID: raise ModelError(f"{what}: PDE {i} ({pde:#x}) lacks the VALID bit")
      cnt = min(512, npages - 512 * i)
      ptes += struct.unpack(f"<{cnt}Q", dma_read(pde & ~0xFFF, 8 * cnt))
  else:
    raise ModelError(f"{what}: page table level {level} is not 0, 1 or 2")
  for i, pte in enumerate(ptes):
    if not pte & PTE_VALID: raise ModelError(f"{what}: PTE {i} ({pte:#x}) lacks the VALID bit")
  if queue and npages > 1:
    if not ptes[-1] & PTE_LAST: raise ModelError(f"{what}: the last queue PTE lacks the LAST bit")
    if npages > 1 and not ptes[-2] & PTE_NEXT_TO_LAST: raise ModelError(f"{what}: queue PTE {npages - 2} lacks NEXT_TO_LAST")
  return [p & ~0xFFF for p in ptes]


class PagedMemory:
  """Bytes spread over physical pages, read and written through the DMA functions."""

  def __init__(self, nic, pages: list[int], size: int):
    self.nic, self.pages, self.size = nic, pages, size

  def _pa(self, off: int) -> int: return self.pages[off // PAGE] + off % PAGE

  def read(self, off: int, n: int) -> bytes:
    parts = []   # joined once: appending to bytes would copy the whole prefix for every page
    while n > 0:
      chunk = min(n, PAGE - off % PAGE)
      parts.append(self.nic.dma_read(self._pa(off), chunk))
      off, n = off + chunk, n - chunk
    return b"".join(parts)

  def write(self, off: int, data: bytes) -> None:
    view, pos = memoryview(data), 0   # page-sized views of data, never a copy of its tail
    while pos < len(view):
      chunk = min(len(view) - pos, PAGE - (off + pos) % PAGE)
      self.nic.dma_write(self._pa(off + pos), view[pos:pos + chunk])
      pos += chunk


@dataclasses.dataclass
class AllocatedRing:
  """A ring the driver allocated with HWRM ring_alloc (completion, NQ, RX or TX), as the model keeps it."""
  id: int
  type: int
  depth: int
  mem: PagedMemory
  nq_id: int = 0xFFFF
  prod: int = 0          # entries the model has posted (absolute)
  cons: int = 0          # entries the driver has handed back (absolute, from NQ_ARM)


@dataclasses.dataclass
class CQ:
  id: int
  handle: int
  depth: int
  mem: PagedMemory
  cnq: int
  prod: int = 0
  cons: int = 0


@dataclasses.dataclass
class MR:
  key: int
  va: int
  size: int
  access: int
  mem: PagedMemory


@dataclasses.dataclass
class Outstanding:
  """An RDMA WRITE the requester took from the SQ. Its packets are the QP's packets first .. first+npkts-1, counted
  from RTS (QP.psn_of gives their PSNs); each is built from the SGEs when it is sent, and again when it is resent."""
  first: int              # number of its first packet
  npkts: int
  end_slot: int           # absolute SQ slot just past the WQE
  signalled: bool
  remote_va: int
  rkey: int
  length: int
  sges: list              # (MR, offset in the MR, bytes) in order
  start_slot: int = 0     # absolute SQ index of the WQE (a slot in variable mode, a WQE in static mode)
  msn: int = 0            # its requester MSN (index into the MSN table modulo its size)
  kind: str = "WRITE"     # WRITE or SEND (frames.SEGMENT_OPCODES)
  status: int = 0         # nonzero: a WQE that failed when taken, completed with this status in its turn

  @property
  def end(self) -> int: return self.first + self.npkts


@dataclasses.dataclass
class QP:
  qpn: int
  handle: int
  scq: CQ
  rcq: CQ
  sq: PagedMemory
  sq_depth: int           # slots (variable mode) or WQEs (static mode)
  variable: bool
  msn_off: int            # byte offset of the MSN table in the SQ memory
  msn_entries: int
  state: str = "RESET"
  access: int = 0
  pkey: int = 0xFFFF
  dgid: bytes = bytes(16)
  sgid_index: int = 0
  dest_mac: bytes = bytes(6)
  pmtu: int = 1024
  dest_qpn: int = 0
  timeout: int = 0
  retry_cnt: int = 0
  sq_psn: int = 0         # PSN of the next packet a WQE takes
  epsn: int = 0           # responder: expected PSN
  resp_msn: int = 0       # responder: completed messages
  sq_prod: int = 0        # absolute, from the doorbell
  sq_cons: int = 0        # absolute slot of the next WQE to process
  wqe_count: int = 0      # requester MSN counter (MSN table index)
  outstanding: list = dataclasses.field(default_factory=list)
  # requester packets, counted from RTS: `posted` taken from WQEs, `tx_next` the next to (re)send, `una` the oldest
  # the responder has not acknowledged (una <= tx_next <= posted)
  posted: int = 0
  tx_next: int = 0
  una: int = 0
  retries: int = 0
  timer_start: float = 0.0   # when the ACK timer last (re)started: progress, or a (re)transmission from una
  nak_sent: bool = False
  # responder's message in progress: (mr, next va, bytes left)
  rx_msg: tuple | None = None
  # receive queue (recv.py): rq_size WQEs of rq_stride bytes; doorbell-given producer, consumer; the SEND in progress
  rq: object = None
  rq_depth: int = 0
  rq_stride: int = 0
  rq_sge: int = 0
  rq_prod: int = 0
  rq_cons: int = 0
  rx_send: object = None
  min_rnr_timer: int = 0  # the RNR timer code this responder sends in its RNR NAKs (IBTA vol. 1 Table 45)
  rnr_retry: int = 0      # RNR NAKs tolerated without progress (7: without limit, libibverbs ibv_modify_qp(3))
  rnr_retries: int = 0
  rnr_until: float = 0.0  # after an RNR NAK the requester waits until then before resending
  sq_pbl: int = 0         # the SQ page list as CREATE_QP gave it
  sq_level: int = 0
  msn_fault: str = ""     # why the MSN table is outside the SQ page list ("" when the list reaches it)

  def msn_address(self, idx: int) -> int:
    """Where the requester looks for MSN table entry idx: past a level-0 page the address runs on linearly from the
    base; through a page table it is the PTE of the table's page (the entry's page must be listed there)."""
    off = self.msn_off + 8 * idx
    if self.sq_level == 0: return self.sq_pbl + off
    return self.sq_pbl + 8 * (off // PAGE)

  def psn_of(self, packet: int) -> int:
    """The PSN of requester packet number `packet` (sq_psn belongs to packet `posted`)."""
    return (self.sq_psn - (self.posted - packet)) & PSN_MASK

  def packet_of(self, psn: int) -> int | None:
    """The packet number a PSN from the responder names, looking forward from una; None when it is older than una
    or beyond what was posted (a stale or bogus PSN)."""
    ahead = (psn - self.psn_of(self.una)) & PSN_MASK
    return self.una + ahead if self.una + ahead < self.posted else None
