"""The AQL compute queue (gfx942, MI300-class parts): 64-byte packets (HSA runtime spec 1.2, hsa.h
hsa_kernel_dispatch_packet_t; ROCR amd_hsa_queue.h, amd_aql_pm4_ib_packet_t) on a ring counted in packets.

The lowering stays the PM4 one (lower.py): waits, stores, timestamps and barriers are PM4 packets, and a kernel call
lowers to a KERNEL_DISPATCH packet wrapped in a PM4 NOP marker (dispatch_marker). AQLEngine.write splits the words it
is given at those markers: each run of PM4 between them goes into an indirect buffer that an AMD vendor-specific
packet (format PM4_IB: dwords 1-4 an INDIRECT_BUFFER packet, dword 5 the dwords left, 10) runs; each marker's packet
goes on the ring as it is. As the reference does, every packet has the barrier bit (it starts after the packets
before it end) and system-scope acquire and release fences, and no completion signal (the PM4 after it stores the
timeline). Command buffers, their patches and bound launches stay what they are for a PM4 queue.

Indirect buffers: ring slot s owns IB slot s (IB_SLOT_DWORDS dwords of ib_area_size()): a slot is written only once
the ring has room for the packet that will run it, i.e. once the packet that used it before has been read, so an IB
is never rewritten while the CP may still run it. A PM4 run longer than a slot takes several vendor packets, split at
PM4 packet boundaries.

Pointers (shared/reference/amd_kfd_pm4_sdma_am.md 1.4): the write pointer (amd_queue_t.write_dispatch_id) counts
packets; the doorbell carries the index of the last packet written (write pointer - 1)."""
from __future__ import annotations

from array import array

from ...errors import DeviceError
from ..hcq.cmdbuf import hi, lo
from ..hcq.engine import RingEngine
from . import pm4

ENGINE = "aql"                      # devices.RINGS key of the AQL ring (the engine itself is named "compute")
PACKET_BYTES, PACKET_DWORDS = 64, 16
# hsa_packet_type_t and the header's fields (hsa.h): type [7:0], barrier bit 8, acquire scope [10:9], release scope
# [12:11]; HSA_FENCE_SCOPE_SYSTEM = 2
TYPE_VENDOR, TYPE_INVALID, TYPE_KERNEL_DISPATCH = 0, 1, 2
HEADER_BARRIER, ACQUIRE_SHIFT, RELEASE_SHIFT, SCOPE_SYSTEM = 1 << 8, 9, 11, 2
FENCES = HEADER_BARRIER | SCOPE_SYSTEM << ACQUIRE_SHIFT | SCOPE_SYSTEM << RELEASE_SHIFT
VENDOR_FORMAT_PM4_IB = 1            # amd_aql_pm4_ib_packet_t.amd_format (the header's upper 16 bits)
PM4_IB_DW_REMAINING = 10            # amd_aql_pm4_ib_packet_t.dw_cnt_remain
DISPATCH_SETUP_3D = 3               # hsa_kernel_dispatch_packet_t.setup: dimensions [1:0]
IB_SLOT_DWORDS = 64                 # PM4 dwords a vendor packet runs (a launch's wait + barrier, or its stores)
# the marker: a PM4 NOP whose 17 body dwords are MARK and the 16 dwords of a packet for the AQL ring. The lowering
# never makes another NOP of this size starting with MARK ("AQL1").
MARK = 0x314C5141
MARK_HEADER = pm4.header(pm4.NOP, 1 + PACKET_DWORDS)


def kernel_dispatch(block, grid_threads, private: int, group: int, kernel_object: int, kernarg) -> list:
  """The 16 dwords of a KERNEL_DISPATCH packet (hsa_kernel_dispatch_packet_t); kernarg may be symbolic (Sym)."""
  header = TYPE_KERNEL_DISPATCH | FENCES
  return [header | DISPATCH_SETUP_3D << 16, block[0] | block[1] << 16, block[2], *grid_threads, private, group,
          lo(kernel_object), hi(kernel_object), lo(kernarg), hi(kernarg), 0, 0, 0, 0]


def dispatch_marker(packet: list) -> list:
  """A packet for the AQL ring, carried through the PM4 lowering and its command buffers (see the module docstring)."""
  if len(packet) != PACKET_DWORDS: raise ValueError(f"an AQL packet has {PACKET_DWORDS} dwords, not {len(packet)}")
  return [MARK_HEADER, MARK, *packet]


def pm4_ib_packet(ib_va: int, ib_dwords: int) -> list[int]:
  """An AMD vendor-specific packet that runs ib_dwords of PM4 at ib_va (amd_aql_pm4_ib_packet_t)."""
  return [TYPE_VENDOR | FENCES | VENDOR_FORMAT_PM4_IB << 16, *pm4.indirect_buffer(ib_va, ib_dwords),
          PM4_IB_DW_REMAINING] + [0] * 10


def doorbell(ring_doorbell):
  """An AQL doorbell carries the last packet's index: the write pointer (packets written) - 1."""
  return lambda value: ring_doorbell(value - 1)


def ib_area_size(ring) -> int:
  """Bytes of indirect-buffer space for a ring: one IB slot per packet slot."""
  return ring.size_dw // PACKET_DWORDS * IB_SLOT_DWORDS * 4


class AQLEngine(RingEngine):
  """The compute engine on an AQL queue: PM4 runs into IB slots + vendor packets, markers' packets as they are."""

  def __init__(self, name: str, matcher, ring, ib_va: int, ib_cpu: memoryview, ctx=None, links: dict | None = None):
    if ring.ptr_unit != PACKET_BYTES: raise ValueError(f"{ring.name}: an AQL ring counts {PACKET_BYTES}-byte packets")
    self.ib_va, self.ib = ib_va, ib_cpu.cast("I")
    self.slots = ring.size_dw // PACKET_DWORDS
    if len(self.ib) < self.slots * IB_SLOT_DWORDS: raise ValueError(f"{ring.name}: the IB area is too small")
    super().__init__(name, matcher, ring, ctx, links)
    self.write = self._write           # RingEngine binds ring.write; this engine translates first

  def _write(self, words) -> None:
    """Write lowered words (PM4 with dispatch markers) as AQL packets; does not publish them."""
    n, i, start = len(words), 0, 0
    while i < n:
      header = words[i]
      if header == MARK_HEADER and i + 1 < n and words[i + 1] == MARK:
        if start < i: self._pm4(words, start, i)
        if i + 2 + PACKET_DWORDS > n: raise DeviceError(f"{self.ring.name}: an AQL packet marker is cut short")
        self._packet(words[i + 2:i + 2 + PACKET_DWORDS])
        i = start = i + 2 + PACKET_DWORDS
        continue
      if header >> 30 != pm4.PACKET_TYPE3:
        raise DeviceError(f"{self.ring.name}: dword {i} ({header:#010x}) of the words to write is not a PM4 header")
      i += 2 + ((header >> 16) & 0x3FFF)
    if i != n: raise DeviceError(f"{self.ring.name}: the last PM4 packet runs past the words to write")
    if start < n: self._pm4(words, start, n)

  def _pm4(self, words, start: int, end: int) -> None:
    """PM4 packets words[start:end] into IB slots, each run by a vendor packet (split at packet boundaries)."""
    while start < end:
      stop = start
      while stop < end:
        size = 2 + ((words[stop] >> 16) & 0x3FFF)
        if stop + size - start > IB_SLOT_DWORDS: break
        stop += size
      if stop == start:
        raise DeviceError(f"{self.ring.name}: a PM4 packet of {2 + ((words[start] >> 16) & 0x3FFF)} dwords exceeds "
                          f"an AQL indirect-buffer slot ({IB_SLOT_DWORDS} dwords)")
      ring = self.ring
      ring.make_room(PACKET_DWORDS)      # the slot's IB is free once the ring has room for its packet
      slot = (ring.put_dw // PACKET_DWORDS) % self.slots
      base = slot * IB_SLOT_DWORDS
      self.ib[base:base + stop - start] = words[start:stop] if not isinstance(words, list) else array("I", words[start:stop])
      self._packet(pm4_ib_packet(self.ib_va + 4 * base, stop - start))
      start = stop

  def _packet(self, packet) -> None:
    """One packet on the ring, its header stored last (until then the slot reads as an INVALID packet)."""
    ring = self.ring
    header = packet[0]
    body = array("I", packet)
    body[0] = (header & ~0xFF) | TYPE_INVALID
    pos = ring.put_dw % ring.size_dw
    ring.write(body)
    ring.ring[pos] = header
