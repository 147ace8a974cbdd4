"""RoCEv2 frames: Ethernet II / IPv4 / UDP 4791 / BTH [/ RETH] [/ AETH] / payload / pad / ICRC.

Layouts follow the InfiniBand Architecture Specification vol. 1 (Annex A17 "RoCEv2"; BTH 9.2, RETH 9.3.3, AETH 9.3.5).
Every header is big-endian, the ICRC alone is stored little-endian.

ICRC (IBTA vol. 1 invariant CRC, as annex A17 applies it to RoCEv2): CRC-32 (IEEE 802.3, zlib.crc32) over 8 bytes of
0xff standing in for the IB LRH, then the IPv4 header with TOS, TTL and header checksum masked to all-ones, the UDP
header with its checksum masked to all-ones, the BTH with byte 4 (FECN/BECN/reserved) masked to 0xff, then the rest of
the packet up to the ICRC.
"""
from __future__ import annotations

import dataclasses
import struct
import zlib

ETH_P_IPV4 = 0x0800
IPPROTO_UDP = 17
ROCEV2_UDP_PORT = 4791
ETH_LEN, IPV4_LEN, UDP_LEN, BTH_LEN, RETH_LEN, AETH_LEN, ICRC_LEN = 14, 20, 8, 12, 16, 4, 4

# RC opcodes (IBTA vol. 1 Table 38)
RC_RDMA_WRITE_FIRST = 0x06
RC_RDMA_WRITE_MIDDLE = 0x07
RC_RDMA_WRITE_LAST = 0x08
RC_RDMA_WRITE_ONLY = 0x0a
RC_ACKNOWLEDGE = 0x11
RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_ONLY = 0x00, 0x01, 0x02, 0x04
OPCODE_NAMES = {RC_RDMA_WRITE_FIRST: "RDMA_WRITE_FIRST", RC_RDMA_WRITE_MIDDLE: "RDMA_WRITE_MIDDLE",
                RC_RDMA_WRITE_LAST: "RDMA_WRITE_LAST", RC_RDMA_WRITE_ONLY: "RDMA_WRITE_ONLY",
                RC_ACKNOWLEDGE: "ACKNOWLEDGE",
                RC_SEND_FIRST: "SEND_FIRST", RC_SEND_MIDDLE: "SEND_MIDDLE", RC_SEND_LAST: "SEND_LAST",
                RC_SEND_ONLY: "SEND_ONLY"}
WITH_RETH = (RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_ONLY)
WRITE_OPCODES = (RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST, RC_RDMA_WRITE_ONLY)
SEND_OPCODES = (RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_ONLY)
# (ONLY, FIRST, MIDDLE, LAST) of each modelled message kind
SEGMENT_OPCODES = {"WRITE": (RC_RDMA_WRITE_ONLY, RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST),
                   "SEND": (RC_SEND_ONLY, RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST)}

# AETH syndromes (IBTA vol. 1 9.3.5)
AETH_ACK = 0x1f              # ACK, credit count "invalid" (no RQ flow control)
AETH_NAK_PSN_SEQ = 0x60
AETH_NAK_INVALID_REQ = 0x61
AETH_NAK_REMOTE_ACCESS = 0x62
AETH_NAK_REMOTE_OP = 0x63
AETH_RNR_NAK = 0x20          # IBTA vol. 1 AETH (9.3.5): 001 in bits 7..5, the RNR timer code in bits 4..0
NAK_NAMES = {AETH_NAK_PSN_SEQ: "PSN sequence error", AETH_NAK_INVALID_REQ: "invalid request",
             AETH_NAK_REMOTE_ACCESS: "remote access error", AETH_NAK_REMOTE_OP: "remote operational error"}

PSN_MASK = 0xFFFFFF


class FrameError(ValueError):
  """A frame that the receive path drops; .reason is the counter it is booked under."""

  def __init__(self, reason: str, detail: str = ""):
    self.reason = reason
    super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclasses.dataclass
class Reth:
  va: int
  rkey: int
  dmalen: int


@dataclasses.dataclass
class Aeth:
  syndrome: int
  msn: int

  @property
  def is_ack(self) -> bool: return self.syndrome >> 5 == 0

  @property
  def is_nak(self) -> bool: return self.syndrome >> 5 == 3

  @property
  def is_rnr_nak(self) -> bool: return self.syndrome >> 5 == 1


@dataclasses.dataclass
class RoceFrame:
  dst_mac: bytes
  src_mac: bytes
  src_ip: bytes           # 4 bytes, network order
  dst_ip: bytes
  opcode: int
  destqp: int
  psn: int
  sport: int = 0xC000
  ackreq: bool = False
  se: bool = False
  pkey: int = 0xFFFF
  reth: Reth | None = None
  aeth: Aeth | None = None
  payload: bytes = b""
  ttl: int = 64
  ip_id: int = 0

  @property
  def padcnt(self) -> int: return -len(self.payload) % 4

  @property
  def name(self) -> str: return OPCODE_NAMES.get(self.opcode, f"opcode {self.opcode:#x}")


def ipv4_checksum(header: bytes) -> int:
  """The one's-complement sum of the header's 16-bit words (RFC 791), with the checksum field taken as given."""
  total = sum(w for (w,) in struct.iter_unpack(">H", header))
  while total >> 16: total = (total & 0xFFFF) + (total >> 16)
  return ~total & 0xFFFF


def icrc(packet_from_ip: bytes) -> int:
  """The RoCEv2 invariant CRC of an IPv4 packet (IP header through pad, ICRC excluded). Masking as the module says."""
  ip = bytearray(packet_from_ip[:IPV4_LEN])
  ip[1] = 0xFF                     # TOS (DSCP/ECN)
  ip[8] = 0xFF                     # TTL
  ip[10:12] = b"\xff\xff"          # header checksum
  udp = bytearray(packet_from_ip[IPV4_LEN:IPV4_LEN + UDP_LEN])
  udp[6:8] = b"\xff\xff"           # UDP checksum
  bth = bytearray(packet_from_ip[IPV4_LEN + UDP_LEN:IPV4_LEN + UDP_LEN + BTH_LEN])
  bth[4] = 0xFF                    # FECN / BECN / reserved
  rest = packet_from_ip[IPV4_LEN + UDP_LEN + BTH_LEN:]
  crc = zlib.crc32(b"\xff" * 8)
  for part in (ip, udp, bth, rest): crc = zlib.crc32(part, crc)
  return crc & 0xFFFFFFFF


def build(f: RoceFrame) -> bytes:
  """The full Ethernet frame (no FCS) with a valid IPv4 header checksum and ICRC."""
  if len(f.dst_mac) != 6 or len(f.src_mac) != 6: raise ValueError("MAC addresses are 6 bytes")
  if (f.opcode in WITH_RETH) != (f.reth is not None): raise ValueError(f"{f.name}: RETH presence is wrong")
  bth = struct.pack(">BBHI I", f.opcode, (f.se << 7) | (f.padcnt << 4), f.pkey, f.destqp & PSN_MASK,
                    (f.ackreq << 31) | (f.psn & PSN_MASK))
  ext = b""
  if f.reth is not None: ext += struct.pack(">QII", f.reth.va, f.reth.rkey, f.reth.dmalen)
  if f.aeth is not None: ext += struct.pack(">I", (f.aeth.syndrome << 24) | (f.aeth.msn & PSN_MASK))
  transport = bth + ext + f.payload + b"\0" * f.padcnt
  udp = struct.pack(">HHHH", f.sport, ROCEV2_UDP_PORT, UDP_LEN + len(transport) + ICRC_LEN, 0)
  total = IPV4_LEN + UDP_LEN + len(transport) + ICRC_LEN
  ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, f.ip_id, 0x4000, f.ttl, IPPROTO_UDP, 0,
                             f.src_ip, f.dst_ip))
  ip[10:12] = struct.pack(">H", ipv4_checksum(bytes(ip)))
  packet = bytes(ip) + udp + transport
  return f.dst_mac + f.src_mac + struct.pack(">H", ETH_P_IPV4) + packet + struct.pack("<I", icrc(packet))


def check_icrc(frame: bytes) -> bool:
  """True when the frame's last 4 bytes are the ICRC of its IPv4 packet."""
  packet = frame[ETH_LEN:]
  if len(packet) < IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN: return False
  return struct.unpack("<I", packet[-ICRC_LEN:])[0] == icrc(packet[:-ICRC_LEN])


def parse(frame: bytes, verify: bool = True) -> RoceFrame:
  """Decode a RoCEv2 frame; raises FrameError naming the first check that fails (the receive path's drop reasons)."""
  if len(frame) < ETH_LEN + IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN: raise FrameError("runt", f"{len(frame)} bytes")
  dst_mac, src_mac, ethertype = frame[0:6], frame[6:12], struct.unpack(">H", frame[12:14])[0]
  if ethertype != ETH_P_IPV4: raise FrameError("not_ipv4", f"EtherType {ethertype:#06x}")
  ip = frame[ETH_LEN:ETH_LEN + IPV4_LEN]
  if ip[0] != 0x45: raise FrameError("bad_ip_header", f"version/IHL {ip[0]:#x}")
  if verify and ipv4_checksum(ip) != 0: raise FrameError("bad_ip_checksum")
  total = struct.unpack(">H", ip[2:4])[0]
  if total != len(frame) - ETH_LEN: raise FrameError("bad_ip_length", f"IP total {total}, frame has {len(frame) - ETH_LEN}")
  if ip[9] != IPPROTO_UDP: raise FrameError("not_udp", f"protocol {ip[9]}")
  sport, dport, ulen, _ = struct.unpack(">HHHH", frame[ETH_LEN + IPV4_LEN:ETH_LEN + IPV4_LEN + UDP_LEN])
  if dport != ROCEV2_UDP_PORT: raise FrameError("not_rocev2", f"UDP port {dport}")
  if ulen != total - IPV4_LEN: raise FrameError("bad_udp_length")
  if verify and not check_icrc(frame): raise FrameError("bad_icrc")
  off = ETH_LEN + IPV4_LEN + UDP_LEN
  opcode, b1, pkey, destqp, apsn = struct.unpack(">BBHII", frame[off:off + BTH_LEN])
  off += BTH_LEN
  reth = aeth = None
  if opcode in WITH_RETH:
    reth = Reth(*struct.unpack(">QII", frame[off:off + RETH_LEN]))
    off += RETH_LEN
  if opcode == RC_ACKNOWLEDGE:
    word = struct.unpack(">I", frame[off:off + AETH_LEN])[0]
    aeth = Aeth(word >> 24, word & PSN_MASK)
    off += AETH_LEN
  padcnt = (b1 >> 4) & 3
  end = len(frame) - ICRC_LEN - padcnt
  if end < off: raise FrameError("bad_padcnt")
  return RoceFrame(dst_mac=dst_mac, src_mac=src_mac, src_ip=ip[12:16], dst_ip=ip[16:20], opcode=opcode,
                   destqp=destqp & PSN_MASK, psn=apsn & PSN_MASK, sport=sport, ackreq=bool(apsn >> 31),
                   se=bool(b1 >> 7), pkey=pkey, reth=reth, aeth=aeth, payload=frame[off:end], ttl=ip[8],
                   ip_id=struct.unpack(">H", ip[4:6])[0])


def segment(length: int, pmtu: int) -> list[tuple[int, int, int]]:
  """(opcode, offset, size) for each packet of an RDMA WRITE of length bytes at path MTU pmtu (IBTA vol. 1 9.4):
  ONLY when it fits (a zero-length write is one ONLY), else FIRST, MIDDLE*, LAST."""
  if length <= pmtu: return [(RC_RDMA_WRITE_ONLY, 0, length)]
  out = [(RC_RDMA_WRITE_FIRST, 0, pmtu)]
  off = pmtu
  while length - off > pmtu:
    out.append((RC_RDMA_WRITE_MIDDLE, off, pmtu))
    off += pmtu
  out.append((RC_RDMA_WRITE_LAST, off, length - off))
  return out
