"""The mock Thor2 (BCM57608) PCI function: config space, BAR0 (HWRM window and trigger, RCFW mailbox), BAR2
(doorbells), DMA by physical address through the OS it is plugged into, and a PHY (wire.Phy).

Driver bugs the model can see are appended to .errors (and logged); tests assert the list is empty or holds the
expected entry. Register map: reference bnxt_roce.md §3.3-3.4.
"""
from __future__ import annotations

import random
import struct
import threading

from ...autogen import bnxt as hsi
from .engine import Engine
from .firmware import Firmware
from .state import PAGE
from .wire import FaultPlan, Phy

VENDOR, DEVICE_THOR2 = 0x14E4, 0x1760
CLASS_ETHERNET = 0x020000
BAR0_SIZE, BAR2_SIZE = 0x10000, 0x100000
DB_OFF = 0x10000                        # reported as func_qcfg.legacy_l2_db_size_kb * 1024
HWRM_WINDOW, HWRM_WINDOW_LEN, HWRM_TRIGGER = 0x000, 128, 0x100
RCFW_BASE, RCFW_PROD, RCFW_TRIG = 0x600, 0x60C, 0x700
FIRST_FLAG = 1 << 31
PCI_COMMAND, PCI_COMMAND_MASTER = 0x04, 0x4
CREQ_ENTRY = 16


class MockThor2:
  def __init__(self, addr: str = "0000:41:00.0", mac: bytes = bytes.fromhex("020000000001"), port_id: int = 0,
               udp_port: int = 0, peer_port: int | None = None, pcap: str | None = None, faults: str | None = None,
               seed: int | None = None, silent_hwrm=(), verbose: bool = False):
    self.addr, self.mac, self.port_id = addr, bytes(mac), port_id
    self.device_id = DEVICE_THOR2
    self.rng = random.Random(seed)
    self.bar_sizes = {0: BAR0_SIZE, 2: BAR2_SIZE}
    self.db_off = DB_OFF
    self.silent_hwrm = set(silent_hwrm)
    self.verbose = verbose
    self.errors: list[str] = []
    self.messages: list[str] = []
    self.lock = threading.RLock()
    self.os = None
    self.config = bytearray(256)
    struct.pack_into("<HH", self.config, 0, VENDOR, DEVICE_THOR2)
    self.config[0x08] = 0x01                                            # revision
    self.config[0x09:0x0C] = CLASS_ETHERNET.to_bytes(3, "little")
    struct.pack_into("<I", self.config, 0x10, 0xE000000C)               # BAR0: 64-bit prefetchable memory
    struct.pack_into("<I", self.config, 0x18, 0xE100000C)               # BAR2
    struct.pack_into("<HH", self.config, 0x2C, VENDOR, 0x5208)
    self.hwrm_window = bytearray(HWRM_WINDOW_LEN)
    self.cmdq_init = bytearray(16)
    self.cmdq = None                 # (pages, depth, creq_ring_id) once the first-flag write took the init
    self.cmdq_cons = 0
    self.first_seen = False
    self.fw = Firmware(self)
    self.phy = Phy(f"bnxt-{addr}", port=udp_port, peer_port=peer_port, pcap=pcap, faults=FaultPlan.parse(faults),
                   log=self.log)
    self.engine = Engine(self)
    self.phy.rx_handler = self.engine.receive

  # ---- reporting
  def log(self, msg: str) -> None:
    self.messages.append(msg)

  def error(self, msg: str) -> None:
    """A driver bug the device can see."""
    self.errors.append(msg)
    self.messages.append("ERROR " + msg)

  # ---- OS side
  def attach(self, os) -> None: self.os = os

  @property
  def bus_master(self) -> bool: return bool(struct.unpack_from("<H", self.config, PCI_COMMAND)[0] & PCI_COMMAND_MASTER)

  def sysfs_files(self) -> dict:
    res = "".join(f"{0xE0000000 + i * 0x1000000:#018x} {0xE0000000 + i * 0x1000000 + self.bar_sizes[i] - 1:#018x} "
                  f"0x0000000000140204\n" if i in self.bar_sizes else "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                  for i in range(6))
    return {"vendor": f"{VENDOR:#06x}\n", "device": f"{self.device_id:#06x}\n", "class": f"{CLASS_ETHERNET:#08x}\n",
            "revision": "0x01\n", "subsystem_vendor": f"{VENDOR:#06x}\n", "subsystem_device": "0x5208\n",
            "resource": res, "config": "", "resource0": "", "resource2": "", "enable": "1\n"}

  def sysfs_write(self, attr: str, data: str) -> None:
    if attr != "enable": self.error(f"sysfs write to {attr}")

  def config_write(self, offset: int, data: bytes) -> None:
    if offset < 0x40 and offset not in (PCI_COMMAND, PCI_COMMAND + 1):
      self.error(f"config write at {offset:#x}: only PCI_COMMAND is expected")
      return
    self.config[offset:offset + len(data)] = data

  def dma_read(self, pa: int, n: int) -> bytes:
    return self.os.dma_read(pa, n, who=f"bnxt {self.addr}")

  def dma_write(self, pa: int, data: bytes) -> None:
    self.os.dma_write(pa, data, who=f"bnxt {self.addr}")

  # ---- MMIO
  def mmio_read(self, bar: int, offset: int, width: int) -> int:
    return 0

  def mmio_write(self, bar: int, offset: int, value: int, width: int) -> None:
    with self.lock:
      if bar == 0: self._bar0_write(offset, value, width)
      elif bar == 2: self._doorbell(offset, value, width)
      else: self.error(f"write to BAR{bar}")

  def _bar0_write(self, offset: int, value: int, width: int) -> None:
    if width != 4:
      self.error(f"BAR0 {width * 8}-bit write at {offset:#x}: BAR0 takes 32-bit accesses")
      return
    if HWRM_WINDOW <= offset < HWRM_WINDOW + HWRM_WINDOW_LEN:
      struct.pack_into("<I", self.hwrm_window, offset - HWRM_WINDOW, value)
    elif offset == HWRM_TRIGGER:
      if value != 1: self.error(f"HWRM trigger written with {value:#x}, not 1")
      else: self._hwrm_trigger()
    elif offset == RCFW_PROD:
      self.cmdq_prod_reg = value
    elif RCFW_BASE <= offset < RCFW_PROD:
      struct.pack_into("<I", self.cmdq_init, offset - RCFW_BASE, value)
      self.cmdq_init_written = True
    elif offset == RCFW_TRIG:
      if value != 1: self.error(f"RCFW trigger written with {value:#x}, not 1")
      else: self._rcfw_trigger()
    else:
      self.error(f"BAR0 write of {value:#x} at unmodelled offset {offset:#x}")

  def _hwrm_trigger(self) -> None:
    if not self.bus_master:
      self.error("HWRM trigger with bus mastering off (PCI_COMMAND bit 2): the response cannot be DMA'd")
      return
    result = self.fw.hwrm(bytes(self.hwrm_window))
    if result is None: return
    resp_addr, body = result
    # body first, then the header, then the valid byte (reference §3.10): a driver reading early sees zeros
    self.dma_write(resp_addr + 8, body[8:-1])
    self.dma_write(resp_addr, body[:8])
    self.dma_write(resp_addr + len(body) - 1, body[-1:])

  # ---- RCFW
  def _rcfw_trigger(self) -> None:
    if not getattr(self, "cmdq_init_written", False):
      self.error("RCFW trigger before cmdq_init was written")
      return
    prod_reg = getattr(self, "cmdq_prod_reg", 0)
    if prod_reg & FIRST_FLAG:
      pbl, size_lvl, creq_id, _ = struct.unpack("<QHHI", bytes(self.cmdq_init))
      depth, level = size_lvl >> 2, size_lvl & 3
      creq = self.fw.rings.get(creq_id)
      if creq is None or creq.type != hsi.RING_ALLOC_REQ_RING_TYPE_NQ:
        self.error(f"cmdq_init: creq_ring_id {creq_id} is not an NQ-type ring")
        return
      from .state import walk_pbl, PagedMemory
      pages = walk_pbl(self.dma_read, pbl, level, (depth * 16 + PAGE - 1) // PAGE, "CMDQ")
      self.cmdq = (PagedMemory(self, pages, depth * 16), depth, creq)
      self.cmdq_cons, self.first_seen = 0, True
    elif not self.first_seen:
      self.error("RCFW: first producer write after cmdq_init lacks FIRMWARE_FIRST_FLAG (bit 31): command ignored")
      return
    mem, depth, creq = self.cmdq
    prod = prod_reg & 0xFFFF
    while self.cmdq_cons % 0x10000 != prod:
      slot = self.cmdq_cons % depth
      head = mem.read(slot * 16, 16)
      opcode, size = head[0], head[1]
      if size == 0:
        self.error(f"RCFW: command at slot {slot} has cmd_size 0")
        self.cmdq_cons = prod
        break
      raw = b"".join(mem.read(((self.cmdq_cons + i) % depth) * 16, 16) for i in range(size))
      self.cmdq_cons += size
      cookie = struct.unpack_from("<H", raw, 4)[0]
      status, xid = self.fw.rcfw(opcode, raw)
      if not self.post_creq(creq, opcode, status, cookie, xid): break

  def post_creq(self, creq, opcode: int, status: int, cookie: int, xid: int) -> bool:
    if creq.prod - creq.cons >= creq.depth:
      self.error(f"CREQ overflow: the driver did not return credits (NQ_ARM) on ring {creq.id}; "
                 f"{creq.prod - creq.cons} entries outstanding")
      return False
    v = 1 - ((creq.prod // creq.depth) & 1)
    entry = struct.pack("<BBHIBB6x", hsi.CREQ_BASE_TYPE_QP_EVENT, status, cookie, xid, v, opcode)
    base = (creq.prod % creq.depth) * CREQ_ENTRY
    creq.mem.write(base, entry[:8])
    creq.mem.write(base + 9, entry[9:])
    creq.mem.write(base + 8, entry[8:9])   # the v byte last
    creq.prod += 1
    return True

  # ---- doorbells
  def _doorbell(self, offset: int, value: int, width: int) -> None:
    if width != 8:
      self.error(f"doorbell: {width * 8}-bit write at BAR2+{offset:#x}; a doorbell is one 64-bit store")
      return
    if offset != self.db_off:
      self.error(f"doorbell at BAR2+{offset:#x}, expected db_off {self.db_off:#x}")
      return
    low, high = value & 0xFFFFFFFF, value >> 32
    index, epoch = low & hsi.DBC_DBC_INDEX_MASK, (low >> 24) & 1
    xid, path, kind = high & hsi.DBC_DBC_XID_MASK, high & hsi.DBC_DBC_PATH_MASK, high & hsi.DBC_DBC_TYPE_MASK
    if not high & hsi.DBC_DBC_VALID:
      self.error(f"doorbell {value:#018x} without the VALID bit")
      return
    if path != hsi.DBC_DBC_PATH_ROCE:
      self.error(f"doorbell {value:#018x}: path {path >> 24} is not ROCE")
      return
    if kind == hsi.DBC_DBC_TYPE_SQ: self.engine.sq_doorbell(xid, index, epoch)
    elif kind == hsi.DBC_DBC_TYPE_CQ: self._cq_doorbell(xid, index, epoch)
    elif kind == hsi.DBC_DBC_TYPE_NQ_ARM: self._nq_arm(xid, index, epoch)
    else: self.error(f"doorbell type {kind >> 28:#x} is not modelled")

  def advance(self, what: str, current: int, depth: int, index: int, epoch: int, limit: int) -> int | None:
    """The absolute index a doorbell (index, epoch) names: the first at or after current with that slot; checked
    against the epoch and against limit (the furthest legal value). None (and an error) when wrong."""
    if index >= depth:
      self.error(f"{what}: doorbell index {index} beyond the ring depth {depth}")
      return None
    new = current + (index - current) % depth
    if ((new // depth) & 1) != epoch:
      self.error(f"{what}: doorbell index {index} with epoch {epoch}, expected epoch {(new // depth) & 1}")
      return None
    if new > limit:
      self.error(f"{what}: doorbell index {index} moves past {limit % depth} (absolute {new} > {limit})")
      return None
    return new

  def _cq_doorbell(self, xid: int, index: int, epoch: int) -> None:
    cq = self.fw.cqs.get(xid)
    if cq is None:
      self.error(f"CQ doorbell for unknown CQ {xid:#x}")
      return
    new = self.advance(f"CQ {xid:#x}", cq.cons, cq.depth, index, epoch, cq.prod)
    if new is not None: cq.cons = new

  def _nq_arm(self, xid: int, index: int, epoch: int) -> None:
    ring = self.fw.rings.get(xid)
    if ring is None or ring.type != hsi.RING_ALLOC_REQ_RING_TYPE_NQ:
      self.error(f"NQ_ARM doorbell for {xid:#x}, which is not an NQ")
      return
    new = self.advance(f"NQ {xid:#x}", ring.cons, ring.depth, index, epoch, ring.prod)
    if new is not None: ring.cons = new

  def close(self) -> None:
    self.engine.close()
    self.phy.close()
