"""PCI Express transaction-layer packets (TLPs): the fmt/type codes, completion statuses, config addresses and byte
enables of the requests a bridge puts on the link. Pure data (no OS access): the USB bridge driver
(drivers/system/usbpci.py, asm24.py) and the mock bridge (mockgpu/usb) share it. Neither builds or parses a whole
header (the bridge's firmware does, from the request's fields): the header layout below is pinned by
tests/usb/test_tlp.py, which holds the header codec.

Field layout, PCI Express Base Specification Revision 4.0 (section numbers are the same in 3.0 and 5.0):
  §2.2.1  common header, DW0: byte 0 = Fmt[2:0] (bits 7:5) | Type[4:0]; byte 1 = T9 TC[2:0] T8 Attr2 LN TH;
          byte 2 = TD EP Attr[1:0] AT[1:0] Length[9:8]; byte 3 = Length[7:0] (in DW; 0 means 1024)
  Table 2-2/2-3  Fmt: 000 3DW no data, 001 4DW no data, 010 3DW with data, 011 4DW with data;
          Type: 0_0000 memory request, 0_0100 / 0_0101 configuration type 0 / type 1, 0_1010 completion
  §2.2.5  First/Last DW byte enables: bit i enables byte i of that DW; a 1-DW request has Last DW BE 0000
  §2.2.7  memory request DW1: Requester ID[31:16] Tag[15:8] Last DW BE[7:4] First DW BE[3:0];
          DW2..3 (4DW header): Address[63:32], Address[31:2] (bits 1:0 are PH, 00 here)
  §2.2.7  configuration request (always 3DW, Length 1): DW2 = Bus[31:24] Device[23:19] Function[18:16]
          Extended Register Number[11:8] Register Number[7:2]
  §2.2.9  completion DW1: Completer ID[31:16] Status[15:13] BCM[12] Byte Count[11:0];
          DW2: Requester ID[31:16] Tag[15:8] Lower Address[6:0]
  Table 2-34  completion status: 000 SC, 001 UR, 010 CRS (config request retry status), 100 CA
The header is sent big-endian byte by byte (§2.2.1: byte 0 first), as the tables draw it.
"""
from __future__ import annotations


# Fmt (bits 7:5 of byte 0)
FMT_3DW, FMT_4DW, FMT_3DW_DATA, FMT_4DW_DATA = 0b000, 0b001, 0b010, 0b011
# Type (bits 4:0 of byte 0)
TYPE_MEM, TYPE_CFG0, TYPE_CFG1, TYPE_CPL = 0b00000, 0b00100, 0b00101, 0b01010

# the fmt/type byte (byte 0) of each request the bridge issues
MRD64 = FMT_4DW << 5 | TYPE_MEM            # 0x20
MWR64 = FMT_4DW_DATA << 5 | TYPE_MEM       # 0x60
MRD32 = FMT_3DW << 5 | TYPE_MEM            # 0x00
MWR32 = FMT_3DW_DATA << 5 | TYPE_MEM       # 0x40
CFGRD0, CFGRD1 = FMT_3DW << 5 | TYPE_CFG0, FMT_3DW << 5 | TYPE_CFG1            # 0x04, 0x05
CFGWR0, CFGWR1 = FMT_3DW_DATA << 5 | TYPE_CFG0, FMT_3DW_DATA << 5 | TYPE_CFG1  # 0x44, 0x45
CPL, CPLD = FMT_3DW << 5 | TYPE_CPL, FMT_3DW_DATA << 5 | TYPE_CPL              # 0x0A, 0x4A

# completion status (Table 2-34)
CPL_SC, CPL_UR, CPL_CRS, CPL_CA = 0b000, 0b001, 0b010, 0b100
CPL_STATUS_NAMES = {CPL_SC: "successful completion", CPL_UR: "unsupported request",
                    CPL_CRS: "configuration request retry status", CPL_CA: "completer abort"}

_NAMES = {MRD64: "MRd64", MWR64: "MWr64", MRD32: "MRd32", MWR32: "MWr32", CFGRD0: "CfgRd0", CFGRD1: "CfgRd1",
          CFGWR0: "CfgWr0", CFGWR1: "CfgWr1", CPL: "Cpl", CPLD: "CplD"}


def fmt_type_name(fmt_type: int) -> str: return _NAMES.get(fmt_type, f"fmt/type {fmt_type:#04x}")
def has_data(fmt_type: int) -> bool: return bool(fmt_type >> 5 & 0b010)
def is_4dw(fmt_type: int) -> bool: return bool(fmt_type >> 5 & 0b001)
def is_config(fmt_type: int) -> bool: return fmt_type & 0x1F in (TYPE_CFG0, TYPE_CFG1)
def is_memory(fmt_type: int) -> bool: return fmt_type & 0x1F == TYPE_MEM and fmt_type >> 5 <= FMT_4DW_DATA
def is_posted(fmt_type: int) -> bool:
  """Memory writes (and messages, type 1_0xxx with data) are posted: no completion comes back (§2.4.1)."""
  return (is_memory(fmt_type) and has_data(fmt_type)) or fmt_type & 0x18 == 0x10


# ---- addresses and byte enables
def config_address(bus: int, dev: int, fn: int, reg: int) -> int:
  """The config request's DW2 (§2.2.7): bus<<24 | device<<19 | function<<16 | register (ext reg 11:8, reg 7:2)."""
  if not (0 <= bus < 256 and 0 <= dev < 32 and 0 <= fn < 8 and 0 <= reg < 4096):
    raise ValueError(f"config address {bus:x}:{dev:x}.{fn:x} register {reg:#x} is out of range")
  return bus << 24 | dev << 19 | fn << 16 | (reg & 0xFFC)


def split_config_address(addr: int) -> tuple[int, int, int, int]:
  return addr >> 24 & 0xFF, addr >> 19 & 0x1F, addr >> 16 & 0x7, addr & 0xFFC


def byte_enables(offset: int, size: int) -> int:
  """The First DW BE for an access of `size` bytes at byte `offset` inside one dword (§2.2.5)."""
  lane = offset & 3
  if size not in (1, 2, 3, 4) or lane + size > 4:
    raise ValueError(f"an access of {size} bytes at {offset:#x} does not fit one dword")
  return ((1 << size) - 1) << lane


def be_span(be: int) -> tuple[int, int]:
  """(first byte lane, number of lanes) of a contiguous byte-enable mask."""
  if not be: return 0, 0
  lo = (be & -be).bit_length() - 1
  return lo, be.bit_length() - lo


def merge_enabled(old: int, new: int, be: int) -> int:
  """The dword a completer keeps after a write of `new` with byte enables `be` over `old`."""
  mask = sum(0xFF << (8 * i) for i in range(4) if be >> i & 1)
  return (old & ~mask | new & mask) & 0xFFFFFFFF
