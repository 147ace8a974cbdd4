"""The AQL compute queue (gfx942, MI300-class parts): 64-byte packets (HSA runtime spec 1.2, hsa.h
hsa_kernel_dispatch_packet_t; ROCR amd_hsa_queue.h, amd_aql_pm4_ib_packet_t) on a ring counted in packets.

The packets stay the PM4 ones (packets.py): waits, stores, timestamps and barriers are PM4 packets, and a kernel call
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

Pointers (the HSA runtime's amd_queue_t, ROCR-Runtime amd_hsa_queue.h): the write pointer (amd_queue_t.write_dispatch_id) counts
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
    self.write_cmd = self._write_cmd   # (and ring.write_cmd, which would put PM4 words on the AQL ring)

  def _write_cmd(self, cmd, values) -> None: self._write(cmd.fill(values))

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
      run = words[start:stop]
      self.ib[base:base + stop - start] = run if not isinstance(run, list) else array("I", run)
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


# ---- the queue's amd_queue_t (ROCR amd_hsa_queue.h), which the CP reads for an AQL queue: hsa_queue_t (type,
# features, base_address, size in packets), max_cu_id / max_wave_id, the properties, and the private segment (scratch)
# of dispatches: compute_tmpring_size, the scratch buffer resource, its base and size per XCC and the bytes per lane of
# a 64-lane wave. Byte offsets; write_dispatch_id (56) and read_dispatch_id (128) are the ring's pointers (kfd.py).
Q_TYPE, Q_FEATURES, Q_BASE_ADDRESS, Q_SIZE = 0, 4, 8, 24
Q_MAX_CU_ID, Q_MAX_WAVE_ID = 72, 76
Q_TMPRING, Q_SCRATCH_RSRC, Q_SCRATCH_BASE, Q_SCRATCH_BYTES = 140, 144, 160, 168
Q_SCRATCH_WAVE64_LANE, Q_PROPERTIES = 176, 180
HSA_QUEUE_TYPE_MULTIPLE, HSA_QUEUE_FEATURE_KERNEL_DISPATCH = 0, 1
PROPERTIES_IS_PTR64, PROPERTIES_ENABLE_PROFILING = 1 << 1, 1 << 3    # amd_queue_properties32_t bits


def _put(view: memoryview, offset: int, fmt: str, *values) -> None:
  import struct
  struct.pack_into(fmt, view, offset, *values)


def describe_queue(amd_queue: memoryview, ring_va: int, ring_bytes: int, props: dict) -> None:
  """Fill the amd_queue_t fields an AQL queue's CP reads that do not change (the ring, the CU and wave ids)."""
  cus = props.get("simd_count", 2) // max(props.get("simd_per_cu", 2), 1)
  waves = props.get("max_waves_per_simd", 16) * props.get("simd_per_cu", 2)
  _put(amd_queue, Q_TYPE, "<II", HSA_QUEUE_TYPE_MULTIPLE, HSA_QUEUE_FEATURE_KERNEL_DISPATCH)
  _put(amd_queue, Q_BASE_ADDRESS, "<Q", ring_va)
  _put(amd_queue, Q_SIZE, "<I", ring_bytes // PACKET_BYTES)
  _put(amd_queue, Q_MAX_CU_ID, "<II", max(cus - 1, 0), max(waves - 1, 0))
  _put(amd_queue, Q_PROPERTIES, "<I", PROPERTIES_IS_PTR64 | PROPERTIES_ENABLE_PROFILING)


def scratch_resource(regs, base: int, size: int) -> list[int] | None:
  """The scratch buffer resource (4 dwords) of a gfx9 AQL queue, from gc 9.4.3's SQ_BUF_RSRC_WORD1/3 fields: base,
  swizzled; 32-bit unsigned dwords, element size 4 bytes, index stride 64, the lane id added to the index (ADD_TID), as
  ROCR fills it. None for other GC versions, whose headers have no SQ_BUF_RSRC fields (their AQL scratch is left
  unset: hcq runs them on PM4 queues)."""
  if regs.ip[0] != 9: return None
  from ...autogen.amd import gc_9_4_3 as gc
  w1 = ((base >> 32) & 0xFFFF) << gc.SQ_BUF_RSRC_WORD1__BASE_ADDRESS_HI__SHIFT | \
    1 << gc.SQ_BUF_RSRC_WORD1__SWIZZLE_ENABLE__SHIFT
  # SQ_SEL_X..W, BUF_NUM_FORMAT_UINT, BUF_DATA_FORMAT_32, index stride 64, the lane id added, a buffer (TYPE 0)
  fields = {"DST_SEL_X": 4, "DST_SEL_Y": 5, "DST_SEL_Z": 6, "DST_SEL_W": 7, "NUM_FORMAT": 4, "DATA_FORMAT": 4,
            "INDEX_STRIDE": 3, "ADD_TID_ENABLE": 1, "TYPE": 0}
  w3 = 0
  for name, value in fields.items():
    w3 |= (value << getattr(gc, f"SQ_BUF_RSRC_WORD3__{name}__SHIFT")) & getattr(gc, f"SQ_BUF_RSRC_WORD3__{name}_MASK")
  # ROCR's gfx9 word 3 also sets ELEMENT_SIZE = 1 (4 bytes) in bits [20:19], the bits gc 9.4.3's header names
  # USER_VM_ENABLE (19) and USER_VM_MODE (20)
  w3 |= 1 << gc.SQ_BUF_RSRC_WORD3__USER_VM_ENABLE__SHIFT
  return [base & 0xFFFFFFFF, w1, size & 0xFFFFFFFF, w3]


def describe_scratch(amd_queue: memoryview, regs, scratch, xccs: int) -> None:
  """Point the queue's private segment at scratch (device.Scratch: va, size, bytes per lane, COMPUTE_TMPRING_SIZE)."""
  per_xcc = scratch.size // max(xccs, 1)
  _put(amd_queue, Q_TMPRING, "<I", scratch.tmpring)
  rsrc = scratch_resource(regs, scratch.va, per_xcc)
  if rsrc is not None: _put(amd_queue, Q_SCRATCH_RSRC, "<4I", *rsrc)
  _put(amd_queue, Q_SCRATCH_BASE, "<QQ", scratch.va, per_xcc)
  _put(amd_queue, Q_SCRATCH_WAVE64_LANE, "<I", scratch.per_thread)
