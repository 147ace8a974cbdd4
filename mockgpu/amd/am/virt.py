"""The mock Navi 31 as an SR-IOV virtual function (add_navi31(os, vf=True), or Config.mock_am_vf / HCQ_MOCK_AM_VF
for hcq.open("MOCKPCI+AMD")): what the function shows, and the physical function's host driver behind its mailbox.

What the VF shows (the facts are Linux 6.12's, named where used):
- RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER = IOV_ENABLE | FUNC_IDENTIFIER (0x80000001): "I am a VF, SR-IOV is on"
  (amdgpu_virt.c amdgpu_detect_virtualization). The function poses as a part that has SR-IOV, a Radeon PRO V710 MxGPU
  (Navi 32): PCI id 1002:7461 rev 00 (libdrm's amdgpu.ids), GC 11.0.3, MP0/MP1 13.0.10, SDMA 6.0.3 in its discovery
  table (discovery.V710_IPS, where each is cited); the 7900 XTX (Navi 31) has no SR-IOV.
- The GPU as the host left it: the sOS runs (C2PMSG_81), the SMU answers, the RLC autoload completed
  (RLC_RLCS_BOOTLOAD_STATUS) - the host's PSP loaded every firmware; the VF's VRAM BAR is its share of the frame
  buffer, with the discovery table at its top as the host put it there.
- The pf2vf block the host writes for the VF (amdgv_sriovmsg.h struct amd_sriov_msg_pf2vf_info, version 2, 1 KiB
  at VRAM offset 64 KiB: after the VBIOS copy, amdgpu_virt.c amdgpu_virt_init_data_exchange), checksummed as
  amd_sriov_msg_checksum does (key 0 for version 2): feature flags, vf2pf interval, uuid, function index.
  `pf2vf_intact()` says whether the VF left it as written (a VF must not allocate over its messages).
- PSP and SMU belong to the host: any access of the VF to an MP0/MP1 C2PMSG register is refused with a DeviceError
  that says so (a VF that loads firmware or talks to the SMU is a driver bug; MP0 13.0.0 lets a VF load only VCN
  firmware, amdgpu_virt.c amdgpu_virt_fw_load_skip_check).
- Registers the host programs for the VF (MMHUB/GC hub system aperture, AGP aperture, protection-fault default page:
  mmhub_v3_0.c init_system_aperture_regs, "the new L1 policy will block SRIOV guest from writing these regs") drop
  the VF's writes; each dropped write is kept in `refused`.
- Bring-up needs exclusive access: turning on a VM context (CONTEXT0_CNTL.ENABLE_CONTEXT), the IH ring
  (IH_RB_CNTL.RB_ENABLE), a compute HQD (CP_HQD_ACTIVE.ACTIVE) or the SDMA ring (RB_CNTL.RB_ENABLE) while the VF does
  not hold init/fini access is dropped too (and kept in `refused`): the host would be running other VFs then.

The mailbox (the PF's side of mxgpu_nv.c's protocol; registers NBIO segment 2 offsets 0x136..0x13E, nbio_4_3_0_offset.h
regBIF_BX_DEV0_EPF0_VF0_MAILBOX_*): the VF's message in TRN_DW0..3 is taken when TRN_MSG_VALID rises: TRN_MSG_ACK
is set (and dropped when TRN_MSG_VALID is cleared), the request is logged, and its answer is posted in RCV_DW0..3
with RCV_MSG_VALID a few reads of RCV_DW0 later (the host is a scheduler away). The VF's RCV_MSG_ACK takes the answer
away (RCV_DW0 back to IDH_CLR_MSG_BUF). Answers: IDH_REQ_GPU_INIT_DATA -> IDH_REQ_GPU_INIT_DATA_READY (RCV_DW1 the
version), IDH_REQ_GPU_INIT/FINI_ACCESS -> IDH_READY_TO_ACCESS_GPU (RCV_DW2 the checksum key), access held until
IDH_REL_GPU_INIT/FINI_ACCESS. `pf` chooses the host: "ready" (the default), "silent" (no host driver: nothing is
acknowledged), "mute" (acknowledges, never answers), "fail" (answers every access request with IDH_FAIL). `log` is
every message in order, ("vf", request name) and ("pf", event name).
"""
from __future__ import annotations

import struct

from ....autogen.amd import mp_13_0_0
from ....errors import DeviceError
from .cp import TCP_CNTL_GOLDEN
from .discovery import GC_HWID, MMHUB_HWID, MP0_HWID, MP1_HWID, NBIF_HWID, OSSSYS_HWID, SDMA0_HWID

# mxgpu_nv.h enum idh_request / enum idh_event
REQUESTS = {1: "IDH_REQ_GPU_INIT_ACCESS", 2: "IDH_REL_GPU_INIT_ACCESS", 3: "IDH_REQ_GPU_FINI_ACCESS",
            4: "IDH_REL_GPU_FINI_ACCESS", 5: "IDH_REQ_GPU_RESET_ACCESS", 6: "IDH_REQ_GPU_INIT_DATA"}
IDH_CLR_MSG_BUF, IDH_READY_TO_ACCESS_GPU, IDH_FAIL, IDH_REQ_GPU_INIT_DATA_READY = 0, 1, 5, 7
EVENTS = {IDH_READY_TO_ACCESS_GPU: "IDH_READY_TO_ACCESS_GPU", IDH_FAIL: "IDH_FAIL",
          IDH_REQ_GPU_INIT_DATA_READY: "IDH_REQ_GPU_INIT_DATA_READY"}
# nbio_4_3_0_offset.h (segment 2) and nbio_4_3_0_sh_mask.h BIF_BX_DEV0_EPF0_VF0_MAILBOX_CONTROL
TRN_DW0, RCV_DW0, CONTROL = 0x136, 0x13A, 0x13E
TRN_MSG_VALID, TRN_MSG_ACK, RCV_MSG_VALID, RCV_MSG_ACK = 1 << 0, 1 << 1, 1 << 8, 1 << 9
IOV_VF = 0x80000001                 # RCC_IOV_FUNC_IDENTIFIER: IOV_ENABLE (bit 31) | FUNC_IDENTIFIER (bit 0)
INIT_DATA_VERSION, CHECKSUM_KEY = 2, 0x5A5AC3C3
ANSWER_AFTER_READS = 3              # reads of RCV_DW0 before the host's answer shows
PF_MODES = ("ready", "silent", "mute", "fail")
PF2VF_OFFSET, PF2VF_SIZE = 64 << 10, 1 << 10
PF2VF_FEATURES, PF2VF_UUID, PF2VF_FCN = 0x3, 0x1234_5678_9ABC_DEF0, 1


class VFModel:
  def __init__(self, gpu, pf: str = "ready"):
    if pf not in PF_MODES: raise ValueError(f"mock VF: host mode {pf!r} is not one of {', '.join(PF_MODES)}")
    self.gpu, self.pf = gpu, pf
    rf = self.rf = gpu.regs
    self.log: list[tuple[str, str]] = []
    self.refused: list[str] = []      # writes dropped: host-owned registers, bring-up without exclusive access
    self.exclusive: str | None = None   # "init" / "fini" while the VF holds access
    self.trn_valid = self.trn_ack = self.rcv_valid = False
    self.pending: tuple[int, int, int, int] | None = None    # (event, dw1, dw2, dw3) not posted yet
    self.wait_reads = 0
    base = gpu.regs.ips[NBIF_HWID][2]
    self.control, self.trn, self.rcv = base + CONTROL, base + TRN_DW0, base + RCV_DW0
    rf.poke(rf.addr(NBIF_HWID, "nbio_4_3_0", "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER"), IOV_VF)
    rf.hook(self.control, read=self._control_value, write=self._control)
    rf.hook(self.rcv, read=self._rcv_dw0)
    self._host_booted()
    self._protect()
    self._write_pf2vf()

  def _write_pf2vf(self) -> None:
    block = bytearray(PF2VF_SIZE)
    struct.pack_into("<II", block, 0, PF2VF_SIZE, 2)           # header: size, version
    struct.pack_into("<I", block, 20, PF2VF_FEATURES)         # feature_flags
    struct.pack_into("<IQII", block, 88, 2000, PF2VF_UUID, PF2VF_FCN, 0)   # interval, uuid, fcn_idx, reg access
    struct.pack_into("<I", block, 16, sum(block) & 0xFFFFFFFF)   # checksum: key 0 + the bytes (its own field 0)
    self.pf2vf = bytes(block)
    self.gpu.vram[PF2VF_OFFSET:PF2VF_OFFSET + PF2VF_SIZE] = self.pf2vf

  def pf2vf_intact(self) -> bool: return bytes(self.gpu.vram[PF2VF_OFFSET:PF2VF_OFFSET + PF2VF_SIZE]) == self.pf2vf

  # ---- the GPU as the host left it
  def _host_booted(self) -> None:
    from .psp import SMU_VERSION, SOS_VERSION
    g = self.gpu
    self.rf.poke(g.psp.r[81], SOS_VERSION)
    g.smu.start(SMU_VERSION)
    g.rlc.autoload(g)
    rf = self.rf
    # what the host programs and a VF may not (Linux skips it on a VF): the hubs' L2 (mmhub_v3_0 / gfxhub_v3_0
    # init_cache_regs), the MEC started (gfx_v11_0 config_gfx_rs64 + cp_compute_enable) and SDMA0 un-halted
    # (sdma_v6_0_gfx_resume_instance: "if (!amdgpu_sriov_vf(adev))" around the F32_CNTL write)
    for hw, module, reg in ((MMHUB_HWID, "mmhub_3_0_0", "MMVM_L2_CNTL"), (GC_HWID, g.gchub.module, "GCVM_L2_CNTL")):
      rf.poke(rf.addr(hw, module, reg), rf.module(module).REGS[reg].encode(ENABLE_L2_CACHE=1))
    g.cp.mec_by_host = True
    rf.poke(rf.addr(SDMA0_HWID, "sdma_6_0_0", "SDMA0_F32_CNTL"), 0)
    # the host's golden settings (gfx_v11_0_init_golden_registers returns early on a VF): TCP_CNTL (cp.py)
    addr = rf.addr(GC_HWID, "gc_11_0_0", "TCP_CNTL")
    rf.poke(addr, rf.values.get(addr, 0) | TCP_CNTL_GOLDEN)

  def _protect(self) -> None:
    rf, mp = self.rf, mp_13_0_0
    for name in dir(mp):      # PSP (MP0) and SMU (MP1) mailboxes: the host's alone
      if name.startswith(("regMP0_SMN_C2PMSG_", "regMP1_SMN_C2PMSG_")) and not name.endswith("_BASE_IDX"):
        reg = name[3:]
        addr = rf.addr(MP0_HWID if reg.startswith("MP0") else MP1_HWID, "mp_13_0_0", reg)
        rf.guard(addr, read=lambda reg=reg: self._forbidden(reg, "read"),
                 write=lambda _v, reg=reg: self._forbidden(reg, "written"))
    host = [(MMHUB_HWID, "mmhub_3_0_0", "MMMC", "MMVM"), (GC_HWID, self.gpu.gchub.module, "GCMC", "GCVM")]
    for hw, module, mc, vm in host:
      for reg in (f"{mc}_VM_AGP_BOT", f"{mc}_VM_AGP_TOP", f"{mc}_VM_SYSTEM_APERTURE_LOW_ADDR",
                  f"{mc}_VM_SYSTEM_APERTURE_HIGH_ADDR", f"{vm}_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32",
                  f"{vm}_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32"):
        rf.guard(rf.addr(hw, module, reg), write=lambda _v, reg=reg: self._drop(f"{reg}: programmed by the host"))
      self._bring_up(hw, module, f"{vm}_CONTEXT0_CNTL")
    self._bring_up(OSSSYS_HWID, "osssys_6_0_0", "IH_RB_CNTL")
    self._bring_up(GC_HWID, "gc_11_0_0", "CP_HQD_ACTIVE")
    self._bring_up(SDMA0_HWID, "sdma_6_0_0", "SDMA0_QUEUE0_RB_CNTL")

  def _forbidden(self, reg: str, how: str):
    raise DeviceError(f"mock Navi 31 VF {self.gpu.addr}: {reg} {how} by the VF: the PSP and the SMU belong to the host "
                      f"(it loaded every firmware; a VF loads none and talks to no SMU)")

  def _drop(self, why: str) -> bool:
    self.refused.append(why)
    return False

  def _bring_up(self, hw: int, module: str, reg: str) -> None:
    """Bit 0 of each of these turns the thing on: from off to on it needs the VF to hold exclusive access."""
    addr = self.rf.addr(hw, module, reg)
    def check(value: int) -> bool:
      if value & 1 and not self.rf.values.get(addr, 0) & 1 and self.exclusive is None:
        return self._drop(f"{reg} enabled without exclusive access (no IDH_READY_TO_ACCESS_GPU held)")
      return True
    self.rf.guard(addr, write=check)

  # ---- the mailbox
  def _control_value(self) -> int:
    return (TRN_MSG_VALID * self.trn_valid) | (TRN_MSG_ACK * self.trn_ack) | (RCV_MSG_VALID * self.rcv_valid)

  def _control(self, value: int) -> None:
    valid = bool(value & TRN_MSG_VALID)
    if valid and not self.trn_valid: self._take()
    if not valid: self.trn_ack = False          # the PF's RCV ack drops with the VF's TRN_MSG_VALID
    self.trn_valid = valid
    if value & RCV_MSG_ACK and self.rcv_valid:  # the VF took the answer: the buffer is cleared
      self.rcv_valid = False
      for i in range(4): self.rf.poke(self.rcv + i, IDH_CLR_MSG_BUF)

  def _take(self) -> None:
    if self.pf == "silent": return
    self.trn_ack = True
    req = self.rf.values.get(self.trn, 0)
    name = REQUESTS.get(req, f"request {req}")
    self.log.append(("vf", name))
    if self.pf == "mute": return
    if name in ("IDH_REQ_GPU_INIT_ACCESS", "IDH_REQ_GPU_FINI_ACCESS"):
      if self.pf == "fail": return self._answer(IDH_FAIL)
      self.exclusive = "init" if name == "IDH_REQ_GPU_INIT_ACCESS" else "fini"
      self._answer(IDH_READY_TO_ACCESS_GPU, dw2=CHECKSUM_KEY)
    elif name in ("IDH_REL_GPU_INIT_ACCESS", "IDH_REL_GPU_FINI_ACCESS"): self.exclusive = None
    elif name == "IDH_REQ_GPU_INIT_DATA": self._answer(IDH_REQ_GPU_INIT_DATA_READY, dw1=INIT_DATA_VERSION)

  def _answer(self, event: int, dw1: int = 0, dw2: int = 0) -> None:
    self.pending, self.wait_reads = (event, dw1, dw2, 0), ANSWER_AFTER_READS

  def _rcv_dw0(self) -> int:
    if self.pending is not None:
      self.wait_reads -= 1
      if self.wait_reads <= 0:
        for i, v in enumerate(self.pending): self.rf.poke(self.rcv + i, v)
        self.rcv_valid = True
        self.log.append(("pf", EVENTS[self.pending[0]]))
        self.pending = None
    return self.rf.values.get(self.rcv, 0)
