"""TLP headers against the field layout of the PCI Express Base Specification 4.0 (§2.2.1 common header, §2.2.5 byte
enables, §2.2.7 memory and configuration requests, §2.2.9 completions), each expected word assembled here bit by bit
from the spec's figures, not with the codec. (tshark has no dissector for raw TLPs, so none is compared against.)"""
import dataclasses
import struct

import pytest

from hcq.drivers.system import pcie


# The header codec: neither the driver nor the mock builds or parses whole headers (the bridge's firmware does, from
# the request's fields), so it lives here, pinning the layout the fmt/type codes and field helpers of pcie.py serve.
@dataclasses.dataclass(frozen=True)
class Request:
  """A memory or configuration request header (data payload not included)."""
  fmt_type: int
  address: int             # memory: byte address (dword aligned); config: config_address(...)
  length: int = 1          # payload / read length in dwords, 1..1024
  first_be: int = 0xF
  last_be: int = 0
  requester: int = 0       # requester id (bus<<8 | dev<<3 | fn): the bridge's root port is 00:00.0
  tag: int = 0

  def encode(self) -> bytes:
    if not 1 <= self.length <= 1024: raise ValueError(f"TLP length {self.length} dwords is not 1..1024")
    if self.length == 1 and self.last_be: raise ValueError("a 1-DW request must have Last DW BE 0000 (§2.2.5)")
    if self.address & 3: raise ValueError(f"TLP address {self.address:#x} is not dword aligned")
    dw0 = self.fmt_type << 24 | (self.length & 0x3FF)
    dw1 = self.requester << 16 | (self.tag & 0xFF) << 8 | self.last_be << 4 | self.first_be
    if pcie.is_4dw(self.fmt_type): return struct.pack(">IIII", dw0, dw1, self.address >> 32, self.address & 0xFFFFFFFC)
    if self.address >> 32: raise ValueError(f"{pcie.fmt_type_name(self.fmt_type)} cannot carry the 64-bit address {self.address:#x}")
    return struct.pack(">III", dw0, dw1, self.address & 0xFFFFFFFC)

  @classmethod
  def decode(cls, header: bytes) -> "Request":
    if len(header) < 12: raise ValueError(f"TLP header of {len(header)} bytes (a request header has 3 or 4 DW)")
    dw0, dw1 = struct.unpack_from(">II", header)
    fmt_type = dw0 >> 24
    if pcie.is_4dw(fmt_type):
      if len(header) < 16: raise ValueError(f"{pcie.fmt_type_name(fmt_type)} needs a 4-DW header, got {len(header)} bytes")
      hi, lo = struct.unpack_from(">II", header, 8)
      address = hi << 32 | lo & 0xFFFFFFFC
    else: address = struct.unpack_from(">I", header, 8)[0] & 0xFFFFFFFC
    length = dw0 & 0x3FF or 1024
    return cls(fmt_type, address, length, dw1 & 0xF, dw1 >> 4 & 0xF, dw1 >> 16, dw1 >> 8 & 0xFF)

  @property
  def name(self) -> str: return pcie.fmt_type_name(self.fmt_type)


@dataclasses.dataclass(frozen=True)
class Completion:
  status: int = pcie.CPL_SC
  byte_count: int = 4
  completer: int = 0
  requester: int = 0
  tag: int = 0
  lower_address: int = 0
  with_data: bool = True

  def encode(self) -> bytes:
    length = (self.byte_count + 3) // 4 if self.with_data else 0
    dw0 = (pcie.CPLD if self.with_data else pcie.CPL) << 24 | length & 0x3FF
    dw1 = self.completer << 16 | (self.status & 7) << 13 | self.byte_count & 0xFFF
    dw2 = self.requester << 16 | (self.tag & 0xFF) << 8 | self.lower_address & 0x7F
    return struct.pack(">III", dw0, dw1, dw2)

  @classmethod
  def decode(cls, header: bytes) -> "Completion":
    if len(header) < 12: raise ValueError(f"completion header of {len(header)} bytes (needs 3 DW)")
    dw0, dw1, dw2 = struct.unpack_from(">III", header)
    if dw0 >> 24 & 0x1F != pcie.TYPE_CPL: raise ValueError(f"{pcie.fmt_type_name(dw0 >> 24)} is not a completion")
    return cls(dw1 >> 13 & 7, dw1 & 0xFFF, dw1 >> 16, dw2 >> 16, dw2 >> 8 & 0xFF, dw2 & 0x7F, pcie.has_data(dw0 >> 24))

  @property
  def status_name(self) -> str: return pcie.CPL_STATUS_NAMES.get(self.status, f"reserved completion status {self.status:#05b}")


def test_fmt_type_bytes_are_the_spec_encodings():
  # Fmt 001 (4DW, no data) / 011 (4DW, data), Type 0_0000 memory; Fmt 000/010 Type 0_0100/0_0101 configuration
  assert (pcie.MRD64, pcie.MWR64) == (0b001_00000, 0b011_00000) == (0x20, 0x60)
  assert (pcie.CFGRD0, pcie.CFGRD1, pcie.CFGWR0, pcie.CFGWR1) == (0x04, 0x05, 0x44, 0x45)
  assert (pcie.CPL, pcie.CPLD) == (0b000_01010, 0b010_01010)
  assert pcie.is_posted(pcie.MWR64) and not pcie.is_posted(pcie.MRD64) and not pcie.is_posted(pcie.CFGWR1)


def test_memory_read_header_fields():
  h = Request(pcie.MRD64, 0x8_1234_5678, length=3, first_be=0b1100, last_be=0b0011, requester=0x0100, tag=0x2A).encode()
  assert len(h) == 16
  dw0, dw1, dw2, dw3 = struct.unpack(">IIII", h)
  assert dw0 >> 29 == 0b001 and dw0 >> 24 & 0x1F == 0 and dw0 & 0x3FF == 3          # Fmt, Type, Length
  assert dw1 >> 16 == 0x0100 and dw1 >> 8 & 0xFF == 0x2A                             # Requester ID, Tag
  assert dw1 >> 4 & 0xF == 0b0011 and dw1 & 0xF == 0b1100                            # Last DW BE, First DW BE
  assert dw2 == 0x8 and dw3 == 0x1234_5678                                           # Address[63:32], [31:2]
  assert h[0] == 0x20                                                                # byte 0 goes first
  assert Request.decode(h) == Request(pcie.MRD64, 0x8_1234_5678, 3, 0b1100, 0b0011, 0x0100, 0x2A)


def test_config_request_header_fields():
  addr = pcie.config_address(4, 0, 0, 0x104)
  assert addr == 4 << 24 | 0x1 << 8 | 0x04     # Bus[31:24], Ext Register[11:8], Register[7:2]
  assert pcie.config_address(0x12, 0x1F, 7, 0xFFC) == 0x12 << 24 | 0x1F << 19 | 7 << 16 | 0xF << 8 | 0x3F << 2
  h = Request(pcie.CFGWR1, addr, first_be=0b0110).encode()
  assert len(h) == 12 and struct.unpack(">III", h) == (0x45 << 24 | 1, 0b0110, addr)
  assert pcie.split_config_address(addr) == (4, 0, 0, 0x104)


def test_completion_header_fields():
  h = Completion(pcie.CPL_CRS, byte_count=4, completer=0x0400, requester=0x0100, tag=7, lower_address=0x10).encode()
  dw0, dw1, dw2 = struct.unpack(">III", h)
  assert dw0 == 0x4A << 24 | 1
  assert dw1 == 0x0400 << 16 | 0b010 << 13 | 4        # Completer ID, Status[15:13], Byte Count
  assert dw2 == 0x0100 << 16 | 7 << 8 | 0x10           # Requester ID, Tag, Lower Address
  c = Completion.decode(h)
  assert c.status == pcie.CPL_CRS and c.status_name == "configuration request retry status"
  assert Completion.decode(Completion(pcie.CPL_UR, with_data=False).encode()).status_name == "unsupported request"


@pytest.mark.parametrize("offset,size,be", [(0, 4, 0xF), (0, 1, 0x1), (1, 1, 0x2), (3, 1, 0x8), (1, 2, 0x6),
                                            (2, 2, 0xC), (1, 3, 0xE), (0x1005, 2, 0x6)])
def test_byte_enables(offset, size, be):
  assert pcie.byte_enables(offset, size) == be
  assert pcie.be_span(be) == (offset & 3, size)


def test_byte_enables_refuse_a_dword_crossing_and_merge_keeps_other_lanes():
  with pytest.raises(ValueError, match="does not fit one dword"): pcie.byte_enables(3, 2)
  assert pcie.merge_enabled(0x11223344, 0xAABBCCDD, 0b0110) == 0x11BBCC44


def test_header_rules_are_enforced():
  with pytest.raises(ValueError, match="Last DW BE"): Request(pcie.MRD64, 0, 1, 0xF, 0xF).encode()
  with pytest.raises(ValueError, match="dword aligned"): Request(pcie.MRD64, 2).encode()
  with pytest.raises(ValueError, match="64-bit address"): Request(pcie.CFGRD0, 1 << 32).encode()
  assert Request.decode(Request(pcie.MWR64, 0x1000, 1024, 0xF, 0xF).encode()).length == 1024  # 0 = 1024
