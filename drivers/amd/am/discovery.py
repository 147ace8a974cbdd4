"""IP discovery: what IP blocks the GPU has, their versions, and where each instance's registers are.

The board firmware leaves a binary DISCOVERY_OFFSET below the end of VRAM (Linux: DISCOVERY_TMR_OFFSET in
amdgpu_discovery.c). Its layout is linux-source-6.12 drivers/gpu/drm/amd/include/discovery.h, read through the
generated hcq.autogen.amd.discovery: a binary_header with a 16-bit byte-sum checksum and a table list; the IP
discovery table (per die: ip / ip_v3 / ip_v4 entries, each followed by its segment base addresses, 32- or 64-bit);
the harvest table (IP instances fused off); the GC info table (shader engines, WGPs, LDS ...).

Every error names the offset in the binary where the parse stopped.
"""
from __future__ import annotations

import ctypes
import dataclasses

from ....autogen.amd import discovery as D
from ....errors import DeviceError

DISCOVERY_OFFSET = 64 << 10    # from the end of VRAM
DISCOVERY_SIZE = 10 << 10

# hardware ids (Linux drivers/gpu/drm/amd/include/soc15_hw_ip.h) of the blocks AM drives
HWID = {"MP1": 1, "GC": 11, "MMHUB": 34, "OSSSYS": 40, "HDP": 41, "SDMA0": 42, "SDMA1": 43, "NBIF": 108, "MP0": 255}
HWNAME = {v: k for k, v in HWID.items()}


class DiscoveryError(DeviceError):
  """The discovery binary is not what discovery.h describes; the message names the offset."""


@dataclasses.dataclass
class IPInstance:
  hw_id: int
  instance: int
  version: tuple[int, int, int]
  bases: list[int]          # segment base addresses (dwords), indexed by a register's BASE_IDX
  harvested: bool = False

  @property
  def name(self) -> str: return HWNAME.get(self.hw_id, f"hwid{self.hw_id}")


@dataclasses.dataclass
class Discovery:
  version: tuple[int, int]
  ips: dict[int, list[IPInstance]]     # hw_id -> instances (ordered by instance number)
  harvest: list[tuple[int, int]]       # (hw_id, instance) fused off
  gc_info: dict

  def ip(self, name: str, instance: int = 0) -> IPInstance:
    for inst in self.ips.get(HWID[name], []):
      if inst.instance == instance: return inst
    raise DiscoveryError(f"IP discovery: the table has no {name} instance {instance} (hw id {HWID[name]})")

  def version_of(self, name: str) -> tuple[int, int, int]: return self.ip(name).version

  def summary(self) -> str:
    return ", ".join(f"{HWNAME[h]} {'.'.join(map(str, insts[0].version))}" for h, insts in sorted(self.ips.items())
                     if h in HWNAME)


def checksum(data: bytes) -> int: return sum(data) & 0xFFFF


class _Reader:
  def __init__(self, data: bytes):
    self.data = data

  def struct(self, cls, off: int, what: str):
    size = ctypes.sizeof(cls)
    if off < 0 or off + size > len(self.data):
      raise DiscoveryError(f"IP discovery: {what} at offset {off:#x} ({size} bytes) runs past the end of the "
                           f"{len(self.data):#x}-byte binary")
    return cls.from_buffer_copy(self.data, off)

  def words(self, off: int, count: int, width: int, what: str) -> list[int]:
    end = off + count * width
    if end > len(self.data):
      raise DiscoveryError(f"IP discovery: {what} at offset {off:#x} runs past the end of the binary")
    return [int.from_bytes(self.data[off + i * width:off + (i + 1) * width], "little") for i in range(count)]


def _check_table(rd: _Reader, name: str, info) -> None:
  off, size = info.offset, info.size
  if off + size > len(rd.data):
    raise DiscoveryError(f"IP discovery: {name} table at offset {off:#x} (size {size:#x}) runs past the binary")
  got = checksum(rd.data[off:off + size])
  if got != info.checksum:
    raise DiscoveryError(f"IP discovery: {name} table at offset {off:#x}: checksum {got:#06x}, the header says "
                         f"{info.checksum:#06x}")


def parse(data: bytes) -> Discovery:
  rd = _Reader(bytes(data))
  bh = rd.struct(D.struct_binary_header, 0, "binary header")
  if bh.binary_signature != D.BINARY_SIGNATURE:
    raise DiscoveryError(f"IP discovery: signature {bh.binary_signature:#010x} at offset 0x0 is not "
                         f"{D.BINARY_SIGNATURE:#010x} (no discovery binary there: VRAM not initialized by the board "
                         f"firmware, or the wrong offset)")
  start = D.struct_binary_header.binary_checksum.offset + 2
  if bh.binary_size > len(rd.data) or bh.binary_size < start:
    raise DiscoveryError(f"IP discovery: binary_size {bh.binary_size:#x} at offset {D.struct_binary_header.binary_size.offset:#x} "
                         f"is outside the {len(rd.data):#x}-byte binary")
  got = checksum(rd.data[start:bh.binary_size])
  if got != bh.binary_checksum:
    raise DiscoveryError(f"IP discovery: binary checksum {got:#06x} over {start:#x}..{bh.binary_size:#x} differs from "
                         f"the header's {bh.binary_checksum:#06x} (offset {D.struct_binary_header.binary_checksum.offset:#x})")
  ip_info = bh.table_list[D.IP_DISCOVERY]
  ihdr = rd.struct(D.struct_ip_discovery_header, ip_info.offset, "IP discovery header")
  if ihdr.signature != D.DISCOVERY_TABLE_SIGNATURE:
    raise DiscoveryError(f"IP discovery: table signature {ihdr.signature:#010x} at offset {ip_info.offset:#x} is not "
                         f"{D.DISCOVERY_TABLE_SIGNATURE:#010x}")
  ip_info.size = ihdr.size      # the table list's size is the header's (as Linux checks it)
  _check_table(rd, "IP discovery", ip_info)
  ips = _parse_ips(rd, ihdr, ip_info.offset)
  harvest = _parse_harvest(rd, bh.table_list[D.HARVEST_INFO])
  for hw_id, inst in harvest:
    for ip in ips.get(hw_id, []):
      if ip.instance == inst: ip.harvested = True
  gc_info = _parse_gc(rd, bh.table_list[D.GC])
  return Discovery((bh.version_major, bh.version_minor), ips, harvest, gc_info)


def _parse_ips(rd: _Reader, ihdr, table_off: int) -> dict[int, list[IPInstance]]:
  if not 1 <= ihdr.num_dies <= 16:
    raise DiscoveryError(f"IP discovery: num_dies {ihdr.num_dies} at offset {table_off + D.struct_ip_discovery_header.num_dies.offset:#x} "
                         f"is not 1..16")
  wide = ihdr.version >= 4 and bool(ihdr.base_addr_64_bit)
  ips: dict[int, list[IPInstance]] = {}
  for d in range(ihdr.num_dies):
    off = ihdr.die_info[d].die_offset
    dh = rd.struct(D.struct_die_header, off, f"die {d} header")
    off += ctypes.sizeof(D.struct_die_header)
    for i in range(dh.num_ips):
      e = rd.struct(D.struct_ip_v4, off, f"die {d} IP entry {i}")
      if e.num_base_address > 16:
        raise DiscoveryError(f"IP discovery: IP entry {i} (hw id {e.hw_id}) at offset {off:#x} claims "
                             f"{e.num_base_address} base addresses")
      off += 8   # hw_id, instance, num_base_address, major, minor, revision, sub_revision/variant
      width = 8 if wide else 4
      bases = rd.words(off, e.num_base_address, width, f"bases of IP entry {i} (hw id {e.hw_id})")
      off += width * e.num_base_address
      ips.setdefault(e.hw_id, []).append(IPInstance(e.hw_id, e.instance_number, (e.major, e.minor, e.revision), bases))
  for insts in ips.values(): insts.sort(key=lambda x: x.instance)
  return ips


def _parse_harvest(rd: _Reader, info) -> list[tuple[int, int]]:
  if not info.offset: return []
  _check_table(rd, "harvest", info)
  ht = rd.struct(D.struct_harvest_table, info.offset, "harvest table")
  if ht.header.signature != D.HARVEST_TABLE_SIGNATURE:
    raise DiscoveryError(f"IP discovery: harvest signature {ht.header.signature:#010x} at offset {info.offset:#x} is "
                         f"not {D.HARVEST_TABLE_SIGNATURE:#010x}")
  return [(e.hw_id, e.number_instance) for e in ht.list if e.hw_id]


def _parse_gc(rd: _Reader, info) -> dict:
  if not info.offset: return {}
  _check_table(rd, "GC info", info)
  hdr = rd.struct(D.struct_gpu_info_header, info.offset, "GC info header")
  if hdr.table_id != D.GC_TABLE_ID:
    raise DiscoveryError(f"IP discovery: GC info table id {hdr.table_id:#x} at offset {info.offset:#x} is not {D.GC_TABLE_ID:#x}")
  if hdr.version_major != 1:
    raise DiscoveryError(f"IP discovery: GC info v{hdr.version_major}.{hdr.version_minor} at offset {info.offset:#x}: "
                         f"only v1.x is read")
  gc = rd.struct(D.struct_gc_info_v1_0, info.offset, "GC info v1.0")
  return {name: getattr(gc, name) for name, _ in D.struct_gc_info_v1_0._fields_ if name != "header"}
