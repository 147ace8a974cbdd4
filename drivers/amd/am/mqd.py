"""The gfx11 compute MQD (memory queue descriptor): struct v11_compute_mqd of Linux's
drivers/gpu/drm/amd/include/v11_structs.h (hcq.autogen.amd.v11_structs), the memory image of one compute HQD.

The CP keeps a queue's state in its MQD: CP_MQD_BASE_ADDR(_HI) points at it, the CP reads it when the queue is
mapped and writes the queue's state (read and write pointers, ...) back into it when it is dequeued, so that the queue
can be mapped again later (by the driver, by a scheduler firmware, by MES). The MQD's HQD part, from
cp_mqd_base_addr_lo to cp_hqd_pq_wptr_hi, lists the HQD registers in their register order from CP_MQD_BASE_ADDR on
(reserved slots where the block has no register): `HQD_REGISTERS` pairs each field with its register, read from the
generated struct and register module (checked at import: a field whose register is another one is an error).

AM fills the MQD in memory (`compute_mqd`: the fields a gfx11 compute queue needs, as Linux's gfx_v11_0 compute MQD
init sets them), then loads the HQD from it (`load_hqd`: each register of the HQD part from its field, with the queue
selected through GRBM_GFX_CNTL, CP_HQD_ACTIVE last): the "HQD through MQD" path, which a KIQ/MES map_queues would
replace by handing the CP the MQD's address.
"""
from __future__ import annotations

import ctypes

from ....autogen.amd import gc_11_0_0 as GC
from ....autogen.amd import v11_structs as V
from ....errors import DeviceError

MQD = V.struct_v11_compute_mqd
MQD_SIZE = ctypes.sizeof(MQD)
MQD_HEADER = 0xC0310800             # the header value Linux's gfx_v11_0 compute MQD init writes
FIRST, LAST = "cp_mqd_base_addr_lo", "cp_hqd_pq_wptr_hi"
# written by load_hqd apart from the others: CP_HQD_ACTIVE starts the queue, CP_HQD_DEQUEUE_REQUEST stops it
TRIGGERS = ("CP_HQD_ACTIVE", "CP_HQD_DEQUEUE_REQUEST")


def _hqd_registers() -> list[tuple[str, str]]:
  """(MQD field, gc 11.0.0 register) for the HQD part of the MQD, in register order."""
  names = [f[0] for f in MQD._fields_]
  base = GC.REGS["CP_MQD_BASE_ADDR"]
  by_offset = {(r.offset, r.base_idx): n for n, r in GC.REGS.items()}
  out = []
  for k, field in enumerate(names[names.index(FIRST):names.index(LAST) + 1]):
    reg = by_offset.get((base.offset + k, base.base_idx))
    if field.startswith("reserved_"): continue
    # the named fields must be the registers at their place (cp_hqd_hq_control0 is CP_HQD_HQ_SCHEDULER1's slot)
    if reg is None: raise DeviceError(f"v11_compute_mqd.{field}: no gc 11.0.0 register at CP_MQD_BASE_ADDR + {k}")
    out.append((field, reg))
  return out


HQD_REGISTERS = _hqd_registers()


# the reset values gfx_v11_0_compute_mqd_init starts each field from (gc_11_0_0_default.h reg*_DEFAULT): they carry
# bits the driver does not name, PRELOAD_REQ of CP_HQD_PERSISTENT_STATE among them
DEFAULTS = {"CP_HQD_PERSISTENT_STATE": 0x0BE05501, "CP_HQD_PQ_CONTROL": 0x00308509, "CP_HQD_IB_CONTROL": 0x00300000,
            "CP_MQD_CONTROL": 0x00000100, "CP_HQD_EOP_CONTROL": 0x00000006, "CP_HQD_PQ_DOORBELL_CONTROL": 0}


def _f(reg: str, **fields) -> int:
  """The register's reset value (DEFAULTS) with these fields set (REG_SET_FIELD on the default)."""
  r, v = GC.REGS[reg], DEFAULTS.get(reg, 0)
  for name, value in fields.items(): v = (v & ~r.fields[name].mask) | r.fields[name].encode(value)
  return v


def compute_mqd(mqd_va: int, ring_va: int, ring_bytes: int, rptr_va: int, wptr_va: int, eop_va: int, eop_bytes: int,
                doorbell_dw: int, vmid: int = 0) -> MQD:
  """gfx_v11_0_compute_mqd_init's MQD of a PM4 compute queue: ring at ring_va (ring_bytes, a power of two), the read pointer reported to
  rptr_va and the write pointer polled at wptr_va, the end-of-pipe buffer at eop_va, the doorbell at dword
  doorbell_dw of the doorbell BAR, in VMID vmid; the queue active (as the CP's image of a mapped queue shows it)."""
  m = MQD()
  m.header = MQD_HEADER
  m.compute_pipelinestat_enable = 1
  for se in range(4): setattr(m, f"compute_static_thread_mgmt_se{se}", 0xFFFFFFFF)   # every CU of each SE
  m.compute_misc_reserved = 0x7
  m.cp_mqd_base_addr_lo, m.cp_mqd_base_addr_hi = mqd_va & 0xFFFFFFFC, mqd_va >> 32
  m.cp_mqd_control = _f("CP_MQD_CONTROL", VMID=vmid, PRIV_STATE=1)
  m.cp_hqd_vmid = vmid
  m.cp_hqd_persistent_state = _f("CP_HQD_PERSISTENT_STATE", PRELOAD_SIZE=0x55)
  m.cp_hqd_quantum = _f("CP_HQD_QUANTUM", QUANTUM_EN=1, QUANTUM_SCALE=1, QUANTUM_DURATION=10)
  m.cp_hqd_pq_base_lo, m.cp_hqd_pq_base_hi = (ring_va >> 8) & 0xFFFFFFFF, ring_va >> 40
  m.cp_hqd_pq_rptr_report_addr_lo, m.cp_hqd_pq_rptr_report_addr_hi = rptr_va & 0xFFFFFFFC, rptr_va >> 32
  m.cp_hqd_pq_wptr_poll_addr_lo, m.cp_hqd_pq_wptr_poll_addr_hi = wptr_va & 0xFFFFFFF8, wptr_va >> 32
  m.cp_hqd_pq_doorbell_control = _f("CP_HQD_PQ_DOORBELL_CONTROL", DOORBELL_OFFSET=doorbell_dw, DOORBELL_EN=1)
  # QUEUE_SIZE: log2(ring dwords) - 1; RPTR_BLOCK_SIZE: report the read pointer every 2^(5+1) dwords
  m.cp_hqd_pq_control = _f("CP_HQD_PQ_CONTROL", QUEUE_SIZE=(ring_bytes // 4).bit_length() - 2, RPTR_BLOCK_SIZE=5,
                           UNORD_DISPATCH=1, PRIV_STATE=1, KMD_QUEUE=1)
  m.cp_hqd_ib_control = _f("CP_HQD_IB_CONTROL", MIN_IB_AVAIL_SIZE=3)
  m.cp_hqd_eop_base_addr_lo, m.cp_hqd_eop_base_addr_hi = (eop_va >> 8) & 0xFFFFFFFF, eop_va >> 40
  m.cp_hqd_eop_control = _f("CP_HQD_EOP_CONTROL", EOP_SIZE=(eop_bytes // 4).bit_length() - 2)   # log2(dwords) - 1
  m.cp_hqd_active = 1
  return m


def load_hqd(regs, m: MQD) -> None:
  """Program the selected HQD (GRBM_GFX_CNTL is the caller's) from the MQD: every register of its HQD part but the
  triggers, in register order, then CP_HQD_ACTIVE from the MQD's cp_hqd_active."""
  for field, reg in HQD_REGISTERS:
    if reg not in TRIGGERS: regs.write(reg, getattr(m, field))
  regs.write("CP_HQD_ACTIVE", m.cp_hqd_active)
