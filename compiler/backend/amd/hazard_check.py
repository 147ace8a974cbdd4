"""An independent checker of the gfx11 hazards that render_hazards.fix_hazards resolves, over machine code bytes.

    from hcq.compiler.backend.amd.hazard_check import check_hazards
    check_hazards(text_bytes)   # -> [Violation(offset, rule, text)]; [] when the code is safe

It reads the code as the hardware would: decode.py's instructions (not the backend's machine IR), with the control
flow of the branches (a fixed point over every path, loops included), so it checks the fixer rather than repeating
it. The rules (AMD "RDNA3 Instruction Set Architecture", 4.5 "Manually Inserted Wait States (NOPs)", and the gfx11
hazards of LLVM's AMDGPU backend, GCNHazardRecognizer, that the ISA document describes by their s_waitcnt_depctr
remedies):

  trans-use       a VALU reads a VGPR that a transcendental VALU (v_exp/log/rcp/rsq/sqrt/sin/cos, any type) wrote,
                  with at most TRANS_USE_MAX_VALUS (5) VALU instructions between them and no s_waitcnt_depctr
                  va_vdst(0) (LLVM's fixVALUTransUseHazard; its expiry after a second TRANS in between is not
                  modelled: conservative)
  mask-write      a VALU reads an SGPR as a lane mask (v_cndmask's mask, the carry-in of v_add/v_sub_co_ci, VCC of
                  v_div_fmas); an SALU then writes that SGPR: until an s_waitcnt_depctr sa_sdst(0), no VALU may
                  issue and nothing may read the SGPR
  exec-forward    (partial VALU forwarding) a VALU writes a VGPR, an SALU writes EXEC, and a VALU reads that VGPR,
                  with no s_waitcnt_depctr va_vdst(0) after the EXEC write
  mad-overlap     (gfx1100-1103 MAD intra-instruction forwarding, LLVM's FeatureMADIntraFwdBug) the destination of
                  v_mad_u64_u32 / v_mad_i64_i32 overlaps one of its sources; no wait fixes it, the registers must
                  differ (the backend's allocator never reuses a register within one instruction)

gfx11 hazards this backend never meets (it emits none of the instructions involved), hence not checked: v_cmpx
followed by v_permlane (VcmpxPermlane),
writing EXEC after VALU reads of it (VcmpxExecWAR), LDS-direct/parameter loads, WMMA, and the gfx9/gfx10-only ones
(VALU SGPR writes read by VMEM/v_readlane lane selects or v_div_fmas's VCC, SMEM/VMEM writes over SGPRs a VMEM/SMEM
reads, LDS-branch-VMEM): gfx11 interlocks those data dependences in hardware (LLVM: hasNoDataDepHazard).
s_delay_alu is not a hazard remedy on gfx11 but a scheduling hint (the hardware interlocks ALU dependences without
it, later): the backend emits none and nothing here asks for one.
"""
from __future__ import annotations

from typing import NamedTuple

from ...isa.amd.decode import decode_all

TRANS_PREFIXES = ("v_exp_", "v_log_", "v_rcp_", "v_rsq_", "v_sqrt_", "v_sin_", "v_cos_")
# the trans-use hazard is live while at most this many VALUs sit between the transcendental write and the read
# (LLVM GCNHazardRecognizer::fixVALUTransUseHazard); render_hazards.fix_hazards uses the same constant
TRANS_USE_MAX_VALUS = 5
VCC, EXEC_LO = 106, 126
WRITE_FIELDS = ("vdst", "sdst", "sdata")
_BRANCHES = ("s_branch", "s_cbranch_")


class Violation(NamedTuple):
  offset: int
  rule: str
  text: str

  def __str__(self): return f"0x{self.offset:x}: {self.rule}: {self.text}"


def _regs(ops, kind):
  return {(kind, o.index + k) for o in ops if o.kind == kind for k in range(o.count)}


class _Inst:
  """What the rules need of one decoded instruction."""
  def __init__(self, inst):
    self.inst, self.name, self.offset = inst, inst.name, inst.offset
    enc = inst.encoding
    self.valu = inst.name.startswith("v_")
    self.salu = enc in ("SOP1", "SOP2", "SOPK", "SOPC")
    writes = [o for o in inst.operands if o.field in WRITE_FIELDS and not (enc == "SOPK" and o.field == "simm16")]
    reads = [o for o in inst.operands if o not in writes]
    if inst.name.startswith(("global_store", "scratch_store", "ds_store", "flat_store")):
      reads, writes = list(inst.operands), []
    self.vreads, self.vwrites = _regs(reads, "vgpr"), _regs(writes, "vgpr")
    self.sreads = _regs(reads, "sgpr") | {("sgpr", o.index) for o in reads if o.kind == "special" and o.index == VCC}
    self.swrites = _regs(writes, "sgpr") | {("sgpr", o.index) for o in writes if o.kind == "special" and o.index == VCC}
    self.mask_reads = set()
    n = inst.name
    if n.startswith(("v_cndmask_b32", "v_add_co_ci_u32", "v_sub_co_ci_u32", "v_subrev_co_ci_u32")):
      if n.endswith("_e64"): self.mask_reads = {("sgpr", o.index) for o in inst.operands if o.field == "src2"}
      else: self.mask_reads = {("sgpr", VCC)}
    elif n.startswith("v_div_fmas"): self.mask_reads = {("sgpr", VCC)}
    self.sreads |= self.mask_reads
    if enc == "VOPC" or n.startswith(("v_add_co_ci_u32_e32", "v_sub_co_ci_u32_e32")): self.swrites.add(("sgpr", VCC))
    self.writes_exec = self.salu and (any(o.field == "sdst" and o.kind == "special" and o.index == EXEC_LO
                                          for o in inst.operands) or "saveexec" in n or "wrexec" in n)
    self.trans = self.valu and n.startswith(TRANS_PREFIXES)
    # s_wait_alu is RDNA4's name for s_waitcnt_depctr (the same simm16 fields)
    self.depctr = inst.fields.get("simm16") if n in ("s_waitcnt_depctr", "s_wait_alu") else None
    # SGPRs as 64-bit pairs (gfx12 rules), VCC and EXEC included
    spec = lambda ops: {o.index >> 1 for o in ops if o.kind == "special" and o.index in (VCC, EXEC_LO)}
    self.pair_reads = {r >> 1 for _, r in _regs(reads, "sgpr")} | spec(reads) | {r >> 1 for _, r in self.mask_reads}
    self.pair_writes = {r >> 1 for _, r in _regs(writes, "sgpr")} | spec(writes) | \
        ({VCC >> 1} if ("sgpr", VCC) in self.swrites else set())

  @property
  def waits_va_vdst(self): return self.depctr is not None and (self.depctr >> 12) & 0xF == 0

  @property
  def waits_sa_sdst(self): return self.depctr is not None and self.depctr & 1 == 0

  @property
  def waits_va_sdst(self): return self.depctr is not None and (self.depctr >> 9) & 7 == 0

  @property
  def waits_va_vcc(self): return self.depctr is not None and (self.depctr >> 1) & 1 == 0


class _State(NamedTuple):
  trans: tuple        # ((vgpr, VALUs since a trans wrote it), ...): the fewest on any path
  mask_read: frozenset    # SGPRs read as lane masks by VALUs since the last sa_sdst(0)
  mask_dirty: frozenset   # of those, written by an SALU since
  written: frozenset      # VGPRs written by VALUs since the last va_vdst(0)
  pre_exec: frozenset     # VGPRs written before an SALU EXEC write not followed by va_vdst(0)

  def merge(self, o: "_State") -> "_State":
    t = dict(self.trans)
    for r, n in o.trans: t[r] = min(n, t.get(r, n))
    return _State(tuple(sorted(t.items())), self.mask_read | o.mask_read, self.mask_dirty | o.mask_dirty,
                  self.written | o.written, self.pre_exec | o.pre_exec)


EMPTY = _State((), frozenset(), frozenset(), frozenset(), frozenset())


def _step(i: _Inst, st: _State, report) -> _State:
  trans, mask_read, dirty, written, pre_exec = dict(st.trans), set(st.mask_read), set(st.mask_dirty), set(st.written), \
      set(st.pre_exec)
  if i.waits_va_vdst: trans, written, pre_exec = {}, set(), set()
  if i.waits_sa_sdst: mask_read, dirty = set(), set()
  if i.valu:
    for r in sorted(i.vreads):
      if r in trans and trans[r] <= TRANS_USE_MAX_VALUS:
        report(i, "trans-use", f"v{r[1]} read {trans[r]} VALU instructions after a transcendental wrote it")
      if r in pre_exec: report(i, "exec-forward", f"v{r[1]} written by a VALU before an SALU EXEC write")
    if dirty: report(i, "mask-write", f"VALU issued while s{sorted(dirty)[0][1]} (written by an SALU over a lane mask "
                                      f"read) is not waited for")
    trans = {r: n + 1 for r, n in trans.items() if n + 1 <= TRANS_USE_MAX_VALUS}   # past it: safe (a fixed point)
  if i.name.startswith(("v_mad_u64_u32", "v_mad_i64_i32")) and i.vwrites & i.vreads:
    report(i, "mad-overlap", f"the destination overlaps a source (v{sorted(i.vwrites & i.vreads)[0][1]})")
  for r in sorted(i.sreads & dirty):
    report(i, "mask-write", f"s{r[1]} read before an sa_sdst(0) wait after an SALU rewrote a lane mask")
  if i.valu:
    mask_read |= i.mask_reads
    written |= i.vwrites
    for r in i.vwrites:
      if i.trans: trans[r] = 0
      else: trans.pop(r, None)
  if i.salu:
    dirty |= i.swrites & mask_read
    if i.writes_exec: pre_exec |= written
  return _State(tuple(sorted(trans.items())), frozenset(mask_read), frozenset(dirty), frozenset(written),
                frozenset(pre_exec))


class _State12(NamedTuple):
  """gfx1200: SGPR pairs VALUs read since the last sa_sdst(0), of those the ones an SALU wrote since, and the pairs
  VALUs wrote since the last va_sdst(0)."""
  valu_read: frozenset
  dirty: frozenset
  valu_wrote: frozenset

  def merge(self, o: "_State12") -> "_State12":
    return _State12(self.valu_read | o.valu_read, self.dirty | o.dirty, self.valu_wrote | o.valu_wrote)


EMPTY12 = _State12(frozenset(), frozenset(), frozenset())


def _step12(i: _Inst, st: _State12, report) -> _State12:
  """RDNA4's VALU/SALU SGPR hazards (render_hazards.fix_hazards_gfx12 names the source):
  sgpr-rw   a VALU reads an SGPR pair, an SALU writes it, then any instruction reads it before s_wait_alu sa_sdst(0)
  va-sdst   a VALU writes an SGPR pair (VCC included), then an SALU reads it before s_wait_alu va_sdst(0) (va_vcc(0)
            also clears VCC)."""
  valu_read, dirty, wrote = set(st.valu_read), set(st.dirty), set(st.valu_wrote)
  if i.waits_sa_sdst: valu_read, dirty = set(), set()
  if i.waits_va_sdst: wrote = set()
  if i.waits_va_vcc: wrote.discard(VCC >> 1)
  for p in sorted(i.pair_reads & dirty):
    report(i, "sgpr-rw", f"s[{2 * p}:{2 * p + 1}] read after an SALU rewrote it over a VALU read, with no "
                         f"s_wait_alu sa_sdst(0) between")
  if i.salu:
    for p in sorted(i.pair_reads & wrote):
      report(i, "va-sdst", f"SALU reads s[{2 * p}:{2 * p + 1}] that a VALU wrote, with no s_wait_alu va_sdst(0) between")
    dirty |= i.pair_writes & valu_read
  if i.valu:
    valu_read |= i.pair_reads
    wrote |= i.pair_writes
  return _State12(frozenset(valu_read), frozenset(dirty), frozenset(wrote))


# gfx942 (CDNA3): wait states a reader needs after a writer (render_hazards.GFX9_WAITS names LLVM's sources).
# AccVGPR operands decode as kind "agpr", apart from the VGPRs: v_accvgpr_write_b32 reads a VGPR like any VALU,
# v_accvgpr_read_b32 writes one; gfx908's AccVGPR-only wait states do not apply (render_hazards, gfx942 section).
GFX9_WAITS = {"vmem-sgpr": 5, "lane-select": 4, "div-fmas-vcc": 4, "trans-forward": 1}
_VMEM = ("global_", "scratch_", "flat_", "buffer_")


class _State9(NamedTuple):
  """gfx942: ((rule, register), wait states since the write), the fewest on any path."""
  since: tuple

  def merge(self, o: "_State9") -> "_State9":
    d = dict(self.since)
    for k, n in o.since: d[k] = min(n, d.get(k, n))
    return _State9(tuple(sorted(d.items())))


EMPTY9 = _State9(())


def _step9(i: _Inst, st: _State9, report) -> _State9:
  """CDNA3's wait-state hazards: vmem-sgpr (VALU SGPR write, VMEM read: 5), lane-select (VALU SGPR write, v_readlane
  / v_writelane lane select: 4), div-fmas-vcc (VALU VCC write, v_div_fmas: 4), trans-forward (transcendental VGPR
  write, non-transcendental VALU read: 1). s_nop N is N + 1 wait states, any other instruction one."""
  since = dict(st.since)
  def need(rule, regs):
    for r in sorted(regs):
      n = since.get((rule, r))
      if n is not None and n < GFX9_WAITS[rule if rule != "valu-sgpr" else "vmem-sgpr"]:
        yield r, n
  if i.name.startswith(_VMEM):
    for r, n in need("valu-sgpr", i.sreads):
      report(i, "vmem-sgpr", f"s{r[1]} written by a VALU {n} wait states before (5 needed)")
  if i.name.startswith(("v_readlane", "v_writelane")):
    sel = {("sgpr", o.index) for o in i.inst.operands if o.field == "src1" and o.kind == "sgpr"}
    for r, n in need("valu-sgpr", sel):
      if n < GFX9_WAITS["lane-select"]:
        report(i, "lane-select", f"lane select s{r[1]} written by a VALU {n} wait states before (4 needed)")
  if i.name.startswith("v_div_fmas"):
    n = since.get(("vcc", ("sgpr", VCC)))
    if n is not None and n < GFX9_WAITS["div-fmas-vcc"]:
      report(i, "div-fmas-vcc", f"VCC written by a VALU {n} wait states before (4 needed)")
  if i.valu and not i.trans:
    for r in sorted(i.vreads):
      n = since.get(("trans", r))
      if n is not None and n < GFX9_WAITS["trans-forward"]:
        report(i, "trans-forward", f"v{r[1]} written by a transcendental {n} wait states before (1 needed)")
  ws = (i.inst.fields.get("simm16", 0) & 0xF) + 1 if i.name == "s_nop" else 1
  since = {k: n + ws for k, n in since.items() if n + ws < 5}
  if i.valu:
    for r in i.swrites: since[("valu-sgpr", r)] = 0
    if ("sgpr", VCC) in i.swrites or i.name.startswith("v_div_scale"): since[("vcc", ("sgpr", VCC))] = 0
    for r in i.vwrites:
      if i.trans: since[("trans", r)] = 0
      else: since.pop(("trans", r), None)
  return _State9(tuple(sorted(since.items())))


def check_hazards(code: bytes, arch: str = "gfx1100") -> list[Violation]:
  """The hazards in machine code (a kernel's .text from its entry, or any instruction sequence): gfx11's rules,
  RDNA4's SGPR rules for arch "gfx1200", CDNA3's wait states for "gfx942"."""
  insts = [_Inst(x) for x in decode_all(code, arch=arch)]
  step, empty = {"gfx1200": (_step12, EMPTY12), "gfx942": (_step9, EMPTY9)}.get(arch, (_step, EMPTY))
  at = {x.offset: k for k, x in enumerate(insts)}

  def succs(k):
    x = insts[k]
    out = []
    if x.name.startswith(_BRANCHES):
      tgt = x.offset + 4 + 4 * x.inst.fields["simm16"] if x.inst.fields["simm16"] < 0x8000 else \
          x.offset + 4 + 4 * (x.inst.fields["simm16"] - 0x10000)
      if tgt in at: out.append(at[tgt])
      if x.name == "s_branch": return out
    if x.name.startswith(("s_endpgm", "s_code_end", "s_setpc", "s_trap")): return out
    return out + ([k + 1] if k + 1 < len(insts) else [])

  state_in: dict = {0: empty} if insts else {}
  work = [0] if insts else []
  while work:
    k = work.pop()
    out = step(insts[k], state_in[k], lambda *a: None)
    for s in succs(k):
      new = out if s not in state_in else state_in[s].merge(out)
      if s not in state_in or new != state_in[s]:
        state_in[s] = new
        work.append(s)
  found: dict = {}
  for k in sorted(state_in):
    step(insts[k], state_in[k], lambda i, rule, text: found.setdefault((i.offset, rule), Violation(i.offset, rule,
                                                                                                    f"{i.inst}: {text}")))
  return sorted(found.values())
