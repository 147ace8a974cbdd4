"""The phases every AM IP block has (the shape of Linux amdgpu's IP blocks): sw_init allocates and reads firmware,
hw_init programs the hardware, fini gives it back. Each step is traced (AMDev.step) so that `hcq am boot --trace`
shows where a bring-up stops."""
from __future__ import annotations

# the blocks AMDev boots, in order (`hcq am boot --until` offers these)
BLOCKS = ("nbio", "gmc", "ih", "psp", "smu", "gfx")


class IPBlock:
  name = "?"

  def __init__(self, dev):
    self.dev = dev

  def step(self, what: str) -> None: self.dev.step(self.name, what)

  def sw_init(self) -> None: pass
  def hw_init(self) -> None: pass
  def fini(self) -> None: pass
