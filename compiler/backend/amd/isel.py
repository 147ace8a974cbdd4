"""Instruction selection: the LINEAR form of a lowered kernel (compiler/lower) -> RDNA3 (gfx1100, wave32) machine
instructions over virtual registers (isel_mir.MInst).

Register classes. A value is *uniform* when every lane of a wave holds the same one: kernel arguments (pointers as
64-bit SGPR pairs loaded from the kernarg segment, integer scalars), work-group ids, constants, counters of loops
whose trip count is uniform, 32-bit integer ADD/SUB/MUL/AND/OR/XOR/SHL/SHR/MAX over uniform values, and loads of a
read-only param at a uniform index (s_load_b32/b64 through the scalar cache: isel_mem.scalar_load_ok). Uniform
values live in SGPRs and are computed by SALU instructions; everything else is per lane, in VGPRs, computed by VALU
instructions in their VOP3 form (which accepts SGPRs, inline constants and a literal as sources). Booleans are lane
masks in an SGPR (wave32: one bit per lane), made by v_cmp_*_e64 and combined by s_and/s_or/s_xor. 64-bit values
(int64, uint64, float64) are register pairs and their arithmetic is VALU: isel_wide.py.

Memory. GLOBAL: global_load/store with an SGPR-pair base (saddr), a VGPR byte offset and the instruction's 13-bit
signed offset for the constant part of the index; a buffer of 4 GiB or more (where a 32-bit byte offset could
wrap) gets 64-bit address arithmetic instead: a VGPR-pair address base + index * size from v_mad_u64_u32. LOCAL: ds_load/store with the buffer's LDS offset plus the
constant part in the 16-bit offset field. REG buffers indexed only by constants become VGPRs (one per element);
others live in the private segment (scratch_load/store, VGPR byte offset + 13-bit offset). A gated LOAD selects
index 0 where the gate is off and 0 as its result (no access outside the buffer).

Control flow. RANGE with a constant trip count of at most UNROLL_MAX (and a small body) is unrolled, the counter
becoming a constant; other uniform RANGEs are scalar loops (s_add/s_cmp/s_cbranch_scc1) and non-uniform ones
divergent loops (v_cmp, EXEC &= mask, s_cbranch_execz, EXEC restored at the exit). IF is s_and_saveexec_b32 /
s_cbranch_execz / EXEC restore. BARRIER is s_barrier.

Kernel entry (AMDGPUUsage "Initial Kernel Execution State", gfx11 wave32): s[0:1] kernarg segment pointer (the
only user SGPR enabled; USER_SGPR_COUNT is padded to 16 - #workgroup-ids for the gfx11 UserSGPRInit16Bug, as
LLVM does), then the enabled work-group ids; v0 holds the packed work-item ids x | y << 10 | z << 20.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import AddrSpace, CompileError, KernelInfo, UOp, dtypes
from ...ir.ops import GroupOp
from ...ir.dtypes import DType, float_to_int
from ...ir.dtypes import truncate
from ...ir.evaluate import EvalError, exec_alu
from ...ir.uop import _short
from ...isa.amd.cowriter import user_sgpr_count
from .isel_common import Ops, TARGET, _err, _kind, concrete, const_of, imm_of, is_inline, operand_kind, value_of
from .isel_divmod import DivModSelector
from .isel_mem import MemorySelector
from .isel_mir import EXEC_LO, Imm, Imm64, MInst, Spec, Sub, VReg
from .isel_wide import WideSelector
UNROLL_MAX = 16          # unroll constant-trip loops up to this many iterations ...
UNROLL_BUDGET = 800      # ... when iterations x body elements stays below this
USE_SAVEEXEC = True      # s_and_saveexec_b32 for IF (one instruction instead of s_mov + s_and)
FUSE_MUL_ADD = False     # a*b + c -> v_fma_f32: off, the reference semantics round the product (C: -ffp-contract=off);
                         # only an explicit MULACC becomes an FMA

_SCALAR_INT_OPS = {Ops.ADD: "s_add_i32", Ops.SUB: "s_sub_i32", Ops.MUL: "s_mul_i32", Ops.AND: "s_and_b32",
                   Ops.OR: "s_or_b32", Ops.XOR: "s_xor_b32", Ops.SHL: "s_lshl_b32"}
_VINT = {Ops.ADD: "v_add_nc_u32_e64", Ops.SUB: "v_sub_nc_u32_e64", Ops.MUL: "v_mul_lo_u32", Ops.AND: "v_and_b32_e64",
         Ops.OR: "v_or_b32_e64", Ops.XOR: "v_xor_b32_e64"}
_VFLOAT = {Ops.ADD: "v_add_{t}_e64", Ops.SUB: "v_sub_{t}_e64", Ops.MUL: "v_mul_{t}_e64", Ops.MAX: "v_max_{t}_e64",
           Ops.SQRT: "v_sqrt_{t}_e64", Ops.EXP2: "v_exp_{t}_e64", Ops.LOG2: "v_log_{t}_e64",
           Ops.RECIP: "v_rcp_{t}_e64", Ops.TRUNC: "v_trunc_{t}_e64", Ops.MULACC: "v_fma_{t}"}
_VCMP = {Ops.CMPLT: "lt", Ops.CMPEQ: "eq", Ops.CMPNE: "ne"}
_SSRC01 = ("ssrc0", "ssrc1")
_SRC_FIELDS = [[f"src{i}" for i in range(n)] for n in range(4)]   # pure()'s default operand fields by source count
_ALU_OPS = frozenset(GroupOp.ALU)
_PROLOGUE_OPS = frozenset({Ops.SPECIAL, Ops.PARAM, Ops.DEFINE_VAR, Ops.INDEX})
_UNIFORM_LEAVES = frozenset({Ops.CONST, Ops.PARAM, Ops.DEFINE_VAR, Ops.BUFFER})
_UNIFORM_INT_OPS = frozenset(_SCALAR_INT_OPS) | {Ops.SHR, Ops.MAX}
_IDENTITY_BOTH, _IDENTITY_RIGHT = frozenset({Ops.ADD, Ops.OR, Ops.XOR, Ops.MUL}), frozenset({Ops.SUB, Ops.SHL, Ops.SHR})
# the bit patterns of imm_of(1, dt) in the types identity() multiplies by one (ints, f32, f16); it also acts on 0
_IDENTITY_ONES = frozenset({1, 0x3f800000, 0x3c00})


@dataclass
class KernArg:
  slot: int
  kind: str          # "buffer" | "int"
  offset: int
  size: int
  dtype: DType
  name: str


@dataclass
class Selection:
  """What instruction selection produced: the code and what the code object needs to describe the kernel."""
  name: str
  code: list
  args: list                    # [KernArg] in slot order
  kernarg_size: int
  lds_size: int
  user_sgprs: int               # USER_SGPR_COUNT
  workgroup_ids: int            # number of work-group id SGPRs enabled (x, x+y, x+y+z)
  workitem_id_dims: int         # VGPR_WORKITEM_ID: 0 x, 1 x+y, 2 x+y+z
  loops: list = field(default_factory=list)   # [(head label, exit label)] of real (not unrolled) loops
  global_size: tuple = (1, 1, 1)
  local_size: tuple = (1, 1, 1)
  uses_local_ids: bool = False
  private_size: int = 0         # bytes of private (scratch) memory per lane that the selected code uses


class ISel(DivModSelector, MemorySelector, WideSelector):
  def __init__(self, lin: UOp, addr64_bytes: int = 2**32, arch: str = TARGET):
    self.arch = arch                   # the target: only the user SGPR padding depends on it (cowriter.user_sgpr_count)
    self.addr64_bytes = addr64_bytes   # GLOBAL buffers of this many bytes or more get 64-bit VGPR addresses
    if lin.op is not Ops.LINEAR: raise CompileError(f"{TARGET}: instruction selection needs a LINEAR, got {lin.op.name}")
    self.lin = lin
    self.info: KernelInfo = lin.arg if isinstance(lin.arg, KernelInfo) else KernelInfo()
    self.code: list[MInst] = []
    self.val: dict[UOp, object] = {}
    self.uni: dict[UOp, bool] = {}
    self.cse: list[dict] = [{}]
    self.mutable: set = set()
    self.reg_bufs: dict[UOp, list] = {}
    self.lds_off: dict[UOp, int] = {}
    self.scratch_off: dict[UOp, int] = {}     # REG buffers kept in the private segment (scratch)
    self.addr_align: dict = {}                # LDS address VReg -> known byte alignment of its value
    self.private_size = 0
    self.lds_size = 0
    self.nlabel = 0
    self.loops: list = []

  # ------------------------------------------------------------------ emission helpers
  def emit(self, name, defs=None, uses=None, **mods):
    self.code.append(MInst(name, defs, uses, **mods))

  def label(self, prefix: str) -> str:
    self.nlabel += 1
    return f".L{prefix}{self.nlabel}"

  def cached(self, key):
    for scope in reversed(self.cse):
      if key in scope: return scope[key]
    return None

  def pure(self, name, srcs, dst_cls="v", dst_field="vdst", fields=None, dst_n=1, **mods):
    """A side-effect-free instruction with one destination (dst_n registers); CSE'd within the current scope."""
    return self._pure(name, srcs, dst_cls, dst_field, fields, dst_n, mods)

  def _pure(self, name, srcs, dst_cls, dst_field, fields, dst_n, mods):
    """pure() with its modifiers as one dict (or None): what the hot callers (sop2, vop) call directly."""
    mutable = self.mutable
    cacheable = not mutable or not any((s.reg if s.__class__ is Sub else s) in mutable for s in srcs
                                       if s.__class__ is VReg or s.__class__ is Sub)
    key = (name, tuple(srcs), tuple(sorted(mods.items())) if mods else ())
    cse = self.cse
    if cacheable and len(cse) == 1:   # (the outermost scope: one lookup that also records the new value)
      d = VReg(dst_cls, dst_n)
      hit = cse[0].setdefault(key, d)
      if hit is not d: return hit
      cacheable = False
    elif cacheable:
      hit = self.cached(key)
      if hit is not None: return hit
      d = VReg(dst_cls, dst_n)
    else: d = VReg(dst_cls, dst_n)
    n = len(srcs)
    if not fields: fields = _SRC_FIELDS[n]
    uses = {fields[0]: srcs[0], fields[1]: srcs[1]} if n == 2 and len(fields) > 1 else dict(zip(fields, srcs))
    self.code.append(MInst(name, {dst_field: d}, uses, **mods) if mods else MInst(name, {dst_field: d}, uses))
    if cacheable: cse[-1][key] = d
    return d

  def to_v(self, x):
    if isinstance(x, VReg) and x.cls == "v" and x.n == 1: return x
    if isinstance(x, Sub) and x.reg.cls == "v": return x
    return self.pure("v_mov_b32_e32", [x])

  def to_s(self, x):
    if isinstance(x, VReg) and x.cls == "s": return x
    if isinstance(x, VReg): raise CompileError(f"{TARGET}: internal: a per-lane value where a uniform one is needed")
    return self.pure("s_mov_b32", [x], "s", "sdst", ["ssrc0"])

  def legal_vop3(self, srcs, kind: str = "int"):
    """At most two scalar values (distinct SGPRs or SGPR pairs, one literal) per VALU instruction (gfx10+ constant
    bus); the others are copied to VGPRs (a pair to a VGPR pair)."""
    out, sg, lit = [], set(), set()
    for x in srcs:
      if (isinstance(x, VReg) and x.cls == "s") or (isinstance(x, Sub) and x.reg.cls == "s"):
        if x not in sg:
          if len(sg) + len(lit) >= 2: x = self.to_v64(x) if isinstance(x, VReg) and x.n == 2 else self.to_v(x)
          else: sg.add(x)
      elif isinstance(x, Imm) and not is_inline(x, kind):
        if x not in lit:
          if lit or len(sg) + len(lit) >= 2: x = self.to_v(x)
          else: lit.add(x)
      out.append(x)
    return out

  def vop(self, name, *srcs):
    return self._pure(name, self.legal_vop3(list(srcs), operand_kind(name)), "v", "vdst", None, 1, None)

  def vcmp(self, name, a, b):
    return self.pure(name, self.legal_vop3([a, b], operand_kind(name)), "s", "vdst")

  def sop2(self, name, a, b):
    if isinstance(a, Imm) and isinstance(b, Imm) and not is_inline(a) and not is_inline(b) and a != b:
      a = self.to_s(a)
    return self._pure(name, [a, b], "s", "sdst", _SSRC01, 1, None)

  def cndmask(self, mask, if_false, if_true):
    if isinstance(mask, Imm): return if_true if mask.bits else if_false
    # the lane mask must stay an SGPR: it takes the first constant-bus slot, the values move to VGPRs if needed
    m, f, t = self.legal_vop3([mask, if_false, if_true], "int")
    return self.pure("v_cndmask_b32_e64", [f, t, m])

  # ------------------------------------------------------------------ uniformity
  def uniform(self, u: UOp) -> bool:
    r = self.uni.get(u)
    if r is not None: return r
    op = u.op
    if op in _UNIFORM_INT_OPS:   # (the most frequent)
      dt = u.dtype
      r = dt is dtypes.int32 or dt is dtypes.uint32
      if r:
        uni = self.uni
        for s in u.src:
          rs = uni.get(s)
          if rs is None:
            if s.op is Ops.CAST and s.src[0].op is Ops.CONST: continue   # a typed literal (the CAST rule: uniform)
            rs = self.uniform(s)
          if not rs: r = False; break
    elif op in _UNIFORM_LEAVES: r = True
    elif op is Ops.SPECIAL: r = u.arg.startswith("g")
    elif op is Ops.RANGE: r = self.uniform(u.src[0])
    elif op in (Ops.CAST, Ops.BITCAST):
      r = u.src[0].op is Ops.CONST or (u.dtype in (dtypes.int32, dtypes.uint32) and
                                       u.src[0].dtype in (dtypes.int32, dtypes.uint32) and self.uniform(u.src[0]))
    elif op is Ops.LOAD: r = self.scalar_load_ok(u)
    else: r = False
    self.uni[u] = r
    return r

  # ------------------------------------------------------------------ the kernel
  def select(self) -> Selection:
    elems = list(self.lin.src)
    # the few elements the prologue needs (SPECIALs, PARAMs and DEFINE_VARs, REG buffer INDEXes), in one walk
    few = [u for u in elems if u.op in _PROLOGUE_OPS]
    gdims = [int(u.arg[4:]) for u in few if u.op is Ops.SPECIAL and u.arg.startswith("g")]
    ldims = [int(u.arg[4:]) for u in few if u.op is Ops.SPECIAL and u.arg.startswith("l")]
    n_wg = max(gdims, default=0) + 1
    # the kernarg pointer (s[0:1]), padded where the target needs it (gfx1100, gfx1102); the work-group ids follow (the
    # code-object writer's rule). gfx1200 and gfx942 keep the padding gfx1100 has (their code is renamed from it).
    self.user_sgprs = user_sgpr_count(2, n_wg, self.arch if self.arch.startswith("gfx110") else TARGET, 32)
    self.in_scratch = set()
    for u in few:
      if u.op is Ops.INDEX and u.src[0].op is Ops.BUFFER and u.src[0].arg.addrspace is AddrSpace.REG:
        if u.src[1].const_value is None or u.src[0].arg.size > 64: self.in_scratch.add(u.src[0])
    self.kernarg = VReg("s", 2, fixed=0)
    self.wgid = [VReg("s", 1, fixed=self.user_sgprs + i) for i in range(n_wg)]
    self.tid = VReg("v", 1, fixed=0)
    self.ldims = max(ldims, default=0)
    ls = self.info.local_size or (1, 1, 1)
    self.local_size = tuple(ls) + (1,) * (3 - len(ls))
    self.args, off = [], 0
    params = {}
    for u in few:
      if u.op in (Ops.PARAM, Ops.DEFINE_VAR) and u not in params: params[u] = u.arg.slot
    for u, slot in sorted(params.items(), key=lambda p: p[1]):
      if u.op is Ops.PARAM:
        off = (off + 7) // 8 * 8
        self.args.append(KernArg(slot, "buffer", off, 8, u.arg.dtype, f"data{slot}"))
        d = VReg("s", 2)
        self.emit("s_load_b64", {"sdata": d}, {"sbase": self.kernarg}, offset=off)
        off += 8
      else:
        dt = u.arg.dtype if not u.arg.dtype.is_weak else dtypes.int32
        size = dt.itemsize
        if size not in (4, 8): raise _err(u, "only 32- and 64-bit scalar arguments")
        off = (off + size - 1) // size * size
        self.args.append(KernArg(slot, "int", off, size, dt, u.arg.name))
        d = VReg("s", size // 4)
        self.emit(f"s_load_b{8 * size}", {"sdata": d}, {"sbase": self.kernarg}, offset=off)
        off += size
      self.val[u] = d
    self.kernarg_size = off
    self.block(elems)
    self.emit("s_endpgm")
    return Selection(self.info.name, self.code, self.args, self.kernarg_size, self.lds_size, self.user_sgprs, n_wg,
                     self.ldims, self.loops, self.info.global_size or (1, 1, 1), self.local_size, bool(ldims),
                     self.private_size)

  def block(self, elems: list):
    i, n = 0, len(elems)
    element, alu, val, alu_ops = self.element, self.alu, self.val, _ALU_OPS
    while i < n:
      # the straight-line elements up to the next RANGE or IF (most of a kernel), then that loop or IF as a whole
      for j in range(i, n):
        u = elems[j]
        op = u.op
        if op in alu_ops: val[u] = alu(u)   # (element()'s first case, without the call)
        elif op is Ops.RANGE or op is Ops.IF: break
        elif op is Ops.CONST and u.dtype.is_weak: continue   # (element() does nothing with a weak literal)
        else: element(u)
      else: return
      u = elems[j]
      if u.op is Ops.RANGE:
        k = self._match(elems, j, Ops.END)
        self.loop(u, elems[j + 1:k])
      else:
        k = self._match(elems, j, Ops.ENDIF)
        self.if_block(u, elems[j + 1:k])
      i = k + 1

  @staticmethod
  def _match(elems, i, end_op):
    start = elems[i]
    for j in range(i + 1, len(elems)):
      if elems[j].op is end_op and elems[j].src[0] is start: return j
    raise CompileError(f"{TARGET}: no {end_op.name} for {_short(start)}", start)

  # ------------------------------------------------------------------ control flow
  def loop(self, r: UOp, body: list):
    end = self.get(r.src[0])
    if isinstance(end, (Imm, Imm64)):
      n = value_of(end, r.src[0].dtype)
      if n <= 0: return
      if n <= UNROLL_MAX and n * max(len(body), 1) <= UNROLL_BUDGET:
        for it in range(n):
          self.val[r] = const_of(it, r.dtype)
          self.block(body)
        return
    if r.dtype.itemsize == 8: raise _err(r, "a loop with a 64-bit counter (its trip count bound is beyond int32)")
    head, exit_ = self.label("loop"), self.label("exit")
    signed = not r.dtype.is_unsigned
    if self.uniform(r):
      cnt = VReg("s")
      self.mutable.add(cnt)
      self.emit("s_mov_b32", {"sdst": cnt}, {"ssrc0": Imm(0)})
      if r.src[0].vmin <= 0:
        self.emit("s_cmp_ge_i32" if signed else "s_cmp_ge_u32", {}, {"ssrc0": cnt, "ssrc1": end})
        self.emit("s_cbranch_scc1", target=exit_)
      self.emit("LABEL", label=head)
      self.val[r] = cnt
      self.cse.append({})
      self.block(body)
      self.cse.pop()
      self.emit("s_add_i32", {"sdst": cnt}, {"ssrc0": cnt, "ssrc1": Imm(1)})
      self.emit("s_cmp_lt_i32" if signed else "s_cmp_lt_u32", {}, {"ssrc0": cnt, "ssrc1": end})
      self.emit("s_cbranch_scc1", target=head)
      self.emit("LABEL", label=exit_)
    else:
      cnt, save = VReg("v"), VReg("s")
      self.mutable.add(cnt)
      self.emit("v_mov_b32_e32", {"vdst": cnt}, {"src0": Imm(0)})
      self.emit("s_mov_b32", {"sdst": save}, {"ssrc0": Spec(EXEC_LO)})
      self.emit("LABEL", label=head)
      self.cse.append({})
      m = VReg("s")
      self.emit("v_cmp_lt_i32_e64" if signed else "v_cmp_lt_u32_e64", {"vdst": m},
                dict(zip(("src0", "src1"), self.legal_vop3([cnt, end], "int"))))
      self.emit("s_and_b32", {"sdst": Spec(EXEC_LO)}, {"ssrc0": Spec(EXEC_LO), "ssrc1": m})
      self.emit("s_cbranch_execz", target=exit_)
      self.val[r] = cnt
      self.block(body)
      self.cse.pop()
      self.emit("v_add_nc_u32_e64", {"vdst": cnt}, {"src0": cnt, "src1": Imm(1)})
      self.emit("s_branch", target=head)
      self.emit("LABEL", label=exit_)
      self.emit("s_mov_b32", {"sdst": Spec(EXEC_LO)}, {"ssrc0": save})
    self.loops.append((head, exit_))

  def if_block(self, u: UOp, body: list):
    gate = self.get(u.src[0])
    if isinstance(gate, Imm):
      if gate.bits: self.block(body)
      return
    save, skip = VReg("s"), self.label("endif")
    if USE_SAVEEXEC:
      self.emit("s_and_saveexec_b32", {"sdst": save}, {"ssrc0": gate})
    else:
      self.emit("s_mov_b32", {"sdst": save}, {"ssrc0": Spec(EXEC_LO)})
      self.emit("s_and_b32", {"sdst": Spec(EXEC_LO)}, {"ssrc0": Spec(EXEC_LO), "ssrc1": gate})
    self.emit("s_cbranch_execz", target=skip)
    self.cse.append({})
    self.block(body)
    self.cse.pop()
    self.emit("LABEL", label=skip)
    self.emit("s_mov_b32", {"sdst": Spec(EXEC_LO)}, {"ssrc0": save})

  # ------------------------------------------------------------------ elements
  def get(self, u: UOp):
    try: v = self.val[u]
    except KeyError: raise CompileError(f"{TARGET}: {_short(u)} is used before it is computed", u) from None
    return v

  def element(self, u: UOp):
    op = u.op
    # the most frequent first: ALU (block() takes those itself), literals, typed literals
    if op in _ALU_OPS: self.val[u] = self.alu(u); return
    if op is Ops.CAST and u._cv is not None and u.src[0].op is Ops.CONST:
      # a typed literal: _fold_casts of one CAST is the value UOp keeps (an int32/uint32 int: its own bit pattern)
      cv, dt = u._cv, u.dtype
      self.val[u] = Imm(cv) if cv.__class__ is int and (dt is dtypes.int32 or dt is dtypes.uint32) else const_of(cv, dt)
      self.uni[u] = True   # (what uniform() answers for a CAST of a CONST, known here without its tests)
      return
    if op is Ops.PARAM or op is Ops.DEFINE_VAR: return   # loaded in the prologue
    if op is Ops.CONST:
      dt = u.dtype
      # an int32/uint32 Python int is its own bit pattern (imm_of: truncate, then Imm's 32-bit mask)
      if (dt is dtypes.int32 or dt is dtypes.uint32) and u.arg.__class__ is int: self.val[u] = Imm(u.arg); return
      # a weak literal only feeds a CAST, folded from the literal itself below (1e300 has no float32 pattern)
      if dt.is_weak: return
      self.val[u] = const_of(u.arg, dt)
    elif op is Ops.CAST and self._constant_chain(u):
      # constants through 64-bit types (a large literal typed int64, then cast down): folded in Python
      self.val[u] = const_of(_fold_casts(u), u.dtype)
    elif op is Ops.BUFFER:
      a = u.arg
      if u in self.reg_bufs or u in self.lds_off or u in self.scratch_off: return
      if a.addrspace is AddrSpace.LOCAL:
        self.lds_size = (self.lds_size + 15) // 16 * 16
        self.lds_off[u] = self.lds_size
        self.lds_size += a.dtype.itemsize * a.size
      elif u in self.in_scratch:
        # indexed by a value known only at run time (or too big for registers): the wave's private segment
        if a.dtype.itemsize > 4: raise _err(u, "64-bit private arrays are not supported")
        self.private_size = (self.private_size + 3) // 4 * 4
        self.scratch_off[u] = self.private_size
        self.private_size += a.dtype.itemsize * a.size
      else:
        regs = [VReg("v", 2 if a.dtype.itemsize == 8 else 1) for _ in range(a.size)]
        self.mutable.update(regs)
        self.reg_bufs[u] = regs
    elif op is Ops.SPECIAL: self.val[u] = self.special(u)
    elif op is Ops.INDEX: self.val[u] = None   # resolved by LOAD/STORE (see address())
    elif op is Ops.LOAD: self.val[u] = self.load(u)
    elif op is Ops.STORE: self.store(u)
    elif op is Ops.BARRIER: self.emit("s_barrier")
    elif op is Ops.CAST: self.val[u] = self.cast(u)
    elif op is Ops.BITCAST: self.val[u] = self.bitcast(u)
    elif op in (Ops.END, Ops.ENDIF): raise CompileError(f"{TARGET}: unmatched {op.name}: {_short(u)}", u)
    else: self.val[u] = self.alu(u)

  def special(self, u: UOp):
    dim = int(u.arg[4:])
    if u.arg.startswith("g"): return self.wgid[dim]
    if dim == 0 and self.local_size[1] == 1 and self.local_size[2] == 1: return self.tid
    return self.pure("v_bfe_u32", [self.tid, Imm(10 * dim), Imm(10)])

  # ------------------------------------------------------------------ ALU
  def fold(self, u: UOp, srcs):
    for s in srcs:
      if s.__class__ is not Imm and s.__class__ is not Imm64: return None
    dt = u.dtype
    try:
      vals = [value_of(s, x.dtype) for s, x in zip(srcs, u.src)]
      return const_of(exec_alu(u.op, dt, vals), dt)
    except (EvalError, CompileError, OverflowError, ValueError):
      return None

  def alu(self, u: UOp):
    val, src = self.val, u.src
    try: srcs = [val[src[0]], val[src[1]]] if len(src) == 2 else [val[s] for s in src]   # (a comprehension is a call)
    except KeyError: srcs = [self.get(s) for s in src]   # (raises, naming the source)
    op = u.op
    # fold() and identity() only matter with constant sources; identity() with a 0 source, or a one for MUL
    consts, maybe_identity, ones = 0, False, _IDENTITY_ONES if op is Ops.MUL else ()
    for s in srcs:
      c = s.__class__
      if c is Imm:
        consts += 1
        if s.bits == 0 or s.bits in ones: maybe_identity = True
      elif c is Imm64: consts += 1
    if consts == len(srcs):
      folded = self.fold(u, srcs)
      if folded is not None: return folded
    dt = u.dtype
    sdt = u.src[0].dtype
    if dt.itemsize == 8 or sdt.itemsize == 8:
      if op is Ops.WHERE: return self.where64(srcs[0], srcs[2], srcs[1])
      return self.f64_alu(u, srcs) if sdt.is_float else self.i64_alu(u, srcs)
    if maybe_identity:
      same = self.identity(u, srcs)
      if same is not None: return same
    if sdt.is_int:   # (not a bool, so not a lane-mask operation or a WHERE, whose first source is one)
      name = _SCALAR_INT_OPS.get(op)
      if name is not None and op is not Ops.MUL:   # int_alu's first case for these: SALU when uniform
        if self.uniform(u): return self.sop2(name, srcs[0], srcs[1])
      return self.int_alu(u, srcs)
    if sdt.is_bool and op not in (Ops.WHERE,) or (op is Ops.WHERE and dt.is_bool): return self.mask_alu(u, srcs)
    if op is Ops.WHERE: return self.cndmask(srcs[0], srcs[2], srcs[1])
    if sdt.is_float: return self.float_alu(u, srcs)
    if sdt.is_int: return self.int_alu(u, srcs)
    raise _err(u)

  def identity(self, u: UOp, s):
    """x+0, x-0, x|0, x^0, x<<0, x>>0, x*1 (integers; x*1 also floats): the operand itself."""
    op, dt = u.op, u.dtype
    if not (dt.is_int or (dt.is_float and op is Ops.MUL)) or dt.is_bool: return None
    ks = (0, 1) if op in _IDENTITY_BOTH else (1,) if op in _IDENTITY_RIGHT else ()
    one = None
    for k in ks:
      c = s[k] if len(s) > k else None
      if c.__class__ is not Imm: continue
      if op is Ops.MUL:
        if one is None: one = imm_of(1, dt)
        if c == one: return s[1 - k]
      elif c.bits == 0: return s[1 - k]
    return None

  def mask_alu(self, u: UOp, s):
    op = u.op
    if op is Ops.AND: return self.sop2("s_and_b32", s[0], s[1])
    if op is Ops.OR: return self.sop2("s_or_b32", s[0], s[1])
    if op in (Ops.XOR, Ops.CMPNE): return self.sop2("s_xor_b32", s[0], s[1])
    if op is Ops.CMPEQ: return self.sop2("s_xnor_b32", s[0], s[1])
    if op is Ops.NOT: return self.pure("s_not_b32", [s[0]], "s", "sdst", ["ssrc0"])
    if op is Ops.CMPLT: return self.sop2("s_and_not1_b32", s[1], s[0])        # a < b  <=>  !a & b
    if op is Ops.WHERE:
      c, a, b = s
      if isinstance(c, Imm): return a if c.bits else b
      return self.sop2("s_or_b32", self.sop2("s_and_b32", c, a), self.sop2("s_and_not1_b32", b, c))
    raise _err(u)

  def float_alu(self, u: UOp, s):
    op, dt = u.op, u.src[0].dtype
    if dt.itemsize not in (2, 4): raise _err(u, "only f16 and f32 floats")
    t = "f32" if dt.itemsize == 4 else "f16"
    if op in _VCMP:
      return self.vcmp(f"v_cmp_{'neq' if op is Ops.CMPNE else _VCMP[op]}_{t}_e64", s[0], s[1])
    if op is Ops.NEG: return self.vop("v_xor_b32_e64", s[0], Imm(0x80000000 if t == "f32" else 0x8000))
    if op is Ops.FDIV:
      if t == "f16":   # in f32, rounded once to f16
        a, b = self.vop("v_cvt_f32_f16_e64", s[0]), self.vop("v_cvt_f32_f16_e64", s[1])
        return self.vop("v_cvt_f16_f32_e64", self.vop("v_mul_f32_e64", a, self.vop("v_rcp_f32_e64", b)))
      return self.vop("v_mul_f32_e64", s[0], self.vop("v_rcp_f32_e64", s[1]))
    if op is Ops.SIN:   # v_sin takes revolutions (RDNA3 ISA: V_SIN_F32 "sin(S0 * 2 * PI)")
      if t == "f16": raise _err(u, "f16 SIN")
      return self.vop("v_sin_f32_e64", self.vop("v_mul_f32_e64", s[0], Imm(0x3e22f983, "f32")))
    if op is Ops.MULACC and t == "f16":
      return self.vop("v_add_f16_e64", self.vop("v_mul_f16_e64", s[0], s[1]), s[2])
    if op is Ops.ADD and t == "f32" and FUSE_MUL_ADD:
      fused = self.try_fma(u, s)
      if fused is not None: return fused
    if op in _VFLOAT: return self.vop(_VFLOAT[op].format(t=t), *s)
    raise _err(u)

  def use_counts(self) -> dict:
    """element -> how many elements read it (one that reads it twice counts once); counted on first use (only the
    FMA fusion asks)."""
    uses = getattr(self, "_uses", None)
    if uses is None:
      uses = self._uses = {}
      get = uses.get
      for u in self.lin.src:
        src = u.src
        if len(src) == 2 and src[0] is src[1]: src = src[:1]
        elif len(src) > 2: src = dict.fromkeys(src)
        for s in src: uses[s] = get(s, 0) + 1
    return uses

  def try_fma(self, u: UOp, s):
    """acc + a*b -> v_fma_f32 when the MUL is used only here (within 1 ulp of the separate operations)."""
    for k in (0, 1):
      m = u.src[k]
      if m.op is Ops.MUL and self.use_counts().get(m, 0) == 1:
        a, b = self.get(m.src[0]), self.get(m.src[1])
        return self.vop("v_fma_f32", a, b, s[1 - k])
    return None

  def int_alu(self, u: UOp, s):
    op, dt = u.op, u.src[0].dtype
    unsigned = dt.is_unsigned
    if op is Ops.MUL:
      for k in (0, 1):
        if isinstance(s[k], Imm) and s[k].signed > 0 and s[k].bits & (s[k].bits - 1) == 0:
          return self.narrow(self.shift_left(s[1 - k], s[k].bits.bit_length() - 1, u), dt)
    if op is Ops.IDIV or op is Ops.IMOD: return self.narrow(self.divmod(u, s), dt)
    uni = self.uni.get(u)
    if uni is None: uni = self.uniform(u)
    if uni:
      if op in _SCALAR_INT_OPS: return self.sop2(_SCALAR_INT_OPS[op], s[0], s[1])
      if op is Ops.SHR: return self.sop2("s_lshr_b32" if unsigned else "s_ashr_i32", s[0], s[1])
      if op is Ops.MAX: return self.sop2("s_max_u32" if unsigned else "s_max_i32", s[0], s[1])
    if op in _VINT: return self.narrow(self.vop(_VINT[op], s[0], s[1]), dt)
    if op is Ops.SHL: return self.narrow(self.vop("v_lshlrev_b32_e64", s[1], s[0]), dt)
    if op is Ops.SHR: return self.vop("v_lshrrev_b32_e64" if unsigned else "v_ashrrev_i32_e64", s[1], s[0])
    if op is Ops.MAX: return self.vop("v_max_u32_e64" if unsigned else "v_max_i32_e64", s[0], s[1])
    if op is Ops.NEG: return self.narrow(self.vop("v_sub_nc_u32_e64", Imm(0), s[0]), dt)
    if op is Ops.NOT: return self.narrow(self.vop("v_xor_b32_e64", s[0], Imm(-1)), dt)
    if op is Ops.MULACC: return self.narrow(self.vop("v_add_nc_u32_e64", self.vop("v_mul_lo_u32", s[0], s[1]), s[2]), dt)
    if op in _VCMP:
      cmp = _VCMP[op]
      t = "u32" if unsigned or op is not Ops.CMPLT else "i32"
      return self.vcmp(f"v_cmp_{cmp}_{t}_e64", s[0], s[1])
    raise _err(u)

  def shift_left(self, x, k: int, u: UOp):
    if k == 0: return x
    if isinstance(x, VReg) and x.cls == "s" and self.uniform(u): return self.sop2("s_lshl_b32", x, Imm(k))
    return self.vop("v_lshlrev_b32_e64", Imm(k), x)

  def narrow(self, x, dt: DType):
    """Keep an 8/16-bit integer sign- or zero-extended in its 32-bit register (C's wraparound)."""
    if dt.itemsize >= 4 or isinstance(x, Imm): return x
    if dt.is_unsigned: return self.vop("v_and_b32_e64", x, Imm((1 << (8 * dt.itemsize)) - 1))
    return self.vop("v_bfe_i32", x, Imm(0), Imm(8 * dt.itemsize))

  # ------------------------------------------------------------------ casts
  @staticmethod
  def _constant_chain(u: UOp) -> bool:
    while u.op is Ops.CAST: u = u.src[0]
    return u.op is Ops.CONST

  def cast(self, u: UOp):
    x, src = self.get(u.src[0]), u.src[0].dtype
    dt = u.dtype
    if isinstance(x, (Imm, Imm64)):
      v = value_of(x, src)
      # folded like the code below runs (v_cvt_i32/u32_f32: NaN 0, saturating at the 32-bit range, then narrowed):
      # the reference conversion of the evaluator and the C backend
      if dt.is_int and isinstance(v, float): v = float_to_int(v, dt)
      return const_of(v, dt)
    if dt.itemsize == 8 or src.itemsize == 8: return self.wide_cast(u, x)
    if src.is_bool:
      if dt.is_float: return self.cndmask(x, Imm(0), imm_of(1.0, dt))
      return self.cndmask(x, Imm(0), Imm(1))
    if dt.is_bool:
      if src.is_float: return self.vcmp(f"v_cmp_neq_{'f32' if src.itemsize == 4 else 'f16'}_e64", x, Imm(0))
      return self.vcmp("v_cmp_ne_u32_e64", x, Imm(0))
    if src.is_int and dt.is_int:
      # registers hold 8/16-bit ints extended by their own signedness: widening keeps the value when it fits
      if dt.itemsize >= 4 or (src.itemsize < dt.itemsize and (src.is_unsigned or not dt.is_unsigned)): return x
      return self.narrow(x, dt)
    if src.is_int and dt.is_float:
      f = self.vop("v_cvt_f32_u32_e64" if src.is_unsigned else "v_cvt_f32_i32_e64", x)
      return f if dt.itemsize == 4 else self.vop("v_cvt_f16_f32_e64", f)
    if src.is_float and dt.is_int:
      f = x if src.itemsize == 4 else self.vop("v_cvt_f32_f16_e64", x)
      i = self.vop("v_cvt_u32_f32_e64" if dt.is_unsigned else "v_cvt_i32_f32_e64", f)
      return self.narrow(i, dt)
    if src.is_float and dt.is_float:
      if src.itemsize == dt.itemsize: return x
      return self.vop("v_cvt_f16_f32_e64" if dt.itemsize == 2 else "v_cvt_f32_f16_e64", x)
    raise _err(u)

  def bitcast(self, u: UOp):
    x, src, dt = self.get(u.src[0]), u.src[0].dtype, u.dtype
    if src.itemsize != dt.itemsize: raise _err(u, "bitcast between different sizes")
    if isinstance(x, Imm64): return Imm64(x.bits, "f64" if dt.is_float else "int")
    if dt.itemsize == 8: return x
    if isinstance(x, Imm): return Imm(x.bits, _kind(dt))
    return self.narrow(x, dt) if dt.is_int else x

def _fold_casts(u: UOp):
  """The value of CAST(...CAST(CONST)) (what ir.evaluate computes for it, without a walk of the graph per constant)."""
  chain = []
  while u.op is Ops.CAST:
    chain.append(u.arg)
    u = u.src[0]
  v = u.arg
  for dt in reversed(chain): v = truncate(v, dt)
  return v


def select(lin: UOp, addr64_bytes: int = 2**32, arch: str = TARGET) -> Selection:
  isel = ISel(lin, addr64_bytes, arch)
  sel = isel.select()
  from .isel_opt import optimize
  # (the copies coalescing looks for are made only for REG buffers kept in registers: isel_mem.reg_load / store)
  sel.code = optimize(sel.code, isel.addr_align, copies=bool(isel.reg_bufs))
  return sel
