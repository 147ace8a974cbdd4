"""The IP discovery binary of the mock Navi 31, as the board's firmware leaves it at the top of VRAM.

Layout: linux-source-6.12 drivers/gpu/drm/amd/include/discovery.h (through hcq.autogen.amd.discovery):
  binary_header           signature BINARY_SIGNATURE, version, binary_checksum over the bytes after the checksum
                          field up to binary_size, and table_list[TOTAL_TABLES] {offset, checksum, size}
  ip_discovery_header     signature DISCOVERY_TABLE_SIGNATURE, version 4, size, num_dies, die_info[16] {id, offset}
  die_header + ip_v4[]    one entry per IP instance: hw_id, instance, version, then num_base_address 32-bit segment
                          bases (base_addr_64_bit clear)
  harvest_table           HARVEST_TABLE_SIGNATURE, then 32 {hw_id, instance} entries of harvested (fused off) IPs
  gc_info_v1_0            GC_TABLE_ID: shader engines, WGPs, wave size, LDS, ...
A checksum is the 16-bit sum of the bytes it covers. The binary lives DISCOVERY_OFFSET below the end of VRAM
(DISCOVERY_TMR_OFFSET of amdgpu_discovery.c), DISCOVERY_SIZE long.

The hardware ids are those of Linux's soc15_hw_ip.h (MP1 1, GC 11, MMHUB 34, OSSSYS 40, HDP 41, SDMA0/1 42/43,
NBIF 108, MP0 255); the segment bases are the mock's register map (the driver must take them from this table).
"""
from __future__ import annotations

import ctypes

from ....autogen.amd import discovery as D

DISCOVERY_OFFSET = 64 << 10
DISCOVERY_SIZE = 10 << 10

# hw ids (Linux drivers/gpu/drm/amd/include/soc15_hw_ip.h)
MP1_HWID, GC_HWID, MMHUB_HWID, OSSSYS_HWID, HDP_HWID, SDMA0_HWID, SDMA1_HWID, NBIF_HWID, MP0_HWID = \
  1, 11, 34, 40, 41, 42, 43, 108, 255

# (hw_id, instance, (major, minor, revision), segment bases in dwords) of the mock Navi 31
NAVI31_IPS = [
  (GC_HWID, 0, (11, 0, 0), [0x1260, 0xA000, 0x1C000, 0x2402C00]),
  (SDMA0_HWID, 0, (6, 0, 0), [0x1260, 0xA000, 0x1C000, 0x2402C00]),
  (SDMA1_HWID, 0, (6, 0, 0), [0x1260, 0xA000, 0x1C000, 0x2402C00]),
  (MMHUB_HWID, 0, (3, 0, 0), [0x1A000, 0x2408800]),
  (OSSSYS_HWID, 0, (6, 0, 0), [0x4280, 0x2400CE00]),
  (HDP_HWID, 0, (6, 0, 0), [0xF20, 0x240A400]),
  (NBIF_HWID, 0, (4, 3, 0), [0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000]),
  (MP0_HWID, 0, (13, 0, 0), [0x16000, 0x243FC000, 0xDC0000, 0xE0000, 0xE1400]),
  (MP1_HWID, 0, (13, 0, 0), [0x16000, 0x243FC000, 0xDC0000, 0xE0000, 0xE1400]),
]
# The SR-IOV VF (virt.py) poses as a Radeon PRO V710 MxGPU (Navi 32; the 7900 XTX has no SR-IOV). Its IP versions:
# GC 11.0.3 (the V710 is gfx1101: ROCm docs reference/gpu-arch-specs.rst; gfx1101 is GC 11.0.3: Linux kfd_device.c
# kgd2kfd_probe, "Compiler version is 11.0.1 while HW version is 11.0.3"), and MP0/MP1 13.0.10 and SDMA 6.0.3: Navi 32
# boards load gc_11_0_3_*, psp_13_0_10_sos/ta, smu_13_0_10 and sdma_6_0_3 (linux-firmware names each file by its IP
# version, amdgpu_ucode_ip_version_decode; openembedded-core's linux-firmware recipe packages exactly these as
# linux-firmware-amdgpu-navi32). Linux 6.12 runs GC 11.0.3 as a VF (amdgpu_virt_post_reset, the SR-IOV reset's RAS
# resume in amdgpu_device_reset_sriov, gfx_v11_0_sw_init's one-VF mode) and lets an MP0 13.0.10 VF load its CP
# firmware (amdgpu_virt_fw_load_skip_check). MMHUB, OSSSYS, HDP and NBIO keep the Navi 31 versions: no public source
# we found names Navi 32's, and the driver picks their register modules by major version only (regs.module_for).
# GC 11.0.3's hub registers have their own layout (gpu.MockNavi31.GFXHUB_MODULES, Linux gfxhub_v3_0_3.c).
V710_IPS = [
  (hw, inst, {GC_HWID: (11, 0, 3), SDMA0_HWID: (6, 0, 3), SDMA1_HWID: (6, 0, 3), MP0_HWID: (13, 0, 10),
              MP1_HWID: (13, 0, 10)}.get(hw, ver), bases) for hw, inst, ver, bases in NAVI31_IPS]
# 96 CUs: 6 SEs x 2 SAs x 2 * (wgp0 + wgp1) CUs per SA (how Linux amdgpu_discovery.c counts max_cu_per_sh)
NAVI31_GC_INFO = dict(gc_num_se=6, gc_num_wgp0_per_sa=4, gc_num_wgp1_per_sa=0, gc_num_rb_per_se=4, gc_num_gl2c=24,
                      gc_num_gprs=1536, gc_wave_size=32, gc_max_waves_per_simd=16, gc_max_scratch_slots_per_cu=32,
                      gc_lds_size=64, gc_num_sc_per_se=2, gc_num_sa_per_se=2, gc_num_packer_per_sc=4, gc_num_gl2a=4)
# The V710's Navi 32: 3 SEs x 2 SAs x 5 WGPs (10 CUs) = 60 CUs on the die, as rocminfo shows the full-die RX 7800 XT
# (gfx1101: "Compute Unit: 60", "Shader Engines: 3", "Shader Arrs. per Eng.: 2"), of which the V710 has 54 active (ROCm
# docs reference/gpu-arch-specs.rst, Radeon PRO V710: gfx1101, 54 compute units, 4 MiB L2): 27 WGPs, 3 fused off.
# Which ones is not public: here the last WGP of shader array 1 in each SE (V710_FUSED_OFF_WGPS, read through
# CC_GC_SHADER_ARRAY_CONFIG: shader_arrays.py); a driver counts the active ones as Linux gfx_v11_0_get_cu_info does.
# gc_num_gl2c 16: the 4 MiB L2 at Navi 31's 256 KiB per channel (6 MiB over 24); the other fields keep Navi 31's
# values (no public source gives Navi 32's).
V710_GC_INFO = dict(NAVI31_GC_INFO, gc_num_se=3, gc_num_wgp0_per_sa=5, gc_num_gl2c=16)
V710_FUSED_OFF_WGPS = {(se, 1): 1 << 4 for se in range(3)}


def checksum(data: bytes) -> int: return sum(data) & 0xFFFF


def build(ips=NAVI31_IPS, harvest=(), gc_info=None, wide: bool = False) -> bytes:
  """The discovery binary (DISCOVERY_SIZE bytes) for these IPs, harvested (hw_id, instance) pairs and GC info;
  wide: 64-bit segment bases (ip_discovery_header.base_addr_64_bit)."""
  gc_info = NAVI31_GC_INFO if gc_info is None else gc_info
  out = bytearray(DISCOVERY_SIZE)
  pos = (ctypes.sizeof(D.struct_binary_header) + 15) & ~15

  # the IP discovery table: header, one die, its IPs
  ip_off = pos
  ihdr_size = ctypes.sizeof(D.struct_ip_discovery_header)
  die_off = ip_off + ihdr_size
  entries = bytearray(ctypes.sizeof(D.struct_die_header))
  D.struct_die_header.from_buffer(entries).num_ips = len(ips)
  for hw_id, inst, (major, minor, rev), bases in ips:
    e = D.struct_ip_v4(hw_id=hw_id, instance_number=inst, num_base_address=len(bases), major=major, minor=minor,
                       revision=rev)
    entries += bytes(e) + b"".join(b.to_bytes(8 if wide else 4, "little") for b in bases)
  ihdr = D.struct_ip_discovery_header(signature=D.DISCOVERY_TABLE_SIGNATURE, version=4, num_dies=1)
  ihdr.base_addr_64_bit = int(wide)
  ihdr.die_info[0].die_id, ihdr.die_info[0].die_offset = 0, die_off
  ihdr.size = ihdr_size + len(entries)
  out[ip_off:ip_off + ihdr_size] = bytes(ihdr)
  out[die_off:die_off + len(entries)] = entries
  ip_size = ihdr.size
  pos = (die_off + len(entries) + 15) & ~15

  # harvest table
  hv_off = pos
  hv = D.struct_harvest_table()
  hv.header.signature, hv.header.version = D.HARVEST_TABLE_SIGNATURE, 1
  for i, (hw_id, inst) in enumerate(harvest): hv.list[i].hw_id, hv.list[i].number_instance = hw_id, inst
  out[hv_off:hv_off + ctypes.sizeof(hv)] = bytes(hv)
  pos = (hv_off + ctypes.sizeof(hv) + 15) & ~15

  # GC info v1.0
  gc_off = pos
  gc = D.struct_gc_info_v1_0(**gc_info)
  gc.header.table_id, gc.header.version_major, gc.header.version_minor = D.GC_TABLE_ID, 1, 0
  gc.header.size = ctypes.sizeof(gc)
  out[gc_off:gc_off + ctypes.sizeof(gc)] = bytes(gc)
  end = gc_off + ctypes.sizeof(gc)

  bhdr = D.struct_binary_header(binary_signature=D.BINARY_SIGNATURE, version_major=1, version_minor=0, binary_size=end)
  for index, off, size in ((D.IP_DISCOVERY, ip_off, ip_size), (D.HARVEST_INFO, hv_off, ctypes.sizeof(hv)),
                           (D.GC, gc_off, ctypes.sizeof(gc))):
    t = bhdr.table_list[index]
    t.offset, t.size, t.checksum = off, size, checksum(out[off:off + size])
  out[:ctypes.sizeof(bhdr)] = bytes(bhdr)
  start = D.struct_binary_header.binary_checksum.offset + 2
  struct_view = D.struct_binary_header.from_buffer(out)
  struct_view.binary_checksum = checksum(out[start:end])
  del struct_view
  return bytes(out)
