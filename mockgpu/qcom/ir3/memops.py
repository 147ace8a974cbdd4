"""cat6: memory (global, IBO, local, private), atomics, stc, resinfo and the id reads; run(F, D, i) with i == 0
(memory instructions do not repeat)."""
from __future__ import annotations

import numpy as np

from ....errors import GPUFault
from .values import A1, F16, M32, S16, S32, S8, TYPE_BYTES, U16, U8, from_value, to_value
from .operands import _dst, _gpr


# cat6: memory. run(F, D, i) with i == 0 (memory instructions do not repeat)
def _typeinfo(f):
  t = f["TYPE"]
  return t, TYPE_BYTES[t], t in (F16, U16, S16, U8, S8) or bool(f.get("TYPE_HALF", 0))


def _addr64(F, regid):
  return F.R[regid].astype(np.uint64) | (F.R[regid + 1].astype(np.uint64) << np.uint64(32))


def _selected(F):
  """The selected fibers' indices, or None when every fiber runs (rows then need no gather)."""
  return None if F.sel is None else np.nonzero(F.sel)[0]


def _rows(row, ix): return row if ix is None else row[ix]


def _scatter(F, ix, got):
  """A register row for F.write: got for the selected fibers (the others are not written)."""
  if ix is None: return got
  out = np.zeros(F.n, np.uint32)
  out[ix] = got
  return out


def _ldst_global(d):
  f, name = d.fields, d.name
  t, nb, half = _typeinfo(f)
  size = f.get("SIZE", 1)
  a_reg = _gpr(f["SRC1"])
  if name.endswith(".a"):
    s2, shift, off = _gpr(f["SRC2"]), f.get("SRC2_BYTE_SHIFT", f.get("DST_BYTE_SHIFT", 2)), f.get("OFF", 0) << 2
  else: s2, shift, off = None, 0, f.get("OFF", 0)
  store = name.startswith("stg")
  val_reg = _gpr(f["SRC3"]) if store else _dst(d)
  what = f"{name} at pc {d.pc}"
  def addresses(F, ix):
    a = _addr64(F, a_reg)
    if ix is not None: a = a[ix]
    if s2 is not None: a = a + (_rows(F.R[s2], ix).astype(np.uint64) << np.uint64(shift))
    return a + np.uint64(off & 0xFFFFFFFFFFFFFFFF) if off >= 0 else a - np.uint64(-off)
  def run(F, D, i):
    ix = _selected(F)
    base = addresses(F, ix)
    for c in range(size):
      addr = base + np.uint64(c * nb) if c else base
      if store: D.mem.store(addr, _rows(F.read(val_reg + c, half), ix), nb, what)
      else:
        out = _scatter(F, ix, D.mem.load(addr, nb, what))
        if t in (S16, S8) and not half: out = from_value(to_value(out, t), S32)
        F.write(val_reg + c, out, half)
  return run


def _ibo(F, D, f, ix, name="", pc=0):
  """(base addresses, element counts) of the IBO slot per selected fiber (ix None: every fiber), scalars for an
  immediate slot. A slot past SP_CS_CONFIG.NIBO (the IBOs the dispatch declared) or never loaded faults, naming
  it."""
  ssbo = f["SSBO"]
  limit = min(D.nibo, len(D.ibos))
  if f.get("SSBO_IM", 1):
    slot = ssbo.fields.get("IMMED", 0)
    if slot >= limit and (F.n if ix is None else len(ix)): _bad_slot(D, name, pc, slot)
    if slot >= len(D.ibos): return np.uint64(0), 0
    desc = D.ibos[slot]
    base = (int(desc[4]) & 0xFFFFFFE0) | int(desc[5]) << 32
    return np.uint64(base), (int(desc[1]) & 0x7FFF) | ((int(desc[1]) >> 15) & 0x7FFF) << 15
  slot = _rows(F.R[_gpr(ssbo)], ix)
  if len(slot) and int(slot.max()) >= limit: _bad_slot(D, name, pc, int(slot.max()))
  desc = D.ibos[slot]
  base = (desc[:, 4].astype(np.uint64) & np.uint64(0xFFFFFFE0)) | (desc[:, 5].astype(np.uint64) << np.uint64(32))
  count = (desc[:, 1] & 0x7FFF).astype(np.int64) | ((desc[:, 1] >> 15) & 0x7FFF).astype(np.int64) << 15
  return base, count


def _bad_slot(D, name, pc, slot):
  raise GPUFault(f"ir3: {name} at pc {pc}: IBO slot {slot} is past SP_CS_CONFIG.NIBO ({D.nibo}) or the "
                 f"{len(D.ibos)} descriptor(s) CP_LOAD_STATE6 loaded", kind="illegal instruction")


def _in_bounds(index: np.ndarray, count: np.ndarray) -> np.ndarray:
  """IBO accesses are bounds-checked against the descriptor's element count as the texture/IBO unit does for
  buffers: a load past the end returns 0, a store or an atomic there is dropped (the behaviour Vulkan's
  robustBufferAccess asks for, which turnip provides on a6xx from the descriptor's size with no shader checks)."""
  return (index >= 0) & (index < count)


def _ldst_ibo(d):
  f, name = d.fields, d.name
  t, nb, half = _typeinfo(f)
  comps = f.get("TYPE_SIZE", 1)
  store = name.startswith("stib")
  val_reg, coord = _gpr(f["SRC1"]), _gpr(f["SRC2"])     # ldib's destination is its SRC1 field too
  # the coordinate counts elements: a typed access's element is a texel of `comps` components, an untyped one's a
  # single component (the components of a vector access are consecutive elements)
  typed = bool(f["TYPED"].fields.get("TYPED", 0)) if "TYPED" in f else False
  what = f"{name} at pc {d.pc}"
  def run(F, D, i):
    ix = _selected(F)
    base, count = _ibo(F, D, f, ix, name, d.pc)
    elem = _rows(F.R[coord], ix).astype(np.int64)
    for c in range(comps):
      e = (elem * comps if typed else elem) + c if (typed or c) else elem
      ok = _in_bounds(e, count)
      every = bool(ok.all())
      if every and type(base) is not np.ndarray:      # one descriptor, every element inside it
        if store: D.mem.store_elems(int(base), e, _rows(F.read(val_reg + c, half), ix), nb, what)
        else: F.write(val_reg + c, _scatter(F, ix, D.mem.load_elems(int(base), e, nb, what)), half)
        continue
      addr = base + ((e if every else np.where(ok, e, 0)) * nb).view(np.uint64)
      if store:
        v = _rows(F.read(val_reg + c, half), ix)
        if every: D.mem.store(addr, v, nb, what)
        else: D.mem.store(addr[ok], v[ok], nb, what)
      else:
        if every: got = D.mem.load(addr, nb, what)
        else:
          got = np.zeros(len(e), np.uint32)
          got[ok] = D.mem.load(addr[ok], nb, what)
        F.write(val_reg + c, _scatter(F, ix, got), half)
  return run


def _local_index(F, D, name, off, nb, pc, private=False):
  """(memory, offsets the hardware uses) for an ldl/stl (or ldp/stp) access. Local memory: the dispatch's
  SHARED_SIZE (SP_CS_CTRL_REG1: 0 is all 32 KiB, else (SHARED_SIZE + 1) KiB); a6xx.xml documents that "the
  ldl/stl offset seems to be rewritten to 0 when it is beyond this limit", which the mock does. Private memory:
  SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM bytes per fiber; outside them (or none programmed) is a fault naming both."""
  if private:
    mem = F.private
    if mem is None or not mem.shape[1]:
      raise GPUFault(f"ir3: {name} at pc {pc}: no private memory was programmed (SP_CS_PVT_MEM_PARAM/ADDR/SIZE)",
                     kind="illegal address")
    if (off < 0).any() or (off + nb > mem.shape[1]).any():
      bad = int(off[(off < 0) | (off + nb > mem.shape[1])][0])
      raise GPUFault(f"ir3: {name} at pc {pc}: private offset {bad} is outside the {mem.shape[1]} bytes per fiber "
                     f"(SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM)", address=bad, kind="illegal address")
    return mem, off
  beyond = (off < 0) | (off + nb > D.shared_bytes)
  return F.local, np.where(beyond, 0, off)


def _ldst_local(d):
  f, name = d.fields, d.name
  t, nb, half = _typeinfo(f)
  size, off = f.get("SIZE", 1), f.get("OFF", 0)
  store = name.startswith("st")
  private = name in ("ldp", "stp")
  if store: addr_reg, val_reg = _gpr(f["DST"]), _gpr(f["SRC"])
  else: addr_reg, val_reg = (_gpr(f["SRC"]) if "SRC" in f else None), _dst(d)
  def run(F, D, i):
    ix = _selected(F)
    if private and F.private is None and D.private_bytes: F.private = np.zeros((F.n, D.private_bytes), np.uint8)
    if private: rows = np.arange(F.n) if ix is None else ix
    else: rows = _rows(F.group_of, ix)
    base = (_rows(F.R[addr_reg], ix).astype(np.int64) if addr_reg is not None else np.zeros(len(rows), np.int64)) + off
    for c in range(size):
      mem, o = _local_index(F, D, name, base + c * nb, nb, d.pc, private)
      # whole aligned words: one uint32 access per fiber (the same bytes as the byte-wise form below)
      words = nb == 4 and not mem.shape[1] & 3 and not (o & 3).any()
      if store:
        v = _rows(F.read(val_reg + c, half), ix)
        if words: mem.view(np.uint32)[rows, o >> 2] = v
        else:
          for k in range(nb): mem[rows, o + k] = ((v >> (8 * k)) & 0xFF).astype(np.uint8)
      else:
        if words: v = mem.view(np.uint32)[rows, o >> 2]
        else:
          v = np.zeros(len(rows), np.uint32)
          for k in range(nb): v |= mem[rows, o + k].astype(np.uint32) << (8 * k)
        F.write(val_reg + c, _scatter(F, ix, v), half)
  return run


ATOMIC = {"add": lambda o, v, c: o + v, "sub": lambda o, v, c: o - v, "xchg": lambda o, v, c: v,
          "inc": lambda o, v, c: o + 1, "dec": lambda o, v, c: o - 1, "and": lambda o, v, c: o & v,
          "or": lambda o, v, c: o | v, "xor": lambda o, v, c: o ^ v, "min": min, "max": max,
          "cmpxchg": lambda o, v, c: v if o == c else o}


def _atomic(d):
  """atomic.OP (local: l[src1] with src2; cmpxchg: src2.x the new value, src2.y the compare -- ir3_compiler_nir.c
  emit_intrinsic_atomic_shared: "for cmpxchg, src1 is [ui]vec2(data, compare)"), atomic.g.OP (global: 64-bit address src1, data src2; cmpxchg: src2.x the
  compare value, src2.y the new one, as Mesa collects them), atomic.b.OP (IBO: element src2; src1 is a vector whose
  .x receives the old value, .y is the data (the compare value for cmpxchg) and .z the new value for cmpxchg: Mesa
  ir3_a6xx.c emit_intrinsic_atomic_ssbo). Fibers take their turn in order (each sees the previous one's result); an
  IBO element past the descriptor's count is not touched and returns 0."""
  f, name = d.fields, d.name
  parts = name.split(".")
  kind = parts[1] if parts[1] in ("g", "b") else "l"
  op = parts[-1]
  fn = ATOMIC[op]
  t = f["TYPE"]
  signed = t in (S32, S16)
  def run(F, D, i):
    ix = F.idx()
    ok = np.ones(len(ix), bool)
    if kind == "b":
      base, count = _ibo(F, D, f, ix, name, d.pc)
      elem = F.R[_gpr(f["SRC2"])][ix].astype(np.int64)
      ok = _in_bounds(elem, count)
      vec = _gpr(f["SRC1"])
      addrs = base + (np.where(ok, elem, 0).astype(np.uint64) << np.uint64(2))
      data, cmpv, dst = F.R[vec + 1][ix], F.R[vec + 1][ix], vec
      if op == "cmpxchg": data = F.R[vec + 2][ix]
    elif kind == "g":
      addrs = _addr64(F, _gpr(f["SRC1"]))[ix]
      data_reg = _gpr(f["SRC2"])
      data, cmpv, dst = F.R[data_reg][ix], F.R[data_reg][ix], _dst(d)
      if op == "cmpxchg": data = F.R[data_reg + 1][ix]
    else:
      addrs = F.R[_gpr(f["SRC1"])][ix].astype(np.int64)
      data_reg = _gpr(f["SRC2"])
      data, cmpv, dst = F.R[data_reg][ix], F.R[data_reg + 1][ix], _dst(d)
    old = np.zeros(F.n, np.uint32)
    for k, lane in enumerate(ix.tolist()):
      if not ok[k]: continue
      a = int(addrs[k])
      if kind == "l":
        _, o = _local_index(F, D, name, np.array([a]), 4, d.pc)
        a = int(o[0])
        row = F.local[F.group_of[lane]]
        cur = int(row[a:a + 4].view(np.uint32)[0])
      else: cur = int(D.mem.load(np.array([a], np.uint64), 4, f"{name} at pc {d.pc}")[0])
      v, c = int(data[k]), int(cmpv[k])
      if signed: cur_v, v_v, c_v = _s(cur), _s(v), _s(c)
      else: cur_v, v_v, c_v = cur, v, c
      new = fn(cur_v, v_v, c_v) & M32
      if kind == "l": row[a:a + 4] = np.frombuffer(np.uint32(new).tobytes(), np.uint8)
      else: D.mem.store(np.array([a], np.uint64), np.array([new], np.uint32), 4, f"{name} at pc {d.pc}")
      old[lane] = cur
    F.write(dst, old, False)
  return run


def _s(v): return v - (1 << 32) if v & 0x80000000 else v


def _stc(d):
  """stc: SIZE components from SRC into the constant file at c[OFFSET] (counted in scalar components), or at
  c[a1.x + OFFSET] in its a1.x form (#const-dst-a1 in Mesa 25's ir3-cat6.xml); the first live fiber's values."""
  f = d.fields
  size, dst, src = f.get("SIZE", 1), f["DST"], _gpr(f["SRC"])
  off, rel = dst.fields.get("OFFSET", 0), dst.name == "#const-dst-a1"
  def run(F, D, i):
    ix = F.idx()
    if not len(ix): return
    base = off + (int(F.R[A1][ix[0]]) & 0xFFFF if rel else 0)
    if base + size > len(D.consts):
      raise GPUFault(f"ir3: stc at pc {d.pc}: constants {base}..{base + size - 1} are past the constant file",
                     kind="illegal instruction")
    for c in range(size): D.consts[base + c] = F.R[src + c][ix[0]]
  return run


def _resinfo(d):
  """resinfo.b: the IBO's size into three components (Mesa ir3_a6xx.c: "resinfo has no writemask and always writes
  out 3 components"): .x the element count; .y and .z are written too (0 here: Mesa reads only .x for a buffer)."""
  f = d.fields
  dst = _dst(d)
  def run(F, D, i):
    ix = F.idx()
    _, count = _ibo(F, D, f, ix, d.name, d.pc)
    out = np.zeros(F.n, np.uint32)
    out[ix] = count
    F.write(dst, out, False)
    F.write(dst + 1, np.zeros(F.n, np.uint32), False)
    F.write(dst + 2, np.zeros(F.n, np.uint32), False)
  return run


def _getid(what):
  def build(d):
    dst = _dst(d)
    def run(F, D, i):
      lane = F.lid
      v = {"fiber": lane % D.wave, "wave": lane // D.wave, "sp": np.zeros(F.n, np.int64)}[what]
      F.write(dst, v.astype(np.uint32), False)
    return run
  return build


CAT6 = {"ldg": _ldst_global, "stg": _ldst_global, "ldg.a": _ldst_global, "stg.a": _ldst_global,
        "ldib.b": _ldst_ibo, "stib.b": _ldst_ibo, "ldl": _ldst_local, "stl": _ldst_local, "ldlw": _ldst_local,
        "stlw": _ldst_local, "ldp": _ldst_local, "stp": _ldst_local, "ldlv": _ldst_local, "stc": _stc,
        "resinfo.b": _resinfo, "getfiberid": _getid("fiber"), "getwid": _getid("wave"), "getspid": _getid("sp")}
for _op in ATOMIC:
  for _k in ("atomic.", "atomic.g.", "atomic.b."): CAT6[_k + _op] = _atomic
