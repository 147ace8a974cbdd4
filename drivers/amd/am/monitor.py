"""The SMU's metrics of a GPU another process (the AM driver) holds, read from outside it: hcq-smi amd top.

The holder publishes where the SMU's driver table is (drivers/amd/am/state.py). This side, without the device lock:
  - maps two small windows of the function's BARs through the OS interface (PCIDevice.map_bar, the sysfs resource
    files, as the holder maps them): the register BAR, and of the VRAM BAR the discovery table and the driver table.
    Registers outside the register BAR would need the MM_INDEX/MM_DATA pair, which the holder uses unlocked between
    its own threads: they are refused here, never reached;
  - refuses an SR-IOV VF (RCC_IOV_FUNC_IDENTIFIER): its SMU is the host's, never messaged from a VF (virt.py);
  - reads VRAM's size (RCC_CONFIG_MEMSIZE) and the IP discovery table from the hardware, not from the state file, for
    the MP1 and MMHUB register bases;
  - checks the published table against the hardware: inside VRAM, below the discovery reservation, page-aligned,
    and its MC address the framebuffer base the MMHUB reports plus its offset;
  - under the SMU mailbox lock (am-smu_<bus>.lock, which the holder takes around each of its own messages, smu.py)
    asks the SMU for TransferTableSmu2Dram(TABLE_SMU_METRICS) and reads the table before letting go;
  - decodes it as SmuMetricsExternal_t (smu13_driver_if_v13_0_0.h, hcq.autogen.amd.smu_v13_0_0).
No register but the mailbox's is written: the holder's programming is never touched.
"""
from __future__ import annotations

import ctypes

from ....autogen.amd import smu_v13_0_0 as S
from ....errors import DeviceError
from ...system.pci import PCIDevice
from ...system.pciaddr import validate
from . import discovery as disc
from . import virt
from .device import NBIO_SEGMENT2_EARLY
from .pci import check_ids, identify_bars
from .regs import IPRegs, RegAccess, module_for
from .smu import Mailbox
from .state import AMState

PAGE = 0x1000
METRICS_SIZE = ctypes.sizeof(S.struct_SmuMetricsExternal_t)
COUNTER_OFFSET = S.struct_SmuMetrics_t.MetricsCounter.offset    # SmuMetrics is the first member of the external table
TRANSFER_TRIES, TRANSFER_PAUSE_S = 3, 0.005


class DirectAccess(RegAccess):
  """Registers through the register BAR only: the MM_INDEX window is the holder's (see the module's doc)."""

  def _direct(self, addr: int) -> None:
    if addr >= self.limit:
      raise DeviceError(f"{self.label}: register {addr:#x} is beyond the register BAR; reaching it needs MM_INDEX, "
                        f"which belongs to the process holding the GPU")

  def read(self, addr: int) -> int:
    self._direct(addr)
    return super().read(addr)

  def write(self, addr: int, value: int) -> None:
    self._direct(addr)
    super().write(addr, value)


class SMUMonitor:
  def __init__(self, os, addr: str):
    self.os, self.addr = os, validate(addr)
    self.label = f"PCI+AMD {self.addr}"
    self.views = []
    self.pci = PCIDevice(os, self.addr)
    try: self._open()
    except BaseException:
      self.close()
      raise

  def _map(self, index: int, offset: int, size: int):
    view = self.pci.map_bar(index, size, offset)
    self.views.append(view)
    return view

  def _open(self) -> None:
    check_ids(self.pci, self.label)
    bars = identify_bars(self.pci, self.label)
    self.vram_index = bars["vram"]
    mmio = self._map(bars["mmio"], 0, self.pci.bar(bars["mmio"]).size)
    self.access = DirectAccess(mmio, self.os, self.os.config.timeout_s, self.label)
    if virt.read_iov(self.access, NBIO_SEGMENT2_EARLY)[0]:
      # a VF's MP1 mailbox is the host's SMU (virt.py): no AM holder of a VF publishes a table, nor is one asked here
      raise DeviceError(f"{self.label}: an SR-IOV VF (RCC_IOV_FUNC_IDENTIFIER): its SMU belongs to the host, hcq-smi "
                        f"sends it nothing")
    reg = module_for("NBIF", (4, 3, 0)).REGS["RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"]
    raw = self.access.read(NBIO_SEGMENT2_EARLY + reg.offset)
    if raw in (0, 0xFFFFFFFF):
      raise DeviceError(f"{self.label}: RCC_CONFIG_MEMSIZE reads {raw:#x}: the GPU is not answering")
    self.vram_size = raw << 20
    if self.pci.bar(self.vram_index).size < self.vram_size:
      raise DeviceError(f"{self.label}: the VRAM BAR shows less than the {self.vram_size >> 20} MiB of VRAM")
    top = self.vram_size - disc.DISCOVERY_OFFSET
    window = self._map(self.vram_index, top, (disc.DISCOVERY_SIZE + PAGE - 1) & ~(PAGE - 1))
    self.discovery = disc.parse(window.read_bytes(0, disc.DISCOVERY_SIZE))
    regs = {ip: IPRegs(self.access, ip, module_for(ip, self.discovery.version_of(ip)), self.discovery.ip(ip).bases)
            for ip in ("MP1", "MMHUB")}
    self.mp1_version = self.discovery.version_of("MP1")
    self.fb_base = (regs["MMHUB"].read("MMMC_VM_FB_LOCATION_BASE") & 0xFFFFFF) << 24
    self.mailbox = Mailbox(regs["MP1"], self.os, self.addr, self.label, self.os.config.timeout_s)

  def check(self, st: AMState, where: str) -> None:
    """The published table against the hardware; a mismatch is a DeviceError naming the state file."""
    end = self.vram_size - disc.DISCOVERY_OFFSET
    if st.table_offset % PAGE or st.table_size < METRICS_SIZE or st.table_offset + st.table_size > end:
      raise DeviceError(f"{where}: SMU driver table at VRAM offset {st.table_offset:#x} (+{st.table_size:#x}) is not a "
                        f"page-aligned table of at least {METRICS_SIZE:#x} bytes inside the {end:#x} bytes of VRAM below "
                        f"the discovery table")
    if st.table_mc != self.fb_base + st.table_offset:
      raise DeviceError(f"{where}: SMU driver table MC address {st.table_mc:#x} is not the framebuffer base "
                        f"{self.fb_base:#x} (MMMC_VM_FB_LOCATION_BASE) + offset {st.table_offset:#x}")
    if st.mp1 != self.mp1_version:
      raise DeviceError(f"{where}: names MP1 {'.'.join(map(str, st.mp1))}, discovery reports "
                        f"{'.'.join(map(str, self.mp1_version))}")
    if st.driver_if != S.SMU13_0_0_DRIVER_IF_VERSION:
      raise DeviceError(f"{where}: SMU driver interface {st.driver_if}, hcq decodes {S.SMU13_0_0_DRIVER_IF_VERSION}")

  def metrics(self, st: AMState, where: str):
    """A fresh SmuMetrics_t from the table the state names (checked first). The SMU counts its metrics updates
    (MetricsCounter): a table whose counter a transfer leaves unchanged, a few times over, is not where the SMU
    writes (a state file naming other VRAM, consistent as it may be), and is refused rather than shown."""
    self.check(st, where)
    window = self._map(self.vram_index, st.table_offset, (METRICS_SIZE + PAGE - 1) & ~(PAGE - 1))
    for attempt in range(TRANSFER_TRIES):
      with self.mailbox.exclusive():          # the holder transfers no other table over it before it is read
        before = window.read32(COUNTER_OFFSET)
        self.mailbox.send(S.PPSMC_MSG_TransferTableSmu2Dram, S.TABLE_SMU_METRICS)
        raw = window.read_bytes(0, METRICS_SIZE)
      m = S.struct_SmuMetricsExternal_t.from_buffer_copy(raw).SmuMetrics
      if m.MetricsCounter != before: return m
      self.os.sleep(TRANSFER_PAUSE_S)         # the SMU updates its metrics every few milliseconds
    raise DeviceError(f"{where}: the table at VRAM offset {st.table_offset:#x} did not change over {TRANSFER_TRIES} "
                      f"metrics transfers (MetricsCounter stays {m.MetricsCounter}): the SMU does not write there")

  def close(self) -> None:
    for v in self.views: v.close()
    self.views = []
    if self.pci is not None:
      self.pci.close()
      self.pci = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()


def summary(m) -> dict:
  """Named fields with units of a SmuMetrics_t (smu13_driver_if_v13_0_0.h: clocks in MHz, temperatures in degrees
  Celsius, power in W, activity in percent; CurrClock indexed by PPCLK_e, AvgTemperature by TEMP_e)."""
  return {"gfx_clock_mhz": m.CurrClock[S.PPCLK_GFXCLK], "gfx_clock_avg_mhz": m.AverageGfxclkFrequencyPostDs,
          "soc_clock_mhz": m.CurrClock[S.PPCLK_SOCCLK], "mem_clock_mhz": m.CurrClock[S.PPCLK_UCLK],
          "fclk_mhz": m.CurrClock[S.PPCLK_FCLK],
          "temperature_edge_c": m.AvgTemperature[S.TEMP_EDGE], "temperature_hotspot_c": m.AvgTemperature[S.TEMP_HOTSPOT],
          "temperature_mem_c": m.AvgTemperature[S.TEMP_MEM], "power_w": m.AverageSocketPower,
          "gfx_activity_percent": m.AverageGfxActivity, "mem_activity_percent": m.AverageUclkActivity,
          "fan_rpm": m.AvgFanRpm, "metrics_counter": m.MetricsCounter}


def read_metrics(os, addr: str, holders: list[int], owners: set[int]) -> tuple[AMState | None, dict | None]:
  """(the holder's published state, the SMU's metrics) of the GPU at addr, whose am_<bus>.lock the processes
  `holders` hold (procfs's word, smi/holders.py); (None, None) when no state is published (a holder from before
  hcq-smi could read AM's SMU, or one whose lock dir refused the file). The state must come from a holder: a file
  of a user among `owners` (the holders' users and root) naming a holder's pid."""
  from ...system.locks import state_name
  from . import state
  where = f"{os.config.lock_dir}/{state_name(state.KIND, addr)}"
  st = state.read(os, addr, owners)
  if st is None: return None, None
  if st.pid not in holders:
    raise DeviceError(f"{where}: written by pid {st.pid}, but the lock is held by pid {', '.join(map(str, holders))}: "
                      f"a stale or forged state file, not used")
  with SMUMonitor(os, addr) as mon: return st, summary(mon.metrics(st, where))
