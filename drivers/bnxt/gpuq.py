"""A queue pair posted and completed by a GPU queue: the WQE, its MSN table entry and the doorbell become memory
elements of a GPU queue program (drivers/hcq/memops.py), so that a GPU engine posts an RDMA WRITE and waits for its
completion with no CPU in between. The CPU only reserves the slots (BNXTQP.prepare_write / take_completion) while it
builds the submission.

What the GPU must reach, mapped once through the GPU driver (the protocol of drivers/hcq/p2p.py: map_host,
map_peer_bar):
  - the SQ (WQEs and the MSN table) and the CQ: host DMA memory of this driver mapped to the GPU (KFD: USERPTR), or
    the GPU's own host-visible memory when the QP was made with it (BNXTQP(queue_memory=p2p.QueueMemory(gpu)): what an
    AM GPU needs, whose engines reach host memory only at the addresses its driver hands out);
  - the doorbell: the BAR2 page holding db_off (one 64-bit store: bnxt_hsi.h dbc_dbc; Linux bnxt_re qplib_res.h
    bnxt_qplib_ring_prod_db).
A completion is new when the toggle bit of its cq_req equals 1 - the CQ's pass parity; the GPU waits until the dword
holding cqe_type_toggle and status (roce_hsi.h struct cq_req, byte 24 and 25) shows that toggle (one bit: what every
GPU engine can wait on, NV's host semaphores included: ACQ_AND / ACQ_NOR), then returns the entry with the CQ
doorbell. Its status is the host's to judge when the submission's timeline value is reached (retire): an error
completion ends the GPU's wait as a good one does, and p2p.wait raises a CompletionError naming the QP, the PSN and
the status at once instead of at the device timeout. For that the entries must still be there: at most CQ_DEPTH
completions may wait unchecked (wait_completion refuses more). When nothing comes back the submission's timeline
wait ends in a timeout, and diagnose() names the QP and the PSN the NIC was to complete.
"""
from __future__ import annotations

import ctypes

from ...autogen import bnxt as hsi
from ...errors import DeviceError, Timeout
from ..hcq import memops
from .dma import PAGE
from .qp import CQ_DEPTH, CompletionError

CQE_TOGGLE_DWORD = hsi.struct_cq_req.cqe_type_toggle.offset      # 24: cqe_type_toggle, status, reserved16_2
CQE_STATUS_SHIFT = 8 * (hsi.struct_cq_req.status.offset - CQE_TOGGLE_DWORD)
CQE_WAIT_MASK = hsi.CQ_REQ_TOGGLE


def coalesce(stores: list) -> list:
  """(offset, bytes) stores merged where they are contiguous (one WRITE_DATA per run), order kept."""
  out: list = []
  for offset, data in stores:
    if out and out[-1][0] + len(out[-1][1]) == offset: out[-1] = (out[-1][0], out[-1][1] + data)
    else: out.append((offset, data))
  return out


class GPUPoster:
  """qp posted by `gpu`'s queues. gpu provides map_host(va, size, what) -> GPU address and map_peer_bar(resource,
  size, offset, what) -> GPU address (drivers/hcq/p2p.py)."""

  def __init__(self, qp, gpu):
    dev = qp.dev
    self.qp, self.gpu = qp, gpu
    # the queues: already the GPU's (the QP was made with the GPU's queue memory: p2p.QueueMemory), else mapped to it
    self.sq_va = self._reach(qp.sq, f"{qp.name} SQ")
    self.cq_va = self._reach(qp.cq, f"{qp.name} CQ")
    page = dev.db_off & ~(PAGE - 1)
    self.db_va = gpu.map_peer_bar(dev.pci, 2, PAGE, page, f"{dev.name} doorbell page (BAR2+{page:#x})") + \
      dev.db_off - page
    # completions the GPU waits for: those of the submission being built (_new), then by its timeline value until
    # the host saw it complete (retire): (CQ offset, toggle, first PSN, what)
    self._new: list[tuple[int, int, int, str]] = []
    self.pending: dict[int, list] = {}

  def _reach(self, mem, what: str) -> int:
    if getattr(mem, "device", None) is self.gpu: return mem.va
    return self.gpu.map_host(mem.va, mem.size, what)

  def post_write(self, remote_va: int, rkey: int, local_va: int, lkey: int, size: int) -> list:
    """The elements that post one signalled RDMA WRITE: the WQE and MSN entry stores, then the doorbell."""
    psn = self.qp.psn
    stores, db = self.qp.prepare_write(remote_va, rkey, local_va, lkey, size)
    self._last = (psn, f"RDMA WRITE of {size} bytes to {remote_va:#x} (rkey {rkey:#x})")
    return [memops.write(self.sq_va + off, data) for off, data in coalesce(stores)] + [memops.store64(self.db_va, db)]

  def room(self, completions: int) -> None:
    """Refuse, before anything is reserved in the SQ or CQ, a submission whose completions would make more than the
    CQ holds unchecked (retire reads each entry: the CQ must not have wrapped over it)."""
    unchecked = sum(len(e) for e in self.pending.values()) + len(self._new)
    if unchecked + completions > CQ_DEPTH:
      raise DeviceError(f"{self.qp.name}: {unchecked} completions posted by the GPU queue are not checked yet; "
                        f"{completions} more would overwrite them in the {CQ_DEPTH}-entry CQ: wait (p2p.wait) for the "
                        f"earlier copies first")

  def wait_completion(self) -> list:
    """The elements that wait for the next completion (its toggle bit) and hand its CQ entry back (CQ doorbell);
    its status is checked by retire()."""
    self.room(1)
    offset, toggle, db = self.qp.take_completion()
    psn, what = getattr(self, "_last", (self.qp.psn, "work request"))
    self._new.append((offset, toggle, psn, what))
    return [memops.wait_eq(self.cq_va + offset + CQE_TOGGLE_DWORD, toggle, CQE_WAIT_MASK), memops.store64(self.db_va, db)]

  def submitted(self, value: int) -> None:
    """The completions waited for since the last call belong to the submission with timeline value `value`."""
    if self._new: self.pending[value], self._new = self._new, []

  def _read(self, offset: int):
    return hsi.struct_cq_req.from_buffer_copy(self.qp.cq.read(offset, ctypes.sizeof(hsi.struct_cq_req)))

  def retire(self, value: int) -> None:
    """The host saw the timeline reach value: the GPU saw those submissions' completions. Each one's status is read
    now; the first that is not OK raises its CompletionError (the QP is in error then, as the NIC moved it)."""
    done = sorted(v for v in self.pending if v <= value)
    entries = [e for v in done for e in self.pending.pop(v)]
    for offset, toggle, psn, what in entries:
      cqe = self._read(offset)
      if (cqe.cqe_type_toggle & hsi.CQ_REQ_TOGGLE) == toggle and cqe.status != hsi.CQ_REQ_STATUS_OK:
        self.qp.state = "ERR"
        raise CompletionError(self.qp.name, cqe.status, f"{what} (PSN {psn:#x}), posted by the GPU queue")

  def diagnose(self, error: Timeout, value: int | None = None) -> DeviceError:
    """After a GPU wait on this QP timed out (for timeline value `value`, or any): a CompletionError for the first
    outstanding entry that came back with an error status, else a Timeout naming the QP and the PSN the NIC was to
    complete first (the remote never answered)."""
    qp = self.qp
    entries = [e for v in sorted(self.pending) if value is None or v <= value for e in self.pending[v]]
    for offset, toggle, psn, what in entries:
      cqe = self._read(offset)
      if (cqe.cqe_type_toggle & hsi.CQ_REQ_TOGGLE) != toggle:
        return Timeout(f"{qp.name}: completion of {what} (PSN {psn:#x}) on CQ {qp.cq_id:#x}, awaited by the GPU queue "
                       f"({error.what})", f"toggle {toggle}", f"toggle {1 - toggle}", error.timeout_s)
      if cqe.status != hsi.CQ_REQ_STATUS_OK:
        qp.state = "ERR"
        return CompletionError(qp.name, cqe.status, f"{what} (PSN {psn:#x}), posted by the GPU queue")
    return error
