"""SMU (MP1 13.0.0): the power-management firmware, reached through a mailbox: write the response register
C2PMSG_90 = 0, the argument C2PMSG_82, the message C2PMSG_66; wait for C2PMSG_90 != 0 (PPSMC_Result_*); read the
result from C2PMSG_82. Messages and tables are smu_v13_0_0_ppsmc.h / smu13_driver_if_v13_0_0.h's
(hcq.autogen.amd.smu_v13_0_0). PSP loads its firmware; until then it answers nothing.

One mailbox, several senders: the AM driver and hcq-smi (another process, reading the metrics of a GPU the driver
holds: drivers/amd/am/monitor.py) both send messages. An exchange is three register writes and a poll; a second
sender between them would take the first one's answer. So every exchange happens under the cross-process lock
<lock dir>/am-smu_<bus>.lock (os.lock_device, waited for up to the device timeout), and a transfer of a table
together with the read of it (Mailbox.exclusive).

init: check the driver-interface version, give the SMU a driver table in VRAM (SetDriverDramAddrHigh/Low), enable
every feature, then publish where the table is for hcq-smi (drivers/amd/am/state.py). metrics():
TransferTableSmu2Dram(TABLE_SMU_METRICS), then read SmuMetricsExternal_t from that table.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading

from ....autogen.amd import smu_v13_0_0 as S
from ....errors import DeviceError, OSCallError
from . import state as statemod
from .block import IPBlock

RESULTS = {v: k for k, v in vars(S).items() if k.startswith("PPSMC_Result_")}
MESSAGES = {v: k for k, v in vars(S).items() if k.startswith("PPSMC_MSG_") and isinstance(v, int)}
TABLE_SIZE = 0x4000
DPM_VALUE_MASK = 0x7FFFFFFF       # GetDpmFreqByIndex: bit 31 is the DPM kind flag, not part of the value
MAILBOX_LOCK = "am-smu"           # drivers/system/locks.py SHARED_LOCK_KINDS


class SMUError(DeviceError):
  """The SMU answered a message with a failure; names the message and the response."""


class Mailbox:
  """The MP1 mailbox of one GPU (mp1: its IPRegs), shared with other processes through the am-smu lock of bus."""

  def __init__(self, mp1, os, bus: str, label: str, timeout_s: float):
    self.r, self.os, self.bus, self.label, self.timeout_s = mp1, os, bus, label, timeout_s
    self._local = threading.RLock()      # the threads of this process; the file lock is not reentrant
    self._held, self._depth = None, 0

  @contextlib.contextmanager
  def exclusive(self):
    """The mailbox to this thread alone (other processes and threads wait) until the block ends; nests."""
    with self._local:
      if self._depth == 0:
        try: self._held = self.os.lock_device(MAILBOX_LOCK, self.bus, wait_s=self.timeout_s)
        except OSCallError as e:        # not contention: the lock file itself (a planted link, its permissions)
          raise SMUError(f"{self.label}: cannot take the SMU mailbox lock: {e}") from None
        except DeviceError as e:
          raise SMUError(f"{self.label}: the SMU mailbox stayed taken for {self.timeout_s:g} s: {e}") from None
      self._depth += 1
      try: yield self
      finally:
        self._depth -= 1
        if self._depth == 0:
          self._held.release()
          self._held = None

  def send(self, msg: int, arg: int = 0) -> int:
    """The SMU's answer to msg(arg); a failure code is an SMUError naming both."""
    resp, out = self.exchange(msg, arg)
    if resp != S.PPSMC_Result_OK:
      raise SMUError(f"{self.label}: SMU answered {MESSAGES.get(msg, f'message {msg:#x}')} (argument {arg:#x}) with "
                     f"{RESULTS.get(resp, hex(resp))}")
    return out

  def exchange(self, msg: int, arg: int = 0, timeout_s: float | None = None) -> tuple[int, int]:
    """(response code, C2PMSG_82) of one message, under the lock; no answer within timeout_s (default the device
    timeout) is a Timeout naming the message."""
    r = self.r
    with self.exclusive():
      self._post(msg, arg)
      resp_addr = r.addr("MP1_SMN_C2PMSG_90")
      r.access.poll(lambda: 1 if r.access.read(resp_addr) else 0, 1, 1,
                    f"MP1 MP1_SMN_C2PMSG_90 (response to {MESSAGES.get(msg, f'message {msg:#x}')})", timeout_s=timeout_s)
      return r.read("MP1_SMN_C2PMSG_90"), r.read("MP1_SMN_C2PMSG_82")

  def post(self, msg: int, arg: int = 0) -> None:
    """Send a message that is never answered (PPSMC_MSG_Mode1Reset: the SMU resets with the rest), under the lock."""
    with self.exclusive(): self._post(msg, arg)

  def _post(self, msg: int, arg: int) -> None:
    r = self.r
    r.write("MP1_SMN_C2PMSG_90", 0)
    r.write("MP1_SMN_C2PMSG_82", arg & 0xFFFFFFFF)
    r.write("MP1_SMN_C2PMSG_66", msg)


class SMU(IPBlock):
  name = "smu"

  def sw_init(self) -> None:
    d = self.dev
    self.table = d.vram.alloc(TABLE_SIZE, "SMU driver table")
    self.bus = d.pci.lock_key[1]
    self.mailbox = d.smu_mailbox           # the GPU's one mailbox (AMDev makes it at discovery: reuse and reset use it)
    self.published = False

  def send(self, msg: int, arg: int = 0) -> int: return self.mailbox.send(msg, arg)

  def hw_init(self) -> None:
    self.version = self.send(S.PPSMC_MSG_GetSmuVersion)
    self.step(f"SMU firmware {self.version >> 16}.{(self.version >> 8) & 0xFF}.{self.version & 0xFF} running")
    if_version = self.send(S.PPSMC_MSG_GetDriverIfVersion)
    if if_version != S.SMU13_0_0_DRIVER_IF_VERSION:
      # smu_v13_0_check_fw_version: a mismatch is only a warning ("SMU driver if version not matched"); the boot
      # goes on (the messages and tables AM uses have kept their layout across these versions)
      self.step(f"warning: SMU driver interface version {if_version:#x}, hcq's headers are {S.SMU13_0_0_DRIVER_IF_VERSION:#x} "
                f"(smu_v13_0_check_fw_version only warns)")
    self.send(S.PPSMC_MSG_SetDriverDramAddrHigh, self.table.mc >> 32)
    self.send(S.PPSMC_MSG_SetDriverDramAddrLow, self.table.mc & 0xFFFFFFFF)
    self.step("features: EnableAllSmuFeatures")
    self.send(S.PPSMC_MSG_EnableAllSmuFeatures)
    self.features = self.send(S.PPSMC_MSG_GetRunningSmuFeaturesLow) | (self.send(S.PPSMC_MSG_GetRunningSmuFeaturesHigh) << 32)
    self._publish(if_version)

  def _publish(self, if_version: int) -> None:
    """Where hcq-smi finds the metrics (drivers/amd/am/state.py); a lock dir that refuses the file costs only that."""
    d = self.dev
    st = statemod.AMState(d.pci.lock.pid, self.bus, self.table.offset, self.table.mc, self.table.size, self.version,
                          if_version, tuple(d.discovery.version_of("MP1")))
    why = statemod.publish(d.os, st)
    self.published = why is None
    self.step(f"state for hcq-smi: {'published' if why is None else 'not published: ' + why}")

  def close(self) -> None:
    if getattr(self, "published", False):
      statemod.withdraw(self.dev.os, self.bus)
      self.published = False

  def dpm_levels(self, clock: int) -> list[int]:
    """The DPM frequencies (MHz) of a PPCLK_* clock. Bit 31 of every GetDpmFreqByIndex answer (the level count
    included) tells fine-grained from discrete DPM: it is no part of the number (Linux smu_v13_0 masks it too)."""
    count = self.send(S.PPSMC_MSG_GetDpmFreqByIndex, (clock << 16) | 0xFF) & DPM_VALUE_MASK
    return [self.send(S.PPSMC_MSG_GetDpmFreqByIndex, (clock << 16) | i) & DPM_VALUE_MASK for i in range(count)]

  def set_clock_range(self, clock: int, lo: int, hi: int) -> None:
    self.send(S.PPSMC_MSG_SetSoftMinByFreq, (clock << 16) | lo)
    self.send(S.PPSMC_MSG_SetSoftMaxByFreq, (clock << 16) | hi)

  def metrics(self):
    """The SMU's metrics table (SmuMetrics_t of SmuMetricsExternal_t), freshly transferred."""
    with self.mailbox.exclusive():       # nobody transfers another table over it before it is read
      self.send(S.PPSMC_MSG_TransferTableSmu2Dram, S.TABLE_SMU_METRICS)
      raw = self.dev.vram.read(self.table.offset, ctypes.sizeof(S.struct_SmuMetricsExternal_t))
    return S.struct_SmuMetricsExternal_t.from_buffer_copy(raw).SmuMetrics
