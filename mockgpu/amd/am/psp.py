"""The mock PSP (MP0 13.0.0): its bootloader, the sOS's KM ring, and the checks it makes on every image it is given.

Bootloader (before the sOS runs, C2PMSG_81 == 0): the driver copies one SOS component to a 1 MiB-aligned VRAM buffer,
writes its MC address >> 20 to C2PMSG_36 and the command to C2PMSG_35, then waits for C2PMSG_35 bit 31. The commands
(Linux amdgpu_psp.h, enum psp_bootloader_cmd) and the order this model demands: the key database first, then SPL,
the system driver, and the SOS last (the other drivers, when given, between them). After the SOS the sOS is alive
(C2PMSG_81 holds its version) - unless an image was refused: then the command ends with a status in C2PMSG_35's low
16 bits, and the sOS never starts.

The ring (psp_gfx_if.h): C2PMSG_69/70 = ring MC address, C2PMSG_71 = size, C2PMSG_64 = ring type << 16; the reply is
C2PMSG_64 = 0x80000000. Frames (struct psp_gfx_rb_frame, 64 bytes) are taken up to the write pointer given in
C2PMSG_67 (dwords); each command (struct psp_gfx_cmd_resp) gets resp.status and then the frame's fence value.
Command order demanded: LOAD_TOC, SETUP_TMR (at least the size LOAD_TOC answered), LOAD_IP_FW with the SMU first,
AUTOLOAD_RLC last, after the RLC, IMU and MEC images it needs.

Every image (a SOS component or a LOAD_IP_FW blob) must be a signed AMD image: a 256-byte header with "$PS1" at 0x10
(the key database: no magic) and the body size at 0x14, the body, then a 256-byte signature. A truncated image, one
whose header is damaged, or one with a blank signature is refused; the refusal is kept in `refused`.

The real PSP also verifies the signature (RSA, AMD's key) and refuses any image AMD did not sign, or signed as
another firmware type. The mock cannot verify RSA; it knows instead the SHA-256 of every signed image (header, body
and signature) of each type that AMD released in the pinned firmware package (fwdigests.py): an image whose digest
is not one of its type's - a byte flipped anywhere in it, another firmware type's image, another vendor's - is
refused as the real PSP refuses a bad signature. Bytes after the signature (a region's padding) are not signed.
"""
from __future__ import annotations

import ctypes
import hashlib
import os as host_os
import struct

from ....autogen.amd import ucode
from ....errors import DeviceError
from ....autogen.amd import psp_gfx_if as G
from . import fwdigests
from .discovery import MP0_HWID

# Linux drivers/gpu/drm/amd/amdgpu/amdgpu_psp.h, enum psp_bootloader_cmd
BL_KEY_DATABASE, BL_TOS_SPL_TABLE, BL_SYSDRV, BL_SOCDRV, BL_INTFDRV, BL_DBGDRV, BL_RASDRV, BL_SOSDRV = \
  0x80000, 0x10000000, 0x10000, 0xB0000, 0xD0000, 0xC0000, 0xE0000, 0x20000
BL_NAMES = {BL_KEY_DATABASE: "KDB", BL_TOS_SPL_TABLE: "SPL", BL_SYSDRV: "SYS_DRV", BL_SOCDRV: "SOC_DRV",
            BL_INTFDRV: "INTF_DRV", BL_DBGDRV: "DBG_DRV", BL_RASDRV: "RAS_DRV", BL_SOSDRV: "SOS"}
BL_ORDER = [BL_KEY_DATABASE, BL_TOS_SPL_TABLE, BL_SYSDRV, BL_SOCDRV, BL_INTFDRV, BL_DBGDRV, BL_RASDRV, BL_SOSDRV]
SIGNATURE_SIZE, HEADER_SIZE = 256, 256
# the versions the running firmware reports: those of the pinned package's psp_13_0_0_sos.bin and smu_13_0_0.bin
SOS_VERSION, SMU_VERSION = 0x00310025, 0x004E4A00
TMR_SIZE = 0x1300000          # what LOAD_TOC answers: the trusted memory region the listed firmware needs
# response status codes of this model (resp.status; 0 is success)
STATUS_BAD_IMAGE, STATUS_BAD_ORDER, STATUS_BAD_ADDRESS, STATUS_UNKNOWN = 0xFFFF0005, 0xFFFF0006, 0xFFFF0007, 0xFFFF0008
# the bootloader's: the low 16 bits of C2PMSG_35 when it is done with a command (0: accepted)
BL_STATUS_BAD_IMAGE, BL_STATUS_BAD_ORDER, BL_STATUS_UNKNOWN = 0x0005, 0x0006, 0x0008
AUTOLOAD_NEEDS = {G.GFX_FW_TYPE_RLC_G, G.GFX_FW_TYPE_IMU_I, G.GFX_FW_TYPE_IMU_D, G.GFX_FW_TYPE_RS64_MEC}
# psp_v13_0.c waits 20 ms after LOAD_SOSDRV and after each ring command before it polls ("there might be handshake
# issue with hardware which needs delay"): the PSP answers that late, and until then the registers show what they
# showed before the command (a poll without the delay reads the stale "ready"). The time is the OS's device clock
# (MockOS.clock): a driver's delay() moves it without blocking, a poll's sleep() with the host's time
HANDSHAKE_S = 0.020

def signed_part(blob: bytes, size: int | None, kdb: bool = False) -> tuple[bytes | None, str | None]:
  """(the signed image: header, body and signature; None) or (None, why it is not a well-formed signed image). size:
  the bytes the driver said it gave (None: the bootloader reads the header's size)."""
  if len(blob) < HEADER_SIZE + SIGNATURE_SIZE: return None, f"{len(blob)} bytes is shorter than a header and a signature"
  if not kdb and blob[0x10:0x14] != b"$PS1": return None, f"no $PS1 header magic (found {blob[0x10:0x14].hex()})"
  body = struct.unpack_from("<I", blob, 0x14)[0]
  need = HEADER_SIZE + body + SIGNATURE_SIZE
  if size is not None and size < need: return None, f"image of {size} bytes is shorter than its header says ({need})"
  if need > len(blob): return None, f"header says {need} bytes, the buffer holds {len(blob)}"
  if not any(blob[need - SIGNATURE_SIZE:need]): return None, "the signature is blank"
  return bytes(blob[:need]), None


def check_image(blob: bytes, size: int | None, kdb: bool = False) -> str | None:
  """Why an image is refused as not well formed, None when it is (its signature is check_signature's)."""
  return signed_part(blob, size, kdb)[1]


def check_signature(blob: bytes, size: int | None, fw_type: str, kdb: bool = False) -> str | None:
  """Why the PSP refuses the image as firmware type fw_type (a bootloader name, "TOC", or a GFX_FW_TYPE name): not a
  well-formed signed image, or not one AMD signed as that type (fwdigests); None when it is accepted."""
  image, why = signed_part(blob, size, kdb)
  if why: return why
  digest = hashlib.sha256(image).hexdigest()
  if digest not in fwdigests.DIGESTS.get(fw_type, {}):
    return (f"signature check failed: SHA-256 {digest[:16]}... of the {len(image)}-byte image is not that of any "
            f"{fw_type} image AMD signed in {fwdigests.PACKAGE}")
  return None


def fw_type_name(t: int) -> str:
  """GFX_FW_TYPE_<name> -> name (psp_gfx_if.h), the key of fwdigests.DIGESTS; the number when it has none."""
  for k, v in vars(G).items():
    if k.startswith("GFX_FW_TYPE_") and v == t: return k[len("GFX_FW_TYPE_"):]
  return str(t)


class PSPModel:
  def __init__(self, gpu):
    self.gpu, rf = gpu, gpu.regs
    self.r = {n: rf.addr(MP0_HWID, "mp_13_0_0", f"MP0_SMN_C2PMSG_{n}") for n in (35, 36, 64, 67, 69, 70, 71, 81)}
    rf.poke(self.r[35], 0x80000000)      # the bootloader is ready
    rf.hook(self.r[35], write=self._bootloader)
    rf.hook(self.r[64], write=self._ring_ctrl)
    rf.hook(self.r[67], write=self._ring_wptr)
    self.bl_loaded: list[int] = []
    self.refused: list[str] = []
    self.ring = None            # (mc address, size in bytes)
    self.rptr = 0
    self.toc_loaded, self.tmr = False, None
    self.loaded_fw: list[int] = []
    self.autoloaded = False
    self.last_image = None
    self.commands: list[tuple[int, int | None]] = []    # (GFX_CMD_ID, LOAD_IP_FW's fw_type) of each ring command
    self.sos_started = None       # monotonic time of LOAD_SOSDRV while the sOS is starting
    self.sos_late_reads = 0       # reads of C2PMSG_81 from 20 ms after LOAD_SOSDRV on
    self.ring_cmd = None          # (monotonic time, C2PMSG_64 value written, what C2PMSG_64 showed before) while pending
    self.staged_flushes = 0       # the HDP flush count when the PSP last read its staging buffer (none yet)
    rf.hook(self.r[81], read=self._sos_read)
    rf.hook(self.r[64], read=self._ring_ctrl_read)
    for n in (36, 69, 70, 71): rf.guard(self.r[n], write=lambda _v, n=n: self._not_busy(f"MP0_SMN_C2PMSG_{n}"))

  @property
  def sos_alive(self) -> bool: return self.gpu.regs.values.get(self.r[81], 0) != 0

  # ---- asynchrony: the PSP answers HANDSHAKE_S after a command
  def _sos_read(self) -> int:
    """C2PMSG_81: 0 while the sOS starts; the first read from 20 ms after LOAD_SOSDRV on still shows 0 (Linux reads
    it then and waits for a change: psp_v13_0_bootloader_load_sos), the next ones its version."""
    rf = self.gpu.regs
    if self.sos_started is not None and self.gpu.os.clock() - self.sos_started >= HANDSHAKE_S:
      self.sos_late_reads += 1
      if self.sos_late_reads > 1:
        self.sos_started = None
        rf.poke(self.r[81], SOS_VERSION)   # the sOS runs, ready for ring commands
        rf.poke(self.r[64], 0x80000000)
    return rf.values.get(self.r[81], 0)

  def _ring_ctrl_read(self) -> int:
    rf = self.gpu.regs
    if self.ring_cmd is not None:
      t, value, before = self.ring_cmd
      if self.gpu.os.clock() - t < HANDSHAKE_S: return before      # not answered yet: the stale value
      self.ring_cmd = None
      self._ring_ctrl_done(value)
    return rf.values.get(self.r[64], 0)

  def _busy(self) -> str | None:
    if self.sos_started is not None: return "the sOS is still starting (LOAD_SOSDRV)"
    if self.ring_cmd is not None:
      if self.gpu.os.clock() - self.ring_cmd[0] >= HANDSHAKE_S: self._ring_ctrl_read()
      else: return (f"the PSP has not answered C2PMSG_64 = {self.ring_cmd[1]:#x} yet (psp_v13_0_ring_create/_stop wait "
                    f"20 ms before polling: a poll right away reads the stale 'ready')")
    return None

  def _not_busy(self, reg: str) -> bool:
    why = self._busy()
    if why: raise DeviceError(f"mock Navi 31 {self.gpu.addr} PSP: {reg} written while {why}")
    return True

  def _flushed(self, what: str) -> str | None:
    """The staging buffer's bytes reach the PSP only through an HDP flush after the CPU wrote them (the remapped flush
    register, blocks.NBIO); a command that reads it with no flush since the last one is refused."""
    flushes = self.gpu.nbio.hdp_flushes
    if flushes == self.staged_flushes:
      return (f"{what}: no HDP flush since the PSP last read its buffer (write 0 to the remapped HDP flush register "
              f"BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL points at: hdp_v6_0_flush_hdp)")
    self.staged_flushes = flushes
    return None

  def _refuse(self, what: str) -> None:
    self.refused.append(what)

  # ---- bootloader
  def _bl_refuse(self, status: int, why: str) -> None:
    """A refused bootloader command: done (bit 31) with the status in the low 16 bits; the sOS will not start."""
    self._refuse(why)
    self.gpu.regs.poke(self.r[35], 0x80000000 | status)

  def _bootloader(self, cmd: int) -> None:
    rf = self.gpu.regs
    if self.sos_started is not None or (self.bl_loaded and self.bl_loaded[-1] == BL_SOSDRV):
      raise DeviceError(f"mock Navi 31 {self.gpu.addr} PSP: MP0_SMN_C2PMSG_35 = {cmd:#x} after LOAD_SOSDRV: the bootloader "
                        f"handed over to the sOS and takes no command (C2PMSG_35 bit 31 will not come back)")
    rf.poke(self.r[35], 0x80000000)
    name = BL_NAMES.get(cmd)
    if name is None: return self._bl_refuse(BL_STATUS_UNKNOWN, f"bootloader command {cmd:#x} unknown")
    if self.sos_alive: return self._bl_refuse(BL_STATUS_BAD_ORDER, f"bootloader {name}: the sOS already runs")
    done = [BL_ORDER.index(c) for c in self.bl_loaded]
    if done and BL_ORDER.index(cmd) <= max(done):
      return self._bl_refuse(BL_STATUS_BAD_ORDER, f"bootloader {name}: out of order after "
                                                  f"{[BL_NAMES[c] for c in self.bl_loaded]}")
    if cmd in (BL_SOSDRV,) and BL_SYSDRV not in self.bl_loaded:
      return self._bl_refuse(BL_STATUS_BAD_ORDER, "bootloader SOS: no SYS_DRV before it")
    mc = rf.read(self.r[36]) << 20
    blob = self.gpu.read_mc(mc, 1 << 20)
    why = self._flushed(f"bootloader {name}")
    if why: return self._bl_refuse(BL_STATUS_BAD_IMAGE, f"bootloader {name}: {why}")
    why = check_signature(blob, None, name, kdb=cmd == BL_KEY_DATABASE)
    # Linux 6.12's psp_v13_0_bootloader_load_spl (psp_v13_0.c) gives LOAD_TOS_SPL_TABLE the key database image
    # (psp->kdb), not psp->spl, and tinygrad's AM_PSP.init_hw does the same on MP0 13.x: the bootloader takes either
    if why and cmd == BL_TOS_SPL_TABLE and check_signature(blob, None, "KDB", kdb=True) is None: why = None
    if why: return self._bl_refuse(BL_STATUS_BAD_IMAGE, f"bootloader {name}: {why}")
    self.bl_loaded.append(cmd)
    if cmd == BL_SOSDRV:
      # the bootloader hands over: C2PMSG_35 stays busy; the sOS starts (C2PMSG_81) 20 ms on, unless an image was refused
      rf.poke(self.r[35], 0)
      if not self.refused: self.sos_started, self.sos_late_reads = self.gpu.os.clock(), 0

  # ---- ring
  def _ring_ctrl(self, value: int) -> None:
    rf = self.gpu.regs
    if not self.sos_alive: return       # no sOS: nobody answers
    why = self._busy()
    if why: raise DeviceError(f"mock Navi 31 {self.gpu.addr} PSP: MP0_SMN_C2PMSG_64 = {value:#x} written while {why}")
    if value == G.GFX_CTRL_CMD_ID_MODE1_RST: return self.gpu.mode1_reset("PSP GFX_CTRL_CMD_ID_MODE1_RST")
    if value >> 16 == 2 and self.ring is not None:
      raise DeviceError(f"mock Navi 31 {self.gpu.addr} PSP: MP0_SMN_C2PMSG_64 = {value:#x} (create the KM ring) while a "
                        f"KM ring exists at {self.ring[0]:#x}: destroy it first (GFX_CTRL_CMD_ID_DESTROY_RINGS, "
                        f"psp_v13_0_ring_stop)")
    # answered HANDSHAKE_S later (_ring_ctrl_read); until then C2PMSG_64 shows what it showed
    self.ring_cmd = (self.gpu.os.clock(), value, rf.values.get(self.r[64], 0) | 0x80000000)

  def _ring_ctrl_done(self, value: int) -> None:
    rf = self.gpu.regs
    kind = value >> 16
    if value == G.GFX_CTRL_CMD_ID_DESTROY_RINGS: self.ring, self.rptr = None, 0
    elif kind == 2 or value == G.GFX_CTRL_CMD_ID_INIT_GPCOM_RING:   # KM ring (PSP_RING_TYPE__KM = 2)
      self.ring = ((rf.values.get(self.r[70], 0) << 32) | rf.values.get(self.r[69], 0), rf.values.get(self.r[71], 0))
      self.rptr = 0
    rf.poke(self.r[64], 0x80000000)

  def _ring_wptr(self, wptr: int) -> None:
    why = self._busy()
    if why: raise DeviceError(f"mock Navi 31 {self.gpu.addr} PSP: MP0_SMN_C2PMSG_67 (ring write pointer) written while {why}")
    if self.ring is None: return self._refuse("ring write pointer with no ring")
    base, size = self.ring
    frame_dw = ctypes.sizeof(G.struct_psp_gfx_rb_frame) // 4
    while self.rptr != wptr:
      raw = self.gpu.read_mc(base + (self.rptr * 4) % size, ctypes.sizeof(G.struct_psp_gfx_rb_frame))
      frame = G.struct_psp_gfx_rb_frame.from_buffer_copy(raw)
      self._command(frame)
      self.rptr = (self.rptr + frame_dw) % (size // 4) if size else wptr

  def _command(self, frame) -> None:
    cmd_mc = frame.cmd_buf_addr_lo | (frame.cmd_buf_addr_hi << 32)
    cmd = G.struct_psp_gfx_cmd_resp.from_buffer_copy(self.gpu.read_mc(cmd_mc, ctypes.sizeof(G.struct_psp_gfx_cmd_resp)))
    status, tmr_size = self._execute(cmd), 0
    if cmd.cmd_id == G.GFX_CMD_ID_LOAD_TOC and status == 0: tmr_size = TMR_SIZE
    cmd.resp.status, cmd.resp.tmr_size = status, tmr_size
    self.gpu.write_mc(cmd_mc, bytes(cmd))
    self.gpu.write_mc(frame.fence_addr_lo | (frame.fence_addr_hi << 32), struct.pack("<I", frame.fence_value))

  def _execute(self, cmd) -> int:
    cid = cmd.cmd_id
    self.commands.append((cid, cmd.cmd.cmd_load_ip_fw.fw_type if cid == G.GFX_CMD_ID_LOAD_IP_FW else None))
    if cid == G.GFX_CMD_ID_LOAD_TOC:
      c = cmd.cmd.cmd_load_toc
      why = self._flushed("LOAD_TOC") or \
        check_signature(self.gpu.read_mc(c.toc_phy_addr_lo | (c.toc_phy_addr_hi << 32), c.toc_size), c.toc_size, "TOC")
      if why: return self._status(STATUS_BAD_IMAGE, f"LOAD_TOC: {why}")
      self.toc_loaded = True
      return 0
    if cid == G.GFX_CMD_ID_SETUP_TMR:
      c = cmd.cmd.cmd_setup_tmr
      if not self.toc_loaded: return self._status(STATUS_BAD_ORDER, "SETUP_TMR before LOAD_TOC")
      if c.buf_size < TMR_SIZE: return self._status(STATUS_BAD_ADDRESS, f"SETUP_TMR of {c.buf_size:#x} bytes < {TMR_SIZE:#x}")
      mc, pa = c.buf_phy_addr_lo | (c.buf_phy_addr_hi << 32), c.system_phy_addr_lo | (c.system_phy_addr_hi << 32)
      # psp_prep_tmr_cmd_buf: the MC address, and with virt_phy_addr the same memory's physical address
      # (amdgpu_gmc_vram_pa); tinygrad 0.14's _tmr_load_cmd gives the same pair
      want = mc - self.gpu.fb_base + self.gpu.fb_offset
      if not c.bitfield.virt_phy_addr or pa != want:
        return self._status(STATUS_BAD_ADDRESS, f"SETUP_TMR at MC {mc:#x}: system_phy_addr {pa:#x} with virt_phy_addr "
                                                f"{c.bitfield.virt_phy_addr}, the TMR's physical address is {want:#x}")
      self.tmr = (mc, c.buf_size)
      return 0
    if cid == G.GFX_CMD_ID_LOAD_IP_FW:
      c = cmd.cmd.cmd_load_ip_fw
      # MP0 13.0.0 (PMFW-centralized C-state management): after LOAD_TOC the SMU's firmware may come before
      # SETUP_TMR (psp_hw_start: psp_load_smu_fw, then psp_tmr_load); every other image after SETUP_TMR
      if not self.toc_loaded: return self._status(STATUS_BAD_ORDER, f"LOAD_IP_FW type {c.fw_type} before LOAD_TOC")
      if not self.loaded_fw and c.fw_type != G.GFX_FW_TYPE_SMU:
        return self._status(STATUS_BAD_ORDER, f"LOAD_IP_FW type {c.fw_type} before the SMU firmware")
      if self.tmr is None and c.fw_type != G.GFX_FW_TYPE_SMU:
        return self._status(STATUS_BAD_ORDER, f"LOAD_IP_FW type {c.fw_type} before SETUP_TMR")
      blob = self.gpu.read_mc(c.fw_phy_addr_lo | (c.fw_phy_addr_hi << 32), c.fw_size)
      same = self.loaded_fw and self.last_image == (c.fw_phy_addr_lo, c.fw_phy_addr_hi, c.fw_size, hash(blob))
      why = (None if same else self._flushed(f"LOAD_IP_FW type {c.fw_type}")) or \
        check_signature(blob, c.fw_size, fw_type_name(c.fw_type))
      self.last_image = (c.fw_phy_addr_lo, c.fw_phy_addr_hi, c.fw_size, hash(blob))
      if why: return self._status(STATUS_BAD_IMAGE, f"LOAD_IP_FW type {c.fw_type}: {why}")
      self.loaded_fw.append(c.fw_type)
      if c.fw_type == G.GFX_FW_TYPE_SMU: self.gpu.smu.start(SMU_VERSION)
      if c.fw_type == G.GFX_FW_TYPE_RS64_MEC: self.gpu.mec_start = self._mec_start(blob, c.fw_size)
      return 0
    if cid == G.GFX_CMD_ID_AUTOLOAD_RLC:
      missing = AUTOLOAD_NEEDS - set(self.loaded_fw)
      if missing: return self._status(STATUS_BAD_ORDER, f"AUTOLOAD_RLC without firmware types {sorted(missing)}")
      self.autoloaded = True
      self.gpu.rlc.autoload(self.gpu)
      return 0
    return self._status(STATUS_UNKNOWN, f"command {cid:#x} unknown")

  def _mec_start(self, blob: bytes, size: int) -> int | None:
    """The MEC firmware's start address: its file's gfx_firmware_header_v2_0 ucode_start_addr (the file the image's
    digest names, read from the machine's firmware folder as the board's flash would hold it)."""
    image, _ = signed_part(blob, size)
    name = fwdigests.DIGESTS.get("RS64_MEC", {}).get(hashlib.sha256(image).hexdigest()) if image else None
    folder = getattr(self.gpu.os.config, "firmware_dir", None) if self.gpu.os is not None else None
    if name is None or not folder: return None
    try:
      with open(host_os.path.join(folder, name), "rb") as f: raw = f.read(ctypes.sizeof(ucode.struct_gfx_firmware_header_v2_0))
    except OSError: return None
    hdr = ucode.struct_gfx_firmware_header_v2_0.from_buffer_copy(raw)
    return hdr.ucode_start_addr_lo | (hdr.ucode_start_addr_hi << 32)

  def _status(self, status: int, why: str) -> int:
    self._refuse(why)
    return status
