"""gfx11 hazards the hardware does not resolve by itself, fixed conservatively after register allocation with
s_waitcnt_depctr (SOPP; simm16 fields per the RDNA3 ISA "S_WAITCNT_DEPCTR": va_vdst [15:12], sa_sdst [0]).

  trans use         a transcendental VALU (v_exp/v_log/v_rcp/v_rsq/v_sqrt/v_sin/v_cos) writes a VGPR that a later
                    VALU reads with at most 5 other VALU instructions issued in between (TRANS_USE_MAX_VALUS):
                    wait va_vdst(0) before the reader (RDNA3 ISA 4.5 "Manually Inserted Wait States", transcendental
                    result forwarding; LLVM GCNHazardRecognizer's fixVALUTransUseHazard)
  mask write        an SALU writes an SGPR that a VALU read earlier as a lane mask (v_cndmask's src2, the carry-in
                    src2 of v_add_co_ci / v_sub_co_ci, VCC of v_div_fmas): wait sa_sdst(0) right after the SALU write
                    (LLVM GCNHazardRecognizer's gfx11 VALUMaskWriteHazard)
  exec forwarding   after an SALU/SOP1 write of EXEC, wait va_vdst(0) so that no VALU result produced under the old
                    mask is forwarded to a VALU running under the new one

  MAD forwarding    (gfx1100-1103) v_mad_u64_u32 / v_mad_i64_i32 must not write a register they read: no wait, the
                    allocator (regalloc.py) never gives a destination a register a source of the same instruction
                    still holds

The emulator does not model these (it runs one instruction at a time); they matter on a real gfx1100. Each wait
costs one instruction; the tests count them separately from the benchmark's loops (which have none).
hazard_check.py checks the result independently (decoded bytes, every control-flow path) and lists the gfx11 hazards
this backend cannot meet; tests/backend/test_amd_hazards.py runs it over every kernel the tests compile.
"""
from __future__ import annotations

from ...isa.amd.asm import depctr_simm16
from .hazard_check import TRANS_USE_MAX_VALUS
from .isel_mir import EXEC_LO, VCC_LO, MInst, Spec, Sub, VReg

VA_VDST0 = depctr_simm16(va_vdst=0)   # 0x0f9f: llvm-mc-19 encodes s_waitcnt_depctr depctr_va_vdst(0) [0x9f,0x0f,0x88,0xbf]
SA_SDST0 = depctr_simm16(sa_sdst=0)   # 0xff9e: llvm-mc-19 encodes s_waitcnt_depctr depctr_sa_sdst(0) [0x9e,0xff,0x88,0xbf]
_TRANS = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
_MASK_READERS = ("v_cndmask", "v_add_co_ci", "v_sub_co_ci", "v_subrev_co_ci")   # src2 is a lane mask (or carry)


def _depctr(value: int) -> MInst: return MInst("s_waitcnt_depctr", simm16=value)


def _is_valu(m: MInst) -> bool: return m.name.startswith("v_")


def _phys(r: VReg):
  return {(r.cls, r.phys + k) for k in range(r.n)}


def fix_hazards(code: list[MInst]) -> list[MInst]:
  out: list[MInst] = []
  trans: dict = {}          # (cls, reg) -> VALU instructions issued since a transcendental wrote it
  masks: set = set()        # SGPRs read as lane masks by VALUs since the last sa_sdst(0) wait
  kinds = _KINDS
  for m in code:
    if m.name == "LABEL":
      trans = {k: 0 for k in trans}   # a join: assume the shortest distance
      out.append(m)
      continue
    kind = kinds.get(m.name)
    if kind is None: kind = kinds[m.name] = _kind(m.name)
    valu, mask_reader, div_fmas, transcendental, salu, saveexec = kind
    if valu:
      if trans:   # (no transcendental result pending: nothing to wait for)
        reads = set().union(*[_phys(r) for r in m.regs_used()]) if m.regs_used() else set()
        if any(r in trans and trans[r] <= TRANS_USE_MAX_VALUS for r in reads):
          out.append(_depctr(VA_VDST0))
          trans.clear()
        for k in trans: trans[k] += 1
      mask = m.uses.get("src2") if mask_reader else None
      if isinstance(mask, VReg) and mask.cls == "s": masks |= _phys(mask)
      if div_fmas: masks.add(("s", VCC_LO))
    out.append(m)
    if transcendental:
      for r in m.regs_defined(): trans.update({k: 0 for k in _phys(r)})
    if salu:
      if masks and m.defs:
        written = set().union(*[_phys(r) for r in m.regs_defined()]) if m.regs_defined() else set()
        if written & masks:
          out.append(_depctr(SA_SDST0))
          masks.clear()
      if not saveexec:   # (a write of EXEC_LO: a loop, not a generator, over the one or two definitions)
        for d in m.defs.values():
          if d.__class__ is Spec and d.code == EXEC_LO: saveexec = True; break
      if saveexec:
        out.append(_depctr(VA_VDST0))
        trans.clear()
  return out


_KINDS: dict[str, tuple] = {}   # mnemonic -> what fix_hazards asks of it (by prefix, once per mnemonic)


def _kind(name: str) -> tuple:
  valu = name.startswith("v_")
  return (valu, valu and name.startswith(_MASK_READERS), valu and name.startswith("v_div_fmas"),
          valu and name.startswith(_TRANS), not valu and name.startswith("s_"), name.startswith("s_and_saveexec"))


# ---------------------------------------------------------------------------------------------------- gfx1200
# RDNA4 drops the gfx11-only rules above (LLVM 19's GCNHazardRecognizer applies fixVALUTransUseHazard,
# fixVALUMaskWriteHazard and the partial-forwarding fix to GFX11 only; clang-19 -mcpu=gfx1200 places no s_wait_alu for
# a v_rcp result read by the next VALU) and has SGPR hazards between the VALU and SALU instead, fixed with s_wait_alu
# (the s_waitcnt_depctr fields under RDNA4's name), after LLVM's GFX12 fixVALUReadSGPRHazard (LLVM 20+):
#   sgpr-rw   a VALU reads an SGPR, an SALU then writes it (SGPRs as 64-bit pairs), and a VALU or SALU reads it:
#             wait sa_sdst(0) right after the SALU write
#   va-sdst   a VALU writes an SGPR (a compare's lane mask, a carry-out, VCC), an SALU reads it: wait va_sdst(0) and
#             va_vcc(0) before the SALU reader (conservative: the hardware tracks VALU SGPR writes by these counters)
# hazard_check.check_hazards(code, "gfx1200") checks both over the bytes.
VA_SDST0 = depctr_simm16(va_sdst=0, va_vcc=0)   # 0xf1fd


def _pairs(r) -> set:
  if isinstance(r, Spec): return {r.code >> 1}
  return {(r.phys + k) >> 1 for k in range(r.n)} if r.cls == "s" else set()


def _sgpr_operands(ops: dict) -> set:
  out: set = set()
  for x in ops.values():
    t = x.__class__
    if t is VReg:
      if x.cls == "s":
        if x.n == 1: out.add(x.phys >> 1)
        else: out |= _pairs(x)
    elif t is Sub:
      if x.reg.cls == "s": out.add((x.reg.phys + x.k) >> 1)
    elif t is Spec and x.code in (VCC_LO, EXEC_LO): out |= _pairs(x)
  return out


def fix_hazards_gfx12(code: list[MInst]) -> list[MInst]:
  out: list[MInst] = []
  valu_read: set | None = set()     # SGPR pairs VALUs read since the last sa_sdst(0); None: any (after a join)
  valu_wrote: set | None = set()    # SGPR pairs VALUs wrote since the last va_sdst(0); None: any
  hit = lambda regs, state: bool(regs) and (state is None or bool(regs & state))
  for m in code:
    if m.name == "LABEL":    # a join (a loop's back edge too): anything may be pending
      valu_read = valu_wrote = None
      out.append(m)
      continue
    if not valu_read and not valu_wrote and valu_read is not None and valu_wrote is not None and \
       not m.name.startswith("v_"):
      out.append(m)   # no VALU access pending and none made here: nothing to wait for, nothing to remember
      continue
    salu = m.name.startswith("s_") and not m.name.startswith(("s_load", "s_wait", "s_barrier", "s_endpgm", "s_branch",
                                                               "s_cbranch_scc", "s_code_end"))
    reads, writes = _sgpr_operands(m.uses), _sgpr_operands(m.defs)
    if m.name.startswith("s_cbranch_exec"): reads |= {EXEC_LO >> 1}
    if salu and hit(reads, valu_wrote):
      out.append(_depctr(VA_SDST0))
      valu_wrote = set()
    out.append(m)
    if _is_valu(m):
      if valu_read is not None: valu_read |= reads
      if valu_wrote is not None:
        valu_wrote |= writes
        if m.name.startswith(("v_cmp_", "v_add_co_ci", "v_sub_co_ci")) and m.name.endswith("_e32"):
          valu_wrote.add(VCC_LO >> 1)
    elif salu and hit(writes, valu_read):
      out.append(_depctr(SA_SDST0))
      valu_read = set()
  return out


# ---------------------------------------------------------------------------------------------------- gfx942
# CDNA3 hazards the hardware does not interlock, resolved with s_nop (s_nop N gives N + 1 wait states; every other
# instruction one) per LLVM's GCNHazardRecognizer for gfx940 and the CDNA3 ISA "Manually Inserted Wait States":
#   vmem-sgpr      a VALU writes an SGPR that a VMEM instruction (global/scratch/flat/buffer) reads: 5 wait states
#                  (checkVMEMHazards, VmemSgprWaitStates)
#   lane-select    a VALU writes an SGPR that v_readlane / v_writelane reads as its lane select: 4 (checkRWLaneHazards)
#   div-fmas-vcc   a VALU writes VCC that v_div_fmas reads: 4 (checkDivFMasHazards)
#   trans-forward  a transcendental VALU writes a VGPR that a non-transcendental VALU reads: 1 (gfx940
#                  hasTransForwardingHazard, TransDefWaitstates)
# hazard_check.check_hazards(code, "gfx942") checks them over the bytes.
# v_accvgpr_write_b32 / v_accvgpr_read_b32 (the AccVGPR spills, regalloc._spill_agpr) are VALU instructions: the rules
# above apply to them as to any VALU (a transcendental result moved to an AccVGPR: trans-forward). Their own wait
# states in GCNHazardRecognizer are gfx908's (checkMAIHazards908: AccVGPR write -> read 3; checkMAILdStHazards:
# AccVGPR read -> memory use 2, "On gfx90a+ relevant hazards are checked in checkMAIVALUHazards()") or follow MFMA/DOT
# writers (checkMAIHazards90A, checkMAIVALUHazards), which the backend does not emit: none to add on gfx942.
GFX9_WAITS = {"vmem-sgpr": 5, "lane-select": 4, "div-fmas-vcc": 4, "trans-forward": 1}
_VMEM = ("global_", "scratch_", "flat_", "buffer_")


def _phys_all(ops) -> set:
  out = set()
  for x in ops:
    if isinstance(x, Sub): out.add((x.reg.cls, x.reg.phys + x.k))
    elif isinstance(x, VReg): out |= {(x.cls, x.phys + k) for k in range(x.n)}
    elif isinstance(x, Spec) and x.code in (VCC_LO, EXEC_LO): out |= {("s", x.code), ("s", x.code + 1)}
  return out


def fix_hazards_gfx9(code: list[MInst]) -> list[MInst]:
  out: list[MInst] = []
  # (rule, register) -> the wait-state count `now` had when the write issued: now - written[k] wait states since
  # (a clock, not a counter per entry: issuing an instruction costs the same however many writes are remembered)
  written: dict = {}
  now = 0
  for m in code:
    if m.name == "LABEL":
      for k in written: written[k] = now    # a join: assume the write was just before
      out.append(m)
      continue
    need = 0
    name = m.name
    valu = name.startswith("v_")
    vmem = name.startswith(_VMEM)
    if written and (vmem or valu):
      reads = _phys_all(m.uses.values())
      if vmem:
        need = max([GFX9_WAITS["vmem-sgpr"] - (now - written[("vmem-sgpr", r)]) for r in reads
                    if ("vmem-sgpr", r) in written] + [0])
      if name.startswith(("v_readlane", "v_writelane")):
        sel = _phys_all([m.uses.get("src1")])
        need = max([need] + [GFX9_WAITS["lane-select"] - (now - written[("vmem-sgpr", r)]) for r in sel
                             if ("vmem-sgpr", r) in written])
      if name.startswith("v_div_fmas") and ("vcc", 0) in written:
        need = max(need, GFX9_WAITS["div-fmas-vcc"] - (now - written[("vcc", 0)]))
      if valu and not name.startswith(_TRANS):
        need = max([need] + [GFX9_WAITS["trans-forward"] - (now - written[("trans", r)]) for r in reads
                             if ("trans", r) in written])
    if need > 0:
      out.append(MInst("s_nop", simm16=need - 1))
      now += need
    out.append(m)
    now += 1
    if valu:
      writes = _phys_all(m.defs.values())
      for r in writes:
        if r[0] == "s": written[("vmem-sgpr", r)] = now
        if r[0] == "v":
          if name.startswith(_TRANS): written[("trans", r)] = now
          else: written.pop(("trans", r), None)
      if ("s", VCC_LO) in writes or name.startswith("v_div_scale") or \
         (name.startswith(("v_cmp", "v_add_co", "v_sub_co", "v_addc", "v_subb")) and name.endswith("_e32")):
        written[("vcc", 0)] = now
    if written: written = {k: t for k, t in written.items() if now - t < 8}   # older writes need no wait
  return out
