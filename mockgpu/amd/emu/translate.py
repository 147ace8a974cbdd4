"""Translate one basic block of gfx11 code into a Python function over numpy arrays.

A block runs for n waves at once: SGPRs are (n,) uint32 arrays, VGPRs (n, 32) uint32 arrays, SCC an (n,) uint32
0/1 array. The generated function loads the registers it touches into locals (all waves: the arrays themselves;
a subset `idx` of the waves: gathered copies), computes, and stores what it wrote back. It returns the next
program counter: an int when the same for every wave, else an (n,) int64 array; -1 ends the wave.

Operand encodings (RDNA3 ISA, "Scalar/vector source operands"): 0-105 SGPR, 106/107 VCC_LO/HI, 108-123 TTMP,
124 NULL, 125 M0, 126/127 EXEC_LO/HI, 128-192 integers 0..64, 193-208 -1..-16, 235-238 apertures, 240-248 float
constants, 251 VCCZ, 252 EXECZ, 253 SCC, 255 literal, 256-511 VGPRs.
"""
from __future__ import annotations

import re

import numpy as np

from ....errors import GPUFault
from . import rt
from .decode import Inst, decode
from .valu_ops import CMP_F, CMP_I, DUAL, OPS, PACKED

VCC, M0, NULL, EXEC, SCC_SRC, LIT = 106, 125, 124, 126, 253, 255
FLOAT_CONSTS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
                248: 0.15915494309189535}  # 1/(2*pi)
INV2PI_BITS = {"f16": 0x3118, "f32": 0x3E22F983, "f64": 0x3FC45F306DC9C882}
NP_TYPE = {"u32": "u32", "b32": "u32", "i32": "i32", "f32": "f32", "u16": "u16", "b16": "u16", "i16": "i16",
           "f16": "f16", "u64": "u64", "b64": "u64", "i64": "i64", "f64": "f64"}
NPT = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "i8": np.int8, "i16": np.int16,
       "i32": np.int32, "i64": np.int64, "f16": np.float16, "f32": np.float32, "f64": np.float64}
WIDE = {"u64", "i64", "f64", "b64"}
HALF = {"u16", "i16", "f16", "b16"}
FLOATS = {"f16", "f32", "f64"}

NOOPS = {"s_nop", "s_waitcnt", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt",
         "s_waitcnt_depctr", "s_delay_alu", "s_clause", "s_sendmsg", "s_sendmsghalt", "s_set_inst_prefetch_distance",
         "s_dcache_inv", "s_gl1_inv", "s_icache_inv", "buffer_gl0_inv", "buffer_gl1_inv", "s_setprio", "s_sleep",
         "s_ttracedata", "s_ttracedata_imm", "s_incperflevel", "s_decperflevel", "s_wait_idle", "s_wait_event",
         "s_round_mode", "s_denorm_mode", "s_version", "s_code_end_nop"}
TERMINATORS = {"s_branch", "s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_vccz", "s_cbranch_vccnz",
               "s_cbranch_execz", "s_cbranch_execnz", "s_endpgm", "s_endpgm_saved", "s_barrier", "s_setpc_b64",
               "s_swappc_b64", "s_sethalt", "s_trap"}
MAX_BLOCK = 2000


class Unsupported(GPUFault):
  def __init__(self, inst: Inst, pc: int, why: str = "not supported by the emulator"):
    super().__init__(f"{inst.name} ({inst.encoding}) {why}", address=pc, kind="illegal instruction")


class Block:
  """A translated basic block: start/end addresses, instruction count, code bytes (to detect rewrites)."""

  def __init__(self, start: int, end: int, insts: int, fn, code: bytes, barrier: bool, source: str, max_vgpr: int):
    self.start, self.end, self.insts, self.fn, self.code = start, end, insts, fn, code
    self.barrier, self.source, self.max_vgpr = barrier, source, max_vgpr


def fetch_block(memory, pc: int) -> tuple[list[tuple[int, Inst]], bytes]:
  """Decode instructions from pc up to and including the first terminator."""
  rng = memory.range_of(pc)
  if rng is None: raise GPUFault("instruction fetch outside every mapped range", address=pc, kind="page fault")
  if pc & 3: raise GPUFault("misaligned program counter", address=pc, kind="illegal instruction")
  end = min(rng[1], pc + 16 * MAX_BLOCK)
  code = bytes(memory.u8[pc - memory.VIEW_BASE:end - memory.VIEW_BASE])
  out = []
  off = 0
  while True:
    if off >= len(code): raise GPUFault("program runs off the end of its mapped range", address=pc + off,
                                        kind="page fault")
    try:
      inst = decode(code, off)
    except GPUFault as e:
      raise GPUFault(str(e).split(": ", 1)[-1], address=pc + off, kind="illegal instruction") from None
    out.append((pc + off, inst))
    off += inst.size
    if inst.name in TERMINATORS or inst.name == "s_code_end" or len(out) >= MAX_BLOCK: break
  return out, code[:off]


class Gen:
  """Source generator for one block."""

  def __init__(self, start: int):
    self.start = start
    self.lines: list[str] = []
    self.sregs: set[int] = set()
    self.vregs: set[int] = set()
    self.s_written: set[int] = set()
    self.v_written: set[int] = set()
    self.alias: set[str] = set()
    self.scc_used = False
    self.scc_written = False
    self.consts: dict[str, object] = {}
    self.ntmp = 0
    self.uses_wid = False
    self.next_pc = None          # expression of the next pc
    self.barrier = False
    self.lanes_of: dict[int, str] = {}   # SGPR -> local (n,32) bool holding its lanes (VCC, carries)
    self.pending: set[int] = set()       # SGPRs whose packed value is not computed yet

  # ---- helpers ----
  def emit(self, line: str) -> None:
    self.lines.append(line)

  def tmp(self) -> str:
    self.ntmp += 1
    return f"t{self.ntmp}"

  def const(self, value, dtype: str) -> str:
    name = f"k_{dtype}_{len(self.consts)}"
    self.consts[name] = getattr(np, {"u32": "uint32", "i32": "int32", "f32": "float32", "u16": "uint16",
                                     "i16": "int16", "f16": "float16", "u64": "uint64", "i64": "int64",
                                     "f64": "float64"}[dtype])(value)
    return name

  def s(self, r: int) -> str:
    if r == NULL: return self.const(0, "u32")
    if r > 127: raise ValueError(r)
    self.sregs.add(r)
    self.materialize(r)
    return f"s{r}"

  def materialize(self, r: int) -> None:
    if r in self.pending:
      self.pending.discard(r)
      self.emit(f"s{r} = R.pack({self.lanes_of[r]})")

  def v(self, r: int) -> str:
    if r > 255: raise ValueError(r)
    self.vregs.add(r)
    return f"v{r}"

  def scc(self) -> str:
    self.scc_used = True
    return "scc"

  # ---- writes ----
  def write_s(self, r: int, expr: str) -> None:
    if r == NULL: return
    if r > 127: raise GPUFault(f"scalar destination {r} is not a register", kind="illegal instruction")
    self.sregs.add(r)
    self.s_written.add(r)
    self.pending.discard(r)
    self.lanes_of.pop(r, None)
    if re.fullmatch(r"[sv]\d+|scc", expr.strip()): expr = f"{expr}.copy()"   # never alias two registers
    self.emit(f"s{r} = R.sfix({expr}, n)")
    if r == EXEC: self.emit_exec_update()

  def write_scc(self, expr: str) -> None:
    self.scc_used = self.scc_written = True
    self.emit(f"scc = np.asarray({expr}).astype(u32)")

  def emit_exec_update(self) -> None:
    self.emit("ef = R.all_ones(s126); em = None if ef else R.lanes(s126)")

  def write_v(self, r: int, expr: str) -> None:
    """Write a u32 (n,32) value to VGPR r for the active lanes."""
    self.vregs.add(r)
    self.v_written.add(r)
    t = self.tmp()
    if re.fullmatch(r"[sv]\d+", expr.strip()): expr = f"{expr}.copy()"   # never alias two registers
    self.emit(f"{t} = {expr}")
    self.emit(f"v{r} = R.vfix({t}, n) if ef else np.where(em, {t}, v{r})")

  def write_v_typed(self, r: int, expr: str, ty: str, opsel_hi: bool = False) -> None:
    """Write a typed VALU result to VGPR r (a pair for 64-bit types, a half for 16-bit types)."""
    t = self.tmp()
    if ty in WIDE:
      self.emit(f"{t} = R.bits64({expr})")
      self.write_v(r, f"R.lo32({t})")
      self.write_v(r + 1, f"({t} >> u64(32)).astype(u32)")
    elif ty in HALF:
      self.emit(f"{t} = np.asarray({expr}).astype({NP_TYPE[ty]})")
      self.write_v(r, f"R.put_half({self.v(r)}, {t}, {opsel_hi})")
    elif ty == "f32":
      self.write_v(r, f"R.f32bits({expr})")
    else:
      self.write_v(r, f"R.ibits({expr})")

  def write_lanes(self, r: int, expr: str) -> None:
    """Write a per-lane bool (n,32) result as a wave mask to SGPR r (VOPC, carry out): inactive lanes read 0."""
    if r == NULL: return
    if r > 127: raise GPUFault(f"scalar destination {r} is not a register", kind="illegal instruction")
    t = self.tmp()
    self.emit(f"{t} = np.broadcast_to({expr}, (n, 32))")
    if r == EXEC:
      return self.write_s(r, f"R.pack({t} if ef else ({t} & em))")
    self.emit(f"{t} = {t} if ef else ({t} & em)")
    self.sregs.add(r)
    self.s_written.add(r)
    self.lanes_of[r] = t
    self.pending.add(r)

  # ---- operand reads ----
  def raw_scalar(self, code: int, inst: Inst, ty: str = "u32") -> str:
    """An operand as an (n,) or scalar expression of numpy type `ty` (scalar context)."""
    if code < 128 and code != NULL:
      if ty in WIDE: return f"R.p64({self.s(code)}, {self.s(code + 1)}).view({NP_TYPE[ty]})"
      return self._typed32(self.s(code), ty)
    return self.constant(code, inst, ty)

  def constant(self, code: int, inst: Inst, ty: str) -> str:
    if code == NULL: return self.const(0, NP_TYPE[ty])
    if 128 <= code <= 192: return self._int_const(code - 128, ty)
    if 193 <= code <= 208: return self._int_const(-(code - 192), ty)
    if code in FLOAT_CONSTS:
      val = FLOAT_CONSTS[code]
      if code == 248:
        bits = INV2PI_BITS.get(ty if ty in FLOATS else "f32")
        if ty in FLOATS: return self.const(np.array(bits, {"f16": np.uint16, "f32": np.uint32, "f64": np.uint64}[ty])
                                           .view(NPT[NP_TYPE[ty]]).item(), ty)
        return self.const(bits if ty not in HALF else INV2PI_BITS["f16"], NP_TYPE[ty])
      if ty in FLOATS: return self.const(val, NP_TYPE[ty])
      # a float constant used as an integer operand: its bit pattern
      if ty in HALF: return self.const(int(np.float16(val).view(np.uint16)), NP_TYPE[ty])
      if ty in WIDE: return self.const(int(np.float64(val).view(np.uint64)), "u64") if ty != "i64" else \
          self.const(int(np.float64(val).view(np.int64)), "i64")
      return self._typed32(self.const(int(np.float32(val).view(np.uint32)), "u32"), ty)
    if code == LIT:
      lit = inst.literal
      if ty == "f64": return self.const(np.uint64(lit << 32).view(np.float64), "f64")
      if ty in ("u64", "b64", "i64"): return self.const(lit, NP_TYPE[ty])
      if ty in HALF: return self.const(np.uint16(lit & 0xFFFF).view(NPT[NP_TYPE[ty]]), NP_TYPE[ty]) if ty != "u16" \
          else self.const(lit & 0xFFFF, "u16")
      return self._typed32(self.const(lit, "u32"), ty)
    if code == SCC_SRC: return self._typed32(self.scc(), ty)
    if code == 251: return self._typed32(f"({self.s(VCC)} == 0).astype(u32)", ty)
    if code == 252: return self._typed32(f"({self.s(EXEC)} == 0).astype(u32)", ty)
    if code in (235, 236, 237, 238):
      # shared/private aperture base/limit (64-bit values): apertures are not modelled; report 0-sized windows
      return self.const(0, NP_TYPE[ty] if ty in WIDE else "u32")
    raise GPUFault(f"source operand {code} is not supported", kind="illegal instruction")

  def _int_const(self, val: int, ty: str) -> str:
    if ty in WIDE: return self.const(val & 0xFFFFFFFFFFFFFFFF if ty != "i64" else val, NP_TYPE[ty]) \
        if ty != "f64" else self.const(np.int64(val).view(np.float64), "f64")
    if ty in HALF: return self.const(np.uint16(val & 0xFFFF).view(NPT[NP_TYPE[ty]]), NP_TYPE[ty])
    if ty == "f32": return self.const(np.uint32(val & 0xFFFFFFFF).view(np.float32), "f32")
    if ty == "i32": return self.const(val, "i32")
    return self.const(val & 0xFFFFFFFF, "u32")

  def _typed32(self, expr: str, ty: str) -> str:
    if ty in ("u32", "b32"): return expr
    if ty in ("i32", "f32"): return f"np.asarray({expr}, u32).view({ty})"
    if ty in HALF: return f"R.half({expr}, False).view({NP_TYPE[ty]})"
    raise ValueError(ty)

  def vsrc(self, code: int, inst: Inst, ty: str, hi: bool = False) -> str:
    """An operand in VALU context: broadcastable to (n, 32), numpy type `ty` (16-bit: low or high half)."""
    if code >= 256:
      r = code - 256
      if ty in WIDE: return f"R.p64({self.v(r)}, {self.v(r + 1)}).view({NP_TYPE[ty]})"
      if ty in HALF: return f"R.half({self.v(r)}, {hi}).view({NP_TYPE[ty]})"
      if ty in ("u32", "b32"): return self.v(r)
      return f"{self.v(r)}.view({ty})"
    if code < 128 and code != NULL:
      if ty in WIDE: return f"R.p64({self.s(code)}, {self.s(code + 1)}).view({NP_TYPE[ty]})[:, None]"
      if ty in HALF: return f"R.half({self.s(code)}[:, None], {hi}).view({NP_TYPE[ty]})"
      return self._typed32(f"{self.s(code)}[:, None]", ty)
    if code in (SCC_SRC, 251, 252):
      return f"np.asarray({self.constant(code, inst, ty)})[:, None]"
    if hi and ty in HALF and code == LIT:
      return self.const(np.uint16((inst.literal >> 16) & 0xFFFF).view(NPT[NP_TYPE[ty]]), NP_TYPE[ty])
    return self.constant(code, inst, ty)

  def lane_mask_src(self, code: int, inst: Inst) -> str:
    """An SGPR wave mask (VCC, carry in, cndmask selector) as (n, 32) bool."""
    if code in self.lanes_of: return self.lanes_of[code]
    if code < 128 and code != NULL: return f"R.lanes({self.s(code)})"
    c = self.constant(code, inst, "u32")
    return f"R.lanes(np.broadcast_to({c}, (n,)).astype(u32))"


def _src_mods(g: Gen, expr: str, ty: str, i: int, absm: int, negm: int) -> str:
  if ty not in FLOATS: return expr
  if absm >> i & 1: expr = f"np.abs({expr})"
  if negm >> i & 1: expr = f"(-{expr})"
  return expr


def _out_mods(expr: str, ty: str, clamp: int, omod: int) -> str:
  if ty in FLOATS:
    if omod: expr = f"(({expr}) * {NP_TYPE[ty]}({[1, 2, 4, 0.5][omod]}))"
    if clamp: expr = f"R.clamp01(np.asarray({expr}, {NP_TYPE[ty]}))"
  return expr


def translate(memory, pc: int) -> Block:
  insts, code = fetch_block(memory, pc)
  g = Gen(pc)
  for addr, inst in insts:
    g.emit(f"# {addr:#x}: {inst.name}")
    _translate_inst(g, addr, inst)
  last_addr, last = insts[-1]
  if g.next_pc is None: g.next_pc = str(last_addr + last.size)
  src = _assemble(g)
  ns = {"np": np, "R": rt, **{t: getattr(np, n) for t, n in (("u8", "uint8"), ("u16", "uint16"), ("u32", "uint32"),
                                                              ("u64", "uint64"), ("i8", "int8"), ("i16", "int16"),
                                                              ("i32", "int32"), ("i64", "int64"), ("f16", "float16"),
                                                              ("f32", "float32"), ("f64", "float64"))},
        **g.consts}
  try:
    exec(compile(src, f"<gfx11 block {pc:#x}>", "exec"), ns)
  except SyntaxError as e:
    raise GPUFault(f"internal error translating the block at {pc:#x}: {e}", address=pc, kind="emulator") from None
  max_vgpr = max(g.vregs) if g.vregs else -1
  return Block(pc, last_addr + last.size, len(insts), ns["block"], code, g.barrier, src, max_vgpr)


def _assemble(g: Gen) -> str:
  sregs = sorted(g.sregs | {EXEC})
  vregs = sorted(g.vregs)
  out = ["def block(S, V, st, idx):",
         "  if idx is None:",
         "    n = st.n; wid = st.wid"]
  out += [f"    s{r} = S[{r}]" for r in sregs]
  out += [f"    v{r} = V[{r}]" for r in vregs]
  out += ["    scc = st.scc"]
  out += ["  else:", "    n = len(idx); wid = idx"]
  out += [f"    s{r} = S[{r}][idx]" for r in sregs]
  out += [f"    v{r} = V[{r}][idx]" for r in vregs]
  out += ["    scc = st.scc[idx]"]
  out += ["  M = st.mem", "  ef = R.all_ones(s126); em = None if ef else R.lanes(s126)"]
  out += ["  " + ln for ln in g.lines]
  if g.next_pc == "-1":
    return "\n".join(out + ["  return -1"]) + "\n"       # the waves end: nothing to write back
  for r in sorted(g.pending): out.append(f"  s{r} = R.pack({g.lanes_of[r]})")
  out += ["  if idx is None:"]
  out += [f"    S[{r}] = s{r}" for r in sorted(g.s_written)]
  out += [f"    V[{r}] = v{r}" for r in sorted(g.v_written)]
  out += ["    st.scc = scc" if g.scc_written else "    pass"]
  out += ["  else:"]
  out += [f"    S[{r}][idx] = s{r}" for r in sorted(g.s_written)]
  out += [f"    V[{r}][idx] = v{r}" for r in sorted(g.v_written)]
  out += ["    st.scc[idx] = scc" if g.scc_written else "    pass"]
  out += [f"  return {g.next_pc}"]
  return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------------
def _translate_inst(g: Gen, pc: int, inst: Inst) -> None:
  name, enc = inst.name, inst.encoding
  if name in NOOPS or name.startswith("s_waitcnt"): return
  try:
    if enc == "SOPP": return _sopp(g, pc, inst)
    if enc in ("SOP1", "SOP2", "SOPC", "SOPK"): return _salu(g, pc, inst)
    if enc == "SMEM": return _smem(g, pc, inst)
    if enc in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC"): return _valu(g, pc, inst)
    if enc == "VOP3P": return _vop3p(g, pc, inst)
    if enc == "VOPD": return _vopd(g, pc, inst)
    if enc == "DS": return _ds(g, pc, inst)
    if enc in ("GLOBAL", "FLAT", "SCRATCH"): return _vmem(g, pc, inst)
  except (ValueError, KeyError) as e:
    raise Unsupported(inst, pc, f"has an unsupported operand ({e})") from None
  raise Unsupported(inst, pc)


# ---- SOPP ----
def _sopp(g: Gen, pc: int, inst: Inst) -> None:
  name = inst.name
  simm = inst.fields["simm16"]
  target = pc + 4 + 4 * (simm - 0x10000 if simm & 0x8000 else simm)
  fall = pc + 4
  if name in ("s_endpgm", "s_endpgm_saved", "s_sethalt"):
    g.next_pc = "-1"
  elif name == "s_barrier":
    g.barrier = True
    g.next_pc = str(fall)
  elif name == "s_branch":
    g.next_pc = str(target)
  elif name.startswith("s_cbranch_"):
    cond = {"s_cbranch_scc0": f"{g.scc()} == 0", "s_cbranch_scc1": f"{g.scc()} != 0",
            "s_cbranch_vccz": f"{g.s(VCC)} == 0", "s_cbranch_vccnz": f"{g.s(VCC)} != 0",
            "s_cbranch_execz": f"{g.s(EXEC)} == 0", "s_cbranch_execnz": f"{g.s(EXEC)} != 0"}.get(name)
    if cond is None: raise Unsupported(inst, pc)
    g.emit(f"c = {cond}")
    g.next_pc = f"({target} if c.all() else {fall} if not c.any() else np.where(c, {target}, {fall}))"
  elif name == "s_code_end":
    raise GPUFault("executed s_code_end (the program ran past its end)", address=pc, kind="illegal instruction")
  elif name == "s_trap":
    raise GPUFault(f"s_trap {simm} executed", address=pc, kind="trap")
  else:
    raise Unsupported(inst, pc)


# ---- SALU ----
def _sdst64(g: Gen, r: int, expr: str) -> None:
  t = g.tmp()
  g.emit(f"{t} = np.asarray({expr}).astype(u64)")
  g.write_s(r, f"R.lo32({t})")
  g.write_s(r + 1, f"({t} >> u64(32)).astype(u32)")


SOP2_32 = {  # name: (src types, expression, scc expression or None); {r} = result
  "s_add_u32": ("u64", "{0} + {1}", "{r} >> u64(32)"),
  "s_sub_u32": ("u64", "{0} - {1}", "{1} > {0}"),
  "s_add_i32": ("i64", "{0} + {1}", "({r} > 2147483647) | ({r} < -2147483648)"),
  "s_sub_i32": ("i64", "{0} - {1}", "({r} > 2147483647) | ({r} < -2147483648)"),
  "s_mul_i32": ("u32", "{0} * {1}", None),
  "s_mul_hi_u32": ("u32", "R.mul_hi_u32({0}, {1})", None),
  "s_mul_hi_i32": ("u32", "R.mul_hi_i32({0}, {1})", None),
  "s_and_b32": ("u32", "{0} & {1}", "{r} != 0"),
  "s_or_b32": ("u32", "{0} | {1}", "{r} != 0"),
  "s_xor_b32": ("u32", "{0} ^ {1}", "{r} != 0"),
  "s_nand_b32": ("u32", "~({0} & {1})", "{r} != 0"),
  "s_nor_b32": ("u32", "~({0} | {1})", "{r} != 0"),
  "s_xnor_b32": ("u32", "~({0} ^ {1})", "{r} != 0"),
  "s_and_not1_b32": ("u32", "{0} & ~np.asarray({1}, u32)", "{r} != 0"),
  "s_or_not1_b32": ("u32", "{0} | ~np.asarray({1}, u32)", "{r} != 0"),
  "s_lshl_b32": ("u32", "{0} << ({1} & u32(31))", "{r} != 0"),
  "s_lshr_b32": ("u32", "{0} >> ({1} & u32(31))", "{r} != 0"),
  "s_ashr_i32": ("u32", "(np.asarray({0}, u32).view(i32) >> np.asarray({1} & u32(31)).astype(i32)).view(u32)",
                 "{r} != 0"),
  "s_lshl1_add_u32": ("u64", "(({0} << u64(1)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl2_add_u32": ("u64", "(({0} << u64(2)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl3_add_u32": ("u64", "(({0} << u64(3)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_lshl4_add_u32": ("u64", "(({0} << u64(4)) & u64(0xFFFFFFFF)) + {1}", "{r} >> u64(32)"),
  "s_min_i32": ("i32", "np.minimum({0}, {1})", "{0} < {1}"),
  "s_max_i32": ("i32", "np.maximum({0}, {1})", "{0} > {1}"),
  "s_min_u32": ("u32", "np.minimum({0}, {1})", "{0} < {1}"),
  "s_max_u32": ("u32", "np.maximum({0}, {1})", "{0} > {1}"),
  "s_bfm_b32": ("u64", "((u64(1) << ({0} & u64(31))) - u64(1)) << ({1} & u64(31))", None),
  "s_bfe_u32": ("u32", "R.bfe_u({0}, {1}, {1} >> u32(16))", "{r} != 0"),
  "s_bfe_i32": ("u32", "R.bfe_i({0}, {1}, ({1} >> u32(16)) & u32(0x7F))", "{r} != 0"),
  "s_absdiff_i32": ("i64", "np.abs({0} - {1})", "{r} != 0"),
  "s_pack_ll_b32_b16": ("u32", "({0} & u32(0xFFFF)) | ({1} << u32(16))", None),
  "s_pack_lh_b32_b16": ("u32", "({0} & u32(0xFFFF)) | ({1} & u32(0xFFFF0000))", None),
  "s_pack_hh_b32_b16": ("u32", "({0} >> u32(16)) | ({1} & u32(0xFFFF0000))", None),
}
SOP2_64 = {
  "s_and_b64": "{0} & {1}", "s_or_b64": "{0} | {1}", "s_xor_b64": "{0} ^ {1}", "s_nand_b64": "~({0} & {1})",
  "s_nor_b64": "~({0} | {1})", "s_xnor_b64": "~({0} ^ {1})", "s_and_not1_b64": "{0} & ~{1}",
  "s_or_not1_b64": "{0} | ~{1}",
}
SOPC = {"eq": "==", "lg": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _salu(g: Gen, pc: int, inst: Inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  if enc == "SOP2":
    if name in SOP2_32:
      ty, expr, scc = SOP2_32[name]
      a = g.raw_scalar(f["ssrc0"], inst, "u32")
      b = g.raw_scalar(f["ssrc1"], inst, "u32")
      if ty in ("u64", "i64", "i32"):
        a, b = f"np.asarray({a}).astype({ty})", f"np.asarray({b}).astype({ty})"
        if ty == "i64": a, b = f"np.asarray({g.raw_scalar(f['ssrc0'], inst, 'i32')}).astype(i64)", \
            f"np.asarray({g.raw_scalar(f['ssrc1'], inst, 'i32')}).astype(i64)"
        if ty == "i32": a, b = g.raw_scalar(f["ssrc0"], inst, "i32"), g.raw_scalar(f["ssrc1"], inst, "i32")
      r = g.tmp()
      g.emit(f"{r} = {expr.format(a, b)}")
      if scc: g.write_scc(scc.format(a, b, r=r))
      g.write_s(f["sdst"], f"np.asarray({r}).astype(u32)")
      return
    if name in ("s_addc_u32", "s_subb_u32"):
      a = f"np.asarray({g.raw_scalar(f['ssrc0'], inst)}).astype(u64)"
      b = f"np.asarray({g.raw_scalar(f['ssrc1'], inst)}).astype(u64)"
      r = g.tmp()
      if name == "s_addc_u32":
        g.emit(f"{r} = {a} + {b} + {g.scc()}.astype(u64)")
        g.write_scc(f"{r} >> u64(32)")
      else:
        g.emit(f"{r} = {a} - {b} - {g.scc()}.astype(u64)")
        g.write_scc(f"({b} + {g.scc()}.astype(u64)) > {a}")
      g.write_s(f["sdst"], f"R.lo32({r})")
      return
    if name in ("s_cselect_b32", "s_cselect_b64"):
      ty = "u64" if name.endswith("64") else "u32"
      a, b = g.raw_scalar(f["ssrc0"], inst, ty), g.raw_scalar(f["ssrc1"], inst, ty)
      expr = f"np.where({g.scc()} != 0, {a}, {b})"
      if ty == "u64": _sdst64(g, f["sdst"], expr)
      else: g.write_s(f["sdst"], expr)
      return
    if name in SOP2_64:
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u64")
      r = g.tmp()
      g.emit(f"{r} = np.asarray({SOP2_64[name].format(a, b)}, u64)")
      g.write_scc(f"{r} != 0")
      _sdst64(g, f["sdst"], r)
      return
    if name in ("s_lshl_b64", "s_lshr_b64", "s_ashr_i64"):
      a, b = g.raw_scalar(f["ssrc0"], inst, "u64"), g.raw_scalar(f["ssrc1"], inst, "u32")
      sh = f"(np.asarray({b}, u64) & u64(63))"
      expr = {"s_lshl_b64": f"np.asarray({a}, u64) << {sh}", "s_lshr_b64": f"np.asarray({a}, u64) >> {sh}",
              "s_ashr_i64": f"(np.asarray({a}, u64).view(i64) >> {sh}.astype(i64)).view(u64)"}[name]
      r = g.tmp()
      g.emit(f"{r} = {expr}")
      g.write_scc(f"{r} != 0")
      _sdst64(g, f["sdst"], r)
      return
    if name in ("s_bfe_u64", "s_bfe_i64"):
      raise Unsupported(inst, pc)
    raise Unsupported(inst, pc)
  if enc == "SOPC":
    parts = name.split("_")  # s_cmp_eq_u32
    if name.startswith("s_cmp_"):
      op, ty = parts[2], parts[3]
      t = {"i32": "i32", "u32": "u32", "u64": "u64"}[ty]
      a, b = g.raw_scalar(f["ssrc0"], inst, t), g.raw_scalar(f["ssrc1"], inst, t)
      g.write_scc(f"{a} {SOPC[op]} {b}")
      return
    if name in ("s_bitcmp0_b32", "s_bitcmp1_b32"):
      a, b = g.raw_scalar(f["ssrc0"], inst), g.raw_scalar(f["ssrc1"], inst)
      g.write_scc(f"((({a} >> ({b} & u32(31))) & u32(1)) == {1 if name.endswith('1_b32') else 0})")
      return
    raise Unsupported(inst, pc)
  if enc == "SOPK":
    simm = f["simm16"]
    sext = simm - 0x10000 if simm & 0x8000 else simm
    d = f["sdst"]
    if name == "s_movk_i32": return g.write_s(d, g.const(sext & 0xFFFFFFFF, "u32"))
    if name == "s_cmovk_i32":
      return g.write_s(d, f"np.where({g.scc()} != 0, {g.const(sext & 0xFFFFFFFF, 'u32')}, {g.s(d)})")
    if name.startswith("s_cmpk_"):
      op, ty = name.split("_")[2], name.split("_")[3]
      k = g.const(sext if ty == "i32" else simm, ty)
      g.write_scc(f"{g.raw_scalar(d, inst, ty)} {SOPC[op]} {k}")
      return
    if name == "s_addk_i32":
      r = g.tmp()
      g.emit(f"{r} = {g.raw_scalar(d, inst, 'i32')}.astype(i64) + {sext}")
      g.write_scc(f"({r} > 2147483647) | ({r} < -2147483648)")
      return g.write_s(d, f"{r}.astype(u32)")
    if name == "s_mulk_i32": return g.write_s(d, f"{g.s(d)} * {g.const(sext & 0xFFFFFFFF, 'u32')}")
    if name == "s_getreg_b32": return g.write_s(d, _getreg(g, simm))
    if name in ("s_setreg_b32", "s_setreg_imm32_b32"): return   # mode bits are not modelled
    if name == "s_version": return
    raise Unsupported(inst, pc)
  # SOP1
  d = f["sdst"]
  src = f["ssrc0"]
  if name == "s_mov_b32": return g.write_s(d, g.raw_scalar(src, inst))
  if name == "s_mov_b64": return _sdst64(g, d, g.raw_scalar(src, inst, "u64"))
  if name == "s_cmov_b32": return g.write_s(d, f"np.where({g.scc()} != 0, {g.raw_scalar(src, inst)}, {g.s(d)})")
  if name == "s_cmov_b64":
    return _sdst64(g, d, f"np.where({g.scc()} != 0, {g.raw_scalar(src, inst, 'u64')}, "
                         f"R.p64({g.s(d)}, {g.s(d + 1)}))")
  if name in ("s_not_b32", "s_brev_b32", "s_bcnt0_i32_b32", "s_bcnt1_i32_b32", "s_ctz_i32_b32", "s_clz_i32_u32",
              "s_sext_i32_i8", "s_sext_i32_i16", "s_abs_i32", "s_quadmask_b32", "s_wqm_b32"):
    a = g.raw_scalar(src, inst)
    expr = {"s_not_b32": f"~np.asarray({a}, u32)", "s_brev_b32": f"R.brev32({a})",
            "s_bcnt0_i32_b32": f"u32(32) - R.popcount({a})", "s_bcnt1_i32_b32": f"R.popcount({a})",
            "s_ctz_i32_b32": f"R.ctz32({a})", "s_clz_i32_u32": f"R.clz32({a})",
            "s_sext_i32_i8": f"np.asarray({a}, u32).astype(u8).view(i8).astype(i32).view(u32)",
            "s_sext_i32_i16": f"np.asarray({a}, u32).astype(u16).view(i16).astype(i32).view(u32)",
            "s_abs_i32": f"np.abs(np.asarray({a}, u32).view(i32)).view(u32)",
            "s_wqm_b32": f"R.wqm({a})", "s_quadmask_b32": f"R.quadmask({a})"}[name]
    r = g.tmp()
    g.emit(f"{r} = np.asarray({expr}).astype(u32)")
    if name in ("s_not_b32", "s_bcnt0_i32_b32", "s_bcnt1_i32_b32", "s_abs_i32", "s_wqm_b32", "s_quadmask_b32"):
      g.write_scc(f"{r} != 0")
    return g.write_s(d, r)
  if name in ("s_not_b64",):
    r = g.tmp()
    g.emit(f"{r} = ~np.asarray({g.raw_scalar(src, inst, 'u64')}, u64)")
    g.write_scc(f"{r} != 0")
    return _sdst64(g, d, r)
  if name in ("s_bitset0_b32", "s_bitset1_b32"):
    bit = f"(u32(1) << ({g.raw_scalar(src, inst)} & u32(31)))"
    expr = f"{g.s(d)} & ~{bit}" if name == "s_bitset0_b32" else f"{g.s(d)} | {bit}"
    return g.write_s(d, expr)
  if name.endswith("saveexec_b32") or name.endswith("wrexec_b32"):
    a = g.raw_scalar(src, inst)
    e = g.s(EXEC)
    op = name[2:-4]
    expr = {"and_saveexec": f"{a} & {e}", "or_saveexec": f"{a} | {e}", "xor_saveexec": f"{a} ^ {e}",
            "nand_saveexec": f"~({a} & {e})", "nor_saveexec": f"~({a} | {e})", "xnor_saveexec": f"~({a} ^ {e})",
            "and_not0_saveexec": f"~np.asarray({a}, u32) & {e}", "or_not0_saveexec": f"~np.asarray({a}, u32) | {e}",
            "and_not1_saveexec": f"{a} & ~{e}", "or_not1_saveexec": f"{a} | ~{e}",
            "and_not0_wrexec": f"~np.asarray({a}, u32) & {e}", "and_not1_wrexec": f"{a} & ~{e}"}.get(op)
    if expr is None: raise Unsupported(inst, pc)
    old = g.tmp()
    r = g.tmp()
    g.emit(f"{old} = {e}")
    g.emit(f"{r} = np.asarray({expr}).astype(u32)")
    g.write_s(EXEC, r)
    g.write_scc(f"{r} != 0")
    if "wrexec" in name: return g.write_s(d, r)
    return g.write_s(d, old)
  if name == "s_getpc_b64":
    return _sdst64(g, d, g.const(pc + 4, "u64"))
  if name in ("s_setpc_b64", "s_swappc_b64"):
    target = g.tmp()
    g.emit(f"{target} = R.p64({g.raw_scalar(src, inst)}, {g.raw_scalar(src + 1, inst)}).astype(i64)")
    if name == "s_swappc_b64": _sdst64(g, d, g.const(pc + 4, "u64"))
    g.next_pc = f"(int({target}[0]) if ({target} == {target}[0]).all() else {target})"
    return
  if name in ("s_and_b32", "s_or_b32"):
    raise Unsupported(inst, pc)
  raise Unsupported(inst, pc)


def _getreg(g: Gen, simm: int) -> str:
  """S_GETREG_B32 hwreg(id, offset, size): the wave-id registers are not modelled beyond HW_ID fields of 0;
  MODE reads its reset value."""
  reg, off, size = simm & 0x3F, (simm >> 6) & 0x1F, ((simm >> 11) & 0x1F) + 1
  value = 0
  if reg == 1: value = 0x000003F0  # MODE: denorm modes allow denormals (ISA reset value for compute)
  return g.const((value >> off) & ((1 << size) - 1), "u32")


# ---- SMEM ----
def _smem(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if not name.startswith("s_load_"): raise Unsupported(inst, pc)
  ndw = {"b32": 1, "b64": 2, "b128": 4, "b256": 8, "b512": 16}[name.split("_")[-1]]
  base = f["sbase"] * 2
  off = f["offset"]
  if off & 0x100000: off -= 0x200000
  addr = f"(R.p64({g.s(base)}, {g.s(base + 1)}).astype(i64) + {off})"
  if f["soffset"] != NULL: addr = f"({addr} + {g.s(f['soffset'])}.astype(i64))"
  t = g.tmp()
  g.emit(f"{t} = M.sload({addr}.astype(u64), {ndw})")
  for k in range(ndw): g.write_s(f["sdata"] + k, f"{t}[{k}]")


# ---- VALU ----
def _valu(g: Gen, pc: int, inst: Inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  vop3 = enc in ("VOP3", "VOP3SD")
  srcs = [f["src0"], f.get("vsrc1", 0) + 256] if not vop3 else [f["src0"], f["src1"], f["src2"]]
  absm = f["abs"] if enc == "VOP3" else 0
  negm = f["neg"] if vop3 else 0
  opsel = f["opsel"] if enc == "VOP3" else 0
  clamp = f["clamp"] if vop3 else 0
  omod = f["omod"] if vop3 else 0

  if name.startswith("v_cmp_") or name.startswith("v_cmpx_"):
    return _vopc(g, pc, inst, srcs, absm, negm, opsel)
  if name == "v_cndmask_b32":
    mask = g.lane_mask_src(f["src2"] if vop3 else VCC, inst)
    a = _src_mods(g, g.vsrc(srcs[0], inst, "f32" if (absm | negm) & 1 else "u32"), "f32", 0, absm, negm)
    b = _src_mods(g, g.vsrc(srcs[1], inst, "f32" if (absm | negm) & 2 else "u32"), "f32", 1, absm, negm)
    if (absm | negm) & 3:
      a = a if not (absm | negm) & 1 else f"np.asarray({a}, f32).view(u32)"
      b = b if not (absm | negm) & 2 else f"np.asarray({b}, f32).view(u32)"
    return g.write_v(f["vdst"], f"np.where({mask}, {b}, {a})")
  if name in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32", "v_sub_co_ci_u32",
              "v_subrev_co_ci_u32"):
    # u32 arithmetic with carry/borrow detection (cheaper than widening to 64 bits)
    a = g.vsrc(srcs[0], inst, "u32")
    b = g.vsrc(srcs[1], inst, "u32")
    if "subrev" in name: a, b = b, a
    r, cv = g.tmp(), g.tmp()
    add = "add" in name
    if "_ci_" in name:
      cin = g.lane_mask_src(f["src2"] if vop3 else VCC, inst)
      t, c = g.tmp(), g.tmp()
      g.emit(f"{c} = {cin}")
      if add:
        g.emit(f"{t} = {a} + {b}; {r} = {t} + {c}; {cv} = ({t} < {a}) | ({r} < {t})")
      else:
        g.emit(f"{t} = {a} - {b}; {r} = {t} - {c}; {cv} = ({b} > {a}) | ({c} > {t})")
    elif add:
      g.emit(f"{r} = {a} + {b}; {cv} = {r} < {a}")
    else:
      g.emit(f"{r} = {a} - {b}; {cv} = {b} > {a}")
    g.write_v(f["vdst"], r)
    return g.write_lanes(f["sdst"] if vop3 else VCC, cv)
  if name in ("v_mad_u64_u32", "v_mad_i64_i32"):
    signed = name == "v_mad_i64_i32"
    ty = "i32" if signed else "u32"
    a = f"np.asarray({g.vsrc(srcs[0], inst, ty)}).astype({'i64' if signed else 'u64'})"
    b = f"np.asarray({g.vsrc(srcs[1], inst, ty)}).astype({'i64' if signed else 'u64'})"
    c = g.vsrc(srcs[2], inst, "i64" if signed else "u64")
    r = g.tmp()
    if signed:
      g.emit(f"{r} = ({a} * {b}) + {c}")
      g.write_v_typed(f["vdst"], r, "i64")
      return g.write_lanes(f["sdst"], "np.zeros((n, 32), bool)")
    p = g.tmp()
    g.emit(f"{p} = {a} * {b}")
    g.emit(f"{r} = {p} + {c}")
    g.write_v_typed(f["vdst"], r, "u64")
    return g.write_lanes(f["sdst"], f"{r} < {p}")
  if name in ("v_div_scale_f32", "v_div_scale_f64"):
    ty = name[-3:]
    a, b, c = (_src_mods(g, g.vsrc(srcs[i], inst, ty), ty, i, 0, negm) for i in range(3))
    r = g.tmp()
    g.emit(f"{r}, {r}c = R.div_scale({a}, {b}, {c}, {ty})")
    g.write_v_typed(f["vdst"], r, ty)
    return g.write_lanes(f["sdst"], f"{r}c")
  if name in ("v_div_fmas_f32", "v_div_fmas_f64"):
    ty = name[-3:]
    a, b, c = (_src_mods(g, g.vsrc(srcs[i], inst, ty), ty, i, absm, negm) for i in range(3))
    return g.write_v_typed(f["vdst"], _out_mods(f"R.div_fmas({a}, {b}, {c}, R.lanes({g.s(VCC)}), {ty})", ty, clamp,
                                                omod), ty)
  if name == "v_readlane_b32":
    lane = g.raw_scalar(srcs[1], inst) if vop3 else None
    return g.write_s(f["vdst"], f"np.broadcast_to({g.vsrc(srcs[0], inst, 'u32')}, (n, 32))"
                                f"[np.arange(n), np.asarray({lane}, u32) & u32(31)]")
  if name == "v_readfirstlane_b32":
    v = g.vsrc(srcs[0], inst, "u32")
    first = f"np.where({g.s(EXEC)} == 0, u32(0), R.ctz32({g.s(EXEC)}))"
    return g.write_s(f["vdst"], f"np.broadcast_to({v}, (n, 32))[np.arange(n), {first}]")
  if name == "v_writelane_b32":
    val = g.raw_scalar(srcs[0], inst)
    lane = g.raw_scalar(srcs[1], inst)
    d = f["vdst"]
    t = g.tmp()
    g.emit(f"{t} = {g.v(d)}.copy(); {t}[np.arange(n), np.asarray({lane}, u32) & u32(31)] = {val}")
    g.vregs.add(d)
    g.v_written.add(d)
    g.emit(f"v{d} = {t}")
    return
  if name in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32"):
    a = g.vsrc(srcs[0], inst, "u32")
    b = g.vsrc(srcs[1], inst, "u32")
    if name == "v_mbcnt_hi_u32_b32": return g.write_v(f["vdst"], f"np.asarray({b}, u32) + u32(0)")   # wave32: hi = 0
    return g.write_v(f["vdst"], f"R.popcount(np.asarray({a}, u32) & R.LANE_BELOW) + {b}")
  if name == "v_swap_b32":
    a, b = f["vdst"], srcs[0] - 256
    ta, tb = g.tmp(), g.tmp()
    g.emit(f"{ta} = {g.v(a)}; {tb} = {g.v(b)}")
    g.write_v(a, tb)
    return g.write_v(b, ta)
  if name == "v_nop": return

  op = OPS.get(name)
  if op is None: raise Unsupported(inst, pc)
  dty, stys, tmpl = op
  args = []
  nsrc = len(stys)
  if name in ("v_fmac_f32", "v_fmac_f16"):  # D = S0 * S1 + D
    srcs = srcs[:2] + [f["vdst"] + 256]
  if name in ("v_fmaak_f32", "v_fmamk_f32", "v_fmaak_f16", "v_fmamk_f16"):
    srcs = srcs[:2] + [LIT]
  for i, ty in enumerate(stys):
    hi = bool(opsel >> i & 1)
    e = g.vsrc(srcs[i], inst, ty, hi)
    args.append(_src_mods(g, e, ty, i, absm, negm))
  expr = _out_mods(tmpl.format(*args[:nsrc]), dty, clamp, omod)
  g.write_v_typed(f["vdst"], expr, dty, opsel_hi=bool(opsel >> 3 & 1))


def _vopc(g: Gen, pc: int, inst: Inst, srcs, absm, negm, opsel) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  parts = name.split("_")  # v_cmp[x]_op_type
  cmpx = parts[1] == "cmpx"
  op, ty = parts[2], parts[3]
  if op == "class":
    a = _src_mods(g, g.vsrc(srcs[0], inst, ty, bool(opsel & 1)), ty, 0, absm, negm)
    b = g.vsrc(srcs[1], inst, "u32")
    expr = f"R.cmp_class({a}, {b})"
  else:
    table = CMP_F if ty in FLOATS else CMP_I
    if op not in table: raise Unsupported(inst, pc)
    a = _src_mods(g, g.vsrc(srcs[0], inst, ty, bool(opsel & 1)), ty, 0, absm, negm)
    b = _src_mods(g, g.vsrc(srcs[1], inst, ty, bool(opsel & 2)), ty, 1, absm, negm)
    expr = table[op].format(a, b)
  t = g.tmp()
  g.emit(f"{t} = np.broadcast_to({expr}, (n, 32))")
  if cmpx:
    g.write_s(EXEC, f"R.pack({t} if ef else ({t} & em))")
    return
  sdst = f["vdst"] if enc == "VOP3" else VCC
  g.write_lanes(sdst, t)


def _vop3p(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if name in ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"):
    return _fma_mix(g, pc, inst)
  if name == "v_dot2_f32_f16":
    return _dot2(g, pc, inst)
  op = PACKED.get(name)
  if op is None: raise Unsupported(inst, pc)
  ety, arity, tmpl = op
  srcs = [f["src0"], f["src1"], f["src2"]]
  halves = []
  for hi_part in (False, True):
    args = []
    for i in range(arity):
      sel = (f["opsel_hi"] if hi_part else f["opsel"]) >> i & 1
      e = g.vsrc(srcs[i], inst, ety, bool(sel))
      if ety == "f16":
        negbits = f["neg_hi"] if hi_part else f["neg"]
        if negbits >> i & 1: e = f"(-{e})"
      args.append(e)
    r = g.tmp()
    g.emit(f"{r} = np.asarray({tmpl.format(*args)}).astype({ety})")
    if f["clamp"] and ety == "f16": g.emit(f"{r} = R.clamp01({r})")
    halves.append(r)
  g.write_v(f["vdst"], f"R.pack16({halves[0]}, {halves[1]})")


def _fma_mix(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  srcs = [f["src0"], f["src1"], f["src2"]]
  args = []
  for i in range(3):
    if f["opsel_hi"] >> i & 1:   # f16 source, half chosen by opsel
      e = f"np.asarray({g.vsrc(srcs[i], inst, 'f16', bool(f['opsel'] >> i & 1))}, f32)"
    else:
      e = g.vsrc(srcs[i], inst, "f32")
    if f["neg_hi"] >> i & 1: e = f"np.abs({e})"
    if f["neg"] >> i & 1: e = f"(-{e})"
    args.append(e)
  r = g.tmp()
  g.emit(f"{r} = R.fma32({args[0]}, {args[1]}, {args[2]})")
  if f["clamp"]: g.emit(f"{r} = R.clamp01({r})")
  if inst.name == "v_fma_mix_f32": return g.write_v(f["vdst"], f"R.f32bits({r})")
  g.write_v(f["vdst"], f"R.put_half({g.v(f['vdst'])}, {r}.astype(f16), {inst.name == 'v_fma_mixhi_f16'})")


def _dot2(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  a_lo, a_hi = (g.vsrc(f["src0"], inst, "f16", bool(f[k] & 1)) for k in ("opsel", "opsel_hi"))
  b_lo, b_hi = (g.vsrc(f["src1"], inst, "f16", bool(f[k] & 2)) for k in ("opsel", "opsel_hi"))
  c = g.vsrc(f["src2"], inst, "f32")
  g.write_v(f["vdst"], f"R.f32bits((np.asarray({a_lo}, f64) * {b_lo} + np.asarray({a_hi}, f64) * {b_hi} + {c}))")


def _vopd(g: Gen, pc: int, inst: Inst) -> None:
  f = inst.fields
  results = []
  for side in ("x", "y"):
    sub = DUAL.get(f["name" + side])
    if sub is None: raise Unsupported(inst, pc)
    s0, s1, dst = f["src0" + side], f["vsrc1" + side] + 256, f["vdst" + side]
    if sub == "v_cndmask_b32":
      expr = f"np.where({g.lane_mask_src(VCC, inst)}, {g.vsrc(s1, inst, 'u32')}, {g.vsrc(s0, inst, 'u32')})"
      results.append((dst, expr, "u32"))
      continue
    dty, stys, tmpl = OPS[sub]
    srcs = [s0, s1]
    if sub == "v_fmac_f32": srcs.append(dst + 256)
    if sub in ("v_fmaak_f32", "v_fmamk_f32"): srcs.append(LIT)
    args = [g.vsrc(srcs[i], inst, ty) for i, ty in enumerate(stys)]
    results.append((dst, tmpl.format(*args), dty))
  temps = []
  for dst, expr, ty in results:
    t = g.tmp()
    g.emit(f"{t} = {'R.f32bits' if ty == 'f32' else 'R.ibits'}({expr})")
    temps.append((dst, t))
  for dst, t in temps: g.write_v(dst, t)


# ---- DS (LDS) ----
DS_ATOMIC = {"add": "add", "sub": "sub", "min_i32": "smin", "max_i32": "smax", "min_u32": "umin", "max_u32": "umax",
             "and": "and", "or": "or", "xor": "xor", "inc": "inc", "dec": "dec", "add_f32": "add_f32",
             "min_f32": "min_f32", "max_f32": "max_f32", "storexchg": "swap", "cmpstore": "cmpswap"}


def _ds(g: Gen, pc: int, inst: Inst) -> None:
  name, f = inst.name, inst.fields
  if f["gds"]: raise Unsupported(inst, pc, "uses GDS")
  g.uses_wid = True
  addr = g.v(f["addr"])
  off = f["offset0"] | f["offset1"] << 8
  sizes = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2}
  if "_2addr" in name:
    stride64 = "stride64" in name
    size = 8 if name.endswith("b64") else 4
    scale = size * (64 if stride64 else 1)
    a0 = f"({addr} + u32({f['offset0'] * scale}))"
    a1 = f"({addr} + u32({f['offset1'] * scale}))"
    if name.startswith("ds_load_2addr"):
      t0, t1 = g.tmp(), g.tmp()
      g.emit(f"{t0} = M.lds_load({a0}, wid, em, ef, {size})")
      g.emit(f"{t1} = M.lds_load({a1}, wid, em, ef, {size})")
      k = 0
      for t in (t0, t1):
        for j in range(size // 4):
          g.write_v(f["vdst"] + k, f"{t}[{j}]")
          k += 1
      return
    if name.startswith("ds_store_2addr"):
      nd = size // 4
      d0 = [g.v(f["data0"] + j) for j in range(nd)]
      d1 = [g.v(f["data1"] + j) for j in range(nd)]
      g.emit(f"M.lds_store({a0}, wid, em, ef, [{', '.join(d0)}], {size})")
      g.emit(f"M.lds_store({a1}, wid, em, ef, [{', '.join(d1)}], {size})")
      return
    raise Unsupported(inst, pc)
  a = f"({addr} + u32({off}))"
  if name.startswith("ds_load_"):
    kind = name[len("ds_load_"):]
    size = sizes[kind]
    t = g.tmp()
    if size < 4:
      g.emit(f"{t} = M.lds_load({a}, wid, em, ef, {size}, {kind[0] == 'i'})")
      return g.write_v(f["vdst"], t)
    g.emit(f"{t} = M.lds_load({a}, wid, em, ef, {size})")
    for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
    return
  if name.startswith("ds_store_"):
    kind = name[len("ds_store_"):]
    size = sizes.get(kind)
    if size is None: raise Unsupported(inst, pc)
    data = [g.v(f["data0"] + j) for j in range(max(1, size // 4))]
    g.emit(f"M.lds_store({a}, wid, em, ef, [{', '.join(data)}], {size})")
    return
  base = name[3:]
  rtn = "_rtn" in base
  base = base.replace("_rtn", "")
  for suffix in ("_u32", "_b32"):
    if base.endswith(suffix) and base[:-4] in DS_ATOMIC: base = base[:-4]
  op = DS_ATOMIC.get(base)
  if op is None: raise Unsupported(inst, pc)
  data = g.v(f["data0"])
  cmp = g.v(f["data1"]) if op == "cmpswap" else "None"
  t = g.tmp()
  g.emit(f"{t} = M.lds_atomic({a}, wid, em, ef, '{op}', {data}, {cmp})")
  if rtn: g.write_v(f["vdst"], t)


# ---- FLAT / GLOBAL / SCRATCH ----
GLOBAL_ATOMIC = {"add_u32": "add", "sub_u32": "sub", "min_i32": "smin", "max_i32": "smax", "min_u32": "umin",
                 "max_u32": "umax", "and_b32": "and", "or_b32": "or", "xor_b32": "xor", "inc_u32": "inc",
                 "dec_u32": "dec", "swap_b32": "swap", "cmpswap_b32": "cmpswap", "add_f32": "add_f32",
                 "min_f32": "min_f32", "max_f32": "max_f32"}
GLOBAL_ATOMIC64 = {"add_u64": "add", "sub_u64": "sub", "min_i64": "smin", "max_i64": "smax", "min_u64": "umin",
                   "max_u64": "umax", "and_b64": "and", "or_b64": "or", "xor_b64": "xor", "swap_b64": "swap",
                   "cmpswap_b64": "cmpswap", "inc_u64": "inc", "dec_u64": "dec"}


def _vmem(g: Gen, pc: int, inst: Inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  op = name.split("_", 1)[1]   # load_b32, store_b32, atomic_add_u32 ...
  sizes = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1, "u16": 2, "i16": 2, "b8": 1, "b16": 2}
  if enc == "SCRATCH":
    g.uses_wid = True
    parts = []
    if f["saddr"] != NULL: parts.append(f"{g.s(f['saddr'])}[:, None].astype(i64)")
    if f["sve"]: parts.append(f"{g.v(f['addr'])}.astype(i64)")
    parts.append(f"i64({f['offset']})")
    offs = " + ".join(parts)
    t = g.tmp()
    if op.startswith("load_"):
      kind = op[5:]
      if kind.startswith("d16"): raise Unsupported(inst, pc)
      size = sizes[kind]
      if size < 4:
        g.emit(f"{t} = M.scratch_load({offs}, wid, em, ef, {size}, {kind[0] == 'i'})")
        return g.write_v(f["vdst"], t)
      g.emit(f"{t} = M.scratch_load({offs}, wid, em, ef, {size})")
      for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
      return
    if op.startswith("store_"):
      kind = op[6:]
      if kind.startswith("d16"): raise Unsupported(inst, pc)
      size = sizes[kind]
      data = [g.v(f["data"] + j) for j in range(max(1, size // 4))]
      g.emit(f"M.scratch_store({offs}, wid, em, ef, [{', '.join(data)}], {size})")
      return
    raise Unsupported(inst, pc)
  # GLOBAL and FLAT (FLAT addresses are treated as global: the apertures are not modelled)
  if enc == "GLOBAL" and f["saddr"] != NULL:
    base = f"R.p64({g.s(f['saddr'])}, {g.s(f['saddr'] + 1)})[:, None]"
    addr = f"({base} + {g.v(f['addr'])}.astype(u64) + u64({f['offset'] & 0xFFFFFFFFFFFFFFFF}))"
  else:
    addr = f"R.p64({g.v(f['addr'])}, {g.v(f['addr'] + 1)})"
    if f["offset"]: addr = f"({addr} + u64({f['offset'] & 0xFFFFFFFFFFFFFFFF}))"
  t = g.tmp()
  if op.startswith("load_"):
    kind = op[5:]
    if kind.startswith("d16"):
      hi = "hi" in kind
      k2 = kind.replace("d16_hi_", "").replace("d16_", "")
      size = {"b16": 2, "u8": 1, "i8": 1}[k2]
      g.emit(f"{t} = M.gload_sub({addr}, em, ef, {size}, {k2[0] == 'i'})")
      return g.write_v(f["vdst"], f"R.put_half({g.v(f['vdst'])}, {t}, {hi})")
    size = sizes[kind]
    if size < 4:
      g.emit(f"{t} = M.gload_sub({addr}, em, ef, {size}, {kind[0] == 'i'})")
      return g.write_v(f["vdst"], t)
    g.emit(f"{t} = M.gload({addr}, em, ef, {size // 4})")
    for j in range(size // 4): g.write_v(f["vdst"] + j, f"{t}[{j}]")
    return
  if op.startswith("store_"):
    kind = op[6:]
    if kind.startswith("d16_hi"):
      size = {"b16": 2, "b8": 1}[kind[7:]]
      g.emit(f"M.gstore({addr}, em, ef, [{g.v(f['data'])} >> u32(16)], {size})")
      return
    size = sizes[kind]
    data = [g.v(f["data"] + j) for j in range(max(1, size // 4))]
    g.emit(f"M.gstore({addr}, em, ef, [{', '.join(data)}], {size if size < 4 else None})")
    return
  if op.startswith("atomic_"):
    kind = op[7:]
    if kind in GLOBAL_ATOMIC:
      aop = GLOBAL_ATOMIC[kind]
      data = g.v(f["data"])
      cmp = g.v(f["data"] + 1) if aop == "cmpswap" else "None"
      g.emit(f"{t} = M.gatomic({addr}, em, ef, '{aop}', {data}, {cmp}, 1)")
      if f["glc"]: g.write_v(f["vdst"], t)
      return
    if kind in GLOBAL_ATOMIC64:
      aop = GLOBAL_ATOMIC64[kind]
      data = f"R.p64({g.v(f['data'])}, {g.v(f['data'] + 1)})"
      cmp = f"R.p64({g.v(f['data'] + 2)}, {g.v(f['data'] + 3)})" if aop == "cmpswap" else "None"
      g.emit(f"{t} = M.gatomic({addr}, em, ef, '{aop}', {data}, {cmp}, 2)")
      if f["glc"]:
        g.write_v(f["vdst"], f"R.lo32({t})")
        g.write_v(f["vdst"] + 1, f"({t} >> u64(32)).astype(u32)")
      return
  raise Unsupported(inst, pc)
