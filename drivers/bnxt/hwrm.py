"""The HWRM (CHIMP) command channel in BAR0 (Linux bnxt_en bnxt_hwrm.c __hwrm_send):

  request  : written as 32-bit words into the window at BAR0+0x000, zero-filled to the window length (128 bytes)
  trigger  : 1 written to BAR0+0x100
  response : DMA'd by firmware to resp_addr; done when resp_len != 0, seq_id matches, and the last byte (valid) is 1
"""
from __future__ import annotations

import ctypes

from ...autogen import bnxt as hsi
from ...errors import DeviceError
from .dma import DMABuffer
from .poll import poll_until

HWRM_WINDOW = 0x000          # BNXT_GRCPF_REG_CHIMP_COMM
HWRM_TRIGGER = 0x100         # BNXT_GRCPF_REG_CHIMP_COMM_TRIGGER
HWRM_MAX_REQ_LEN = 128
HWRM_NO_CMPL_RING = 0xFFFF   # BNXT_HWRM_NO_CMPL_RING (-1)
HWRM_TARGET_FW = 0xFFFF      # BNXT_HWRM_TARGET
HWRM_RESP_VALID_KEY = 1

ERRORS = {getattr(hsi, n): n[len("HWRM_ERR_CODE_"):] for n in dir(hsi) if n.startswith("HWRM_ERR_CODE_")}


def _cmd(op: str, name: str):
  return (getattr(hsi, op), getattr(hsi, f"struct_hwrm_{name}_input"), getattr(hsi, f"struct_hwrm_{name}_output"))


# command name -> (req_type, request struct, response struct); all generated from bnxt_hsi.h
COMMANDS = {name: _cmd(op, name) for name, op in {
  "ver_get": "HWRM_VER_GET", "func_reset": "HWRM_FUNC_RESET", "func_qcaps": "HWRM_FUNC_QCAPS",
  "func_qcfg": "HWRM_FUNC_QCFG", "func_drv_rgtr": "HWRM_FUNC_DRV_RGTR", "port_phy_cfg": "HWRM_PORT_PHY_CFG",
  "func_backing_store_qcaps_v2": "HWRM_FUNC_BACKING_STORE_QCAPS_V2",
  "func_backing_store_cfg_v2": "HWRM_FUNC_BACKING_STORE_CFG_V2", "ring_alloc": "HWRM_RING_ALLOC",
  "stat_ctx_alloc": "HWRM_STAT_CTX_ALLOC", "vnic_alloc": "HWRM_VNIC_ALLOC", "vnic_cfg": "HWRM_VNIC_CFG",
  "cfa_l2_filter_alloc": "HWRM_CFA_L2_FILTER_ALLOC", "port_phy_qcfg": "HWRM_PORT_PHY_QCFG"}.items()}


class HWRMError(DeviceError):
  def __init__(self, device: str, command: str, code: int):
    self.command, self.code = command, code
    super().__init__(f"{device}: HWRM {command} failed with error {code:#x} ({ERRORS.get(code, 'unknown')})")


class HWRMChannel:
  def __init__(self, os, bar0, name: str, timeout_s: float):
    self.os, self.bar0, self.name, self.timeout_s = os, bar0, name, timeout_s
    self.resp = DMABuffer(os, 4096, f"{name} HWRM response page")
    self.seq = 0
    self.window = HWRM_MAX_REQ_LEN

  def call(self, command: str, timeout_s: float | None = None, **fields):
    """Send one HWRM command with the given request fields; returns the response struct (error_code checked)."""
    op, req_t, resp_t = COMMANDS[command]
    req = req_t(**fields)
    self.seq = (self.seq + 1) & 0xFFFF
    req.req_type, req.cmpl_ring, req.seq_id, req.target_id = op, HWRM_NO_CMPL_RING, self.seq, HWRM_TARGET_FW
    req.resp_addr = self.resp.paddrs[0]
    raw = bytes(req)
    if len(raw) > self.window:
      raise DeviceError(f"{self.name}: HWRM {command} request is {len(raw)} bytes, the window takes {self.window}")
    self.resp.zero()
    self.os.memory_barrier()
    self.bar0.write_bytes(HWRM_WINDOW, raw + bytes(self.window - len(raw)))
    self.bar0.write32(HWRM_TRIGGER, 1)
    resp = self._wait(command, op, resp_t, self.timeout_s if timeout_s is None else timeout_s)
    if resp.error_code: raise HWRMError(self.name, command, resp.error_code)
    return resp

  def _wait(self, command: str, op: int, resp_t, timeout_s: float):
    hdr = hsi.struct_hwrm_err_output

    def poll():
      h = hdr.from_buffer_copy(self.resp.read(0, ctypes.sizeof(hdr)))
      if not h.resp_len: return False, "resp_len 0"
      if h.seq_id != self.seq: return False, f"resp_len {h.resp_len} with seq_id {h.seq_id}"
      if h.resp_len > self.resp.size or h.resp_len < 8:
        raise DeviceError(f"{self.name}: HWRM {command} response length {h.resp_len} is impossible")
      if self.resp.view[h.resp_len - 1] != HWRM_RESP_VALID_KEY:
        return False, f"resp_len {h.resp_len}, seq_id {h.seq_id}, valid byte 0"
      self.os.memory_barrier()
      full = bytes(self.resp.read(0, max(h.resp_len, ctypes.sizeof(resp_t))))
      return True, resp_t.from_buffer_copy(full[:ctypes.sizeof(resp_t)])

    return poll_until(self.os, poll, timeout_s, f"{self.name}: HWRM {command} (req_type {op:#x}, seq_id {self.seq}) "
                      "response", "valid byte 1")
