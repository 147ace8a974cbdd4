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
         "s_round_mode", "s_denorm_mode", "s_version", "s_code_end_nop",
         # gfx12: the work-group barrier is s_barrier_signal -1 then s_barrier_wait -1; the emulator holds a wave at
         # the wait until every live wave of its group has reached one (RDNA4 ISA "S_BARRIER_WAIT"), so the signal
         # itself changes nothing. Cache control of RDNA4's GLOBAL_INV/WB/WBINV: memory is coherent here.
         "s_barrier_signal", "global_inv", "global_wb", "global_wbinv",
         "buffer_wbl2", "buffer_inv", "buffer_wbinvl1", "buffer_wbinvl1_vol"}
TERMINATORS = {"s_branch", "s_cbranch_scc0", "s_cbranch_scc1", "s_cbranch_vccz", "s_cbranch_vccnz",
               "s_cbranch_execz", "s_cbranch_execnz", "s_endpgm", "s_endpgm_saved", "s_barrier", "s_barrier_wait",
               "s_setpc_b64",
               "s_swappc_b64", "s_sethalt", "s_trap"}
MAX_BLOCK = 2000


_ASSIGNS_EXEC = re.compile(r"(^|;)\s*(em|ef)(\s*,\s*(em|ef))?\s*=[^=]")


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
  """Source generator for one block of `arch` code running in waves of `lanes` (32 or 64) lanes.

  Wave64 (gfx942; RDNA in wave64 mode): lane masks (EXEC, VCC, a VOPC/carry destination, a v_cndmask selector) are
  SGPR pairs s[r:r+1] with r even, bit i of the pair = lane i (MI300 ISA "EXECute mask", "VCC"); VGPR values are
  (n, 64) arrays. Generated code sees `L` (lanes) and `nl` = (n, L)."""

  def __init__(self, start: int, arch: str = "gfx1100", lanes: int = 32):
    self.start = start
    self.arch, self.lanes, self.wave64 = arch, lanes, lanes == 64
    # gfx10+: operand 124 is NULL (reads 0, writes dropped); gfx9 has no NULL: 124 is M0, an ordinary register here
    self.null = None if arch == "gfx942" else NULL
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
    self.lanes_of: dict[int, str] = {}   # SGPR (wave64: even SGPR of the pair) -> local (n, L) bool of its lanes
    self.pending: set[int] = set()       # SGPRs (pairs) whose packed value is not computed yet
    # VGPR pairs written by a 64-bit result in this block: r -> (its u64 local, exec version): a later 64-bit read
    # of v[r:r+1] reuses that local instead of interleaving the halves again (R.p64), when every lane was written
    # (ef) under the same EXEC (no em/ef assignment since: exec_version)
    self.wide: dict[int, tuple[str, int]] = {}
    self.exec_version = 0
    # ... and the VGPRs whose 32-bit half of such a result is not computed yet: r -> (u64 local, 0 = low / 1 = high
    # half). A half is computed (flush_wide) only when it is read, before EXEC changes, and before the block's
    # registers are stored; a write of the register under the same EXEC just drops it. A 64-bit address or operand
    # consumed as such, or a value dead at the end of the program, never pays for its halves.
    self.vpending: dict[int, tuple[str, int]] = {}

  # ---- helpers ----
  def emit(self, line: str) -> None:
    if _ASSIGNS_EXEC.search(line):
      if self.vpending: self.flush_wide()     # pending halves are written under the EXEC they were computed with
      self.exec_version += 1
    self.lines.append(line)

  def flush_wide(self, r: int | None = None) -> None:
    """Compute the pending 32-bit half in VGPR r (None: every pending half)."""
    for k in (list(self.vpending) if r is None else [r] if r in self.vpending else []):
      t, hi = self.vpending.pop(k)
      keep = {q: self.wide[q] for q in (k, k - 1) if q in self.wide}   # the pair still holds that 64-bit value
      self._store_v(k, f"({t} >> u64(32)).astype(u32)" if hi else f"R.lo32({t})")
      self.wide.update(keep)

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
    if r == self.null: return self.const(0, "u32")
    if r > 127: raise ValueError(r)
    self.sregs.add(r)
    self.materialize(r)
    return f"s{r}"

  def exec_regs(self) -> set:
    return {EXEC, EXEC + 1} if self.wave64 else {EXEC}

  def mask_key(self, r: int) -> int:
    """The register that names r's lane mask: r (wave32) or the even SGPR of r's pair (wave64)."""
    return r & ~1 if self.wave64 else r

  def materialize(self, r: int) -> None:
    k = self.mask_key(r)
    if k in self.pending:
      self.pending.discard(k)
      self.emit(self.pack_line(k))

  def pack_line(self, k: int) -> str:
    """The statement that packs the pending lane mask of k into its SGPR(s)."""
    if self.wave64: return f"s{k}, s{k + 1} = R.pack2({self.lanes_of[k]})"
    return f"s{k} = R.pack({self.lanes_of[k]})"

  def exec_line(self) -> str:
    """The statement that (re)computes ef (every lane active) and em (the (n, L) active lanes) from EXEC."""
    if self.wave64: return "ef = R.all_ones2(s126, s127); em = None if ef else R.lanes2(s126, s127)"
    return "ef = R.all_ones(s126); em = None if ef else R.lanes(s126)"

  def mask_nonzero(self, r: int) -> str:
    """An (n,) bool expression: the wave mask in r (wave64: the pair r, r+1) has a lane set."""
    if self.wave64: return f"(({self.s(r)} | {self.s(r + 1)}) != 0)"
    return f"({self.s(r)} != 0)"

  def v(self, r: int) -> str:
    if r > 511: raise ValueError(r)      # 256-511: gfx942's AccVGPRs (decode.ACC_BASE)
    if self.vpending: self.flush_wide(r)
    self.vregs.add(r)
    return f"v{r}"

  def scc(self) -> str:
    self.scc_used = True
    return "scc"

  # ---- writes ----
  def write_s(self, r: int, expr: str, exec_update: bool = True) -> None:
    """Write an (n,) u32 value to SGPR r (exec_update=False: the caller writes EXEC's other half next and
    recomputes the lanes after that)."""
    if r == self.null: return
    if r > 127: raise GPUFault(f"scalar destination {r} is not a register", kind="illegal instruction")
    k = self.mask_key(r)
    if self.wave64 and k in self.pending: self.materialize(k)   # the pair's other half keeps its packed value
    self.sregs.add(r)
    self.s_written.add(r)
    self.pending.discard(k)
    self.lanes_of.pop(k, None)
    if re.fullmatch(r"[sv]\d+|scc", expr.strip()): expr = f"{expr}.copy()"   # never alias two registers
    self.emit(f"s{r} = R.sfix({expr}, n)")
    if r in (EXEC, EXEC + 1) and exec_update and (r == EXEC or self.wave64): self.emit_exec_update()

  def write_scc(self, expr: str) -> None:
    self.scc_used = self.scc_written = True
    self.emit(f"scc = np.asarray({expr}).astype(u32)")

  def emit_exec_update(self) -> None:
    if self.wave64: self.sregs.update((EXEC, EXEC + 1))
    self.emit(self.exec_line())

  def write_v(self, r: int, expr: str) -> None:
    """Write a u32 (n, L) value to VGPR r for the active lanes."""
    # a pending half of r is overwritten in the same lanes (EXEC has not changed since: see emit)
    self.vpending.pop(r, None)
    self._store_v(r, expr)

  def _store_v(self, r: int, expr: str) -> None:
    self.wide.pop(r, None)
    self.wide.pop(r - 1, None)
    self.vregs.add(r)
    self.v_written.add(r)
    t = self.tmp()
    if re.fullmatch(r"[sv]\d+", expr.strip()): expr = f"{expr}.copy()"   # never alias two registers
    self.emit(f"{t} = {expr}")
    self.emit(f"v{r} = R.vfix({t}, nl) if ef else np.where(em, {t}, v{r})")

  def write_v_typed(self, r: int, expr: str, ty: str, opsel_hi: bool = False, zero_hi: bool = False) -> None:
    """Write a typed VALU result to VGPR r (a pair for 64-bit types, a half for 16-bit types; zero_hi: a 16-bit
    result zero-extended to the whole register, as gfx9 writes most of them)."""
    t = self.tmp()
    if ty in WIDE:
      # every lane's value (a 64-bit result of uniform operands is one column until broadcast): a later 64-bit read
      # of the pair (an address) must see the lanes' shape, as a 32-bit write gets it from R.vfix
      self.emit(f"{t} = R.lanes_shaped(R.bits64({expr}), nl)")
      # lazily (see vpending): a pending write of the same pair under the same EXEC is simply replaced (it wrote
      # the same lanes); pairs overlapping this one get their halves first
      for q in (r - 1, r, r + 1): self.wide.pop(q, None)
      self.vregs.update((r, r + 1))
      self.v_written.update((r, r + 1))
      self.vpending[r], self.vpending[r + 1] = (t, 0), (t, 1)
      self.wide[r] = (t, self.exec_version)
    elif ty in HALF:
      self.emit(f"{t} = np.asarray({expr}).astype({NP_TYPE[ty]})")
      if zero_hi: self.write_v(r, f"{t}.view(u16).astype(u32)")
      else: self.write_v(r, f"R.put_half({self.v(r)}, {t}, {opsel_hi})")
    elif ty == "f32":
      self.write_v(r, f"R.f32bits({expr})")
    else:
      self.write_v(r, f"R.ibits({expr})")

  def write_lanes(self, r: int, expr: str) -> None:
    """Write a per-lane bool (n, L) result as a wave mask to SGPR r (wave64: the pair r, r+1) (VOPC, carry out):
    inactive lanes read 0."""
    if r == self.null: return
    if r > 127 or (self.wave64 and r & 1):
      raise GPUFault(f"scalar destination {r} is not a {'register' if r > 127 else 'register pair'}",
                     kind="illegal instruction")
    t = self.tmp()
    self.emit(f"{t} = R.bcast({expr}, nl)")
    if r == EXEC: return self.write_exec(f"{t} if ef else ({t} & em)")
    self.emit(f"{t} = {t} if ef else ({t} & em)")
    for q in ((r, r + 1) if self.wave64 else (r,)):
      self.sregs.add(q)
      self.s_written.add(q)
    self.lanes_of[r] = t
    self.pending.add(r)

  def write_exec(self, bits: str) -> None:
    """EXEC = the lanes of the (n, L) bool expression `bits`."""
    if not self.wave64: return self.write_s(EXEC, f"R.pack({bits})")
    t = self.tmp()
    self.emit(f"{t}lo, {t}hi = R.pack2({bits})")
    self.write_s(EXEC, f"{t}lo", exec_update=False)
    self.write_s(EXEC + 1, f"{t}hi")

  # ---- operand reads ----
  def raw_scalar(self, code: int, inst: Inst, ty: str = "u32") -> str:
    """An operand as an (n,) or scalar expression of numpy type `ty` (scalar context)."""
    if code < 128 and code != self.null:
      if ty in WIDE: return f"R.p64({self.s(code)}, {self.s(code + 1)}).view({NP_TYPE[ty]})"
      return self._typed32(self.s(code), ty)
    return self.constant(code, inst, ty)

  def constant(self, code: int, inst: Inst, ty: str) -> str:
    if code == self.null: return self.const(0, NP_TYPE[ty])
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
    if code == 251: return self._typed32(f"(~{self.mask_nonzero(VCC)}).astype(u32)", ty)     # VCCZ
    if code == 252: return self._typed32(f"(~{self.mask_nonzero(EXEC)}).astype(u32)", ty)    # EXECZ
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
      if ty in WIDE:
        known = self.wide.get(r)
        lo, hi = self.vpending.get(r), self.vpending.get(r + 1)
        if lo is not None and lo[1] == 0 and hi == (lo[0], 1):
          return f"{lo[0]}.view({NP_TYPE[ty]})"        # both halves still the 64-bit result's (same EXEC)
        pair = f"R.p64({self.v(r)}, {self.v(r + 1)})"
        if known is not None and known[1] == self.exec_version: pair = f"({known[0]} if ef else {pair})"
        return f"{pair}.view({NP_TYPE[ty]})"
      if ty in HALF: return f"R.half({self.v(r)}, {hi}).view({NP_TYPE[ty]})"
      if ty in ("u32", "b32"): return self.v(r)
      return f"{self.v(r)}.view({ty})"
    if code < 128 and code != self.null:
      if ty in WIDE: return f"R.p64({self.s(code)}, {self.s(code + 1)}).view({NP_TYPE[ty]})[:, None]"
      if ty in HALF: return f"R.half({self.s(code)}[:, None], {hi}).view({NP_TYPE[ty]})"
      return self._typed32(f"{self.s(code)}[:, None]", ty)
    if code in (SCC_SRC, 251, 252):
      return f"np.asarray({self.constant(code, inst, ty)})[:, None]"
    if hi and ty in HALF and code == LIT:
      return self.const(np.uint16((inst.literal >> 16) & 0xFFFF).view(NPT[NP_TYPE[ty]]), NP_TYPE[ty])
    return self.constant(code, inst, ty)

  def lane_mask_src(self, code: int, inst: Inst) -> str:
    """An SGPR wave mask (VCC, carry in, cndmask selector; wave64: an SGPR pair) as (n, L) bool."""
    if code in self.lanes_of: return self.lanes_of[code]
    if code < 128 and code != self.null:
      if self.wave64: return f"R.lanes2({self.s(code)}, {self.s(code + 1)})"
      return f"R.lanes({self.s(code)})"
    if self.wave64:
      c = self.constant(code, inst, "u64")
      return f"R.lanes64(np.broadcast_to({c}, (n,)).astype(u64))"
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
