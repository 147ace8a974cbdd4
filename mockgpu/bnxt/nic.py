"""The mock Thor2 (BCM57608) PCI function: config space, BAR0 (HWRM window and trigger, RCFW mailbox), BAR2
(doorbells), DMA by physical address through the OS it is plugged into, and a PHY (wire.Phy).

Driver bugs the model can see are appended to .errors (and logged); tests assert the list is empty or holds the
expected entry. Register map: mockgpu/bnxt/README.md (Linux bnxt_en bnxt.h, bnxt_re qplib_rcfw.h).
"""
from __future__ import annotations

import errno
import random
import struct
import threading

from ...autogen import bnxt as hsi
from ...autogen.pci import PCI_COMMAND, PCI_COMMAND_MASTER, PCI_STD_HEADER_SIZEOF
from ...drivers.system.interface import MMIOView
from ...errors import GPUFault, OSCallError
from ..pci import PCIFunction
from .engine import Engine
from .firmware import Firmware
from .state import PAGE, PagedMemory, walk_pbl
from .wire import FaultPlan, Phy

VENDOR, DEVICE_THOR2 = 0x14E4, 0x1760
CLASS_ETHERNET = 0x020000
BAR0_SIZE, BAR2_SIZE = 0x10000, 0x100000
DB_OFF = 0x10000                        # reported as func_qcfg.legacy_l2_db_size_kb * 1024
HWRM_WINDOW, HWRM_WINDOW_LEN, HWRM_TRIGGER = 0x000, 128, 0x100
RCFW_BASE, RCFW_PROD, RCFW_TRIG = 0x600, 0x60C, 0x700
FIRST_FLAG = 1 << 31
CREQ_ENTRY = 16


class BarView(MMIOView):
  """A BAR as the driver maps it: every access goes to the model with its width (BAR0 takes 32-bit accesses, a
  doorbell is one 64-bit store: two 32-bit halves are a driver bug the model reports)."""

  def __init__(self, device, bar: int, size: int, name: str):
    self.device, self.bar, self.size, self.name = device, bar, size, name

  def read32(self, offset): self._check(offset, 4); return self.device.mmio_read(self.bar, offset, 4)
  def write32(self, offset, value): self._check(offset, 4); self.device.mmio_write(self.bar, offset, value & 0xFFFFFFFF, 4)
  def read64(self, offset): self._check(offset, 8); return self.device.mmio_read(self.bar, offset, 8)
  def write64(self, offset, value): self._check(offset, 8); self.device.mmio_write(self.bar, offset, value & (2**64 - 1), 8)


class MockThor2(PCIFunction):
  def __init__(self, addr: str = "0000:41:00.0", mac: bytes = bytes.fromhex("020000000001"), port_id: int = 0,
               udp_port: int = 0, peer_port: int | None = None, pcap: str | None = None, faults: str | None = None,
               seed: int | None = None, silent_hwrm=(), verbose: bool = False, async_fw: bool = False,
               async_creq: bool = False):
    """async_fw: firmware answers from another thread 0-2 ms later, body first, then header, then the valid byte (a
    driver that reads early or skips the seq_id check fails); async_creq: an asynchronous FUNC_EVENT is posted on the
    CREQ before every command response (a driver that takes the next entry for its response fails)."""
    super().__init__(addr, VENDOR, DEVICE_THOR2, CLASS_ETHERNET, revision=1, subsystem_vendor=VENDOR,
                     subsystem_device=0x5208)
    self.add_bar(0, BarView(self, 0, BAR0_SIZE, f"{self.addr} BAR0"), is_64=True, prefetchable=True)
    self.add_bar(2, BarView(self, 2, BAR2_SIZE, f"{self.addr} BAR2"), is_64=True, prefetchable=True)
    self.mac, self.port_id = bytes(mac), port_id
    self.device_id = DEVICE_THOR2
    self.rng = random.Random(seed)
    self.bar_sizes = {0: BAR0_SIZE, 2: BAR2_SIZE}
    self.db_off = DB_OFF
    self.silent_hwrm = set(silent_hwrm)
    self.async_fw, self.async_creq = async_fw, async_creq
    self.verbose = verbose
    self.errors: list[str] = []
    self.messages: list[str] = []
    self.ctx_init_warned: set[int] = set()   # backing-store types warned about (firmware.Firmware._check_ctx_init)
    self.hwrm_window = bytearray(HWRM_WINDOW_LEN)
    self.cmdq_init = bytearray(16)
    self.cmdq_init_written = False
    self.cmdq_prod_reg = 0
    self.cmdq = None                 # (memory, depth, creq ring) once a first-flag producer write took the init
    self.cmdq_cons = 0
    self.first_seen = False
    self.fw = Firmware(self)
    self.phy = Phy(f"bnxt-{self.addr}", port=udp_port, peer_port=peer_port, pcap=pcap, faults=FaultPlan.parse(faults),
                   log=self.log, error=self.error)
    self.engine = Engine(self)
    self.phy.rx_handler = self.engine.receive

  # ---- reporting
  def log(self, msg: str) -> None:
    self.messages.append(msg)

  def error(self, msg: str) -> None:
    """A driver bug the device can see."""
    self.errors.append(msg)
    self.messages.append("ERROR " + msg)

  # ---- sysfs: the wire's endpoint (read: where this port listens; write: the peer's endpoint) and the errors
  def sysfs_files(self) -> dict:
    files = super().sysfs_files()
    files["wire"] = dict(read=lambda: f"udp_port={self.phy.address[1]}\n", write=self._wire_write)
    files["device_errors"] = dict(read=lambda: "".join(e.replace("\n", " ") + "\n" for e in list(self.errors)))
    return files

  def _wire_write(self, data: bytes) -> None:
    """'udp_port=N': send to the peer NIC bound to UDP port N on 127.0.0.1."""
    text = data.decode(errors="replace").strip()
    fields = dict(word.partition("=")[::2] for word in text.split())
    port = fields.get("udp_port", "")
    # ASCII digits, at most 5 (int() of "²" or of 5000 digits would raise instead)
    if set(fields) != {"udp_port"} or not (port.isascii() and port.isdigit() and len(port) <= 5) \
       or not 0 < int(port) < 65536:
      raise OSCallError("write", f"{self.sysfs_dir}/wire", errno.EINVAL,
                        f"{text!r}: expected udp_port=N with N a UDP port (1..65535) of the peer NIC on 127.0.0.1")
    self.phy.set_peer(int(port))

  # ---- the OS side: a PCI function of a MockOS; DMA through its host memory
  def attach(self, os) -> None: os.add_pci_function(self)

  @property
  def bus_master(self) -> bool: return bool(self.command & PCI_COMMAND_MASTER)

  def on_config_write(self, offset: int, data: bytes) -> None:
    if offset < PCI_STD_HEADER_SIZEOF and not PCI_COMMAND <= offset < PCI_COMMAND + 2:
      self.error(f"config write at {offset:#x}: the driver only needs PCI_COMMAND")

  def dma_read(self, pa: int, n: int) -> bytes:
    return self.os.memory.dma_read(pa, n)

  def dma_write(self, pa: int, data: bytes) -> None:
    self.os.memory.dma_write(pa, data)

  # ---- MMIO
  def mmio_read(self, bar: int, offset: int, width: int) -> int:
    return 0

  def mmio_write(self, bar: int, offset: int, value: int, width: int) -> None:
    with self.lock:
      try:
        if bar == 0: self._bar0_write(offset, value, width)
        elif bar == 2: self._doorbell(offset, value, width)
        else: self.error(f"write to BAR{bar}")
      except GPUFault as e:   # the device touched memory nobody mapped: what an IOMMU would report
        self.error(f"DMA fault while handling BAR{bar}+{offset:#x} = {value:#x}: {e}")

  def _bar0_write(self, offset: int, value: int, width: int) -> None:
    if width != 4:
      self.error(f"BAR0 {width * 8}-bit write at {offset:#x}: BAR0 takes 32-bit accesses")
      return
    if HWRM_WINDOW <= offset < HWRM_WINDOW + HWRM_WINDOW_LEN:
      struct.pack_into("<I", self.hwrm_window, offset - HWRM_WINDOW, value)
    elif offset == HWRM_TRIGGER:
      if value != 1: self.error(f"HWRM trigger written with {value:#x}, not 1")
      else: self._later(self._hwrm_trigger, bytes(self.hwrm_window))
    elif offset == RCFW_PROD:
      self.cmdq_prod_reg = value
    elif RCFW_BASE <= offset < RCFW_PROD:
      struct.pack_into("<I", self.cmdq_init, offset - RCFW_BASE, value)
      self.cmdq_init_written = True
    elif offset == RCFW_TRIG:
      if value != 1: self.error(f"RCFW trigger written with {value:#x}, not 1")
      else: self._later(self._rcfw_trigger, self.cmdq_prod_reg)
    else:
      self.error(f"BAR0 write of {value:#x} at unmodelled offset {offset:#x}")

  def _later(self, fn, arg) -> None:
    """Run a firmware action now (sync mode) or from a timer thread 0-2 ms later (async_fw)."""
    if not self.async_fw: return fn(arg)

    def run():
      with self.lock:
        try: fn(arg)
        except GPUFault as e: self.error(f"DMA fault in firmware: {e}")
        except Exception as e:   # on a timer thread nobody waits for: record it, never lose it
          self.error(f"firmware {getattr(fn, '__name__', fn)} failed: {type(e).__name__}: {e}")
    threading.Timer(self.rng.uniform(0, 0.002), run).start()

  def _hwrm_trigger(self, window: bytes) -> None:
    if not self.bus_master:
      self.error("HWRM trigger with bus mastering off (PCI_COMMAND_MASTER clear): the response cannot be DMA'd")
      return
    result = self.fw.hwrm(window)
    if result is None: return
    resp_addr, body = result
    # body first, then the header, then the valid byte (bnxt_en bnxt_hwrm.c __hwrm_send polls the valid byte
    # last): a driver reading early sees zeros
    self.dma_write(resp_addr + 8, body[8:-1])
    self.dma_write(resp_addr, body[:8])
    self.dma_write(resp_addr + len(body) - 1, body[-1:])

  # ---- RCFW
  def _rcfw_trigger(self, prod_reg: int) -> None:
    if not self.cmdq_init_written:
      self.error("RCFW trigger before cmdq_init was written")
      return
    if prod_reg & FIRST_FLAG:
      pbl, size_lvl, creq_id, _ = struct.unpack("<QHHI", bytes(self.cmdq_init))
      depth, level = size_lvl >> 2, size_lvl & 3
      creq = self.fw.rings.get(creq_id)
      if creq is None or creq.type != hsi.RING_ALLOC_REQ_RING_TYPE_NQ:
        self.error(f"cmdq_init: creq_ring_id {creq_id} is not an NQ-type ring")
        return
      pages = walk_pbl(self.dma_read, pbl, level, (depth * 16 + PAGE - 1) // PAGE, "CMDQ")
      self.cmdq = (PagedMemory(self, pages, depth * 16), depth, creq)
      self.cmdq_cons, self.first_seen = 0, True
    elif not self.first_seen:
      self.error("RCFW: first producer write after cmdq_init lacks FIRMWARE_FIRST_FLAG (bit 31): command ignored")
      return
    mem, depth, creq = self.cmdq
    prod = prod_reg & 0xFFFF
    if (prod - self.cmdq_cons) % 0x10000 > depth:
      self.error(f"RCFW: producer {prod} is more than the CMDQ depth {depth} ahead of the consumer {self.cmdq_cons % 0x10000}")
      return
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
      if self.async_creq and not self.post_creq(creq, hsi.CREQ_FUNC_EVENT_EVENT_VF_COMM_REQUEST, 0, 0, 0,
                                                kind=hsi.CREQ_BASE_TYPE_FUNC_EVENT): break
      if not self.post_creq(creq, opcode, status, cookie, xid): break

  def post_creq(self, creq, opcode: int, status: int, cookie: int, xid: int, kind: int = hsi.CREQ_BASE_TYPE_QP_EVENT) -> bool:
    if creq.prod - creq.cons >= creq.depth:
      self.error(f"CREQ overflow: the driver did not return credits (NQ_ARM) on ring {creq.id}; "
                 f"{creq.prod - creq.cons} entries outstanding")
      return False
    v = 1 - ((creq.prod // creq.depth) & 1)
    entry = struct.pack("<BBHIBB6x", kind, status, cookie, xid, v, opcode)
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
    elif kind == hsi.DBC_DBC_TYPE_RQ: self.engine.rq_doorbell(xid, index, epoch)
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
