"""Partial boot: a GPU that an AM process left booted (it closed, or it was killed) is reused when its state checks
out, else reset (mode-1, reset.py) and booted in full. The firmware load through the PSP is what a boot costs; what
belongs to a process (page tables, the IH ring, the SMU's driver table address, the queues) is programmed again in
every case, since it points at memory of the process that is gone.

The boot signature, left at the end of every full boot:
  - the boot record: the first page of VRAM (offset 0: the first allocation of every boot, taken without zeroing it,
    before any block's sw_init), MAGIC, a length, then JSON: PROTOCOL, the SHA-256 of the firmware files the PSP
    loaded (names and contents), the sOS and SMU versions, and where the PSP's TMR is (the firmware runs from it: a
    reusing boot keeps it where it is);
  - GC SCRATCH_REG7 = the CRC32 of the record (never 0). The register says "booted by hcq since the last reset" (a
    reset clears it, while VRAM keeps its contents); the record says with what.
A reusing boot clears the signature too and signs again when it completes: one that fails half-way leaves none.

The record is input from a previous process: a record that is not a JSON object with the fields sign() writes (of
the right types) is a full boot like any other mismatch, never an exception.

It checks out when, in this order: the signature is present and matches the record; the record's PROTOCOL is this
driver's and its fields are well-formed; the firmware files are those it was booted with; the PSP's sOS runs
(C2PMSG_81) with the recorded version and takes ring commands (C2PMSG_64 bit 31 within PSP_PROBE_S); the SMU
answers PPSMC_MSG_TestMessage (argument + 1) within SMU_PROBE_S; the RLC autoload is complete; the recorded TMR is a
1 MiB-aligned range of whole pages in VRAM this boot has not allocated; the compute HQD AM uses (ME 1 pipe 0 queue 0)
and SDMA0 queue 0 are not running anything: an active queue whose read pointer has reached its write pointer is idle
(a process killed between kernels leaves it so) and is stopped here (dequeued / disabled, bounded); one with work left
(a kernel still running, a packet waiting on memory that is gone, a queue stopped by a fault) is not. Any other answer
is a full boot: after a mode-1 reset when firmware runs, straight away on a cold GPU (no signature, no sOS). The trace
says which and why.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import zlib

from ....autogen.amd import smu_v13_0_0 as S
from ....errors import DeviceError, Timeout
from .psp import TMR_ALIGN
from .queues import stop_compute_hqd, stop_sdma_ring
from .smu import SMUError

MAGIC = b"HCQAMBR1"
PROTOCOL = 1                 # what a full boot leaves on the GPU and a reusing one relies on: bump when that changes
SIGNATURE_REG = "SCRATCH_REG7"
RECORD_SIZE = 0x1000
SMU_PROBE_S = 0.2            # a running SMU answers a test message in microseconds
PSP_PROBE_S = 0.2            # and a running sOS finishes a ring command in milliseconds
PROBE_ARG = 0x68637100       # "hcq\0"


@dataclasses.dataclass
class Plan:
  action: str                # "reuse", "reset" (mode-1 reset, then a full boot) or "boot" (a full boot)
  why: str
  record: dict | None = None

  @property
  def reuse(self) -> bool: return self.action == "reuse"

  @property
  def reset(self) -> bool: return self.action == "reset"


# ---- the signature
def claim_record(dev):
  """The boot record's page (VRAM offset 0), taken as it is: call before anything else is allocated."""
  dev.boot_record = dev.vram.alloc(RECORD_SIZE, "AM boot record", zero=False)
  if dev.boot_record.offset != 0: raise DeviceError(f"{dev.label}: the boot record must be VRAM's first allocation")
  return dev.boot_record


def firmware_digest(dev) -> str:
  """SHA-256 over the names and contents of every firmware file the PSP loads (read once: sw_init reads them)."""
  if getattr(dev, "firmware_sha256", None): return dev.firmware_sha256
  psp = dev.psp
  h = hashlib.sha256()
  for name in sorted({psp.sos_name, *(name for name, _blob, _t in psp.loads)}):
    data = dev.firmware(name).data
    h.update(struct.pack("<I", len(name)) + name.encode() + struct.pack("<Q", len(data)))
    h.update(data)
  dev.firmware_sha256 = h.hexdigest()
  return dev.firmware_sha256


def _encode(record: dict) -> bytes:
  body = json.dumps(record, sort_keys=True).encode()
  return MAGIC + struct.pack("<I", len(body)) + body


def _token(raw: bytes) -> int: return zlib.crc32(raw) or 1


def sign(dev) -> None:
  """At the end of every boot to gfx (a reusing one writes the same record): the record, then the register (a boot killed between the two leaves no signature)."""
  psp = dev.psp
  record = {"protocol": PROTOCOL, "firmware": firmware_digest(dev), "sos": dev.mp0_regs.read("MP0_SMN_C2PMSG_81"),
            "smu": dev.smu.version,
            "tmr": [psp.tmr.offset, psp.tmr.size]}
  raw = _encode(record)
  dev.vram.write(dev.boot_record.offset, raw)
  dev.gc_regs.write(SIGNATURE_REG, _token(raw))
  dev.step("am", f"boot signature: record at VRAM {dev.boot_record.offset:#x}, CRC32 {_token(raw):#010x} in GC {SIGNATURE_REG}")


def _read_record(dev, token: int) -> tuple[dict | None, str | None]:
  head = dev.vram.read(dev.boot_record.offset, len(MAGIC) + 4)
  if head[:len(MAGIC)] != MAGIC: return None, f"no boot record at VRAM {dev.boot_record.offset:#x} (magic {head[:8].hex()})"
  n = struct.unpack_from("<I", head, len(MAGIC))[0]
  if n > RECORD_SIZE - len(head): return None, f"the boot record's length {n} exceeds its page"
  raw = head + dev.vram.read(dev.boot_record.offset + len(head), n)
  if _token(raw) != token:
    return None, f"GC {SIGNATURE_REG} holds {token:#010x}, the boot record's CRC32 is {_token(raw):#010x}"
  try: record = json.loads(raw[len(head):])
  except (ValueError, RecursionError) as e: return None, f"the boot record is not readable ({type(e).__name__}: {e})"
  if not isinstance(record, dict): return None, f"the boot record is a JSON {type(record).__name__}, not an object"
  return record, None


# what a record of this PROTOCOL holds: a previous process wrote it, so every field is checked before it is used
FIELDS = {"firmware": str, "sos": int, "smu": int}


def _malformed(record: dict) -> str | None:
  """Why a record of this PROTOCOL does not have the fields sign() writes, or None."""
  is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)
  for key, kind in FIELDS.items():
    v = record.get(key)
    if not isinstance(v, kind) or kind is int and not is_int(v):
      return f"the boot record's {key!r} is {v!r:.40}: not {'an' if kind is int else 'a'} {kind.__name__}"
  tmr = record.get("tmr")
  if not (isinstance(tmr, list) and len(tmr) == 2 and all(map(is_int, tmr))):
    return f"the boot record's 'tmr' is {tmr!r:.40}: not [offset, size]"
  return None


def _tmr_problem(dev, offset: int, size: int) -> str | None:
  """Why the recorded TMR cannot be kept where the record says (the firmware runs from it: a reusing boot reserves
  it, and nothing else may be allocated there), or None: it must be a range the PSP could have been given (aligned
  as psp.py allocates it, whole pages) lying in VRAM this boot has not allocated (which also keeps it inside the
  usable VRAM, below the discovery reservation)."""
  if size <= 0 or offset % TMR_ALIGN or size % RECORD_SIZE:
    return f"the boot record's TMR {offset:#x}+{size:#x} is not a 1 MiB-aligned range of whole pages"
  if not dev.vram.is_free(offset, size):
    return (f"the boot record's TMR at VRAM {offset:#x}+{size:#x} is not free VRAM (this boot's allocations reach "
            f"{dev.vram.next:#x}, usable VRAM ends at {dev.vram.end:#x})")
  return None


# ---- probes
def smu_answers(dev) -> str | None:
  """None when the SMU answers a test message correctly within SMU_PROBE_S, else why not."""
  try: code, out = dev.smu_mailbox.exchange(S.PPSMC_MSG_TestMessage, PROBE_ARG, timeout_s=SMU_PROBE_S)
  except Timeout as e: return f"the SMU does not answer PPSMC_MSG_TestMessage ({e})"
  except SMUError as e: return str(e)
  if code != S.PPSMC_Result_OK or out != PROBE_ARG + 1:
    return f"the SMU answered PPSMC_MSG_TestMessage({PROBE_ARG:#x}) with code {code:#x}, value {out:#x}"
  return None


def _psp_ready(dev) -> str | None:
  """None when the sOS takes ring commands (C2PMSG_64 bit 31) within PSP_PROBE_S, else why not: a command the
  previous process left unanswered (a reusing boot's first act is a ring command: it would time out)."""
  r = dev.mp0_regs
  try: r.access.poll(lambda: r.read("MP0_SMN_C2PMSG_64"), 0x80000000, 0x80000000, "MP0 MP0_SMN_C2PMSG_64",
                     timeout_s=PSP_PROBE_S)
  except Timeout:
    return f"the PSP's sOS is not ready for ring commands (MP0_SMN_C2PMSG_64 = {r.read('MP0_SMN_C2PMSG_64'):#x}, bit 31 clear)"
  return None


def _busy_queues(dev) -> tuple[str | None, list[str]]:
  """(why a queue still has work, or None; the idle active queues to stop)."""
  idle = []
  r = dev.gc_regs
  r.write("GRBM_GFX_CNTL", MEID=1, PIPEID=0, QUEUEID=0)
  try:
    if r.field("CP_HQD_ACTIVE", "ACTIVE"):
      rptr, wptr = r.read("CP_HQD_PQ_RPTR"), r.read("CP_HQD_PQ_WPTR_LO")
      size_dw = 2 << r.field("CP_HQD_PQ_CONTROL", "QUEUE_SIZE")
      if rptr != wptr % size_dw:
        return (f"compute HQD 1.0.0 is active with work left (CP_HQD_PQ_RPTR {rptr:#x}, CP_HQD_PQ_WPTR_LO {wptr:#x}): "
                f"a kernel or packet of the previous process is still running or stuck"), idle
      idle.append("compute")
  finally: r.write("GRBM_GFX_CNTL", 0)
  s = dev.sdma_regs
  if s.field("SDMA0_QUEUE0_RB_CNTL", "RB_ENABLE"):
    rptr, wptr = s.read("SDMA0_QUEUE0_RB_RPTR"), s.read("SDMA0_QUEUE0_RB_WPTR")
    size = 4 << s.field("SDMA0_QUEUE0_RB_CNTL", "RB_SIZE")
    if rptr % size != wptr % size:
      return (f"SDMA0 queue 0 is enabled with work left (SDMA0_QUEUE0_RB_RPTR {rptr:#x}, SDMA0_QUEUE0_RB_WPTR "
              f"{wptr:#x})"), idle
    idle.append("sdma")
  return None, idle


def _stop_idle(dev, which: list[str]) -> str | None:
  """Stop the idle queues a previous process left active; None, or why one did not stop."""
  try:
    if "compute" in which: stop_compute_hqd(dev.gc_regs)
    if "sdma" in which: stop_sdma_ring(dev.sdma_regs)
  except Timeout as e: return f"an idle queue of the previous process did not stop ({e})"
  if which: dev.step("am", f"stopped the idle {' and '.join(which)} queue(s) the previous process left active")
  return None


# ---- the decision
def assess(dev) -> Plan:
  """What to do with the GPU (after every block's sw_init, before any hw_init); traced. The signature is cleared in
  every case, a reusing boot's too: a boot signs again only when it completes, so that one failing or killed
  half-way leaves a GPU the next open resets."""
  plan = _assess(dev)
  if dev.gc_regs.read(SIGNATURE_REG): dev.gc_regs.write(SIGNATURE_REG, 0)
  what = {"reuse": "reused", "reset": "full boot after a mode-1 reset", "boot": "full boot"}[plan.action]
  dev.step("am", f"{what}: {plan.why}")
  return plan


def _assess(dev) -> Plan:
  token = dev.gc_regs.read(SIGNATURE_REG)
  alive = dev.mp0_regs.read("MP0_SMN_C2PMSG_81")
  smu = smu_answers(dev) if token or alive else "no sOS and no boot signature"
  def redo(why: str) -> Plan:
    if alive or smu is None: return Plan("reset", why)
    return Plan("boot", f"{why}; no firmware runs (no sOS, the SMU silent): nothing to reset")
  if dev.until is not None:
    if alive or smu is None: return Plan("reset", f"a boot up to {dev.until} was asked of a GPU whose firmware runs")
    return Plan("boot", "a cold GPU (the PSP in its bootloader)")
  if not token:
    if not alive and smu is not None: return Plan("boot", f"a cold GPU (the PSP in its bootloader, no hcq boot signature in GC {SIGNATURE_REG})")
    return redo(f"firmware runs but GC {SIGNATURE_REG} holds no hcq boot signature (another driver booted it, or "
                f"an hcq boot did not finish)")
  record, why = _read_record(dev, token)
  if why: return redo(why)
  if record.get("protocol") != PROTOCOL:
    return redo(f"booted by hcq boot protocol {record.get('protocol')}, this driver's is {PROTOCOL}")
  why = _malformed(record)
  if why: return redo(why)
  digest = firmware_digest(dev)
  if record.get("firmware") != digest:
    return redo(f"the firmware files changed since the GPU was booted (SHA-256 {str(record.get('firmware'))[:12]}, "
                f"now {digest[:12]} in {dev.config.firmware_dir})")
  if not alive: return redo("the PSP is in its bootloader (MP0_SMN_C2PMSG_81 = 0): its sOS is gone")
  if alive != record.get("sos"): return redo(f"the sOS runs version {alive:#x}, the GPU was booted with {record.get('sos'):#x}")
  why = _psp_ready(dev)
  if why: return redo(why)
  if smu is not None: return redo(smu)
  done = dev.gc_regs.mask("RLC_RLCS_BOOTLOAD_STATUS", "BOOTLOAD_COMPLETE")
  if not dev.gc_regs.read("RLC_RLCS_BOOTLOAD_STATUS") & done:
    return redo("the RLC autoload is not complete (RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE clear)")
  why = _tmr_problem(dev, *record["tmr"])
  if why: return redo(why)
  busy, idle = _busy_queues(dev)
  if busy: return redo(busy)
  why = _stop_idle(dev, idle)
  if why: return redo(why)
  return Plan("reuse", f"booted by hcq with these firmware files (SHA-256 {digest[:12]}), sOS {alive:#x}, SMU and "
                       f"RLC running, no queue busy: the firmware load is skipped", record)


# ---- the reusing boot's PSP step
def resume_psp(dev, plan: Plan) -> None:
  """The PSP of a reused GPU: the TMR stays where the firmware runs from it, the KM ring is made again in this
  boot's buffer (destroyed first: the sOS still has the previous process's), so that commands work; no bootloader,
  no firmware load."""
  psp = dev.psp
  off, size = plan.record["tmr"]
  psp.tmr = dev.vram.reserve(off, size, "PSP TMR (kept)")
  psp._ring_create()       # the previous process's ring (C2PMSG_71 != 0) destroyed first: psp_v13_0_ring_stop
  psp.step(f"reused: sOS {plan.record['sos']:#x} running, TMR kept at VRAM {off:#x} ({size:#x} bytes), "
           f"{len(psp.loads)} firmware images already loaded")
