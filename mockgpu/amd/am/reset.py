"""Mode-1 reset of the mock Navi 31: the whole GPU but the PCIe link and the memory's contents goes back to its
power-on state, as the SMU does on PPSMC_MSG_Mode1Reset (or the PSP on GFX_CTRL_CMD_ID_MODE1_RST).

At the request: every queue stops (its work dropped), every register returns to its power-on value (the block models
are built again: the PSP in its bootloader, the SMU without firmware, the RLC not loaded, the IH and VM hubs off), the
engines lose every mapping, and the function's configuration space is cleared (command register and BAR addresses,
the PCI Express device control and the Resizable BAR size back to power-on, as a reset of the function does: the
driver saves and restores them). VRAM keeps its contents. For RESET_S after the
request the function does not answer at all (configuration and register reads all ones, writes dropped); after that
its registers answer once memory decoding is on again (the driver restored the command register).

`fail` makes a reset that does not complete, for tests: "ignored" (the request does nothing), "gone" (the function
never answers again), "bootloader" (it answers, but the PSP's bootloader never reports ready: C2PMSG_35 bit 31 stays
clear).
"""
from __future__ import annotations

import time

from ....autogen import pci as pci_regs

RESET_S = 0.02


class Mode1Reset:
  def __init__(self, gpu):
    self.gpu = gpu
    self.count = 0
    self.requests: list[str] = []      # who asked, per reset
    self.fail: str | None = None
    self.until = 0.0
    self.decoding = True

  def start(self, by: str) -> None:
    g = self.gpu
    self.requests.append(by)
    if self.fail == "ignored": return
    self.count += 1
    g.cp.stop_all()
    g.regs.reset()
    g._build_blocks()
    g.cp.hook()
    g.gchub.on_invalidate = g.cp.remap
    g.cp.remap()                       # the hubs are off: the engines reach nothing
    if self.fail == "bootloader": g.regs.poke(g.psp.r[35], 0)
    fn = g.function
    with fn.lock:
      fn.config[pci_regs.PCI_COMMAND:pci_regs.PCI_COMMAND + 2] = bytes(2)
      for index in fn.bars: fn.clear_bar_address(index)
      g.power_on_config(fn)            # PCI Express device control and the Resizable BAR size too
    self.until, self.decoding = time.monotonic() + RESET_S, False
    g.regs.gone = self.gone
    fn.gone = lambda: self.fail == "gone" or time.monotonic() < self.until

  def gone(self) -> bool:
    """Whether the register BAR does not answer: during the reset, then until memory decoding is on again."""
    if self.fail == "gone" or time.monotonic() < self.until: return True
    if not self.decoding: self.decoding = bool(self.gpu.function.command & pci_regs.PCI_COMMAND_MEMORY)
    return not self.decoding
