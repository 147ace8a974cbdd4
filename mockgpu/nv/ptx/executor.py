"""Runs a PTXKernel: every thread of a batch of CTAs at once, one numpy element per thread.

Compilation (once per kernel, and kept by the module text's digest: COMPILED_CACHE): the instructions are cut into
basic blocks (a block starts at a label or after a branch, ret/exit or barrier), each instruction becomes a closure
over numpy arrays (instrs.py), and the blocks are ranked in a weak topological order of the control-flow graph
(cfg.py: a loop's blocks contiguous, its exits after it).
Execution: a batch holds whole CTAs (up to BATCH_THREADS threads; a kernel's CTAs are independent, so several run
together). Each thread has a position (its block's rank); the scheduler runs the block of the lowest rank among the
runnable threads, with the mask of the threads there (threads that branched ahead wait there until the others catch
up, so diverged threads reconverge where their paths meet, and a loop's threads leave it together). While all
threads are at one block (the common case) no mask is used. bar.sync parks a thread until no thread of the batch can
run any more; then every parked thread is released (a barrier of every CTA of the batch at once, which is what each
CTA's bar.sync needs as long as CTAs do not wait for each other, which CUDA does not allow either). Warps are 32
consecutive threads of a CTA in linear thread-index order (x fastest), as the hardware forms them.
A masked block writes its registers by bit blending (old ^ ((old ^ new) & M)); a group of at most half the batch's
threads (at a block without cross-lane instructions) runs as a batch of its own, gathered once and scattered back
when it reaches a block where other threads wait (_run_compacted).
Blocks have at most MAX_BLOCK instructions, so that `stop` is polled often enough.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ....errors import GPUFault
from .cfg import weak_topological_order
from .instrs import compile_instr
from .memspace import Spaces
from .model import DTYPES, PTXError, PTXKernel, Stopped
from .operands import Ctx, dynamic_shared_offset, rd

BATCH_THREADS = 1 << 17
MAX_BLOCK = 64       # instructions per basic block at most (a block of 64 on 131,072 threads takes ~10 ms)
COMPACT_BELOW = 2    # a group of at most 1/COMPACT_BELOW of the threads runs as a batch of its own (_run_compacted)
STOP_POLL_S = 0.02
_FALL, _BRA, _EXIT, _BAR = 0, 1, 2, 3


class Block:
  __slots__ = ("fns", "ins", "count", "kind", "target", "next", "pred", "neg", "regs", "writes", "warp", "bar",
               "rank", "rnext", "rtarget")

  def __init__(self):
    self.fns, self.count, self.kind, self.target, self.next, self.pred, self.neg = [], 0, _FALL, 0, 0, None, False
    self.rank = self.rnext = self.rtarget = 0          # the schedule's ranks of this block, next and target (cfg.py)
    self.ins = []                                       # the instruction of each of fns (to name it in a fault)
    self.bar = None                                     # a barrier block's (id or None, thread count or None, ins)
    self.regs, self.writes, self.warp = (), (), False   # registers used / written; has cross-lane instructions


class Compiled:
  def __init__(self, blocks: dict, sregs: set, nregs: int, rtypes: list):
    self.blocks, self.sregs, self.nregs, self.rtypes = blocks, sregs, nregs, rtypes
    self.layouts: dict = {}
    self.order = _schedule(blocks)                      # rank -> block start (instruction index)
    self.ranked = [blocks[s] for s in self.order]       # rank -> Block
    self.pc_of_rank = np.array(self.order, np.int64)


def _successors(blocks: dict) -> dict:
  succ = {}
  for s, blk in blocks.items():
    if blk.kind == _BRA: succ[s] = (blk.target,) if blk.pred is None else (blk.next, blk.target)
    elif blk.kind == _EXIT: succ[s] = () if blk.pred is None or blk.next not in blocks else (blk.next,)
    else: succ[s] = (blk.next,) if blk.next in blocks else ()
  return succ


def _schedule(blocks: dict) -> list:
  """Block starts in the order diverged threads run them (cfg.py: loops contiguous, a loop's exits after it), the
  blocks no path reaches after, by address; sets each block's ranks."""
  order = weak_topological_order(0, _successors(blocks)) if 0 in blocks else []
  seen = set(order)
  order += [s for s in sorted(blocks) if s not in seen]
  rank = {s: i for i, s in enumerate(order)}
  for s, blk in blocks.items():
    blk.rank, blk.rnext = rank[s], rank.get(blk.next, rank[s])
    blk.rtarget = rank[blk.target] if blk.kind == _BRA else blk.rnext
  return order


def _terminates(ins) -> bool:
  return ins.op in ("bra", "brx", "ret", "exit", "bar", "barrier", "call") or (ins.op == "bar" and "sync" in ins.mods)


def _is_barrier(ins) -> bool:
  if ins.op == "barrier": return "sync" in ins.mods or not ins.mods or ins.mods == ["aligned"]
  if ins.op == "bar": return "warp" not in ins.mods and ("sync" in ins.mods or not ins.mods)
  return False


def _barrier_operands(ins) -> tuple:
  """(barrier id, thread count, ins) of bar.sync/barrier.sync a{, b}: immediates, None where absent or a register
  (bar.sync with no operand is barrier 0 of all threads)."""
  ops = [o for o in ins.operands]
  def imm(o): return int(o.value) if o is not None and o.kind == "imm" else None
  ident = imm(ops[0]) if ops else 0
  count = imm(ops[1]) if len(ops) > 1 else None
  return ident, count, ins


def _run_fns(S, blk, m) -> None:
  """The block's instructions; a fault or an error names the instruction's PTX line and text."""
  i = 0
  try:
    for i, f in enumerate(blk.fns): f(S, m)
  except (GPUFault, PTXError) as e:
    ins = blk.ins[i] if i < len(blk.ins) else None
    if ins is not None and not getattr(e, "_ptx_where", False):
      e._ptx_where = True
      e.add_note(f"at PTX line {ins.line}: {ins.text.strip()}")
    raise


# Translations by PTXKernel.source_key (the module text's digest and the kernel's name): a module parsed again (a test
# or a GPU that loads the same PTX at another address) reuses the closures and block layouts compiled for the first.
# A translation depends on nothing but the text: run-time state (registers, memories, module globals) is the Batch's.
COMPILED_CACHE: dict = {}
COMPILED_CACHE_SIZE = 128


def compile_kernel(k: PTXKernel) -> Compiled:
  if k._compiled is not None: return k._compiled
  key = k.source_key
  if key is not None:
    comp = COMPILED_CACHE.get(key)
    if comp is not None:
      k._compiled = comp
      return comp
  comp = _compile(k)
  if key is not None:
    if len(COMPILED_CACHE) >= COMPILED_CACHE_SIZE:   # the oldest goes (another GPU's thread may be here too)
      try: COMPILED_CACHE.pop(next(iter(COMPILED_CACHE), None), None)
      except RuntimeError: pass
    COMPILED_CACHE[key] = comp
  return comp


def _compile(k: PTXKernel) -> Compiled:
  ctx = Ctx(k)
  instrs = k.instrs
  leaders = {0} | set(k.labels.values())
  for i, ins in enumerate(instrs):
    if ins.op in ("bra", "ret", "exit", "call", "brx") or _is_barrier(ins) or (ins.op == "bar" and "warp" not in ins.mods):
      leaders.add(i + 1)
  base = sorted(x for x in leaders if x <= len(instrs))
  for a, b in zip(base, base[1:] + [len(instrs)]):   # long blocks in pieces: `stop` is polled between blocks
    leaders.update(range(a + MAX_BLOCK, b, MAX_BLOCK))
  starts = sorted(x for x in leaders if x <= len(instrs))
  blocks = {}
  sregs = set()
  for ins in instrs:
    for o in ins.operands:
      for x in ([o] + list(o.items) + ([o.base] if o.base is not None else [])):
        if x is not None and x.kind == "sreg": sregs.add(x.name)
  for bi, s in enumerate(starts):
    e = starts[bi + 1] if bi + 1 < len(starts) else len(instrs)
    blk = Block()
    blk.next = e
    ctx.reads, ctx.writes = set(), set()
    for i in range(s, e):
      ins = instrs[i]
      blk.count += 1
      if ins.op == "bra" or ins.op == "ret" or ins.op == "exit":
        ctx.ins = ins
        if ins.op == "bra":
          lab = ins.operands[0].name if ins.operands else None
          if lab not in k.labels: raise ctx.error(f"branch to unknown label {lab}")
          blk.kind, blk.target = _BRA, k.labels[lab]
        else: blk.kind = _EXIT
        if ins.guard is not None:
          from .model import Operand
          blk.pred = rd(ctx, Operand("reg", name=ins.guard[0]), "pred")
          blk.neg = ins.guard[1]
        continue
      if ins.op in ("bar", "barrier") and "warp" in ins.mods: continue   # bar.warp.sync: lanes run in lock-step
      if _is_barrier(ins) or ins.op == "bar":
        ctx.ins = ins
        if ins.op == "bar" and not _is_barrier(ins):
          raise ctx.error(f"bar.{'.'.join(ins.mods)} is not supported by the mock (only bar.sync/barrier.sync)")
        if ins.guard is not None: raise ctx.error("a predicated barrier is not supported by the mock")
        blk.kind = _BAR
        blk.bar = _barrier_operands(ins)
        continue
      if ins.op in ("call", "brx"):
        ctx.ins = ins
        raise ctx.error(f"{ins.op} (function calls / indirect branches) is not supported by the mock")
      f = compile_instr(ctx, ins)
      if f is not None:
        blk.fns.append(f)
        blk.ins.append(ins)
      blk.warp |= ins.op in ("shfl", "vote", "activemask", "match", "redux")
    blk.regs, blk.writes = tuple(sorted(ctx.reads | ctx.writes)), tuple(sorted(ctx.writes))
    blocks[s] = blk
  blocks[len(instrs)] = Block()
  blocks[len(instrs)].kind, blocks[len(instrs)].next = _EXIT, len(instrs)
  k._compiled = Compiled(blocks, sregs, len(ctx.rtype), ctx.rtype)
  return k._compiled


class _Layout:
  """Thread numbering of a batch of `nblocks` CTAs of `block` threads (the same for every batch of that shape, so it
  is kept on the compiled kernel): thread-in-CTA, CTA-in-batch, lane, warp; the zero-filled registers."""

  def __init__(self, block, nblocks: int, rtypes):
    bx, by, bz = block
    T = bx * by * bz
    n = self.n = T * nblocks
    self.t = t = np.tile(np.arange(T, dtype=np.int64), nblocks)
    self.blk = blk = np.repeat(np.arange(nblocks, dtype=np.int64), T)
    self.laneid = (t % 32).astype(np.uint32)
    warps_per_block = (T + 31) // 32
    self.widx = blk * warps_per_block + t // 32
    self.nwarps = nblocks * warps_per_block
    self.warp_base = np.arange(n, dtype=np.int64) - (t % 32)
    self.warp_len = np.minimum(32, T - (t // 32) * 32)
    self.tid = tuple(v.astype(np.uint32) for v in (t % bx, (t // bx) % by, t // (bx * by)))
    zeros = {}
    self.R = []
    for dt in rtypes:
      z = zeros.get(dt)
      if z is None:
        z = zeros[dt] = np.zeros(n, dt)
        z.flags.writeable = False   # shared by every register until written (writes replace, never modify)
      self.R.append(z)


class Batch:
  """The state of one batch of CTAs: registers, memories, special registers, warp layout."""

  def __init__(self, k: PTXKernel, comp: Compiled, grid, block, first: int, nblocks: int, mem, params: np.ndarray,
               dynamic_shared: int, gaddr: dict, sm=None):
    lay = comp.layouts.get((block, nblocks))
    if lay is None:
      if len(comp.layouts) > 8: comp.layouts.clear()
      lay = comp.layouts[(block, nblocks)] = _Layout(block, nblocks, comp.rtypes)
    self.n = n = lay.n
    self.gaddr = gaddr
    self.R = list(lay.R)
    self.laneid, self.widx, self.nwarps = lay.laneid, lay.widx, lay.nwarps
    self.warp_base, self.warp_len = lay.warp_base, lay.warp_len
    shared_bytes = dynamic_shared_offset(k) + dynamic_shared if (dynamic_shared or k.dynamic_shared_name) else \
      k.static_shared_bytes
    local_bytes = k.local_bytes_per_thread
    sm = sm or {}
    # what the launch gave the CTA and its threads (the QMD's SHARED_MEMORY_SIZE and local memory window, when the
    # caller is the GPU): an access past them faults, named by what limited it
    if sm.get("shared_limit") is not None: shared_bytes = min(shared_bytes, sm["shared_limit"])
    if sm.get("local_limit") is not None: local_bytes = min(local_bytes, sm["local_limit"])
    stride = (shared_bytes + 15) // 16 * 16
    lstride = (local_bytes + 15) // 16 * 16
    self.sp = Spaces(mem, np.zeros(max(stride * nblocks, 16), np.uint8), shared_bytes,
                     np.zeros(max(lstride * n, 16), np.uint8), local_bytes, lay.blk, params)
    self.sp.sh_stride, self.sp.lo_stride = stride, lstride
    self.sp.shared_why, self.sp.local_why = sm.get("shared_why", ""), sm.get("local_why", "")
    self._ntid, self._nctaid = sm.get("ntid") or block, sm.get("nctaid") or grid
    self._lay, self._first, self._grid, self._block = lay, first, grid, block
    self.dynamic_shared, self.total_shared = dynamic_shared, shared_bytes
    self._t = lay.t
    self._sregs: dict = {}

  def _sreg_value(self, base: str, d: int):
    if base == "tid": return self._lay.tid[d]
    if base == "ntid": return self._ntid[d]
    if base == "nctaid": return self._nctaid[d]
    gx, gy, _ = self._grid
    cta = self._first + self._lay.blk
    if d == 0: return cta % gx
    return (cta // gx) % gy if d == 1 else cta // (gx * gy)

  def sreg(self, name: str):
    v = self._sregs.get(name)
    if v is not None: return v
    base, _, dim = name[1:].partition(".")
    n = self.n
    if base in ("tid", "ntid", "ctaid", "nctaid"):
      v = np.asarray(self._sreg_value(base, "xyz".index(dim or "x"))).astype(np.uint32)   # ntid/nctaid: uniform
    elif base == "laneid": v = self.laneid
    elif base == "warpid": v = (self._t // 32).astype(np.uint32)
    elif base == "nwarpid": v = np.full(n, 64, np.uint32)
    elif base in ("smid", "gridid", "cluster_ctarank", "is_explicit_cluster") or base.startswith("envreg"):
      v = np.zeros(n, np.uint32)
    elif base in ("nsmid", "cluster_nctarank"): v = np.full(n, 132 if base == "nsmid" else 1, np.uint32)
    elif base.startswith("lanemask_"):
      lane = self.laneid.astype(np.uint64)
      one = np.uint64(1)
      eq = one << lane
      v = {"eq": eq, "lt": eq - one, "le": (eq << one) - one, "gt": ~((eq << one) - one), "ge": ~(eq - one)}[base[9:]]
      v = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    elif base in ("dynamic_smem_size",): v = np.full(n, self.dynamic_shared, np.uint32)
    elif base in ("total_smem_size", "aggr_smem_size"): v = np.full(n, self.total_shared, np.uint32)
    elif base in ("clock", "clock64", "clock_hi", "globaltimer", "globaltimer_lo", "globaltimer_hi"):
      ns = time.perf_counter_ns() if base.startswith("clock") else time.time_ns()
      if base in ("clock64", "globaltimer"): return np.full(n, ns, np.uint64)
      return np.full(n, (ns >> 32) if base.endswith("_hi") else ns & 0xFFFFFFFF, np.uint32)   # not cached: it moves
    else: raise PTXError(f"special register {name} is not supported by the mock")
    self._sregs[name] = v
    return v


_DONE = np.int64(1 << 62)     # the rank of an exited thread (never a group's)
_PARK = np.int64(1 << 40)     # added to the rank of a thread parked at a barrier until the barrier releases


_NO_LIMIT = 1 << 61


def _batch_run(S, comp: Compiled, stop, deadline: list, start: int = 0, limit: int = _NO_LIMIT,
               top: bool = True) -> tuple:
  """Run the threads of S from rank `start` (cfg.py's order) until they end, park at a barrier, or (a compacted
  group, top=False) reach `limit` or a block with cross-lane instructions: the outside threads wait at `limit` or
  later, and the lowest rank runs first. Returns (thread-instructions, pc, upc, waiting, done): how it left them.

  While every thread is runnable and at one block (upc, its rank) blocks run unmasked; after a divergence `pc` holds
  each thread's rank: an exited thread's is _DONE, a parked one's is its rank + _PARK, so a group is just pc == cur.
  `waiting` counts the runnable threads at each rank (the lowest rank runs next, with no pass over the threads to
  find it). Moving a group is pc += mask * (new - old) per outcome (arithmetic: numpy's where= and masked stores are
  ~30x slower on an irregular mask). A group of under 1/COMPACT_BELOW of the threads runs as a batch of its own
  (_run_compacted), for as long as it stays below `limit`: a loop only some threads still run costs their share."""
  ranked = comp.ranked
  n = S.n
  count = 0
  upc = start
  pc = None
  waiting: dict = {}
  ndone = 0
  while True:
    if upc is not None:
      if upc >= limit: break
      cur, blk, m, cnt = upc, ranked[upc], None, n
      if not top and blk.warp: break
    else:
      if not waiting:                      # nothing can run: release the barrier, or the batch has ended
        if ndone == n or not top: break
        parked = pc != _DONE
        _check_barriers(S, comp, comp.pc_of_rank[np.where(parked, pc - _PARK, 0)], parked)
        pc -= parked * _PARK
        ranks, counts = np.unique(pc[parked], return_counts=True)
        waiting = dict(zip(ranks.tolist(), counts.tolist()))
        continue
      cur = min(waiting)
      blk = ranked[cur]
      if cur >= limit or (not top and blk.warp): break
      cnt = waiting.pop(cur)
      if cnt == n:
        upc = cur
        continue
      m = pc == cur
      if cnt * COMPACT_BELOW <= n and not blk.warp:
        bound = min(limit, min(waiting)) if waiting else limit
        c, ndone_sub = _run_compacted(S, comp, stop, deadline, m, cur, bound, pc, waiting)
        count += c
        ndone += ndone_sub
        continue
    if not top:
      S.ensure(blk.regs)
      S.written.update(blk.writes)
    _run_fns(S, blk, m)
    count += cnt * blk.count
    now = time.monotonic()
    if now >= deadline[0]:
      deadline[0] = now + STOP_POLL_S
      if stop is not None and stop(): raise Stopped("the kernel was stopped before it ended")
    kind = blk.kind
    if kind == _FALL or (kind == _BRA and blk.pred is None) or kind == _BAR:
      nxt = blk.rtarget if kind == _BRA else blk.rnext
      if upc is not None and (top or kind != _BAR): upc = nxt   # (all of a batch at a barrier: it releases at once)
      elif upc is not None:                   # a compacted group is not all of its CTAs: it parks, the caller releases
        pc, upc = np.full(n, np.int64(nxt) + _PARK), None
      elif kind == _BAR: pc += m * (np.int64(nxt - cur) + _PARK)
      else:
        pc += m * np.int64(nxt - cur)
        waiting[nxt] = waiting.get(nxt, 0) + cnt
      continue
    # branch or exit, possibly predicated
    p = None
    if blk.pred is not None:
      p = np.asarray(blk.pred(S))
      if blk.neg: p = ~p
    if upc is not None:
      if p is None: ntaken = n
      elif p.ndim == 0: ntaken = n if p else 0    # a uniform condition
      else: ntaken = int(np.count_nonzero(p))
      if ntaken == 0:
        upc = blk.rnext
        continue
      if ntaken == n and kind == _BRA:
        upc = blk.rtarget
        continue
      if ntaken == n:                         # every thread exits
        upc, ndone = None, n
        break
      pc = np.full(n, upc, np.int64)
      m = np.ones(n, bool)
      upc = None
    if p is None: taken, ntaken = m, cnt
    else:
      taken = np.broadcast_to(p, (n,)) & m
      ntaken = int(np.count_nonzero(taken))
    pc += m * np.int64(blk.rnext - cur)
    if cnt > ntaken: waiting[blk.rnext] = waiting.get(blk.rnext, 0) + cnt - ntaken
    if ntaken:
      if kind == _BRA:
        pc += taken * np.int64(blk.rtarget - blk.rnext)
        waiting[blk.rtarget] = waiting.get(blk.rtarget, 0) + ntaken
      else:
        pc += taken * (_DONE - np.int64(blk.rnext))
        ndone += ntaken
  return count, pc, upc, waiting, ndone


class BarrierHang(PTXError):
  """Threads of a CTA wait at barriers that can never complete (a hang on hardware)."""


def _check_barriers(S, comp: Compiled, pc: np.ndarray, parked: np.ndarray) -> None:
  """Every thread not exited waits at a barrier: each CTA's barrier completes if its waiting threads are all at one
  barrier (exited threads count as arrived: PTX ISA, "exit": exiting threads that hold up a barrier for all threads
  release it) and a thread count b, where given, is reached. Else the CTA hangs, reported with both barriers."""
  after = {blk.next: blk.bar for blk in comp.blocks.values() if blk.bar is not None}
  idx = np.flatnonzero(parked)
  where = pc[idx]
  cta = S._lay.blk[idx] if hasattr(S, "_lay") else np.zeros(idx.shape[0], np.int64)
  uniq, inv = np.unique(where, return_inverse=True)
  bars = {int(p): after.get(int(p)) for p in uniq}
  if any(b is None for b in bars.values()): return       # a thread parked elsewhere than after a barrier: not judged
  if len(bars) == 1 and next(iter(bars.values()))[1] is None: return   # one barrier, no count: every CTA completes it
  bid = np.array([-1 if bars[int(p)][0] is None else bars[int(p)][0] for p in uniq], np.int64)[inv.reshape(-1)]
  for c in np.unique(cta):
    sel = cta == c
    ids = np.unique(bid[sel])
    pcs = np.unique(where[sel])
    first = bars[int(pcs[0])]
    if len(ids) > 1 and -1 not in ids:     # (a barrier id in a register is not judged)
      other = next(bars[int(p)] for p in pcs if bars[int(p)][0] != first[0])
      n0 = int(np.count_nonzero(bid[sel] == first[0]))
      raise BarrierHang(f"CTA {S._first + int(c)}: {n0} threads wait at barrier {first[0]} (PTX line {first[2].line}: "
                        f"{first[2].text.strip()}) while {int(np.count_nonzero(sel)) - n0} others wait at barrier "
                        f"{other[0]} (PTX line {other[2].line}: {other[2].text.strip()}): neither can complete, the "
                        f"CTA hangs")
    for p in pcs:
      b = bars[int(p)]
      if b is None or b[1] is None: continue
      arrived = int(np.count_nonzero(sel & (bid == (b[0] if b[0] is not None else -1))))
      if arrived < b[1]:
        raise BarrierHang(f"CTA {S._first + int(c)}: barrier {b[0]} (PTX line {b[2].line}: {b[2].text.strip()}) "
                          f"waits for {b[1]} threads and only {arrived} reach it: the CTA hangs")


class _Compacted:
  """The threads of a sparse mask as a batch of their own (lane j = thread idx[j]): blocks then compute on those
  threads only, instead of on every thread with a mask. A register is gathered from the full batch when a block
  that uses it first runs (ensure); `written` collects the registers to scatter back."""

  def __init__(self, S, idx: np.ndarray):
    self.n, self.idx, self.full = idx.shape[0], idx, S
    self.R = [None] * len(S.R)
    self.written: set = set()
    self._sp = None
    self.gaddr = S.gaddr

  def ensure(self, regs) -> None:
    R, full = self.R, self.full
    for i in regs:
      if R[i] is None:
        if full.R[i] is None: full.ensure((i,))
        v = full.R[i]
        R[i] = v if v.ndim == 0 else v[self.idx]     # a uniform value is the same for the subset

  @property
  def sp(self):    # made when an instruction first touches memory (most compacted blocks do not)
    sp = self._sp
    if sp is None: sp = self._sp = self.full.sp.subset(self.idx)
    return sp

  def sreg(self, name: str):
    v = self.full.sreg(name)
    return v if v.ndim == 0 else v[self.idx]


def _run_compacted(S, comp: Compiled, stop, deadline: list, m: np.ndarray, cur: int, bound: int, pc: np.ndarray,
                   waiting: dict) -> tuple:
  """Run the group m (every thread at rank cur) as a batch of its own until it reaches rank `bound` (where the other
  threads wait), ends or parks; then scatter its registers and ranks back into S, pc and waiting. Returns
  (thread-instructions, threads that exited)."""
  idx = np.flatnonzero(m)
  cnt = idx.shape[0]
  sub = _Compacted(S, idx)
  count, spc, supc, swait, sdone = _batch_run(sub, comp, stop, deadline, cur, bound, top=False)
  R = S.R
  for i in sub.written:
    v = sub.R[i]
    if R[i] is None: S.ensure((i,))
    old = R[i]
    if _owned(old): old[idx] = v              # (no other register, view or cache holds it: scatter in place)
    else:
      full = np.full(S.n, old, old.dtype) if old.ndim == 0 else old.copy()
      full[idx] = v
      R[i] = full
  if isinstance(S, _Compacted): S.written.update(sub.written)
  if sdone == cnt: pc += m * (_DONE - np.int64(cur))               # every thread of the group exited
  elif spc is None:                                                 # all still together, at rank supc
    pc += m * np.int64(supc - cur)
    waiting[supc] = waiting.get(supc, 0) + cnt
  else:
    pc[idx] = spc
    for r, c in swait.items(): waiting[r] = waiting.get(r, 0) + c
  return count, sdone


def _owned(a: np.ndarray) -> bool:
  """Whether only the register file's slot (and the caller's name for it) refers to array a, so that it may be
  changed in place: registers otherwise never are, because `mov` shares arrays between registers and a bit cast
  (operands.rd) makes views of them; either shows in the reference count, as does a kept summary (Spaces.indexed)
  or a layout's shared zeros (which are also read-only)."""
  return a.ndim == 1 and a.base is None and a.flags.writeable and sys.getrefcount(a) <= _OWNED_REFS


_OWNED_REFS = 4     # the list slot, the caller's local name, _owned's parameter, getrefcount's argument


def _as_dim3(v, what: str) -> tuple:
  t = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
  t = t + (1,) * (3 - len(t))
  if len(t) != 3 or any(x < 1 for x in t): raise PTXError(f"{what} {v!r} must be 1 to 3 positive dimensions")
  return t


def run(k: PTXKernel, grid, block, params: bytes = b"", memory=None, dynamic_shared: int = 0, stop=None,
        sm: dict | None = None) -> dict:
  """Run kernel k over grid (CTAs) x block (threads per CTA) with the parameter block `params` (the CUDA ABI
  layout of k.params) on GPUMemory `memory`. Returns {"thread_instructions", "blocks", "threads", "seconds",
  "cpu_seconds"} (wall clock and this process's CPU time of the run).
  sm: what a GPU's launch gives beyond that (all optional): "ntid"/"nctaid" (the values %ntid/%nctaid read, which
  an SM takes from constant bank 0, not from the launch's shape), "shared_limit"/"local_limit" (bytes a CTA / a
  thread may access) with "shared_why"/"local_why" (what set them, for the fault's message)."""
  grid, block = _as_dim3(grid, "grid"), _as_dim3(block, "block")
  T = block[0] * block[1] * block[2]
  if T > 1024: raise PTXError(f"{k.name}: {T} threads per CTA exceed the limit of 1024")
  if k.reqntid and tuple(k.reqntid) + (1,) * (3 - len(k.reqntid)) != block:
    raise PTXError(f"{k.name}: launched with block {block}, but .reqntid requires {k.reqntid}")
  params = bytes(params)
  if len(params) < k.param_bytes:
    raise PTXError(f"{k.name}: the parameter block has {len(params)} bytes, the kernel needs {k.param_bytes}")
  pbuf = np.zeros((max(len(params), 1) + 15) // 16 * 16, np.uint8)
  pbuf[:len(params)] = np.frombuffer(params, np.uint8)
  comp = compile_kernel(k)
  gaddr, added = _module_globals(k, memory)
  t0, c0 = time.perf_counter(), time.process_time()
  total = 0
  nblocks = grid[0] * grid[1] * grid[2]
  per = max(1, BATCH_THREADS // T)
  deadline = [time.monotonic() + STOP_POLL_S]
  try:
    with np.errstate(all="ignore"):
      for first in range(0, nblocks, per):
        nb = min(per, nblocks - first)
        S = Batch(k, comp, grid, block, first, nb, memory, pbuf, dynamic_shared, gaddr, sm)
        total += _batch_run(S, comp, stop, deadline)[0]
  finally:
    for a in added: memory.remove_range(a)
  return {"thread_instructions": total, "blocks": nblocks, "threads": nblocks * T, "seconds": time.perf_counter() - t0,
          "cpu_seconds": time.process_time() - c0}


def _module_globals(k: PTXKernel, memory) -> tuple[dict, list]:
  """Host storage of the module's .global/.const variables (kept on the module: CUDA __device__ variables keep their
  values between launches), mapped into `memory` for the launch."""
  mod = k.module
  store = getattr(mod, "_gstore", None)
  if store is None:
    store = {}
    for name, v in mod.globals.items():
      raw = np.zeros(max(v.size, 1) + 64, np.uint8)
      pad = (-raw.ctypes.data) % 64
      view = raw[pad:pad + max(v.size, 1)]
      if v.init: view[:len(v.init)] = np.frombuffer(v.init, np.uint8)
      store[name] = (raw, raw.ctypes.data + pad, max(v.size, 1))
    mod._gstore = store
  added = []
  gaddr = {}
  for name, (raw, addr, size) in store.items():
    gaddr[name] = addr
    if memory is not None and memory.range_of(addr) is None:
      memory.add_range(addr, size)
      added.append(addr)
  return gaddr, added
