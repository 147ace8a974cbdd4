"""SMU (MP1 13.0.0): the power-management firmware, reached through a mailbox: write the response register
C2PMSG_90 = 0, the argument C2PMSG_82, the message C2PMSG_66; wait for C2PMSG_90 != 0 (PPSMC_Result_*); read the
result from C2PMSG_82. Messages and tables are smu_v13_0_0_ppsmc.h / smu13_driver_if_v13_0_0.h's
(hcq.autogen.amd.smu_v13_0_0). PSP loads its firmware; until then it answers nothing.

init: check the driver-interface version, give the SMU a driver table in VRAM (SetDriverDramAddrHigh/Low), enable
every feature. metrics(): TransferTableSmu2Dram(TABLE_SMU_METRICS), then read SmuMetricsExternal_t from that table.
"""
from __future__ import annotations

import ctypes

from ....autogen.amd import smu_v13_0_0 as S
from ....errors import DeviceError
from .block import IPBlock

RESULTS = {v: k for k, v in vars(S).items() if k.startswith("PPSMC_Result_")}
MESSAGES = {v: k for k, v in vars(S).items() if k.startswith("PPSMC_MSG_") and isinstance(v, int)}
TABLE_SIZE = 0x4000
DPM_VALUE_MASK = 0x7FFFFFFF       # GetDpmFreqByIndex: bit 31 is the DPM kind flag, not part of the value


class SMUError(DeviceError):
  """The SMU answered a message with a failure; names the message and the response."""


class SMU(IPBlock):
  name = "smu"

  def sw_init(self) -> None:
    self.table = self.dev.vram.alloc(TABLE_SIZE, "SMU driver table")

  def send(self, msg: int, arg: int = 0) -> int:
    r = self.dev.mp1_regs
    name = MESSAGES.get(msg, f"message {msg:#x}")
    r.write("MP1_SMN_C2PMSG_90", 0)
    r.write("MP1_SMN_C2PMSG_82", arg & 0xFFFFFFFF)
    r.write("MP1_SMN_C2PMSG_66", msg)
    resp_addr = r.addr("MP1_SMN_C2PMSG_90")
    resp = r.access.poll(lambda: 1 if r.access.read(resp_addr) else 0, 1, 1, f"MP1 MP1_SMN_C2PMSG_90 (response to {name})")
    resp = r.read("MP1_SMN_C2PMSG_90")
    if resp != S.PPSMC_Result_OK:
      raise SMUError(f"{self.dev.label}: SMU answered {name} (argument {arg:#x}) with "
                     f"{RESULTS.get(resp, hex(resp))}")
    return r.read("MP1_SMN_C2PMSG_82")

  def hw_init(self) -> None:
    self.version = self.send(S.PPSMC_MSG_GetSmuVersion)
    self.step(f"SMU firmware {self.version >> 16}.{(self.version >> 8) & 0xFF}.{self.version & 0xFF} running")
    if_version = self.send(S.PPSMC_MSG_GetDriverIfVersion)
    if if_version != S.SMU13_0_0_DRIVER_IF_VERSION:
      raise SMUError(f"{self.dev.label}: SMU driver interface {if_version}, hcq speaks {S.SMU13_0_0_DRIVER_IF_VERSION}")
    self.send(S.PPSMC_MSG_SetDriverDramAddrHigh, self.table.mc >> 32)
    self.send(S.PPSMC_MSG_SetDriverDramAddrLow, self.table.mc & 0xFFFFFFFF)
    self.step("features: EnableAllSmuFeatures")
    self.send(S.PPSMC_MSG_EnableAllSmuFeatures)
    self.features = self.send(S.PPSMC_MSG_GetRunningSmuFeaturesLow) | (self.send(S.PPSMC_MSG_GetRunningSmuFeaturesHigh) << 32)

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
    self.send(S.PPSMC_MSG_TransferTableSmu2Dram, S.TABLE_SMU_METRICS)
    raw = self.dev.vram.read(self.table.offset, ctypes.sizeof(S.struct_SmuMetricsExternal_t))
    return S.struct_SmuMetricsExternal_t.from_buffer_copy(raw).SmuMetrics
