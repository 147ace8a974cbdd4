"""Instruction selection for ir3 (Adreno a6xx): the LINEAR form (compiler/lower) -> Ins (legalize.py), registers
allocated.

Registers (a6xx merged register file, full 32-bit registers r0.x .. r47.w; regid = 4 * n + component; half register
hr(2R) is the low half of full register R):
  r0.x..r0.z  the local invocation id, written there by the hardware (HLSQ_CS_CNTL_0.LOCALIDREGID = r0.x)
  r0.w        0 (a zero operand for selects and compares; hr0.z, its low half, is a half 0)
  r1.x ...    REG placeholders indexed by constants (one register per element, fixed for the whole kernel), then the
              values (compiler/lower/regalloc's loop-aware live ranges, a linear scan; a float16 value takes a full
              register and lives in its low half; a 64-bit integer a pair), then the temporaries of the
              multi-instruction sequences. Past the register file the longest-lived value is spilled to private memory
              (ldp/stp), reloaded at each use
  r48.x..z    the work-group id (HLSQ_CS_CNTL_0.WGIDCONSTID = r48.x, as Mesa's computerator programs it)
Kernel arguments: buffers are IBOs (ldib/stib, the IBO slot = the buffer's rank among the buffer arguments, as
drivers/qcom binds @buf), scalars are constants c0.x, c0.y, ... (rank among the scalar arguments).

Operations (a bool is 0 or 1 in a full register; 8/16-bit integers are kept sign- or zero-extended and re-extended
after an operation that can leave their range; 64-bit integers: wide.py):
  add/sub/mul: add.u sub.u / add.f mul.f (f16: the same on half registers); a 32-bit integer multiply is Mesa's
    ir3_nir_imul.py sequence mull.u t0, a, b; madsh.m16 t1, a, b, t0; madsh.m16 d, b, a, t1
  compares cmps.{f,s,u}.{lt,eq,ne} (1 or 0); WHERE sel.b32 (src2 != 0 ? src1 : src3); shifts shl.b shr.b ashr.b
  IDIV/IMOD: no hardware divide: a 32-step restoring division loop on the magnitudes, signs fixed after (C's
    truncation), a zero divisor gives 0 (the C backend's value)
  FDIV a * rcp(b); SQRT/EXP2/LOG2/SIN/RECIP the cat4 (SFU) sqrt exp2 log2 sin rcp (f16: in float32 between
    conversions); TRUNC trunc.f
  casts cov.{s32,u32}{f32,f16} / cov.{f32,f16}{s32,u32} (float -> integer truncates, saturating), cov.f16f32 and
    cov.f32f16 (rounds to nearest even), to bool cmps.*.ne 0
Memory: GLOBAL ldib.b/stib.b.untyped.1d.{u8,u16,f16,u32}.{1,2}.imm on the element index (8/16-bit elements through
the low half register); a gated load loads element 0 where its gate is off and selects 0 after. LOCAL ldl.u32/stl.u32
on byte offsets into the work-group's shared memory (the LOCAL placeholders one after another, 4 or 8 bytes an
element); BARRIER is bar. RANGE/END a counted loop tested at the top, IF/ENDIF a forward branch on p0.x."""
from __future__ import annotations

import heapq
import struct
from itertools import chain
from operator import attrgetter

from ...ir import AddrSpace, CompileError, Ops, PtrDType, UOp, dtypes
from ...ir.ops import GroupOp
from ...ir.uop import _short
from ...lower.regalloc import live_ranges, produces_value
from .legalize import _RNAME, P0, Ins, rname
from .wide import WideMixin, is_wide

LID, ZERO, WGID = 0, 3, 48 * 4      # r0.x (local id), r0.w (zero), r48.x (work-group id)
MAX_FULL = 48                       # r0..r47: the full registers a6xx compute may use (drivers/qcom/program.py)
# temporaries: 0-11 the sequences', 12-14 reloads of spilled sources, 15 a spilled result, 16-31 the 64-bit
# sequences' (wide.py); those a kernel does not use are not in its footprint
NTEMP = 32
SFU = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.RECIP: "rcp"}   # cat4
PVT_MAX = 4096                      # private bytes the ldp/stp immediate offset reaches (13 bits, signed)


# Instruction shapes (compiler/isa/ir3/template.split's form: literal text and register/immediate slots) of the lines
# the helpers below emit, made once per opcode: the encoder takes a line's shape and values from here instead of
# parsing its text again (emit.py). op2's: "name rD, rA, rB" by name, "name rD, rA, IMM" by (name, IMM text)
_SHAPE_RRR: dict = {}
_SHAPE_RRI: dict = {}


def hname(h: int) -> str:
  """A half register: with merged registers half regid h is half (h & 1) of full register h >> 1 (hr(2R) is the low
  half of full register R; Mesa's ir3 MERGEDREGS, a6xx)."""
  return f"hr{h >> 2}.{'xyzw'[h & 3]}"


_MOV_IMM = ("mov.u32u32 ", "r", ", ", "imm", "")
_MOV = ("mov.u32u32 ", "r", ", ", "r", "")
_SEL = ("sel.b32 ", "r", ", ", "r", ", ", "r", ", ", "r", "")


def _cls(dt) -> str:
  """How a value is held: b (bool, 0/1), f (float32), h (float16: in the low half register hr(2R) of its full
  register R, merged registers), s / u (integers of 8/16/32 bits sign- or zero-extended to 32; 64 bits in pairs)."""
  got = _CLS.get(dt)
  if got is not None: return got
  if dt.is_bool: got = "b"
  elif dt.is_float:
    if dt.itemsize == 4: got = "f"
    elif dt.itemsize == 2: got = "h"
  elif dt.itemsize in (1, 2, 4, 8): got = "u" if dt.kind == "uint" else "s"
  if got is not None:
    _CLS[dt] = got
    return got
  raise CompileError(f"ir3 backend: {dt} values are not supported (bool, 8/16/32/64-bit integers, float16/32)")


def _narrow(dt) -> int:
  """The bits of an 8/16-bit integer type, else 0."""
  return 8 * dt.itemsize if dt.is_int and not dt.is_bool and dt.itemsize < 4 else 0


def _half_float(dt) -> bool: return dt.is_float and dt.itemsize == 2


# per dtype (DTypes are interned): _cls of the supported ones (filled on first use), whether 64-bit
_CLS: dict = {}
_WIDE: dict = {}


def _is_wide(dt) -> bool:
  """is_wide of a value's dtype (False for a pointer)."""
  got = _WIDE.get(dt)
  if got is None: got = _WIDE[dt] = not isinstance(dt, PtrDType) and is_wide(dt)
  return got


def straight_ranges(lin: UOp, needs: set) -> dict:
  """compiler/lower/regalloc.live_ranges for a kernel without loops (no END): a value lives from its element to its
  last use, (first, last) positions (as lists) in the order of the elements. Without loops no range is stretched,
  so the loop table and position map live_ranges builds are not needed."""
  out: dict = {}
  get = out.get
  for i, u in enumerate(lin.src):
    if u in needs: out[u] = [i, i]
    for s in u.src:
      r = get(s)
      if r is not None: r[1] = i
  return out


def _scan_fits(ranges: dict, needs: set, wide: set, nregs: int, first: int, npos: int) -> dict | None:
  """The linear scan of Selector._scan_spilling when no value has to be spilled, in one pass: the free registers are
  the set bits of an int (the lowest one, or the lowest even-aligned pair of set bits, is taken) and the registers a
  value frees at its last use are ORed into that position's slot of a list, returned to the free set once the scan
  has passed it. The ranges are in the order of their starts (each value's range begins at its own element); None
  when a value finds no register (or the ranges are out of that order): the spilling scan decides then."""
  free = (1 << nregs) - 1
  even = int("01" * ((nregs + 1) // 2), 2) & free        # bit k for each even k: a pair's first register
  dying = [0] * (npos + 1)                              # position -> the registers whose values die there
  regs: dict = {}
  p = 0                                                 # positions before p have returned their registers
  for u, r in ranges.items():
    if u not in needs: continue
    start = r[0]
    if start < p: return None
    while p < start:
      d = dying[p]
      if d: free |= d
      p += 1
    if wide and u in wide:
      m = free & (free >> 1) & even
      low = m & -m
      if not low: return None
      bits = low | (low << 1)
    else:
      low = bits = free & -free
      if not low: return None
    free ^= bits
    dying[r[1]] |= bits
    regs[u] = first + low.bit_length() - 1
  return regs


_PV: dict = {}


def _produces_value(u: UOp) -> bool:
  """compiler/lower/regalloc.produces_value, remembered per (op, dtype): it depends on nothing else."""
  key = (u.op, u.dtype)
  got = _PV.get(key)
  if got is None: got = _PV[key] = produces_value(u)
  return got


_PLAN2: dict = {}
_CMP = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "ne"}


def _plan2(op, dt, s0, s1):
  """(instruction, re-extend the result) for a binary ALU element on these types that Selector.alu_op emits as one
  op2 instruction on its two source registers, else False (the element takes alu_op's general path)."""
  try: c = _cls(s0)
  except CompileError: return False
  if _is_wide(dt) or _is_wide(s0) or c == "h": return False
  if op is Ops.ADD: name = "add.f" if c == "f" else "add.u"
  elif op in _BITOP: name = _BITOP[op]
  elif op in _CMP: name = f"cmps.{'f' if c == 'f' else 'u' if c in 'ub' else 's'}.{_CMP[op]}"
  elif op is Ops.SUB and c != "f": name = "sub.u"
  elif op is Ops.MUL and c in "fb": name = "mul.f" if c == "f" else "and.b"
  elif op is Ops.SHL: name = "shl.b"
  elif op is Ops.SHR: name = "ashr.b" if c == "s" else "shr.b"
  else: return False
  shape = _SHAPE_RRR.get(name)
  if shape is None: shape = _SHAPE_RRR[name] = (name + " ", "r", ", ", "r", ", ", "r", "")
  return name, op not in _KEEPS_RANGE and bool(_narrow(dt)), shape


_WORD_INTS = frozenset({dtypes.int32, dtypes.uint32})   # literals whose bits are int(value) & 0xFFFFFFFF (_bits)
_NO_CODE = frozenset({Ops.PARAM, Ops.BUFFER, Ops.SPECIAL})     # elements that emit nothing themselves
_BITOP = {Ops.AND: "and.b", Ops.OR: "or.b", Ops.XOR: "xor.b"}
# a select, bit operation or right shift of values in range stays in range (sign/zero extension is kept)
_KEEPS_RANGE = GroupOp.Comparison | {Ops.WHERE, Ops.AND, Ops.OR, Ops.XOR, Ops.SHR}


# the memory type of an element for ldib/stib (Mesa's #type: the value is carried in a half register below 32 bits)
_MEMTYPE = {1: "u8", 2: "u16", 4: "u32"}


def _bits(v, dt) -> int:
  if _half_float(dt):
    try: return struct.unpack("<H", struct.pack("<e", float(v)))[0]
    except OverflowError: return 0x7C00 if v > 0 else 0xFC00
  if _narrow(dt):
    w = _narrow(dt)
    v = int(v) & ((1 << w) - 1)
    if dt.kind != "uint" and v >> (w - 1): v -= 1 << w
    return v & 0xFFFFFFFF
  if dt.is_float:
    try: return struct.unpack("<I", struct.pack("<f", float(v)))[0]
    except OverflowError: return 0x7F800000 if v > 0 else 0xFF800000
  return int(v) & 0xFFFFFFFF


def _literal(u: UOp):
  """The value of a typed literal element (CAST(CONST) or a typed CONST), else None."""
  if u.op is Ops.CAST and u.src and u.src[0].op is Ops.CONST: return u.src[0].arg
  if u.op is Ops.CONST and not u.dtype.is_weak: return u.arg
  return None


def _esize(dt) -> int: return 8 if is_wide(dt) else 4      # bytes an element takes in LOCAL / private memory


class Selector(WideMixin):
  zero_reg = ZERO
  def __init__(self, lin: UOp):
    self.lin, self.out = lin, []
    self.labels = 0
    self.ibo: dict[UOp, int] = {}           # PARAM -> IBO slot
    self.const: dict[UOp, int] = {}         # DEFINE_VAR -> constant component
    self.args: list = []                    # ("buffer", slot, ibo, dtype) / ("int", slot, const, dtype) by slot
    self.local_base: dict[UOp, int] = {}    # LOCAL BUFFER -> byte offset
    self.reg_base: dict[UOp, int] = {}      # REG BUFFER -> first regid
    self.localmem = 0
    self.depth = self.max_depth = 0
    # one walk over the elements: the few kinds looked at here, the values that need a register (_needs; an
    # INDEX's need depends on the buffers' placement, decided below), and straight_ranges of those and the INDEXes
    # (the live ranges when the kernel has no loop)
    params, buffers, self.indexes, self.ends, self.bounds = [], [], [], [], set()
    self.needs: set = set()
    self.straight: dict = {}
    add, alu_ops, pv, CONST = self.needs.add, GroupOp.ALU, _PV.get, Ops.CONST
    ranges = self.straight
    rget = ranges.get
    for i, u in enumerate(lin.src):
      op = u.op
      if op in alu_ops:
        v = pv((op, u.dtype))
        if v is None: v = _produces_value(u)
        if v:
          add(u)
          ranges[u] = [i, i]
      elif op is CONST and u.dtype.is_weak: continue      # no register, no sources
      elif op is Ops.INDEX:
        self.indexes.append(u)
        ranges[u] = [i, i]
      elif op is Ops.END: self.ends.append((i, u))
      elif op is Ops.PARAM: params.append(u)
      elif op is Ops.BUFFER: buffers.append(u)
      elif op is Ops.SPECIAL: pass
      else:
        v = pv((op, u.dtype))
        if v is None: v = _produces_value(u)
        if v:
          add(u)
          ranges[u] = [i, i]
        if op is Ops.DEFINE_VAR: params.append(u)
        elif op is Ops.RANGE: self.bounds.add(u.src[0])
      for x in u.src:
        r = rget(x)
        if r is not None: r[1] = i
    params.sort(key=lambda u: u.arg.slot)
    nb = nc = 0
    used = {u.arg.slot for u in params}
    for slot in range(max(used, default=-1) + 1):    # a slot the kernel does not read still takes its argument
      if slot not in used: self.args.append(("unused", slot, None, None))
    for u in params:
      if u.op is Ops.PARAM:
        _cls(u.arg.dtype)
        self.ibo[u] = nb
        self.args.insert(u.arg.slot, ("buffer", u.arg.slot, nb, u.arg.dtype))
        nb += 1
      else:
        self.const[u] = nc
        self.args.insert(u.arg.slot, ("int", u.arg.slot, nc, u.arg.dtype))
        nc += 1
    self.pvt_base: dict[UOp, int] = {}      # REG BUFFER indexed at run time -> byte offset in private memory
    self.pvtmem = 0
    dynamic = {u.src[0] for u in self.indexes if u.src[0].op is Ops.BUFFER and
               u.src[0].arg.addrspace is AddrSpace.REG and _literal(u.src[1]) is None}
    reg = 4
    for u in buffers:
      _cls(u.arg.dtype)
      size = int(u.arg.size)
      es = _esize(u.arg.dtype)
      if u.arg.addrspace is AddrSpace.LOCAL:
        self.local_base[u] = self.localmem
        self.localmem += (size * es + 15) & ~15
      elif u in dynamic or size > 16:       # private memory (ldp/stp), 4 (8) bytes an element
        self.pvt_base[u] = self.pvtmem
        self.pvtmem += size * es
      else:
        self.reg_base[u] = reg
        reg += size * es // 4
    self.spilled: dict[UOp, int] = {}       # value -> its private-memory slot (byte offset)
    self.reloads: dict[UOp, int] = {}       # for the element being emitted: spilled source -> the register reloaded
    self.regs = self._allocate(reg)
    if self.pvtmem > PVT_MAX:
      raise CompileError(f"ir3 backend: {self.pvtmem} bytes of private memory (arrays and spills) are more than the "
                         f"{PVT_MAX} the ldp/stp offset reaches")

  # ---- registers
  def _needs(self, u: UOp) -> bool:
    op = u.op
    if op in _NO_CODE: return False
    if op is Ops.CONST and u.dtype.is_weak: return False
    if op is Ops.INDEX:
      if u.src[0].op is not Ops.BUFFER: return False     # GLOBAL: the index itself
      if u.src[0].arg.addrspace is AddrSpace.REG: return u.src[0] in self.pvt_base and _produces_value(u)
    return _produces_value(u)

  def _allocate(self, first: int) -> dict:
    """Linear scan over live ranges (compiler/lower/regalloc.live_ranges), with two stretches that backend needs:
    a GLOBAL INDEX has no register of its own (its loads and stores read the index), so its index and gate live as
    long as it does; a loop's trip count is read at every iteration's test, so it lives to the loop's END."""
    ranges, wide = self._ranges()
    needs = self.needs
    nregs = MAX_FULL * 4 - first - NTEMP
    regs = _scan_fits(ranges, needs, wide, nregs, first, len(self.lin.src))
    if regs is None: regs = self._scan_spilling(ranges, needs, wide, nregs, first)
    top = max([first - 1, *regs.values(), *(regs[u] + 1 for u in wide if u in regs)])
    self.temps = list(range(top + 1, top + 1 + NTEMP))
    return regs

  def _ranges(self) -> tuple[dict, set]:
    """(the live ranges with _allocate's stretches, the values that take a register pair); completes self.needs
    with the INDEXes that need a register."""
    lin = self.lin
    indexes = self.indexes
    needs = self.needs
    needs.update(u for u in indexes if self._needs(u))
    # (a copy of the walk's ranges: the stretches below replace entries)
    ranges = dict(self.straight) if not self.ends else live_ranges(lin, needs.union(indexes).__contains__)
    for u in reversed(indexes):
      r = ranges.get(u)
      if r is not None:
        for s in u.src[1:]:
          rs = ranges.get(s)
          if rs is not None and rs[1] < r[1]: ranges[s] = (rs[0], r[1])
    for i, u in self.ends:
      b = u.src[0].src[0]
      rb = ranges.get(b)
      if rb is not None and rb[1] < i: ranges[b] = (rb[0], i)
    wide_dts = {dt for dt in set(map(attrgetter("dtype"), needs)) if _is_wide(dt)}
    wide = {u for u in needs if u.dtype in wide_dts} if wide_dts else set()     # register pairs
    return ranges, wide

  def _scan_spilling(self, ranges: dict, needs: set, wide: set, nregs: int, first: int) -> dict:
    """The linear scan that spills when the registers run out (the values that live longest go to private memory):
    _scan_fits' allocation while every value gets a register."""
    bounds = self.bounds

    def spillable(u):     # whole values kept in private memory, reloaded at each use (not loop counters or bounds)
      return u.op not in (Ops.RANGE, Ops.INDEX) and u not in bounds and not is_wide(u.dtype)

    free = [True] * nregs
    free_heap = list(range(nregs))              # free registers, lowest first (entries may be stale: free[] decides)
    active: list = []                           # heap of (last use, order, value)
    gone: set = set()                           # values spilled out of `active` (lazily dropped from the heap)
    regs: dict[UOp, int] = {}
    order = sorted([(r[0], r[1], n, u) for n, (u, r) in enumerate(ranges.items()) if u in needs])
    heappop, heappush = heapq.heappop, heapq.heappush
    for start, last, n, u in order:
      while active and active[0][0] < start:
        item = heappop(active)[2]
        if gone and item in gone: continue
        k = regs[item] - first
        free[k] = True
        heappush(free_heap, k)
        if wide and item in wide:
          free[k + 1] = True
          heappush(free_heap, k + 1)
      w = 2 if wide and u in wide else 1
      k = None
      if w == 1:
        while free_heap and not free[free_heap[0]]: heappop(free_heap)
        if free_heap: k = heappop(free_heap)
      else: k = next((k for k in range(0, nregs - 1, 2) if free[k] and free[k + 1]), None)
      if k is None:
        # spill the value that lives longest (this one or an active one) to private memory: it never holds a
        # register; each use reloads it (ldp) and its definition stores it (stp). A pair needs two neighbouring
        # registers: it is not made room for by spilling one value
        cands = [(a[0], a[2]) for a in active if a[2] not in gone and spillable(a[2])] + \
                ([(last, u)] if spillable(u) else [])
        victim = max(cands, key=lambda a: a[0]) if cands and w == 1 else None
        if victim is None:
          raise CompileError(f"ir3 backend: more than {nregs} registers live at element {start}: {_short(u)}", u)
        self.spilled[victim[1]] = self.pvtmem
        self.pvtmem += 4
        if victim[1] is u: continue
        gone.add(victim[1])
        k = regs.pop(victim[1]) - first
      free[k] = False
      if w == 2: free[k + 1] = False
      regs[u] = first + k
      heappush(active, (last, n, u))
    return regs

  def r(self, u: UOp) -> int:
    got = self.regs.get(u)
    if got is not None and u not in self.spilled: return got
    if u in self.spilled:
      try: return self.reloads[u]
      except KeyError: raise CompileError(f"ir3 backend: spilled value used without a reload: {_short(u)}", u) from None
    if u.op is Ops.SPECIAL:
      n = int(u.arg[4:])
      return (WGID if u.arg.startswith("g") else LID) + n
    if u.op is Ops.INDEX and u.src[0].op is Ops.PARAM: return self.r(u.src[1])
    try: return self.regs[u]
    except KeyError: raise CompileError(f"ir3 backend: no register for {_short(u)}", u) from None

  # ---- emission helpers
  def alu(self, text: str, dst, *src, cycles: int = 1, half: bool = False):
    self.out.append(Ins("alu", text, dst if dst.__class__ is tuple else (dst,), src, cycles=cycles, half=half))

  def op2(self, name: str, d: int, a: int, b):
    """A two-source ALU instruction; b is a register id, or an immediate's text (a str)."""
    R = _RNAME
    if b.__class__ is str:
      shape = _SHAPE_RRI.get((name, b))
      if shape is None: shape = _SHAPE_RRI[name, b] = (name + " ", "r", ", ", "r", ", " + b)
      self.out.append(Ins("alu", f"{name} {R[d]}, {R[a]}, {b}", (d,), (a,),
                          enc=None if P0 in (d, a) else (shape, (d, a))))
    else:
      shape = _SHAPE_RRR.get(name)
      if shape is None: shape = _SHAPE_RRR[name] = (name + " ", "r", ", ", "r", ", ", "r", "")
      self.out.append(Ins("alu", f"{name} {R[d]}, {R[a]}, {R[b]}", (d,), (a, b),
                          enc=None if P0 in (d, a, b) else (shape, (d, a, b))))

  def mov_imm(self, d: int, bits: int):
    bits &= 0xFFFFFFFF
    self.out.append(Ins("alu", f"mov.u32u32 {_RNAME[d]}, {bits}", (d,), (), enc=None if d == P0 else (_MOV_IMM, (d, bits))))
  def alu_text(self, name: str, d: int, a: int, neg: bool = False):
    self.alu(f"{name} {rname(d)}, {'(neg)' if neg else ''}{rname(a)}", d, a)
  def alu_text_p0(self, name: str, a: int): self.alu(f"{name} p0.x, {rname(a)}, 0", P0, a)
  def mov(self, d: int, s: int):
    self.out.append(Ins("alu", f"mov.u32u32 {_RNAME[d]}, {_RNAME[s]}", (d,), (s,),
                        enc=None if P0 in (d, s) else (_MOV, (d, s))))
  def sel(self, d: int, a: int, cond: int, b: int):
    R = _RNAME
    self.out.append(Ins("alu", f"sel.b32 {R[d]}, {R[a]}, {R[cond]}, {R[b]}", (d,), (a, cond, b),
                        enc=None if P0 in (d, a, cond, b) else (_SEL, (d, a, cond, b))))
  def sfu(self, name: str, d: int, a: int): self.out.append(Ins("sfu", f"{name} {rname(d)}, {rname(a)}", (d,), (a,)))
  def label(self) -> str:
    self.labels += 1
    return f"L{self.labels}"
  def place(self, name: str): self.out.append(Ins("label", name))
  def br(self, target: str, negate: bool = False):
    self.out.append(Ins("br", f"br {'!' if negate else ''}p0.x, #{target}", (), (P0,), target=target))
  def jump(self, target: str): self.out.append(Ins("jump", f"jump #{target}", target=target))

  def fix(self, d: int, dt):
    """Bring an 8/16-bit integer result back into its representation: re-extended from its low bits (C's
    wraparound)."""
    w = _narrow(dt)
    if w:
      if dt.kind == "uint": self.op2("and.b", d, d, str((1 << w) - 1) if w == 8 else self._imm((1 << w) - 1))
      else:
        self.op2("shl.b", d, d, str(32 - w))
        self.op2("ashr.b", d, d, str(32 - w))

  def _imm(self, v: int) -> int:
    """A register holding v (for an immediate too wide for a cat2 source)."""
    t = self.temps[10]
    self.mov_imm(t, v)
    return t

  def imul(self, d: int, a: int, b: int):
    t0, t1 = self.temps[0], self.temps[1]
    self.op2("mull.u", t0, a, b)
    self.alu(f"madsh.m16 {rname(t1)}, {rname(a)}, {rname(b)}, {rname(t0)}", t1, a, b, t0)
    self.alu(f"madsh.m16 {rname(d)}, {rname(b)}, {rname(a)}, {rname(t1)}", d, a, b, t1)

  def divmod(self, d: int, a: int, b: int, signed: bool, want_mod: bool):
    """d = a / b or a % b, truncating (C), 0 when b is 0: restoring division of |a| by |b|, 32 steps."""
    sa, sb, ua, ub, q, rem, t, t2, k = self.temps[2:11]
    if signed:
      self.op2("ashr.b", sa, a, "31"); self.op2("ashr.b", sb, b, "31")
      self.op2("xor.b", ua, a, sa); self.op2("xor.b", ub, b, sb)
      self.op2("sub.u", ua, ua, sa); self.op2("sub.u", ub, ub, sb)
    else: self.mov(ua, a); self.mov(ub, b)
    self.mov(q, ua); self.mov_imm(rem, 0); self.mov_imm(k, 32)
    self.max_depth = max(self.max_depth, self.depth + 1)     # the loop is a branch level of its own
    top = self.label()
    self.place(top)
    self.op2("shl.b", rem, rem, "1"); self.op2("shr.b", t, q, "31")
    self.op2("or.b", rem, rem, t); self.op2("shl.b", q, q, "1")
    self.op2("cmps.u.ge", t, rem, ub); self.op2("sub.u", t2, rem, ub)
    self.sel(rem, t2, t, rem); self.op2("or.b", q, q, t)
    self.op2("sub.u", k, k, "1")
    self.alu(f"cmps.s.gt p0.x, {rname(k)}, 0", P0, k)
    self.br(top)
    res = rem if want_mod else q
    if signed:
      sign = sa if want_mod else t
      if not want_mod: self.op2("xor.b", t, sa, sb)
      self.op2("xor.b", res, res, sign); self.op2("sub.u", res, res, sign)
    self.op2("cmps.u.eq", t2, b, "0")
    self.sel(d, ZERO, t2, res)

  # ---- the elements
  def run(self) -> list[Ins]:
    self.mov_imm(ZERO, 0)
    ends: dict[UOp, tuple[str, str]] = {}
    ifs: dict[UOp, str] = {}
    spilled, emit, alu_op, alu_ops, get = self.spilled, self.emit, self.alu_op, GroupOp.ALU, self.regs.get
    out, R = self.out, _RNAME
    CAST, CONST = Ops.CAST, Ops.CONST
    for u in self.lin.src:
      op = u.op
      if op in _NO_CODE or (op is CONST and u.dtype.is_weak): continue
      if not spilled:                   # the common case: every value in its register
        if op in alu_ops:
          src = u.src
          if len(src) == 2:             # alu_op's one-instruction case, inline: "name rD, rA, rB"
            plan = _PLAN2.get((op, u.dtype, src[0].dtype, src[1].dtype))
            d, a, b = get(u), get(src[0]), get(src[1])
            if plan and d is not None and a is not None and b is not None:
              # allocated registers are below the temporaries, never p0.x: the line always has its shape (op2's
              # check); the Ins fields positionally (kind, text, dst, src, target, flags, cycles, half, enc)
              out.append(Ins("alu", f"{plan[0]} {R[d]}, {R[a]}, {R[b]}", (d,), (a, b), None, "", 1, False,
                             (plan[2], (d, a, b))))
              if plan[1]: self.fix(d, u.dtype)
              continue
          alu_op(u)
        elif op is CAST and u.dtype in _WORD_INTS and u.src[0].op is CONST:
          d = get(u)                    # a 32-bit integer literal (emit's general case: _bits), mov_imm inline
          if d is None: emit(u, ends, ifs)
          else:
            bits = int(u.src[0].arg) & 0xFFFFFFFF
            out.append(Ins("alu", f"mov.u32u32 {R[d]}, {bits}", (d,), (), None, "", 1, False, (_MOV_IMM, (d, bits))))
        else: emit(u, ends, ifs)
        continue
      self.reloads = {}
      reads = [s for s in u.src for s in ((s, *s.src[1:]) if s.op is Ops.INDEX and s.src[0].op is Ops.PARAM else (s,))]
      for k, s in enumerate(dict.fromkeys(x for x in reads if x in self.spilled)):
        t = self.reloads[s] = self.temps[12 + k]
        self.out.append(Ins("ld_sy", f"ldp.u32 {rname(t)}, p[{rname(ZERO)}+{self.spilled[s]}], 1", (t,), (ZERO,)))
      if u in self.spilled: self.reloads[u] = self.temps[15]
      self.emit(u, ends, ifs)
      if u in self.spilled:
        t = self.temps[15]
        self.out.append(Ins("st", f"stp.u32 p[{rname(ZERO)}+{self.spilled[u]}], {rname(t)}, 1", (), (ZERO, t)))
    self.out.append(Ins("end", "end"))
    return self._finish()

  def emit(self, u: UOp, ends: dict, ifs: dict):
    op = u.op
    if op in GroupOp.ALU: return self.alu_op(u)      # never a literal (CONST / CAST(CONST))
    lit = _literal(u)
    if lit is not None:
      if is_wide(u.dtype):
        v = int(lit) & (2**64 - 1)
        self.mov_imm(self.r(u), v & 0xFFFFFFFF); self.mov_imm(self.r(u) + 1, v >> 32)
      else: self.mov_imm(self.r(u), _bits(lit, u.dtype))
      return
    if op is Ops.DEFINE_VAR:
      if is_wide(u.dtype): raise CompileError(f"ir3 backend: a 64-bit scalar argument: {_short(u)}", u)
      c = self.const[u]
      self.alu(f"mov.u32u32 {rname(self.r(u))}, c{c >> 2}.{'xyzw'[c & 3]}", self.r(u))
    elif op is Ops.RANGE:
      top, exit_ = self.label(), self.label()
      ends[u] = (top, exit_)
      self.mov_imm(self.r(u), 0)
      self.place(top)
      self.alu(f"cmps.s.lt p0.x, {rname(self.r(u))}, {rname(self.r(u.src[0]))}", P0, self.r(u), self.r(u.src[0]))
      self.br(exit_, negate=True)
      self.depth += 1
      self.max_depth = max(self.max_depth, self.depth)
    elif op is Ops.END:
      rng = u.src[0]
      top, exit_ = ends[rng]
      self.op2("add.u", self.r(rng), self.r(rng), "1")
      self.jump(top)
      self.place(exit_)
      self.depth -= 1
    elif op is Ops.IF:
      end = self.label()
      ifs[u] = end
      self.alu(f"cmps.u.ne p0.x, {rname(self.r(u.src[0]))}, 0", P0, self.r(u.src[0]))
      self.br(end, negate=True)
      self.depth += 1
      self.max_depth = max(self.max_depth, self.depth)
    elif op is Ops.ENDIF:
      self.place(ifs[u.src[0]])
      self.depth -= 1
    elif op is Ops.BARRIER: self.out.append(Ins("bar", "bar"))
    elif op is Ops.INDEX: self.index(u)
    elif op is Ops.LOAD: self.load(u)
    elif op is Ops.STORE: self.store(u)
    elif op in (Ops.CAST, Ops.BITCAST): self.cast(u)
    else: self.alu_op(u)

  def _finish(self) -> list[Ins]:
    self.out.append(Ins("nop", "nop"))
    # the distinct register tuples first (a kernel repeats them), then their registers
    named = set(chain.from_iterable(set(map(attrgetter("dst"), self.out)) | set(map(attrgetter("src"), self.out))))
    self.full_regs = (max([r for r in named if r < WGID], default=0) >> 2) + 1   # the footprint: r0 .. the highest
    return self.out                                                              # register named

  def index(self, u: UOp):
    buf = u.src[0]
    if buf.op is Ops.PARAM or (buf.arg.addrspace is AddrSpace.REG and buf not in self.pvt_base): return
    d, i = self.r(u), self.r(u.src[1])
    self.op2("shl.b", d, i, "3" if is_wide(buf.arg.dtype) else "2")
    if buf in self.pvt_base: return          # the array's base is the ldp/stp offset
    base = self.local_base[buf]
    if base:
      if base < 512: self.op2("add.u", d, d, str(base))
      else:
        self.mov_imm(self.temps[0], base)
        self.op2("add.u", d, d, self.temps[0])

  def _reg_elem(self, idx: UOp) -> int:
    buf, k = idx.src[0], _literal(idx.src[1])
    if k is None or not 0 <= int(k) < int(buf.arg.size):
      raise CompileError(f"ir3 backend: a REG placeholder indexed by a non-constant (or out of range) index: "
                         f"{_short(idx)}", idx)
    return self.reg_base[buf] + int(k) * (2 if is_wide(buf.arg.dtype) else 1)

  def load(self, u: UOp):
    idx = u.src[0]
    buf = idx.src[0]
    d = self.r(u)
    gate = self.r(idx.src[2]) if len(idx.src) > 2 else None
    if buf.op is Ops.PARAM:
      _cls(u.dtype)
      i = self.r(idx.src[1])
      if gate is not None:
        self.sel(d, i, gate, ZERO)
        i = d
      size = u.dtype.itemsize
      if size == 8:       # two 32-bit elements at 2 * index
        self.op2("shl.b", d, i, "1")
        self.out.append(Ins("ld_sy", f"ldib.b.untyped.1d.u32.2.imm {rname(d)}, {rname(d)}, {self.ibo[buf]}",
                            (d, d + 1), (d,)))
      elif size == 4:
        self.out.append(Ins("ld_sy", f"ldib.b.untyped.1d.u32.1.imm {rname(d)}, {rname(i)}, {self.ibo[buf]}", (d,),
                            (i,)))
      else:     # into the low half of d, then widened (an f16 to its float32, an integer zero-extended, then fixed)
        t = "f16" if u.dtype.is_float else _MEMTYPE[size]
        self.out.append(Ins("ld_sy", f"ldib.b.untyped.1d.{t}.1.imm {hname(2 * d)}, {rname(i)}, {self.ibo[buf]}",
                            (d,), (i,), half=True))
        if t != "f16":    # an f16 stays in the half register
          self.alu(f"cov.{t}u32 {rname(d)}, {hname(2 * d)}", d, d, half=True)
          if u.dtype.kind == "int": self.fix(d, u.dtype)
    elif buf.arg.addrspace is AddrSpace.LOCAL:
      off, n = self.r(idx), self._n(u.dtype)
      self.out.append(Ins("ld_ss", f"ldl.u32 {rname(d)}, l[{rname(off)}], {n}", tuple(range(d, d + n)), (off,)))
    elif buf in self.pvt_base:
      off, n = self.r(idx), self._n(u.dtype)
      self.out.append(Ins("ld_sy", f"ldp.u32 {rname(d)}, p[{rname(off)}+{self.pvt_base[buf]}], {n}",
                          tuple(range(d, d + n)), (off,)))
    else:
      for h in range(self._n(u.dtype)): self.mov(d + h, self._reg_elem(idx) + h)
      return
    if gate is not None:
      for h in range(self._n(u.dtype)): self.sel(d + h, d + h, gate, ZERO)

  @staticmethod
  def _n(dt) -> int: return 2 if is_wide(dt) else 1

  def store(self, u: UOp):
    idx, val = u.src[0], u.src[1]
    buf = idx.src[0]
    v = self.r(val)
    if buf.op is Ops.PARAM:
      i = self.r(idx.src[1])
      size = val.dtype.itemsize
      if size == 8:
        t = self.temps[9]
        self.op2("shl.b", t, i, "1")
        self.out.append(Ins("st", f"stib.b.untyped.1d.u32.2.imm {rname(v)}, {rname(t)}, {self.ibo[buf]}", (),
                            (v, v + 1, t)))
      elif size == 4:
        self.out.append(Ins("st", f"stib.b.untyped.1d.u32.1.imm {rname(v)}, {rname(i)}, {self.ibo[buf]}", (), (v, i)))
      else:     # narrowed into a half register (the stored type's low bits)
        t = "f16" if val.dtype.is_float else _MEMTYPE[size]
        h = v
        if t != "f16":
          h = self.temps[9]
          self.alu(f"cov.u32u16 {hname(2 * h)}, {rname(v)}", h, v, half=True)
        self.out.append(Ins("st", f"stib.b.untyped.1d.{t}.1.imm {hname(2 * h)}, {rname(i)}, {self.ibo[buf]}", (),
                            (h, i), half=True))
    elif buf.arg.addrspace is AddrSpace.LOCAL:
      off, n = self.r(idx), self._n(val.dtype)
      self.out.append(Ins("st", f"stl.u32 l[{rname(off)}], {rname(v)}, {n}", (), (off, *range(v, v + n))))
    elif buf in self.pvt_base:
      off, n = self.r(idx), self._n(val.dtype)
      self.out.append(Ins("st", f"stp.u32 p[{rname(off)}+{self.pvt_base[buf]}], {rname(v)}, {n}", (),
                          (off, *range(v, v + n))))
    else:
      for h in range(self._n(val.dtype)): self.mov(self._reg_elem(idx) + h, v + h)

  def cast(self, u: UOp):
    s = u.src[0]
    d, a = self.r(u), self.r(s)
    sd, td = s.dtype, u.dtype
    fc, tc = _cls(sd), _cls(td)
    if is_wide(sd) or is_wide(td):
      if sd.is_float:                  # float -> 64-bit integer (f16 through float32)
        if fc == "h":
          self.alu(f"cov.f16f32 {rname(self.wt(7))}, {hname(2 * a)}", self.wt(7), a, half=True)
          a = self.wt(7)
        self.f32_to_64(d, a, td.kind == "int")
      elif td.is_float:                # 64-bit integer -> float32 (-> f16)
        self.u64_to_f32(d, a, sd.kind == "int")
        if tc == "h": self.alu(f"cov.f32f16 {hname(2 * d)}, {rname(d)}", d, d, half=True)
      elif is_wide(sd) and is_wide(td): self.mov(d, a); self.mov(d + 1, a + 1)
      elif is_wide(td):                # the low word, the high word the sign (or 0)
        self.mov(d, a)
        if sd.kind == "int" and not sd.is_bool: self.op2("ashr.b", d + 1, a, "31")
        else: self.mov_imm(d + 1, 0)
      elif tc == "b":
        t = self.wt(0)
        self.op2("or.b", t, a, a + 1)
        self.op2("cmps.u.ne", d, t, ZERO)
      else:
        self.mov(d, a)
        self.fix(d, td)
      return
    H = hname
    if u.op is Ops.BITCAST:
      if sd.itemsize != td.itemsize: raise CompileError(f"ir3 backend: a bitcast between sizes: {_short(u)}", u)
      if _half_float(sd):            # the half's bits, as an integer
        self.alu(f"cov.u16u32 {rname(d)}, {H(2 * a)}", d, a, half=True)
        self.fix(d, td)
      else: self.mov(d, a)           # an int16's low half is the f16's bits; 32-bit: the same bits
      if not _half_float(sd) and not _half_float(td): self.fix(d, td)
    elif tc == "b":
      if fc == "h": self.alu(f"cmps.f.ne {rname(d)}, {H(2 * a)}, {H(2 * ZERO)}", d, a, ZERO, half=True)
      else: self.op2(f"cmps.{'f' if fc == 'f' else 'u'}.ne", d, a, ZERO)
    elif tc == "h":                  # to half precision: one rounding (cov rounds to nearest even)
      if fc == "h": self.mov(d, a)
      else: self.alu(f"cov.{'f32' if fc == 'f' else 's32' if fc == 's' else 'u32'}f16 {H(2 * d)}, {rname(a)}", d, a,
                     half=True)
    elif tc == "f":
      if fc == "h": self.alu(f"cov.f16f32 {rname(d)}, {H(2 * a)}", d, a, half=True)
      elif fc == "f": self.mov(d, a)
      else: self.alu(f"cov.{'s32' if fc == 's' else 'u32'}f32 {rname(d)}, {rname(a)}", d, a)
    elif fc in "fh":                 # float -> integer truncates, saturating at the 32-bit range of the signedness,
                                     # then keeps a narrow type's low bits (compiler/ir/dtypes.float_to_int)
      src = H(2 * a) if fc == "h" else rname(a)
      self.alu(f"cov.{'f16' if fc == 'h' else 'f32'}{'u32' if tc == 'u' else 's32'} {rname(d)}, "
               f"{src}", d, a, half=fc == "h")
      self.fix(d, td)
    else:                            # integer / bool -> integer: the extended value, re-extended for a narrow type
      self.mov(d, a)
      if _narrow(td) and (_narrow(td) < (_narrow(sd) or 32) or tc != fc): self.fix(d, td)

  def half_op(self, u: UOp, d: int, rs: list) -> bool:
    """A float16 operation on half registers (False when it is not one). + - * neg trunc and compares run in half
    precision; divide, square root and the transcendentals run in float32 between two conversions (one rounding at
    the end: for / and sqrt the correctly rounded f16 result, float32 having 2 * 11 + 2 bits)."""
    op, H = u.op, hname
    h = [H(2 * r) for r in rs]
    if op in (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE):
      cond = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "ne"}[op]
      self.alu(f"cmps.f.{cond} {rname(d)}, {h[0]}, {h[1]}", d, *rs, half=True)
    elif op is Ops.WHERE: self.sel(d, rs[1], rs[0], rs[2])          # the full registers: their low halves with them
    elif op in (Ops.ADD, Ops.MUL): self.alu(f"{'add' if op is Ops.ADD else 'mul'}.f {H(2 * d)}, {h[0]}, {h[1]}", d, *rs,
                                            half=True)
    elif op is Ops.SUB: self.alu(f"add.f {H(2 * d)}, {h[0]}, (neg){h[1]}", d, *rs, half=True)
    elif op is Ops.NEG: self.alu(f"absneg.f {H(2 * d)}, (neg){h[0]}", d, *rs, half=True)
    elif op is Ops.TRUNC: self.alu(f"trunc.f {H(2 * d)}, {h[0]}", d, *rs, half=True)
    elif op in (Ops.FDIV, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIP):
      f = [self.wt(k) for k in range(len(rs))]
      for t, x in zip(f, rs): self.alu(f"cov.f16f32 {rname(t)}, {H(2 * x)}", t, x, half=True)
      r = self.wt(3)
      if op is Ops.FDIV:
        self.sfu("rcp", r, f[1])
        self.op2("mul.f", r, f[0], r)
      else: self.sfu(SFU[op], r, f[0])
      self.alu(f"cov.f32f16 {H(2 * d)}, {rname(r)}", d, r, half=True)
    else: return False
    return True

  def alu_op(self, u: UOp):
    op, src = u.op, u.src
    if self.spilled:
      d = self.r(u)
      rs = [self.r(s) for s in src]
    else:                                 # registers straight from the allocation (self.r: the other cases)
      get = self.regs.get
      d = get(u)
      if d is None: d = self.r(u)
      rs = [get(s) for s in src]
      if None in rs: rs = [self.r(s) for s in src]
    if len(src) == 2:                     # most elements: one two-register instruction (plan memoized per types)
      key = (op, u.dtype, src[0].dtype, src[1].dtype)
      plan = _PLAN2.get(key)
      if plan is None: plan = _PLAN2[key] = _plan2(*key)
      if plan:
        self.op2(plan[0], d, rs[0], rs[1])
        if plan[1]: self.fix(d, u.dtype)
        return
    c = _CLS.get(src[0].dtype) or _cls(src[0].dtype) if src else "u"
    if _is_wide(u.dtype) or (src and _is_wide(src[0].dtype)) or (op is Ops.WHERE and _is_wide(src[1].dtype)):
      if op in (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE):
        cond = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "ne"}[op]
        self.cmp64(d, rs[0], rs[1], cond, src[0].dtype.kind == "int")
      else: self.alu64(u, d, rs)
      return
    if (c == "h" or (op is Ops.WHERE and _half_float(u.dtype))) and self.half_op(u, d, rs): return
    if op is Ops.ADD: self.op2("add.f" if c == "f" else "add.u", d, rs[0], rs[1])
    elif op in (Ops.AND, Ops.OR, Ops.XOR): self.op2(_BITOP[op], d, rs[0], rs[1])
    elif op in (Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE):
      cond = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "ne"}[op]
      self.op2(f"cmps.{'f' if c == 'f' else 'u' if c in 'ub' else 's'}.{cond}", d, rs[0], rs[1])
    elif op is Ops.WHERE: self.sel(d, rs[1], rs[0], rs[2])
    elif op is Ops.SUB:
      if c == "f": self.alu(f"add.f {rname(d)}, {rname(rs[0])}, (neg){rname(rs[1])}", d, rs[0], rs[1])
      else: self.op2("sub.u", d, rs[0], rs[1])
    elif op is Ops.MUL:
      if c == "f": self.op2("mul.f", d, rs[0], rs[1])
      elif c == "b": self.op2("and.b", d, rs[0], rs[1])
      else: self.imul(d, rs[0], rs[1])
    elif op in (Ops.IDIV, Ops.IMOD): self.divmod(d, rs[0], rs[1], c == "s", op is Ops.IMOD)
    elif op is Ops.SHL: self.op2("shl.b", d, rs[0], rs[1])
    elif op is Ops.SHR: self.op2("ashr.b" if c == "s" else "shr.b", d, rs[0], rs[1])
    elif op is Ops.NEG:
      self.alu(f"absneg.{'f' if c == 'f' else 's'} {rname(d)}, (neg){rname(rs[0])}", d, rs[0])
    elif op is Ops.NOT:
      if c == "b": self.op2("xor.b", d, rs[0], "1")
      else: self.alu(f"not.b {rname(d)}, {rname(rs[0])}", d, rs[0])
    elif op is Ops.FDIV:
      t = self.temps[0]
      self.sfu("rcp", t, rs[1])
      self.op2("mul.f", d, rs[0], t)
    elif op in (Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.RECIP) and c == "f":
      self.sfu(SFU[op], d, rs[0])
    elif op is Ops.TRUNC and c == "f": self.alu(f"trunc.f {rname(d)}, {rname(rs[0])}", d, rs[0])
    else: raise CompileError(f"ir3 backend: no instruction for {op.name} on {src[0].dtype if src else u.dtype}: "
                             f"{_short(u)}", u)
    # a select, bit operation or right shift of values in range stays in range (sign/zero extension is kept)
    if op not in _KEEPS_RANGE and _narrow(u.dtype): self.fix(d, u.dtype)
