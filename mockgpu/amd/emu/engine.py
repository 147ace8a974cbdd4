"""The dispatch engine: wave start-up state, the block cache, and the scheduler that runs all waves of a dispatch
together, grouped by program counter.

Wave start-up state (AMD "RDNA3 ISA", "Initial wave state"; LLVM AMDGPUUsage "Initial kernel execution state"): the first USER_SGPR_COUNT (COMPUTE_PGM_RSRC2[5:1]) SGPRs hold
COMPUTE_USER_DATA_0..; then the work-group id X, Y, Z, each only when its TGID_*_EN bit (rsrc2 bits 7, 8, 9) is set;
then the work-group info SGPR when TG_SIZE_EN (bit 10) is set; gfx12 also has the work-group ids in TTMP9 (X) and
TTMP7 (Y | Z << 16). v0 holds the packed work-item id x | y << 10 | z << 20 (gfx11+, and gfx90a+ such as gfx942),
with y and z present per ENABLE_VGPR_WORKITEM_ID (rsrc2[12:11]). EXEC (wave64: EXEC_LO and EXEC_HI) holds the lanes
of the wave that exist (a partial last wave of a work-group has fewer).
"""
from __future__ import annotations

import time
from ctypes import c_char as _c_char

import numpy as np

from ....errors import GPUFault
from . import rt
from .results import DispatchStats as _DispatchStats, InstructionBudgetExceeded
from . import blockcache
from .translate import arch_of, lanes_of, translate

DONE = -1
_new_tuple = tuple.__new__
FAIRNESS_STREAK = 256   # scheduling: see _run_batch
# Time slices (see SuspendedDispatch): a sliced dispatch returns to its caller once it has run this long (wall time),
# so that the mock GPU never holds the host's thread (synchronous mode) or its own lock (threaded mode) for longer.
# The clock is read after every block (SLICE_CHECK_BLOCKS = 1: about 40 ns, against a block's microseconds; a wide
# batch's block can take milliseconds, so reading it less often would let a slice run far past SLICE_SECONDS), and
# never on the one-block fast path, bounded by its block.
SLICE_SECONDS = 0.02
SLICE_CHECK_BLOCKS = 1
_NO_DEADLINE = (float("inf"),)
MAX_BATCH_WAVES = 8192   # waves held in registers at once (VGPR arrays: 128 KiB per register per 1024 waves)
BATCH_VGPR_BYTES = 64 << 20   # ... and at most about this much VGPR state (fewer waves for kernels with many VGPRs)


class WaveState:
  """Per-dispatch state that blocks see as `st`: waves, SCC, memory access, wave ids."""

  def __init__(self, n: int, mem: rt.MemAccess, wid: np.ndarray):
    self.n = n
    self.wid = wid
    self.scc = np.zeros(n, np.uint32)
    self.mem = mem

  def clear_memory(self) -> None:
    """Pooled LDS and scratch zeroed, as fresh ones would be."""
    self.mem.lds.fill(0)
    if self.mem.scratch_words: self.mem.scratch.fill(0)

  def reset(self) -> None:
    """Pooled state made like a fresh one: LDS and scratch zeroed, SCC clear."""
    self.clear_memory()
    self.scc = np.zeros(self.n, np.uint32)


def _cache(memory) -> dict:
  return memory.block_cache


def _translate(memory, pc: int, mode: int):
  try:
    return translate(memory, pc, mode)
  except GPUFault:
    raise
  except Exception as e:
    raise GPUFault(f"cannot translate the block at {pc:#x}: {type(e).__name__}: {e}", address=pc,
                   kind="illegal instruction") from e


def _code_unchanged(memory, blk) -> bool:
  """Whether the code of `blk` is still mapped and still holds the bytes it was translated from (code may be
  rewritten, or unmapped and mapped again, between dispatches). The mapping is looked up again only when the memory's
  mapping table changed since the last look (GPUMemory.generation); the bytes are compared every time, through a
  ctypes view of the block's code made at that look (~50 ns for a short block)."""
  generation = memory.generation      # read before the table: see GPUMemory._install
  if blk.mapped_generation != generation:
    rng = memory.range_of(blk.start)
    if rng is None or rng[1] < blk.end: return False
    blk.code_view = (_c_char * (blk.end - blk.start)).from_address(blk.start)
    blk.mapped_generation = generation
  return blk.code_view.raw == blk.code   # read only while mapped (checked above)


def _block(memory, cache: dict, checked: set, pc: int, mode: int):
  blk = cache.get((pc, mode))
  if blk is not None and pc not in checked and not _code_unchanged(memory, blk):
    blk = None   # rewritten since it was translated (checked once per dispatch): translate it again
  if blk is None:
    # the process-wide cache first (blockcache.py: another device, or this one earlier, translated these bytes here)
    blk = blockcache.lookup(memory, pc, mode)
    if blk is None: blk = blockcache.store(pc, mode, _translate(memory, pc, mode))
    cache[(pc, mode)] = blk
  checked.add(pc)
  return blk


def run_dispatch(memory, pgm_addr, rsrc1, rsrc2, rsrc3, user_sgprs, grid, block, lds_bytes, scratch,
                 instruction_budget, sliced=False, target=0):
  """Run a dispatch: to completion (-> DispatchStats), or, when `sliced`, for at most about SLICE_SECONDS: then
  a dispatch that has not ended comes back as a SuspendedDispatch, resumed later where it stopped. target: the
  architecture and wave size as translate.target_bits() gives them (0: gfx1100, wave32)."""
  t0 = time.perf_counter()
  # a launch like one before (same shape, resources, LDS and scratch, target; any program, arguments and float
  # mode): its checked set-up, templates and pooled state are reused as they are (see _Shape)
  fast_key = (grid, block, rsrc1 & 0x3F | target << 8 | (rsrc3 & 0x3F) << 16, rsrc2 & 0x1FBE, lds_bytes, scratch)
  launches = memory.dispatch_launches
  # taken out of the cache while this dispatch uses its pooled state (another thread's dispatch of the same shape on
  # this memory builds its own meanwhile), and put back at its end (by _relaunch's generator when it suspends)
  shape = launches.pop(fast_key, None)
  if shape is not None:
    work = None
    try:
      mode = (rsrc1 >> 16) & 0xF | target
      entry = shape.entries.get((pgm_addr, mode)) if shape.clean else None
      if entry is not None:
        blk = entry[0]
        # _code_unchanged's common case inlined: the mappings did not change and the code bytes are the same
        if blk.mapped_generation == memory.generation and blk.code_view.raw == blk.code or _code_unchanged(memory, blk):
          executed = _run_entry(shape, entry, user_sgprs, instruction_budget)
          # _stats, inlined; tuple.__new__ builds the NamedTuple without its Python-level __new__
          return _new_tuple(_DispatchStats, (shape.W, executed, time.perf_counter() - t0))
      deadline = [t0 + SLICE_SECONDS] if sliced else _NO_DEADLINE
      work = _relaunch(memory, launches, fast_key, shape, user_sgprs, pgm_addr, mode, instruction_budget, deadline)
    finally:
      if work is None:       # else the generator gives it back when it ends; _keep inlined
        if len(launches) >= SHAPE_CACHE_ENTRIES: launches.clear()
        launches[fast_key] = shape
    return _first_slice(work, shape.W, deadline, t0)
  gx, gy, gz = (int(v) for v in grid)
  lx, ly, lz = (int(v) for v in block)
  if min(gx, gy, gz, lx, ly, lz) <= 0:
    return _stats(0, 0, t0)
  threads = lx * ly * lz
  if threads > 1024: raise GPUFault(f"work-group of {threads} threads exceeds 1024", kind="invalid dispatch")
  waves_per_wg = -(-threads // lanes_of(target))
  groups = gx * gy * gz
  deadline = [t0 + SLICE_SECONDS] if sliced else _NO_DEADLINE
  work = _batches(memory, pgm_addr, rsrc1, rsrc2, user_sgprs, (gx, gy, gz), (lx, ly, lz), lds_bytes, scratch,
                  instruction_budget, fast_key, deadline, target, rsrc3)
  return _first_slice(work, groups * waves_per_wg, deadline, t0)


class SuspendedDispatch:
  """A sliced dispatch that had not ended when its time slice did (run_dispatch(sliced=True)). Its state (per-wave
  PCs, barrier flags, registers, LDS, the batch it was in, the wave-instructions executed so far, which count against
  its budget across slices) lives in a suspended generator, and so does its pooled set-up (_Shape): out of the
  memory's caches until the dispatch ends or is dropped, so no other dispatch can use it meanwhile.

  resume(): the next slice: DispatchStats once the dispatch has ended (seconds: the time of its slices), else None;
  an error of the dispatch (GPUFault) is raised as unsliced execution raises it, and ends it. drop(): abandon it
  (the pooled set-up goes back to the caches). One thread at a time (the mock GPU's lock)."""

  __slots__ = ("_work", "_deadline", "waves", "seconds", "slices")

  def __init__(self, work, waves: int, deadline: list, seconds: float):
    self._work, self._deadline, self.waves, self.seconds, self.slices = work, deadline, waves, seconds, 1

  @property
  def done(self) -> bool: return self._work is None

  def resume(self):
    work = self._work
    if work is None: raise RuntimeError("resume() of a dispatch that ended or was dropped")
    t0 = time.perf_counter()
    self._deadline[0] = t0 + SLICE_SECONDS
    self.slices += 1
    try: next(work)
    except StopIteration as end:
      self._work = None
      return _DispatchStats(self.waves, end.value, self.seconds + time.perf_counter() - t0)
    except BaseException:      # a fault (or an exception in the host's thread): the generator has ended
      self._work = None
      raise
    self.seconds += time.perf_counter() - t0
    return None

  def drop(self) -> None:
    work, self._work = self._work, None
    if work is not None: work.close()     # runs the generators' finally clauses: the set-up goes back


def _first_slice(work, waves: int, deadline: list, t0: float):
  """Run a dispatch's generator until it ends (-> DispatchStats) or its slice ends (-> SuspendedDispatch)."""
  try: next(work)
  except StopIteration as end: return _stats(waves, end.value, t0)
  return SuspendedDispatch(work, waves, deadline, time.perf_counter() - t0)


def _relaunch(memory, launches, fast_key, shape, user_sgprs, pgm_addr, mode, instruction_budget, deadline):
  """The fast path's multi-block dispatch (a generator, see SuspendedDispatch): gives the shape back at its end."""
  try:
    st = shape.st
    S, V = shape.registers(user_sgprs)
    st.reset()
    return (yield from _loop(memory, memory.block_cache, set(), shape, st, S, V, pgm_addr, mode, instruction_budget,
                             0, deadline))
  finally: _keep(launches, fast_key, shape)


def _batches(memory, pgm_addr, rsrc1, rsrc2, user_sgprs, grid, block, lds_bytes, scratch, instruction_budget,
             fast_key, deadline, target, rsrc3=0):
  """All work-groups of a dispatch, batch after batch (a generator, see SuspendedDispatch)."""
  gx, gy, gz = grid
  lx, ly, lz = block
  lanes = lanes_of(target)
  waves_per_wg = -(-(lx * ly * lz) // lanes)
  groups = gx * gy * gz
  # work-groups run in batches (they are independent but for memory) so that a huge grid needs bounded memory
  vgprs = ((rsrc1 & 0x3F) + 1) * 8
  batch_waves = max(256 * 32 // lanes, min(MAX_BATCH_WAVES * 32 // lanes, BATCH_VGPR_BYTES // (vgprs * lanes * 4)))
  per_batch = max(1, batch_waves // waves_per_wg)
  executed = 0
  cache = _cache(memory)
  checked: set = set()
  for first in range(0, groups, per_batch):
    count = min(per_batch, groups - first)
    executed += yield from _run_batch(memory, cache, checked, first, count, pgm_addr=pgm_addr, rsrc1=rsrc1,
                                      rsrc2=rsrc2, user_sgprs=user_sgprs, grid=grid, block=block,
                                      lds_bytes=lds_bytes, scratch=scratch, budget=instruction_budget,
                                      already=executed, deadline=deadline,
                                      fast_key=fast_key if count == groups else None, target=target,
                                      rsrc3=rsrc3)
  return executed


def _run_entry(shape, entry, user_sgprs, instruction_budget) -> int:
  """A one-block kernel launched again in a shape whose pooled register files are clean (see _Shape.entries): its
  entry block ends every wave and writes no register back, so they stay clean: only the user SGPRs (when the block
  reads any) and LDS/scratch (when the block may touch them) are reset before the block runs once over all waves.
  An s_endpgm-only block is not even called."""
  blk, needs_user = entry
  executed = blk.insts * shape.W
  if executed > instruction_budget:
    raise InstructionBudgetExceeded(instruction_budget, blk.start)
  if blk.trivial: return executed
  if needs_user: shape.set_user(user_sgprs)
  st = shape.st
  if blk.private: st.clear_memory()
  with np.errstate(all="ignore"):
    try:
      blk.fn(shape.S_rows, shape.V_rows, st, None)
    except GPUFault:
      raise
    except Exception as e:   # as in _loop
      raise GPUFault(f"emulator error in the block at {blk.start:#x}: {type(e).__name__}: {e}", address=blk.start,
                     kind="emulator error") from e
  return executed


def _keep(cache: dict, key, value) -> None:
  """cache[key] = value, the cache emptied first when it holds SHAPE_CACHE_ENTRIES already."""
  if len(cache) >= SHAPE_CACHE_ENTRIES: cache.clear()
  cache[key] = value


# Small batches (at most SMALL_BATCH_WAVES waves, e.g. a launch of a few work-groups) reuse a per-shape set-up: the
# start-up register values that depend only on the launch shape (work-group ids, v0 work-item ids, EXEC) are
# computed once per (grid, block, rsrc1 VGPR count, rsrc2 start-up bits, batch), and the register files are pooled
# (reset from the template on every dispatch, so no state leaks from one dispatch to the next). Bigger batches
# build everything afresh: their set-up is a small part of their run time.
SMALL_BATCH_WAVES = 64
SHAPE_CACHE_ENTRIES = 32      # per GPUMemory
ENTRIES_PER_SHAPE = 8         # one-block kernels remembered per cached shape (_Shape.entries)
POOLED_MEMORY_BYTES = 256 << 10   # LDS + scratch of a small batch kept for the next dispatch up to this size
POOLED_VGPR_BYTES = 256 << 10     # ... and its VGPR file (pooled with a template: twice this). Bound per GPUMemory:
# 2 caches x SHAPE_CACHE_ENTRIES shapes x (2 VGPR files + 2 LDS/scratch sets) <= 64 MiB; a typical launch: a few KiB


class _Shape:
  """The start-up state of one batch shape: templates (never handed to blocks) and pooled register files."""

  def __init__(self, W, groups, first_group, grid, block, rsrc1, rsrc2, target=0):
    gx, gy, gz = grid
    lx, ly, lz = block
    threads = lx * ly * lz
    self.lanes = lanes = lanes_of(target)
    waves_per_wg = -(-threads // lanes)
    self.W, self.user_count = W, (rsrc2 >> 1) & 0x1F
    vgprs = max(((rsrc1 & 0x3F) + 1) * 8, 8)
    S = np.zeros((128, W), np.uint32)
    self.wg_local = np.repeat(np.arange(groups, dtype=np.int64), waves_per_wg)    # group index within the batch
    wg_linear = self.wg_local + first_group
    nxt = self.user_count
    for bit, dim in ((7, 0), (8, 1), (9, 2)):
      if rsrc2 >> bit & 1:
        if nxt < 106:
          S[nxt] = wg_linear % gx if dim == 0 else (wg_linear // gx) % gy if dim == 1 else wg_linear // (gx * gy)
        nxt += 1
    if rsrc2 >> 10 & 1 and nxt < 106:
      # work-group info: the number of waves in the group in [5:0] (plus the first-wave flag, not modelled)
      S[nxt] = waves_per_wg
    if arch_of(target) == "gfx1200":
      # RDNA4's architected work-group ids (LLVM AMDGPUUsage, "Initial Kernel Execution State", GFX12): TTMP9 = X,
      # TTMP7 = Y | Z << 16 (clang reads them instead of the SGPRs after the user SGPRs)
      S[117] = wg_linear % gx
      S[115] = ((wg_linear // gx) % gy) | ((wg_linear // (gx * gy)) << 16)
    # one work-group's lanes, then tiled over the groups
    tid = np.arange(waves_per_wg * lanes, dtype=np.int64).reshape(waves_per_wg, lanes)
    id_mode = (rsrc2 >> 11) & 3
    v0 = tid % lx
    if id_mode >= 1: v0 |= ((tid // lx) % ly) << 10
    if id_mode >= 2: v0 |= (tid // (lx * ly)) << 20
    exists = tid < threads
    v0 = np.where(exists, v0, 0).astype(np.uint32)
    exec_mask = np.packbits(exists, axis=1, bitorder="little").view("<u4")   # (waves, 1 or 2 dwords): EXEC_LO/HI
    S[126] = np.tile(exec_mask[:, 0], groups)
    if lanes == 64: S[127] = np.tile(exec_mask[:, 1], groups)
    self.S0, self.v00 = S, np.tile(v0, (groups, 1))
    self.vgprs = vgprs
    self.S = self.V = None      # the pooled register files (cached shapes only): reset before each use
    self.wid = np.arange(W, dtype=np.int64)
    self.acc_limits = None      # gfx942: (ACCUM_OFFSET, allocated VGPRs) of the dispatch (_acc_limits)
    self.pooled = False         # set by _shape for the cached ones: their LDS/scratch (WaveState) may be kept too
    self.states: dict = {}      # (LDS words, scratch words per lane) -> WaveState of a previous dispatch
    self.st = None              # the WaveState of the last dispatch when pooled (the fast path of run_dispatch)
    self.groups = groups
    self.wid.flags.writeable = self.wg_local.flags.writeable = False    # shared by the dispatches of this shape
    # One-block kernels: (pc, float mode) -> (block, block reads user SGPRs) for each dispatch of this (pooled) shape
    # that reset the register files and then ran one block, at pc, that ended every wave. Such a block writes no
    # register back and changes none in place, so after it the files are still `clean`: the start-up values but for
    # the user SGPRs, and SCC 0. A kernel found here, launched while the files are clean, with its code unchanged,
    # runs through _run_entry (which keeps them clean); any other dispatch makes them unclean first (_loop).
    self.entries: dict = {}
    self.clean = False

  def registers(self, user):
    """Register lists for one dispatch: for a cached shape, views of its pooled files reset from the templates; else
    the templates themselves (used once) and fresh zeroed VGPRs (np.zeros: pages only touched when written)."""
    uc = self.user_count
    if len(user) < uc: user = list(user) + [0] * (uc - len(user))
    if not self.pooled:
      S, V = self.S0, np.zeros((self.vgprs, self.W, self.lanes), np.uint32)
      if uc: S[:uc] = np.array([v & 0xFFFFFFFF for v in user[:uc]], np.uint32)[:, None]
      V[0] = self.v00
      return list(S), list(V)
    if self.S is None:
      self.S, self.V = np.empty_like(self.S0), np.empty((self.vgprs, self.W, self.lanes), np.uint32)
      self.S_rows, self.V_rows = list(self.S), list(self.V)
      self.V0 = np.zeros_like(self.V)
      self.V0[0] = self.v00
      self.S_user = self.S[:uc].T      # (W, user SGPRs): a list of the user values broadcasts over the waves
    np.copyto(self.S, self.S0)
    self.set_user(user)
    np.copyto(self.V, self.V0)
    return self.S_rows.copy(), self.V_rows.copy()

  def set_user(self, user) -> None:
    """The user SGPRs of every wave of the pooled S file (missing values: 0; the low 32 bits of each)."""
    uc = self.user_count
    if not uc: return
    if len(user) < uc: user = list(user) + [0] * (uc - len(user))
    values = user[:uc] if len(user) == uc else list(user[:uc])
    try: self.S_user[...] = values
    except (OverflowError, TypeError, ValueError):   # values outside 0..2**32-1: the low 32 bits, as before
      self.S_user[...] = [v & 0xFFFFFFFF for v in values]

  def remember_entry(self, pc: int, mode: int, blk) -> None:
    """After a dispatch that reset the pooled files and ran only `blk` (ending every wave): see `entries`."""
    if self.S is None or blk.max_vgpr >= len(self.V_rows): return   # not pooled / VGPRs beyond the pooled file
    if len(self.entries) >= ENTRIES_PER_SHAPE: self.entries.clear()
    self.entries[(pc, mode)] = (blk, any(r < self.user_count for r in blk.sregs))
    self.clean = True


def _shape(memory, key, *args):
  """Take the cached set-up of this batch shape out of the memory's cache (given back with _keep), or build one.
  Taking it out makes it private to this dispatch even when two threads dispatch on one GPUMemory."""
  shapes = memory.dispatch_shapes
  shape = shapes.pop(key, None)
  if shape is None:
    shape = _Shape(*args)
    shape.pooled = True
  return shape


def _run_batch(memory, cache, checked, first_group, groups, *, pgm_addr, rsrc1, rsrc2, user_sgprs, grid, block,
               lds_bytes, scratch, budget, already, deadline, fast_key=None, target=0, rsrc3=0):
  """Run work-groups [first_group, first_group + groups) to completion (a generator, see SuspendedDispatch); returns
  the wave-instructions executed (`already`: executed by earlier batches, counted against `budget`)."""
  lx, ly, lz = block
  lanes = lanes_of(target)
  waves_per_wg = -(-(lx * ly * lz) // lanes)
  W = groups * waves_per_wg
  small = W <= SMALL_BATCH_WAVES and ((rsrc1 & 0x3F) + 1) * 8 * W * lanes * 4 <= POOLED_VGPR_BYTES
  key = (first_group, groups, grid, block, rsrc1 & 0x3F, rsrc2 & 0x1FBE, target) if small else None
  shape = _shape(memory, key, W, groups, first_group, grid, block, rsrc1, rsrc2, target) if key is not None else \
      _Shape(W, groups, first_group, grid, block, rsrc1, rsrc2, target)
  shape.acc_limits = _acc_limits(rsrc1, rsrc3, target)
  S, V = shape.registers(user_sgprs)
  try:
    return (yield from _schedule(memory, cache, checked, shape, S, V, groups, pgm_addr=pgm_addr, rsrc1=rsrc1,
                                 lds_bytes=lds_bytes, scratch=scratch, budget=budget, already=already,
                                 first_group=first_group, waves_per_wg=waves_per_wg, deadline=deadline,
                                 target=target))
  finally:
    if key is not None:
      # a whole launch in one pooled batch moves to the fast path of run_dispatch (a shape is in one cache at most:
      # whoever takes it out owns it until it is given back)
      if fast_key is not None and shape.st is not None:
        _keep(memory.dispatch_launches, fast_key, shape)
      else: _keep(memory.dispatch_shapes, key, shape)


def _acc_limits(rsrc1: int, rsrc3: int, target: int):
  """gfx942's unified register file (AMDGPUUsage, "compute_pgm_rsrc3 for GFX90A, GFX942" and compute_pgm_rsrc1
  GRANULATED_WORKITEM_VGPR_COUNT in granules of 8): (ACCUM_OFFSET, the VGPRs the wave allocates); AccVGPR a<k> is
  the wave's register ACCUM_OFFSET + k. None on the other targets (no AccVGPRs)."""
  if arch_of(target) != "gfx942": return None
  return ((rsrc3 & 0x3F) + 1) * 4, ((rsrc1 & 0x3F) + 1) * 8


def _check_acc(blk, limits, seen: list) -> None:
  """A block's ArchVGPRs and AccVGPRs against ACCUM_OFFSET and the wave's VGPRs (seen: the highest of each so far in
  this dispatch). An AccVGPR past the allocation would be another wave's register; an ArchVGPR at or above
  ACCUM_OFFSET in a kernel that uses AccVGPRs the same register as one of them: both refused, naming the register."""
  arch, acc = max(seen[0], blk.max_arch), max(seen[1], blk.max_agpr)
  seen[0], seen[1] = arch, acc
  if acc < 0: return
  accum, alloc = limits
  if accum + acc >= alloc:
    raise GPUFault(f"gfx942: AccVGPR a{acc} (the block at {blk.start:#x}) is unified register {accum + acc}, past the "
                   f"wave's {alloc} VGPRs (COMPUTE_PGM_RSRC1 VGPR granule {alloc // 8 - 1}, COMPUTE_PGM_RSRC3 "
                   f"ACCUM_OFFSET {accum // 4 - 1})", address=blk.start, kind="illegal instruction")
  if arch >= accum:
    raise GPUFault(f"gfx942: v{arch} (the block at {blk.start:#x}) is at or above ACCUM_OFFSET {accum} "
                   f"(COMPUTE_PGM_RSRC3 [5:0] = {accum // 4 - 1}): the same register as AccVGPR a{arch - accum}, "
                   f"which the kernel uses",
                   address=blk.start, kind="illegal instruction")


def _schedule(memory, cache, checked, shape, S, V, groups, *, pgm_addr, rsrc1, lds_bytes, scratch, budget, already,
              first_group, waves_per_wg, deadline, target=0):
  W, lanes = shape.W, shape.lanes
  wg_local = shape.wg_local
  # ---- memory ----
  lds_words = max(1, (int(lds_bytes) + 3) // 4)
  spl = int(scratch.bytes_per_lane or 0)
  scratch_words = (spl + 3) // 4
  pooled = shape.pooled and (scratch.base is None or not scratch_words)
  st = shape.states.get((lds_words, scratch_words)) if pooled else None
  if st is not None: st.reset()   # this shape's LDS and scratch again: zeroed, as fresh ones would be
  else:
    lds = np.zeros(groups * lds_words, np.uint32)
    if scratch.base is not None and scratch_words:
      base = scratch.base + first_group * waves_per_wg * lanes * scratch_words * 4
      memory.check_scalar(base, W * lanes * scratch_words * 4, "scratch setup")
      scr = _host_u32(base, W * lanes * scratch_words)
    else:
      scr = np.zeros(max(1, W * lanes * scratch_words), np.uint32)
    st = WaveState(W, rt.MemAccess(memory, lds, lds_words, scr, scratch_words, None, wg_local, lanes), shape.wid)
    if pooled and (groups * lds_words + W * lanes * scratch_words) * 4 <= POOLED_MEMORY_BYTES:
      if len(shape.states) >= 2: shape.states.clear()
      shape.states[(lds_words, scratch_words)] = st
  shape.st = st if pooled and shape.states.get((lds_words, scratch_words)) is st else None
  # float modes of the kernel descriptor (rsrc1 FLOAT_DENORM_MODE_32 [17:16], FLOAT_DENORM_MODE_16_64 [19:18]):
  # part of the translation key, since the translated code flushes denormals where the mode says so
  return (yield from _loop(memory, cache, checked, shape, st, S, V, pgm_addr, (rsrc1 >> 16) & 0xF | target, budget,
                           already, deadline))


def _loop(memory, cache, checked, shape, st, S, V, pgm_addr, mode, instruction_budget, already, deadline):
  """Run the waves from pgm_addr until they all end; returns the wave-instructions executed. A generator: every
  SLICE_CHECK_BLOCKS blocks past deadline[0] it yields, between two blocks (every wave's PC, barrier flag and
  register is then that of a finished block), and goes on from there when resumed."""
  W, wg_local, groups = shape.W, shape.wg_local, shape.groups
  acc_limits, acc_seen = shape.acc_limits, [-1, -1]    # gfx942: the unified register file (_check_acc)
  pcs = waiting = None       # per-wave PCs and barrier flags: made when the waves first diverge or meet a barrier
  executed = already
  streak = 0
  uniform_pc = int(pgm_addr)
  errs = None
  shape.clean = False        # the registers may change: see _Shape.entries
  ran = 0
  check_at = SLICE_CHECK_BLOCKS
  try:
    while True:
      if ran >= check_at:
        check_at = ran + SLICE_CHECK_BLOCKS    # counted from here: a resumed slice always runs some blocks
        if time.perf_counter() > deadline[0]:
          if errs is not None:    # numpy's error state is the thread's: the host gets it back between slices
            errs.__exit__(None, None, None)
            errs = None
          yield
      if uniform_pc is not None:
        pc, idx, count = uniform_pc, None, W
      else:
        alive = pcs != DONE
        runnable = alive & ~waiting
        if not runnable.any():
          if not alive.any(): break
          waiting[:] = False      # every live wave waits at a barrier: release them all
          continue
        # the lowest PC first (divergent waves meet again at the join point); every FAIRNESS_STREAK blocks the
        # highest one, so that a wave spinning on memory another wave will write cannot starve that wave
        streak += 1
        pc = int(pcs[runnable].max()) if streak % FAIRNESS_STREAK == 0 else int(pcs[runnable].min())
        sel = runnable & (pcs == pc)
        count = int(sel.sum())
        idx = None if count == W else np.nonzero(sel)[0]
      blk = _block(memory, cache, checked, pc, mode)
      ran += 1
      if acc_limits is not None: _check_acc(blk, acc_limits, acc_seen)
      if blk.max_vgpr >= len(V):
        V.extend(np.zeros((W, shape.lanes), np.uint32) for _ in range(blk.max_vgpr + 1 - len(V)))
      executed += blk.insts * count
      if executed > instruction_budget:
            raise InstructionBudgetExceeded(instruction_budget, pc)
      if errs is None and not blk.trivial:
        errs = np.errstate(all="ignore")   # numpy's float warnings off while blocks compute (entered once, lazily:
        errs.__enter__()                   # a block that only ends the waves needs none)
      try:
        nxt = blk.fn(S, V, st, idx)
      except GPUFault:
        raise
      except Exception as e:   # an emulator bug or an operand combination it cannot model: never crash the host
        raise GPUFault(f"emulator error in the block at {pc:#x}: {type(e).__name__}: {e}", address=pc,
                       kind="emulator error") from e
      if idx is None:
        if isinstance(nxt, (int, np.integer)) and not blk.barrier:
          if nxt == DONE:
            if ran == 1 and blk.ends: shape.remember_entry(pc, mode, blk)
            break
          uniform_pc = int(nxt)
          continue
        if pcs is None: pcs, waiting = np.full(W, pgm_addr, np.int64), np.zeros(W, bool)
        pcs[:] = nxt
        if blk.barrier: waiting[:] = True
      else:
        pcs[idx] = nxt
        if blk.barrier:
          waiting[idx] = True
          # release every work-group whose live waves have all arrived (s_barrier counts the waves that have not
          # ended), without waiting for other work-groups
          pending = np.bincount(wg_local[(pcs != DONE) & ~waiting], minlength=groups)
          waiting &= pending[wg_local] != 0
      uniform_pc = None
      if blk.barrier and idx is None and isinstance(nxt, (int, np.integer)):
        waiting[:] = False    # all waves of every group reached the barrier together
        uniform_pc = int(nxt)
  finally:
    if errs is not None: errs.__exit__(None, None, None)
  return executed - already


def _host_u32(address: int, words: int):
  from ...gpumem import host_view
  return host_view(address, words * 4, np.uint32)


def _stats(waves, executed, t0):
  return _DispatchStats(waves, executed, time.perf_counter() - t0)

