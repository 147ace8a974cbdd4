"""A GPU queue drives a NIC: one call copies a local GPU buffer into a remote GPU buffer, and the remote GPU's queue
waits for it to arrive before its next kernel. The CPU only builds and submits the queue programs.

Sender (`rdma_write`), one submission on the GPU's compute engine, after the kernels already submitted there:
  barrier                             the producing kernels' writes reach memory (caches written back)
  post RDMA WRITE payload -> remote   the WQE stores, then the doorbell store into the NIC's BAR (memops.py)
  flag := value (local slot)          then post RDMA WRITE flag -> remote flag: the NIC executes a QP's work requests
                                      in order and an RC responder places the messages in order (IBTA vol. 1 ch. 9.5
                                      and 10.8.3), so the flag lands after the payload
  wait for both completions           the CQ entries' toggle bit, each handed back with the CQ doorbell (their
                                      status: the host's check when the timeline value is reached, `wait`)
  timeline store                      (the runtime's)
Receiver (`wait_arrival`): one submission that waits until the flag holds the value (WAIT_REG_MEM >=); the kernels
submitted after it on that engine run after the data arrived.

The NIC side is a `poster` (drivers/bnxt/gpuq.py GPUPoster): room(completions) refuses a submission the CQ cannot
hold unchecked, post_write(remote_va, rkey, local_va, lkey, size) and wait_completion() give queue elements, submitted(value) / retire(value) track which submission waits for which
completions, diagnose(timeout, value) turns a GPU wait that timed out into the NIC's own error.
The GPU side is an HCQDevice with map_host(va, size, what), map_peer_bar(pci, bar, size, offset, what) and
dma_pages(buf) (AMD: drivers/amd/device.py); a NIC whose queues must live in the GPU's memory takes QueueMemory(gpu). Neither driver imports the other: this module joins them.
"""
from __future__ import annotations

import dataclasses
import struct

from ...compiler import queue as Q
from ...errors import DeviceError, Timeout
from . import memops
from .runtime import Submission

FLAG_BYTES = 8


@dataclasses.dataclass(frozen=True)
class Remote:
  """Memory of the remote side as its NIC registered it: the address the remote QP's MR covers and its key."""
  va: int
  rkey: int
  size: int


@dataclasses.dataclass(frozen=True)
class Local:
  """A local GPU buffer registered with the local NIC: its GPU address (== the MR's va) and lkey."""
  va: int
  lkey: int
  size: int


class QueueMemory:
  """A NIC's queue memory (its SQ, its CQ) taken from a GPU's host-visible memory, so that the GPU's engines reach
  it where the GPU driver mapped it (an AM GPU reaches host memory only at its own VAs): call it as
  queue_memory(size, what) (the NIC driver's allocator protocol: BNXTQP(queue_memory=...)). Each piece has .va,
  .size, .paddrs (gpu.dma_pages), .device (the GPU), .write, .read; freed with the GPU."""

  def __init__(self, gpu): self.gpu = gpu

  def __call__(self, size: int, what: str) -> "_Piece": return _Piece(self.gpu, size, what)


class _Piece:
  def __init__(self, gpu, size: int, what: str):
    self.device, self.what = gpu, what
    self.size = (max(size, 1) + 0xFFF) & ~0xFFF
    self.buf = gpu.alloc(self.size, host=True)
    self.va, self.view = self.buf.va, self.buf.cpu_view
    self.view[:] = bytes(self.size)
    self.paddrs = gpu.dma_pages(self.buf)

  def _span(self, offset: int, size: int) -> slice:
    if offset < 0 or size < 0 or offset + size > self.size:
      raise DeviceError(f"{self.device.name} {self.what}: {size} bytes at offset {offset} are outside its {self.size} bytes")
    return slice(offset, offset + size)

  def write(self, offset: int, data: bytes) -> None: self.view[self._span(offset, len(data))] = data

  def read(self, offset: int, size: int) -> bytes: return bytes(self.view[self._span(offset, size)])


def register(nic, gpu, buf) -> tuple[Local, Remote]:
  """buf (a Buffer of gpu) registered with nic from its pages (gpu.dma_pages: the NIC's page-table format, as for
  host memory); the same key serves as lkey and rkey: (the Local for posting from it, the Remote a peer writes to)."""
  key = nic.register_pages(gpu.dma_pages(buf), buf.va, buf.size, what=f"MR of {gpu.name} {buf!r}")
  return Local(buf.va, key, buf.size), Remote(buf.va, key, buf.size)


def _submit(gpu, elements: list, what: str) -> int:
  cb = gpu.compute.build(Q.queue(gpu.compute.name, *elements))
  with Submission(gpu, gpu.compute, what) as sub: sub.add(cb.fill({}))
  return sub.value


def rdma_write(gpu, poster, src: Local, dst: Remote, nbytes: int, flag: tuple[Local, Remote, int] | None = None,
               offset: int = 0, dst_offset: int = 0) -> int:
  """Copy nbytes of src (from offset) into the remote dst (at dst_offset), ordered after the work already submitted
  to gpu's compute engine; with flag = (local flag slot, remote flag, value), the value is written to the remote flag
  after the payload. Returns the timeline value that marks the copy complete (both completions seen by the GPU)."""
  if nbytes <= 0 or offset < 0 or dst_offset < 0 or offset + nbytes > src.size or dst_offset + nbytes > dst.size:
    raise DeviceError(f"{gpu.name}: RDMA copy of {nbytes} bytes from {src.va:#x}+{offset:#x} (of {src.size:#x}) to "
                      f"remote {dst.va:#x}+{dst_offset:#x} (of {dst.size:#x}) is outside a buffer")
  poster.room(1 if flag is None else 2)      # refused before the NIC's queues are touched
  elements = [Q.barrier(), *poster.post_write(dst.va + dst_offset, dst.rkey, src.va + offset, src.lkey, nbytes)]
  waits = poster.wait_completion()
  if flag is not None:
    slot, remote, value = flag
    if slot.size < FLAG_BYTES or remote.size < FLAG_BYTES:
      raise DeviceError(f"{gpu.name}: an arrival flag needs {FLAG_BYTES} bytes on both sides")
    elements += [memops.write(slot.va, struct.pack("<Q", value)),
                 *poster.post_write(remote.va, remote.rkey, slot.va, slot.lkey, FLAG_BYTES)]
    waits += poster.wait_completion()
  value = _submit(gpu, elements + waits, f"an RDMA WRITE of {nbytes} bytes to remote {dst.va + dst_offset:#x}")
  poster.submitted(value)
  return value


def wait_arrival(gpu, flag_va: int, value: int) -> int:
  """Make gpu's compute engine wait until the flag at flag_va (written by the remote's RDMA WRITE) reaches value;
  the work submitted after this runs after the data arrived. Returns the submission's timeline value."""
  return _submit(gpu, [memops.wait_ge(flag_va, value), Q.barrier()], f"the arrival flag at {flag_va:#x} >= {value}")


def wait(gpu, value: int, poster=None) -> None:
  """Wait on the host for a timeline value (bounded by the device's timeout); a timeout of a submission that waits
  on the NIC becomes the NIC's error (poster.diagnose: an error completion, or the QP and PSN never answered). Once
  the value is reached, the completions the GPU waited for are checked (poster.retire): one with an error status
  raises its CompletionError."""
  try: gpu.wait_value(value)
  except Timeout as e:
    if poster is None: raise
    raise poster.diagnose(e, value) from e
  if poster is not None: poster.retire(value)
