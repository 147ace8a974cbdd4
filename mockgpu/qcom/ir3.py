"""The mock Adreno's shader core: an ir3 emulator for the compute programs a CP_EXEC_CS dispatches.

Instructions are decoded once (hcq.compiler.isa.ir3.isa.ISA.decode: the bitset and its fields, Mesa's isaspec)
and turned into Python closures over numpy arrays: every fiber of a batch (whole work-groups, up to BATCH fibers) runs
together, one array element per fiber, the way mockgpu/amd runs the lanes of a wave.

The machine modelled (a6xx):
  - registers: one file of 64 x vec4 32-bit registers per fiber (r0.x = regid 0 ... r63.w = 255); half registers are
    merged into it (a6xx MERGEDREGS: hrN.c is half (regid & 1) of full regid >> 1: hr0.x, hr0.y = the low and high
    halves of r0.x); a0.x/a1.x (r61.x/y, 16-bit) and p0.x..w (r62, predicates) are their own registers;
  - control: each fiber has its own pc; the lowest pc among the live fibers runs next (fibers that branched ahead
    wait, so divergent paths reconverge where the program's join points are); br/jump/brao/braa/bany/ball relative
    to the branch, getone/shps/shpe (the preamble runs once per dispatch, by one fiber), end;
  - (rptN) repeats an instruction N more times with the destination and the (r) sources stepped by one component;
    (ss), (sy) and the delay slots are checked as Mesa's ir3_legalize requires them (sync.py): a result read before
    its flag or its cycles faults (strict mode) or reads as POISON; (jp), (ul) are not modelled;
  - the dispatch's state as CP_EXEC_CS programmed it: constants past CONSTLEN, registers past FULLREGFOOTPRINT and
    IBO slots past NIBO fault; shared memory is SHARED_SIZE's, private memory MEMSIZEPERITEM's; getone/bany/ball
    act per wave of 64 or 128 fibers (THREADSIZE);
  - ALU: cat1 mov/cov (conversions between f16/f32/u8..s32, with the rounding field for float -> integer: truncate,
    even, +inf, -inf), relative mov through a0.x, mova; cat2 float/integer/bit operations with (abs)/(neg) modifiers
    (a bit-op's (neg) is a not), float immediates from the lookup table, (sat), half precision when the encoding says
    so, compares into registers or p0; cat3 mad/sel; cat4 rcp/rsq/log2/exp2/sin/cos/sqrt;
  - memory: ldg/stg (64-bit addresses; .a forms address src1 + (src2 << shift) + (off << 2)), ldib/stib and
    atomic.b.* through IBO descriptors (CP_LOAD_STATE6 ST6_IBO: the base address in dwords 4-5; an element past the
    descriptor's count reads 0 and is not written, as the hardware bounds-checks buffers), atomic.g.* on global
    addresses, ldl/stl/ldlw/stlw and atomic.* on the work-group's 32 KiB of local memory, ldp/stp private memory,
    stc to the constant file (c[N] or c[a1.x + N], counted in scalar components, the first live fiber's values),
    resinfo.b (3 components),
    getfiberid/getwid/getspid, bar/fence (a barrier holds by the lowest-pc rule). Offsets of ldg/stg, ldl/stl and
    ldp/stp immediates are bytes; an atomic.b's result replaces its data register (the encoding has no destination).
A global access outside every KGSL memory object raises hcq.GPUFault with the address (the context faults); an
instruction the model does not know (or whose semantics Mesa does not document: sel.f*/sel.s*) raises GPUFault
naming it and its pc. mull.u multiplies the low 16 bits of its sources; madsh.m16 is nir's imadsh_mix16."""
from __future__ import annotations

import ctypes
import math
import time

import numpy as np

from ...errors import GPUFault
from .sync import HALF_TYPES, POISON, Sync, SyncState, describe

BATCH = 4096                 # fibers run together (whole work-groups)
LOCAL_BYTES = 32 << 10       # shared memory per work-group (a6xx)
A0, A1, P0 = 61 * 4, 61 * 4 + 1, 62 * 4
M32 = 0xFFFFFFFF
FLUT = (0.0, 0.5, 1.0, 2.0, math.e, math.pi, 1 / math.pi, 1 / math.log2(math.e), math.log2(math.e),
        1 / math.log2(10), math.log2(10), 4.0)
# #type: f16 f32 u16 u32 s16 s32 u8 s8
F16, F32, U16, U32, S16, S32, U8, S8 = range(8)
TYPE_BYTES = {F16: 2, F32: 4, U16: 2, U32: 4, S16: 2, S32: 4, U8: 1, S8: 1}
COND = {0: np.less, 1: np.less_equal, 2: np.greater, 3: np.greater_equal, 4: np.equal, 5: np.not_equal}

_ISA = {}


def isa_for(gpu_id: int):
  if gpu_id not in _ISA:
    from ...compiler.isa.ir3.isa import ISA
    _ISA[gpu_id] = ISA(gpu_id)
  return _ISA[gpu_id]


class Unsupported(Exception):
  pass


class OutOfState(Exception):
  """An instruction that names state the dispatch did not program (a constant past CONSTLEN, a register past the
  footprint, an IBO slot past NIBO): it faults when it runs."""


# ---- value helpers: registers hold raw bits in uint32 arrays
def f32(bits): return np.asarray(bits, np.uint32).view(np.float32)
def b32(x): return np.asarray(x, np.float32).view(np.uint32)
def f16(bits): return (np.asarray(bits, np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16)
def b16(x): return np.asarray(x, np.float16).view(np.uint16).astype(np.uint32)
def s32(bits): return np.asarray(bits, np.uint32).view(np.int32)
def sext(bits, width):
  v = np.asarray(bits, np.uint32).astype(np.int64) & ((1 << width) - 1)
  return np.where(v >> (width - 1), v - (1 << width), v)


def to_value(bits, t):
  """Raw register bits of type t -> numbers (float64 for floats, int64 for integers)."""
  if t == F16: return f16(bits).astype(np.float64)
  if t == F32: return f32(bits).astype(np.float64)
  if t in (U16, U8): return np.asarray(bits, np.uint32).astype(np.int64) & (0xFFFF if t == U16 else 0xFF)
  if t == U32: return np.asarray(bits, np.uint32).astype(np.int64)
  return sext(bits, {S16: 16, S32: 32, S8: 8}[t])


def from_value(v, t, rnd: int = 0):
  """Numbers -> raw bits of type t (float -> integer: rounding mode rnd, saturated to the type's range)."""
  v = np.asarray(v)
  if t == F16: return b16(v.astype(np.float16))
  if t == F32: return b32(v.astype(np.float32))
  if v.dtype.kind == "f":
    v = {0: np.trunc, 1: np.rint, 2: np.ceil, 3: np.floor}[rnd](np.nan_to_num(v, nan=0.0))
    width, signed = {U16: (16, 0), U32: (32, 0), S16: (16, 1), S32: (32, 1), U8: (8, 0), S8: (8, 1)}[t]
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    v = np.clip(v, lo, hi).astype(np.int64)
  mask = {U16: 0xFFFF, S16: 0xFFFF, U8: 0xFF, S8: 0xFF}.get(t, M32)
  return (v.astype(np.int64) & mask).astype(np.uint32)


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
    """(object, byte offsets) when every address lies in one object, else per-address checks (a fault names the
    first address outside every object)."""
    lo, hi = int(addrs.min()), int(addrs.max()) + nbytes
    obj = self.model.find(lo, hi - lo)
    if obj is not None: return [(obj, np.arange(len(addrs)), (addrs - obj.va).astype(np.int64))]
    groups = {}
    for i, a in enumerate(addrs.tolist()):
      o = self.model.find(a, nbytes)
      if o is None: raise GPUFault(f"{what}: {nbytes} bytes at {a:#x} are outside every memory object", address=a,
                                   kind="page fault")
      groups.setdefault(o.id, (o, []))[1].append(i)
    return [(o, np.array(ix), (addrs[ix] - o.va).astype(np.int64)) for o, ix in groups.values()]

  def load(self, addrs, nbytes, what):
    out = np.zeros(len(addrs), np.uint32)
    if not len(addrs): return out
    for obj, ix, off in self._locate(addrs.astype(np.uint64), nbytes, what):
      view = self._view(obj)
      if nbytes == 4 and not (off & 3).any(): out[ix] = view.view(np.uint32)[off >> 2]
      else:
        v = np.zeros(len(off), np.uint32)
        for k in range(nbytes): v |= view[off + k].astype(np.uint32) << (8 * k)
        out[ix] = v
    return out

  def store(self, addrs, vals, nbytes, what):
    if not len(addrs): return
    for obj, ix, off in self._locate(addrs.astype(np.uint64), nbytes, what):
      view, v = self._view(obj), np.asarray(vals, np.uint32)[ix]
      if nbytes == 4 and not (off & 3).any(): view.view(np.uint32)[off >> 2] = v
      else:
        for k in range(nbytes): view[off + k] = ((v >> (8 * k)) & 0xFF).astype(np.uint8)


class Fibers:
  """The state of one batch: registers, pcs, live fibers, local and private memory."""

  def __init__(self, n, groups_in_batch, group_of, lid=None, wave=64, local_bytes=LOCAL_BYTES):
    self.n = n
    self.R = np.zeros((256, n), np.uint32)
    self.pc = np.zeros(n, np.int64)
    self.alive = np.ones(n, bool)
    self.group_of = group_of                       # work-group index (in the batch) of each fiber
    self.lid = np.arange(n) if lid is None else lid    # linear local id in its work-group
    per_group = (int(self.lid.max()) // wave + 1) if n else 1
    self.wave_of = group_of * per_group + self.lid // wave    # the wave (in the batch) of each fiber
    self.local = np.zeros((groups_in_batch, max(local_bytes, 4)), np.uint8)
    self.private = None
    self.sel = None                                # the fibers the current instruction runs on (None: all)

  # registers
  def read(self, regid, half):
    if half and regid < A0: return (self.R[regid >> 1] >> (16 * (regid & 1))) & 0xFFFF
    return self.R[regid]

  def write(self, regid, val, half):
    val = np.broadcast_to(np.asarray(val, np.uint32), (self.n,))
    if half and regid < A0:
      shift = 16 * (regid & 1)
      full = self.R[regid >> 1]
      val = (full & np.uint32(~(0xFFFF << shift) & M32)) | ((val & 0xFFFF) << shift)
      regid >>= 1
    elif regid >= 252: return                      # r63: no register
    if self.sel is None: self.R[regid] = val
    else: self.R[regid, self.sel] = val[self.sel]

  def idx(self):
    return np.arange(self.n) if self.sel is None else np.nonzero(self.sel)[0]


# ---- operands
def _gpr(d):
  return d.fields["GPR"] * 4 + d.fields["SWIZ"]


def src_reader(op, half, ctx, *, float_op=False):
  """A function (fibers, repeat step) -> raw bits of a cat2/cat3/cat4 source operand."""
  name, f = op.name, op.fields
  if name in ("#multisrc-gpr", "#cat3-src-gpr", "#cat1-gpr-src"):
    r = _gpr(f["SRC"])
    return lambda F, i: F.read(r + i, half)
  if name == "#reg-gpr":
    r = _gpr(op)
    return lambda F, i: F.read(r + i, half)
  if name in ("#multisrc-const", "#cat3-src-const-or-immed", "#cat1-const-src") and ("SRC" in f or "CONST" in f):
    c = f.get("SRC", f.get("CONST"))
    if hasattr(c, "fields"): c = c.fields["CONST"] * 4 + c.fields["SWIZ"]
    else: c = f["CONST"] * 4 + f["SWIZ"]
    if "IMMED" in f and name == "#cat3-src-const-or-immed" and ctx.get("immed"):
      v = f["IMMED"] & (0xFFFF if half else M32)
      return lambda F, i: np.uint32(v)
    consts, limit = ctx["consts"], ctx.get("constlen", 1 << 30) * 4
    demote = half and ctx.get("demotion", False)
    top = ((c >> 1) if half and not demote else c) + ctx.get("rpt", 0)
    if top >= limit:        # HLSQ_CS_CNTL.CONSTLEN: the constants the dispatch loaded (in vec4s)
      raise OutOfState(f"reads c{top // 4}.{'xyzw'[top % 4]}, past HLSQ_CS_CNTL.CONSTLEN ({limit // 4} vec4s)")
    if demote:
      # SP_MODE_CONTROL.CONSTANT_DEMOTION_ENABLE (a6xx.xml): hcN.c loads cN.c's 32-bit value and converts it to 16
      # bits by the operand's type (f2f16 for a float operation, u2u16 for an integer one)
      if float_op: return lambda F, i: b16(f32(consts[c + i]).astype(np.float16))
      return lambda F, i: np.uint32(int(consts[c + i]) & 0xFFFF)
    if half:            # demotion off: 16 bits of the packed constant file (hc0.y = the top half of c0.x)
      return lambda F, i: np.uint32((int(consts[(c + i) >> 1]) >> (16 * ((c + i) & 1))) & 0xFFFF)
    return lambda F, i: consts[c + i]
  if name in ("#mulitsrc-immed", "#cat1-immed-src"):
    v = f["IMMED"] & (0xFFFF if half else M32)
    return lambda F, i: np.uint32(v)
  if name == "#multisrc-immed-flut-full":
    v = int(b32(np.float32(FLUT[f["IMMED"]])))
    return lambda F, i: np.uint32(v)
  if name == "#multisrc-immed-flut-half":
    v = int(b16(np.float16(FLUT[f["IMMED"]])))
    return lambda F, i: np.uint32(v)
  if name in ("#multisrc-relative-gpr", "#cat1-relative-gpr-src"):
    off = (f["SRC"].fields["OFFSET"] if "SRC" in f else f["OFFSET"])
    def rel(F, i):
      rid = sext(F.R[A0], 16) + off + i
      if half: return np.array([(F.R[r >> 1, k] >> (16 * (r & 1))) & 0xFFFF for k, r in enumerate(rid.tolist())], np.uint32)
      return F.R[np.clip(rid, 0, 255), np.arange(F.n)]
    return rel
  if name in ("#multisrc-relative-const", "#cat1-relative-const-src"):
    off = (f["SRC"].fields["OFFSET"] if "SRC" in f else f["OFFSET"])
    consts, limit = ctx["consts"], ctx.get("constlen", 1 << 30) * 4
    def relc(F, i):
      ix = sext(F.R[A0], 16) + off + i
      live = F.alive if F.sel is None else F.sel
      bad = ((ix < 0) | (ix >= min(limit, len(consts)))) & live
      if bad.any():
        raise GPUFault(f"ir3: c[a0.x{off:+d}] reads constant {int(ix[bad][0])}, outside HLSQ_CS_CNTL.CONSTLEN "
                       f"({limit // 4} vec4s)", kind="illegal instruction")
      return consts[np.clip(ix, 0, len(consts) - 1)]
    return relc
  raise Unsupported(f"operand {name}")


def absneg(bits, mod, kind, half):
  """Apply (abs)/(neg): kind "f" (float), "s" (integer), "b" (bitwise: (neg) is not)."""
  if not mod: return bits
  mask = 0xFFFF if half else M32
  if kind == "f":
    x = f16(bits) if half else f32(bits)
    if mod & 2: x = np.abs(x)
    if mod & 1: x = -x
    return b16(x) if half else b32(x)
  if kind == "b":
    return (~np.asarray(bits, np.uint32)) & mask if mod & 1 else bits
  v = sext(bits, 16 if half else 32)
  if mod & 2: v = np.abs(v)
  if mod & 1: v = -v
  return (v & mask).astype(np.uint32)


class Ins:
  """A decoded instruction with what building it needs: the constant file and its pc."""
  __slots__ = ("name", "fields", "ctx", "pc")

  def __init__(self, name, fields, ctx, pc): self.name, self.fields, self.ctx, self.pc = name, fields, ctx, pc


class Instr:
  __slots__ = ("pc", "name", "text", "run", "rpt", "kind", "sync")

  def __init__(self, pc, name, text, run, rpt=0, kind="alu", sync=None):
    self.pc, self.name, self.text, self.run, self.rpt, self.kind = pc, name, text, run, rpt, kind
    self.sync = sync if sync is not None else Sync()


def _bad(pc, text, why):
  def run(F, D, i=0):
    raise GPUFault(f"ir3: instruction {pc} ({text}) is not modelled: {why}", kind="illegal instruction")
  return run


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


def _dst(d):
  dst = d.fields["DST"]
  while dst.name != "#reg-gpr": dst = dst.fields["DST"]
  return _gpr(dst)


def _special(regid): return regid >= A0


# cat0: flow. run(F, D) sets the pcs of the selected fibers itself.
def _target(d, pc): return pc + d.fields["IMMED"]


def _pred(F, comp, inv):
  p = F.R[P0 + comp] != 0
  return ~p if inv else p


def _flow_br(d, pc):
  f, t = d.fields, _target(d, pc)
  def run(F, D):
    taken = _pred(F, f["COMP1"], f["INV1"])
    if d.name == "brao": taken = taken | _pred(F, f["COMP2"], f["INV2"])
    if d.name == "braa": taken = taken & _pred(F, f["COMP2"], f["INV2"])
    D.branch(F, taken, t)
  return run


def _flow_any_all(d, pc):
  """bany/ball: a branch taken by every fiber of a wave when any/all of the wave's live fibers have p0.x (the
  wave's vote; waves of 64 or 128 fibers, SP_CS_CTRL_REG0.THREADSIZE), not the emulator's batch."""
  t = _target(d, pc)
  def run(F, D):
    sel = F.alive if F.sel is None else F.sel
    p = (F.R[P0] != 0) & sel
    nw = int(F.wave_of.max()) + 1
    if d.name == "bany": vote = np.bincount(F.wave_of, weights=p, minlength=nw) > 0
    else: vote = np.bincount(F.wave_of, weights=sel & ~p, minlength=nw) == 0
    D.branch(F, vote[F.wave_of], t)
  return run


def _flow_jump(d, pc):
  t = _target(d, pc)
  return lambda F, D: D.branch(F, np.ones(F.n, bool), t)


def _flow_nop(d, pc):
  return lambda F, D: D.branch(F, np.zeros(F.n, bool), 0)


def _flow_end(d, pc):
  def run(F, D):
    if F.sel is None: F.alive[:] = False
    else: F.alive &= ~F.sel
  return run


def _flow_shps(d, pc):
  t = _target(d, pc)
  return lambda F, D: D.branch(F, np.full(F.n, D.preamble_done), t)


def _flow_getone(d, pc):
  """getone: in each wave, one fiber (the first selected) runs the block; the others go to the target."""
  t = _target(d, pc)
  def run(F, D):
    ix = F.idx()
    taken = np.ones(F.n, bool)
    if len(ix):
      _, first = np.unique(F.wave_of[ix], return_index=True)
      taken[ix[first]] = False
    D.branch(F, taken, t)
  return run


def _flow_shpe(d, pc):
  def run(F, D):
    D.preamble_done = True
    D.branch(F, np.zeros(F.n, bool), 0)
  return run


CAT0 = {"br": _flow_br, "brao": _flow_br, "braa": _flow_br, "bany": _flow_any_all, "ball": _flow_any_all,
        "jump": _flow_jump, "nop": _flow_nop, "end": _flow_end, "shps": _flow_shps, "getone": _flow_getone,
        "shpe": _flow_shpe}


# cat1: mov / cov
def _mov(d):
  f = d.fields
  st, dt, rnd = f["SRC_TYPE"], f["DST_TYPE"], f.get("ROUND", 0)
  src_half = st in (F16, U16, S16, U8, S8)
  dst_half = dt in (F16, U16, S16, U8, S8)
  dst = _dst(d)
  src = src_reader(f["SRC"], src_half, d.ctx, float_op=st == F16)
  r_src = f.get("SRC_R", 0)
  same = st == dt or {st, dt} <= {U32, S32} or {st, dt} <= {U16, S16}
  def run(F, D, i):
    bits = src(F, i * r_src)
    out = bits if same else from_value(to_value(bits, st), dt, rnd)
    F.write(dst + i, out, dst_half and not _special(dst))
  return run


# cat2
def _fop(fn):
  def make(full):
    def op(a, b):
      x, y = (f32(a), f32(b)) if full else (f16(a), f16(b))
      with np.errstate(all="ignore"): r = fn(x, y)
      return b32(r) if full else b16(r)
    return op
  return make


def _iop(fn, signed):
  def make(full):
    w, mask = (32, M32) if full else (16, 0xFFFF)
    def op(a, b):
      x, y = (sext(a, w), sext(b, w)) if signed else (np.asarray(a, np.uint32).astype(np.int64) & mask,
                                                        np.asarray(b, np.uint32).astype(np.int64) & mask)
      return (np.asarray(fn(x, y, w)).astype(np.int64) & mask).astype(np.uint32)
    return op
  return make


def _frnd(fn):
  return _fop(lambda x, y: fn(x))


def _clz(x, w):
  x = np.asarray(x, np.int64)
  out = np.full(x.shape, w, np.int64)
  for b in range(w - 1, -1, -1):
    hit = ((x >> b) & 1).astype(bool) & (out == w)
    out[hit] = w - 1 - b
  return out


def _bfrev(x, w):
  x = np.asarray(x, np.int64)
  out = np.zeros_like(x)
  for b in range(w): out |= ((x >> b) & 1) << (w - 1 - b)
  return out


def _cbits(x, w):
  x = np.asarray(x, np.int64)
  return sum(((x >> b) & 1) for b in range(w))


def _rndaz(x): return np.copysign(np.floor(np.abs(x) + 0.5), x)


# name -> (operand kind for modifiers, factory(full) -> fn(a, b) on raw bits, compare?)
CAT2 = {
  "add.f": ("f", _fop(np.add)), "mul.f": ("f", _fop(np.multiply)), "min.f": ("f", _fop(np.fmin)),
  "max.f": ("f", _fop(np.fmax)), "sign.f": ("f", _frnd(np.sign)), "absneg.f": ("f", _frnd(lambda x: x)),
  "floor.f": ("f", _frnd(np.floor)), "ceil.f": ("f", _frnd(np.ceil)), "rndne.f": ("f", _frnd(np.rint)),
  "rndaz.f": ("f", _frnd(_rndaz)), "trunc.f": ("f", _frnd(np.trunc)),
  "add.u": ("s", _iop(lambda x, y, w: x + y, False)), "add.s": ("s", _iop(lambda x, y, w: x + y, True)),
  "sub.u": ("s", _iop(lambda x, y, w: x - y, False)), "sub.s": ("s", _iop(lambda x, y, w: x - y, True)),
  "min.u": ("s", _iop(lambda x, y, w: np.minimum(x, y), False)), "min.s": ("s", _iop(lambda x, y, w: np.minimum(x, y), True)),
  "max.u": ("s", _iop(lambda x, y, w: np.maximum(x, y), False)), "max.s": ("s", _iop(lambda x, y, w: np.maximum(x, y), True)),
  "absneg.s": ("s", _iop(lambda x, y, w: x, True)),
  "and.b": ("b", _iop(lambda x, y, w: x & y, False)), "or.b": ("b", _iop(lambda x, y, w: x | y, False)),
  "xor.b": ("b", _iop(lambda x, y, w: x ^ y, False)), "not.b": ("b", _iop(lambda x, y, w: ~x, False)),
  "shl.b": ("b", _iop(lambda x, y, w: x << (y & (w - 1)), False)),
  "shr.b": ("b", _iop(lambda x, y, w: x >> (y & (w - 1)), False)),
  "ashr.b": ("b", _iop(lambda x, y, w: (sext(x, w) >> (y & (w - 1))), False)),
  "mul.u24": ("s", _iop(lambda x, y, w: (x & 0xFFFFFF) * (y & 0xFFFFFF), False)),
  "mul.s24": ("s", _iop(lambda x, y, w: sext(x & 0xFFFFFF, 24) * sext(y & 0xFFFFFF, 24), False)),
  # mull.u multiplies the low 16 bits of each source (Mesa maps nir umul_low to it, ir3_compiler_nir.c; nir_opcodes.py:
  # umul_low = (src0 & 0xffff) * (src1 & 0xffff)); a 32-bit multiply is ir3_nir_imul.py's
  # imadsh_mix16(b, a, imadsh_mix16(a, b, umul_low(a, b)))
  "mull.u": ("s", _iop(lambda x, y, w: ((x & 0xFFFF) * (y & 0xFFFF)) & ((1 << w) - 1), False)),
  "bfrev.b": ("b", _iop(lambda x, y, w: _bfrev(x, w), False)), "clz.b": ("b", _iop(lambda x, y, w: _clz(x, w), False)),
  "cbits.b": ("b", _iop(lambda x, y, w: _cbits(x, w), False)),
  "getbit.b": ("b", _iop(lambda x, y, w: (x >> (y & (w - 1))) & 1, False)),
  "cmps.f": ("f", None), "cmps.u": ("s", None), "cmps.s": ("s", None),
}


def _cat2(d):
  f, name = d.fields, d.name
  kind, make = CAT2[name]
  full = bool(f.get("FULL", 1))
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  ops = []
  for k in ("SRC1", "SRC2"):
    if k in f and hasattr(f[k], "fields") and f[k].fields:
      op = f[k]
      ops.append((src_reader(op, not full, d.ctx, float_op=kind == "f"), op.fields.get("ABSNEG", 0), f.get(f"{k}_R", 0)))
  sat = f.get("SAT", 0)
  if make is None:                                  # compare: 1 or 0
    cmp = COND[f["COND"]]
    def compute(a, b):
      if kind == "f": x, y = (f32(a), f32(b)) if full else (f16(a), f16(b))
      elif name == "cmps.s": x, y = sext(a, 32 if full else 16), sext(b, 32 if full else 16)
      else: x, y = (np.asarray(a, np.uint32) & (M32 if full else 0xFFFF)), (np.asarray(b, np.uint32) & (M32 if full else 0xFFFF))
      return cmp(x, y).astype(np.uint32)
    conv = None
  else:
    compute = make(full)
    conv = kind == "f" and dst_half == full         # (dst conversion) a float result of the other precision
  def run(F, D, i):
    vals = [absneg(r(F, i * rr), mod, kind, not full) for r, mod, rr in ops]
    if len(vals) == 1: vals.append(vals[0])
    out = compute(vals[0], vals[1])
    if sat and kind == "f":
      out = b32(np.clip(f32(out), 0, 1)) if full else b16(np.clip(f16(out), 0, 1))
    if conv: out = b16(f32(out).astype(np.float16)) if full else b32(f16(out).astype(np.float32))
    F.write(dst + i, out, dst_half)
  return run


# cat3
CAT3 = {"mad.f32", "mad.f16", "mad.u24", "mad.s24", "mad.u16", "mad.s16", "sel.b32", "sel.b16", "madsh.m16"}
# sel.f32/f16/s32/s16: Mesa documents no semantics for them (ir3 emits only sel.b16/b32): the mock refuses them
UNDOCUMENTED = {"sel.f32", "sel.f16", "sel.s32", "sel.s16"}


def _cat3(d):
  f, name = d.fields, d.name
  full = bool(f.get("FULL", 1))
  half = not full
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  ctx = dict(d.ctx, immed=f.get("IMMED_ENCODING", 0))
  r1, r2, r3 = (src_reader(f[k], half, ctx, float_op=name.startswith("mad.f")) for k in ("SRC1", "SRC2", "SRC3"))
  n1, n2, n3 = f.get("SRC1_NEG", 0), f.get("SRC2_NEG", 0), f.get("SRC3_NEG", 0)
  rr = (f.get("SRC1_R", 0), f.get("SRC2_R", 0), f.get("SRC3_R", 0))
  w, mask = (32, M32) if full else (16, 0xFFFF)
  def run(F, D, i):
    a, b, c = r1(F, i * rr[0]), r2(F, i * rr[1]), r3(F, i * rr[2])
    if name == "madsh.m16":
      # nir_opcodes.py imadsh_mix16: ((src0 >> 16) * (src1 & 0xffff) << 16) + src2
      x = np.asarray(a, np.int64) >> 16 & 0xFFFF
      y = np.asarray(b, np.int64) & 0xFFFF
      out = (((x * y) << 16) + (np.asarray(c, np.int64) & M32) & M32).astype(np.uint32)
    elif name.startswith("mad.f"):
      x, y, z = (f32(a), f32(b), f32(c)) if full else (f16(a), f16(b), f16(c))
      if n1: x = -x
      if n2: y = -y
      if n3: z = -z
      with np.errstate(all="ignore"): out = (x * y) + z
      out = b32(out) if full else b16(out)
    elif name.startswith("mad."):
      signed = name[4] == "s"
      bits = 24 if name.endswith("24") else 16
      x = sext(a & ((1 << bits) - 1), bits) if signed else (np.asarray(a, np.int64) & ((1 << bits) - 1))
      y = sext(b & ((1 << bits) - 1), bits) if signed else (np.asarray(b, np.int64) & ((1 << bits) - 1))
      z = sext(c, w) if signed else np.asarray(c, np.int64) & mask
      if n1: x = -x
      if n3: z = -z
      out = ((x * y + z) & mask).astype(np.uint32)
    else:                                           # sel.b16/b32: src2 != 0 ? src1 : src3
      cond = (np.asarray(b, np.uint32) & mask) != 0
      if n2: cond = ~cond
      out = np.where(cond, np.broadcast_to(a, (F.n,)), np.broadcast_to(c, (F.n,))).astype(np.uint32)
    F.write(dst + i, out, dst_half)
  return run


# cat4
CAT4 = {"rcp": lambda x: 1 / x, "rsq": lambda x: 1 / np.sqrt(x), "log2": np.log2, "exp2": np.exp2, "sin": np.sin,
        "cos": np.cos, "sqrt": np.sqrt, "hrsq": lambda x: 1 / np.sqrt(x), "hlog2": np.log2, "hexp2": np.exp2}


def _cat4(d):
  f, fn = d.fields, CAT4[d.name]
  full = bool(f.get("FULL", 1)) and not d.name.startswith("h")
  dst = _dst(d)
  dst_half = bool(f.get("DST_HALF", 0)) and not _special(dst)
  src = src_reader(f["SRC"], not full, d.ctx, float_op=True)
  mod, rr = f["SRC"].fields.get("ABSNEG", 0), f.get("SRC_R", 0)
  def run(F, D, i):
    x = absneg(src(F, i * rr), mod, "f", not full)
    with np.errstate(all="ignore"):
      v = fn(f32(x).astype(np.float64) if full else f16(x).astype(np.float64))
    F.write(dst + i, b16(v.astype(np.float16)) if dst_half else b32(v.astype(np.float32)), dst_half)
  return run


# cat6: memory. run(F, D, i) with i == 0 (memory instructions do not repeat)
def _typeinfo(f):
  t = f["TYPE"]
  return t, TYPE_BYTES[t], t in (F16, U16, S16, U8, S8) or bool(f.get("TYPE_HALF", 0))


def _addr64(F, regid):
  return F.R[regid].astype(np.uint64) | (F.R[regid + 1].astype(np.uint64) << np.uint64(32))


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
  def addresses(F, ix):
    a = _addr64(F, a_reg)[ix]
    if s2 is not None: a = a + (F.R[s2][ix].astype(np.uint64) << np.uint64(shift))
    return a + np.uint64(off & 0xFFFFFFFFFFFFFFFF) if off >= 0 else a - np.uint64(-off)
  def run(F, D, i):
    ix = F.idx()
    base = addresses(F, ix)
    for c in range(size):
      addr = base + np.uint64(c * nb)
      if store: D.mem.store(addr, F.read(val_reg + c, half)[ix], nb, f"{name} at pc {d.pc}")
      else:
        out = np.zeros(F.n, np.uint32)
        out[ix] = D.mem.load(addr, nb, f"{name} at pc {d.pc}")
        if t in (S16, S8) and not half: out = from_value(to_value(out, t), S32)
        F.write(val_reg + c, out, half)
  return run


def _ibo(F, D, f, ix, name="", pc=0):
  """(base addresses, element counts) of the IBO slot per selected fiber. A slot past SP_CS_CONFIG.NIBO (the IBOs
  the dispatch declared) or never loaded faults, naming it."""
  ssbo = f["SSBO"]
  slot = np.full(len(ix), ssbo.fields.get("IMMED", 0)) if f.get("SSBO_IM", 1) else F.R[_gpr(ssbo)][ix]
  if len(slot) and int(slot.max()) >= min(D.nibo, len(D.ibos)):
    raise GPUFault(f"ir3: {name} at pc {pc}: IBO slot {int(slot.max())} is past SP_CS_CONFIG.NIBO ({D.nibo}) or the "
                   f"{len(D.ibos)} descriptor(s) CP_LOAD_STATE6 loaded", kind="illegal instruction")
  desc = D.ibos[slot]
  base = (desc[:, 4].astype(np.uint64) & np.uint64(0xFFFFFFE0)) | (desc[:, 5].astype(np.uint64) << np.uint64(32))
  count = (desc[:, 1] & 0x7FFF).astype(np.int64) | ((desc[:, 1] >> 15) & 0x7FFF).astype(np.int64) << 15
  return base, count


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
  def run(F, D, i):
    ix = F.idx()
    base, count = _ibo(F, D, f, ix, name, d.pc)
    elem = F.R[coord][ix].astype(np.int64)
    for c in range(comps):
      e = (elem * comps if typed else elem) + c
      ok = _in_bounds(e, count)
      addr = base + (np.where(ok, e, 0) * nb).astype(np.uint64)
      if store: D.mem.store(addr[ok], F.read(val_reg + c, half)[ix][ok], nb, f"{name} at pc {d.pc}")
      else:
        out = np.zeros(F.n, np.uint32)
        got = np.zeros(len(ix), np.uint32)
        got[ok] = D.mem.load(addr[ok], nb, f"{name} at pc {d.pc}")
        out[ix] = got
        F.write(val_reg + c, out, half)
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
    ix = F.idx()
    if private and F.private is None and D.private_bytes: F.private = np.zeros((F.n, D.private_bytes), np.uint8)
    rows = ix if private else F.group_of[ix]
    base = (F.R[addr_reg][ix].astype(np.int64) if addr_reg is not None else np.zeros(len(ix), np.int64)) + off
    for c in range(size):
      mem, o = _local_index(F, D, name, base + c * nb, nb, d.pc, private)
      if store:
        v = F.read(val_reg + c, half)[ix]
        for k in range(nb): mem[rows, o + k] = ((v >> (8 * k)) & 0xFF).astype(np.uint8)
      else:
        v = np.zeros(len(ix), np.uint32)
        for k in range(nb): v |= mem[rows, o + k].astype(np.uint32) << (8 * k)
        out = np.zeros(F.n, np.uint32)
        out[ix] = v
        F.write(val_reg + c, out, half)
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
    self.mem = Memory(model)
    self.preamble_done = False
    self.executed = 0

  def _program(self, gpu_id, words):
    key = (gpu_id, words.tobytes(), self.constlen, self.footprint, self.demotion)
    prog = self.cache.get(key)
    if prog is not None: return prog
    isa = isa_for(gpu_id)
    prog = []
    decoded: dict = {}                           # word -> (decoding, text): a program repeats its words
    from ...compiler.isa.ir3.isa import DecodeError
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

  def run(self) -> None:
    gx, gy, gz = self.groups
    lx, ly, lz = self.local_size
    per = lx * ly * lz
    total = gx * gy * gz
    if not total or not per: return
    if self.hang_timeout_s is not None: self.deadline = time.monotonic() + self.hang_timeout_s
    step = max(1, BATCH // per)
    lid = np.arange(per)
    lxyz = (lid % lx, (lid // lx) % ly, lid // (lx * ly))
    for first in range(0, total, step):
      # checked per batch too: a short program over many work-groups never reaches the in-batch check's 1024 steps
      self._check_hang(first * per)
      g = np.arange(first, min(first + step, total))
      n = len(g) * per
      F = Fibers(n, len(g), np.repeat(np.arange(len(g)), per), np.tile(lid, len(g)), self.wave, self.shared_bytes)
      gid = np.repeat(g, per)
      wg = (gid % gx, (gid // gx) % gy, gid // (gx * gy))
      if self.localid_reg < 0xFC:
        for c in range(3): F.R[self.localid_reg + c] = np.tile(lxyz[c], len(g))
      if self.wgid_reg < 0xFC:
        for c in range(3): F.R[self.wgid_reg + c] = wg[c]
      if self.linear_id_reg < 0xFC: F.R[self.linear_id_reg] = F.lid      # HLSQ_CS_CNTL_1.LINEARLOCALIDREGID
      self._run_batch(F)

  def branch(self, F, taken, target):
    """Selected fibers go to target where taken, else to the next instruction."""
    if F.sel is None:
      if taken.all(): F.pc[:] = target
      elif not taken.any(): F.pc += 1
      else: F.pc = np.where(taken, target, F.pc + 1)
    else:
      F.pc[F.sel] = np.where(taken[F.sel], target, F.pc[F.sel] + 1)

  def _run_batch(self, F) -> None:
    prog, n_prog = self.prog, len(self.prog)
    steps = 0
    sync = SyncState(self.sync_mode) if self.sync_mode != "off" else None
    while True:
      alive = F.alive
      if not alive.any(): return
      pcs = F.pc[alive]
      pc = int(pcs.min())
      if pc >= n_prog or pc < 0:
        raise GPUFault(f"ir3: the program counter left the program ({pc} of {n_prog} instructions) without an end",
                       kind="illegal instruction")
      if int(pcs.max()) == pc and alive.all(): F.sel = None
      else: F.sel = alive & (F.pc == pc)
      ins = prog[pc]
      cnt = F.n if F.sel is None else int(F.sel.sum())
      poisoned = sync.check(ins.sync, pc, ins.text, prog) if sync is not None else []
      poisoned = [r if r < 256 else (r - 256) >> 1 for r in poisoned]      # the full register holding a half
      saved = [(r, F.R[r].copy()) for r in poisoned]
      for r in poisoned: F.R[r] = POISON if F.sel is None else np.where(F.sel, POISON, F.R[r])
      if ins.kind == "flow":
        ins.run(F, self)
        self.executed += cnt
      else:
        for i in range(ins.rpt + 1): ins.run(F, self, i)
        self.executed += cnt * (ins.rpt + 1)
        if F.sel is None: F.pc += 1
        else: F.pc[F.sel] += 1
      written = {w[0] if w[0] < 256 else (w[0] - 256) >> 1 for w in ins.sync.writes}
      for r, row in saved:          # the late result still lands: only this reader saw the poison
        if r not in written: F.R[r] = row
      if sync is not None: sync.update(ins.sync, pc)
      steps += 1
      if not steps & 1023: self._check_hang(None, int(F.pc[F.alive].min()))

  def _check_hang(self, fiber: int | None, pc: int | None = None) -> None:
    if self.deadline is None or time.monotonic() <= self.deadline: return
    where = f"at pc {pc}" if pc is not None else f"at fiber {fiber} of the grid"
    raise GPUFault(f"ir3: the dispatch still runs {where} after the hang timeout ({self.executed} fiber-instructions)",
                   kind="hang")
