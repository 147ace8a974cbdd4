"""Linear-scan register allocation of the selected machine code (virtual VGPRs and SGPRs -> physical registers).

Live intervals are [first position, last position] of each virtual register in the instruction list. A register
live across a loop boundary (defined before a loop and read in it, or defined in it and read after) is kept for
the whole loop, so that the value survives the back edge. Registers pinned by the kernel entry state (kernarg
pointer s[0:1], work-group ids, v0) keep their physical register from the start of the kernel to their last use.
Intervals are assigned in order of their start to the lowest free physical register (SGPR pairs even-aligned);
a register becomes free only after the position where its interval ends (no reuse within one instruction).

Spilling (allocate_with_spills): when no VGPR is free, the values live at that point with the furthest-reaching
intervals go to scratch (the wave's private segment, one dword per lane each): every definition writes a fresh
temporary that is stored right after (scratch_store_b32 off, t, off offset:slot), every use reloads a fresh
temporary right before (scratch_load_b32); allocation then starts over. Temporaries are never spilled.

gfx942 (agprs > 0): spilled VGPRs go to AccVGPRs first, one AccVGPR a<k> per spilled value (v_accvgpr_write_b32
a<k>, t after every definition, v_accvgpr_read_b32 t, a<k> before every use), scratch only once the AccVGPRs are all
taken. On CDNA3 the AccVGPRs are the upper part of the unified 512-register file (AMDGPUUsage, "compute_pgm_rsrc3
for GFX90A, GFX942": ACCUM_OFFSET), addressable as a0..a255 by these two moves with no memory traffic; both are VALU
instructions that honour EXEC like the scratch accesses they replace. LLVM does the same by default on targets with
AccVGPRs (its -amdgpu-spill-vgpr-to-agpr option, on unless turned off; llvm/test/CodeGen/AMDGPU/spill-vgpr-to-agpr.ll
checks gfx908/gfx90a both ways). render.accvgpr_budget says how many a kernel may take (fewer when its required
work-group would not fit the CU with them). AccVGPR operands are VReg("a", fixed=k): placed before allocation, never
allocated or spilled.

SGPRs spill to lanes of VGPRs (one VGPR holds 32 spilled SGPRs of the wave, one per lane): every definition of a
spilled SGPR writes a fresh temporary SGPR that v_writelane_b32 copies into its lane right after, every use reads a
fresh temporary from the lane by v_readlane_b32 right before. Both ignore EXEC, so a value spilled under one mask is
read back under any other; neither touches SCC, so they may sit between an s_cmp and its branch. The lane VGPRs are
allocated like any other VGPR (live from the first write of a lane to the last read, loops included). A kernel whose
SGPR pairs alone or whose VGPRs even after spilling do not fit is a RegisterPressureError naming the kernel, the
class and the number of values live at that point.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import CompileError
from .isel_mir import Imm, MInst, Sub, VReg

LIMITS = {"v": 256, "s": 106}   # gfx11 wave32: VGPRs per lane (AMDGPUUsage), addressable SGPRs s0..s105


class RegisterPressureError(CompileError):
  """The kernel needs more registers than the target has (and the backend does not spill)."""


@dataclass
class Allocation:
  vgprs: int     # registers used (highest + 1)
  sgprs: int
  spills: int = 0   # VGPR values spilled to scratch (one dword per lane each)
  agprs: int = 0    # VGPR values spilled to AccVGPRs a0..a<agprs - 1> (gfx942)
  sgpr_spills: int = 0   # SGPR values spilled to VGPR lanes


def live_intervals(code: list[MInst], loops: list[tuple[str, str]]) -> dict[VReg, list[int]]:
  iv: dict[VReg, list[int]] = {}
  get = iv.get
  for i, m in enumerate(code):
    for ops in (m.defs, m.uses):   # regs_defined() + regs_used(), inlined (VRegs, a Sub's register)
      for r in ops.values():
        t = r.__class__
        if t is Sub: r = r.reg
        elif t is not VReg: continue
        span = get(r)
        if span is not None: span[1] = i
        else: iv[r] = [0 if r.fixed is not None else i, i]
  if not loops: return iv
  where = {m.label: i for i, m in enumerate(code) if m.name == "LABEL"}
  spans = [(where[h], where[e]) for h, e in loops if h in where and e in where]
  changed = True
  while changed:
    changed = False
    for h, e in spans:
      for r, (s, t) in iv.items():
        if (s < h <= t) or (s <= e < t):
          ns, nt = min(s, h), max(t, e)
          if (ns, nt) != (s, t):
            iv[r] = [ns, nt]
            changed = True
  return iv


class _NoRegister(Exception):
  def __init__(self, cls: str, live: list, pos: int):
    self.cls, self.live, self.pos = cls, live, pos


def allocate(code: list[MInst], loops: list, name: str = "kernel") -> Allocation:
  try: return _allocate(code, loops)
  except _NoRegister as e:
    raise _pressure_error(code, e, name) from None


def _pressure_error(code, e: _NoRegister, name: str) -> RegisterPressureError:
  return RegisterPressureError(
    f"gfx1100: kernel {name} needs more than {LIMITS[e.cls]} {'VGPRs' if e.cls == 'v' else 'SGPRs'} "
    f"({len(e.live)} values live at instruction {e.pos}: {code[e.pos]!r})")


def allocate_with_spills(code: list[MInst], loops: list, name: str = "kernel", scratch_base: int = 0,
                         max_rounds: int = 64, sgprs: int = LIMITS["s"],
                         align_tuples: bool = False, agprs: int = 0) -> tuple[list[MInst], Allocation, int]:
  """(code with spill code, allocation, number of dword spill slots per lane, placed from scratch_base).
  sgprs: the addressable SGPRs (102 on gfx9); align_tuples: every multi-register VGPR tuple even-aligned (gfx90a+);
  agprs: AccVGPRs that spilled VGPRs may take before scratch (256 on gfx942, 0 where there are none)."""
  slots = 0
  acc = 0      # AccVGPRs taken
  unspillable: set = set()
  lanes: list[VReg] = []     # VGPRs holding spilled SGPRs, 32 lanes each
  nlanes = 0
  for _ in range(max_rounds):
    try:
      alloc = _allocate(code, loops, sgprs, align_tuples)
      alloc.spills, alloc.sgpr_spills, alloc.agprs = slots, nlanes, acc
      return code, alloc, slots
    except _NoRegister as e:
      iv, ends = e.live, e.ends
      cands = sorted((r for r, _ in iv if r.fixed is None and r not in unspillable and
                      (r.n == 1 or (e.cls == "s" and r.n == 2))), key=lambda r: -ends[r])
      if not cands: raise _pressure_error(code, e, name) from None
      batch = cands[:max(1, len(iv) - LIMITS[e.cls] + (8 if e.cls == "v" else 4))]
      for r in batch:
        if e.cls == "s":
          if nlanes % 32 + r.n > 32: nlanes += 32 - nlanes % 32     # a pair's two lanes in one VGPR
          if nlanes == 32 * len(lanes):
            lanes.append(VReg("v"))
            unspillable.add(lanes[-1])    # a lane VGPR is written a lane at a time: never spilled whole
          code = _spill_sgpr(code, r, lanes[nlanes // 32], nlanes % 32, unspillable)
          nlanes += r.n
        elif acc < agprs:
          code = _spill_agpr(code, r, VReg("a", fixed=acc), unspillable)
          acc += 1
        else:
          code = _spill(code, r, scratch_base + 4 * slots, unspillable)
          slots += 1
  raise RegisterPressureError(f"gfx1100: kernel {name}: register allocation did not converge after {max_rounds} "
                              f"rounds of spilling")


def _spill(code: list[MInst], r: VReg, offset: int, unspillable: set) -> list[MInst]:
  """r kept in scratch at `offset`: reloaded before every use, stored after every definition."""
  return _spill_with(code, r, unspillable, lambda t: MInst("scratch_load_b32", {"vdst": t}, {}, offset=offset, spill=True),
                     lambda t: MInst("scratch_store_b32", {}, {"data": t}, offset=offset, spill=True))


def _spill_agpr(code: list[MInst], r: VReg, a: VReg, unspillable: set) -> list[MInst]:
  """r kept in AccVGPR `a` (CDNA3 ISA V_ACCVGPR_WRITE_B32: AccVGPR vdst = VGPR src0; V_ACCVGPR_READ_B32: VGPR vdst =
  AccVGPR src0): written right after every definition, read into a fresh temporary right before every use."""
  return _spill_with(code, r, unspillable, lambda t: MInst("v_accvgpr_read_b32", {"vdst": t}, {"src0": a}, spill=True),
                     lambda t: MInst("v_accvgpr_write_b32", {"vdst": a}, {"src0": t}, spill=True))


def _spill_with(code: list[MInst], r: VReg, unspillable: set, reload, store) -> list[MInst]:
  """r replaced by a fresh temporary in every instruction that reads or writes it: reload(t) before a read,
  store(t) after a write (the temporaries are never spilled themselves)."""
  out = []
  for m in code:
    if any(v is r for v in m.uses.values()):
      t = VReg("v")
      unspillable.add(t)
      out.append(reload(t))
      m.uses = {k: (t if v is r else v) for k, v in m.uses.items()}
    if any(v is r for v in m.defs.values()):
      t = VReg("v")
      unspillable.add(t)
      m.defs = {k: (t if v is r else v) for k, v in m.defs.items()}
      out.append(m)
      out.append(store(t))
      continue
    out.append(m)
  return out


def _spill_sgpr(code: list[MInst], r: VReg, lane_vgpr: VReg, lane: int, unspillable: set) -> list[MInst]:
  """r (an SGPR or an SGPR pair: r.n consecutive lanes from `lane`) kept in lanes of lane_vgpr."""
  out = []
  for m in code:
    used = any((v.reg if isinstance(v, Sub) else v) is r for v in m.uses.values())
    if used:
      t = VReg("s", r.n)
      unspillable.add(t)
      for k in range(r.n):
        out.append(MInst("v_readlane_b32", {"vdst": Sub(t, k) if r.n > 1 else t},
                         {"src0": lane_vgpr, "src1": Imm(lane + k)}, spill=True))
      m.uses = {f: (t if v is r else Sub(t, v.k) if isinstance(v, Sub) and v.reg is r else v) for f, v in m.uses.items()}
    defined = [v for v in m.defs.values() if (v.reg if isinstance(v, Sub) else v) is r]
    if defined:
      t = t if used else VReg("s", r.n)
      unspillable.add(t)
      m.defs = {f: (t if v is r else Sub(t, v.k) if isinstance(v, Sub) and v.reg is r else v) for f, v in m.defs.items()}
      out.append(m)
      # only the lanes of the registers written (a Sub definition writes one half of a pair; the other lane keeps
      # its value); the lane VGPR is read (its other lanes kept) and written: it stays live from its first write on
      halves = sorted({v.k for v in defined if isinstance(v, Sub)}) if all(isinstance(v, Sub) for v in defined) \
          else range(r.n)
      for k in halves:
        out.append(MInst("v_writelane_b32", {"vdst": lane_vgpr}, {"src0": Sub(t, k) if r.n > 1 else t,
                                                                  "src1": Imm(lane + k)}, spill=True))
      continue
    out.append(m)
  return out


def _allocate(code: list[MInst], loops: list, sgprs: int = LIMITS["s"], align_tuples: bool = False) -> Allocation:
  iv = live_intervals(code, loops)
  limits = {"v": LIMITS["v"], "s": sgprs}
  free_after = {"v": [-1] * limits["v"], "s": [-1] * limits["s"]}
  used = {"v": 0, "s": 0}
  for r, (s, t) in iv.items():
    if r.cls == "a": continue      # AccVGPRs (spill slots) are placed by the spiller, not allocated
    if r.fixed is not None:
      for k in range(r.n): free_after[r.cls][r.fixed + k] = max(free_after[r.cls][r.fixed + k], t)
      used[r.cls] = max(used[r.cls], r.fixed + r.n)
  # in order of their start, the wider first at one start (a stable sort on one integer per interval: the same order as
  # sorting on (start, -n), without a Python key function per interval)
  todo = [(r, st) for r, st in iv.items() if r.fixed is None]
  keys = [st[0] * 1024 - r.n for r, st in todo]   # (a tuple of 1024 registers or more is refused below)
  for idx in sorted(range(len(todo)), key=keys.__getitem__):
    r, (s, t) = todo[idx]
    cls, n = r.cls, r.n
    fa = free_after[cls]
    if n == 1:   # (the usual value: the first register free before s)
      for base in range(0, limits[cls]):
        if fa[base] < s: break
      else: base = None
    else:
      if n >= 1024: raise CompileError(f"{r!r}: a register tuple of {n} registers")
      step = 2 if n == 2 or align_tuples else 1
      for base in range(0, limits[cls] - n + 1, step):
        if all(fa[base + k] < s for k in range(n)): break
      else: base = None
    if base is None:
      err = _NoRegister(cls, [(q, b) for q, (a, b) in iv.items() if q.cls == cls and a <= s <= b], s)
      err.ends = {q: b for q, b in err.live}
      raise err
    r.phys = base
    if n == 1: fa[base] = t
    else:
      for j in range(n): fa[base + j] = t
    if base + n > used[cls]: used[cls] = base + n
  return Allocation(used["v"], used["s"])
