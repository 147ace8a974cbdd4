"""PSP (MP0 13.0): the security processor that loads every other firmware. Linux's psp_v13_0.c and amdgpu_psp.c are
the documentation of the protocol; the structs and command ids are psp_gfx_if.h's (hcq.autogen.amd.psp_gfx_if).

1. Bootloader (when the sOS is not running, C2PMSG_81 == 0): each component of psp_<MP0>_sos.bin, in the order
   KDB, SPL, SYS_DRV, SOC_DRV, INTF_DRV, DBG_DRV, RAS_DRV, SOS (those the container has), goes through a 1 MiB
   staging buffer: wait C2PMSG_35 bit 31; clear the buffer and copy the component; HDP flush; C2PMSG_36 = its
   MC address >> 20; C2PMSG_35 = the load command; wait bit 31 again, the low 16 bits the bootloader's status (0:
   accepted). After the SOS, wait for the sOS (C2PMSG_81 != 0).
2. The KM ring: C2PMSG_69/70 its MC address, C2PMSG_71 its size, C2PMSG_64 = 2 << 16; wait C2PMSG_64 ==
   0x80000000 (masked with 0x8000FFFF).
3. Commands, one psp_gfx_cmd_resp and a psp_gfx_rb_frame each (C2PMSG_67 = the new write pointer in dwords; the PSP
   writes the frame's fence value when done, and resp.status): LOAD_TOC (the TOC component; answers the TMR size),
   SETUP_TMR, LOAD_IP_FW for each firmware image (the SMU's first), AUTOLOAD_RLC.
Before any of it, each file is checked to be what its name says for this GPU's IP versions (IDENTITY,
firmware.check_identity): a wrong file is refused before the PSP sees it. Every wait is bounded; a refused image is an
error naming the file it came from.
"""
from __future__ import annotations

import ctypes
import struct

from ....autogen.amd import psp_gfx_if as G
from ....errors import DeviceError, Timeout
from . import firmware
from .block import IPBlock

# Linux amdgpu_psp.h, enum psp_bootloader_cmd; the SOS container's component types (amdgpu_ucode.h psp_fw_type)
BOOTLOADER = [("PSP_FW_TYPE_PSP_KDB", 0x80000, "KDB"), ("PSP_FW_TYPE_PSP_SPL", 0x10000000, "SPL"),
              ("PSP_FW_TYPE_PSP_SYS_DRV", 0x10000, "SYS_DRV"), ("PSP_FW_TYPE_PSP_SOC_DRV", 0xB0000, "SOC_DRV"),
              ("PSP_FW_TYPE_PSP_INTF_DRV", 0xD0000, "INTF_DRV"), ("PSP_FW_TYPE_PSP_DBG_DRV", 0xC0000, "DBG_DRV"),
              ("PSP_FW_TYPE_PSP_RAS_DRV", 0xE0000, "RAS_DRV"), ("PSP_FW_TYPE_PSP_SOS", 0x20000, "SOS")]
REQUIRED = ("PSP_FW_TYPE_PSP_SYS_DRV", "PSP_FW_TYPE_PSP_SOS", "PSP_FW_TYPE_PSP_TOC")   # of the sOS container
RING_TYPE_KM = 2
SOS_COMMAND = 0x20000      # PSP_BL__LOAD_SOSDRV
MSG1_SIZE = 1 << 20
TMR_ALIGN = 1 << 20          # where the TMR may start (reuse.py checks a kept one against it too)
RING_SIZE = 0x10000
HANDSHAKE_S = 0.020      # psp_v13_0.c: "there might be handshake issue with hardware which needs delay": mdelay(20)

# LOAD_IP_FW images of a gfx11 board, in load order (the SMU's first: psp_hw_start loads it before SETUP_TMR):
# (file kind, region, GFX_FW_TYPE). No MES images: AM maps no queue through MES (Linux's psp_get_fw_type gives them
# CP_MES 33, MES_STACK 34, CP_MES_KIQ 81, MES_KIQ_STACK 82 on PSP 13.0.x; the RS64_MES* types 76-79 are not theirs).
# region: "ucode" (the container's ucode array), or (offset field, size field, base) of firmware.REGIONS' kind.
def ip_firmware(gc: str, sdma: str, smu: str) -> list[tuple[str, object, int]]:
  stack = lambda e, n: [(f"gc_{gc}_{e}.bin", ("data_offset_bytes", "data_size_bytes", "file"),
                         getattr(G, f"GFX_FW_TYPE_RS64_{e.upper()}_P{p}_STACK")) for p in range(n)]
  return [
    (f"smu_{smu}.bin", "ucode", G.GFX_FW_TYPE_SMU),
    (f"gc_{gc}_imu.bin", ("imu_iram_ucode_offset_bytes", "imu_iram_ucode_size_bytes", "ucode"), G.GFX_FW_TYPE_IMU_I),
    (f"gc_{gc}_imu.bin", ("imu_dram_ucode_offset_bytes", "imu_dram_ucode_size_bytes", "ucode"), G.GFX_FW_TYPE_IMU_D),
    (f"gc_{gc}_rlc.bin", "ucode", G.GFX_FW_TYPE_RLC_G),
    (f"gc_{gc}_rlc.bin", ("rlc_iram_ucode_offset_bytes", "rlc_iram_ucode_size_bytes", "file"), G.GFX_FW_TYPE_RLC_IRAM),
    (f"gc_{gc}_rlc.bin", ("rlc_dram_ucode_offset_bytes", "rlc_dram_ucode_size_bytes", "file"), G.GFX_FW_TYPE_RLC_DRAM_BOOT),
    (f"gc_{gc}_rlc.bin", ("rlcp_ucode_offset_bytes", "rlcp_ucode_size_bytes", "file"), G.GFX_FW_TYPE_RLC_P),
    (f"gc_{gc}_rlc.bin", ("rlcv_ucode_offset_bytes", "rlcv_ucode_size_bytes", "file"), G.GFX_FW_TYPE_RLC_V),
    (f"gc_{gc}_pfp.bin", ("ucode_offset_bytes", "ucode_size_bytes", "file"), G.GFX_FW_TYPE_RS64_PFP), *stack("pfp", 2),
    (f"gc_{gc}_me.bin", ("ucode_offset_bytes", "ucode_size_bytes", "file"), G.GFX_FW_TYPE_RS64_ME), *stack("me", 2),
    (f"gc_{gc}_mec.bin", ("ucode_offset_bytes", "ucode_size_bytes", "file"), G.GFX_FW_TYPE_RS64_MEC), *stack("mec", 4),
    (f"sdma_{sdma}.bin", (None, "ctx_ucode_size_bytes", "ucode"), G.GFX_FW_TYPE_SDMA_UCODE_TH0),
    (f"sdma_{sdma}.bin", ("ctl_ucode_offset", "ctl_ucode_size_bytes", "file"), G.GFX_FW_TYPE_SDMA_UCODE_TH1),
  ]


# What each file the PSP loads must be (firmware.check_identity): its block word -> (the discovery block whose version
# it is for, the header structs it may have). The structs are those of firmware-amd-graphics 20230210-5's psp13/smu13/
# gc11/sdma6 files that carry what the images above are cut from (RS64 CP: gfx v2.0; RLC P/V: rlc v2.3 or later).
IDENTITY = {
  "sos": ("MP0", {"psp_firmware_header_v2_0", "psp_firmware_header_v2_1"}),
  "smu": ("MP1", {"smc_firmware_header_v2_1"}),
  "imu": ("GC", {"imu_firmware_header_v1_0"}),
  "rlc": ("GC", {"rlc_firmware_header_v2_3", "rlc_firmware_header_v2_4"}),
  "pfp": ("GC", {"gfx_firmware_header_v2_0"}), "me": ("GC", {"gfx_firmware_header_v2_0"}),
  "mec": ("GC", {"gfx_firmware_header_v2_0"}),
  "sdma": ("SDMA0", {"sdma_firmware_header_v2_0"}),
}


class PSPError(DeviceError):
  """The PSP refused something; names the command and the firmware file."""


def image(fw: firmware.Firmware, region, label: str = "AM") -> bytes:
  """The bytes of one LOAD_IP_FW image of fw. A header without the fields the image needs (an older container: the
  file of another GPU under this name) is a DeviceError naming the file, its header and the field."""
  if region == "ucode": return fw.ucode()
  off_field, size_field, base = region
  for f in (off_field, size_field):
    if f and f not in fw.fields:
      c = fw.common
      raise DeviceError(f"{label}: {fw.file}: {fw.struct} header v{c['header_version_major']}."
                        f"{c['header_version_minor']} has no {f} (the firmware of another GPU under this name?)")
  off = fw.fields[off_field] if off_field else 0
  if base == "ucode": off += fw.common["ucode_array_offset_bytes"]
  return fw.data[off:off + fw.fields[size_field]]


def _ver(v) -> str: return "_".join(map(str, v))


class PSP(IPBlock):
  name = "psp"

  def sw_init(self) -> None:
    d = self.dev
    mp0, gc, sdma, mp1 = (_ver(d.discovery.version_of(n)) for n in ("MP0", "GC", "SDMA0", "MP1"))
    self.sos_name = f"psp_{mp0}_sos.bin"
    self.sos = self._firmware(self.sos_name)
    self.components = {c["name"]: c for c in self.sos.components}
    # checked before the bootloader starts: without them the PSP cannot start the sOS or take firmware (a TA file
    # in the sOS's place has components of the same type numbers, but no SYS_DRV)
    for comp in REQUIRED:
      if comp not in self.components:
        raise DeviceError(f"{d.label}: {self.sos_name} has no {comp} component (it has "
                          f"{', '.join(map(str, self.components)) or 'none'}): not a PSP sOS container")
    self.loads = []
    for name, region, fw_type in ip_firmware(gc, sdma, mp1):
      self.loads.append((name, image(self._firmware(name), region, d.label), fw_type))
    self.msg1 = d.vram.alloc(MSG1_SIZE, "PSP staging buffer", align=MSG1_SIZE)
    self._staged = 0            # bytes of the last image staged (VRAM.alloc zeroed the buffer)
    self.cmd = d.vram.alloc(0x1000, "PSP command buffer")
    self.fence = d.vram.alloc(0x1000, "PSP fence")
    self.ring = d.vram.alloc(RING_SIZE, "PSP KM ring")
    self.wptr, self.fence_value = 0, 0
    self.tmr = None

  def _firmware(self, name: str) -> firmware.Firmware:
    """The container `name`, checked to be what its name says for this GPU's IP versions (IDENTITY)."""
    d = self.dev
    fw = d.firmware(name)
    ip_name, structs = IDENTITY[firmware.block_word(name)]
    try: firmware.check_identity(fw, ip_name, d.discovery.version_of(ip_name), structs)
    except firmware.FirmwareError as e: raise DeviceError(f"{d.label}: {e}") from None
    return fw

  def _component(self, name: str) -> bytes:
    c = self.components[name]
    ucode = self.sos.ucode()
    return ucode[c["offset"]:c["offset"] + c["size"]]

  def _bootloader_image(self, comp: str) -> bytes:
    """The image sent with component comp's bootloader command: its own, but for LOAD_TOS_SPL_TABLE, which gets the
    key database image (psp_v13_0_bootloader_load_spl loads psp->kdb; psp_hw_start sends it when the container has
    an SPL component)."""
    return self._component("PSP_FW_TYPE_PSP_KDB" if comp == "PSP_FW_TYPE_PSP_SPL" else comp)

  @property
  def sos_alive(self) -> bool: return self.dev.mp0_regs.read("MP0_SMN_C2PMSG_81") != 0

  def hw_init(self) -> None:
    if self.sos_alive: self.step("sOS already running: bootloader skipped")
    else: self._bootload()
    self._ring_create()
    self._load_firmware()

  # ---- 1. bootloader
  def _stage(self, data: bytes) -> None:
    """Copy data into the staging buffer, zero what is left of the previous (longer) image, flush HDP: the buffer
    holds the image and zeros after it (no stale bytes) without clearing 1 MiB per firmware."""
    vram = self.dev.vram
    if len(data) > MSG1_SIZE: raise PSPError(f"{self.dev.label}: firmware image of {len(data)} bytes exceeds the 1 MiB staging buffer")
    vram.write(self.msg1.offset, data)
    if self._staged > len(data): vram.fill(self.msg1.offset + len(data), self._staged - len(data))
    self._staged = len(data)
    self.dev.nbio.hdp_flush()

  def _bootload(self) -> None:
    """psp_hw_start's bootloader part: psp_v13_0_bootloader_load_component for each component but the SOS (wait for
    C2PMSG_35 == bit 31, stage, C2PMSG_36, C2PMSG_35 = command, wait again), then psp_v13_0_bootloader_load_sos: the
    SOS handed over, 20 ms (the handshake delay), and C2PMSG_81 watched until it changes from what it reads then (the
    bootloader is gone: C2PMSG_35 is not waited for again)."""
    r = self.dev.mp0_regs
    loaded = []
    for comp, cmd, short in BOOTLOADER:
      if comp not in self.components: continue
      self.step(f"bootloader {short} ({self.components[comp]['size']} bytes of {self.sos_name})")
      r.wait("MP0_SMN_C2PMSG_35", 0x80000000, 0x80000000)
      self._stage(self._bootloader_image(comp))
      r.write("MP0_SMN_C2PMSG_36", self.msg1.mc >> 20)
      r.write("MP0_SMN_C2PMSG_35", cmd)
      loaded.append(short)
      if cmd == SOS_COMMAND: return self._sos_handover(loaded)
      # done: bit 31 set again; the low 16 bits are the bootloader's status (Linux waits for them to be 0)
      status = r.wait("MP0_SMN_C2PMSG_35", 0x80000000, 0x80000000) & 0xFFFF
      if status:
        raise PSPError(f"{self.dev.label}: the PSP bootloader refused the {short} component of {self.sos_name} "
                       f"({self.components[comp]['size']} bytes): status {status:#06x} (damaged, truncated, or not "
                       f"signed by AMD?)")

  def _sos_handover(self, loaded: list[str]) -> None:
    """psp_v13_0_bootloader_load_sos after the command: 20 ms, then C2PMSG_81 watched until it changes from what it
    reads then (the bootloader is gone: C2PMSG_35 is not waited for)."""
    r = self.dev.mp0_regs
    self.dev.os.delay(HANDSHAKE_S)
    before = r.read("MP0_SMN_C2PMSG_81")
    try: r.access.poll(lambda: int(r.read("MP0_SMN_C2PMSG_81") != before), 1, 1,
                       f"MP0 MP0_SMN_C2PMSG_81 (sOS alive: a change from {before:#x}, its value 20 ms after LOAD_SOSDRV)")
    except Timeout as e:
      bl = r.read("MP0_SMN_C2PMSG_35")      # a bootloader that refused the SOS is still there, with its status
      if bl & 0x80000000 and bl & 0xFFFF:
        raise PSPError(f"{self.dev.label}: the PSP bootloader refused the SOS component of {self.sos_name} "
                       f"({self.components['PSP_FW_TYPE_PSP_SOS']['size']} bytes): status {bl & 0xFFFF:#06x} (damaged, "
                       f"truncated, or not signed by AMD?)") from None
      raise PSPError(f"{self.dev.label}: the PSP did not start the sOS after loading {', '.join(loaded)} from "
                     f"{self.sos_name} ({e}): a component was refused (damaged or truncated file?)") from None
    self.step(f"sOS running (version {r.read('MP0_SMN_C2PMSG_81'):#x})")

  # ---- 2. ring
  def _ring_create(self) -> None:
    """psp_v13_0_ring_create: a ring the sOS still has (C2PMSG_71 != 0: a previous boot's) is destroyed first
    (psp_v13_0_ring_stop); wait for the sOS ready (C2PMSG_64 bit 31), the ring's MC address and size, the command;
    20 ms (a poll right away can read the stale "ready"), then wait for bit 31 with status 0."""
    r = self.dev.mp0_regs
    if r.read("MP0_SMN_C2PMSG_71"): self.ring_stop()
    self.step(f"KM ring at MC {self.ring.mc:#x}")
    r.wait("MP0_SMN_C2PMSG_64", 0x80000000, 0x80000000)
    r.write("MP0_SMN_C2PMSG_69", self.ring.mc & 0xFFFFFFFF)
    r.write("MP0_SMN_C2PMSG_70", self.ring.mc >> 32)
    r.write("MP0_SMN_C2PMSG_71", RING_SIZE)
    r.write("MP0_SMN_C2PMSG_64", RING_TYPE_KM << 16)
    self.dev.os.delay(HANDSHAKE_S)
    r.wait("MP0_SMN_C2PMSG_64", 0x8000FFFF, 0x80000000)
    self.wptr = 0

  def ring_stop(self) -> None:
    """psp_v13_0_ring_stop: GFX_CTRL_CMD_ID_DESTROY_RINGS, 20 ms, wait for bit 31."""
    r = self.dev.mp0_regs
    self.step("KM ring destroyed (GFX_CTRL_CMD_ID_DESTROY_RINGS)")
    r.wait("MP0_SMN_C2PMSG_64", 0x80000000, 0x80000000)
    r.write("MP0_SMN_C2PMSG_64", G.GFX_CTRL_CMD_ID_DESTROY_RINGS)
    self.dev.os.delay(HANDSHAKE_S)
    r.wait("MP0_SMN_C2PMSG_64", 0x80000000, 0x80000000)

  # ---- 3. commands
  def submit(self, cmd, what: str):
    """Send one command; returns its response (psp_gfx_resp). Raises PSPError naming `what` on a non-zero status."""
    d, r = self.dev, self.dev.mp0_regs
    cmd.buf_size, cmd.buf_version = ctypes.sizeof(cmd), 1   # PSP_GFX_CMD_BUF_VERSION
    d.vram.write(self.cmd.offset, bytes(cmd))
    self.fence_value += 1
    frame = G.struct_psp_gfx_rb_frame(cmd_buf_addr_lo=self.cmd.mc & 0xFFFFFFFF, cmd_buf_addr_hi=self.cmd.mc >> 32,
                                      cmd_buf_size=ctypes.sizeof(cmd), fence_addr_lo=self.fence.mc & 0xFFFFFFFF,
                                      fence_addr_hi=self.fence.mc >> 32, fence_value=self.fence_value)
    frame_dw = ctypes.sizeof(frame) // 4
    d.vram.write(self.ring.offset + (self.wptr * 4) % RING_SIZE, bytes(frame))
    d.nbio.hdp_flush()
    self.wptr = (self.wptr + frame_dw) % (RING_SIZE // 4)
    r.write("MP0_SMN_C2PMSG_67", self.wptr)
    fence_off = self.fence.offset
    r.access.poll(lambda: struct.unpack("<I", d.vram.read(fence_off, 4))[0], 0xFFFFFFFF, self.fence_value,
                  f"PSP fence of {what} at MC {self.fence.mc:#x}")
    resp = G.struct_psp_gfx_cmd_resp.from_buffer_copy(d.vram.read(self.cmd.offset, ctypes.sizeof(cmd))).resp
    if resp.status:
      raise PSPError(f"{d.label}: PSP refused {what}: status {resp.status:#010x}")
    return resp

  def load_toc(self) -> int:
    toc = self._component("PSP_FW_TYPE_PSP_TOC")
    self._stage(toc)
    cmd = G.struct_psp_gfx_cmd_resp(cmd_id=G.GFX_CMD_ID_LOAD_TOC)
    c = cmd.cmd.cmd_load_toc
    c.toc_phy_addr_lo, c.toc_phy_addr_hi, c.toc_size = self.msg1.mc & 0xFFFFFFFF, self.msg1.mc >> 32, len(toc)
    return self.submit(cmd, f"LOAD_TOC ({self.sos_name} TOC)").tmr_size

  def _load_firmware(self) -> None:
    """psp_hw_start after the ring, for MP0 13.0.0 (autoload, PMFW-centralized C-state management:
    psp_check_pmfw_centralized_cstate_management): LOAD_TOC (psp_tmr_init: the TMR size), the SMU firmware
    (psp_load_smu_fw), SETUP_TMR (psp_tmr_load), every other image (psp_load_non_psp_fw), AUTOLOAD_RLC."""
    d = self.dev
    tmr_size = self.load_toc()
    self.step(f"TOC loaded: TMR of {tmr_size:#x} bytes")
    self.tmr = d.vram.alloc(tmr_size, "PSP TMR", align=TMR_ALIGN)
    smu, rest = self.loads[:1], self.loads[1:]
    for load in smu: self.load_ip_fw(*load)
    self.setup_tmr()
    for load in rest: self.load_ip_fw(*load)
    self.step("AUTOLOAD_RLC")
    self.submit(G.struct_psp_gfx_cmd_resp(cmd_id=G.GFX_CMD_ID_AUTOLOAD_RLC), "AUTOLOAD_RLC")

  def setup_tmr(self) -> None:
    """psp_prep_tmr_cmd_buf: the TMR's MC address, and with virt_phy_addr its physical address (amdgpu_gmc_vram_pa)."""
    d = self.dev
    self.step(f"SETUP_TMR at MC {self.tmr.mc:#x} (physical {d.gmc.pa(self.tmr.offset):#x})")
    cmd = G.struct_psp_gfx_cmd_resp(cmd_id=G.GFX_CMD_ID_SETUP_TMR)
    c = cmd.cmd.cmd_setup_tmr
    c.buf_phy_addr_lo, c.buf_phy_addr_hi, c.buf_size = self.tmr.mc & 0xFFFFFFFF, self.tmr.mc >> 32, self.tmr.size
    pa = d.gmc.pa(self.tmr.offset)
    c.bitfield.virt_phy_addr = 1
    c.system_phy_addr_lo, c.system_phy_addr_hi = pa & 0xFFFFFFFF, pa >> 32
    self.submit(cmd, "SETUP_TMR")

  def load_ip_fw(self, name: str, blob: bytes, fw_type: int) -> None:
    self.step(f"LOAD_IP_FW {fw_type_name(fw_type)} ({len(blob)} bytes of {name})")
    self._stage(blob)
    cmd = G.struct_psp_gfx_cmd_resp(cmd_id=G.GFX_CMD_ID_LOAD_IP_FW)
    c = cmd.cmd.cmd_load_ip_fw
    c.fw_phy_addr_lo, c.fw_phy_addr_hi, c.fw_size, c.fw_type = self.msg1.mc & 0xFFFFFFFF, self.msg1.mc >> 32, len(blob), fw_type
    self.submit(cmd, f"LOAD_IP_FW {fw_type_name(fw_type)} from {name}")


def fw_type_name(t: int) -> str:
  for k, v in vars(G).items():
    if k.startswith("GFX_FW_TYPE_") and v == t: return k[len("GFX_FW_TYPE_"):]
  return str(t)
