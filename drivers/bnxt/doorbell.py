"""RoCE doorbells: one 64-bit little-endian store to BAR2 + db_off (bnxt_hsi.h `dbc_dbc`; Linux bnxt_re
qplib_res.h bnxt_qplib_ring_prod_db):

  bits  0-23  index (producer for SQ, consumer for CQ/NQ/CREQ)     DBC_DBC_INDEX_MASK
  bit  24     epoch: the wrap parity of that index                 DBC_DBC_EPOCH (kernel BNXT_QPLIB_DBR_EPOCH_SHIFT 24)
  bits 32-51  xid (QP, CQ or ring id)                              DBC_DBC_XID_MASK << 32
  bits 56-57  path (ROCE 0)                                        DBC_DBC_PATH_ROCE
  bit  58     valid                                                DBC_DBC_VALID
  bits 60-63  type (SQ 0, CQ 4, NQ_ARM 0xb, ...)                   DBC_DBC_TYPE_*
"""
from __future__ import annotations

from ...autogen import bnxt as hsi

SQ, CQ, NQ_ARM = hsi.DBC_DBC_TYPE_SQ, hsi.DBC_DBC_TYPE_CQ, hsi.DBC_DBC_TYPE_NQ_ARM


def encode(xid: int, kind: int, index: int, epoch: int) -> int:
  high = (xid & hsi.DBC_DBC_XID_MASK) | hsi.DBC_DBC_PATH_ROCE | kind | hsi.DBC_DBC_VALID
  low = (index & hsi.DBC_DBC_INDEX_MASK) | (hsi.DBC_DBC_EPOCH if epoch & 1 else 0)
  return (high << 32) | low


class RingIndex:
  """A ring's software index: the slot is index % depth, the epoch (wrap parity) is (index // depth) & 1."""

  def __init__(self, depth: int):
    self.depth, self.index = depth, 0

  @property
  def slot(self) -> int: return self.index % self.depth

  @property
  def epoch(self) -> int: return (self.index // self.depth) & 1

  def advance(self, n: int = 1) -> None: self.index += n
