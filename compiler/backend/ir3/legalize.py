"""Sync flags and delay slots for an ir3 instruction list, as Mesa 25's ir3_legalize requires them.

Facts (Mesa 25 src/freedreno/ir3/ir3_legalize.c legalize_block / delay_update, ir3_delay.c ir3_src_read_delay,
ir3_compiler.c delay_slots; the mock's mockgpu/qcom/sync.py checks the same rules):
  - (ss) waits for the "short" asynchronous results: SFU (cat4) results and local-memory loads (ldl);
  - (sy) waits for the "long" ones: ldib (and every other non-local load);
  - a register written by one of them is read (or written again) only by an instruction carrying the flag;
  - write-after-read: a memory or SFU instruction may read its register sources late, so an ALU or SFU instruction
    overwriting one needs (ss) after a store or an SFU/ldl instruction, (ss) or (sy) after another load;
  - an ALU (cat1-3) result is read by an ALU instruction 3 cycles later (alu_to_alu), by anything else, and p0/a0 by
    anyone, 6 cycles later (non_alu); cat0-3 instructions take 1 cycle, a (rptN)nop N + 1, cat4/cat6 and
    br/jump none;
  - cat6 instructions have a (sy) bit but no (ss) bit: the flags go on a nop before them (as Mesa's computerator
    examples and tests/qcom/programs/reduce.asm do).
Control flow is legalized conservatively: before every label, branch, barrier and the end, a "(sy)(ss)(rptN)nop"
drains everything pending (every result ready, every flag taken), so each basic block starts from an idle pipeline
whichever way it is entered; a label's drain nop carries (jp), the join-point flag Mesa sets on branch targets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ALU_TO_ALU, NON_ALU = 3, 6          # Mesa 25 ir3_compiler.c: compiler->delay_slots.alu_to_alu / non_alu
P0 = 62 * 4                         # p0.x's register id (regid(62, 0))
A0 = 61 * 4


@dataclass(slots=True)
class Ins:
  """One instruction: text without sync flags; kind: alu (cat1-3), sfu (cat4), ld_sy (ldib), ld_ss (ldl), st (stib,
  stl), bar, br (a branch: target is a label), jump, end, label (arg: the label's name). dst/src: register ids
  (full registers, p0.x = 248). enc: the text's shape and slot values (compiler/isa/ir3/template.split's form) when
  the instruction selector knows them, so that encoding never parses the text (emit.py)."""
  kind: str
  text: str = ""
  dst: tuple = ()
  src: tuple = ()
  target: str | None = None
  flags: str = ""
  cycles: int = 1
  half: bool = False      # names half registers (tracked as the full register holding them: merged registers)
  enc: tuple | None = None


@dataclass
class _State:
  cycle: int = 0
  ready_alu: dict = field(default_factory=dict)
  ready_any: dict = field(default_factory=dict)
  need_ss: set = field(default_factory=set)
  need_sy: set = field(default_factory=set)
  war_ss: set = field(default_factory=set)
  war_any: set = field(default_factory=set)

  def busy(self) -> tuple[int, bool, bool]:
    """(cycles until every ALU result is ready for anyone, (ss) needed, (sy) needed)."""
    wait = max([0, *(r - self.cycle for r in self.ready_any.values())])
    return wait, bool(self.need_ss or self.war_ss or self.war_any), bool(self.need_sy or self.war_any)


_PLAIN: dict = {}


def _nops(cycles: int, ss: bool = False, sy: bool = False, jp: bool = False) -> list[Ins]:
  """nops that wait for the flags and let `cycles` cycles pass (a nop repeats at most 7 times: (rpt7))."""
  if not (ss or sy or jp) and 0 < cycles <= 8:      # the common delay: one shared (rptN)nop
    got = _PLAIN.get(cycles)
    if got is None: got = _PLAIN[cycles] = Ins("nop", f"{f'(rpt{cycles - 1})' if cycles > 1 else ''}nop", cycles=cycles)
    return [got]
  out = []
  first = True
  while first or cycles > 0:
    n = min(max(cycles, 1), 8)
    flags = ("(sy)" if sy and first else "") + ("(ss)" if ss and first else "") + ("(jp)" if jp and first else "")
    out.append(Ins("nop", f"{flags}{f'(rpt{n - 1})' if n > 1 else ''}nop", cycles=n))
    cycles -= n
    first = False
  return out


def legalize(prog: list[Ins]) -> list[Ins]:
  """The instruction list with flags set and nops inserted; labels stay (as Ins("label")) for the branch fix-up."""
  out: list[Ins] = []
  st = _State()

  def drain(jp: bool = False, always: bool = False):
    nonlocal st
    wait, ss, sy = st.busy()
    if wait or ss or sy or always: out.extend(_nops(wait, ss, sy, jp))
    st = _State(cycle=st.cycle + wait)

  for ins in prog:
    k = ins.kind
    if k == "label":
      drain()
      out.append(ins)
      out.extend(_nops(0, jp=True))      # the join point: (jp)nop
      continue
    if k in ("br", "jump", "bar", "end"):
      drain()
      out.append(ins)
      continue
    alu, sfu = k == "alu", k == "sfu"
    regs = ins.src + ins.dst
    ss = bool(st.need_ss) and not st.need_ss.isdisjoint(regs)
    sy = bool(st.need_sy) and not st.need_sy.isdisjoint(regs)
    if alu or sfu:
      if st.war_ss and not st.war_ss.isdisjoint(ins.dst): ss = True
      if st.war_any and not st.war_any.isdisjoint(ins.dst) and not (ss or sy): ss = True
    # a half register read by an ALU instruction after a full-size write (or the other way) waits the mismatched-size
    # delay (Mesa ir3_legalize get_ready_slot: a different size is not the alu_to_alu case)
    ready = st.ready_alu if alu and not ins.half else st.ready_any
    wait, now = 0, st.cycle
    for r in ins.src:
      w = ready.get(r, 0) - now
      if w > wait: wait = w
    if alu or sfu:
      if wait: out.extend(_nops(wait)); st.cycle += wait
      ins.flags = ("(sy)" if sy else "") + ("(ss)" if ss else "")
    elif wait or ss or sy:
      out.extend(_nops(wait, ss, sy))
      st.cycle += max(wait, 1)
    if ss:
      st.need_ss.clear(); st.war_ss.clear(); st.war_any.clear()
    if sy:
      st.need_sy.clear(); st.war_any.clear()
    out.append(ins)
    start = st.cycle
    for r in ins.dst:
      for s in (st.need_ss, st.need_sy, st.war_ss, st.war_any): s.discard(r)
      st.ready_alu.pop(r, None); st.ready_any.pop(r, None)
      if alu:
        st.ready_any[r] = start + 1 + NON_ALU
        st.ready_alu[r] = start + 1 + (NON_ALU if r >= A0 or ins.half else ALU_TO_ALU)
      elif sfu or k == "ld_ss": st.need_ss.add(r)
      elif k == "ld_sy": st.need_sy.add(r)
    if sfu or k in ("st", "ld_ss"): st.war_ss.update(ins.src)
    elif k == "ld_sy": st.war_any.update(ins.src)
    if alu: st.cycle += ins.cycles
  return out
