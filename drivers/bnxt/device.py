"""BNXTDev: a Broadcom NetXtreme-E (P7 "Thor2", BCM57608) function driven from userspace for RoCEv2.

Bring-up order (Linux bnxt_en's probe and bnxt_re's bnxt_re_dev_init): HWRM ver_get, func_reset, func_qcaps (MAC,
port), func_drv_rgtr, func_qcfg
(doorbell offset); backing store (qcaps_v2/cfg_v2 per context type); CREQ ring + RCFW CMDQ, stat context,
initialize_fw, a completion NQ; the L2 ingress path (completion ring, RX ring, vnic, MAC filter) that RoCE receive
needs; then add_gid for the function's IPv4 address.
"""
from __future__ import annotations

import ctypes
import ipaddress
import re
import struct

from ...autogen import bnxt as hsi
from ...autogen.pci import PCI_COMMAND, PCI_COMMAND_MASTER, PCI_COMMAND_MEMORY   # include/uapi/linux/pci_regs.h
from ...errors import DeviceError
from ..hcq.device import DeviceBase
from . import doorbell
from .dma import DMABuffer, PageTable
from .hwrm import HWRMChannel
from .rcfw import CREQ_DEPTH, CREQ_ENTRY, RCFWChannel

PCI_VENDOR_BROADCOM = 0x14E4
THOR2_DEVICE_IDS = (0x1760,)          # BCM57608 (bnxt_en's PCI table)

# backing store context types the function needs, with a few spare entries beyond the firmware's split totals
BS_TYPES = [("QP", 2), ("SRQ", 0), ("CQ", 2), ("VNIC", 0), ("STAT", 2), ("SP_TQM_RING", 0), ("FP_TQM_RING", 0),
            ("MRAV", 2), ("TIM", 0)]
WIRE_ATTR, ERRORS_ATTR = "wire", "device_errors"
WIRE_WORD = re.compile(r"[A-Za-z0-9_]+=[A-Za-z0-9_.:-]+")
FID_SELF = 0xFFFF
NQ_DEPTH = 16
L2_RING_DEPTH = 16


def ipv4_to_gid(ip: str) -> bytes:
  """::ffff:a.b.c.d, the IPv4-mapped GID (RFC 4291 2.5.5.2; a RoCEv2 GID, IBTA annex A17)."""
  return bytes(10) + b"\xff\xff" + ipaddress.IPv4Address(ip).packed


def gid_to_add_gid_words(gid: bytes) -> list[int]:
  """cmdq_add_gid.gid is __be32[4] holding the GID fully byte-reversed (Linux bnxt_re qplib_sp.c
  bnxt_qplib_add_sgid stores gid[i] as
  cpu_to_be32 of the raw GID's u32 number 3-i)."""
  return list(struct.unpack("<4I", gid[::-1]))


def mac_to_add_gid_words(mac: bytes) -> list[int]:
  """cmdq_add_gid.src_mac is __be16[3]: byte-swapped pairs m1 m0 m3 m2 m5 m4 in memory (qplib_sp.c bnxt_qplib_add_sgid)."""
  return list(struct.unpack(">3H", mac))


class BNXTDev(DeviceBase):
  """A NIC function on the runtime's device base (name, timeout, close, context manager); its memory is DMA buffers
  and its work queue pairs (qp.py), not the GPU API of Device."""

  def __init__(self, pci, os, config, timeout_s: float | None = None, reset_timeout_s: float = 40.0):
    super().__init__(os, config, timeout_s)
    self.pci = pci
    self.name = f"bnxt {pci.addr}"
    self._keep: list = []   # DMA buffers and page tables the NIC holds pointers to
    self.gid_index: int | None = None
    self.gid = b""
    self.device_lock = os.lock_device("bnxt", pci.addr)   # <lock dir>/bnxt_<bus>.lock: one driver per function
    try: self._bringup(pci, os, reset_timeout_s)
    except BaseException:
      # the function may still hold pointers into our memory: keep it allocated, give the device back
      self.device_lock.release()
      self.device_lock = None
      raise

  def _bringup(self, pci, os, reset_timeout_s: float) -> None:
    cmd = pci.config_read(PCI_COMMAND, 2)
    pci.config_write(PCI_COMMAND, cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, 2)
    self.bar0 = pci.map_bar(0)
    self.bar2 = pci.map_bar(2)
    self.hwrm = HWRMChannel(os, self.bar0, self.name, self.timeout_s)
    ver = self.hwrm.call("ver_get", hwrm_intf_maj=1, hwrm_intf_min=10, hwrm_intf_upd=2)
    self.chip_num = ver.chip_num
    self.fw_version = (ver.hwrm_fw_maj_8b, ver.hwrm_fw_min_8b, ver.hwrm_fw_bld_8b)
    if ver.dev_caps_cfg & hsi.VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED:
      raise DeviceError(f"{self.name}: firmware {self.fw_version} requires short HWRM commands, which hcq does not send")
    if ver.max_req_win_len: self.hwrm.window = min(max(ver.max_req_win_len, 128), 4096)
    self.hwrm.call("func_reset", timeout_s=max(reset_timeout_s, self.timeout_s))
    caps = self.hwrm.call("func_qcaps", fid=FID_SELF)
    self.mac, self.port_id = bytes(caps.mac_address), caps.port_id
    self.hwrm.call("func_drv_rgtr")
    qcfg = self.hwrm.call("func_qcfg", fid=FID_SELF)
    self.db_off = qcfg.legacy_l2_db_size_kb * 1024    # P7: kernel bnxt_hwrm_func_qcfg
    self.qp_count = 0
    self._backing_store()
    self._rcfw_bringup()
    self._l2_path()

  # ---- helpers
  def _dma(self, size: int, what: str) -> DMABuffer:
    buf = DMABuffer(self.os, size, f"{self.name} {what}")
    self._keep.append(buf)
    return buf

  def _pbl(self, buf: DMABuffer, queue: bool = False, what: str = "") -> PageTable:
    pt = PageTable(self.os, buf.paddrs, queue=queue, what=f"{self.name} {what}")
    self._keep.append(pt)
    return pt

  def ring_db(self, xid: int, kind: int, index: int, epoch: int) -> None:
    self.os.memory_barrier()
    self.bar2.write64(self.db_off, doorbell.encode(xid, kind, index, epoch))

  # ---- bring-up steps
  def _backing_store(self) -> None:
    for i, (name, extra) in enumerate(BS_TYPES):
      kind = getattr(hsi, f"FUNC_BACKING_STORE_CFG_V2_REQ_TYPE_{name}")
      q = self.hwrm.call("func_backing_store_qcaps_v2", type=kind)
      splits = [q.split_entry_0, q.split_entry_1, q.split_entry_2, q.split_entry_3][:q.subtype_valid_cnt]
      n = self.qp_count if name == "TIM" else max(q.min_num_entries, sum(splits) + extra)
      if q.entry_multiple: n = (n + q.entry_multiple - 1) // q.entry_multiple * q.entry_multiple
      if name == "QP": self.qp_count = n
      if q.max_num_entries and n > q.max_num_entries:
        raise DeviceError(f"{self.name}: backing store {name} needs {n} entries, firmware allows {q.max_num_entries}")
      instances = [b for b in range(32) if q.instance_bit_map >> b & 1] or [0]
      for j, inst in enumerate(instances):
        buf = self._dma(max(1, n * q.entry_size), f"backing store {name}.{inst}")
        if q.flags & hsi.FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT and q.ctx_init_value:
          self._ctx_init(buf, n, q.entry_size, q.ctx_init_value, q.ctx_init_offset)
        pt = self._pbl(buf, what=f"backing store {name}")
        last = i == len(BS_TYPES) - 1 and j == len(instances) - 1
        self.hwrm.call("func_backing_store_cfg_v2", type=kind, instance=inst, page_dir=pt.base, num_entries=n,
                       entry_size=q.entry_size, page_size_pbl_level=pt.level, subtype_valid_cnt=q.subtype_valid_cnt,
                       split_entry_0=q.split_entry_0, split_entry_1=q.split_entry_1, split_entry_2=q.split_entry_2,
                       split_entry_3=q.split_entry_3,
                       flags=hsi.FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE if last else 0)

  @staticmethod
  def _ctx_init(buf: DMABuffer, n: int, entry_size: int, value: int, offset: int) -> None:
    """The context-init byte of every entry: ctx_init_offset counts 4-byte units (bnxt_en bnxt.c
    bnxt_init_ctx_initializer stores init_offset * 4; bnxt_init_ctx_mem writes each entry's byte there); 0 offset
    means fill everything."""
    if offset == 0: buf.view[:] = bytes([value]) * buf.size
    else:
      for e in range(n): buf.view[e * entry_size + 4 * offset] = value

  def _ring_alloc(self, ring_type: int, depth: int, entry: int, what: str, **fields) -> tuple[int, DMABuffer]:
    buf = self._dma(depth * entry, what)
    pt = self._pbl(buf, queue=True, what=what)
    r = self.hwrm.call("ring_alloc", ring_type=ring_type, page_tbl_addr=pt.base, page_tbl_depth=pt.level,
                       page_size=12, length=depth, int_mode=hsi.RING_ALLOC_REQ_INT_MODE_MSIX, **fields)
    return r.ring_id, buf

  def _rcfw_bringup(self) -> None:
    creq_id, creq = self._ring_alloc(hsi.RING_ALLOC_REQ_RING_TYPE_NQ, CREQ_DEPTH, CREQ_ENTRY, "CREQ")
    self.rcfw = RCFWChannel(self.os, self.bar0, self.ring_db, self.name, self.timeout_s, creq, creq_id)
    self.rcfw.start()
    self.stats = self._dma(176, "RoCE stats")
    st = self.hwrm.call("stat_ctx_alloc", stats_dma_addr=self.stats.paddrs[0], stats_dma_length=176)
    self.stat_ctx_id = st.stat_ctx_id
    self.rcfw.call("initialize_fw", stat_ctx_id=self.stat_ctx_id,
                   flags=hsi.CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED)
    self.nq_id, self.nq = self._ring_alloc(hsi.RING_ALLOC_REQ_RING_TYPE_NQ, NQ_DEPTH, 16, "completion NQ", logical_id=1)

  def _l2_path(self) -> None:
    """RoCE receive is steered through the L2 path: a completion ring, an RX ring, a vnic and an exact-MAC filter."""
    self.l2_cmpl_id, _ = self._ring_alloc(hsi.RING_ALLOC_REQ_RING_TYPE_L2_CMPL, L2_RING_DEPTH, 16, "L2 completion ring",
                                          enables=hsi.RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID, nq_ring_id=self.nq_id)
    self.rx_id, _ = self._ring_alloc(hsi.RING_ALLOC_REQ_RING_TYPE_RX, L2_RING_DEPTH, 16, "RX ring",
                                     enables=hsi.RING_ALLOC_REQ_ENABLES_RX_BUF_SIZE_VALID, rx_buf_size=640)
    self.vnic_id = self.hwrm.call("vnic_alloc").vnic_id
    self.hwrm.call("vnic_cfg", vnic_id=self.vnic_id, mru=9018, default_rx_ring_id=self.rx_id,
                   default_cmpl_ring_id=self.l2_cmpl_id,
                   enables=hsi.VNIC_CFG_REQ_ENABLES_MRU | hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID |
                   hsi.VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID)
    self.hwrm.call("cfa_l2_filter_alloc", flags=hsi.CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX, dst_id=self.vnic_id,
                   enables=hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
                   hsi.CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID,
                   l2_addr=_u8x6(self.mac), l2_addr_mask=_u8x6(b"\xff" * 6))

  # ---- public
  def set_ip(self, ip: str) -> int:
    """Add the IPv4-mapped GID of ip to the GID table; its index becomes the sgid_index of every QP."""
    self.gid = ipv4_to_gid(ip)
    self.ip = ip
    r = self.rcfw.call("add_gid", gid=_u32x4(gid_to_add_gid_words(self.gid)),
                       src_mac=_u16x3(mac_to_add_gid_words(self.mac)), stats_ctx=self.stat_ctx_id)
    self.gid_index = r.xid
    return r.xid

  def set_loopback(self, enable: bool, settle_s: float = 0.0) -> None:
    """PHY loopback: every transmitted frame comes back into this port (HWRM port_phy_cfg lpbk LOCAL / NONE)."""
    self.hwrm.call("port_phy_cfg", port_id=self.port_id, enables=hsi.PORT_PHY_CFG_REQ_ENABLES_LPBK,
                   lpbk=hsi.PORT_PHY_CFG_REQ_LPBK_LOCAL if enable else hsi.PORT_PHY_CFG_REQ_LPBK_NONE)
    if settle_s: self.os.sleep(settle_s)

  def alloc(self, size: int) -> DMABuffer:
    """size bytes (rounded up to whole pages) the NIC can reach; a DeviceError for a size that is not positive."""
    return self._dma(size, f"buffer of {size!r} bytes")

  # ---- the port's wire and the device's own error reports (sysfs attributes an emulated function may have)
  def wire_endpoint(self) -> dict[str, str]:
    """What a peer needs to reach this port besides its MAC and GID. Empty on real hardware (the cable is the
    wire); a function whose wire is emulated says where its end is in a sysfs attribute `wire` (key=value words)."""
    if not self.pci.has_attr(WIRE_ATTR): return {}
    return dict(word.split("=", 1) for word in self.pci.attr(WIRE_ATTR).split() if "=" in word)

  def wire_connect(self, peer: dict) -> None:
    """Attach this port's emulated wire to a peer's endpoint (the other end's wire_endpoint); nothing to do on real
    hardware. Keys and values are single words; the function refuses (an OSCallError) values it cannot use."""
    if not peer or not self.pci.has_attr(WIRE_ATTR): return
    words = [f"{k}={v}" for k, v in peer.items()]
    bad = [w for w in words if not WIRE_WORD.fullmatch(w)]
    if bad: raise DeviceError(f"{self.name}: wire endpoint {bad[0]!r} is not a key=value word")
    self.pci.write_attr(WIRE_ATTR, " ".join(words))

  def device_errors(self) -> list[str]:
    """Errors the function itself recorded about how it was driven (a sysfs attribute `device_errors`, one a line,
    of a function that checks its driver); empty when the function keeps no such record."""
    if not self.pci.has_attr(ERRORS_ATTR): return []
    return [line for line in self.pci.attr(ERRORS_ATTR).splitlines() if line.strip()]

  def register_mr(self, buf: DMABuffer, access: int | None = None) -> int:
    """Register buf for local and remote write; returns the key (lkey == rkey)."""
    from .qp import register_mr
    return register_mr(self, buf, access)

  def register_pages(self, paddrs: list[int], va: int, size: int, access: int | None = None, what: str = "MR") -> int:
    """Register any memory by the bus addresses of its 4 KiB pages (a GPU buffer's: the GPU driver's dma_pages) as
    an MR seen at va; returns the key (lkey == rkey)."""
    from .qp import register_pages
    return register_pages(self, paddrs, va, size, access, what)

  def _close(self) -> None:
    """Reset the function (so that it stops using our memory), free the memory, release the device lock."""
    if self.device_lock is None: return
    try:
      self.hwrm.call("func_reset", timeout_s=self.timeout_s)
      # the function no longer uses our memory: it can go (after a failed reset it stays allocated, as after a failed
      # bring-up: the function may still write to it)
      for item in reversed(self._keep): item.free()
      self._keep = []
      for chan, buf in (("hwrm", "resp"), ("rcfw", "cmdq")):
        if hasattr(self, chan): getattr(getattr(self, chan), buf).free()
    finally:
      self.device_lock.release()    # the device is given back either way: close() happens once
      self.device_lock = None


def _u8x6(b: bytes): return (ctypes.c_uint8 * 6)(*b)
def _u16x3(v): return (ctypes.c_uint16 * 3)(*v)
def _u32x4(v): return (ctypes.c_uint32 * 4)(*v)
