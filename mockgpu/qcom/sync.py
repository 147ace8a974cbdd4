"""The ir3 pipeline rules the mock Adreno enforces: sync flags and delay slots, as Mesa's compiler obeys them.

Facts (Mesa src/freedreno/ir3/ir3_legalize.c, legalize_block and delay_update; ir3_delay.c, ir3_src_read_delay;
ir3_compiler.c, delay_slots):
  - (ss) waits for the "short" asynchronous results: SFU (cat4) results, local-memory loads (ldl, ldlw, ldlv),
    local atomics, resinfo; and for stc's constant writes before a constant is read;
  - (sy) waits for the "long" ones: ldg, ldib, ldp and other non-local loads, global atomics (atomic.g.*), IBO
    atomics (atomic.b.*, whose result lands in the data vector's .x);
  - a register written by one of them and read (or written) again before the flag is a race on the hardware;
  - a source of a memory instruction or an SFU instruction may be read late: an ALU or SFU instruction overwriting
    it needs (ss) after a store, stc or SFU instruction, (ss) or (sy) after another memory instruction (the WAR
    hazards). A later memory instruction is queued behind the earlier one in the same pipeline, so it may overwrite
    the register (Mesa's computerator example pvtmem.asm does: stp p[r0.x] then ldp r0.x, with no flag);
  - ALU (cat1-3) results are ready 3 cycles later for an ALU reader of the same register size (alu_to_alu), 6 for
    any other reader and for p0/a0 (non_alu); mad/madsh read their third source 2 cycles late (cat3_src2_read).
    The mock holds non-ALU readers to 4 delay slots, not 6: Mesa's computerator example stg_ldg_offset.asm (written
    for and run on a6xx hardware) stores an add.u result with only (rpt3)nop between, so 6 is the compiler's
    margin, not the hardware's minimum; hcq's own programs keep Mesa's 6;
    (rptN) writes and (r)-reads one element per cycle; only cat0-3 instructions advance the cycle count, by
    1 + repeat + nop (cat0 nop's (rptN), cat2/3's (nopN)); jump/br/braa/brao do not count.
A result read too early holds an undefined value: in "strict" mode (the default, and the tests') the dispatch faults
naming the reader, the register, the writer and the missing flag or cycles; in "poison" mode the reader sees
POISON instead of the value; "off" checks nothing."""
from __future__ import annotations

import numpy as np

from ...errors import GPUFault

A0, A1, P0 = 61 * 4, 61 * 4 + 1, 62 * 4
POISON = 0xBAADF00D
ALU_TO_ALU, NON_ALU, CAT3_SRC2_READ = 3, 6, 2     # Mesa ir3_compiler.c delay_slots
NON_ALU_HW = 4                                    # what the mock enforces for non-ALU readers (see above)
HALF_TYPES = (0, 2, 4, 6, 7)          # #type f16, u16, s16, u8, s8
MODES = ("strict", "poison", "off")


class Sync:
  """What one instruction reads, writes and produces, for the checks (built once per decoded instruction)."""
  __slots__ = ("reads", "writes", "produces", "alu", "cycles", "ss", "sy", "reads_const", "writes_const", "war", "sfu")

  def __init__(self):
    self.reads: list = []           # (register, half, cycle offset)
    self.writes: list = []          # (register, half, cycle offset)
    self.produces = None            # "alu", "ss", "sy" or None (a synchronous non-ALU write)
    self.alu = False                # a cat1-3 instruction (the ALU-reader delay applies)
    self.cycles = 0                 # cycles the instruction advances the count by
    self.ss = self.sy = False
    self.reads_const = self.writes_const = False
    self.war = None                 # "ss" or "any": its register sources may be read late
    self.sfu = False                # a cat4 (SFU) instruction


def _gpr(d): return d.fields["GPR"] * 4 + d.fields["SWIZ"]


SLOTS = 512                           # 0..255: full registers and a0/a1/p0 by regid; 256 + h: half register h


def track(regid: int, half: bool) -> int:
  """The tracked slot of a register: full registers (and a0/a1/p0) by regid, half GPRs apart (256 + their regid):
  with merged registers hrN.c is a half of r(N/2) (overlap()), read with the mismatched-size delay as Mesa's
  ir3_legalize get_ready_slot does."""
  return 256 + regid if half and regid < A0 else regid


def overlap(slot: int) -> tuple:
  """The other slots a write to `slot` changes: a full GPR's two halves, a half's full register."""
  if slot >= 256: return ((slot - 256) >> 1,)
  if slot < A0 // 2: return (256 + 2 * slot, 257 + 2 * slot)
  return ()


def _operand(node, half: bool, out: list, reads_const: list, step: int = 0, count: int = 1, delay: int = 0):
  """Add the registers an operand reads to out: (register, half, cycle offset) per element."""
  name = getattr(node, "name", "")
  if not name: return
  f = node.fields
  if "relative" in name:
    out.append((A0, False, delay))
    if "const" in name: reads_const.append(True)
    return
  if "const" in name and ("CONST" in f or ("SRC" in f and getattr(f["SRC"], "name", "") == "#reg-const")):
    reads_const.append(True)
    return
  reg = None
  if name == "#reg-gpr": reg = _gpr(node)
  elif getattr(f.get("SRC"), "name", "") == "#reg-gpr": reg = _gpr(f["SRC"])
  if reg is None: return
  for e in range(count): out.append((track(reg + e if count > 1 else reg, half), half, delay + e * bool(step)))


def _dst_reg(node):
  while getattr(node, "name", "") != "#reg-gpr":
    node = node.fields.get("DST") if hasattr(node, "fields") else None
    if node is None: return None
  return _gpr(node)


def describe(d, kind: str, half_of) -> Sync:
  """The Sync of a decoded instruction d (name, fields) of the emulator's kind ("flow", "alu", "mem")."""
  s, n, f = Sync(), d.name, d.fields
  s.ss, s.sy = bool(f.get("SS", 0)), bool(f.get("SY", 0))
  consts: list = []
  rpt = f.get("REPEAT", 0)
  if kind == "flow":
    if n in ("br", "brao", "braa"):
      s.reads.append((P0 + f.get("COMP1", 0), False, 0))
      if n != "br": s.reads.append((P0 + f.get("COMP2", 0), False, 0))
    elif n in ("bany", "ball"): s.reads.append((P0, False, 0))
    if n not in ("jump", "br", "brao", "braa"): s.cycles = 1 + rpt
    return s
  cat = half_of(d)
  if cat is not None:                          # cat1-4: (src halves, dst half) from the emulator
    src_half, dst_half, sfu = cat
    s.alu, s.sfu = not sfu, sfu
    s.produces = "ss" if sfu else "alu"
    mad = n.startswith("mad")
    for k, key in enumerate(("SRC", "SRC1", "SRC2", "SRC3")):
      if key not in f or not hasattr(f[key], "fields"): continue
      r = f.get(f"{key}_R", 0) if rpt else 0
      _operand(f[key], src_half, s.reads, consts, step=r, count=rpt + 1 if r else 1,
               delay=CAT3_SRC2_READ if (mad and key == "SRC3") else 0)
    dst = _dst_reg(f.get("DST"))
    if dst is not None and dst < 252:
      special = dst >= A0
      h = dst_half and not special
      for e in range(rpt + 1): s.writes.append((track(dst + e, h), h, e))
    nop = 0 if rpt or sfu else (f.get("SRC1_R", 0) | f.get("SRC2_R", 0) << 1) if n not in ("mov",) and not n.startswith("mov-") else 0
    s.cycles = 0 if sfu else 1 + rpt + nop
    s.reads_const = bool(consts)
    if sfu: s.war = "ss"
    return s
  # cat6 (and bar/fence): registers by form
  t = f.get("TYPE", 3)
  half = t in HALF_TYPES or bool(f.get("TYPE_HALF", 0))
  size = f.get("SIZE", f.get("TYPE_SIZE", 1)) or 1
  def rd(node, count=1, h=False):
    if node is None: return
    reg = _dst_reg(node) if getattr(node, "name", "") != "#cat6-src" else (_gpr(node) if "GPR" in node.fields else None)
    if reg is None: return
    for e in range(count): s.reads.append((track(reg + e, h), h, 0))
  def wr(reg, count=1, h=False):
    for e in range(count): s.writes.append((track(reg + e, h), h, 0))
  store = False
  if n in ("ldg", "ldg.a", "stg", "stg.a"):
    rd(f["SRC1"], 2)
    if n.endswith(".a"): rd(f.get("SRC2"))
    if n.startswith("st"):
      store = True
      rd(f["SRC3"], size, half)
    else:
      wr(_dst_reg(f["DST"]), size, half)
      s.produces = "sy"
  elif n in ("ldib.b", "stib.b"):
    rd(f["SRC2"])
    if not f.get("SSBO_IM", 1): rd(f["SSBO"])
    if n == "stib.b":
      store = True
      rd(f["SRC1"], size, half)
    else:
      wr(_gpr(f["SRC1"]), size, half)
      s.produces = "sy"
  elif n in ("ldl", "ldlw", "ldlv", "ldp"):
    if "SRC" in f: rd(f["SRC"])
    wr(_dst_reg(f["DST"]), size, half)
    s.produces = "sy" if n == "ldp" else "ss"
  elif n in ("stl", "stlw", "stp"):
    store = True
    rd(f["DST"])
    rd(f["SRC"], size, half)
  elif n.startswith("atomic."):
    parts = n.split(".")
    cmpx = parts[-1] == "cmpxchg"
    if parts[1] == "b":
      vec = _gpr(f["SRC1"])
      rd(f["SRC2"])
      for e in (1, 2) if cmpx else (1,): s.reads.append((vec + e, False, 0))
      wr(vec)
      s.produces = "sy"
    else:
      rd(f["SRC1"], 2 if parts[1] == "g" else 1)
      rd(f["SRC2"], 2 if cmpx else 1)
      wr(_dst_reg(f["DST"]))
      s.produces = "sy" if parts[1] == "g" else "ss"
  elif n == "stc":
    store = True
    rd(f["SRC"], size, half)
    if getattr(f["DST"], "name", "") == "#const-dst-a1": s.reads.append((A1, False, 0))
    s.writes_const = True
  elif n == "resinfo.b":
    wr(_dst_reg(f["DST"]), 3)
    s.produces = "ss"
  elif n in ("getfiberid", "getwid", "getspid"):
    wr(_dst_reg(f["DST"]))
  if kind == "mem" and n not in ("bar", "fence"): s.war = "ss" if store or s.produces == "ss" else "any"
  return s


_FRESH = np.array([[0] * SLOTS] * 2 + [[-1] * SLOTS] * 4, np.int64)    # SyncState's tables at the batch's start
_FRESH.flags.writeable = False


class SyncState:
  """One batch's pipeline state: the cycle count, when each register is ready, which wait for (ss)/(sy)."""

  def __init__(self, mode: str):
    self.mode = mode
    self.cycle = 0
    # the six per-slot tables as rows of one copy of _FRESH (one allocation: issue 33 P9)
    self._tables = _FRESH.copy()
    (self.ready_alu,                              # cycle an ALU reader of the same size may read the slot
     self.ready_any,                              # cycle any other reader may
     self.need_ss,                                # pc of the producer whose result needs (ss), else -1
     self.need_sy,
     self.war_ss,                                 # pc of an instruction that may still read the register
     self.war_any) = self._tables
    self.const_ss = -1                            # pc of an stc not yet waited for with (ss)

  def reset(self) -> "SyncState":
    """The state at a batch's start again (the tables copied back from _FRESH in place: their rows stay)."""
    np.copyto(self._tables, _FRESH)
    self.cycle, self.const_ss = 0, -1
    return self

  def check(self, s: Sync, pc: int, text: str, prog) -> list:
    """The registers the instruction at pc reads too early (poison mode) ([] when none; strict mode raises)."""
    if s.ss:
      self.need_ss.fill(-1)
      self.war_ss.fill(-1)
      self.war_any.fill(-1)
      self.const_ss = -1
    if s.sy:
      self.need_sy.fill(-1)
      self.war_any.fill(-1)
    bad = []
    for reg, half, off in s.reads:
      why = self._pending(reg)
      if why is None:
        ready = self.ready_alu[reg] if s.alu else self.ready_any[reg]
        when = self.cycle + off
        if ready > when: why = f"{ready - when} cycle(s) too early for the ALU result's delay slots (Mesa: alu_to_alu " \
                               f"{ALU_TO_ALU}, non_alu {NON_ALU}; {NON_ALU_HW} held here)"
      if why is not None: bad.append((reg, "reads", why))
    for reg, half, off in s.writes:
      why = self._pending(reg)
      if not (s.alu or s.sfu): pass         # a memory instruction: queued behind the earlier one, in order
      elif why is None and self.war_ss[reg] >= 0:
        why = f"a source of the instruction at pc {self.war_ss[reg]} ({prog[self.war_ss[reg]].text}) may not be read " \
              f"yet: (ss) first"
      elif why is None and self.war_any[reg] >= 0:
        why = f"a source of the instruction at pc {self.war_any[reg]} ({prog[self.war_any[reg]].text}) may not be " \
              f"read yet: (ss) or (sy) first"
      if why is not None: bad.append((reg, "writes", why))
    if s.reads_const and self.const_ss >= 0:
      bad.append((None, "reads", f"a constant after stc at pc {self.const_ss} without (ss)"))
    if not bad or self.mode == "off": return []
    if self.mode == "strict":
      reg, verb, why = bad[0]
      name = _name(reg) if reg is not None else "the constant file"
      raise GPUFault(f"ir3: {text} at pc {pc} {verb} {name}: {why} (Mesa ir3_legalize.c; the mock's strict sync "
                     f"mode)", kind="sync hazard")
    return [reg for reg, verb, _ in bad if verb == "reads" and reg is not None]

  def _pending(self, reg: int):
    if self.need_ss[reg] >= 0: return f"the result of pc {self.need_ss[reg]} needs (ss) first"
    if self.need_sy[reg] >= 0: return f"the result of pc {self.need_sy[reg]} needs (sy) first"
    return None

  def update(self, s: Sync, pc: int) -> None:
    start = self.cycle
    for reg, half, off in s.writes:
      if s.produces == "alu":
        w = start + 1 + off
        if A0 <= reg < 256: self.ready_alu[reg] = self.ready_any[reg] = w + NON_ALU_HW
        else:
          self.ready_alu[reg], self.ready_any[reg] = w + ALU_TO_ALU, w + NON_ALU_HW
          for o in overlap(reg):          # the other size reads it with the mismatched (non-ALU) delay
            self.ready_alu[o] = self.ready_any[o] = max(self.ready_any[o], w + NON_ALU_HW)
      else:
        self.ready_alu[reg] = self.ready_any[reg] = 0
        for o in overlap(reg): self.ready_alu[o] = self.ready_any[o] = 0
        need = self.need_ss if s.produces == "ss" else self.need_sy if s.produces == "sy" else None
        if need is not None:
          need[reg] = pc
          for o in overlap(reg): need[o] = pc
      self.war_ss[reg] = self.war_any[reg] = -1
    if s.war is not None:
      mark = self.war_ss if s.war == "ss" else self.war_any
      for reg, half, off in s.reads:
        if reg < A0 or reg >= 256:
          mark[reg] = pc
          for o in overlap(reg): mark[o] = pc
    if s.writes_const: self.const_ss = pc
    self.cycle = start + s.cycles


def _name(reg: int) -> str:
  if reg >= 256: return f"hr{(reg - 256) // 4}.{'xyzw'[reg % 4]}"
  if reg == A0: return "a0.x"
  if reg == A1: return "a1.x"
  if P0 <= reg < P0 + 4: return f"p0.{'xyzw'[reg - P0]}"
  return f"r{reg // 4}.{'xyzw'[reg % 4]}"
