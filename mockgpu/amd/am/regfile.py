"""The register aperture (MMIO BAR) of the mock Navi 31: a sparse dword register file whose registers a block model
may take over (a read or write hook per absolute dword address), and the NBIO indirect window.

Register addresses are computed as the driver must compute them: the segment base of the IP instance from the
discovery table plus the register's offset from the generated register module (hcq.autogen.amd.*).

The indirect window (BIF_BX_PF0_MM_INDEX/MM_DATA/MM_INDEX_HI, dwords 0, 1 and 6 of NBIF segment 0): bit 31 of the
index selects VRAM ((index_hi << 31) | index[30:0]) rather than register space (a byte address): how a driver reads
VRAM or registers that its BAR does not cover.
"""
from __future__ import annotations

import importlib
import threading

from ...mmio import RegisterMMIO

MMIO_SIZE = 1 << 20
MM_INDEX, MM_DATA, MM_INDEX_HI = 0x0, 0x1, 0x6
# the RSMU window (BIF_BX_PF0_RSMU_INDEX / _DATA, nbio 4.3 segment 1 dwords 0 and 1: dwords 0x14 and 0x15 with the
# Navi 31's segment base): a byte address of register space in the index, the register through the data; tinygrad
# 0.14's AM driver (hardware-proven) reaches registers beyond the BAR this way (AMDev.indirect_rreg / indirect_wreg)
RSMU_INDEX, RSMU_DATA = 0x14, 0x15


class RegFile:
  def __init__(self, name: str, ips: dict, vram_read, vram_write):
    self.ips = ips               # hw_id -> segment bases (instance 0)
    self.values: dict[int, int] = {}
    self.read_hooks: dict[int, object] = {}
    self.write_hooks: dict[int, object] = {}
    # checks before an access takes effect (the SR-IOV VF's protections, virt.py): a write guard returns False to
    # drop the write, either may raise to refuse the access outright
    self.read_guards: dict[int, object] = {}
    self.write_guards: dict[int, object] = {}
    self.vram_read, self.vram_write = vram_read, vram_write
    self.lock = threading.RLock()
    self.mmio = RegisterMMIO(name, MMIO_SIZE, read_hook=self._bar_read, write_hook=self._bar_write)
    self._modules: dict[str, object] = {}
    self.gone = None             # () -> True while the function does not answer (a reset): reads all ones, no writes

  def reset(self) -> None:
    """Every register back to zero and every block model's hook and guard gone (a reset: the models are built again)."""
    with self.lock:
      self.values.clear()
      self.read_hooks.clear()
      self.write_hooks.clear()
      self.read_guards.clear()
      self.write_guards.clear()

  # ---- names -> addresses
  def module(self, name: str):
    if name not in self._modules: self._modules[name] = importlib.import_module(f"hcq.autogen.amd.{name}")
    return self._modules[name]

  def addr(self, hw_id: int, module: str, reg: str) -> int:
    mod = self.module(module)
    return self.ips[hw_id][getattr(mod, f"reg{reg}_BASE_IDX")] + getattr(mod, f"reg{reg}")

  def fields(self, module: str, reg: str, value: int) -> dict:
    return self.module(module).REGS[reg].decode(value)

  def hook(self, addr: int, read=None, write=None) -> None:
    if read is not None: self.read_hooks[addr] = read
    if write is not None: self.write_hooks[addr] = write

  def guard(self, addr: int, read=None, write=None) -> None:
    """Add a check on the register at addr (checks of several models on one register all run, in order)."""
    if read is not None:
      old = self.read_guards.get(addr)
      self.read_guards[addr] = read if old is None else (lambda old=old, new=read: (old(), new()))
    if write is not None:
      old = self.write_guards.get(addr)
      self.write_guards[addr] = write if old is None else (lambda v, old=old, new=write: old(v) and new(v))

  # ---- dword register space
  def read(self, addr: int) -> int:
    with self.lock:
      if addr in self.read_guards: self.read_guards[addr]()
      fn = self.read_hooks.get(addr)
      return (fn() if fn is not None else self.values.get(addr, 0)) & 0xFFFFFFFF

  def write(self, addr: int, value: int) -> None:
    with self.lock:
      if addr in self.write_guards and not self.write_guards[addr](value & 0xFFFFFFFF): return
      self.values[addr] = value & 0xFFFFFFFF
      fn = self.write_hooks.get(addr)
      if fn is not None: fn(value & 0xFFFFFFFF)

  def poke(self, addr: int, value: int) -> None:
    """Set a register's value as the hardware would (no write hook)."""
    with self.lock: self.values[addr] = value & 0xFFFFFFFF

  # ---- the BAR
  def _bar_read(self, offset: int):
    if self.gone is not None and self.gone(): return 0xFFFFFFFF
    addr = offset >> 2
    if addr == MM_DATA: return self._indirect(None)
    if addr in (MM_INDEX, MM_INDEX_HI): return None
    if addr == RSMU_DATA: return self.read(self.values.get(RSMU_INDEX, 0) >> 2)
    return self.read(addr)

  def _bar_write(self, offset: int, value: int) -> None:
    if self.gone is not None and self.gone(): return
    addr = offset >> 2
    if addr == MM_DATA: return self._indirect(value)
    if addr in (MM_INDEX, MM_INDEX_HI): return
    if addr == RSMU_DATA: return self.write(self.values.get(RSMU_INDEX, 0) >> 2, value)
    self.write(addr, value)

  def _indirect(self, value):
    index, hi = self.mmio.regs.get(MM_INDEX * 4, 0), self.mmio.regs.get(MM_INDEX_HI * 4, 0)
    if index & 0x80000000:
      where = (hi << 31) | (index & 0x7FFFFFFF)
      if value is None: return self.vram_read(where)
      return self.vram_write(where, value)
    if value is None: return self.read(index >> 2)
    self.write(index >> 2, value)
