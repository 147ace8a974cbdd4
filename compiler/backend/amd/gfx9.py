"""gfx942 (CDNA3, MI300) from the RDNA3 backend's machine IR: wave64 and the gfx9 encodings.

    code = widen_masks(code)       # before register allocation: lane masks become SGPR pairs, their SALU ops _b64
    code = legalize(code)          # before register allocation: no VOP3 literals, one constant-bus read, no null
    code = insert_waitcnt(code)    # after it: gfx9 s_waitcnt (VM_CNT counts stores too; LGKM_CNT up to 15)
    code = fix_hazards(code)       # s_nop wait states (hazards.py rules for gfx942)
    code = rename(code)            # gfx9 mnemonics (global_load_dword, ds_read_b32, v_add_u32, s_andn2_b64, ...)

Facts (AMD "AMD Instinct MI300 Instruction Set Architecture" (CDNA3 ISA), and LLVM AMDGPUUsage for gfx942):
- wave64: EXEC and VCC are 64-bit (s[126:127], s[106:107]); a VALU compare writes a 64-bit lane mask to an SGPR pair
  or VCC, v_cndmask / v_addc_co_u32 read one, and the SALU combines them with the _b64 operations
  (s_and_saveexec_b64, s_and_b64 exec, ...).
- VOP3 has no literal constant on gfx9 (a 32-bit literal follows only VOP1/VOP2/VOPC/SOP* words), and a VALU
  instruction reads at most one scalar value (SGPR, VCC, EXEC or literal: the constant bus of gfx9, two from gfx10 on).
- There is no null SGPR (124 is M0 on gfx9): an unused carry-out gets a register pair of its own; SMEM takes its
  offset with IMM=1 (SOFFSET_EN for an SGPR offset); FLAT/GLOBAL/SCRATCH say "no SGPR base" with SADDR 0x7f.
- s_waitcnt simm16 (CDNA3 ISA S_WAITCNT): vmcnt [3:0] + [15:14], expcnt [6:4], lgkmcnt [11:8] (at most 15). VM_CNT
  counts vector memory loads and stores, returned in order: a wait for a load counts the stores issued after it.
- Addressable SGPRs s0..s101 (AMDGPUUsage: gfx9 has 102; FLAT_SCRATCH and XNACK_MASK sit above), VGPR tuples
  even-aligned (gfx90a+, AMDGPUUsage "VGPR and AGPR tuples must be 64-bit aligned").
"""
from __future__ import annotations

import re

from ...isa.amd.asm import waitcnt_simm16_gfx9
from .isel_common import is_inline, operand_kind
from .waits import insert_counter_waits
from .isel_mir import EXEC_LO, NULL, VCC_LO, Imm, MInst, Spec, Sub, VReg

LGKM_MAX, VM_MAX = 15, 63
SGPRS = 102
# AccVGPRs a0..a255 (MI300 ISA "Vector GPRs": 256 ArchVGPRs and 256 AccVGPRs per lane in the unified 512-register
# file): the register allocator's spill slots before scratch (regalloc._spill_agpr)
AGPRS = 256

# SALU bitwise operations that act on lane masks: their _b64 forms (CDNA3 ISA SOP1/SOP2)
_MASK_OPS = {"s_and_b32", "s_or_b32", "s_xor_b32", "s_xnor_b32", "s_nand_b32", "s_nor_b32", "s_not_b32", "s_mov_b32",
             "s_and_not1_b32", "s_or_not1_b32", "s_cselect_b32", "s_and_saveexec_b32", "s_or_saveexec_b32"}
_MASK_READERS = ("v_cndmask_b32", "v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32")   # src2


def _vreg(x):
  if isinstance(x, Sub): return x.reg
  return x if isinstance(x, VReg) else None


def widen_masks(code: list[MInst]) -> list[MInst]:
  """Lane masks (compare results, carries, saved EXEC, and what SALU bitwise operations make of them) become SGPR
  pairs; the SALU operations on them or on EXEC/VCC their _b64 forms."""
  masks: set = set()
  # the SALU mask operations with their SGPR operands and whether they touch EXEC/VCC, gathered in the same walk
  mask_ops = []
  specials = False
  for m in code:
    name = m.name
    if name in _MASK_OPS:
      ops = (*m.defs.values(), *m.uses.values())
      special = False
      for r in ops:
        if r.__class__ is Spec and r.code in (EXEC_LO, VCC_LO): specials = special = True; break
      mask_ops.append((m, ops, special))
      continue   # (an SALU operation: none of the VALU tests below applies)
    if not name.startswith("v_"): continue
    if name.startswith("v_cmp") and isinstance(m.defs.get("vdst"), VReg) and m.defs["vdst"].cls == "s":
      masks.add(m.defs["vdst"])
    sd = m.defs.get("sdst")
    if isinstance(sd, VReg): masks.add(sd)
    if name.startswith(_MASK_READERS) and isinstance(m.uses.get("src2"), VReg): masks.add(m.uses["src2"])
  if not masks and not specials: return code   # (no lane mask anywhere: a scalar kernel's SALU arithmetic)
  mask_ops = [(m, ops, [r for r in ops if r.__class__ is VReg and r.cls == "s"], special) for m, ops, special in mask_ops]
  # the least set containing those masks in which every operation that touches EXEC/VCC or a mask has all its SGPRs:
  # a worklist over the operations each register appears in (each operation is taken at most once)
  ops_of: dict = {}
  for k, (m, ops, regs, special) in enumerate(mask_ops):
    for r in regs:
      if r in ops_of: ops_of[r].append(k)
      else: ops_of[r] = [k]
  taken = [special for _, _, _, special in mask_ops]
  work = [k for k, t in enumerate(taken) if t]
  for r in masks: work.extend(ops_of.get(r, ()))
  while work:
    k = work.pop()
    taken[k] = True
    for r in mask_ops[k][2]:
      if r not in masks:
        masks.add(r)
        for j in ops_of[r]:
          if not taken[j]: work.append(j)
  for r in masks:
    if r.n != 1 and r.n != 2: raise ValueError(f"gfx942: lane mask {r!r} of {r.n} registers")
    r.n = 2
  if masks or any(taken):
    for m, ops, regs, special in mask_ops:
      if special or any(isinstance(r, VReg) and r in masks for r in ops):
        m.name = m.name[:-3] + "b64"
  return code


def _is_sgpr(x) -> bool:
  return (isinstance(x, VReg) and x.cls == "s") or (isinstance(x, Sub) and x.reg.cls == "s") or \
      (isinstance(x, Spec) and x.code in (EXEC_LO, VCC_LO))


def _key(x):
  return ("sub", id(x.reg), x.k) if isinstance(x, Sub) else ("reg", id(x)) if isinstance(x, VReg) else ("spec", x.code)


def legalize(code: list[MInst], tables) -> list[MInst]:
  """VOP3 literals into VGPRs (v_mov_b32_e32, which may take one), scalar sources past the first into VGPRs, a
  fresh SGPR pair for a null carry-out."""
  out: list[MInst] = []
  for m in code:
    if not m.name.startswith("v_") or m.name.startswith(("v_readlane", "v_writelane", "v_readfirstlane")):
      out.append(m)
      continue
    name = gfx9_name(m.name, tables)
    enc = tables.by_name.get(name, ("?",))[0]
    vop3 = enc in ("VOP3", "VOP3SD", "VOP3P")
    if m.defs.get("sdst") == Spec(NULL): m.defs = dict(m.defs, sdst=VReg("s", 2))
    kind = operand_kind(m.name)
    order = ["src2", "src0", "src1"] if m.name.startswith(_MASK_READERS) else ["src0", "src1", "src2"]
    bus: set = set()
    uses = dict(m.uses)
    for f in order:
      x = uses.get(f)
      if x is None: continue
      if isinstance(x, Imm) and not is_inline(x, kind):
        if vop3 or bus or m.name.startswith("v_cndmask"):
          t = VReg("v")
          out.append(MInst("v_mov_b32_e32", {"vdst": t}, {"src0": x}))
          uses[f] = t
        else: bus.add(("lit", x.bits))
      elif _is_sgpr(x):
        k = _key(x)
        if bus and k not in bus:
          n = x.n if isinstance(x, VReg) else 1
          t = VReg("v", n)
          if n == 2:
            for j in range(2): out.append(MInst("v_mov_b32_e32", {"vdst": Sub(t, j)}, {"src0": Sub(x, j)}))
          else: out.append(MInst("v_mov_b32_e32", {"vdst": t}, {"src0": x}))
          uses[f] = t
        else: bus.add(k)
    m.uses = uses
    out.append(m)
  return out


# ---------------------------------------------------------------------------------------------------- s_waitcnt
def waitcnt_simm16(vm: int = VM_MAX, lgkm: int = LGKM_MAX) -> int:
  """CDNA3 ISA S_WAITCNT: vmcnt [3:0] and [15:14], expcnt [6:4] (7: no wait), lgkmcnt [11:8]."""
  return (vm & 0xF) | 7 << 4 | lgkm << 8 | (vm >> 4) << 14


def insert_waitcnt(code: list[MInst]) -> list[MInst]:
  """CDNA3: VM_CNT counts stores too; vmcnt up to 63, lgkmcnt up to 15 (waits.py)."""
  return insert_counter_waits(code, lambda vm, lgkm: MInst("s_waitcnt", simm16=waitcnt_simm16(vm, lgkm)), VM_MAX,
                              LGKM_MAX, stores_on_vm=True)


# ---------------------------------------------------------------------------------------------------- names
_MEM = {"b32": "dword", "b64": "dwordx2", "b96": "dwordx3", "b128": "dwordx4", "b256": "dwordx8", "u8": "ubyte",
        "i8": "sbyte", "u16": "ushort", "i16": "sshort", "b8": "byte", "b16": "short"}
_RENAMES = {"v_add_nc_u32": "v_add_u32", "v_sub_nc_u32": "v_sub_u32", "v_subrev_nc_u32": "v_subrev_u32",
            "v_add_co_ci_u32": "v_addc_co_u32", "v_sub_co_ci_u32": "v_subb_co_u32",
            "v_subrev_co_ci_u32": "v_subbrev_co_u32", "v_clz_i32_u32": "v_ffbh_u32", "v_cls_i32": "v_ffbh_i32",
            "v_ctz_i32_b32": "v_ffbl_b32", "s_and_not1_b32": "s_andn2_b32", "s_and_not1_b64": "s_andn2_b64",
            "s_or_not1_b32": "s_orn2_b32", "s_or_not1_b64": "s_orn2_b64"}
_SUFFIX = re.compile(r"(_e32|_e64)$")


_NAMES: dict = {}   # (arch, RDNA3 mnemonic) -> gfx9_name's answer (a kernel repeats its few mnemonics)


def gfx9_name(name: str, tables) -> str:
  """The gfx942 mnemonic of an RDNA3 one."""
  key = (tables.arch, name)
  got = _NAMES.get(key)
  if got is None: got = _NAMES[key] = _gfx9_name(name, tables)
  return got


def _gfx9_name(name: str, tables) -> str:
  if name.startswith(("global_", "scratch_")):
    op, _, ty = name.rpartition("_")
    return f"{op}_{_MEM.get(ty, ty)}"
  if name.startswith("ds_load_"): return "ds_read_" + name[8:]
  if name.startswith("ds_store_"): return "ds_write_" + name[9:]
  if name.startswith("s_load_b"): return "s_load_" + _MEM[name[7:]]
  sfx = _SUFFIX.search(name)
  base, suffix = (name[:sfx.start()], sfx[0]) if sfx else (name, "")
  base = _RENAMES.get(base, base)
  for cand in (base + suffix, base + "_e64", base):
    if cand in tables.by_name: return cand
  return base + suffix


def rename(code: list[MInst], tables) -> list[MInst]:
  names: dict = {}   # this kernel's few mnemonics (gfx9_name caches across kernels by target and name)
  for m in code:
    name = m.name
    if name != "LABEL":
      new = names.get(name)
      if new is None: new = names[name] = gfx9_name(name, tables)
      m.name = new
  return code
