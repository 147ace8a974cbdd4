"""Register access of an AM device: direct through the MMIO BAR, indirect (MM_INDEX/MM_DATA) beyond it, per IP
block through the segment bases that IP discovery gave and the generated register modules (hcq.autogen.amd.*).

    gc = IPRegs(access, "GC", gc_module, bases)
    gc.write("CP_MEC_RS64_CNTL", MEC_HALT=0)      # fields by name (the sh_mask header's)
    gc.wait("RLC_RLCS_BOOTLOAD_STATUS", mask, value, "RLC autoload")   # bounded; hcq.Timeout names register and values

A register module is chosen per IP version: the greatest version hcq has with the same major that is <= the
GPU's (hardware keeps a major's register layout); none is an error naming the IP and version.
"""
from __future__ import annotations

import importlib
import threading

from ....errors import DeviceError, Timeout

# IP name -> generated module family (hcq/autogen/amd/<family>_<maj>_<min>_<rev>.py)
FAMILIES = {"GC": "gc", "SDMA0": "sdma", "MMHUB": "mmhub", "OSSSYS": "osssys", "HDP": "hdp", "NBIF": "nbio",
            "MP0": "mp", "MP1": "mp"}
AVAILABLE = {"gc": [(11, 0, 0), (12, 0, 0)], "sdma": [(6, 0, 0), (7, 0, 0)], "mmhub": [(3, 0, 0), (4, 1, 0)],
             "osssys": [(6, 0, 0), (7, 0, 0)], "hdp": [(6, 0, 0), (7, 0, 0)], "nbio": [(4, 3, 0)],
             "mp": [(13, 0, 0), (14, 0, 0)]}
MM_INDEX, MM_DATA, MM_INDEX_HI = 0x0, 0x1, 0x6     # BIF_BX_PF0_MM_* (nbio 4.3.0, segment 0 of NBIF: base 0)


def module_for(ip: str, version: tuple[int, int, int]):
  family = FAMILIES[ip]
  fits = [v for v in AVAILABLE[family] if v[0] == version[0] and v <= tuple(version)]
  if not fits:
    have = ", ".join(".".join(map(str, v)) for v in AVAILABLE[family])
    raise DeviceError(f"AM: no register module for {ip} {'.'.join(map(str, version))} (hcq has {family} {have})")
  return importlib.import_module(f"hcq.autogen.amd.{family}_{'_'.join(map(str, max(fits)))}")


# GC versions whose GC hub (GCVM_*, GCMC_*) has its own register layout: Linux gmc_v11_0_set_gfxhub_funcs gives GC
# 11.0.3 (Navi 32) gfxhub_v3_0_3.c, built on gc_11_0_3_offset.h, where those registers sit at other offsets than gc
# 11.0.0's (GCVM_CONTEXT0_CNTL 0x1698, not 0x1688); the other GC registers hcq uses are where gc 11.0.0 has them
GFXHUB_MODULES = {(11, 0, 3): "gc_11_0_3_gfxhub"}


def gfxhub_module_for(gc_version: tuple[int, int, int]):
  """The register module of the GC hub of this GC version (GFXHUB_MODULES, else the GC's own: module_for)."""
  name = GFXHUB_MODULES.get(tuple(gc_version))
  return importlib.import_module(f"hcq.autogen.amd.{name}") if name else module_for("GC", gc_version)


class RegAccess:
  """Dword register space: addresses inside the MMIO BAR directly, the rest through the MM_INDEX window."""

  def __init__(self, mmio, os, timeout_s: float, label: str, lock=None):
    self.mmio, self.os, self.timeout_s, self.label = mmio, os, timeout_s, label
    self.limit = mmio.size // 4
    # MM_INDEX then MM_DATA is one access: another thread's index between the two would redirect it
    self.lock = lock if lock is not None else threading.RLock()

  def read(self, addr: int) -> int:
    if addr < self.limit: return self.mmio.read32(addr * 4)
    with self.lock:
      self.mmio.write32(MM_INDEX * 4, (addr * 4) & 0x7FFFFFFF)
      return self.mmio.read32(MM_DATA * 4)

  def write(self, addr: int, value: int) -> None:
    if addr < self.limit: return self.mmio.write32(addr * 4, value & 0xFFFFFFFF)
    with self.lock:
      self.mmio.write32(MM_INDEX * 4, (addr * 4) & 0x7FFFFFFF)
      self.mmio.write32(MM_DATA * 4, value & 0xFFFFFFFF)

  def read_vram(self, offset: int) -> int:
    """A VRAM dword through the MM_INDEX window (bit 31 selects VRAM): for VRAM the BAR does not show."""
    with self.lock:
      self.mmio.write32(MM_INDEX_HI * 4, offset >> 31)
      self.mmio.write32(MM_INDEX * 4, 0x80000000 | (offset & 0x7FFFFFFF))
      return self.mmio.read32(MM_DATA * 4)

  def poll(self, read, mask: int, value: int, what: str, timeout_s: float | None = None) -> int:
    """Poll read() until (v & mask) == value, bounded by the device timeout; Timeout names what and the values."""
    timeout = self.timeout_s if timeout_s is None else timeout_s
    deadline = self.os.monotonic() + timeout
    while True:
      v = read()
      if v & mask == value: return v
      if self.os.monotonic() > deadline:
        raise Timeout(f"{self.label}: {what} & {mask:#x}", expected=f"{value:#x}", last_seen=f"{v:#x}", timeout_s=timeout)
      self.os.sleep(0.0005)


class IPRegs:
  """The registers of one IP instance."""

  def __init__(self, access: RegAccess, name: str, module, bases: list[int]):
    self.access, self.name, self.module, self.bases = access, name, module, bases

  def reg(self, name: str):
    try: r = self.module.REGS[name]
    except KeyError: raise DeviceError(f"AM: {self.name} has no register {name} in {self.module.__name__}") from None
    if r.base_idx >= len(self.bases):
      raise DeviceError(f"AM: {self.name} register {name} is in segment {r.base_idx}, discovery gave "
                        f"{len(self.bases)} segment bases")
    return r

  def addr(self, name: str) -> int: return self.reg(name).addr(self.bases)
  def read(self, name: str) -> int: return self.access.read(self.addr(name))

  def write(self, name: str, value: int = 0, **fields) -> None:
    r = self.reg(name)
    self.access.write(r.addr(self.bases), value | (r.encode(**fields) if fields else 0))

  def update(self, name: str, **fields) -> None:
    """Read-modify-write of the named fields."""
    r = self.reg(name)
    v = self.access.read(r.addr(self.bases))
    for k, val in fields.items():
      f = r.fields.get(k.upper()) or r.fields.get(k)
      if f is None: raise DeviceError(f"AM: {self.name} register {name} has no field {k}")
      v = (v & ~f.mask) | f.encode(val)
    self.access.write(r.addr(self.bases), v)

  def field(self, name: str, field: str) -> int:
    r = self.reg(name)
    return r.fields[field].decode(self.access.read(r.addr(self.bases)))

  def mask(self, name: str, *fields: str) -> int:
    r = self.reg(name)
    return sum(r.fields[f].mask for f in fields)

  def wait(self, name: str, mask: int, value: int, timeout_s: float | None = None) -> int:
    addr = self.addr(name)
    return self.access.poll(lambda: self.access.read(addr), mask, value, f"{self.name} {name}", timeout_s)
