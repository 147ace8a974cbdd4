"""Mode-1 reset of an AM GPU (SMU 13.0.0 / PSP 13.0): the whole GPU but the PCIe link goes back to its power-on
state (the PSP in its bootloader, no firmware running, every engine stopped); VRAM keeps its contents.

The sequence is Linux amdgpu's (amdgpu_device_mode1_reset with smu_v13_0_0_mode1_reset): the function's
configuration space saved (below), bus mastering off, the SMU asked through its mailbox
(PPSMC_MSG_Mode1Reset, which it never answers: it resets with the rest) - or, when the SMU does not answer, the PSP's
sOS (GFX_CTRL_CMD_ID_MODE1_RST in C2PMSG_64) - then the configuration space restored and the function waited for
until RCC_CONFIG_MEMSIZE reads something else than all ones. hcq waits for the reset to begin first (the register
BAR reads all ones: Linux sleeps 500 ms instead) and, after the function is back, for the PSP bootloader to be ready
(C2PMSG_35 bit 31) with no sOS (C2PMSG_81 = 0), as the next boot needs it. Every wait is bounded by config.timeout_s
and its Timeout names the register (or config dword), the value waited for and the last one read.

Saved and restored: the standard header (BARs, command), the PCI Express capability's device and link controls and
the Resizable BAR sizes (save_config), which a reset returns to power-on and the kernel's pci_restore_state puts
back too.
"""
from __future__ import annotations

import dataclasses

from ....autogen import pci as pr
from ....autogen.amd import psp_gfx_if as G
from ....autogen.amd import smu_v13_0_0 as S
from ....errors import DeviceError, Timeout
from ...system.pci import capabilities, ext_capabilities
from .reuse import smu_answers

CONFIG_DWORDS = 16
ALL_ONES = 0xFFFFFFFF


def _wait(dev, what: str, read, done, expected: str) -> int:
  """Poll read() until done(value); bounded by config.timeout_s; the Timeout names what, expected and the last value."""
  os, timeout = dev.os, dev.config.timeout_s
  deadline = os.monotonic() + timeout
  while True:
    v = read()
    if done(v): return v
    if os.monotonic() > deadline: raise Timeout(f"{dev.label}: {what}", expected=expected, last_seen=f"{v:#x}", timeout_s=timeout)
    os.sleep(0.0005)


@dataclasses.dataclass
class SavedConfig:
  header: list[int]                          # the standard header's 16 dwords
  controls: list[tuple[int, int, int]]       # (offset, width, value) of the capabilities' control registers

  def describe(self) -> str:
    return "standard header" + (", PCI Express control, Resizable BAR sizes" if self.controls else "")


def save_config(pci) -> SavedConfig:
  """The standard header, and what a reset returns to power-on beyond it that the kernel's pci_restore_state puts
  back for an endpoint: the PCI Express capability's device and link controls (payload and read request sizes,
  ASPM), and each Resizable BAR's size (a BAR back at its power-on size no longer decodes the whole VRAM)."""
  header = [pci.config_read(4 * i, 4) for i in range(CONFIG_DWORDS)]
  regs = []
  for cap, off in capabilities(pci):
    if cap == pr.PCI_CAP_ID_EXP:
      regs += [(off + r, 2) for r in (pr.PCI_EXP_DEVCTL, pr.PCI_EXP_LNKCTL, pr.PCI_EXP_DEVCTL2, pr.PCI_EXP_LNKCTL2)]
  for cap, off in ext_capabilities(pci):
    if cap == pr.PCI_EXT_CAP_ID_REBAR:
      n = (pci.config_read(off + pr.PCI_REBAR_CTRL, 4) & pr.PCI_REBAR_CTRL_NBAR_MASK) >> pr.PCI_REBAR_CTRL_NBAR_SHIFT
      regs += [(off + pr.PCI_REBAR_CTRL + 8 * i, 4) for i in range(min(n, 6))]
  return SavedConfig(header, [(off, width, pci.config_read(off, width)) for off, width in regs])


def restore_config(pci, saved: SavedConfig) -> None:
  """As the kernel restores it: the capabilities' controls first (a BAR's size before its address), then the header
  from the last dword down (the command register, dword 1, last: memory decoding and bus mastering come back once
  the BARs hold their addresses), each register only where it differs; the ids (dword 0) are read-only."""
  for off, width, value in saved.controls:
    if pci.config_read(off, width) != value: pci.config_write(off, value, width)
  for i in range(CONFIG_DWORDS - 1, 0, -1):
    if pci.config_read(4 * i, 4) != saved.header[i]: pci.config_write(4 * i, saved.header[i], 4)


BOOTLOADER_READY = 0x80000000      # MP0_SMN_C2PMSG_35 bit 31: the PSP bootloader waits for a component (psp.py)


def _request(dev) -> str | None:
  """Ask for the reset; returns through whom, or None when there is nothing to reset: neither the SMU nor the sOS
  runs and the PSP bootloader waits for its first component (C2PMSG_35 bit 31, C2PMSG_81 = 0), which is the state a
  mode-1 reset ends in (and a GPU's state from power-on until a driver loads its firmware)."""
  why_not = smu_answers(dev)
  if why_not is None:
    dev.smu_mailbox.post(S.PPSMC_MSG_Mode1Reset)
    return "the SMU (PPSMC_MSG_Mode1Reset)"
  r = dev.mp0_regs
  if r.read("MP0_SMN_C2PMSG_81"):
    # psp_v13_0_mode1_reset: the sOS must be ready for the command (C2PMSG_64 bit 31) before it is written
    r.wait("MP0_SMN_C2PMSG_64", 0x80000000, 0x80000000)
    r.write("MP0_SMN_C2PMSG_64", G.GFX_CTRL_CMD_ID_MODE1_RST)
    return f"the PSP (GFX_CTRL_CMD_ID_MODE1_RST; {why_not})"
  if r.read("MP0_SMN_C2PMSG_35") & BOOTLOADER_READY: return None
  raise DeviceError(f"{dev.label}: cannot reset the GPU: {why_not}, the PSP's sOS does not run (MP0_SMN_C2PMSG_81 = 0) "
                    f"and its bootloader is not ready (MP0_SMN_C2PMSG_35 = {r.read('MP0_SMN_C2PMSG_35'):#x}, bit 31 clear)")


def mode1_reset(dev, why: str) -> None:
  """Reset the GPU dev drives (its registers known: after discovery) and wait until its PSP bootloader is ready."""
  with dev.lock: _mode1_reset(dev, why)       # no other thread of this process reaches the GPU meanwhile


def _mode1_reset(dev, why: str) -> None:
  pci, acc = dev.pci, dev.access
  t0 = dev.os.monotonic()
  dev.step("reset", f"mode-1 reset: {why}")
  saved = save_config(pci.pci)
  pci.disable_bus_master()
  whom = _request(dev)
  if whom is None:
    pci.enable_bus_master()
    dev.step("reset", "nothing to reset: no firmware runs (the SMU does not answer, no sOS) and the PSP bootloader is "
                      "ready (MP0_SMN_C2PMSG_35 bit 31): the GPU is as a mode-1 reset leaves it")
    return
  dev.step("reset", f"asked {whom}")
  memsize = dev.nbio_regs.addr("RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE")
  _wait(dev, "NBIO RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE (the function leaving the bus for the reset)", lambda: acc.read(memsize),
        lambda v: v == ALL_ONES, f"{ALL_ONES:#x}")
  _wait(dev, "PCI config dword 0 (vendor and device id: the function back from the reset)",
        lambda: pci.pci.config_read(0, 4), lambda v: v != ALL_ONES, f"not {ALL_ONES:#x}")
  restore_config(pci.pci, saved)
  _wait(dev, "NBIO RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE (the registers answering again)", lambda: acc.read(memsize),
        lambda v: v != ALL_ONES, f"not {ALL_ONES:#x}")
  mp0 = dev.mp0_regs
  mp0.wait("MP0_SMN_C2PMSG_35", 0x80000000, 0x80000000)       # the bootloader is ready for a component
  mp0.wait("MP0_SMN_C2PMSG_81", ALL_ONES, 0)                  # and no sOS runs
  pci.enable_bus_master()
  dev.step("reset", f"GPU back in {(dev.os.monotonic() - t0) * 1000:.1f} ms: configuration space restored "
                    f"({saved.describe()}), PSP bootloader ready, no sOS")
