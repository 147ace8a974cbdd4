"""Stopping the hardware queues AM programs (one place for the driver's close and for a reusing boot that finds the
queues a previous process left active): each wait is bounded and names its register (regs.IPRegs.wait)."""
from __future__ import annotations


def stop_compute_hqd(gc_regs, me: int = 1, pipe: int = 0, queue: int = 0) -> None:
  """Dequeue the compute HQD (the CP finishes the dispatch in flight and saves the queue into its MQD; clearing
  CP_HQD_ACTIVE by hand would pull it from under the CP) and wait until CP_HQD_ACTIVE reads 0."""
  r = gc_regs
  r.write("GRBM_GFX_CNTL", MEID=me, PIPEID=pipe, QUEUEID=queue)
  try:
    r.write("CP_HQD_DEQUEUE_REQUEST", DEQUEUE_REQ=1)
    r.wait("CP_HQD_ACTIVE", r.mask("CP_HQD_ACTIVE", "ACTIVE"), 0)
  finally: r.write("GRBM_GFX_CNTL", 0)


def stop_sdma_ring(sdma_regs) -> None:
  """SDMA0 queue 0 stops fetching (RB_CNTL 0) and the engine is waited idle (SDMA0_STATUS_REG.IDLE)."""
  r = sdma_regs
  r.write("SDMA0_QUEUE0_RB_CNTL", 0)
  idle = r.mask("SDMA0_STATUS_REG", "IDLE")
  r.wait("SDMA0_STATUS_REG", idle, idle)
