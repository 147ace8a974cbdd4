"""Sync flags and delay slots for an ir3 instruction list, as Mesa 25's ir3_legalize requires them.

Facts (Mesa 25 src/freedreno/ir3/ir3_legalize.c legalize_block / delay_update, ir3_delay.c ir3_src_read_delay,
ir3_compiler.c delay_slots; the mock's mockgpu/qcom/sync.py checks the same rules):
  - (ss) waits for the "short" asynchronous results: SFU (cat4) results and local-memory loads (ldl);
  - (sy) waits for the "long" ones: ldib (and every other non-local load);
  - a register written by one of them is read (or written again) only by an instruction carrying the flag;
  - write-after-read: a memory or SFU instruction may read its register sources late, so an ALU or SFU instruction
    overwriting one needs (ss) after a store or an SFU/ldl instruction, (ss) or (sy) after another load;
  - an ALU (cat1-3) result is read by an ALU instruction 3 cycles later (alu_to_alu), by anything else, and p0/a0 by
    anyone, 6 cycles later (non_alu); a mad/madsh reads its third source 2 cycles after issue (cat3_src2_read);
    cat0-3 instructions take 1 cycle, a (rptN)nop N + 1, a cat2/3 instruction's (nopN) N more, cat4/cat6, bar and
    br/jump none;
  - the flags go on the instruction that needs them; cat6 instructions have a (sy) bit but no (ss) bit: their (ss)
    goes on a nop before them (Mesa ir3_legalize.c: "cat5+ does not have an (ss) bit, if needed we need to insert a
    nop to carry the sync flag"), their (sy) stays on them.
Control flow as Mesa's ir3_legalize.c legalize_block handles it: the state at a label is the merge (the later ready
cycle, the union of the pending registers) of the states every branch and jump to it and the fall-through bring,
iterated to a fixed point for the back edges of loops; a branch waits only for its own p0.x. The first instruction
after a label (a nop legalize put there, or the block's own first instruction) carries (jp), the join-point flag
Mesa's mark_jp sets on a branch target's first instruction. A barrier (bar) is Mesa's: nothing waited for before it,
(ss)(sy) on the instruction after it. Nothing is drained before the end either (Mesa: no delay for OPC_END, and
it reads no register).
"""
from __future__ import annotations

from dataclasses import dataclass

# Mesa 25 ir3_compiler.c: compiler->delay_slots.alu_to_alu / non_alu / cat3_src2_read of a6xx (a7xx's 2 / 5 / 1
# ask no more: the same wait for a mad's third source, one cycle less for the others)
ALU_TO_ALU, NON_ALU, CAT3_SRC2_READ = 3, 6, 2
P0 = 62 * 4                         # p0.x's register id (regid(62, 0))


# every register's name, by regid (p0.x at P0): names are looked up, not formatted, per instruction
_RNAME = [f"r{r >> 2}.{'xyzw'[r & 3]}" for r in range(256)]
_RNAME[P0] = "p0.x"


def rname(r: int) -> str:
  """The assembler's name of full register id r (regid = 4 * register + component; p0.x for P0)."""
  return _RNAME[r]
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


# the one nop of each delay of 1 to 8 cycles (an ALU instruction waits at most NON_ALU): _nops' shared ones
_PLAIN_NOP = [None, *(_nops(c)[0] for c in range(1, 9))]


def _mad_wait(src: tuple, ready: dict, cycle: int) -> int:
  """The delay before a mad/madsh (cat3) instruction: it reads its third source CAT3_SRC2_READ cycles after issue
  (Mesa ir3_delay.c ir3_src_read_delay: "mad instructions consume their last source one or two cycles later")."""
  wait = 0
  for k, r in enumerate(src):
    w = ready.get(r, 0) - cycle - (CAT3_SRC2_READ if k == 2 else 0)
    if w > wait: wait = w
  return wait


_CAT1 = ("mov", "cov")              # the ALU instructions of cat1 (mov, cov): no (nopN) field
_NOPF = [None, "(nop1) ", "(nop2) ", "(nop3) "]


def _fold(out: list, wait: int) -> int:
  """Mesa ir3_legalize.c legalize_block on a6xx: a delay after a cat2/cat3 instruction without (rptN) goes, up to
  3 cycles, into that instruction's (nopN) field ("the previous cat2/cat3 instruction can encode at most 3 nop's"),
  the rest on a nop; not across a label, barrier or branch (the instruction just before is the previous one of the
  block). The instruction's flags get "(nopN) " (set anew by each pass; an instruction is folded into once at most:
  the one it delays comes right after it).
  Returns the cycles left for a nop; the caller counts the wait in full either way."""
  prev = out[-1] if out else None
  if prev is None or prev.kind != "alu" or prev.text.startswith(_CAT1): return wait
  n = wait if wait < 3 else 3
  prev.flags += _NOPF[n]
  return wait - n


_HAS_SS = frozenset({"br", "jump"})   # the non-ALU kinds with an (ss) bit (cat0; Mesa ir3.h supports_ss: cat < 5)
_FLAGS = {(False, False): "", (True, False): "(sy)", (False, True): "(ss)", (True, True): "(sy)(ss)"}  # (sy, ss)
_EMPTY = ({}, {}, frozenset(), frozenset(), frozenset(), frozenset())


def _merge(a: tuple | None, b: tuple | None) -> tuple | None:
  """Two pipeline states at one point (Mesa's legalize_block: the OR of the predecessors' states): per register the
  later ready cycle, the union of the pending registers. A state: (ALU-reader delays, other readers' delays, as
  cycles left; need (ss), need (sy), WAR (ss), WAR any); None: no path arrives."""
  if a is None: return b
  if b is None: return a
  ra, rn = dict(a[0]), dict(a[1])
  for r, c in b[0].items():
    if c > ra.get(r, 0): ra[r] = c
  for r, c in b[1].items():
    if c > rn.get(r, 0): rn[r] = c
  return (ra, rn, a[2] | b[2], a[3] | b[3], a[4] | b[4], a[5] | b[5])


def _covers(a: tuple | None, b: tuple | None) -> bool:
  """Whether state a asks at least as much as state b."""
  if b is None: return True
  if a is None: return False
  return all(c <= a[0].get(r, 0) for r, c in b[0].items()) and all(c <= a[1].get(r, 0) for r, c in b[1].items()) \
    and b[2] <= a[2] and b[3] <= a[3] and b[4] <= a[4] and b[5] <= a[5]


def legalize(prog: list[Ins]) -> list[Ins]:
  """The instruction list with flags set and nops inserted; labels stay (as Ins("label")) for the branch fix-up.
  A label's state is the merge of the states of every branch or jump to it and of the fall-through (Mesa
  ir3_legalize.c legalize_block: a block's input state is the OR of its predecessors' output states, iterated until
  nothing changes, for loops' back edges); a pass uses the states the last one found at the labels and is repeated
  until no branch brings a label more than that."""
  entry: dict = {}
  while True:
    out, edges, joins = _pass(prog, entry)
    grown = False
    for name, st in edges.items():
      if not _covers(entry.get(name), st):
        entry[name] = _merge(entry.get(name), st)
        grown = True
    if not grown: return _mark_jp(out, joins)


def _mark_jp(out: list[Ins], joins: list[int]) -> list[Ins]:
  """(jp) on the first instruction after each label (Mesa ir3_legalize.c mark_jp: the flag on a branch target
  block's first instruction, after legalize_block's nops are in: a nop of those, or the instruction itself). The
  instruction is replaced by a copy (nops are shared; the selector's instructions keep their own flags)."""
  import dataclasses
  done = set()
  n = len(out)
  for i in joins:
    while i < n and out[i].kind == "label": i += 1
    if i == n or i in done: continue
    done.add(i)
    ins = out[i]
    if ins.kind == "nop":             # flags in the text: (sy)(ss)(jp)(rptN)nop, the order our _nops writes
      t = ins.text
      k = t.find("(rpt")
      if k < 0: k = len(t) - 3
      out[i] = dataclasses.replace(ins, text=t[:k] + "(jp)" + t[k:])
    else:                             # (sy)(ss)(jp)(nopN): before a (nopN) _fold put in the flags
      f = ins.flags
      k = f.find("(nop")
      out[i] = dataclasses.replace(ins, flags=f + "(jp)" if k < 0 else f[:k] + "(jp)" + f[k:])
  return out


def _pass(prog: list[Ins], entry: dict) -> tuple[list[Ins], dict, list[int]]:
  """One pass; its state: the cycle each ALU result is ready at (for an ALU reader, for anyone), the registers waiting
  for (ss) / (sy), the registers an unfinished memory or SFU instruction may still read (write-after-read). entry:
  label -> the state assumed on arrival by a branch; returns the instructions and label -> the merged state the
  branches and jumps to it carried."""
  out: list[Ins] = []
  append, extend = out.append, out.extend
  edges: dict = {}
  cycle = 0
  ready_alu: dict = {}
  ready_any: dict = {}
  need_ss: set = set()
  need_sy: set = set()
  war_ss: set = set()
  war_any: set = set()
  live = True                         # the fall-through reaches this point (not after a jump or the end)
  after_bar = False                   # the last instruction was a barrier: the next one carries (ss)(sy)
  joins: list = []                    # positions in out just after a label

  def snapshot():
    if not live: return None
    return ({r: c - cycle for r, c in ready_alu.items() if c > cycle},
            {r: c - cycle for r, c in ready_any.items() if c > cycle},
            frozenset(need_ss), frozenset(need_sy), frozenset(war_ss), frozenset(war_any))

  plain = _PLAIN_NOP
  for ins in prog:
    k = ins.kind
    if k == "alu" and not (need_ss or need_sy or war_ss or war_any or after_bar):
      # the common case, nothing asynchronous pending: only the ALU delays (the general path below, specialised)
      ready = ready_any if ins.half else ready_alu
      wait = 0
      if ready:
        for r in ins.src:
          w = ready.get(r, 0) - cycle
          if w > wait: wait = w
        if wait and ins.text.startswith("mad"): wait = _mad_wait(ins.src, ready, cycle)
      if wait:
        prev = out[-1] if out else None
        if prev is not None and prev.kind == "alu" and not prev.text.startswith(_CAT1):
          n = wait if wait < 3 else 3     # into the cat2/cat3 instruction before: (nopN), N <= 3 (see _fold)
          prev.flags += _NOPF[n]
          cycle += n
          wait -= n
        if wait:
          if wait <= 8: append(plain[wait])
          else: extend(_nops(wait))
          cycle += wait
      ins.flags = ""
      append(ins)
      any_at = cycle + 1 + NON_ALU
      alu_at = cycle + 1 + (NON_ALU if ins.half else ALU_TO_ALU)
      for r in ins.dst:
        ready_any[r] = any_at
        ready_alu[r] = any_at if r >= A0 else alu_at
      cycle += ins.cycles
      continue
    if k == "label":
      st = _merge(_merge(snapshot(), edges.get(ins.text)), entry.get(ins.text)) or _EMPTY
      ready_alu = {r: cycle + c for r, c in st[0].items()}
      ready_any = {r: cycle + c for r, c in st[1].items()}
      need_ss, need_sy, war_ss, war_any = set(st[2]), set(st[3]), set(st[4]), set(st[5])
      live = True
      append(ins)
      joins.append(len(out))          # (jp) goes on the instruction that comes next (_mark_jp); a barrier's
      continue                        # (ss)(sy) (after_bar) too
    if k == "bar":
      # Mesa ir3_legalize.c legalize_block: a barrier (cat7) reads no register and takes no cycle (count_instruction),
      # so nothing is waited for before it; the instruction after it gets (ss) and (sy) ("last_n &&
      # is_barrier(last_n)": apply_ss, apply_sy), and the ALU delays still running carry on across it
      append(ins)
      after_bar = True
      continue
    if k == "end":
      # Mesa ir3_legalize.c: the end reads no register and waits for nothing ("shader outputs don't need any delay":
      # delay_calc is 0 for OPC_END); it takes (ss)(sy) only as the instruction after a barrier
      ins.flags = "(sy)(ss)" if after_bar else ""
      after_bar = False
      append(ins)
      live = False
      continue
    alu = k == "alu"
    sfu = k == "sfu"
    dst, src = ins.dst, ins.src
    ss = after_bar or (bool(need_ss) and not (need_ss.isdisjoint(src) and need_ss.isdisjoint(dst)))
    sy = after_bar or (bool(need_sy) and not (need_sy.isdisjoint(src) and need_sy.isdisjoint(dst)))
    after_bar = False
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
      if wait and alu and ins.text.startswith("mad"): wait = _mad_wait(src, ready, cycle)
    if alu or sfu:
      if wait:
        left = _fold(out, wait)
        cycle += wait
        if left: extend(_nops(left))
      ins.flags = _FLAGS[sy, ss]
    elif ss and k not in _HAS_SS:
      # Mesa ir3_legalize.c legalize_block: (ss) for an instruction without the bit (cat6: supports_ss) goes on a
      # nop before it, which takes one cycle and then the delay ("the previous nop can encode ... repeats");
      # (sy) stays on the instruction
      n = max(wait, 1)
      extend(_nops(n, ss=True))
      cycle += n
      ins.flags = "(sy)" if sy else ""
    else:                             # cat0 (br, jump) has both bits; cat6 its (sy)
      if wait:
        left = _fold(out, wait)
        cycle += wait
        if left: extend(_nops(left))
      ins.flags = _FLAGS[sy, ss]
    if ss:
      need_ss.clear(); war_ss.clear(); war_any.clear()
    if sy:
      need_sy.clear(); war_any.clear()
    append(ins)
    if k == "br" or k == "jump":       # the state this branch carries to its label; br/jump take no cycle
      edges[ins.target] = _merge(edges.get(ins.target), snapshot())
      if k == "jump": live = False
      continue
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
  return out, edges, joins
