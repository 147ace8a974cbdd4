"""AMDProgram: a kernel of a loaded code object, ready to launch: its registers, user SGPRs and kernarg layout, and
per launch shape a command buffer lowered once from a queue program (barrier, call, timeline store) and patched
(kernarg address, dispatch packet address, timeline value) at each launch.

Registers and fields: the device's GC version's (device.regs, pm4.ComputeRegs from the generated gc_<ver>_compute
module: COMPUTE_PGM_RSRC1.PRIV bit 20, COMPUTE_PGM_RSRC2.LDS_SIZE [23:15] in 512-byte granules on gfx9-gfx12,
DISPATCH_INITIATOR.CS_W32_EN from gfx10 on). On an AQL queue (device.aql) a launch is a KERNEL_DISPATCH packet
(aql.py) with the same kernarg layout (code object v5 hidden arguments) instead of registers and DISPATCH_DIRECT. The dispatch packet is
ROCR's hsa_kernel_dispatch_packet_t (hsa.h): workgroup_size_x/y/z u16 at 4/6/8, grid_size_x/y/z u32 at 12/16/20,
private/group segment size u32 at 24/28, kernel_object u64 at 32, kernarg_address u64 at 40."""
from __future__ import annotations

import copy
import struct

from ...errors import DeviceError
from .kernargs import Arg, KernargLayout
from ..hcq.program import LaunchShape, Program
from . import aql, pm4
from ..hcq.cmdbuf import Sym

DISPATCH_PACKET_SIZE = 64
# the per-launch values a command buffer leaves symbolic
KERNARG_PTR, DISPATCH_PTR = Sym(("var", "kernarg")), Sym(("var", "dispatch"))
_DISPATCH = struct.Struct("<HHHHHHIIIIIQQ")


# the user SGPRs a kernel descriptor can enable, in hardware order, with their dword counts (AMDGPUUsage "Initial
# Kernel Execution State"; the descriptor's user_sgpr_layout gives their positions)
USER_SGPR_SIZES = {"private_segment_buffer": 4, "dispatch_ptr": 2, "queue_ptr": 2, "kernarg_segment_ptr": 2,
                   "dispatch_id": 2, "flat_scratch_init": 2, "private_segment_size": 1}


def kernel_args(k) -> list[Arg]:
  """The kernarg layout records of a compiler.isa.amd.codeobject Kernel."""
  return [Arg(a.offset, a.size, a.value_kind, a.type_name or "", a.name or "", a.address_space or "",
              a.raw.get(".pointee_align", 0)) for a in k.args]


def image_at(co, base: int) -> bytes:
  """The code object's load image for a load at device address base: its absolute relocations get the base added
  (position-independent R_AMDGPU_REL64 ones are already applied by the reader)."""
  if not co.abs_relocs: return co.image
  img = bytearray(co.image)
  for off, size, value in co.abs_relocs:
    img[off:off + size] = ((base + value) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
  return bytes(img)


# COMPUTE_RESTART_X/Y/Z hold where an interrupted dispatch resumes (the CP keeps them with the queue's state when it
# preempts a dispatch midway, v11_compute_mqd compute_restart_x/y/z): set at every launch rather than trusted to still
# hold the zeros the last launch wrote
def _sent_every_launch(packet: list, regs) -> bool:
  """A SET_SH_REG packet that goes into every launch: one with a per-launch address, or COMPUTE_RESTART_X's."""
  return packet[1] == regs.RESTART_X or not all(isinstance(w, int) for w in packet)


class RepeatDispatch:
  """A queue-program handle for the lowering: the launch of `program` without the register packets that are the same
  at every launch (AMDProgram.dispatch_words(static=False))."""
  __slots__ = ("program",)

  def __init__(self, program): self.program = program

  def dispatch_words(self, grid, block, kernarg=KERNARG_PTR, dispatch=DISPATCH_PTR) -> list:
    return self.program.dispatch_words(grid, block, kernarg, dispatch, static=False)


def _check_accvgprs(kernel) -> None:
  """gfx942: the metadata's AccVGPRs (.agpr_count) must lie from the descriptor's ACCUM_OFFSET on, after the
  ArchVGPRs, within the VGPRs COMPUTE_PGM_RSRC1 allocates (.vgpr_count counts both: LLVM's getTotalNumVGPRs, alignTo(
  ArchVGPRs, 4) + AccVGPRs): else the kernel's AccVGPRs would be its own ArchVGPRs or another wave's registers."""
  kd, md = kernel.descriptor, kernel.metadata
  agprs, total = int(md.get(".agpr_count", 0) or 0), int(md.get(".vgpr_count", 0) or 0)
  if not agprs: return
  accum, alloc = kd.accum_offset(), kd.unified_vgprs()
  arch = total - agprs
  if accum + agprs > alloc or total > alloc:
    raise DeviceError(f"kernel {kernel.name}: {agprs} AccVGPRs from ACCUM_OFFSET {accum} (COMPUTE_PGM_RSRC3 [5:0] = "
                      f"{accum // 4 - 1}) end at register {accum + agprs}, past the {alloc} VGPRs COMPUTE_PGM_RSRC1 "
                      f"allocates (.vgpr_count {total})")
  if arch > accum:
    raise DeviceError(f"kernel {kernel.name}: {arch} ArchVGPRs (.vgpr_count {total} - .agpr_count {agprs}) reach past "
                      f"ACCUM_OFFSET {accum} (COMPUTE_PGM_RSRC3 [5:0] = {accum // 4 - 1}), where the AccVGPRs start")


class AMDProgram(Program):
  def __init__(self, device, kernel, image_va: int, image_size: int):
    """kernel: a compiler.isa.amd.codeobject Kernel of a code object loaded at image_va."""
    layout = KernargLayout(kernel.name, kernel_args(kernel), kernel.kernarg_segment_size, kernel.kernarg_segment_align,
                           kernel.group_segment_fixed_size)
    super().__init__(device, kernel.name, layout, kernel.max_flat_workgroup_size or 1024)
    self.kernel = kernel
    # a kernel compiled with reqd_work_group_size (metadata .reqd_workgroup_size) may have its work-item ids and group
    # size folded in as constants: launches with another local size are refused before submit (check_launch)
    req = kernel.reqd_workgroup_size
    self.required_block = tuple(req) + (1,) * (3 - len(req)) if req else None
    kd = kernel.descriptor
    self.image_va, self.image_size = image_va, image_size
    self.kd_va = image_va + kernel.descriptor_address
    self.entry = image_va + kernel.entry_address
    if self.entry & 0xFF: raise DeviceError(f"kernel {self.name}: entry point {self.entry:#x} is not 256-byte aligned")
    self.wave32 = kernel.wavefront_size == 32
    self.regs = regs = device.regs
    if self.wave32 and not regs.INITIATOR_CS_W32_EN:
      raise DeviceError(f"kernel {self.name}: wave32, which GC {'.'.join(map(str, regs.ip))} cannot run (no CS_W32_EN)")
    self.lds = kernel.group_segment_fixed_size
    self.private = kernel.private_segment_fixed_size
    self.lds_max = device.props.get("lds_size_in_kb", 64) * 1024
    if self.lds > self.lds_max:
      raise DeviceError(f"kernel {self.name}: needs {self.lds} bytes of LDS, the device has {self.lds_max}")
    self.user_sgprs = [(name, USER_SGPR_SIZES[name]) for name in kd.user_sgpr_layout() if name in USER_SGPR_SIZES]
    enabled = sum(n for _, n in self.user_sgprs)
    if enabled > kd.user_sgpr_count or kd.user_sgpr_count > 16:
      raise DeviceError(f"kernel {self.name}: descriptor enables {enabled} user SGPRs but COMPUTE_PGM_RSRC2 reserves "
                        f"{kd.user_sgpr_count} (at most 16 user-data registers)")
    self.dispatch_ptr = any(n == "dispatch_ptr" for n, _ in self.user_sgprs)
    # gfx11 runs user queues with COMPUTE_PGM_RSRC1.PRIV set (a context-save workaround of the reference runtime)
    self.rsrc1 = kd.compute_pgm_rsrc1 | regs.RSRC1_PRIV
    self.rsrc2 = self._rsrc2_with_lds(self.lds)
    self.rsrc3 = kd.compute_pgm_rsrc3
    if device.arch == "gfx942": _check_accvgprs(kernel)
    self.scratch = device.scratch_for(self.private) if self.private else None

  def _rsrc2_with_lds(self, lds: int) -> int:
    granules = (lds + pm4.LDS_GRANULE - 1) // pm4.LDS_GRANULE
    r = self.regs
    return self.kernel.descriptor.compute_pgm_rsrc2 | ((granules << r.RSRC2_LDS_SIZE_SHIFT) & r.RSRC2_LDS_SIZE_MASK)

  def with_lds(self, lds: int | None) -> "AMDProgram":
    """This program for a launch that needs lds bytes of LDS (__local pointer arguments): a copy whose COMPUTE_PGM_RSRC2
    reserves them; the program itself when lds is None."""
    if lds is None or lds == self.lds: return self
    if lds > self.lds_max:
      raise DeviceError(f"kernel {self.name}: the launch needs {lds} bytes of LDS ({self.lds} static + __local "
                        f"arguments), the device has {self.lds_max}")
    view = copy.copy(self)
    view.lds, view.rsrc2, view._shapes = lds, self._rsrc2_with_lds(lds), {}
    return view

  def register_packets(self, grid, block, kernarg=KERNARG_PTR, dispatch=DISPATCH_PTR) -> list[list]:
    """The SET_SH_REG packets a launch of this program needs: program address and resources, scratch, user SGPRs
    (the kernarg and dispatch-packet addresses stay symbolic: patched at submit), launch size."""
    user = []
    for name, n in self.user_sgprs:
      if name == "private_segment_buffer":
        base = self.scratch.va if self.scratch else 0
        # buffer resource: base, stride 0 with swizzle enable (bit 31 of dword 1), num_records all ones, and the
        # dword-3 format the reference runtime uses for scratch on gfx11
        user += [base & 0xFFFFFFFF, ((base >> 32) & 0xFFFF) | (1 << 31), 0xFFFFFFFF, 0x20C14000]
      elif name == "dispatch_ptr": user += [pm4.lo(dispatch), pm4.hi(dispatch)]
      elif name == "queue_ptr": user += [pm4.lo(self.device.queue_desc_va), pm4.hi(self.device.queue_desc_va)]
      elif name == "kernarg_segment_ptr": user += [pm4.lo(kernarg), pm4.hi(kernarg)]
      elif name in ("dispatch_id", "flat_scratch_init"): user += [0, 0]
      elif name == "private_segment_size": user += [self.private]
    # COMPUTE_PGM_RSRC2.USER_SGPR_COUNT may reserve more (clang reserves 15 on gfx11); only the enabled ones carry
    # values, the rest are never read by the kernel and are left as they are
    # COMPUTE_PGM_LO .. COMPUTE_PGM_RSRC2 are 8 consecutive registers (gc_11_0_0_offset.h): one packet
    # sets the program address, the dispatch packet address, the scratch base and RSRC1/2
    # (the dispatch packet address only means something for kernels that read the dispatch packet)
    scratch = self.scratch.va >> 8 if self.scratch else 0
    packet = dispatch if self.dispatch_ptr else 0
    r = self.regs
    out = [pm4.set_sh_reg(r.PGM_LO, pm4.lo(self.entry >> 8), pm4.hi(self.entry >> 8),
                          pm4.lo(packet), pm4.hi(packet), pm4.lo(scratch), pm4.hi(scratch), self.rsrc1, self.rsrc2),
           pm4.set_sh_reg(r.PGM_RSRC3, self.rsrc3),
           pm4.set_sh_reg(r.TMPRING_SIZE, self.scratch.tmpring if self.scratch else 0),
           pm4.set_sh_reg(r.RESTART_X, 0, 0, 0)]
    if user: out.append(pm4.set_sh_reg(r.USER_DATA_0, *user))
    out += [pm4.set_sh_reg(r.RESOURCE_LIMITS, 0), pm4.set_sh_reg(r.START_X, 0, 0, 0, *block)]
    return out

  def register_state(self, grid, block) -> tuple:
    """The register values a launch of this shape leaves on the queue that are the same at every launch (the packets
    without a per-launch address in them, except those sent every time), as a hashable key: two shapes with equal
    keys need the same registers."""
    return tuple(tuple(p) for p in self.register_packets(grid, block) if not _sent_every_launch(p, self.regs))

  def dispatch_words(self, grid, block, kernarg=KERNARG_PTR, dispatch=DISPATCH_PTR, static: bool = True) -> list:
    """What a CALL of this program lowers to on the compute queue: its registers (register_packets), DISPATCH_DIRECT,
    CS_PARTIAL_FLUSH. static=False leaves out the register packets that are the same at every launch (register_state):
    for a queue whose registers already hold them (see AMDDevice.launch)."""
    if self.device.aql: return self.aql_words(grid, block, kernarg)
    w = []
    for packet in self.register_packets(grid, block, kernarg, dispatch):
      if static or _sent_every_launch(packet, self.regs): w += packet
    r = self.regs
    initiator = r.INITIATOR_COMPUTE_SHADER_EN | r.INITIATOR_FORCE_START_AT_000 | (r.INITIATOR_CS_W32_EN if self.wave32 else 0)
    w += pm4.dispatch_direct(*grid, initiator)
    w += pm4.event_write(pm4.CS_PARTIAL_FLUSH, pm4.EVENT_INDEX_PARTIAL_FLUSH)
    return w

  def aql_words(self, grid, block, kernarg=KERNARG_PTR) -> list:
    """The launch on an AQL queue: a KERNEL_DISPATCH packet (grid in threads; the private and group segment sizes
    this launch needs; the kernel descriptor as kernel_object), marked for the AQL engine (aql.dispatch_marker)."""
    threads = [g * b for g, b in zip(grid, block)]
    if max(threads) >= 1 << 32: raise DeviceError(f"kernel {self.name}: a grid of {threads} threads exceeds 2^32 a dimension")
    return aql.dispatch_marker(aql.kernel_dispatch(block, threads, self.private, self.lds, self.kd_va, kernarg))

  # the launch shape (drivers/hcq/program.py): the call carries the program with the LDS the launch needs
  # (shape.shared: __local pointer arguments); cmd sets every register the launch needs, cmd_repeat only those that
  # change per launch, for a queue whose registers hold `registers` (AMDDevice._launch_words tracks that)
  def launch_handle(self, shape: LaunchShape): return self.with_lds(shape.shared)

  def shape_data(self, s: LaunchShape) -> None:
    prog = self.with_lds(s.shared)
    grid, block = s.grid, s.block
    s.lds = prog.lds
    # hidden_queue_ptr: the queue's amd_queue_t (a zeroed one: the same address the queue_ptr user SGPR gets);
    # hidden_dynamic_lds_size: the LDS of the __local pointer arguments
    s.hidden = self.layout.hidden_values(grid, block, {"hidden_queue_ptr": self.device.queue_desc_va,
                                                       "hidden_dynamic_lds_size": prog.lds - self.lds})
    s.data_size = self.layout.segment_size + (DISPATCH_PACKET_SIZE if self.dispatch_ptr else 0)
    s.cmd_repeat = self.device.launch_cmdbuf(self.name, RepeatDispatch(prog), grid, block, s.timed)
    s.registers = self.device.register_state_key(prog.register_state(grid, block))

  def dispatch_packet(self, s: LaunchShape, kernarg_va: int) -> bytes:
    b, g = s.block, s.grid
    # header/setup: KERNEL_DISPATCH type (2), 3 dimensions; only informational for a PM4 dispatch
    return _DISPATCH.pack(2, 3, b[0], b[1], b[2], 0, g[0] * b[0], g[1] * b[1], g[2] * b[2], self.private, s.lds,
                          self.kd_va, kernarg_va) + bytes(8 + 8)

  def __repr__(self): return f"AMDProgram({self.name}, entry={self.entry:#x})"
