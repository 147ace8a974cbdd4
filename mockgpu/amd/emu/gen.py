"""Source generation for translated blocks: register locals, operand decoding (inline constants, literals,
SGPR/VGPR operands, 16-bit halves, 64-bit pairs), masked writes and the lazily packed lane masks.

Operand encodings (RDNA3 ISA, "Scalar/vector source operands"): 0-105 SGPR, 106/107 VCC_LO/HI, 108-123 TTMP,
124 NULL, 125 M0, 126/127 EXEC_LO/HI, 128-192 integers 0..64, 193-208 -1..-16, 235-238 apertures, 240-248 float
constants, 251 VCCZ, 252 EXECZ, 253 SCC, 255 literal, 256-511 VGPRs.
"""
from __future__ import annotations

import re

import numpy as np

from ....errors import GPUFault
from .decode import Inst

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
    self.trivial = False     # no computation (e.g. s_endpgm alone): runs without numpy's error state set
    self.ends = False        # ends every wave it runs (s_endpgm): writes no register back (see translate._assemble)
    self.sregs: tuple = ()   # the SGPRs it reads or writes (its locals)
    self.private = False     # has DS/SCRATCH/FLAT instructions: may read or write LDS or scratch
    # the code-bytes check (engine._code_unchanged): a ctypes view of [start, end) and the GPUMemory mapping generation
    # at which that range was last seen mapped (the view is read only while the generation is unchanged)
    self.code_view = None
    self.mapped_generation = -1


class Gen:
  """Source generator for one block."""

  def __init__(self, start: int):
    self.start = start
    self.lines: list[str] = []
    self.sregs: set[int] = set()
    self.vregs: set[int] = set()
    self.s_written: set[int] = set()
    self.v_written: set[int] = set()
    self.scc_used = False        # the block reads or writes SCC (informational)
    self.scc_written = False
    self.consts: dict[str, object] = {}
    self.ntmp = 0
    self.uses_wid = False        # the block addresses LDS or scratch (needs the wave ids; informational)
    self.next_pc = None          # expression of the next pc
    self.barrier = False
    self.ftz = {}                        # float type -> (flush input denormals, flush output denormals)
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
    self.emit(f"{t} = R.bcast({expr}, (n, 32))")
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
      # SRC_SHARED_BASE/LIMIT, SRC_PRIVATE_BASE/LIMIT: 64-bit aperture bounds (rt.SHARED_HI / rt.PRIVATE_HI)
      hi = 0x10000 if code in (235, 236) else 0x20000
      value = (hi << 32) | (0xFFFFFFFF if code in (236, 238) else 0)
      if ty in WIDE: return self.const(value, NP_TYPE[ty]) if ty != "f64" else \
          self.const(np.uint64(value).view(np.float64), "f64")
      return self._typed32(self.const(value & 0xFFFFFFFF, "u32"), ty)
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
