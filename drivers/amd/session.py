"""What AMDDevice needs from the layer below it: the contract a KFD, PCI (AM) or USB session implements.

KFDSession (kfd.py) goes through the amdgpu kernel driver's /dev/kfd. A PCI or USB session (pci.py, usb.py) would run its
own page tables, rings and interrupts on the same contract, so that AMDDevice, the queue programs' packets and the programs stay
the same."""
from __future__ import annotations

from typing import Callable, Protocol


class Mem(Protocol):
  va: int                      # device virtual address; equal to the CPU address where the CPU can see it
  size: int
  cpu: memoryview | None       # a byte view for the CPU, None for device-only memory


class HWQueue(Protocol):
  kind: str                    # "compute" (PM4), "aql" (AQL compute) or "sdma"
  queue_id: int
  ring: Mem                    # the ring buffer (CPU-visible)
  gart: Mem                    # CPU-visible page holding the engine's read pointer and the write pointer
  rptr_offset: int             # byte offsets of the two u64 pointers in gart
  wptr_offset: int


class AMDSession(Protocol):
  label: str                   # names the device in errors, e.g. "KFD+AMD:0 (gpu_id 4242)"
  arch: str                    # "gfx1100"
  props: dict[str, int]        # KFD-topology-style properties: simd_count, simd_per_cu, array_count, lds_size_in_kb, ...
  gc_ip: tuple[int, int, int]  # the GC IP version (its registers: pm4.gc_registers)
  sdma_ip: tuple[int, int, int]  # the SDMA IP version (its packet differences: sdma.sdma_version)
  event_id: int                # the interrupt context the queues' end-of-work packets carry
  mailbox_va: int              # where they write event_id before interrupting

  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    """kind "vram" (device memory), "gtt" (host memory the GPU reaches uncached; CPU-visible) or "userptr"."""
  def free(self, mem: Mem) -> None: ...
  def create_queue(self, kind: str, ring_size: int) -> HWQueue: ...
  def doorbell(self, q: HWQueue) -> Callable[[int], None]:
    """A function that rings q's doorbell with the new write pointer."""
  def wait_events(self, timeout_ms: int) -> bool:
    """Block until the queue event fires or timeout_ms pass; raise hcq.GPUFault for a device fault. True when the
    event fired."""
  def close(self) -> None: ...
