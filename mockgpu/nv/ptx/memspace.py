"""Loads, stores and atomics of the PTX state spaces for one batch of threads.

Addresses: .global/.const are host addresses (GPU VA == host VA) checked against the GPUMemory's ranges; .shared and
.local addresses are offsets in the CTA's shared memory / the thread's local memory (each batch keeps them as numpy
byte arrays); .param ones offsets in the kernel's parameter block. A generic address (ld/st without a space) of the
shared window [SHARED_WINDOW, +4 GiB) or the local window [LOCAL_WINDOW, +4 GiB) (what cvta.shared / cvta.local
produce) goes to that space, any other to global memory. Both windows lie above the 47-bit user address space, so no
host address falls into them.
"""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault
from ...gpumem import GPUMemory

SHARED_WINDOW = 1 << 48
LOCAL_WINDOW = 1 << 49
WINDOW_SIZE = 1 << 32
_U64 = np.uint64
ADDRESS_CACHE_REGS = 8     # address registers whose summaries a batch keeps (each up to 3 arrays of 8 bytes a lane)


def _aligned(addrs: np.ndarray, k: int, space: str, base: int = 0) -> None:
  if k > 1 and addrs.size and (np.bitwise_or.reduce(addrs.astype(_U64) & _U64(k - 1)) != 0):
    bad = int(addrs[np.flatnonzero(addrs.astype(_U64) & _U64(k - 1))[0]])
    raise GPUFault(f"misaligned {k}-byte {space} access", address=bad + base, kind="misaligned address")


class Spaces:
  """The memories one batch sees. sel: the lanes (indices) an access is made for; their addresses come as `a`."""

  def __init__(self, mem: GPUMemory, shared: np.ndarray, shared_bytes: int, local: np.ndarray, local_bytes: int,
               block_of_lane: np.ndarray, params: np.ndarray):
    self.mem, self.shared, self.shared_bytes = mem, shared, shared_bytes
    self.local, self.local_bytes = local, local_bytes
    self.block_of_lane, self.params = block_of_lane, params
    self.shared_why = self.local_why = ""    # what limits shared/local memory (a launch's QMD), for fault messages
    self.n = block_of_lane.shape[0]
    self.lane_ids = np.arange(self.n)   # each lane's thread number in the batch (local memory slot)
    self._whole: dict = {}
    self._bases: dict = {}     # ("sh"/"lo", access size) -> each lane's first element of its shared/local slot
    self._acache: dict = {}    # register -> its addresses' summary and element indices (indexed())
    # strides of shared/local per block/lane, rounded to 16 so that every naturally aligned access is aligned in
    # the byte array too (typed views index it directly)
    self.sh_stride = shared.shape[0] // max(1, int(block_of_lane[-1]) + 1) if block_of_lane.size else 0
    self.lo_stride = local.shape[0] // self.n if self.n else 0

  # ---- resolve: (typed array, index array) for the lanes' addresses ----
  def _global(self, a: np.ndarray, dt, k: int, what: str):
    a = a.astype(_U64, copy=False)
    _aligned(a, k, "global")
    if a.size and int(a.max()) >= (1 << 64) - k:    # a + k reaches past the top of the address space: never mapped
      bad = int(a[np.flatnonzero(a >= _U64((1 << 64) - k))[0]])
      raise GPUFault(f"global {what} of {k} bytes wraps past the top of the address space", address=bad, kind="page fault")
    rng = self.mem.check(a, k, what)
    sh = _U64(k.bit_length() - 1)
    if rng is not None and rng[0] % k == 0:   # index the mapped range's own view (the common case)
      return self.mem.view(rng[0], dt), ((a - _U64(rng[0])) >> sh).view(np.int64)
    v = self._whole.get(np.dtype(dt))
    if v is None:
      v = self._whole[np.dtype(dt)] = getattr(self.mem, f"u{8 * k}").view(dt)
    return v, ((a - _U64(GPUMemory.VIEW_BASE)) >> sh).view(np.int64)

  def _shared(self, a: np.ndarray, sel, dt, k: int, base: int = 0):
    idx = self._window(a, sel, k, self.shared_bytes, self.block_of_lane, self.sh_stride, "sh")
    if idx is None: self._window_fault(a, k, base, "shared")
    return self.shared.view(dt), idx

  def _local(self, a: np.ndarray, sel, dt, k: int, base: int = 0):
    idx = self._window(a, sel, k, self.local_bytes, self.lane_ids, self.lo_stride, "lo")
    if idx is None: self._window_fault(a, k, base, "local")
    return self.local.view(dt), idx

  def _window(self, a: np.ndarray, sel, k: int, limit: int, owner: np.ndarray, stride: int, key: str):
    """Element indices (units of k bytes) of the lanes' offsets a in their CTA's shared memory / their own local
    memory, or None when one is misaligned or outside the space (_window_fault then says which). Two passes check
    every lane: an OR of all offsets (any low bit set: misaligned) and the largest offset seen unsigned (a negative
    one is huge, so one comparison bounds both ends)."""
    u = a if a.dtype == _U64 else a.astype(np.int64, copy=False).view(_U64) if a.dtype.kind == "i" else a.astype(_U64)
    if u.size:
      if int(np.bitwise_or.reduce(u)) & (k - 1): return None
      if int(u.max()) + k > limit: return None
    base = self._lane_base(key, k)
    if sel is not None: base = base[sel]
    sh = k.bit_length() - 1
    idx = (u >> _U64(sh)).view(np.int64) if sh else u.view(np.int64)
    return idx + base

  def _lane_base(self, key: str, k: int) -> np.ndarray:
    """Each lane's first element of its CTA's shared memory ("sh") or its own local memory ("lo"), in k-byte units."""
    base = self._bases.get((key, k))
    if base is None:
      owner, stride = (self.block_of_lane, self.sh_stride) if key == "sh" else (self.lane_ids, self.lo_stride)
      base = self._bases[(key, k)] = owner * (stride // k)
    return base

  # ---- a register's addresses, kept while the register holds the same array ----
  def indexed(self, space: str, reg: int, R: np.ndarray, off: int, dt, k: int):
    """(typed array, element index) of every lane's address R + off (R: the value of register `reg`, each lane's own;
    off: the instruction's signed immediate) when that access is provably aligned and inside one space, else None
    (the caller then takes the checked path, which faults naming the address). What depends on R alone (its OR, its
    least and largest value, the element index of R + 0) is kept while the register holds the same array (a
    register's array is never changed in place, operands.py), so the unrolled loads of one pointer with different
    offsets (ld [%rd+4], [%rd+8] ...) cost one addition and the gather each; the bounds are still checked on every
    access, from the kept least and largest addresses."""
    c = self._acache.get(reg)
    if c is None or c[0] is not R:
      if len(self._acache) >= ADDRESS_CACHE_REGS: self._acache.clear()
      u = R.view(_U64) if R.dtype.itemsize == 8 else R.view(np.uint32).astype(_U64)
      c = self._acache[reg] = [R, u, int(np.bitwise_or.reduce(u)), None, int(u.max()), {}]
    _, u, orall, lo, hi, idxs = c
    if (orall | off) & (k - 1): return None
    if lo is None and (off < 0 or space not in ("shared", "local")):   # (offsets >= 0 need no least value there)
      lo = c[3] = int(u.min())
    lo, hi = (lo or 0) + off, hi + off + k
    sh = k.bit_length() - 1
    if space == "generic":
      if lo < 0 or hi > SHARED_WINDOW: return None     # (a window address: the checked path)
      space = "global"
    if space in ("shared", "local"):
      if lo < 0 or hi > (self.shared_bytes if space == "shared" else self.local_bytes): return None
      idx = idxs.get((space, k))
      if idx is None:
        idx = idxs[(space, k)] = (u >> _U64(sh)).view(np.int64) + self._lane_base("sh" if space == "shared" else "lo", k)
      arr = (self.shared if space == "shared" else self.local).view(dt)
    elif space in ("global", "const"):
      rng = self.mem.range_of(lo) if lo >= 0 else None
      if rng is None or hi > rng[1] or rng[0] % k: return None
      idx = idxs.get((rng[0], k))
      if idx is None: idx = idxs[(rng[0], k)] = (u - _U64(rng[0])).view(np.int64) >> sh   # (< 0 below the range)
      arr = self.mem.view(rng[0], dt)
    else: return None
    o = off >> sh
    return arr, (idx + o if o else idx)

  def _window_fault(self, a: np.ndarray, k: int, base: int, space: str) -> None:
    a = a.astype(np.int64, copy=False)
    _aligned(a, k, space, base)
    limit = self.shared_bytes if space == "shared" else self.local_bytes
    bad = int(a[np.flatnonzero((a + k > limit) | (a < 0))[0]])
    owner = "the CTA's" if space == "shared" else "the thread's"
    e = GPUFault(f"{space} memory access of {k} bytes at offset {bad:#x} beyond {owner} {limit} bytes"
                 f"{self.shared_why if space == 'shared' else self.local_why}",
                 address=bad + base, kind="out of range address")
    e.xid, e.esr = 13, "Out Of Range Address"    # an SM warp exception, not an MMU fault
    raise e

  def _param(self, a: np.ndarray, dt, k: int):
    a = a.astype(np.int64, copy=False)
    _aligned(a, k, "param")
    if a.size and (int(a.max()) + k > self.params.shape[0] or int(a.min()) < 0):
      raise GPUFault(f"parameter access of {k} bytes beyond the {self.params.shape[0]}-byte parameter block",
                     address=int(a.max()), kind="page fault")
    return self.params.view(dt), a // k

  def subset(self, idx: np.ndarray) -> "Spaces":
    """The same memories seen by the threads idx only (a compacted batch: lane j is thread idx[j])."""
    sub = object.__new__(Spaces)
    sub.__dict__.update(self.__dict__)
    sub.block_of_lane, sub.lane_ids, sub.n = self.block_of_lane[idx], self.lane_ids[idx], idx.shape[0]
    sub._bases, sub._acache = {}, {}
    return sub

  def resolve(self, space: str, a, sel, dt, k: int, what: str):
    """[(array, index, positions)]: where each of the lanes' addresses lives; positions: which of the lanes (None:
    all) each entry covers (a generic access can touch several spaces)."""
    a = np.asarray(a)
    if a.ndim == 0: a = np.full(self.n if sel is None else len(sel), a, a.dtype)
    if space in ("global", "const"): return [(*self._global(a, dt, k, what), None)]
    if space == "shared": return [(*self._shared(a, sel, dt, k), None)]
    if space == "local": return [(*self._local(a, sel, dt, k), None)]
    if space == "param": return [(*self._param(a, dt, k), None)]
    # generic
    a = a.astype(_U64, copy=False)
    if a.size == 0 or int(a.max()) < SHARED_WINDOW: return [(*self._global(a, dt, k, what), None)]
    out = []
    sh = (a >= _U64(SHARED_WINDOW)) & (a < _U64(SHARED_WINDOW + WINDOW_SIZE))
    lo = (a >= _U64(LOCAL_WINDOW)) & (a < _U64(LOCAL_WINDOW + WINDOW_SIZE))
    gl = ~(sh | lo)
    lanes = np.arange(a.shape[0]) if sel is None else np.asarray(sel)
    if gl.any():
      p = np.flatnonzero(gl)
      out.append((*self._global(a[p], dt, k, what), p))
    if sh.any():
      p = np.flatnonzero(sh)
      out.append((*self._shared(a[p] - _U64(SHARED_WINDOW), lanes[p], dt, k, SHARED_WINDOW), p))
    if lo.any():
      p = np.flatnonzero(lo)
      out.append((*self._local(a[p] - _U64(LOCAL_WINDOW), lanes[p], dt, k, LOCAL_WINDOW), p))
    return out

  def load(self, space, a, sel, dt, k):
    a = np.asarray(a)
    if a.ndim == 0 and (space in ("param", "global", "const") or (space == "generic" and int(a) < SHARED_WINDOW)):
      # one address for every thread (a parameter, a uniform pointer): one checked read, a uniform value
      parts = self.resolve("global" if space == "generic" else space, a.reshape(1), None, dt, k, "load")
      arr, idx, _ = parts[0]
      return arr[idx][0:1].reshape(())
    parts = self.resolve(space, a, sel, dt, k, "load")
    if len(parts) == 1 and parts[0][2] is None: return parts[0][0][parts[0][1]]
    cnt = self.n if sel is None else len(sel)
    out = np.zeros(cnt, dt)
    for arr, idx, pos in parts: out[pos] = arr[idx]
    return out

  def store(self, space, a, sel, dt, k, vals):
    parts = self.resolve(space, a, sel, dt, k, "store")
    vals = np.asarray(vals)
    if vals.ndim == 0: vals = np.full(self.n if sel is None else len(sel), vals, dt)
    for arr, idx, pos in parts:
      arr[idx] = vals if pos is None else vals[pos]

  def atomic(self, space, a, sel, dt, k, fn, b, c, assoc_add: bool, ufunc=None):
    """Apply new = fn(old, b, c) per lane in lane order (exact sequential semantics); return every lane's old.
    ufunc: the numpy ufunc equal to fn (new = ufunc(old, b), each step rounded as fn rounds it), when there is one:
    the lanes of one address then take a running ufunc.accumulate in lane order instead of one step per lane."""
    parts = self.resolve(space, a, sel, dt, k, "atomic")
    cnt = self.n if sel is None else len(sel)
    b = np.broadcast_to(np.asarray(b), (cnt,))
    c = np.broadcast_to(np.asarray(c), (cnt,)) if c is not None else None
    old = np.zeros(cnt, dt)
    for arr, idx, pos in parts:
      p = np.arange(cnt) if pos is None else pos
      _atomic_part(arr, idx, p, old, fn, b, c, assoc_add, dt, ufunc)
    return old


def _atomic_part(arr, idx, p, old, fn, b, c, assoc_add, dt, ufunc=None):
  if idx.size == 0: return
  order = np.argsort(idx, kind="stable")
  sidx = idx[order]
  first = np.ones(sidx.shape[0], bool)
  first[1:] = sidx[1:] != sidx[:-1]
  if first.all():   # every address once: one vectorised step
    o = arr[idx]
    arr[idx] = fn(o, b[p], None if c is None else c[p])
    old[p] = o
    return
  starts = np.flatnonzero(first)
  if assoc_add:   # integer add: old values are the group's start value plus an exclusive prefix sum (wrapping)
    v = b[p][order].astype(np.uint64) if np.dtype(dt).kind == "u" else b[p][order].astype(np.int64).view(np.uint64)
    cs = np.cumsum(v, dtype=np.uint64)
    group = np.cumsum(first) - 1
    base_cs = (cs - v)[starts]
    init = arr[sidx[starts]].astype(np.int64).view(np.uint64) if np.dtype(dt).kind == "i" else arr[sidx[starts]].astype(np.uint64)
    o = (init[group] + (cs - v) - base_cs[group])
    res = np.empty_like(o)
    res[order] = o
    old[p] = res.astype(dt) if np.dtype(dt).kind == "u" else res.view(np.int64).astype(dt)
    last = np.append(starts[1:], sidx.shape[0]) - 1
    arr[sidx[starts]] = (init + cs[last] - base_cs).astype(dt) if np.dtype(dt).kind == "u" else \
      (init + cs[last] - base_cs).view(np.int64).astype(dt)
    return
  ends = np.append(starts[1:], sidx.shape[0])
  if ufunc in ("inc", "dec"):   # a closed form needs one bound for every lane
    bp = b[p]
    if bp.size and not (bp == bp[0]).all(): ufunc = None
  if ufunc is not None:   # per address, in lane order: old values are the running results before each lane's step
    bs = b[p][order].astype(dt, copy=False)
    cs = c[p][order].astype(dt, copy=False) if c is not None else None
    outs = np.empty(sidx.shape[0], dt)
    for s0, e0 in zip(starts.tolist(), ends.tolist()):
      a0 = sidx[s0]
      if ufunc == "exch":     # each lane gets its predecessor's value
        outs[s0] = arr[a0]
        outs[s0 + 1:e0] = bs[s0:e0 - 1]
        arr[a0] = bs[e0 - 1]
        continue
      if ufunc == "cas":      # compare-and-swap, one lane after the other
        outs[s0:e0], arr[a0] = _cas_run(arr[a0], bs[s0:e0], cs[s0:e0])
        continue
      if isinstance(ufunc, str):
        outs[s0:e0], arr[a0] = _inc_dec_run(ufunc, int(arr[a0]), int(bs[s0]), e0 - s0, dt)
        continue
      run = ufunc.accumulate(np.concatenate((arr[a0:a0 + 1], bs[s0:e0])), dtype=dt)
      outs[s0:e0] = run[:-1]
      arr[a0] = run[-1]
    res = np.empty_like(outs)
    res[order] = outs
    old[p] = res
    return
  rank = np.arange(sidx.shape[0]) - np.repeat(starts, ends - starts)
  rank_of = np.empty_like(rank)
  rank_of[order] = rank
  by_rank = np.argsort(rank_of, kind="stable")        # lanes of rank 0, then rank 1, ... (lane order within)
  bounds = np.searchsorted(rank_of[by_rank], np.arange(int(rank.max()) + 2))
  for r in range(int(rank.max()) + 1):
    q = by_rank[bounds[r]:bounds[r + 1]]
    o = arr[idx[q]]
    arr[idx[q]] = fn(o, b[p][q], None if c is None else c[p][q])
    old[p[q]] = o


CAS_WINDOW = 64


def _cas_run(cur, cmp: np.ndarray, new: np.ndarray):
  """atom.cas of lanes 0..L-1 on one word in lane order (PTX ISA 9.7.13.5: new value c if old == b): (each lane's old
  value, the final). Between two lanes that swap, every lane reads the same word, so each swap is one search for the
  next lane whose b equals the current value (first in a short window: swaps of neighbouring lanes stay cheap)."""
  L = cmp.shape[0]
  olds = np.empty(L, cmp.dtype)
  j = 0
  while j < L:
    hit = np.flatnonzero(cmp[j:j + CAS_WINDOW] == cur)
    if not hit.size and j + CAS_WINDOW < L: hit = np.flatnonzero(cmp[j + CAS_WINDOW:] == cur) + CAS_WINDOW
    if not hit.size:
      olds[j:] = cur
      break
    h = j + int(hit[0])
    olds[j:h + 1] = cur
    cur = new[h]
    j = h + 1
  return olds, cur


def _inc_dec_run(op: str, init: int, bound: int, cnt: int, dt):
  """cnt lanes' atom.inc/.dec with one bound b on one word, in lane order (PTX ISA 9.1, 9.7.13.5 atom: inc
  new = old >= b ? 0 : old + 1; dec new = (old == 0 || old > b) ? b : old - 1): (each lane's old value, the final).
  The values cycle through 0..b, so lane j's old value is a closed form of j."""
  j = np.arange(cnt, dtype=np.int64)
  period = bound + 1
  if op == "inc":
    if init > bound: olds, final = np.where(j == 0, init, (j - 1) % period), (cnt - 1) % period
    else: olds, final = (init + j) % period, (init + cnt) % period
  else:
    if init == 0 or init > bound: olds, final = np.where(j == 0, init, bound - (j - 1) % period), bound - (cnt - 1) % period
    else: olds, final = (init - j) % period, (init - cnt) % period
  return olds.astype(dt), np.array(final).astype(dt)[()]
