"""The state a batch of fibers runs on: global memory as the shader sees it (the KGSL model's objects) and the
fibers' registers, pcs, live masks, local and private memory."""
from __future__ import annotations

import ctypes

import numpy as np

from ....errors import GPUFault
from .values import A0, LOCAL_BYTES, M32


class Memory:
  """Global memory as the shader sees it: the KGSL model's objects (a fault outside them)."""

  def __init__(self, model):
    self.model, self._views = model, {}

  def _view(self, obj):
    v = self._views.get(obj.id)
    if v is None or v[0] != obj.va:
      arr = np.ctypeslib.as_array((ctypes.c_uint8 * obj.size).from_address(obj.va))
      v = self._views[obj.id] = (obj.va, arr)
    return v[1]

  def _locate(self, addrs, nbytes, what):
    """[(object, indices or None for all, byte offsets)]: one entry with None when every address lies in one object,
    else per-address checks (a fault names the first address outside every object)."""
    lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
    obj = self.model.find(lo, hi - lo)
    if obj is not None: return [(obj, None, (addrs - np.uint64(obj.va)).view(np.int64))]
    groups = {}
    for i, a in enumerate(addrs.tolist()):
      o = self.model.find(a, nbytes)
      if o is None: raise GPUFault(f"{what}: {nbytes} bytes at {a:#x} are outside every memory object", address=a,
                                   kind="page fault")
      groups.setdefault(o.id, (o, []))[1].append(i)
    return [(o, np.array(ix), (addrs[ix] - o.va).astype(np.int64)) for o, ix in groups.values()]

  def _gather(self, obj, off, nbytes):
    view = self._view(obj)
    if nbytes == 4 and not (off & 3).any(): return view.view(np.uint32)[off >> 2]
    v = np.zeros(len(off), np.uint32)
    for k in range(nbytes): v |= view[off + k].astype(np.uint32) << (8 * k)
    return v

  def load(self, addrs, nbytes, what):
    if not len(addrs): return np.zeros(0, np.uint32)
    parts = self._locate(addrs.astype(np.uint64, copy=False), nbytes, what)
    if parts[0][1] is None: return self._gather(parts[0][0], parts[0][2], nbytes)
    out = np.zeros(len(addrs), np.uint32)
    for obj, ix, off in parts: out[ix] = self._gather(obj, off, nbytes)
    return out

  def _words_at(self, base: int, elem, nb: int):
    """(the uint32 view of the one object holding every 4-byte element base + elem * 4, the word index of
    elem 0) or None (another size, or the elements span objects: the general path then checks each address)."""
    if nb != 4 or not len(elem): return None
    lo, hi = int(elem.min()), int(elem.max())
    obj = self.model.find(base + lo * 4, (hi - lo + 1) * 4)
    if obj is None or (base - obj.va) & 3 or obj.size & 3: return None
    return self._view(obj).view(np.uint32), (base - obj.va) >> 2

  def load_elems(self, base: int, elem, nb: int, what):
    """The nb-byte elements base + elem * nb (elem: int64, >= 0), as load() would read them."""
    got = self._words_at(base, elem, nb)
    if got is not None: return got[0][elem + got[1] if got[1] else elem]
    return self.load(np.uint64(base) + (elem * nb).view(np.uint64), nb, what)

  def store_elems(self, base: int, elem, vals, nb: int, what):
    got = self._words_at(base, elem, nb)
    if got is not None: got[0][elem + got[1] if got[1] else elem] = vals
    else: self.store(np.uint64(base) + (elem * nb).view(np.uint64), vals, nb, what)

  def store(self, addrs, vals, nbytes, what):
    if not len(addrs): return
    vals = np.asarray(vals, np.uint32)
    for obj, ix, off in self._locate(addrs.astype(np.uint64, copy=False), nbytes, what):
      view, v = self._view(obj), (vals if ix is None else vals[ix])
      if nbytes == 4 and not (off & 3).any(): view.view(np.uint32)[off >> 2] = v
      else:
        for k in range(nbytes): view[off + k] = ((v >> (8 * k)) & 0xFF).astype(np.uint8)


class Fibers:
  """The state of one batch: registers, pcs, live fibers, local and private memory. R may be a register file kept
  from an earlier batch of the same size (Dispatch zeroes the rows its program writes); local memory is allocated
  when an instruction first uses it."""

  def __init__(self, n, groups_in_batch, group_of, lid=None, wave=64, local_bytes=LOCAL_BYTES, R=None, wave_of=None):
    self.n = n
    self.R = np.zeros((256, n), np.uint32) if R is None else R
    self.pc = np.zeros(n, np.int64)
    self.alive = np.empty(n, bool)
    self.alive.fill(True)                          # (np.ones: two more Python calls per batch)
    self.group_of = group_of                       # work-group index (in the batch) of each fiber
    self.lid = np.arange(n) if lid is None else lid    # linear local id in its work-group
    if wave_of is None:
      per_group = (int(self.lid.max()) // wave + 1) if n else 1
      wave_of = group_of * per_group + self.lid // wave    # the wave (in the batch) of each fiber
    self.wave_of = wave_of
    self._local, self._local_shape = None, (groups_in_batch, max(local_bytes, 4))
    self.private = None
    self.sel = None                                # the fibers the current instruction runs on (None: all)

  def restart(self, R) -> "Fibers":
    """The batch's state at its start again, for the next batch of the same fibers (a dispatch run again keeps
    its Fibers): registers R, every fiber alive at pc 0, none selected, no local or private memory yet."""
    self.R = R
    self.pc.fill(0)
    self.alive.fill(True)
    self._local = self.private = self.sel = None
    return self

  @property
  def local(self):
    """The work-groups' shared memory (allocated on first use: most programs have no ldl/stl)."""
    if self._local is None: self._local = np.zeros(self._local_shape, np.uint8)
    return self._local

  # registers
  def read(self, regid, half):
    if half and regid < A0: return (self.R[regid >> 1] >> (16 * (regid & 1))) & 0xFFFF
    return self.R[regid]

  def write(self, regid, val, half):
    if type(val) is not np.ndarray or val.dtype != np.uint32: val = np.asarray(val, np.uint32)
    if half and regid < A0:
      shift = 16 * (regid & 1)
      full = self.R[regid >> 1]
      val = (full & np.uint32(~(0xFFFF << shift) & M32)) | ((val & 0xFFFF) << shift)
      regid >>= 1
    elif regid >= 252: return                      # r63: no register
    if self.sel is None: self.R[regid] = val
    else: np.copyto(self.R[regid], val, where=self.sel)     # only the selected fibers' elements

  def idx(self):
    return np.arange(self.n) if self.sel is None else np.nonzero(self.sel)[0]
