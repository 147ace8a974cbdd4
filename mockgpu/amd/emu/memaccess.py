"""Memory accesses of a dispatch for translated blocks: global memory (host address space, every access checked
against GPUMemory first), LDS per work-group, lane-private scratch, FLAT routing by aperture, atomics in lane order."""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault


u8, u16, u32, u64 = np.uint8, np.uint16, np.uint32, np.uint64
i8, i16, i32, i64 = np.int8, np.int16, np.int32, np.int64
f32 = np.float32
# Apertures for FLAT (generic) addresses, above the 47-bit user address space so that they never alias host memory:
# the high dword of an address selects LDS (SHARED_HI) or the lane's private memory (PRIVATE_HI).
SHARED_HI = 0x10000
PRIVATE_HI = 0x20000


def bcast(x, shape: tuple) -> np.ndarray:
  """x broadcast to `shape`, for reading only: x itself when it has that shape already (a VGPR operand; the call to
  np.broadcast_to costs ~1.5 us)."""
  return x if getattr(x, "shape", None) == shape else np.broadcast_to(x, shape)


class MemAccess:
  """Memory access of one dispatch: global (host address space via GPUMemory), LDS, scratch."""

  def __init__(self, memory, lds: np.ndarray, lds_words: int, scratch: np.ndarray | None, scratch_words: int,
               scratch_base: int | None, wave_wg: np.ndarray, lanes: int = 32):
    self.mem = memory
    self.lds = lds
    self.lds8 = lds.view(u8)
    self.lds_words = lds_words
    self.scratch = scratch
    self.scratch_words = scratch_words
    self.scratch_base = scratch_base
    self.wave_wg = wave_wg
    self.lanes = lanes          # lanes per wave: lane L of wave W owns private window W * lanes + L
    self.vb = u64(memory.VIEW_BASE)

  # -- global --
  def _active(self, addr, em, ef):
    addr = np.asarray(addr, u64)
    if ef: return addr
    # an address every lane shares (a uniform 64-bit value kept as one column, (n, 1)) is each active lane's
    if addr.shape != em.shape: addr = np.broadcast_to(addr, em.shape)
    return addr[em]

  def _target(self, rng, dtype, shift: int):
    """(array, base address) to index global memory with: the mapped range's own view when the access stays in one
    range whose start is aligned for dtype, else the whole-address-space view."""
    if rng is not None and rng[0] % np.dtype(dtype).itemsize == 0: return self.mem.view(rng[0], dtype), u64(rng[0])
    return {0: self.mem.u8, 2: self.mem.u32, 3: self.mem.u64}[shift], self.vb

  def gload(self, addr, em, ef, ndw: int):
    """Load ndw dwords per lane from byte addresses addr (n, 32) u64; returns a list of (n, 32) u32."""
    addr = np.asarray(addr, u64)
    act = self._active(addr, em, ef)
    rng = self.mem.check(act, 4 * ndw, "global load")
    if act.size == 0: return [np.zeros(addr.shape, u32) for _ in range(ndw)]
    if not ef: addr = np.where(em, addr, act[0])
    if int(np.bitwise_or.reduce(act, axis=None)) & 3: return self._gload_bytes(addr, rng, ndw)
    arr, base = self._target(rng, u32, 2)
    w = ((addr - base) >> u64(2)).view(np.intp)
    if ndw == 1: return [arr[w]]
    return [arr[w + k] for k in range(ndw)]

  def _gload_bytes(self, addr, rng, ndw):
    arr, base = self._target(rng, u8, 0)
    b = (addr - base).view(np.intp)
    out = []
    for k in range(ndw):
      v = np.zeros(addr.shape, u32)
      for j in range(4): v |= arr[b + (4 * k + j)].astype(u32) << u32(8 * j)
      out.append(v)
    return out

  def gload_sub(self, addr, em, ef, nbytes: int, signed: bool):
    """A u8/i8/u16/i16 load, zero- or sign-extended to u32."""
    addr = np.asarray(addr, u64)
    act = self._active(addr, em, ef)
    rng = self.mem.check(act, nbytes, "global load")
    if act.size == 0: return np.zeros(addr.shape, u32)
    if not ef: addr = np.where(em, addr, act[0])
    arr, base = self._target(rng, u8, 0)
    b = (addr - base).view(np.intp)
    if nbytes == 1:
      v = arr[b]
      return (v.view(i8).astype(i32).view(u32) if signed else v.astype(u32))
    v = arr[b].astype(u16) | (arr[b + 1].astype(u16) << u16(8))
    return v.view(i16).astype(i32).view(u32) if signed else v.astype(u32)

  def gstore(self, addr, em, ef, data: list, nbytes: int | None = None):
    """Store dwords (list of (n,32) u32) or the low nbytes (1/2) of data[0] for active lanes."""
    size = nbytes or 4 * len(data)
    addr = np.asarray(addr, u64)
    if not ef:
      data = [bcast(d, em.shape)[em] for d in data]
      addr = addr[em]
    else:
      data = [bcast(d, addr.shape) for d in data]
    rng = self.mem.check(addr, size, "global store")
    if addr.size == 0: return
    if nbytes in (1, 2) or int(np.bitwise_or.reduce(addr, axis=None)) & 3:
      arr, base = self._target(rng, u8, 0)
      b = (addr - base).view(np.intp)
      for k in range(max(1, size // 4)):
        for j in range(min(4, size)): arr[b + (4 * k + j)] = ((data[k] >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    arr, base = self._target(rng, u32, 2)
    w = ((addr - base) >> u64(2)).view(np.intp)
    arr[w] = data[0]
    for k in range(1, len(data)): arr[w + k] = data[k]

  def gatomic(self, addr, em, ef, op: str, data, cmp, width: int):
    """Global atomic; returns the pre-op values (n, 32) (zeros for inactive lanes)."""
    addr = np.asarray(addr, u64)
    shape = addr.shape
    sel = np.broadcast_to(True, shape) if ef else em
    a = addr[sel]
    rng = self.mem.check(a, 4 * width, f"global atomic {op}")
    if a.size and (a & u64(4 * width - 1)).any():
      raise GPUFault(f"misaligned global atomic {op}", address=int(a[(a & u64(4 * width - 1)) != 0][0]),
                     kind="misaligned atomic")
    arr, base = self._target(rng, u64 if width == 2 else u32, 3 if width == 2 else 2)
    idx = ((a - base) >> u64(2 if width == 1 else 3)).astype(np.intp)
    d = np.broadcast_to(data, shape)[sel]
    c = None if cmp is None else np.broadcast_to(cmp, shape)[sel]
    old = atomic(arr, idx, op, d, c)
    out = np.zeros(shape, arr.dtype)
    out[sel] = old
    return out

  # -- LDS --
  def _lds_index(self, addr, wid, em, ef, nbytes, what):
    a = np.asarray(addr, u32).astype(np.int64)
    act = a if ef else a[em]
    if act.size and (act.min() < 0 or act.max() + nbytes > self.lds_words * 4):
      bad = act[(act < 0) | (act + nbytes > self.lds_words * 4)][0]
      raise GPUFault(f"LDS {what} of {nbytes} bytes outside the work-group's {self.lds_words * 4} bytes of LDS",
                     address=int(bad), kind="lds out of range")
    base = (self.wave_wg[wid].astype(np.int64) * (self.lds_words * 4))[:, None]
    b = a + base
    if not ef: b = np.where(em, b, 0)
    return b

  def lds_load(self, addr, wid, em, ef, nbytes: int, signed: bool = False):
    """Returns a list of u32 dwords (n,32) (nbytes >= 4) or one zero/sign-extended value (1/2 bytes)."""
    b = self._lds_index(addr, wid, em, ef, nbytes, "load")
    return _gather(self.lds, self.lds8, b, nbytes, signed)

  def lds_store(self, addr, wid, em, ef, data: list, nbytes: int):
    b = self._lds_index(addr, wid, em, ef, nbytes, "store")
    shape = b.shape
    if not ef:
      b = b[em]
      data = [bcast(d, shape)[em] for d in data]
    else:
      b = b.reshape(-1)
      data = [bcast(d, shape).reshape(-1) for d in data]
    if nbytes < 4:
      self.lds8[b] = (data[0] & u32(0xFF)).astype(u8)
      if nbytes == 2: self.lds8[b + 1] = ((data[0] >> u32(8)) & u32(0xFF)).astype(u8)
      return
    if (b & 3).any():
      for k, d in enumerate(data):
        for j in range(4): self.lds8[b + 4 * k + j] = ((d >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    w = b >> 2
    for k, d in enumerate(data): self.lds[w + k] = d

  def lds_atomic(self, addr, wid, em, ef, op, data, cmp):
    b = self._lds_index(addr, wid, em, ef, 4, f"atomic {op}")
    shape = b.shape
    sel = np.broadcast_to(True, shape) if ef else em
    w = (b[sel] >> 2).astype(np.intp)
    if (b[sel] & 3).any(): raise GPUFault(f"misaligned LDS atomic {op}", kind="misaligned atomic")
    d = np.broadcast_to(data, shape)[sel]
    c = None if cmp is None else np.broadcast_to(cmp, shape)[sel]
    old = atomic(self.lds, w, op, d, c)
    out = np.zeros(shape, u32)
    out[sel] = old
    return out

  # -- scratch (lane-private) --
  def _scratch_index(self, offs, wid, em, ef, nbytes, what):
    o = np.asarray(offs).astype(np.int64)
    shape = (len(wid), self.lanes)
    if o.ndim == 1: o = np.broadcast_to(o[:, None], shape)
    o = np.broadcast_to(o, shape)
    act = o if ef else o[em]
    limit = self.scratch_words * 4
    if act.size and (act.min() < 0 or act.max() + nbytes > limit):
      bad = act[(act < 0) | (act + nbytes > limit)][0]
      raise GPUFault(f"scratch {what} of {nbytes} bytes outside the lane's {limit} bytes of private memory",
                     address=int(bad), kind="scratch out of range")
    lane_global = np.asarray(wid, np.int64)[:, None] * self.lanes + np.arange(self.lanes, dtype=np.int64)
    b = lane_global * limit + o
    if not ef: b = np.where(em, b, 0)
    return b

  def _scratch_arrays(self):
    if self.scratch_base is not None:
      from ...gpumem import host_view
      return host_view(self.scratch_base, self.scratch.size * 4, u32), None
    return self.scratch, None

  def scratch_load(self, offs, wid, em, ef, nbytes, signed=False):
    b = self._scratch_index(offs, wid, em, ef, nbytes, "load")
    return _gather(self.scratch, self.scratch.view(u8), b, nbytes, signed)

  def scratch_store(self, offs, wid, em, ef, data, nbytes):
    b = self._scratch_index(offs, wid, em, ef, nbytes, "store")
    shape = b.shape
    sel = np.broadcast_to(True, shape) if ef else em
    b = b[sel]
    data = [bcast(d, shape)[sel] for d in data]
    s32 = self.scratch
    s8 = s32.view(u8)
    if nbytes < 4 or (b & 3).any():
      for k in range(max(1, nbytes // 4)):
        for j in range(min(4, nbytes)): s8[b + 4 * k + j] = ((data[k] >> u32(8 * j)) & u32(0xFF)).astype(u8)
      return
    w = b >> 2
    for k, d in enumerate(data): s32[w + k] = d

  # -- FLAT: generic addresses routed by aperture (RDNA3 ISA "Flat memory instructions": an address inside the
  # shared aperture reaches LDS, inside the private aperture the lane's scratch, anything else global memory) --
  def _route(self, addr, em, ef):
    addr = np.asarray(addr, u64)
    hi = addr >> u64(32)
    act = np.ones(addr.shape, bool) if ef else em
    lds = act & (hi == u64(SHARED_HI))
    pri = act & (hi == u64(PRIVATE_HI))
    return addr, act & ~(lds | pri), lds, pri, (addr & u64(0xFFFFFFFF))

  def fload(self, addr, wid, em, ef, nbytes: int, signed: bool = False):
    """A FLAT load: a list of dwords (nbytes >= 4) or one extended value (1/2 bytes), like gload/gload_sub."""
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any():
      return self.gload(addr, em, ef, nbytes // 4) if nbytes >= 4 else self.gload_sub(addr, em, ef, nbytes, signed)
    parts = []
    if glb.any():
      parts.append((glb, self.gload(addr, glb, False, nbytes // 4) if nbytes >= 4
                    else self.gload_sub(addr, glb, False, nbytes, signed)))
    if lds.any(): parts.append((lds, self.lds_load(off.astype(u32), wid, lds, False, nbytes, signed)))
    if pri.any(): parts.append((pri, self.scratch_load(off.astype(i64), wid, pri, False, nbytes, signed)))
    def merge(k=None):
      out = np.zeros(addr.shape, u32)
      for mask, res in parts: out = np.where(mask, res if k is None else res[k], out)
      return out
    return merge() if nbytes < 4 else [merge(k) for k in range(nbytes // 4)]

  def fstore(self, addr, wid, em, ef, data: list, nbytes: int | None = None):
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any(): return self.gstore(addr, em, ef, data, nbytes)
    size = nbytes or 4 * len(data)
    if glb.any(): self.gstore(addr, glb, False, data, nbytes)
    if lds.any(): self.lds_store(off.astype(u32), wid, lds, False, data, size)
    if pri.any(): self.scratch_store(off.astype(i64), wid, pri, False, data, size)

  def fatomic(self, addr, wid, em, ef, op: str, data, cmp, width: int):
    addr, glb, lds, pri, off = self._route(addr, em, ef)
    if not lds.any() and not pri.any(): return self.gatomic(addr, em, ef, op, data, cmp, width)
    if width != 1: raise GPUFault(f"64-bit FLAT atomic {op} on LDS or private memory is not supported",
                                  kind="illegal instruction")
    out = np.zeros(addr.shape, u32)
    if glb.any(): out = np.where(glb, self.gatomic(addr, glb, False, op, data, cmp, width), out)
    if lds.any(): out = np.where(lds, self.lds_atomic(off.astype(u32), wid, lds, False, op, data, cmp), out)
    if pri.any():
      # private memory belongs to one lane: the atomic is a plain read-modify-write
      old = self.scratch_load(off.astype(i64), wid, pri, False, 4)[0]
      d = np.broadcast_to(np.asarray(data, u32), addr.shape)
      c = None if cmp is None else np.broadcast_to(np.asarray(cmp, u32), addr.shape)
      self.scratch_store(off.astype(i64), wid, pri, False, [_apply(op, old, d, c, np.dtype(u32))], 4)
      out = np.where(pri, old, out)
    return out

  # -- scalar --
  def sload(self, addr, ndw: int):
    """SMEM load: addr (n,) u64 (dword aligned: the two low bits are ignored); returns a list of (n,) u32."""
    a = np.asarray(addr, u64) & ~u64(3)
    rng = self.mem.check(a, 4 * ndw, "scalar load")
    m, base = self._target(rng, u32, 2)
    w = ((a - base) >> u64(2)).astype(np.intp)
    return [m[w + k] for k in range(ndw)]

  def sload_sub(self, addr, nbytes: int, signed: bool):
    """RDNA4 S_LOAD_U8/I8/U16/I16: nbytes (1, 2) at byte address addr (n,) u64 (a short: the low bit ignored),
    zero- or sign-extended to (n,) u32."""
    a = np.asarray(addr, u64) & ~u64(nbytes - 1)
    rng = self.mem.check(a, nbytes, "scalar load")
    m, base = self._target(rng, u8, 0)
    b = (a - base).astype(np.intp)
    v = m[b].astype(u32)
    if nbytes == 2: v |= m[b + 1].astype(u32) << u32(8)
    if signed:
      sh = u32(32 - 8 * nbytes)
      v = ((v << sh).view(i32) >> i32(32 - 8 * nbytes)).view(u32)
    return v


def atomic(arr: np.ndarray, idx: np.ndarray, op: str, d: np.ndarray, c) -> np.ndarray:
  """Apply op at arr[idx] element by element in order (lanes in wave order, then lane order); return the old
  values. Vectorised when the indices are unique, and for add/sub/min/max with duplicates."""
  dt = arr.dtype
  d = np.asarray(d).astype(dt) if op not in ("add_f32", "min_f32", "max_f32") else np.asarray(d).astype(u32)
  if idx.size == 0: return np.zeros(0, dt)
  order = np.argsort(idx, kind="stable")
  sidx = idx[order]
  unique = sidx.size < 2 or bool((sidx[1:] != sidx[:-1]).all())
  old = arr[idx]
  if unique:
    arr[idx] = _apply(op, old, d, c, dt)
    return old
  if op in ("add", "sub"):
    sd = d[order].astype(np.uint64)
    if op == "sub": sd = (np.uint64(0) - sd)
    start = np.ones(sidx.size, bool)
    start[1:] = sidx[1:] != sidx[:-1]
    cs = np.cumsum(sd, dtype=np.uint64)
    grp = np.cumsum(start) - 1
    first = np.nonzero(start)[0]
    base_cs = cs[first] - sd[first]
    excl = cs - sd - base_cs[grp]
    res_sorted = (arr[sidx].astype(np.uint64) + excl).astype(dt)
    ret = np.empty_like(res_sorted)
    ret[order] = res_sorted
    last = np.append(first[1:] - 1, sidx.size - 1)
    arr[sidx[first]] = (arr[sidx[first]].astype(np.uint64) + (cs[last] - base_cs)).astype(dt)
    return ret
  # general: a sequential loop over the lanes (rare: the compiler aggregates atomics per wave)
  ret = np.empty(idx.size, dt)
  cc = None if c is None else np.asarray(c).astype(dt)
  for k in range(idx.size):
    i = idx[k]
    o = arr[i]
    ret[k] = o
    arr[i] = _apply(op, np.array([o], dt), d[k:k + 1], None if cc is None else cc[k:k + 1], dt)[0]
  return ret


def _apply(op, old, d, c, dt):
  signed = {np.dtype(u32): i32, np.dtype(u64): i64}[np.dtype(dt)]
  if op == "add": return old + d
  if op == "sub": return old - d
  if op == "rsub": return d - old
  if op == "csub": return np.where(old > d, old - d, dt.type(0)).astype(dt)     # subtract, clamped at 0
  if op == "mskor": return (old & ~d) | np.asarray(c).astype(dt)    # DS_MSKOR: (MEM & ~DATA) | DATA2
  if op == "and": return old & d
  if op == "or": return old | d
  if op == "xor": return old ^ d
  if op == "swap": return d
  if op == "umin": return np.minimum(old, d)
  if op == "umax": return np.maximum(old, d)
  if op == "smin": return np.minimum(old.view(signed), d.view(signed)).view(dt)
  if op == "smax": return np.maximum(old.view(signed), d.view(signed)).view(dt)
  if op == "inc": return np.where(old >= d, dt.type(0) if hasattr(dt, "type") else 0, old + 1).astype(dt)
  if op == "dec": return np.where((old == 0) | (old > d), d, old - 1).astype(dt)
  if op == "cmpswap": return np.where(old == np.asarray(c).astype(dt), d, old).astype(dt)
  if op == "add_f32": return (old.view(f32) + d.view(f32)).view(u32)
  if op == "min_f32": return np.fmin(old.view(f32), d.view(f32)).view(u32)
  if op == "max_f32": return np.fmax(old.view(f32), d.view(f32)).view(u32)
  raise GPUFault(f"atomic {op} is not supported", kind="illegal instruction")


def _gather(mem32, mem8, b, nbytes: int, signed: bool):
  """Load nbytes at byte indices b (one per lane) from a u32 array and its u8 view: a list of u32 dwords
  (nbytes >= 4; byte-gathered when an index is not dword aligned) or one zero/sign-extended value (1 or 2 bytes)."""
  if nbytes < 4:
    v = mem8[b].astype(u32)
    if nbytes == 2: v |= mem8[b + 1].astype(u32) << u32(8)
    if signed:
      sh = u32(32 - 8 * nbytes)
      v = ((v << sh).view(i32) >> i32(32 - 8 * nbytes)).view(u32)
    return v
  if (b & 3).any():
    out = []
    for k in range(nbytes // 4):
      v = np.zeros(b.shape, u32)
      for j in range(4): v |= mem8[b + 4 * k + j].astype(u32) << u32(8 * j)
      out.append(v)
    return out
  w = b >> 2
  return [mem32[w + k] for k in range(nbytes // 4)]
