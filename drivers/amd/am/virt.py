"""SR-IOV: AM on a virtual function (VF) of a GPU whose physical function (PF) the host driver already booted.

A VF boots without firmware: the host's PSP loaded every firmware and runs the SMU; the VF talks to neither (on MP0
13.0.0 Linux's amdgpu_virt.c amdgpu_virt_fw_load_skip_check skips every ucode but VCN's: "no vf autoload"; the
SMU's hw_init returns at once on a VF, amdgpu_smu.c smu_hw_init). What a VF must do instead is ask the host for
exclusive access to the GPU while it programs its own part of it (VM hubs, IH ring, queues), then give it back. The
request and the answer travel through a per-VF mailbox in NBIO: Linux's mxgpu_nv.c / mxgpu_nv.h are the
documentation of the protocol. This module is hcq's own implementation of it.

Detection (Linux amdgpu_virt.c amdgpu_detect_virtualization): RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER (NBIO 4.3,
segment 2; mmRCC_IOV_FUNC_IDENTIFIER = 0xDE5 in amdgpu_virt.h is the same register at the segment base 0xD20):
FUNC_IDENTIFIER (bit 0) = 1 on a VF, IOV_ENABLE (bit 31) = 1 when SR-IOV is on. hcq reads it through the generated
register module. A VF has no device id of its own in Linux 6.12 (amdgpu_drv.c binds GC 11 parts by PCI class,
CHIP_IP_DISCOVERY) and pci.ids lists none for Navi 31, so the register, not the id, says "VF".

Mailbox registers (nbio_4_3_0_offset.h regBIF_BX_DEV0_EPF0_VF0_MAILBOX_*, lines 762-781, segment 2; the generated
nbio_4_3_0 module leaves out the _VF<n>_ copies, so the offsets are here; at the segment base 0xD20 they are
mxgpu_nv.h's mmMAILBOX_MSGBUF_TRN_DW0 = 0xE56 ... mmMAILBOX_CONTROL = 0xE5E):
  MSGBUF_TRN_DW0..3  0x136..0x139  the VF's message to the PF: request id, three data words
  MSGBUF_RCV_DW0..3  0x13A..0x13D  the PF's message to the VF: event id, data (DW1 the init-data version, DW2 the
                                   checksum key of the pf2vf region)
  CONTROL            0x13E         TRN_MSG_VALID bit 0 (VF: a message is in TRN), TRN_MSG_ACK bit 1 (PF: it took it),
                                   RCV_MSG_VALID bit 8 (PF: a message is in RCV), RCV_MSG_ACK bit 9 (VF: taken)
                                   (nbio_4_3_0_sh_mask.h BIF_BX_DEV0_EPF0_VF0_MAILBOX_CONTROL, lines 2471-2479)
Linux writes the TRN and RCV halves of CONTROL as separate bytes (WREG8); hcq's register access is by dword, so each
write leaves the other half's action bits clear: TRN_MSG_VALID 0 is its idle state between messages (a message
ends with it cleared) and RCV_MSG_ACK 0 does nothing.

One message (mxgpu_nv.c xgpu_nv_mailbox_trans_msg, send_access_requests): clear TRN_MSG_VALID and wait for the PF's
TRN_MSG_ACK to drop; write TRN_DW0..3; set TRN_MSG_VALID; wait for TRN_MSG_ACK (Linux: 500 ms,
NV_MAILBOX_POLL_ACK_TIMEDOUT); clear TRN_MSG_VALID. A request that has an answer then waits for RCV_DW0 to hold the
answer's event id (Linux: 15 s, NV_MAILBOX_POLL_MSG_TIMEDOUT) and acknowledges it with RCV_MSG_ACK.
  IDH_REQ_GPU_INIT_DATA (6)   -> IDH_REQ_GPU_INIT_DATA_READY (7), RCV_DW1 = version; a host without this
                                 handshake does not answer (Linux then takes version 0 and goes on)
  IDH_REQ_GPU_INIT_ACCESS (1) -> IDH_READY_TO_ACCESS_GPU (1), RCV_DW2 = checksum key: exclusive access begins
  IDH_REL_GPU_INIT_ACCESS (2) -> no answer: exclusive access ends (Linux: at the end of amdgpu_device_init)
  IDH_REQ_GPU_FINI_ACCESS (3) / IDH_REL_GPU_FINI_ACCESS (4): the same pair around the teardown
  IDH_FAIL (5): the host's refusal of a request (hcq stops on it, naming the request)
hcq waits its device timeout (Config.timeout_s) for an answer, and at most 500 ms for the acknowledgement; a PF that
does not acknowledge is not there, and one that does not answer a request for access is an error naming the register,
the message and the last value seen. Linux retries a request up to 5 times; hcq asks once.

The pf2vf region (amdgv_sriovmsg.h): the host's message to the VF in the VF's own VRAM. Early in init a VF reads
its VBIOS copy from the start of its VRAM BAR (amdgpu_bios.c amdgpu_read_bios_from_vram) and the pf2vf block at
64 KiB into it (amdgpu_virt.c amdgpu_virt_init_data_exchange: bios + AMD_SRIOV_MSG_PF2VF_OFFSET_KB): VRAM offset
0x10000, 1 KiB (AMD_SRIOV_MSG_SIZE_KB); the vf2pf block follows, then bad pages; the layout ends where the TMR
begins (AMD_SRIOV_MSG_TMR_OFFSET_KB = 2048), so AM allocates nothing of its own below 2 MiB of a VF's VRAM.
struct amd_sriov_msg_pf2vf_info (packed): header {size, version, reserved[2]}, checksum at 16, feature_flags at 20,
vf2pf_update_interval_ms at 88, uuid (u64) at 92, fcn_idx at 100, reg_access_flags at 104. Checksum
(amd_sriov_msg_checksum): key + the sum of the `size` bytes, less the bytes of the checksum field itself; version 1
uses the key of IDH_READY_TO_ACCESS_GPU's RCV_DW2, version 2 the key 0. A size over 1 KiB, another version or a
wrong checksum make the region unusable: Linux logs it and goes on, so does hcq (a traced step; `pf2vf` None).

Not done: the vf2pf report (the VF's firmware versions and memory use, amdgpu_virt_write_vf2pf_data), world switches
and FLR notifications (IDH_FLR_NOTIFICATION) at runtime, register access through the RLC (RLCG) that hosts may
demand once init access is released.
"""
from __future__ import annotations

import struct

from ....errors import DeviceError, Timeout
from .regs import module_for

# mxgpu_nv.h enum idh_request / enum idh_event
IDH_REQ_GPU_INIT_ACCESS, IDH_REL_GPU_INIT_ACCESS, IDH_REQ_GPU_FINI_ACCESS, IDH_REL_GPU_FINI_ACCESS = 1, 2, 3, 4
IDH_REQ_GPU_INIT_DATA = 6
IDH_READY_TO_ACCESS_GPU, IDH_FAIL, IDH_REQ_GPU_INIT_DATA_READY = 1, 5, 7
REQUESTS = {IDH_REQ_GPU_INIT_ACCESS: "IDH_REQ_GPU_INIT_ACCESS", IDH_REL_GPU_INIT_ACCESS: "IDH_REL_GPU_INIT_ACCESS",
            IDH_REQ_GPU_FINI_ACCESS: "IDH_REQ_GPU_FINI_ACCESS", IDH_REL_GPU_FINI_ACCESS: "IDH_REL_GPU_FINI_ACCESS",
            IDH_REQ_GPU_INIT_DATA: "IDH_REQ_GPU_INIT_DATA"}
EVENTS = {0: "IDH_CLR_MSG_BUF", IDH_READY_TO_ACCESS_GPU: "IDH_READY_TO_ACCESS_GPU", 2: "IDH_FLR_NOTIFICATION",
          3: "IDH_FLR_NOTIFICATION_CMPL", 4: "IDH_SUCCESS", IDH_FAIL: "IDH_FAIL", 6: "IDH_QUERY_ALIVE",
          IDH_REQ_GPU_INIT_DATA_READY: "IDH_REQ_GPU_INIT_DATA_READY"}
# the answer each request waits for (mxgpu_nv.c xgpu_nv_send_access_requests_with_param)
ANSWERS = {IDH_REQ_GPU_INIT_ACCESS: IDH_READY_TO_ACCESS_GPU, IDH_REQ_GPU_FINI_ACCESS: IDH_READY_TO_ACCESS_GPU,
           IDH_REQ_GPU_INIT_DATA: IDH_REQ_GPU_INIT_DATA_READY}

# NBIO 4.3 segment 2 offsets (nbio_4_3_0_offset.h regBIF_BX_DEV0_EPF0_VF0_MAILBOX_*, BASE_IDX 2): the mailbox is
# used before discovery, so at segment 2's early base (AMDev: NBIO_SEGMENT2_EARLY, as for RCC_CONFIG_MEMSIZE)
MSGBUF_TRN_DW0, MSGBUF_RCV_DW0, MAILBOX_CONTROL = 0x136, 0x13A, 0x13E
TRN_MSG_VALID, TRN_MSG_ACK, RCV_MSG_VALID, RCV_MSG_ACK = 1 << 0, 1 << 1, 1 << 8, 1 << 9
CONTROL_NAME, RCV_NAME = "BIF_BX_DEV0_EPF0_VF0_MAILBOX_CONTROL", "BIF_BX_DEV0_EPF0_VF0_MAILBOX_MSGBUF_RCV_DW0"
ACK_TIMEOUT_S = 0.5               # NV_MAILBOX_POLL_ACK_TIMEDOUT: 500 ms
IOV_REG = "RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER"
# amdgv_sriovmsg.h: AMD_SRIOV_MSG_PF2VF_OFFSET_KB (64), AMD_SRIOV_MSG_SIZE_KB (1), AMD_SRIOV_MSG_TMR_OFFSET_KB (2048)
PF2VF_OFFSET, PF2VF_SIZE, VF_RESERVED = 64 << 10, 1 << 10, 2048 << 10


class VirtError(DeviceError):
  """The PF did not answer or refused a mailbox request; names the register, the message and what was seen."""


class NoAnswer(VirtError):
  """The PF acknowledged a request but posted no answer in time."""


def read_iov(access, nbio_segment2: int) -> tuple[bool, bool]:
  """(is a VF, SR-IOV enabled) from RCC_IOV_FUNC_IDENTIFIER, read before discovery at NBIO segment 2's early base.
  All ones (a function that does not answer) is neither: the VRAM-size read after it names that failure."""
  reg = module_for("NBIF", (4, 3, 0)).REGS[IOV_REG]
  raw = access.read(nbio_segment2 + reg.offset)
  if raw == 0xFFFFFFFF: return False, False
  f = reg.decode(raw)
  return bool(f["FUNC_IDENTIFIER"]), bool(f["IOV_ENABLE"])


class Mailbox:
  """The VF side of the PF<->VF mailbox. `step(what)` traces each message; `held` is the exclusive access the VF
  holds ("init", "fini" or None); `log` is the messages sent and answers taken, by name, in order."""

  def __init__(self, access, segment_base: int, label: str, timeout_s: float, step):
    self.access, self.label, self.timeout_s, self.step = access, label, timeout_s, step
    self.control = segment_base + MAILBOX_CONTROL
    self.trn = segment_base + MSGBUF_TRN_DW0
    self.rcv = segment_base + MSGBUF_RCV_DW0
    self.held: str | None = None
    self.init_data_version = 0
    self.checksum_key = 0
    self.log: list[str] = []

  # ---- one message
  def _wait_control(self, mask: int, value: int, what: str, timeout_s: float) -> None:
    reg = f"{CONTROL_NAME} (register {self.control:#x})"
    try: self.access.poll(lambda: self.access.read(self.control), mask, value, f"{reg}: {what}", timeout_s)
    except Timeout as e:
      raise VirtError(f"{self.label}: the PF did not {what}: {reg} read {e.last_seen} last, expected & {mask:#x} "
                      f"== {value:#x} within {timeout_s:g} s (no host driver behind this VF's mailbox?)") from None

  def _transmit(self, req: int, data: tuple[int, int, int]) -> None:
    name = REQUESTS.get(req, str(req))
    self.access.write(self.control, 0)                     # TRN_MSG_VALID off: the PF drops its TRN_MSG_ACK
    self._wait_control(TRN_MSG_ACK, 0, f"drop TRN_MSG_ACK before {name}", ACK_TIMEOUT_S)
    for i, v in enumerate((req, *data)): self.access.write(self.trn + i, v)
    self.access.write(self.control, TRN_MSG_VALID)
    self._wait_control(TRN_MSG_ACK, TRN_MSG_ACK, f"acknowledge {name} (TRN_MSG_ACK)",
                       min(ACK_TIMEOUT_S, self.timeout_s))
    self.access.write(self.control, 0)
    self.log.append(name)

  def _receive(self, req: int, event: int) -> tuple[int, int, int]:
    """Wait (bounded) for RCV_DW0 == event, acknowledge it, return RCV_DW1..3. IDH_FAIL in RCV_DW0 is the PF's
    refusal of req: a VirtError naming both at once, not after the timeout."""
    rname, ename, os = REQUESTS[req], EVENTS[event], self.access.os
    deadline = os.monotonic() + self.timeout_s
    while True:
      v = self.access.read(self.rcv)
      if v == event: break
      if v == IDH_FAIL:
        self.access.write(self.control, RCV_MSG_ACK)
        self.log.append(EVENTS[IDH_FAIL])
        raise VirtError(f"{self.label}: the PF refused {rname}: {RCV_NAME} (register {self.rcv:#x}) holds IDH_FAIL "
                        f"({IDH_FAIL}) instead of {ename} ({event})")
      if os.monotonic() > deadline:
        raise NoAnswer(f"{self.label}: the PF did not answer {rname}: {RCV_NAME} (register {self.rcv:#x}) expected "
                       f"{ename} ({event}), last seen {EVENTS.get(v, hex(v))} ({v:#x}) after {self.timeout_s:g} s")
      os.sleep(0.0005)
    data = tuple(self.access.read(self.rcv + i) for i in (1, 2, 3))
    self.access.write(self.control, RCV_MSG_ACK)            # the PF may post its next message
    self.log.append(ename)
    return data

  def request(self, req: int, data: tuple[int, int, int] = (0, 0, 0)) -> tuple[int, int, int] | None:
    """Send req; for a request with an answer, wait for it and return its RCV_DW1..3."""
    self.step(f"mailbox: {REQUESTS[req]}")
    self._transmit(req, data)
    if req not in ANSWERS: return None
    out = self._receive(req, ANSWERS[req])
    self.step(f"mailbox: {EVENTS[ANSWERS[req]]}")
    return out

  # ---- the exchanges of a VF's life (amdgpu_virt.c amdgpu_virt_request_init_data / request_full_gpu / release)
  def request_init_data(self) -> int:
    """IDH_REQ_GPU_INIT_DATA: the version of the init data the host offers; a host that does not answer has none
    (version 0, as Linux takes it); one that does not even acknowledge the message is not there (VirtError)."""
    try: dw1, _dw2, _dw3 = self.request(IDH_REQ_GPU_INIT_DATA)
    except NoAnswer:
      self.step("mailbox: no IDH_REQ_GPU_INIT_DATA_READY: host without the init-data handshake (version 0)")
      self.init_data_version = 0
      return 0
    self.init_data_version = max(dw1, 1)       # a host that sets no version means version 1 (mxgpu_nv.c)
    return self.init_data_version

  def request_access(self, init: bool = True) -> None:
    """Exclusive access to the GPU for init (or teardown): IDH_REQ_GPU_INIT/FINI_ACCESS -> IDH_READY_TO_ACCESS_GPU."""
    _dw1, key, _dw3 = self.request(IDH_REQ_GPU_INIT_ACCESS if init else IDH_REQ_GPU_FINI_ACCESS)
    if init: self.checksum_key = key            # the pf2vf region's checksum key (mxgpu_nv.c: "from mailbox2")
    self.held = "init" if init else "fini"

  def release_access(self) -> None:
    """IDH_REL_GPU_INIT/FINI_ACCESS for the access held: the host may schedule the other VFs again."""
    if self.held is None: return
    held, self.held = self.held, None          # given back even if the PF does not acknowledge the release
    self.request(IDH_REL_GPU_INIT_ACCESS if held == "init" else IDH_REL_GPU_FINI_ACCESS)


def checksum(block: bytes, key: int) -> int:
  """amd_sriov_msg_checksum's value for a block whose checksum field (offset 16) is part of it."""
  return (key + sum(block) - sum(block[16:20])) & 0xFFFFFFFF


def parse_pf2vf(block: bytes, key: int) -> dict:
  """The fields AM uses of struct amd_sriov_msg_pf2vf_info; ValueError saying why the block is unusable."""
  size, version = struct.unpack_from("<II", block, 0)
  if size > PF2VF_SIZE or size < 20: raise ValueError(f"size {size} bytes (at most {PF2VF_SIZE})")
  if version not in (1, 2): raise ValueError(f"version {version} (hcq reads 1 and 2)")
  stored, want = struct.unpack_from("<I", block, 16)[0], checksum(block[:size], key if version == 1 else 0)
  if stored != want: raise ValueError(f"checksum {stored:#x}, computed {want:#x}")
  out = {"size": size, "version": version, "feature_flags": struct.unpack_from("<I", block, 20)[0]}
  if version == 2 and size >= 108:
    out["vf2pf_update_interval_ms"], out["uuid"], out["fcn_idx"], out["reg_access_flags"] = \
      struct.unpack_from("<IQII", block, 88)
  return out
