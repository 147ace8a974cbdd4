"""One CP_EXEC_CS: decoding the program once into closures (the builders of flow/alu/memops), then running the
work-groups in batches of fibers under the lowest-pc rule, with the sync checks of sync.py and the hang timeout.

What keeps it fast (bench/ir3_emu.py measures it, issue 33 P9): a program is decoded and built once per code, constant
length, footprint and demotion (the caller's cache); a batch holds BATCH fibers (16,384: large enough that the Python
work of one step, the sync check included, is small next to the numpy work, small enough that a register row stays in
the cache); register files and the per-batch fiber arrays are kept between batches and dispatches (the rows a program
writes are cleared after each batch, so every batch starts from zeroed registers as a fresh one would); while every
fiber is alive at one pc the batch is "uniform": no masks, no pc array, no reductions; once fibers diverge, finished
ones hold DEAD so that one min() finds the next pc, and masked writes use np.copyto(where=). A caller may keep a
Dispatch and run it again (again(): the mock CP does for the same code, grid and registers); a one-batch grid then
keeps its set-up (fiber arrays, id rows, rows to clear, a small batch's Fibers) and every batch's sync checker is
one state reset in place."""
from __future__ import annotations

import time

import numpy as np

from ....errors import GPUFault
from .values import BATCH, LOCAL_BYTES, OutOfState, Unsupported
from .state import Fibers, Memory
from .operands import Ins, Instr, _bad
from .flow import CAT0
from .alu import CAT2, CAT3, CAT4, UNDOCUMENTED, _cat2, _cat3, _cat4, _mov
from .memops import CAT6
from ..sync import HALF_TYPES, POISON, SyncState, describe


_ISA = {}
DEAD = 1 << 40                     # the pc of a fiber that ran its end (above every program's instructions)
KEEP_FIBERS = 1024                 # a one-batch dispatch of at most this many fibers keeps its Fibers between runs


def isa_for(gpu_id: int):
  if gpu_id not in _ISA:
    from ....compiler.isa.ir3.isa import ISA
    _ISA[gpu_id] = ISA(gpu_id)
  return _ISA[gpu_id]


def _halves(d):
  """(sources half, destination half, SFU) of a cat1-4 instruction, None for the others (sync.describe)."""
  n, f = d.name, d.fields
  if n.startswith("mov-"): return f["SRC_TYPE"] in HALF_TYPES, f["DST_TYPE"] in HALF_TYPES, False
  if n in CAT2 or n in CAT3 or n in UNDOCUMENTED: return not f.get("FULL", 1), bool(f.get("DST_HALF", 0)), False
  if n in CAT4: return not f.get("FULL", 1) or n.startswith("h"), bool(f.get("DST_HALF", 0)), True
  return None


# ---- instruction builders: each returns (run(F, D), kind); kind "alu" runs (rpt+1) times and steps the pc
def _build(d, pc):
  n, f = d.name, d.fields
  if n in CAT0: return CAT0[n](d, pc), "flow"
  if n.startswith("mov-"): return _mov(d), "alu"
  if n in CAT2: return _cat2(d), "alu"
  if n in UNDOCUMENTED:
    raise Unsupported(f"{n}'s semantics are not documented by Mesa (its compiler emits sel.b16/sel.b32 only)")
  if n in CAT3: return _cat3(d), "alu"
  if n in CAT4: return _cat4(d), "alu"
  if n in CAT6: return CAT6[n](d), "mem"
  if n in ("bar", "fence"): return (lambda F, D, i: None), "alu"
  raise Unsupported(n)


def _keep(pool: dict, R) -> None:
  """Keep a zeroed register file for the next batch of its size (the few most recent sizes)."""
  pool[R.shape[1]] = R
  while len(pool) > 4: pool.pop(next(iter(pool)))


class Dispatch:
  """One CP_EXEC_CS: the work-groups run in batches of whole groups, with the state the dispatch programmed."""

  def __init__(self, model, chip_id, code, code_va, groups, local, consts, ibos, wgid_reg, localid_reg, wave=64,
               cache=None, hang_timeout_s: float | None = None, *, constlen: int = 256, nibo: int | None = None,
               footprint: int = 48, shared_bytes: int = LOCAL_BYTES, private_bytes: int = 0,
               linear_id_reg: int = 0xFC, sync: str = "strict", demotion: bool = False):
    """cache: {key: compiled program} kept by the caller for one constant file (the closures read it);
    hang_timeout_s: how long the dispatch may run, counted from when it starts running (decoding the program is
    not the GPU's time), after which it is a GPU hang (GPUFault kind "hang"). The rest is the state CP_EXEC_CS
    uses, as the registers were programmed: CONSTLEN (vec4s), NIBO, FULLREGFOOTPRINT, the shared and private
    memory sizes, the linear local id register, and the sync-check mode (sync.py)."""
    self.cache = {} if cache is None else cache
    self.hang_timeout_s, self.deadline = hang_timeout_s, None
    self.model, self.groups, self.local_size = model, groups, local
    self.consts, self.ibos, self.wave = consts, ibos, wave
    self.wgid_reg, self.localid_reg, self.linear_id_reg = wgid_reg, localid_reg, linear_id_reg
    self.constlen, self.nibo = constlen, len(ibos) if nibo is None else nibo
    self.footprint, self.shared_bytes, self.private_bytes = footprint, shared_bytes, private_bytes
    self.sync_mode, self.demotion = sync, demotion
    gpu_id = (chip_id >> 24 & 0xFF) * 100 + (chip_id >> 16 & 0xFF) * 10 + (chip_id >> 8 & 0xFF)
    words = np.asarray(code, np.uint32).view(np.uint64)
    self.prog = self._program(gpu_id, words)
    self._one = None                             # a one-batch grid's set-up, made at the first run (run)
    self._sync = None                            # the sync checker's state (sync.py), made at the first batch
    self._fibers = None                          # a one-batch grid's Fibers, made at the first run (_run_one)
    self.again(ibos)

  def again(self, ibos) -> None:
    """Ready to run (again): the dispatch's own state as a fresh one has it (no preamble run, nothing executed,
    no deadline, a new view of global memory), with the IBO descriptors loaded now. A caller that keeps a Dispatch
    for the same code, grid and registers (the mock CP) runs it again without decoding or setting it up anew."""
    self.ibos = ibos
    self.mem = Memory(self.model)
    self.preamble_done = False
    self.executed = 0
    self.deadline = None

  def _program(self, gpu_id, words):
    key = (gpu_id, words.tobytes(), self.constlen, self.footprint, self.demotion)
    prog = self.cache.get(key)
    if prog is not None: return prog
    isa = isa_for(gpu_id)
    prog = []
    decoded: dict = {}                           # word -> (decoding, text): a program repeats its words
    from ....compiler.isa.ir3.isa import DecodeError
    for pc, w in enumerate(words.tolist()):
      got = decoded.get(w)
      if got is None:
        try: dd = isa.decode(w)
        except DecodeError as e: dd = e
        try: text = isa.disasm_word(w) if not isinstance(dd, DecodeError) else f"{w:#018x}"
        except Exception: text = dd.name
        got = decoded[w] = (dd, text)
      dd, text = got
      if isinstance(dd, DecodeError):
        prog.append(Instr(pc, "?", text, _bad(pc, text, str(dd))))
        continue
      dd = Ins(dd.name, dd.fields, {"consts": self.consts, "constlen": self.constlen, "demotion": self.demotion}, pc)
      try:
        run, kind = _build(dd, pc)
        sync = describe(dd, kind, _halves)
        over = [r for r in (r if r < 256 else (r - 256) >> 1 for r, _, _ in sync.reads + sync.writes)
                if r < 48 * 4 and r // 4 >= self.footprint]
        if over:
          raise OutOfState(f"names r{over[0] // 4}.{'xyzw'[over[0] % 4]}, outside SP_CS_CTRL_REG0.FULLREGFOOTPRINT "
                           f"({self.footprint} registers)")
      except (Unsupported, KeyError, OutOfState) as e:
        run, kind, sync = _bad(pc, text, str(e) if isinstance(e, OutOfState) else f"{type(e).__name__} {e}"), "alu", None
      prog.append(Instr(pc, dd.name, text, run, dd.fields.get("REPEAT", 0) if kind == "alu" else 0, kind, sync))
    self.cache[key] = prog
    return prog

  def _rows_written(self):
    """The register-file rows the program can write (full registers; a half's full register): the rows a reused
    register file must clear between batches, so that every batch starts from zeroed registers."""
    rows = getattr(self, "_rows", None)
    if rows is None:
      rows = {w if w < 256 else (w - 256) >> 1 for ins in self.prog for w, _, _ in ins.sync.writes}
      rows = self._rows = np.array(sorted(r for r in rows if r < 256), np.intp)
    return rows

  def run(self) -> None:
    if self._one is not None:                    # a one-batch grid run before (run again: again())
      if self.hang_timeout_s is not None: self.deadline = time.monotonic() + self.hang_timeout_s
      return self._run_one(0, 0, self.cache.setdefault(("register files",), {}))
    gx, gy, gz = self.groups
    lx, ly, lz = self.local_size
    per = lx * ly * lz
    total = gx * gy * gz
    if not total or not per: return
    if self.hang_timeout_s is not None: self.deadline = time.monotonic() + self.hang_timeout_s
    step = max(1, BATCH // per)
    pool = self.cache.setdefault(("register files",), {})
    if total <= step: return self._run_one(total, per, pool)
    shape = None                               # (groups, fiber arrays, register file) of the last batch's size
    rows = self._rows_to_clear()
    try:
      for first in range(0, total, step):
        # checked per batch too: a short program over many work-groups never reaches the in-batch check's 1024 steps
        self._check_hang(first * per)
        ng = min(step, total - first)
        n = ng * per
        if shape is None or shape[0] != ng:
          if shape is not None: _keep(pool, shape[2])
          R = pool.pop(n, None)
          shape = (ng, self._fiber_arrays(ng, per), np.zeros((256, n), np.uint32) if R is None else R)
        _, (group_of, lids, wave_of, ltiles), R = shape
        F = Fibers(n, ng, group_of, lids, self.wave, self.shared_bytes, R=R, wave_of=wave_of)
        for r, v in self._id_rows(first, ng, per, lids, ltiles): F.R[r] = v
        self._run_batch(F, True)
        for r in rows: R[r].fill(0)              # the next batch (or dispatch) starts from zeroed registers
    except BaseException:
      shape = None                               # a failed batch leaves its register file as it was: not reused
      raise
    finally:
      if shape is not None: _keep(pool, shape[2])

  def _id_rows(self, first, ng, per, lids, ltiles) -> list:
    """[(register row, its values)] of the id registers a batch starts with: the local id's x (y and z where a
    work-group has more than one fiber and they are not all 0), the work-group id, the linear local id
    (HLSQ_CS_CNTL_1.LINEARLOCALIDREGID); registers 0xFC and above are not written."""
    out = []
    if self.localid_reg < 0xFC:
      for c in range(3):
        if c == 0 or per > 1 and ltiles[c][-1]: out.append((self.localid_reg + c, ltiles[c]))
    if self.wgid_reg < 0xFC:
      for c, v in self._group_ids(first, ng, per): out.append((self.wgid_reg + c, v))
    if self.linear_id_reg < 0xFC: out.append((self.linear_id_reg, lids))
    return out

  def _run_one(self, groups: int, per: int, pool: dict) -> None:
    """A grid that fits in one batch (`groups` work-groups of `per` fibers, read at the first run only): its fiber
    arrays, id rows and rows to clear are made at the first run and kept with the dispatch (the grid and registers
    are the dispatch's own: a dispatch run again reuses them)."""
    one = self._one
    if one is None:
      arrays = self._fiber_arrays(groups, per)
      one = self._one = (groups * per, groups, arrays, self._id_rows(0, groups, per, arrays[1], arrays[3]),
                         self._rows_to_clear())
    n, groups, (group_of, lids, wave_of, _), ids, rows = one
    self._check_hang(0)
    R = pool.pop(n, None)
    if R is None: R = np.zeros((256, n), np.uint32)
    F = self._fibers                             # a small batch's Fibers of the last run, started again
    if F is not None: F.restart(R)
    else:
      F = Fibers(n, groups, group_of, lids, self.wave, self.shared_bytes, R=R, wave_of=wave_of)
      if n <= KEEP_FIBERS: self._fibers = F
    for r, v in ids: R[r] = v
    self._run_batch(F, True)                     # (a failed batch leaves its register file as it was: not reused)
    for r in rows: R[r].fill(0)                  # the next dispatch starts from zeroed registers
    F.R = F._local = F.private = None            # a kept Fibers holds no register file or memory between runs
    _keep(pool, R)

  def _rows_to_clear(self):
    """The rows a register file holds after a batch (the program's writes and the id registers), cleared before it
    is reused (kept zeroed between dispatches); kept per program and id registers (issue 33 P9: a tiny program's
    dispatch is mostly this set-up)."""
    key = ("rows", id(self.prog), self.localid_reg, self.wgid_reg, self.linear_id_reg)
    got = self.cache.get(key)
    if got is None or got[0] is not self.prog:
      ids = [r + c for r, k in ((self.localid_reg, 3), (self.wgid_reg, 3), (self.linear_id_reg, 1)) if r < 0xFC
             for c in range(k)]
      got = self.cache[key] = (self.prog, sorted(set(self._rows_written().tolist()) | set(ids)))
    return got[1]

  def _group_ids(self, first, ng, per):
    """[(component, work-group id of each fiber)] of the batch of ng groups from group `first` (x always, y and z
    where not all 0): computed per work-group, then repeated for its fibers; kept (read-only) for the most recent
    grids that fit in one batch (a small launch repeats its grid)."""
    gx, gy, _ = self.groups
    one = first == 0 and ng == gx * gy * self.groups[2]
    kept = self.cache.setdefault(("group ids",), {}) if one else {}
    key = (self.groups, per)
    got = kept.get(key)
    if got is None:
      g = np.arange(first, first + ng, dtype=np.int64)
      got = [(c, np.repeat(v.astype(np.uint32), per)) for c, v in enumerate((g % gx, (g // gx) % gy, g // (gx * gy)))
             if c == 0 or v.any()]
      for _, v in got: v.flags.writeable = False
      if one:
        if len(kept) >= 16: kept.pop(next(iter(kept)))
        kept[key] = got
    return got

  def _fiber_arrays(self, ng, per):
    """(work-group of each fiber, local id, wave, local id x/y/z as uint32) for a batch of ng groups, kept
    (read-only: instructions only read them): every full batch, and the most recent small shapes (a launch of a
    few fibers repeats its shape)."""
    key = (ng, per, self.local_size, self.wave)
    kept = self.cache.setdefault(("fiber arrays",), {})
    got = kept.get(key)
    if got is None:
      lx, ly, _ = self.local_size
      lid = np.arange(per)
      lxyz = (lid % lx, (lid // lx) % ly, lid // (lx * ly))
      group_of, lids = np.repeat(np.arange(ng), per), np.tile(lid, ng)
      wave_of = group_of * ((per - 1) // self.wave + 1) + lids // self.wave
      got = (group_of, lids, wave_of, [np.tile(c, ng).astype(np.uint32) for c in lxyz])
      for a in got[:3] + tuple(got[3]): a.flags.writeable = False
      if ng * per < BATCH // 2:                  # small shapes: the few most recent
        small = [k for k in kept if k[0] * k[1] < BATCH // 2]
        if len(small) >= 16: kept.pop(small[0])
      kept[key] = got
    return got

  def branch(self, F, taken, target):
    """Selected fibers go to target where taken, else to the next instruction."""
    if F.sel is None:        # every fiber is at self._at (uniform): the pc array is written only when they diverge
      if taken.all(): self._next = target
      elif not taken.any(): self._next = self._at + 1
      else: F.pc = np.where(taken, target, self._at + 1)
    else: np.copyto(F.pc, np.where(taken, target, F.pc + 1), where=F.sel)

  def _run_batch(self, F, fresh: bool = False) -> None:
    """The lowest-pc rule. While every fiber is alive at one pc (uniform), that pc is kept in `upc` and the pc array
    is only written when a flow instruction diverges the fibers (branch()); otherwise the live fibers at the lowest
    pc run the instruction (F.sel). Finished fibers hold DEAD; an `end` every fiber runs (uniform) ends the batch.
    fresh: F was just made (every fiber alive at pc 0)."""
    prog, n_prog = self.prog, len(self.prog)
    steps = 0
    sync = self._sync                            # one per dispatch, reset for each batch
    if sync is not None: sync.reset()
    elif self.sync_mode != "off": sync = self._sync = SyncState(self.sync_mode)
    every = fresh or bool(F.alive.all())
    uniform, upc = every and (fresh or not F.pc.any()), 0
    if not every: F.pc[~F.alive] = DEAD           # finished fibers sort after every pc
    done = False
    while True:
      if uniform: pc = upc
      else:
        pc = int(F.pc.min())
        if pc == DEAD: return
        sel = F.pc == pc
        cnt = int(np.count_nonzero(sel))
        if cnt == F.n: uniform, upc = True, pc
      if pc >= n_prog or pc < 0:
        raise GPUFault(f"ir3: the program counter left the program ({pc} of {n_prog} instructions) without an end",
                       kind="illegal instruction")
      F.sel = None if uniform else sel
      ins = prog[pc]
      if uniform: cnt = F.n
      poisoned = sync.check(ins.sync, pc, ins.text, prog) if sync is not None else None
      if poisoned:
        poisoned = [r if r < 256 else (r - 256) >> 1 for r in poisoned]      # the full register holding a half
        saved = [(r, F.R[r].copy()) for r in poisoned]
        for r in poisoned: F.R[r] = POISON if F.sel is None else np.where(F.sel, POISON, F.R[r])
      if ins.kind == "flow":
        if ins.name == "nop":                                    # a nop moves the fibers that run it on by one
          if uniform: upc += 1
          else: np.add(F.pc, 1, out=F.pc, where=sel)
        else:
          self._at, self._next = pc, None
          ins.run(F, self)
          if uniform and self._next is not None: upc = self._next     # every fiber took the same way
          elif uniform and ins.name == "end": done = True              # no fiber is left
          else:
            uniform = False
            if ins.name == "end": F.pc[~F.alive] = DEAD
        self.executed += cnt
      else:
        for i in range(ins.rpt + 1): ins.run(F, self, i)
        self.executed += cnt * (ins.rpt + 1)
        if uniform: upc += 1
        else: np.add(F.pc, 1, out=F.pc, where=F.sel)
      if poisoned:
        written = {w[0] if w[0] < 256 else (w[0] - 256) >> 1 for w in ins.sync.writes}
        for r, row in saved:          # the late result still lands: only this reader saw the poison
          if r not in written: F.R[r] = row
      if sync is not None: sync.update(ins.sync, pc)
      steps += 1
      if not steps & 1023: self._check_hang(None, upc if uniform else int(F.pc.min()))
      if done: return

  def _check_hang(self, fiber: int | None, pc: int | None = None) -> None:
    if self.deadline is None or time.monotonic() <= self.deadline: return
    where = f"at pc {pc}" if pc is not None else f"at fiber {fiber} of the grid"
    raise GPUFault(f"ir3: the dispatch still runs {where} after the hang timeout ({self.executed} fiber-instructions)",
                   kind="hang")
