"""The mock Thor2 firmware: HWRM (CHIMP) and RCFW command handlers over the object tables in state.py.

Layouts are the generated bnxt bindings (bnxt_hsi.h, roce_hsi.h); behaviour, with its Linux sources and its deliberate
leniencies and strictness: mockgpu/bnxt/README.md.
"""
from __future__ import annotations

import ctypes
import struct

from ...autogen import bnxt as hsi
from .recv import rq_stride
from .state import CQ, MR, PAGE, QP, ModelError, PagedMemory, AllocatedRing, walk_pbl

E = hsi  # HWRM_ERR_CODE_*, CREQ_QP_EVENT_STATUS_*


def _hwrm(name: str):
  return getattr(hsi, f"struct_hwrm_{name}_input"), getattr(hsi, f"struct_hwrm_{name}_output")


class HWRMReject(Exception):
  def __init__(self, code: int, msg: str):
    self.code = code
    super().__init__(msg)


# backing-store capabilities the mock reports: type -> (entry_size, min, max, entry_multiple, splits, init offset)
BS_CAPS = {
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_QP: (64, 32, 4096, 2, (16, 32), 2),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_SRQ: (64, 16, 4096, 1, (), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_CQ: (64, 32, 4096, 1, (16, 16), 1),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_VNIC: (64, 8, 256, 1, (), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_STAT: (32, 16, 256, 1, (), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_SP_TQM_RING: (64, 16, 256, 1, (), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_FP_TQM_RING: (64, 16, 256, 1, (), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_MRAV: (64, 32, 4096, 1, (32,), 0),
  hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_TIM: (16, 0, 4096, 1, (), 0),
}
CTX_INIT_VALUE = 0xFF
SLOT, STATIC_WQE_BYTES = 16, 128   # roce_hsi.h struct sq_sge (a slot), struct sq_send (a static-mode WQE)
BS_NAMES = {getattr(hsi, n): n[len("FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_"):] for n in dir(hsi)
            if n.startswith("FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_") and not n.endswith(("_LAST", "_INVALID"))}
PMTU = {hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_256: 256, hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_512: 512,
        hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_1024: 1024, hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_2048: 2048,
        hsi.CMDQ_MODIFY_QP_PATH_MTU_MTU_4096: 4096}
STATE_NAMES = {0: "RESET", 1: "INIT", 2: "RTR", 3: "RTS", 4: "SQD", 5: "SQE", 6: "ERR"}
LEGAL = {("RESET", "INIT"), ("INIT", "INIT"), ("INIT", "RTR"), ("RTR", "RTS"), ("RTS", "RTS")}
M = hsi
REQUIRED_MASK = {
  "INIT": M.CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS | M.CMDQ_MODIFY_QP_MODIFY_MASK_PKEY,
  "RTR": M.CMDQ_MODIFY_QP_MODIFY_MASK_DGID | M.CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX |
         M.CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC | M.CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU |
         M.CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID | M.CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN,
  "RTS": M.CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN,
}


class Firmware:
  def __init__(self, nic):
    self.nic = nic
    self.rng = nic.rng
    self.reset()

  def reset(self) -> None:
    self.version_seen = self.registered = self.bs_done = self.fw_initialized = False
    self.bs: dict[tuple[int, int], int] = {}
    self.rings: dict[int, AllocatedRing] = {}
    self.stat_ctxs: dict[int, tuple[int, int]] = {}
    self.vnics: dict[int, dict] = {}
    self.l2_filters: dict[bytes, int] = {}
    self.gids: dict[int, tuple[bytes, bytes]] = {}
    self.cqs: dict[int, CQ] = {}
    self.qps: dict[int, QP] = {}
    self.mrs: dict[int, MR] = {}
    self.last_seq: int | None = None
    self.next_id = 1
    self.next_qpn = self.rng.randrange(0x40, 0x400)

  def _id(self) -> int:
    self.next_id += 1
    return self.next_id

  # ================================================================ HWRM
  def hwrm(self, raw: bytes) -> tuple[int, bytes] | None:
    """Execute one request; returns (seq_id-carrying response bytes) or None for silence."""
    hdr = hsi.struct_hwrm_err_output  # only for its size; the input header is parsed by hand below
    req_type, cmpl_ring, seq_id, target_id, resp_addr = struct.unpack_from("<HHHHQ", raw)
    handler = getattr(self, f"_hwrm_{req_type:x}", None)
    name = HWRM_NAMES.get(req_type, f"req_type {req_type:#x}")
    if target_id != 0xFFFF: self.nic.error(f"HWRM {name}: target_id {target_id:#x} is not 0xffff (firmware)")
    if cmpl_ring != 0xFFFF: self.nic.error(f"HWRM {name}: cmpl_ring {cmpl_ring:#x} but no completion ring is polled")
    if self.last_seq is not None and seq_id == self.last_seq: self.nic.error(f"HWRM {name}: seq_id {seq_id} repeated")
    self.last_seq = seq_id
    if name in self.nic.silent_hwrm:
      self.nic.log(f"HWRM {name}: firmware stays silent (fault injection)")
      return None
    if handler is None: out, code = hsi.struct_hwrm_err_output(), E.HWRM_ERR_CODE_CMD_NOT_SUPPORTED
    else:
      in_t, out_t = handler.types
      req = in_t.from_buffer_copy(raw[:ctypes.sizeof(in_t)])
      out, code = out_t(), 0
      try: handler(req, out)
      except HWRMReject as e:
        code = e.code
        self.nic.error(f"HWRM {name}: {e}")
        out = hsi.struct_hwrm_err_output()
      except ModelError as e:
        code = E.HWRM_ERR_CODE_INVALID_PARAMS
        self.nic.error(f"HWRM {name}: {e}")
        out = hsi.struct_hwrm_err_output()
    out.error_code, out.req_type, out.seq_id, out.resp_len = code, req_type, seq_id, ctypes.sizeof(out)
    body = bytearray(bytes(out))
    body[-1] = 1   # valid (HWRM_RESP_VALID_KEY)
    return resp_addr, bytes(body)

  def _need_registered(self, what: str) -> None:
    if not self.registered: raise HWRMReject(E.HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED, f"{what} before func_drv_rgtr")

  def _hwrm_0(self, req, out):  # ver_get
    self.version_seen = True
    out.hwrm_intf_maj_8b, out.hwrm_intf_min_8b, out.hwrm_intf_upd_8b = 1, 10, 2
    out.hwrm_fw_maj_8b, out.hwrm_fw_min_8b, out.hwrm_fw_bld_8b = 230, 2, 49
    out.chip_num, out.max_req_win_len, out.max_resp_len = self.nic.device_id, 128, 4096
    out.def_req_timeout, out.dev_caps_cfg = 500, 0   # SHORT_CMD_REQUIRED clear
  _hwrm_0.types = _hwrm("ver_get")

  def _hwrm_11(self, req, out):  # func_reset
    if not self.version_seen: raise HWRMReject(E.HWRM_ERR_CODE_FAIL, "func_reset before ver_get")
    self.reset()
    self.version_seen = True
  _hwrm_11.types = _hwrm("func_reset")

  def _hwrm_15(self, req, out):  # func_qcaps
    if req.fid != 0xFFFF: raise HWRMReject(E.HWRM_ERR_CODE_INVALID_PARAMS, f"fid {req.fid:#x}: only 0xffff (self)")
    out.fid, out.port_id = 0, self.nic.port_id
    out.mac_address[:] = list(self.nic.mac)
    out.max_cmpl_rings = out.max_rx_rings = out.max_tx_rings = 64
    out.max_vnics, out.max_stat_ctx, out.max_l2_ctxs = 8, 32, 8
  _hwrm_15.types = _hwrm("func_qcaps")

  def _hwrm_1d(self, req, out):  # func_drv_rgtr
    if not self.version_seen: raise HWRMReject(E.HWRM_ERR_CODE_FAIL, "func_drv_rgtr before ver_get")
    self.registered = True
  _hwrm_1d.types = _hwrm("func_drv_rgtr")

  def _hwrm_16(self, req, out):  # func_qcfg
    out.fid, out.port_id = 0, self.nic.port_id
    out.mac_address[:] = list(self.nic.mac)
    out.mru = 9018
    out.legacy_l2_db_size_kb = self.nic.db_off // 1024
    out.l2_doorbell_bar_size_kb = self.nic.bar_sizes[2] // 1024
  _hwrm_16.types = _hwrm("func_qcfg")

  def _hwrm_20(self, req, out):  # port_phy_cfg
    if req.enables & hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK:
      if req.port_id != self.nic.port_id: raise HWRMReject(E.HWRM_ERR_CODE_INVALID_PARAMS, f"port {req.port_id}")
      if req.lpbk not in (hsi.PORT_PHY_CFG_REQ_LPBK_NONE, hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL):
        raise HWRMReject(E.HWRM_ERR_CODE_INVALID_PARAMS, f"loopback mode {req.lpbk} is not modelled")
      self.nic.phy.loopback = req.lpbk == hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL
  _hwrm_20.types = _hwrm("port_phy_cfg")

  # the modelled port's PHY: link up at 400 Gb/s full duplex (a Thor2 port; bnxt_hsi.h hwrm_port_phy_qcfg_output:
  # link, link_speed in 100 Mb/s units, duplex_state, lpbk), PHY loopback as port_phy_cfg left it. Linux reads the
  # same fields in bnxt_update_link (drivers/net/ethernet/broadcom/bnxt/bnxt.c)
  def _hwrm_27(self, req, out):  # port_phy_qcfg
    if req.port_id != self.nic.port_id: raise HWRMReject(E.HWRM_ERR_CODE_INVALID_PARAMS, f"port {req.port_id}")
    out.link = hsi.PORT_PHY_QCFG_RESP_LINK_LINK
    out.link_speed = hsi.PORT_PHY_QCFG_RESP_LINK_SPEED_400GB
    out.duplex_state = hsi.PORT_PHY_QCFG_RESP_DUPLEX_STATE_FULL
    out.lpbk = hsi.PORT_PHY_QCFG_RESP_LPBK_LOCAL if self.nic.phy.loopback else hsi.PORT_PHY_QCFG_RESP_LPBK_NONE
  _hwrm_27.types = _hwrm("port_phy_qcfg")

  def _hwrm_1a8(self, req, out):  # func_backing_store_qcaps_v2
    self._need_registered("backing store")
    out.type = req.type
    caps = BS_CAPS.get(req.type)
    if caps is None: return   # flags without TYPE_VALID: nothing to configure
    size, mn, mx, mult, splits, init_off = caps
    out.entry_size, out.min_num_entries, out.max_num_entries, out.entry_multiple = size, mn, mx, mult
    out.flags = hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_TYPE_VALID
    if init_off:
      out.flags |= hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT
      out.ctx_init_value, out.ctx_init_offset = CTX_INIT_VALUE, init_off
    out.subtype_valid_cnt = len(splits)
    for i, s in enumerate(splits): setattr(out, f"split_entry_{i}", s)
  _hwrm_1a8.types = _hwrm("func_backing_store_qcaps_v2")

  def _hwrm_1a3(self, req, out):  # func_backing_store_cfg_v2
    self._need_registered("backing store")
    caps = BS_CAPS.get(req.type)
    if caps is None: raise ModelError(f"type {req.type} is not a valid backing-store type")
    size, mn, mx, mult, splits, init_off = caps
    if req.entry_size != size: raise ModelError(f"type {req.type}: entry_size {req.entry_size}, firmware said {size}")
    qp_n = self.bs.get((hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_QP, 0), 0)
    lo = qp_n if req.type == hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_TIM else mn
    if not lo <= req.num_entries <= mx or req.num_entries % mult:
      raise ModelError(f"type {req.type}: num_entries {req.num_entries} outside [{lo}, {mx}] or not a multiple of {mult}")
    if req.type != hsi.FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_TIM and req.num_entries < sum(splits):
      raise ModelError(f"type {req.type}: num_entries {req.num_entries} below the split total {sum(splits)}")
    nbytes = max(1, req.num_entries * size)
    level, pg = req.page_size_pbl_level & 0xF, req.page_size_pbl_level >> 4
    if pg != 0: raise ModelError(f"type {req.type}: page size code {pg}, only 4 KiB (0) is modelled")
    pages = walk_pbl(self.nic.dma_read, req.page_dir, level, (nbytes + PAGE - 1) // PAGE, f"backing store type {req.type}")
    if init_off and req.num_entries:
      self._check_ctx_init(req.type, req.instance, PagedMemory(self.nic, pages, nbytes), size, init_off,
                           req.num_entries)
    self.bs[(req.type, req.instance)] = req.num_entries
    if req.flags & hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE:
      missing = [t for t in BS_CAPS if (t, 0) not in self.bs]
      if missing: raise ModelError(f"ALL_DONE with backing-store types {missing} not configured")
      self.bs_done = True
  _hwrm_1a3.types = _hwrm("func_backing_store_cfg_v2")

  def _check_ctx_init(self, kind: int, instance: int, mem: PagedMemory, size: int, init_off: int, n: int) -> None:
    """Linux writes the context-init byte at 4 * ctx_init_offset into every entry (bnxt_en bnxt.c
    bnxt_init_ctx_initializer: init_offset = ctx_init_offset * 4; bnxt_init_ctx_mem). Firmware accepts a backing store
    without it (a driver that wrote the byte at ctx_init_offset bytes runs on real Thor2), so the model never refuses
    here: it warns once per context type in its log, naming the first entry without the byte (mockgpu/bnxt/README.md,
    leniencies)."""
    if kind in self.nic.ctx_init_warned: return
    at = 4 * init_off
    for e in range(n):
      if mem.read(e * size + at, 1)[0] != CTX_INIT_VALUE:
        other = mem.read(e * size + init_off, 1)[0] == CTX_INIT_VALUE
        self.nic.ctx_init_warned.add(kind)
        self.nic.log(f"WARNING func_backing_store_cfg_v2 type {kind} ({BS_NAMES.get(kind, '?')}) instance {instance}: "
                     f"entry {e} lacks the context init value {CTX_INIT_VALUE:#x} at byte {at} (4 x ctx_init_offset "
                     f"{init_off}, as Linux writes it)" +
                     (f"; it is at byte {init_off} (ctx_init_offset read as bytes)" if other else "") +
                     "; accepted, as firmware does (warned once per type)")
        return

  def _hwrm_50(self, req, out):  # ring_alloc
    self._need_registered("ring_alloc")
    if not self.bs_done: raise ModelError("ring_alloc before the backing store is configured (ALL_DONE)")
    if req.page_size != 12: raise ModelError(f"page_size {req.page_size}: only 12 (4 KiB) is modelled")
    if req.length == 0 or req.length & (req.length - 1): raise ModelError(f"length {req.length} is not a power of two")
    entry = 32 if req.ring_type == hsi.RING_ALLOC_REQ_RING_TYPE_ROCE_CMPL else 16
    if req.ring_type not in (hsi.RING_ALLOC_REQ_RING_TYPE_NQ, hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL,
                             hsi.RING_ALLOC_REQ_RING_TYPE_RX, hsi.RING_ALLOC_REQ_RING_TYPE_TX):
      raise ModelError(f"ring type {req.ring_type} is not modelled")
    nbytes = req.length * entry
    pages = walk_pbl(self.nic.dma_read, req.page_tbl_addr, req.page_tbl_depth, (nbytes + PAGE - 1) // PAGE,
                     f"ring type {req.ring_type}", queue=True)
    nq = 0xFFFF
    if req.nq_ring_id and not req.enables & hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID:
      raise HWRMReject(E.HWRM_ERR_CODE_INVALID_ENABLES, "nq_ring_id given without NQ_RING_ID_VALID")
    if req.enables & hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID:
      ring = self.rings.get(req.nq_ring_id)
      if ring is None or ring.type != hsi.RING_ALLOC_REQ_RING_TYPE_NQ:
        raise ModelError(f"nq_ring_id {req.nq_ring_id} is not an NQ")
      nq = req.nq_ring_id
    if req.rx_buf_size and not req.enables & hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID:
      raise HWRMReject(E.HWRM_ERR_CODE_INVALID_ENABLES, "rx_buf_size given without RX_BUF_SIZE_VALID")
    rid = self._id()
    self.rings[rid] = AllocatedRing(rid, req.ring_type, req.length, PagedMemory(self.nic, pages, nbytes), nq)
    out.ring_id = rid
  _hwrm_50.types = _hwrm("ring_alloc")

  def _hwrm_b0(self, req, out):  # stat_ctx_alloc
    self._need_registered("stat_ctx_alloc")
    if req.stats_dma_length == 0: raise ModelError("stats_dma_length 0")
    self.nic.dma_read(req.stats_dma_addr, req.stats_dma_length)   # faults when unmapped
    sid = self._id()
    self.stat_ctxs[sid] = (req.stats_dma_addr, req.stats_dma_length)
    out.stat_ctx_id = sid
  _hwrm_b0.types = _hwrm("stat_ctx_alloc")

  def _hwrm_40(self, req, out):  # vnic_alloc
    self._need_registered("vnic_alloc")
    vid = self._id()
    self.vnics[vid] = {"mru": 0, "rx": None, "cmpl": None}
    out.vnic_id = vid
  _hwrm_40.types = _hwrm("vnic_alloc")

  def _hwrm_42(self, req, out):  # vnic_cfg
    v = self.vnics.get(req.vnic_id)
    if v is None: raise ModelError(f"vnic {req.vnic_id} does not exist")
    if req.enables & hsi.VNIC_CFG_REQ_ENABLES_MRU: v["mru"] = req.mru
    for bit, key, want in ((hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID, "rx", hsi.RING_ALLOC_REQ_RING_TYPE_RX),
                           (hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID, "cmpl", hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL)):
      if req.enables & bit:
        rid = req.default_rx_ring_id if key == "rx" else req.default_cmpl_ring_id
        ring = self.rings.get(rid)
        if ring is None or ring.type != want: raise ModelError(f"default {key} ring {rid} is not a ring of that type")
        v[key] = rid
  _hwrm_42.types = _hwrm("vnic_cfg")

  def _hwrm_90(self, req, out):  # cfa_l2_filter_alloc
    need = hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID
    if req.enables & need != need: raise HWRMReject(E.HWRM_ERR_CODE_INVALID_ENABLES, "L2_ADDR and DST_ID are required")
    if not req.flags & hsi.CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX: raise ModelError("only RX filters are modelled")
    if req.dst_id not in self.vnics: raise ModelError(f"dst_id {req.dst_id} is not a vnic")
    mask = bytes(req.l2_addr_mask) if req.enables & hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK else b"\xff" * 6
    if mask != b"\xff" * 6: raise ModelError(f"l2_addr_mask {mask.hex()}: only exact matches are modelled")
    self.l2_filters[bytes(req.l2_addr)] = req.dst_id
    out.l2_filter_id = self._id()
  _hwrm_90.types = _hwrm("cfa_l2_filter_alloc")

  def rx_steered(self, dst_mac: bytes) -> bool:
    """A frame reaches RoCE only through an L2 filter to a vnic with default rings."""
    vid = self.l2_filters.get(dst_mac)
    v = self.vnics.get(vid) if vid is not None else None
    return bool(v and v["rx"] and v["cmpl"])

  # ================================================================ RCFW
  def rcfw(self, opcode: int, raw: bytes) -> tuple[int, int]:
    """Execute one CMDQ command; returns (status, xid)."""
    handler = RCFW_HANDLERS.get(opcode)
    if handler is None:
      self.nic.error(f"RCFW: unknown opcode {opcode:#x}")
      return E.CREQ_QP_EVENT_STATUS_INVALID_CMD, 0
    name, req_t, fn = handler
    want = (ctypes.sizeof(req_t) + 15) // 16
    if raw[1] != want:
      self.nic.error(f"RCFW {name}: cmd_size {raw[1]} slots, the command takes {want}")
      return E.CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, 0
    if not self.fw_initialized and name != "initialize_fw":
      self.nic.error(f"RCFW {name} before initialize_fw")
      return E.CREQ_QP_EVENT_STATUS_INVALID_CMD, 0
    req = req_t.from_buffer_copy(raw[:ctypes.sizeof(req_t)].ljust(ctypes.sizeof(req_t), b"\0"))
    try: return 0, fn(self, req) or 0
    except ModelError as e:
      self.nic.error(f"RCFW {name}: {e}")
      return E.CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, 0

  def _initialize_fw(self, req):
    if req.stat_ctx_id not in self.stat_ctxs: raise ModelError(f"stat_ctx_id {req.stat_ctx_id} was not allocated")
    self.fw_flags = req.flags
    self.fw_initialized = True

  def _create_cq(self, req):
    if req.cq_size == 0 or req.cq_size & (req.cq_size - 1): raise ModelError(f"cq_size {req.cq_size} is not a power of two")
    cnq = req.cq_fco_cnq_id & hsi.CMDQ_CREATE_CQ_CNQ_ID_MASK
    ring = self.rings.get(cnq)
    if ring is None or ring.type != hsi.RING_ALLOC_REQ_RING_TYPE_NQ: raise ModelError(f"cnq {cnq} is not an NQ")
    level = req.pg_size_lvl & hsi.CMDQ_CREATE_CQ_LVL_MASK
    if req.pg_size_lvl & hsi.CMDQ_CREATE_CQ_PG_SIZE_MASK: raise ModelError("only 4 KiB CQ pages are modelled")
    nbytes = req.cq_size * 32
    pages = walk_pbl(self.nic.dma_read, req.pbl, level, (nbytes + PAGE - 1) // PAGE, "CQ", queue=True)
    cid = self._id()
    self.cqs[cid] = CQ(cid, req.cq_handle, req.cq_size, PagedMemory(self.nic, pages, nbytes), cnq)
    return cid

  def _create_qp(self, req):
    if req.type != hsi.CMDQ_CREATE_QP_TYPE_RC: raise ModelError(f"QP type {req.type}: only RC (2) is modelled")
    if req.sq_fwo_sq_sge & hsi.CMDQ_CREATE_QP_SQ_SGE_MASK < 1: raise ModelError("sq_sge 0")
    scq, rcq = self.cqs.get(req.scq_cid), self.cqs.get(req.rcq_cid)
    if scq is None or rcq is None: raise ModelError(f"scq {req.scq_cid} / rcq {req.rcq_cid} do not exist")
    if req.sq_size == 0: raise ModelError("sq_size 0")
    variable = bool(req.qp_flags & hsi.CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED)
    # Linux qplib_fp.h bnxt_qplib_set_sq_size / bnxt_qplib_get_depth: in variable mode sq_size counts 16-byte slots;
    # in static mode it counts WQEs, each sizeof(struct sq_send) = 128 bytes (bnxt_qplib_required_slots: 8 slots)
    sq_bytes = req.sq_size * (SLOT if variable else STATIC_WQE_BYTES)
    msn_entries = 0
    msn_off = (sq_bytes + PAGE - 1) // PAGE * PAGE
    total = sq_bytes
    if self.fw_flags & hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED:
      # qplib_fp.c bnxt_qplib_create_qp: msn_tbl_sz = roundup_pow_of_two(sq_size), halved in variable mode; the table
      # follows the SQ pages in the same page list (bnxt_qplib_alloc_init_hwq aux pages, bnxt_qplib_init_psn_ptr)
      n = 1 << max(0, (req.sq_size - 1).bit_length())
      msn_entries = n // 2 if variable else n
      total = msn_off + msn_entries * 8
    level = req.sq_pg_size_sq_lvl & hsi.CMDQ_CREATE_QP_SQ_LVL_MASK
    msn_fault = ""
    try:
      pages = walk_pbl(self.nic.dma_read, req.sq_pbl, level, (total + PAGE - 1) // PAGE,
                       "SQ (with its MSN table)" if msn_entries else "SQ", queue=True)
    except ModelError as e:
      if not msn_entries: raise
      # the list does not reach the MSN table. The requester reads the table only when it retransmits (it finds the
      # WQE of a PSN there), so CREATE_QP succeeds and a retransmission faults (engine.Engine._msn_entry)
      sq_pages = (sq_bytes + PAGE - 1) // PAGE
      pages = walk_pbl(self.nic.dma_read, req.sq_pbl, level, sq_pages, "SQ")
      msn_fault = (f"the SQ page list (level {level} at {req.sq_pbl:#x}) describes the SQ's {sq_pages} page(s) "
                   f"only ({e})")
      self.nic.log(f"create_qp: {msn_fault}; the MSN table at byte {msn_off} is outside it, read only on "
                   f"retransmission")
      total = sq_bytes
    rq = self._create_rq(req)
    qpn = self.next_qpn
    self.next_qpn += 1
    self.qps[qpn] = QP(qpn, req.qp_handle, scq, rcq, PagedMemory(self.nic, pages, total), req.sq_size, variable,
                       msn_off, msn_entries, sq_pbl=req.sq_pbl, sq_level=level, msn_fault=msn_fault, **rq)
    if not variable: self.nic.log(f"QP {qpn:#x}: static WQE mode ({req.sq_size} WQEs of 128 bytes; the SQ doorbell "
                                  f"index counts WQEs)")
    return qpn

  def _create_rq(self, req) -> dict:
    """The receive queue's fields of the QP (recv.py has the layout and its sources); none when rq_size is 0."""
    if req.qp_flags & hsi.CMDQ_CREATE_QP_QP_FLAGS_SRQ_USED:
      raise ModelError("qp_flags SRQ_USED: shared receive queues are not modelled")
    if not req.rq_size: return {}
    nsge = (req.rq_fwo_rq_sge >> hsi.CMDQ_CREATE_QP_RQ_SGE_SFT) & hsi.CMDQ_CREATE_QP_RQ_SGE_MASK
    if not 1 <= nsge <= 6: raise ModelError(f"rq_sge {nsge}: a RECV WQE holds 1 to 6 SGEs")
    if req.rq_pg_size_rq_lvl & hsi.CMDQ_CREATE_QP_RQ_PG_SIZE_MASK: raise ModelError("only 4 KiB RQ pages are modelled")
    stride = rq_stride(nsge)
    nbytes = req.rq_size * stride
    pages = walk_pbl(self.nic.dma_read, req.rq_pbl, req.rq_pg_size_rq_lvl & hsi.CMDQ_CREATE_QP_RQ_LVL_MASK,
                     (nbytes + PAGE - 1) // PAGE, "RQ", queue=True)
    return dict(rq=PagedMemory(self.nic, pages, nbytes), rq_depth=req.rq_size, rq_stride=stride, rq_sge=nsge)

  def _modify_qp(self, req):
    qp = self.qps.get(req.qp_cid)
    if qp is None: raise ModelError(f"QP {req.qp_cid:#x} does not exist")
    mask = req.modify_mask
    if not mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_STATE: raise ModelError("no state change: only state changes are modelled")
    new = STATE_NAMES.get(req.network_type_en_sqd_async_notify_new_state & hsi.CMDQ_MODIFY_QP_NEW_STATE_MASK)
    if new is None: raise ModelError("unknown new state")
    if new not in ("ERR", "RESET") and (qp.state, new) not in LEGAL:
      raise ModelError(f"QP {qp.qpn:#x}: illegal transition {qp.state} -> {new}")
    need = REQUIRED_MASK.get(new, 0) if qp.state != new else 0
    if mask & need != need: raise ModelError(f"QP {qp.qpn:#x}: {qp.state} -> {new} lacks mask bits {need & ~mask:#x}")
    if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS: qp.access = req.access
    if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_PKEY: qp.pkey = req.pkey
    if new == "RTR" and qp.state == "INIT":
      ntype = req.network_type_en_sqd_async_notify_new_state & hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_MASK
      dgid = struct.pack("<4I", *req.dgid)         # network byte order (qplib_fp.c bnxt_qplib_modify_qp)
      if ntype == hsi.CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4 and dgid[:12] != bytes(10) + b"\xff\xff":
        raise ModelError(f"dgid {dgid.hex()} is not IPv4-mapped but the network type is RoCEv2/IPv4")
      if req.sgid_index not in self.gids: raise ModelError(f"sgid_index {req.sgid_index} is not in the GID table")
      mac = struct.pack("<3H", *req.dest_mac)
      if mac == bytes(6): raise ModelError("dest_mac is zero")
      pm = PMTU.get(req.path_mtu_pingpong_push_enable & hsi.CMDQ_MODIFY_QP_PATH_MTU_MASK)
      if pm is None: raise ModelError("unknown path MTU code")
      qp.dgid, qp.sgid_index, qp.dest_mac, qp.pmtu, qp.dest_qpn = dgid, req.sgid_index, mac, pm, req.dest_qp_id
      qp.epsn = req.rq_psn & 0xFFFFFF
      if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER: qp.min_rnr_timer = req.min_rnr_timer & 0x1F
    if new == "RTS" and qp.state == "RTR":
      qp.timeout = req.timeout if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT else 0
      qp.retry_cnt = req.retry_cnt if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT else 0
      qp.rnr_retry = req.rnr_retry if mask & hsi.CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY else 0
      qp.sq_psn = req.sq_psn & 0xFFFFFF
    if new == "ERR" and qp.state != "ERR": self.nic.engine.to_error(qp)   # the driver moves it: both queues flush
    if new == "RESET":
      # a reset QP forgets its send queue's work (IBA: RESET discards outstanding work requests); kept, messages of
      # before would go out again once it is back in RTS, with PSNs counted from a new sq_psn
      qp.outstanding = []
      qp.una = qp.tx_next = qp.posted
      qp.sq_cons = qp.sq_prod
      qp.retries = qp.rnr_retries = 0
      qp.rq_cons, qp.rx_send, qp.rx_msg = qp.rq_prod, None, None
    qp.state = new

  def _register_mr(self, req):
    if not req.flags & hsi.CMDQ_REGISTER_MR_FLAGS_ALLOC_MR: raise ModelError("only ALLOC_MR registration is modelled")
    level = req.log2_pg_size_lvl & hsi.CMDQ_REGISTER_MR_LVL_MASK
    pg = (req.log2_pg_size_lvl & hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_MASK) >> hsi.CMDQ_REGISTER_MR_LOG2_PG_SIZE_SFT
    if pg != 12: raise ModelError(f"log2 page size {pg}: only 4 KiB pages are modelled")
    if req.log2_pbl_pg_size & hsi.CMDQ_REGISTER_MR_LOG2_PBL_PG_SIZE_MASK not in (0, 12):
      raise ModelError(f"log2_pbl_pg_size {req.log2_pbl_pg_size}")
    if req.access & ~0x3F: raise ModelError(f"access {req.access:#x} has unknown bits")
    npages = max(1, (req.mr_size + PAGE - 1) // PAGE)
    pages = walk_pbl(self.nic.dma_read, req.pbl, level, npages, "MR")
    key = (len(self.mrs) + 1) | (self.rng.randrange(1, 256) << 24)   # an index plus a nonzero high byte
    self.mrs[key] = MR(key, req.va, req.mr_size, req.access, PagedMemory(self.nic, pages, npages * PAGE))
    return key

  def _add_gid(self, req):
    gid = struct.pack("<4I", *req.gid)[::-1]   # fully byte-reversed (qplib_sp.c bnxt_qplib_add_sgid)
    mac = struct.pack(">3H", *req.src_mac)     # byte-swapped pairs
    if mac != self.nic.mac: self.nic.error(f"add_gid: src_mac {mac.hex(':')} is not the port MAC {self.nic.mac.hex(':')}")
    idx = len(self.gids)
    self.gids[idx] = (gid, mac)
    return idx


RCFW_HANDLERS = {
  hsi.CMDQ_BASE_OPCODE_INITIALIZE_FW: ("initialize_fw", hsi.struct_cmdq_initialize_fw, Firmware._initialize_fw),
  hsi.CMDQ_BASE_OPCODE_CREATE_CQ: ("create_cq", hsi.struct_cmdq_create_cq, Firmware._create_cq),
  hsi.CMDQ_BASE_OPCODE_CREATE_QP: ("create_qp", hsi.struct_cmdq_create_qp, Firmware._create_qp),
  hsi.CMDQ_BASE_OPCODE_MODIFY_QP: ("modify_qp", hsi.struct_cmdq_modify_qp, Firmware._modify_qp),
  hsi.CMDQ_BASE_OPCODE_REGISTER_MR: ("register_mr", hsi.struct_cmdq_register_mr, Firmware._register_mr),
  hsi.CMDQ_BASE_OPCODE_ADD_GID: ("add_gid", hsi.struct_cmdq_add_gid, Firmware._add_gid),
}
HWRM_NAMES = {getattr(hsi, n): n[len("HWRM_"):].lower() for n in (
  "HWRM_VER_GET", "HWRM_FUNC_RESET", "HWRM_FUNC_QCAPS", "HWRM_FUNC_QCFG", "HWRM_FUNC_DRV_RGTR", "HWRM_PORT_PHY_CFG",
  "HWRM_FUNC_BACKING_STORE_QCAPS_V2", "HWRM_FUNC_BACKING_STORE_CFG_V2", "HWRM_RING_ALLOC", "HWRM_STAT_CTX_ALLOC",
  "HWRM_VNIC_ALLOC", "HWRM_VNIC_CFG", "HWRM_CFA_L2_FILTER_ALLOC", "HWRM_PORT_PHY_QCFG")}
