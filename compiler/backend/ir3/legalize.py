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

from dataclasses import dataclass

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


_FLAGS = {(False, False): "", (True, False): "(sy)", (False, True): "(ss)", (True, True): "(sy)(ss)"}  # (sy, ss)
_DRAIN_BEFORE = frozenset({"br", "jump", "bar", "end"})


def legalize(prog: list[Ins]) -> list[Ins]:
  """The instruction list with flags set and nops inserted; labels stay (as Ins("label")) for the branch fix-up.
  One pass; its state: the cycle each ALU result is ready at (for an ALU reader, for anyone), the registers waiting
  for (ss) / (sy), the registers an unfinished memory or SFU instruction may still read (write-after-read)."""
  out: list[Ins] = []
  append, extend = out.append, out.extend
  cycle = 0
  ready_alu: dict = {}
  ready_any: dict = {}
  need_ss: set = set()
  need_sy: set = set()
  war_ss: set = set()
  war_any: set = set()
  for ins in prog:
    k = ins.kind
    if k == "label" or k in _DRAIN_BEFORE:
      # drain: every ALU result ready, every flag taken (_State.busy), then a fresh state
      wait = max([0, *(r - cycle for r in ready_any.values())]) if ready_any else 0
      ss, sy = bool(need_ss or war_ss or war_any), bool(need_sy or war_any)
      if wait or ss or sy: extend(_nops(wait, ss, sy))
      cycle += wait
      ready_alu, ready_any = {}, {}
      need_ss, need_sy, war_ss, war_any = set(), set(), set(), set()
      append(ins)
      if k == "label": extend(_nops(0, jp=True))      # the join point: (jp)nop
      continue
    alu = k == "alu"
    sfu = k == "sfu"
    dst, src = ins.dst, ins.src
    ss = bool(need_ss) and not (need_ss.isdisjoint(src) and need_ss.isdisjoint(dst))
    sy = bool(need_sy) and not (need_sy.isdisjoint(src) and need_sy.isdisjoint(dst))
    if alu or sfu:
      if war_ss and not war_ss.isdisjoint(dst): ss = True
      if war_any and not war_any.isdisjoint(dst) and not (ss or sy): ss = True
    # a half register read by an ALU instruction after a full-size write (or the other way) waits the mismatched-size
    # delay (Mesa ir3_legalize get_ready_slot: a different size is not the alu_to_alu case)
    ready = ready_alu if alu and not ins.half else ready_any
    wait = 0
    if ready:
      for r in src:
        w = ready.get(r, 0) - cycle
        if w > wait: wait = w
    if alu or sfu:
      if wait:
        extend(_nops(wait))
        cycle += wait
      ins.flags = _FLAGS[sy, ss]
    elif wait or ss or sy:
      extend(_nops(wait, ss, sy))
      cycle += max(wait, 1)
    if ss:
      need_ss.clear(); war_ss.clear(); war_any.clear()
    if sy:
      need_sy.clear(); war_any.clear()
    append(ins)
    if need_ss or need_sy or war_ss or war_any:
      for r in dst:
        need_ss.discard(r); need_sy.discard(r); war_ss.discard(r); war_any.discard(r)
    if alu:
      any_at = cycle + 1 + NON_ALU
      alu_at = cycle + 1 + (NON_ALU if ins.half else ALU_TO_ALU)
      for r in dst:
        ready_any[r] = any_at
        ready_alu[r] = any_at if r >= A0 else alu_at
      cycle += ins.cycles
      continue
    for r in dst:
      ready_alu.pop(r, None); ready_any.pop(r, None)
      if sfu or k == "ld_ss": need_ss.add(r)
      elif k == "ld_sy": need_sy.add(r)
    if sfu or k == "st" or k == "ld_ss": war_ss.update(src)
    elif k == "ld_sy": war_any.update(src)
  return out
