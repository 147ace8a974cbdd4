"""Translate one basic block of gfx1100/gfx1200/gfx942 code into a Python function over numpy arrays.

A block runs for n waves at once: SGPRs are (n,) uint32 arrays, VGPRs (n, L) uint32 arrays (L = 32 or 64 lanes per
wave), SCC an (n,) uint32 0/1 array. The generated function loads the registers it touches into locals (all waves: the arrays themselves;
a subset `idx` of the waves: gathered copies), computes, and stores what it wrote back. It returns the next
program counter: an int when the same for every wave, else an (n,) int64 array; -1 ends the wave.

Per-format translation: xlate_scalar.py, xlate_vector.py, xlate_memory.py; source generation helpers: gen.py.
Operand encodings (RDNA3 ISA, "Scalar/vector source operands"): 0-105 SGPR, 106/107 VCC_LO/HI, 108-123 TTMP,
124 NULL, 125 M0, 126/127 EXEC_LO/HI, 128-192 integers 0..64, 193-208 -1..-16, 235-238 apertures, 240-248 float
constants, 251 VCCZ, 252 EXECZ, 253 SCC, 255 literal, 256-511 VGPRs.
"""
from __future__ import annotations

import re

import numpy as np

from ....errors import GPUFault
from . import native, rt
from .decode import ACC_BASE, Inst, decode
from .gen import EXEC, MAX_BLOCK, NOOPS, TERMINATORS, Block, Gen, Unsupported
from .xlate_memory import _ds, _vmem
from .xlate_scalar import _salu, _smem, _sopp
from .xlate_vector import _valu, _vop3p, _vopd

_USES_EXEC = re.compile(r"\b(em|ef)\b")

# The target of a dispatch as bits above the 4 denormal-mode bits of the translation key (`mode`): which decode
# tables and semantics (ARCHS), and the wave size. 0 = gfx1100 in wave32, so gfx1100 keys are the denormal mode.
ARCHS = ("gfx1100", "gfx1200", "gfx942")
_WAVE64 = 1 << 6


# RDNA3 targets that run as gfx1100 does: the same instructions, encodings and semantics (LLVM AMDGPU.td builds
# FeatureISAVersion11_0_1/2 from gfx1100's FeatureISAVersion11_Common; what differs, the VGPR file size and the user
# SGPR padding, is the code object's business: its descriptor says how many of each the waves get)
SAME_AS_GFX1100 = ("gfx1101", "gfx1102")


def target_bits(arch: str, wave_size: int | None = None) -> int:
  """The target bits of `arch` running waves of wave_size lanes (None: 64 on gfx9, 32 on gfx10+)."""
  if arch in SAME_AS_GFX1100: arch = "gfx1100"
  if arch not in ARCHS:
    raise ValueError(f"the emulator has no {arch!r} (have: {', '.join(ARCHS + SAME_AS_GFX1100)})")
  if wave_size is None: wave_size = 64 if arch == "gfx942" else 32
  if wave_size not in (32, 64) or (arch == "gfx942" and wave_size != 64):
    raise ValueError(f"{arch} cannot run waves of {wave_size} lanes")
  return ARCHS.index(arch) << 4 | (_WAVE64 if wave_size == 64 else 0)


def arch_of(mode: int) -> str: return ARCHS[(mode >> 4) & 3]


def lanes_of(mode: int) -> int: return 64 if mode & _WAVE64 else 32


def fetch_block(memory, pc: int, arch: str = "gfx1100") -> tuple[list[tuple[int, Inst]], bytes]:
  """Decode instructions from pc up to and including the first terminator."""
  rng = memory.range_of(pc)
  if rng is None: raise GPUFault("instruction fetch outside every mapped range", address=pc, kind="page fault")
  if pc & 3: raise GPUFault("misaligned program counter", address=pc, kind="illegal instruction")
  end = min(rng[1], pc + 16 * MAX_BLOCK)
  code = bytes(memory.u8[pc - memory.VIEW_BASE:end - memory.VIEW_BASE])
  out = []
  off = 0
  while True:
    if off >= len(code): raise GPUFault("program runs off the end of its mapped range", address=pc + off,
                                        kind="page fault")
    try:
      inst = decode(code, off, arch)
    except GPUFault as e:
      raise GPUFault(str(e).split(": ", 1)[-1], address=pc + off, kind="illegal instruction") from None
    out.append((pc + off, inst))
    off += inst.size
    if inst.name in TERMINATORS or inst.name == "s_code_end" or len(out) >= MAX_BLOCK: break
  return out, code[:off]


def translate(memory, pc: int, mode: int = 0xF) -> Block:
  """mode: the kernel descriptor's denormal modes, rsrc1[19:16] (per 2-bit field: bit 0 = keep output
  denormals, bit 1 = keep input denormals; RDNA3 ISA "MODE register", FP_DENORM), or'd with target_bits()."""
  arch, lanes = arch_of(mode), lanes_of(mode)
  insts, code = fetch_block(memory, pc, arch)
  g = Gen(pc, arch, lanes)
  g.ftz = {"f32": (not mode >> 1 & 1, not mode & 1), "f64": (not mode >> 3 & 1, not mode >> 2 & 1),
           "f16": (not mode >> 3 & 1, not mode >> 2 & 1)}
  for addr, inst in insts:
    g.emit(f"# {addr:#x}: {inst.name}")
    _translate_inst(g, addr, inst)
  last_addr, last = insts[-1]
  if g.next_pc is None: g.next_pc = str(last_addr + last.size)
  if g.next_pc != "-1": g.flush_wide()    # registers are stored at the end of the block (not when the waves end)
  src = _assemble(g)
  ns = {"np": np, "R": rt, **{t: getattr(np, n) for t, n in (("u8", "uint8"), ("u16", "uint16"), ("u32", "uint32"),
                                                              ("u64", "uint64"), ("i8", "int8"), ("i16", "int16"),
                                                              ("i32", "int32"), ("i64", "int64"), ("f16", "float16"),
                                                              ("f32", "float32"), ("f64", "float64"))},
        "L": lanes, **g.consts}
  try:
    exec(compile(src, f"<{arch} block {pc:#x}>", "exec"), ns)
  except SyntaxError as e:
    raise GPUFault(f"internal error translating the block at {pc:#x}: {e}", address=pc, kind="emulator") from None
  max_vgpr = max(g.vregs) if g.vregs else -1
  blk = Block(pc, last_addr + last.size, len(insts), ns["block"], code, g.barrier, src, max_vgpr)
  # gfx942: the highest ArchVGPR and AccVGPR (decode.ACC_BASE + k) the block names, checked against ACCUM_OFFSET
  blk.max_arch = max((r for r in g.vregs if r < ACC_BASE), default=-1)
  blk.max_agpr = max((r - ACC_BASE for r in g.vregs if r >= ACC_BASE), default=-1)
  blk.trivial = all(line.lstrip().startswith("#") for line in g.lines)
  blk.ends = g.next_pc == "-1" and not g.barrier
  blk.sregs = tuple(sorted(g.sregs | g.exec_regs()))
  blk.private = any(inst.encoding in ("DS", "SCRATCH", "FLAT") for _, inst in insts)
  native.attach(blk, insts, mode)    # a C translation for wide batches where the block qualifies (native.py)
  return blk


def _assemble(g: Gen) -> str:
  sregs = sorted(g.sregs | g.exec_regs())
  vregs = sorted(g.vregs)
  out = ["def block(S, V, st, idx):",
         "  if idx is None:",
         "    n = st.n; wid = st.wid"]
  out += [f"    s{r} = S[{r}]" for r in sregs]
  out += [f"    v{r} = V[{r}]" for r in vregs]
  out += ["    scc = st.scc"]
  out += ["  else:", "    n = len(idx); wid = idx"]
  out += [f"    s{r} = S[{r}][idx]" for r in sregs]
  out += [f"    v{r} = V[{r}][idx]" for r in vregs]
  out += ["    scc = st.scc[idx]"]
  out += ["  M = st.mem; nl = (n, L)"]
  if _USES_EXEC.search("\n".join(g.lines)):    # a block that never looks at EXEC (s_endpgm alone) skips the unpacking
    out += ["  " + g.exec_line()]
  out += ["  " + ln for ln in g.lines]
  if g.next_pc == "-1":
    return "\n".join(out + ["  return -1"]) + "\n"       # the waves end: nothing to write back
  for r in sorted(g.pending): out.append("  " + g.pack_line(r))
  out += ["  if idx is None:"]
  out += [f"    S[{r}] = s{r}" for r in sorted(g.s_written)]
  out += [f"    V[{r}] = v{r}" for r in sorted(g.v_written)]
  out += ["    st.scc = scc" if g.scc_written else "    pass"]
  out += ["  else:"]
  out += [f"    S[{r}][idx] = s{r}" for r in sorted(g.s_written)]
  out += [f"    V[{r}][idx] = v{r}" for r in sorted(g.v_written)]
  out += ["    st.scc[idx] = scc" if g.scc_written else "    pass"]
  out += [f"  return {g.next_pc}"]
  return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------------
def _translate_inst(g: Gen, pc: int, inst: Inst) -> None:
  name, enc = inst.name, inst.encoding
  if name in NOOPS or name.startswith(("s_waitcnt", "s_wait_")): return
  try:
    if enc == "SOPP": return _sopp(g, pc, inst)
    if enc in ("SOP1", "SOP2", "SOPC", "SOPK"): return _salu(g, pc, inst)
    if enc == "SMEM": return _smem(g, pc, inst)
    if enc in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC"): return _valu(g, pc, inst)
    if enc == "VOP3P": return _vop3p(g, pc, inst)
    if enc == "VOPD": return _vopd(g, pc, inst)
    if enc == "DS": return _ds(g, pc, inst)
    if enc in ("GLOBAL", "FLAT", "SCRATCH"): return _vmem(g, pc, inst)
  except (ValueError, KeyError) as e:
    raise Unsupported(inst, pc, f"has an unsupported operand ({e})") from None
  raise Unsupported(inst, pc)
