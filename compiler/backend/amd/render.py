"""The RDNA3 backend's pipeline and its last steps: s_waitcnt placement, branch resolution and encoding (encode.py,
with the ISA helper's generated tables: hcq.autogen.isa.gfx1100 via tables.arch_tables).

    from hcq.compiler.backend.amd.render import compile_sink, compile_linear
    co_bytes = compile_sink(sink)                # DSL kernel -> lowering -> HSA code object (ELF, code object v5)
    c = compile_linear(linear)                   # Compiled: .code (allocated MInsts), .text, .regs, .sel

compile_linear: isel.select (selection + isel_opt clean-ups) -> regalloc.allocate_with_spills -> insert_waitcnt ->
render_hazards.fix_hazards -> assemble (+ s_code_end padding); code_object wraps the result with cowriter.py.

s_waitcnt (RDNA3 ISA 4.4 "Data Dependency Resolution"; gfx11 SOPP S_WAITCNT simm16: vmcnt [15:10], lgkmcnt [9:4],
expcnt [2:0]): vector memory loads return in order and are counted by VM_CNT; LDS and scalar memory operations by
LGKM_CNT (LDS in order, SMEM out of order); stores to global memory are counted by VS_CNT (not waited for: nothing
reads them back in a kernel). Before an instruction reads the result of a pending load, the counter is waited down to
the number of operations issued after that load (0 for LGKM while a scalar load is pending), rounded down to a
multiple of WAIT_GRANULE so that one wait serves the next few uses too. Before s_barrier, all
LDS operations are waited for; at labels and branches everything pending is waited for (conservative at joins).
"""
from __future__ import annotations

import time

from ...ir import CompileError, UOp
from ...lower.target import Target
from .isel import Selection, select
from .isel_mir import MInst
from .regalloc import Allocation, allocate_with_spills
from . import gfx9, gfx12
from .program import KernelMeta, ins, program
from .waits import insert_counter_waits
from .encode import Encoder
from .render_hazards import fix_hazards, fix_hazards_gfx9, fix_hazards_gfx12
from ...isa.amd.asm import waitcnt_simm16
from ...isa.amd.cowriter import Arg, KernelSpec, write_code_object
from ...isa.amd.errors import CodeObjectError
from ...isa.amd.tables import arch_tables

S_CODE_END = bytes.fromhex("00009fbf")   # s_code_end (llvm-mc-19 -mcpu=gfx1100: [0x00,0x00,0x9f,0xbf])
S_NOP0 = bytes.fromhex("000080bf")       # s_nop 0 (llvm-mc-19 -mcpu=gfx942: [0x00,0x00,0x80,0xbf])
CODE_END_PAD = 64


# ---------------------------------------------------------------------------------------------------- s_waitcnt
def _waitcnt(vm: int = 63, lgkm: int = 63) -> MInst:
  return MInst("s_waitcnt", simm16=waitcnt_simm16(vmcnt=vm, lgkmcnt=lgkm))


def insert_waitcnt(code: list[MInst]) -> list[MInst]:
  """RDNA3: VM_CNT counts loads only (stores have VS_CNT), 6 bits each (waits.py)."""
  return insert_counter_waits(code, _waitcnt, 63, 63, stores_on_vm=False)


def assemble(code: list[MInst], arch: str = "gfx1100", sizes_out: list | None = None) -> bytes:
  """Machine code bytes of allocated instructions; LABELs give branch targets (SOPP simm16 = dword distance from
  the instruction after the branch). sizes_out, when given, receives each instruction's size (0 for a LABEL)."""
  enc = Encoder(arch)
  addr, labels, sizes = 0, {}, []
  parts: list = []    # each instruction's bytes; a branch's are made once every label's address is known
  branches = []
  encode = enc.encode
  for m in code:
    if m.name == "LABEL":
      labels[m.label] = addr
      sizes.append(0)
      continue
    if m.mods.get("target") is None:
      b = encode(m)
      n = len(b)
    else:
      b = n = enc.size(m)
      branches.append((len(parts), m, addr))
    parts.append(b)
    sizes.append(n)
    addr += n
  for k, m, at in branches:
    simm = (labels[m.target] - (at + 4)) // 4
    if not -32768 <= simm <= 32767: raise CompileError(f"{arch}: branch to {m.target} too far")
    b = enc.encode(m, simm)
    assert len(b) == parts[k], (m, len(b), parts[k])
    parts[k] = b
  if sizes_out is not None: sizes_out[:] = sizes
  return b"".join(parts)


# ---------------------------------------------------------------------------------------------------- the pipeline
class Compiled:
  """A compiled kernel: code bytes, the selection (args, LDS, entry state) and the register counts."""
  def __init__(self, sel: Selection, code: list[MInst], text: bytes, regs: Allocation, seconds: float,
               arch: str = "gfx1100"):
    self.sel, self.code, self.text, self.regs, self.seconds, self.arch = sel, code, text, regs, seconds, arch


def compile_linear(lin: UOp, arch: str = "gfx1100", addr64_bytes: int = 2**32) -> Compiled:
  """addr64_bytes: GLOBAL buffers of at least this many bytes are addressed with 64-bit VGPR pairs (base + index *
  size by v_mad_u64_u32) instead of SGPR base + 32-bit VGPR offset (tests lower it to exercise that path)."""
  if arch not in ARCHS: raise CompileError(f"the AMD backend targets {', '.join(ARCHS)}, not {arch!r}")
  t0 = time.perf_counter()
  sel = select(lin, addr64_bytes, arch)
  if arch == "gfx942":
    tables = arch_tables(arch)
    sel.code = gfx9.legalize(gfx9.widen_masks(sel.code), tables)
    code, regs, slots = allocate_with_spills(sel.code, sel.loops, sel.name, scratch_base=sel.private_size,
                                             sgprs=gfx9.SGPRS, align_tuples=True, agprs=accvgpr_budget(sel))
  else: code, regs, slots = allocate_with_spills(sel.code, sel.loops, sel.name, scratch_base=sel.private_size)
  sel.private_size += 4 * slots
  if arch == "gfx1200": code = gfx12.rename(fix_hazards_gfx12(gfx12.insert_waits(code)))
  elif arch == "gfx942": code = gfx9.rename(fix_hazards_gfx9(gfx9.insert_waitcnt(code)), tables)
  else: code = fix_hazards(insert_waitcnt(code))
  # s_code_end after the program, as LLVM pads gfx10+ code: the instruction prefetcher may read past the end (gfx9
  # has no s_code_end: clang-19 -mcpu=gfx942 pads with s_nop 0)
  sizes: list = []
  text = assemble(code, arch, sizes) + (S_NOP0 if arch == "gfx942" else S_CODE_END) * CODE_END_PAD
  c = Compiled(sel, code, text, regs, time.perf_counter() - t0, arch)
  c.sizes = sizes
  return c


# A work-group runs on one WGP (rsrc1 WGP_MODE): 4 SIMD32 with 1536 wave32 VGPRs each, allocated in blocks of 24.
# Checked against clang-19 -mcpu=gfx1100 with amdgpu_flat_work_group_size(1, N) on a kernel needing more registers:
# N = 1024 -> .vgpr_count 192 (8 waves per SIMD), 768 -> 240 (6), 512 and 256 -> 256.
SIMDS_PER_WGP, VGPRS_PER_SIMD, VGPR_ALLOC_GRANULE, MAX_WORKGROUP = 4, 1536, 24, 1024
# (VGPRs per SIMD, allocation granule) in wave32 where they differ from gfx1100's: gfx1102 lacks LLVM's
# FeatureGFX11FullVGPRs (AMDGPU.td FeatureISAVersion11_0_2; gfx1101 has it), so it has the 1024-VGPR file allocated in
# blocks of 16 (AMDGPUBaseInfo getTotalNumVGPRs / getVGPRAllocGranule). Checked the same way against clang-19
# -mcpu=gfx1102: N = 1024 -> .vgpr_count 128, 768 -> 160, 512 -> 256 (gfx1101 gives gfx1100's 192, 240, 256).
VGPR_FILE = {"gfx1102": (1024, 16)}


# CDNA3 (gfx942): a work-group runs on one CU, 4 SIMDs with 512 VGPRs per lane each (AMDGPUUsage, gfx90a/gfx940: the
# unified VGPR/AccVGPR file), allocated in blocks of 8, wave64
CDNA3_SIMDS, CDNA3_VGPRS, CDNA3_GRANULE = 4, 512, 8


def accvgpr_budget(sel: Selection) -> int:
  """The AccVGPRs gfx942 may spill to: all of them (gfx9.AGPRS), unless the kernel requires a work-group shape (it
  reads work-item ids) whose waves would then not fit a CU: the registers per wave are capped so that they do
  (CDNA3_VGPRS per SIMD lane / waves per SIMD, in CDNA3_GRANULE blocks), and the AccVGPRs get what the 256 ArchVGPRs
  leave of that (none for more than 256 work-items: those spill to scratch as before)."""
  if not sel.uses_local_ids: return gfx9.AGPRS
  items = sel.local_size[0] * sel.local_size[1] * sel.local_size[2]
  waves_per_simd = -(-items // (64 * CDNA3_SIMDS))
  per_wave = CDNA3_VGPRS // max(waves_per_simd, 1) // CDNA3_GRANULE * CDNA3_GRANULE
  return max(0, min(gfx9.AGPRS, per_wave - 256))


def max_flat_workgroup_size(name: str, vgprs: int, required: tuple | None, arch: str = "gfx1100") -> int:
  """The largest work-group whose waves all fit the register file with `vgprs` VGPRs each; a kernel that requires a
  larger work-group (reqd_workgroup_size) could never be launched: that is a CompileError."""
  if arch == "gfx942":
    alloc = -(-max(vgprs, 1) // CDNA3_GRANULE) * CDNA3_GRANULE
    fits = min(MAX_WORKGROUP, CDNA3_VGPRS // alloc * CDNA3_SIMDS * 64)
  else:
    file, granule = VGPR_FILE.get(arch, (VGPRS_PER_SIMD, VGPR_ALLOC_GRANULE))
    alloc = -(-max(vgprs, 1) // granule) * granule
    fits = min(MAX_WORKGROUP, file // alloc * SIMDS_PER_WGP * 32)
  if required is None: return fits
  want = required[0] * required[1] * required[2]
  if want > fits:
    raise CompileError(f"{arch}: kernel {name} uses {vgprs} VGPRs per lane: at most {fits} work-items fit in a "
                       f"work-group, its work-group shape {tuple(required)} has {want}")
  return want


def kernel_spec(c: Compiled) -> KernelSpec:
  """What the code-object writer needs to describe a compiled kernel: arguments, register counts, the entry state the
  code expects (user SGPRs with the work-group ids after them, work-item id VGPR dimensions), segment sizes."""
  sel, regs = c.sel, c.regs
  # a 64-bit scalar is OpenCL's long/ulong (the metadata's type names are OpenCL C's: a launcher reads "long long"
  # as an unknown type, to be passed as raw bytes)
  cl_name = lambda dt: {8: "ulong" if dt.is_unsigned else "long"}.get(dt.itemsize, dt.cname)
  args = [Arg(a.offset, 8, "global_buffer", a.name, "global", f"{a.dtype.cname}*") if a.kind == "buffer" else
          Arg(a.offset, a.size, "by_value", a.name, None, cl_name(a.dtype)) for a in sel.args]
  required = None
  if sel.uses_local_ids:
    # the code reads work-item ids for this work-group shape only (lidx0 is v0 itself when y and z are 1, sizes are
    # folded into index arithmetic): other shapes must be refused by the launcher
    required = tuple(sel.local_size)
  agprs = regs.agprs
  # the registers a wave allocates: ArchVGPRs, then (gfx942) the AccVGPRs from ACCUM_OFFSET on (cowriter.total_vgprs)
  total = (-(-max(regs.vgprs, 1) // 4) * 4 + agprs) if agprs else regs.vgprs
  return KernelSpec(sel.name, c.text, args, vgpr_count=max(regs.vgprs, 1), agpr_count=agprs,
                    sgpr_count=regs.sgprs + (6 if c.arch == "gfx942" else 2),   # + VCC (gfx9: + FLAT_SCRATCH, XNACK_MASK)
                    group_segment_fixed_size=sel.lds_size, private_segment_fixed_size=sel.private_size,
                    kernarg_segment_size=sel.kernarg_size, workgroup_ids="xyz"[:sel.workgroup_ids],
                    workitem_id_dims=sel.workitem_id_dims + 1, user_sgpr_count=sel.user_sgprs,
                    max_flat_workgroup_size=max_flat_workgroup_size(sel.name, total, required, c.arch),
                    wavefront_size=64 if c.arch == "gfx942" else 32,
                    reqd_workgroup_size=required, vgpr_spill_count=regs.spills, language="OpenCL C",
                    language_version=(2, 0), uniform_work_group_size=True)


def compiled_program(c, arch: str = "gfx1100") -> UOp:
  """The PROGRAM of a kernel the RDNA3 backend compiled (render.Compiled): one encoded INS per instruction (sizes
  from the encoder; the code-end padding after them is 4-byte s_code_end instructions), its KernelSpec as the arg."""
  enc, text = Encoder(arch), c.text
  body, pos = [], 0
  sizes = getattr(c, "sizes", None)     # what the encoder measured (render.assemble), or measured again here
  for k, m in enumerate(c.code):
    if m.name == "LABEL": continue
    n = sizes[k] if sizes is not None else enc.size(m)
    body.append(ins(text[pos:pos + n]))
    pos += n
  if (len(text) - pos) % 4: raise CodeObjectError(f"kernel {c.sel.name}: {len(text) - pos} bytes after the code")
  body += [ins(text[p:p + 4]) for p in range(pos, len(text), 4)]
  return program(KernelMeta.of(kernel_spec(c), arch), body)


def code_object(c: Compiled) -> bytes:
  """HSA code object (ELF, code object v5) of one compiled kernel, by the writer hand-written PROGRAMs go through
  (program.py) with the same metadata (KernelMeta.of(kernel_spec)). The text goes in as the encoder made it: splitting
  it into one INS per instruction and decoding each again (compiled_program, program_code) gives the same bytes
  (tests/backend/test_amd_program.py) at about a fifth of a 20,000-instruction kernel's compile time."""
  return write_code_object([KernelMeta.of(kernel_spec(c), c.arch).spec(c.text)], c.arch)


def compile_gfx1100(lin: UOp, arch: str = "gfx1100") -> bytes:
  """LINEAR kernel -> HSA code object bytes for gfx1100 (or another of ARCHS)."""
  return code_object(compile_linear(lin, arch))


GFX1100_TARGET = Target("gfx1100", local_memory_bytes=65536)
# gfx1101 (Navi 32) and gfx1102 (Navi 33): RDNA3, gfx1100's encodings (tables.SAME_ENCODINGS) and its 64 KiB of LDS
# per work-group (one RDNA3 ISA guide covers them all); what differs is in cowriter.USER_SGPR_INIT16_BUG and VGPR_FILE
GFX1101_TARGET = Target("gfx1101", local_memory_bytes=65536)
GFX1102_TARGET = Target("gfx1102", local_memory_bytes=65536)
GFX1200_TARGET = Target("gfx1200", local_memory_bytes=65536)   # RDNA4: 64 KiB of LDS per work-group, as RDNA3
GFX942_TARGET = Target("gfx942", local_memory_bytes=65536)     # CDNA3: 64 KiB of LDS per CU (MI300 ISA "LDS")
TARGETS = {"gfx1100": GFX1100_TARGET, "gfx1101": GFX1101_TARGET, "gfx1102": GFX1102_TARGET, "gfx1200": GFX1200_TARGET,
           "gfx942": GFX942_TARGET}
ARCHS = tuple(TARGETS)


def compile_sink(sink: UOp, arch: str = "gfx1100") -> bytes:
  """Kernel sink from the DSL -> lowering pipeline -> HSA code object bytes (what hcq.compiler.compile(sink,
  "gfx1100") and AMDDevice.compile return)."""
  if arch not in ARCHS: raise CompileError(f"the AMD backend targets {', '.join(ARCHS)}, not {arch!r}")
  from ...lower import lower
  return compile_gfx1100(lower(sink, TARGETS[arch]), arch)


def disassembly(c: Compiled) -> str:
  return "\n".join(repr(m) for m in c.code)
