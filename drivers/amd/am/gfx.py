"""GFX (GC 11.0.0): after PSP's AUTOLOAD_RLC the RLC boots the GFX firmware (IMU, RLC, CP/MEC, MES) itself; the driver
waits for RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE (bounded, named).

Compute queues come after the boot, from the runtime device (AMIface.create_queue: an MQD in memory, drivers/amd/am/
mqd.py, and the HQD loaded from it through GRBM_GFX_CNTL). Not yet done: mapping queues through the KIQ or MES,
SH_MEM apertures.
"""
from __future__ import annotations

from .block import IPBlock


class GFX(IPBlock):
  name = "gfx"

  def hw_init(self) -> None:
    r = self.dev.gc_regs
    who = "the host's " if self.dev.vf else ""    # an SR-IOV VF loads nothing: the host's PSP did (virt.py)
    self.step(f"wait for {who}RLC autoload (RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE)")
    done = r.mask("RLC_RLCS_BOOTLOAD_STATUS", "BOOTLOAD_COMPLETE")
    r.wait("RLC_RLCS_BOOTLOAD_STATUS", done, done)
    self.step(f"{who}RLC autoload complete: GFX firmware running")
