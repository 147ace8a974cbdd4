"""The RCFW (RoCE firmware) command channel: CMDQ slots in host memory, responses on the CREQ ring
(Linux bnxt_re qplib_rcfw.[ch]).

  BAR0 + 0x600  cmdq_init (16 bytes: cmdq_pbl, size<<2|level, creq_ring_id, prod_idx), written once
  BAR0 + 0x60c  CMDQ producer; bit 31 (FIRMWARE_FIRST_FLAG) on the first write after cmdq_init
  BAR0 + 0x700  trigger (RCFW_CMDQ_TRIG_VAL = 1)
A command of N bytes takes ceil(N/16) 16-byte slots (cmd_size counts slots). A CREQ entry is new when its v bit equals
1 - the pass parity of the consumer; after consuming it the driver hands the entry back with NQ_ARM (index, epoch).
"""
from __future__ import annotations

import ctypes

from ...autogen import bnxt as hsi
from ...errors import DeviceError
from . import doorbell
from .dma import DMABuffer
from .poll import poll_until

RCFW_COMM_BASE = 0x600        # qplib_rcfw.h RCFW_COMM_BASE_OFFSET
RCFW_PROD = RCFW_COMM_BASE + 0xC   # RCFW_PF_VF_COMM_PROD_OFFSET
RCFW_TRIG = RCFW_COMM_BASE + 0x100  # RCFW_COMM_TRIG_OFFSET
RCFW_CMDQ_TRIG_VAL = 1
FIRMWARE_FIRST_FLAG = 1 << 31
SLOT = 16
CMDQ_DEPTH = 16               # slots of a single-page CMDQ
CREQ_DEPTH = 16
CREQ_ENTRY = 16

STATUS = {getattr(hsi, n): n[len("CREQ_QP_EVENT_STATUS_"):] for n in dir(hsi) if n.startswith("CREQ_QP_EVENT_STATUS_")}


def _cmd(name: str):
  return (getattr(hsi, f"CMDQ_BASE_OPCODE_{name.upper()}"), getattr(hsi, f"struct_cmdq_{name}"),
          getattr(hsi, f"struct_creq_{name}_resp"))


COMMANDS = {n: _cmd(n) for n in ("initialize_fw", "create_cq", "create_qp", "modify_qp", "register_mr", "add_gid")}


class RCFWError(DeviceError):
  def __init__(self, device: str, command: str, status: int):
    self.command, self.status = command, status
    super().__init__(f"{device}: RCFW {command} failed with status {status} ({STATUS.get(status, 'unknown')})")


class RCFWChannel:
  def __init__(self, os, bar0, ring_db, name: str, timeout_s: float, creq: DMABuffer, creq_ring_id: int):
    """ring_db(xid, kind, index, epoch) rings a doorbell; creq is the CREQ ring memory (allocated by HWRM ring_alloc)."""
    self.os, self.bar0, self.ring_db, self.name, self.timeout_s = os, bar0, ring_db, name, timeout_s
    self.creq, self.creq_ring_id = creq, creq_ring_id
    self.cmdq = DMABuffer(os, CMDQ_DEPTH * SLOT, f"{name} CMDQ")
    self.prod = 0
    self.creq_cons = doorbell.RingIndex(CREQ_DEPTH)
    self.first = True

  def start(self) -> None:
    """Hand the CREQ to firmware (NQ_ARM 0,0) and write cmdq_init into the mailbox."""
    self.ring_db(self.creq_ring_id, doorbell.NQ_ARM, 0, 0)
    init = hsi.struct_cmdq_init(cmdq_pbl=self.cmdq.paddrs[0], creq_ring_id=self.creq_ring_id, prod_idx=0,
                                cmdq_size_cmdq_lvl=(CMDQ_DEPTH << hsi.CMDQ_INIT_CMDQ_SIZE_SFT) | 0)
    self.bar0.write_bytes(RCFW_COMM_BASE, bytes(init))

  def call(self, command: str, timeout_s: float | None = None, **fields):
    op, req_t, resp_t = COMMANDS[command]
    req = req_t(**fields)
    raw = bytes(req)
    slots = (len(raw) + SLOT - 1) // SLOT
    req.opcode, req.cmd_size = op, slots
    raw = bytes(req).ljust(slots * SLOT, b"\0")
    for i in range(slots):
      self.cmdq.write(((self.prod + i) % CMDQ_DEPTH) * SLOT, raw[i * SLOT:(i + 1) * SLOT])
    self.prod += slots
    self.os.memory_barrier()
    prod = (self.prod & 0xFFFF) | (FIRMWARE_FIRST_FLAG if self.first else 0)
    self.first = False
    self.bar0.write32(RCFW_PROD, prod)
    self.bar0.write32(RCFW_TRIG, RCFW_CMDQ_TRIG_VAL)
    resp = self._wait(command, op, resp_t, self.timeout_s if timeout_s is None else timeout_s)
    if resp.status: raise RCFWError(self.name, command, resp.status)
    return resp

  def _wait(self, command: str, op: int, resp_t, timeout_s: float):
    def poll():
      while True:   # asynchronous events on the CREQ are consumed and skipped: they are not our response
        off = self.creq_cons.slot * CREQ_ENTRY
        ev = hsi.struct_creq_qp_event.from_buffer_copy(self.creq.read(off, ctypes.sizeof(hsi.struct_creq_qp_event)))
        if (ev.v & hsi.CREQ_QP_EVENT_V) != (1 - self.creq_cons.epoch): return False, f"v bit {ev.v & 1}"
        self.os.memory_barrier()
        entry = resp_t.from_buffer_copy(self.creq.read(off, ctypes.sizeof(resp_t)))
        self.creq_cons.advance()
        # return the credit: the consumer index and its epoch (qplib_rcfw.c bnxt_qplib_service_creq)
        self.ring_db(self.creq_ring_id, doorbell.NQ_ARM, self.creq_cons.slot, self.creq_cons.epoch)
        kind = ev.type & hsi.CREQ_BASE_TYPE_MASK
        if kind != hsi.CREQ_BASE_TYPE_QP_EVENT: continue
        if ev.event == op: return True, entry
        raise DeviceError(f"{self.name}: RCFW {command} (opcode {op:#x}): CREQ answered opcode {ev.event:#x}")

    return poll_until(self.os, poll, timeout_s, f"{self.name}: RCFW {command} (opcode {op:#x}) response on CREQ slot "
                      f"{self.creq_cons.slot}", f"v bit {1 - self.creq_cons.epoch}")
