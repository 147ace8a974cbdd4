"""IH (OSSSYS 6.0): interrupt ring 0 in VRAM with its write pointer written back to memory; polled, not IRQ-driven.

Entries are 32 bytes (Linux amdgpu_ih.c, decode_iv): dword 0 holds client id (bits 7:0), source id (15:8), ring id
(23:16) and vmid (27:24); dwords 4-7 the source's data. A VM fault (gfx11's soc21 ids, soc15_ih_clientid.h and
gmc_v11_0_sw_init: MMHUB's as client VMC 0x12 source VMC_1_0__SRCID__VM_FAULT 0, the GC hub's UTCL2 as client GFX 0x0a
source UTCL2_1_0__SRCID__FAULT 0) carries the page address: data0 = address bits 43:12, data1 bits 3:0 = address bits 47:44
(gmc_v11_0.c, process_interrupt). poll() turns such an entry into hcq.GPUFault with the address and the client.
"""
from __future__ import annotations

import struct

from ....errors import GPUFault
from .block import IPBlock

RING_SIZE = 256 << 10
ENTRY = 32                       # bytes of one IV entry
CLIENT_VMC, CLIENT_GFX = 0x12, 0x0A          # SOC21_IH_CLIENTID_VMC, SOC21_IH_CLIENTID_GFX
SRC_VM_FAULT = 0                             # VMC_1_0__SRCID__VM_FAULT, UTCL2_1_0__SRCID__FAULT
CLIENTS = {CLIENT_VMC: "VMC (MMHUB)", CLIENT_GFX: "UTCL2 (GC hub)"}


class IH(IPBlock):
  name = "ih"

  def sw_init(self) -> None:
    self.ring = self.dev.vram.alloc(RING_SIZE, "IH ring 0")
    self.wptr_wb = self.dev.vram.alloc(0x1000, "IH write pointer writeback")
    self.rptr = 0
    self.overflows = 0           # times the ring overflowed (entries were lost)

  def hw_init(self) -> None:
    r = self.dev.osssys_regs
    self.step(f"ring 0: {RING_SIZE >> 10} KiB at MC {self.ring.mc:#x}")
    r.write("IH_RB_CNTL", 0)
    r.write("IH_RB_BASE", (self.ring.mc >> 8) & 0xFFFFFFFF)
    r.write("IH_RB_BASE_HI", self.ring.mc >> 40)
    r.write("IH_RB_WPTR_ADDR_LO", self.wptr_wb.mc & 0xFFFFFFFF)
    r.write("IH_RB_WPTR_ADDR_HI", (self.wptr_wb.mc >> 32) & 0xFFFF)
    r.write("IH_RB_RPTR", 0)
    r.write("IH_RB_WPTR", 0)
    r.write("IH_RB_CNTL", RB_ENABLE=1, RB_SIZE=(RING_SIZE // 4).bit_length() - 1, WPTR_WRITEBACK_ENABLE=1,
            WPTR_OVERFLOW_ENABLE=1, ENABLE_INTR=1, MC_SPACE=4, MC_SNOOP=1, RPTR_REARM=1)

  def poll(self) -> list[dict]:
    """Consume the entries up to the written-back write pointer; raise GPUFault for a VM fault among them.

    With WPTR_OVERFLOW_ENABLE the written-back pointer is an IH_RB_WPTR value: the byte offset in OFFSET and
    RB_OVERFLOW in bit 0, set once the IH wrote over entries not read yet. Then the oldest entry still intact is the
    one after the write pointer: reading resumes there and WPTR_OVERFLOW_CLEAR (pulsed) rearms the flag."""
    with self.dev.lock: return self._poll()        # one reader of the ring at a time: rptr is shared

  def _poll(self) -> list[dict]:
    vram, r = self.dev.vram, self.dev.osssys_regs
    wptr_reg = r.reg("IH_RB_WPTR")
    raw = struct.unpack("<I", vram.read(self.wptr_wb.offset, 4))[0]
    wptr = (raw & wptr_reg.fields["OFFSET"].mask) & (RING_SIZE - 1) & ~(ENTRY - 1)
    overflow = raw & wptr_reg.fields["RB_OVERFLOW"].mask
    start = self.rptr
    if overflow:
      self.overflows += 1
      self.rptr = (wptr + ENTRY) % RING_SIZE
    entries = []
    for _ in range(RING_SIZE // ENTRY):          # at most one ring's worth per poll
      if self.rptr == wptr: break
      dw = struct.unpack("<8I", vram.read(self.ring.offset + self.rptr, ENTRY))
      entries.append({"client": dw[0] & 0xFF, "src": (dw[0] >> 8) & 0xFF, "ring": (dw[0] >> 16) & 0xFF,
                      "vmid": (dw[0] >> 24) & 0xF, "data": list(dw[4:8])})
      self.rptr = (self.rptr + ENTRY) % RING_SIZE
    if self.rptr != start: r.write("IH_RB_RPTR", self.rptr)     # a register write per idle poll costs a PCIe write
    if overflow:
      r.update("IH_RB_CNTL", WPTR_OVERFLOW_CLEAR=1)
      r.update("IH_RB_CNTL", WPTR_OVERFLOW_CLEAR=0)
    for e in entries:
      if e["client"] in CLIENTS and e["src"] == SRC_VM_FAULT:
        addr = (e["data"][0] << 12) | ((e["data"][1] & 0xF) << 44)
        raise GPUFault(f"{self.dev.label}: {CLIENTS[e['client']]} page fault, vmid {e['vmid']}", address=addr,
                       kind="VM fault")
    return entries
