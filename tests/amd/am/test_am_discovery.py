"""drivers/amd/am/discovery.py against the discovery binary the mock writes (layout of Linux's discovery.h), and its
refusals: each names the offset where the parse stopped."""
import ctypes

import pytest

from hcq.autogen.amd import discovery as D
from hcq.drivers.amd.am import discovery
from hcq.drivers.amd.am.discovery import DiscoveryError
from hcq.mockgpu.amd.am import discovery as mock


def test_versions_bases_harvest_and_gc_info():
  d = discovery.parse(mock.build(harvest=[(mock.SDMA1_HWID, 0)]))
  assert d.version_of("GC") == (11, 0, 0) and d.version_of("SDMA0") == (6, 0, 0) and d.version_of("MP0") == (13, 0, 0)
  assert d.version_of("NBIF") == (4, 3, 0) and d.version_of("MMHUB") == (3, 0, 0) and d.version_of("OSSSYS") == (6, 0, 0)
  assert d.ip("NBIF").bases == [0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000]
  assert d.ip("GC").bases == [0x1260, 0xA000, 0x1C000, 0x2402C00]
  assert d.harvest == [(43, 0)] and d.ip("SDMA1").harvested and not d.ip("SDMA0").harvested
  assert d.gc_info["gc_num_se"] == 6 and d.gc_info["gc_wave_size"] == 32 and d.gc_info["gc_num_sa_per_se"] == 2
  with pytest.raises(DiscoveryError, match="no GC instance 1"): d.ip("GC", 1)


def test_64bit_bases():
  ips = [(mock.GC_HWID, 0, (11, 0, 0), [0x1260, 0x1_0000_0000]), (mock.MP0_HWID, 0, (13, 0, 0), [0x16000])]
  d = discovery.parse(mock.build(ips=ips, wide=True))
  assert d.ip("GC").bases == [0x1260, 0x1_0000_0000] and d.ip("MP0").bases == [0x16000]


def _fix_checksums(data: bytearray) -> None:
  bh = D.struct_binary_header.from_buffer(data)
  t = bh.table_list[D.IP_DISCOVERY]
  size = D.struct_ip_discovery_header.from_buffer_copy(data, t.offset).size
  t.size, t.checksum = size, sum(data[t.offset:t.offset + size]) & 0xFFFF
  start = D.struct_binary_header.binary_checksum.offset + 2
  bh.binary_checksum = sum(data[start:bh.binary_size]) & 0xFFFF
  del bh, t


def test_bad_signature_names_offset_zero():
  data = bytearray(mock.build())
  data[0] ^= 0xFF
  with pytest.raises(DiscoveryError, match=r"signature 0x282114f8 at offset 0x0 is not 0x28211407"):
    discovery.parse(bytes(data))
  with pytest.raises(DiscoveryError, match="at offset 0x0"): discovery.parse(bytes(10240))


def test_a_flipped_byte_fails_the_checksum():
  data = bytearray(mock.build())
  ip_off = D.struct_binary_header.from_buffer_copy(data).table_list[D.IP_DISCOVERY].offset
  data[ip_off + 0x80] ^= 1
  with pytest.raises(DiscoveryError, match="binary checksum"): discovery.parse(bytes(data))
  _fix_checksums(data)    # the binary's sum fixed, the table's own checksum still catches it
  data2 = bytearray(mock.build())
  data2[ip_off + 0x80] ^= 1
  bh = D.struct_binary_header.from_buffer(data2)
  start = D.struct_binary_header.binary_checksum.offset + 2
  bh.binary_checksum = sum(data2[start:bh.binary_size]) & 0xFFFF
  del bh
  with pytest.raises(DiscoveryError, match=rf"IP discovery table at offset {ip_off:#x}: checksum"):
    discovery.parse(bytes(data2))


def test_bad_table_signature_and_truncation_name_offsets():
  data = bytearray(mock.build())
  ip_off = D.struct_binary_header.from_buffer_copy(data).table_list[D.IP_DISCOVERY].offset
  data[ip_off] ^= 0xFF
  bh = D.struct_binary_header.from_buffer(data)
  start = D.struct_binary_header.binary_checksum.offset + 2
  bh.binary_checksum = sum(data[start:bh.binary_size]) & 0xFFFF
  del bh
  with pytest.raises(DiscoveryError, match=rf"table signature .* at offset {ip_off:#x}"): discovery.parse(bytes(data))
  with pytest.raises(DiscoveryError, match="binary_size .* is outside"): discovery.parse(mock.build()[:0x100])
