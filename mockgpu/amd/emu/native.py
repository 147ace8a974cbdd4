"""Native translation of basic blocks: a block translated to C, built with the machine's C compiler, run over all
waves of a batch in one call (one wave at a time, its registers in the CPU's L1 cache).

The numpy translation (translate.py) stays the reference and the fallback: a block runs natively only when
- a C compiler is at hand (cc or gcc on PATH) and ENABLED is true (tests turn it off to compare both paths),
- the target is gfx1100 in wave32 and every instruction of the block is one this module covers (COVERED below),
  with no VOP3 modifiers (abs/neg/opsel/clamp/omod), and float operations only under the descriptor's f32 mode
  that keeps denormals (what C's float arithmetic does: IEEE-754 round to nearest even, no flushing),
- the block ends every wave it runs (s_endpgm, no barrier): it writes no register back (translate._assemble),
- the batch is wide (at least MIN_WAVES waves): the build (tens of milliseconds, once per block: the shared
  object is cached on disk by the hash of its source, compiler/backend/c.build_shared_object) pays off there.
Anything else runs the numpy function, unchanged.

Semantics follow the numpy translation (the same ISA facts: AMD "RDNA3 ISA" instruction descriptions; operand
encodings as in translate.py's docstring): EXEC masks the lanes that VALU and memory instructions write; a carry out
(VCC or an SGPR) has the bits of the active lanes; SMEM addresses ignore their two low bits; every global access is
checked against the mapped ranges (GPUMemory's table) before the host memory is touched, and a fault is raised as
GPUMemory.check raises it (same kind, text and address). Within a faulting instruction no lane of that wave has been
written; waves before it in the batch have run the whole block (the numpy path checks one instruction for all waves
at once: a faulting dispatch is lost either way).
"""
from __future__ import annotations

import ctypes
import os
import struct
import threading

import numpy as np

from ....errors import GPUFault
from .gen import FLOAT_CONSTS, INV2PI_BITS, LIT, NOOPS, NULL

ENABLED = True
RUNS = 0                 # batches run natively, all blocks together (tests check that the native path ran)
MIN_WAVES = 256          # batches narrower than this run the numpy function (no build for small launches)
_CC = None               # the C compiler's path, looked up once ("" when there is none)
_WHAT = ("global load", "global store", "scalar load")


class _NotNative(Exception):
  """The block has something this module does not translate: it stays with numpy."""


def _on_path(name: str) -> str | None:
  """The first executable file called name in PATH's folders (shutil.which's search for a bare name; shutil itself is
  not imported for it: it loads zlib, bz2 and lzma, ~2 ms of a new process's first launch, issue 33 P3)."""
  for folder in os.get_exec_path():
    path = os.path.join(folder, name)
    if os.path.isfile(path) and os.access(path, os.X_OK): return path
  return None


def compiler() -> str:
  global _CC
  if _CC is None: _CC = _on_path("cc") or _on_path("gcc") or ""
  return _CC


# ---- source generation --------------------------------------------------------------------------------------------
_SALU = {   # name -> (C expression of a, b; SCC expression of r (None: SCC unchanged)) -- RDNA3 ISA "SOP2"
  "s_and_b32": ("a & b", "r != 0"), "s_or_b32": ("a | b", "r != 0"), "s_xor_b32": ("a ^ b", "r != 0"),
  "s_andn2_b32": ("a & ~b", "r != 0"), "s_and_not1_b32": ("a & ~b", "r != 0"),
  "s_mul_i32": ("a * b", None), "s_lshl_b32": ("a << (b & 31)", "r != 0"), "s_lshr_b32": ("a >> (b & 31)", "r != 0"),
  "s_ashr_i32": ("(uint32_t)((int32_t)a >> (b & 31))", "r != 0"), "s_add_u32": ("a + b", "r < a"),
  "s_sub_u32": ("a - b", "a < b"), "s_add_i32": ("a + b", "((~(a ^ b) & (a ^ r)) >> 31) & 1"),
  "s_sub_i32": ("a - b", "(((a ^ b) & (a ^ r)) >> 31) & 1"),
  "s_min_u32": ("a < b ? a : b", "a < b"), "s_max_u32": ("a > b ? a : b", "a > b"),
  "s_cselect_b32": ("scc ? a : b", None), "s_addc_u32": ("a + b + scc", "(uint64_t)a + b + scc > 0xFFFFFFFFull"),
}
_SOP1 = {"s_mov_b32": "a", "s_not_b32": "~a", "s_brev_b32": None}
_VALU2 = {  # name -> C expression of a, b (u32 lanes); fa, fb: the f32 values -- RDNA3 ISA "VOP2"/"VOP3"
  "v_add_nc_u32": "a + b", "v_sub_nc_u32": "a - b", "v_subrev_nc_u32": "b - a", "v_and_b32": "a & b", "v_or_b32": "a | b",
  "v_xor_b32": "a ^ b", "v_lshlrev_b32": "b << (a & 31)", "v_lshrrev_b32": "b >> (a & 31)",
  "v_ashrrev_i32": "(uint32_t)((int32_t)b >> (a & 31))", "v_mul_lo_u32": "a * b",
  "v_min_u32": "a < b ? a : b", "v_max_u32": "a > b ? a : b",
  "v_min_i32": "(int32_t)a < (int32_t)b ? a : b", "v_max_i32": "(int32_t)a > (int32_t)b ? a : b",
  "v_mul_u32_u24": "(a & 0xFFFFFFu) * (b & 0xFFFFFFu)",
  "v_add_f32": "FB(FA + FBV)", "v_sub_f32": "FB(FA - FBV)", "v_subrev_f32": "FB(FBV - FA)", "v_mul_f32": "FB(FA * FBV)",
}
_VALU3 = {"v_add3_u32": "a + b + c", "v_lshl_add_u32": "(a << (b & 31)) + c", "v_add_lshl_u32": "(a + b) << (c & 31)",
          "v_lshl_or_b32": "(a << (b & 31)) | c", "v_and_or_b32": "(a & b) | c", "v_or3_b32": "a | b | c",
          "v_xad_u32": "(a ^ b) + c", "v_mad_u32_u24": "(a & 0xFFFFFFu) * (b & 0xFFFFFFu) + c",
          "v_fma_f32": "FB(fmaf(FA, FBV, FC))"}
# name -> (32-bit result r of a, b (and carry-in ci), the carry/borrow out; x: a scratch value), all in 32 bits
_CARRY = {"v_add_co_u32": ("r = a + b", "r < a"), "v_sub_co_u32": ("r = a - b", "a < b"),
          "v_subrev_co_u32": ("r = b - a", "b < a"), "v_add_co_ci_u32": ("x = a + b, r = x + ci", "(x < a) | (r < x)"),
          "v_sub_co_ci_u32": ("x = a - b, r = x - ci", "(a < b) | (x < ci)"),
          "v_subrev_co_ci_u32": ("x = b - a, r = x - ci", "(b < a) | (x < ci)")}
_FLOAT = {n for n, e in {**_VALU2, **_VALU3}.items() if "FA" in e}
_GLOBAL = {"global_load_b32": 1, "global_load_b64": 2, "global_load_b96": 3, "global_load_b128": 4,
           "global_store_b32": 1, "global_store_b64": 2, "global_store_b96": 3, "global_store_b128": 4}
_SMEM = {"s_load_b32": 1, "s_load_b64": 2, "s_load_b128": 4, "s_load_b256": 8, "s_load_b512": 16}
COVERED = (set(_SALU) | {"s_mov_b32", "s_not_b32"} | set(_VALU2) | set(_VALU3) | set(_CARRY) | set(_GLOBAL)
           | set(_SMEM) | {"v_mov_b32", "v_lshlrev_b64", "v_mbcnt_lo_u32_b32", "s_endpgm"})

_PRELUDE = r"""#pragma GCC optimize("O3")
#include <stdint.h>
#include <string.h>
#include <math.h>
typedef union { uint32_t u; float f; } pun_t;   /* C11 6.5.2.3: reading another member reinterprets the bytes */
static inline float FAS(uint32_t x) { pun_t p = { .u = x }; return p.f; }
static inline uint32_t FB(float f) { pun_t p = { .f = f }; return p.u; }
/* every [a, a + nb) inside one mapped range (starts/ends sorted, as GPUMemory's table); the range found is kept in
   *lo, *hi for the next check (most accesses of a block fall in the range of the one before) */
static int find(const uint64_t *st, const uint64_t *en, int64_t nr, uint64_t a, uint64_t nb, uint64_t *lo_, uint64_t *hi_) {
  int64_t lo = 0, hi = nr;
  while (lo < hi) { int64_t m = (lo + hi) / 2; if (st[m] <= a) lo = m + 1; else hi = m; }
  if (lo > 0 && a >= st[lo - 1] && a + nb <= en[lo - 1] && a + nb >= a) { *lo_ = st[lo - 1]; *hi_ = en[lo - 1]; return 1; }
  return 0;
}
/* c: the access site's cache (each memory instruction of the block keeps the range it hit last: the kernel
   arguments, the inputs and the output of a kernel are in different ranges) */
#define MAPPED(a, nb, c) (((a) >= c[0] && (a) + (nb) <= c[1] && (a) + (nb) >= (a)) || find(rs, re, nr, (a), (nb), &c[0], &c[1]))
#define FAULT(addr, nb, what) do { fault[0] = (addr); fault[1] = (nb); fault[2] = (what); return 1; } while (0)
"""


class _Src:
  def __init__(self):
    self.s: set = set()
    self.v: set = set()
    self.written: set = set()      # VGPRs written so far in the block
    self.read_first: set = set()   # VGPRs whose values from the register file the block needs
    self.pending: list = []
    self.exec_changed = False      # an instruction so far wrote EXEC
    self.sites = 0                 # memory access sites (see site())    self.scc = False
    self.lines: list[str] = []

  def sreg(self, r: int) -> str:
    if r >= 128: raise _NotNative(f"SGPR {r}")
    self.s.add(r)
    return f"s{r}"

  def vreg(self, r: int) -> str:
    """A VGPR read (or read-modified: a blend keeps the inactive lanes)."""
    self.v.add(r)
    if r not in self.written: self.read_first.add(r)
    return f"v{r}"

  def vdst(self, r: int) -> str:
    """A VGPR the current instruction writes (under EXEC): marked written once the instruction is done."""
    self.v.add(r)
    self.pending.append(r)
    return f"v{r}"

  def done(self) -> None:
    """After an instruction: its destinations are written. A register written before any read, with EXEC as the
    block found it, needs no copy from the register file when that EXEC is all lanes (every lane is written)."""
    for r in self.pending:
      if r not in self.written:
        self.written.add(r)
        if self.exec_changed: self.read_first.add(r)
    self.pending = []

  def operand(self, code: int, inst, lane: bool, float32: bool = False) -> str:
    """A 32-bit source operand as a C expression (lane: inside the per-lane loop, index l)."""
    if code >= 256:
      if not lane: raise _NotNative("VGPR in scalar context")
      return f"{self.vreg(code - 256)}[l]"
    if code == NULL: return "0u"
    if code < 128: return self.sreg(code)
    if 128 <= code <= 192: return f"{code - 128}u"
    if 193 <= code <= 208: return f"{(-(code - 192)) & 0xFFFFFFFF:#x}u"
    if code in FLOAT_CONSTS:
      bits = INV2PI_BITS["f32"] if code == 248 else struct.unpack("<I", struct.pack("<f", FLOAT_CONSTS[code]))[0]
      return f"{bits:#x}u"
    if code == LIT and inst.literal is not None: return f"{inst.literal & 0xFFFFFFFF:#x}u"
    raise _NotNative(f"operand {code}")

  def operand64(self, code: int, inst) -> str:
    """A 64-bit source operand (register pair or integer constant)."""
    if code >= 256:
      lo, hi = self.vreg(code - 256), self.vreg(code - 255)
      return f"((uint64_t){hi}[l] << 32 | {lo}[l])"
    if code < 106: return f"((uint64_t){self.sreg(code + 1)} << 32 | {self.sreg(code)})"
    if 128 <= code <= 192: return f"{code - 128}ull"
    if 193 <= code <= 208: return f"{(-(code - 192)) & 0xFFFFFFFFFFFFFFFF:#x}ull"
    raise _NotNative(f"64-bit operand {code}")

  def emit(self, line: str) -> None: self.lines.append("    " + line)

  def site(self) -> str:
    """A new memory access site: the name of its range cache (two u64, declared before the wave loop)."""
    self.sites += 1
    return f"rc{self.sites}"

  def lanes(self, body: str) -> None:
    """A loop over the lanes; body may test `on` (the lane is active) -- branch-free, so that it vectorises."""
    self.emit(f"for (int l = 0; l < 32; l++) {{ uint32_t on = s126 >> l & 1; (void)on; {body} }}")

  def lanes_write(self, dst: str, decl: str, value: str) -> None:
    """dst[l] = value in the active lanes (EXEC), a blend: the inactive lanes keep theirs."""
    self.lanes(f"{decl} uint32_t t = {value}, keep = on - 1u; {dst}[l] = (t & ~keep) | ({dst}[l] & keep);")

  def write_s(self, d: int, expr: str) -> None:
    if d == NULL: return
    if d in (126, 127): self.exec_changed = True
    self.emit(f"{self.sreg(d)} = {expr};")


def _no_mods(inst) -> None:
  f = inst.fields
  if any(f.get(k) for k in ("abs", "neg", "opsel", "clamp", "omod", "dpp", "sdwa", "neg_hi", "opsel_hi")):
    raise _NotNative("modifiers")


def _inst(g: _Src, inst) -> None:
  name, enc, f = inst.name, inst.encoding, inst.fields
  if name in NOOPS or name.startswith(("s_waitcnt", "s_wait_")) or name == "s_endpgm": return
  if enc == "SMEM" and name in _SMEM:
    ndw = _SMEM[name]
    b = f["sbase"] * 2
    addr = f"((uint64_t){g.sreg(b + 1)} << 32 | {g.sreg(b)}) + (uint64_t)(int64_t)({f['offset']}LL)"
    if f["soffset"] >= 0: addr += f" + {g.sreg(f['soffset'])}"
    c = g.site()
    g.emit(f"{{ uint64_t a = ({addr}) & ~3ull; if (!MAPPED(a, {4 * ndw}, {c})) FAULT(a, {4 * ndw}, 2);")
    g.emit("  const uint32_t *p = (const uint32_t *)(uintptr_t)a;")
    for k in range(ndw):
      if f["sdata"] + k != NULL: g.emit(f"  {g.sreg(f['sdata'] + k)} = p[{k}];")
    g.emit("}")
    return
  if enc in ("SOP2", "SOP1") and (name in _SALU or name in ("s_mov_b32", "s_not_b32")):
    a = g.operand(f["ssrc0"], inst, False)
    if name in _SALU:
      expr, scc = _SALU[name]
      b = g.operand(f["ssrc1"], inst, False)
      g.emit(f"{{ uint32_t a = {a}, b = {b}, r = {expr};")
      if scc:
        g.scc = True
        g.emit(f"  scc = ({scc}) ? 1u : 0u;")
    else:
      g.emit(f"{{ uint32_t a = {a}, r = {_SOP1[name]};")
    g.write_s(f["sdst"], "r")
    g.emit("}")
    return
  if enc in ("VOP1", "VOP2", "VOP3", "VOP3SD"):
    _no_mods(inst)
    d = g.vdst(f["vdst"])
    if name == "v_mov_b32" and enc in ("VOP1", "VOP3"):
      return g.lanes_write(d, "", g.operand(f['src0'], inst, True))
    if name == "v_mbcnt_lo_u32_b32" and enc == "VOP3":   # RDNA3 ISA: popcount(S0 & lanes below this one) + S1
      a, b = g.operand(f["src0"], inst, True), g.operand(f["src1"], inst, True)
      return g.lanes_write(d, "", f"(uint32_t)__builtin_popcount({a} & ((1u << l) - 1u)) + {b}")
    if name == "v_lshlrev_b64" and enc == "VOP3":
      hi = g.vdst(f["vdst"] + 1)
      g.lanes(f"uint64_t r = {g.operand64(f['src1'], inst)} << ({g.operand(f['src0'], inst, True)} & 63); "
              f"uint32_t keep = on - 1u; {d}[l] = ((uint32_t)r & ~keep) | ({d}[l] & keep); "
              f"{hi}[l] = ((uint32_t)(r >> 32) & ~keep) | ({hi}[l] & keep);")
      return
    a = g.operand(f["src0"], inst, True)
    b = g.operand(f["vsrc1"] + 256 if enc in ("VOP1", "VOP2") else f["src1"], inst, True)
    fl = ("FA = FAS(FI(a)), FBV = FAS(FI(b)), FC = FAS(FI(c))" if name in _VALU3 else
          "FA = FAS(FI(a)), FBV = FAS(FI(b))") if name in _FLOAT else ""
    if name in _VALU2 and enc in ("VOP2", "VOP3"):
      decl = f"float {fl}; " if fl else ""
      return g.lanes_write(d, f"uint32_t a = {a}, b = {b}; {decl}", f"FO({_VALU2[name]})" if fl else _VALU2[name])
    if name in _VALU3 and enc == "VOP3":
      c = g.operand(f["src2"], inst, True)
      decl = f"float {fl}; " if fl else ""
      return g.lanes_write(d, f"uint32_t a = {a}, b = {b}, c = {c}; {decl}",
                           f"FO({_VALU3[name]})" if fl else _VALU3[name])
    if name in _CARRY and enc in ("VOP2", "VOP3SD"):
      expr, cout = _CARRY[name]
      has_ci = "ci" in expr
      stmts = expr.replace(", ", "; ")
      sdst = 106 if enc == "VOP2" else f["sdst"]       # VOP2 carries in and out through VCC
      ci = ""
      if has_ci:
        cin = 106 if enc == "VOP2" else f["src2"]
        if cin >= 106 and cin not in (106, 126): raise _NotNative(f"carry-in operand {cin}")
        ci = f"uint32_t ci = {g.sreg(cin)} >> l & 1; "
      g.emit("{ uint32_t m = 0, co[32];")
      g.lanes(f"uint32_t a = {a}, b = {b}; {ci}uint32_t x = 0, r; {stmts}; uint32_t keep = on - 1u; "
              f"{d}[l] = (r & ~keep) | ({d}[l] & keep); co[l] = ({cout}) & on; (void)x;")
      g.emit("for (int l = 0; l < 32; l++) m |= co[l] << l;")
      g.write_s(sdst, "m")
      g.emit("}")
      return
    raise _NotNative(name)
  if enc == "GLOBAL" and name in _GLOBAL:
    ndw, store = _GLOBAL[name], name.startswith("global_store")
    off = f"(uint64_t)(int64_t)({f['offset']}LL)"
    if f["saddr"] >= 0:
      s = f["saddr"]
      addr = f"((uint64_t){g.sreg(s + 1)} << 32 | {g.sreg(s)}) + {g.vreg(f['addr'])}[l] + {off}"
    else:
      addr = f"((uint64_t){g.vreg(f['addr'] + 1)}[l] << 32 | {g.vreg(f['addr'])}[l]) + {off}"
    nb = 4 * ndw
    what = 1 if store else 0
    g.emit("{ uint64_t ad[32], amin = ~0ull, amax = 0;")
    g.lanes(f"ad[l] = {addr}; uint64_t x = on ? ad[l] : ~0ull, y = on ? ad[l] : 0; "
            "amin = x < amin ? x : amin; amax = y > amax ? y : amax;")
    c = g.site()
    g.emit(f"if (s126 && !(amax - amin < (1ull << 40) && MAPPED(amin, amax - amin + {nb}, {c})))")
    g.emit(f"  for (int l = 0; l < 32; l++) if ((s126 >> l & 1) && !MAPPED(ad[l], {nb}, {c})) FAULT(ad[l], {nb}, {what});")
    if store:
      regs = [g.vreg(f["data"] + k) for k in range(ndw)]
      body = (f"{{ uint32_t w[{ndw}] = {{{', '.join(f'{r}[l]' for r in regs)}}}; "
              f"memcpy((void *)(uintptr_t)ad[l], w, {nb}); }}")
      # every lane active (the common case): no test per lane, so that the compiler can vectorise the loop
      g.emit(f"if (s126 == 0xFFFFFFFFu) for (int l = 0; l < 32; l++) {body}")
      g.emit(f"else for (int l = 0; l < 32; l++) if (s126 >> l & 1) {body}")
    else:
      regs = [g.vdst(f["vdst"] + k) for k in range(ndw)]
      body = (f"{{ uint32_t w[{ndw}]; memcpy(w, (const void *)(uintptr_t)ad[l], {nb}); "
              + " ".join(f"{r}[l] = w[{k}];" for k, r in enumerate(regs)) + " }")
      g.emit(f"if (s126 == 0xFFFFFFFFu) for (int l = 0; l < 32; l++) {body}")
      g.emit(f"else for (int l = 0; l < 32; l++) if (s126 >> l & 1) {body}")
    g.emit("}")
    return
  raise _NotNative(name)


def source(insts, mode: int) -> str | None:
  """The C source of an ending block of gfx1100 wave32 code (`insts`: [(address, Inst)]), or None when it has
  something this module does not translate. mode: the translation key (denormal bits and target bits)."""
  if mode >> 4 != 0: return None                     # gfx1100 in wave32 only (translate.target_bits == 0)
  g = _Src()
  g.sreg(126)
  try:
    for _, inst in insts:
      _inst(g, inst)
      g.done()
  except (_NotNative, KeyError, TypeError):
    return None
  sregs, vregs = sorted(g.s), sorted(g.v)
  # the f32 denormal mode (translate.translate: rsrc1 FLOAT_DENORM_MODE_32, bit 1 keeps input denormals, bit 0
  # output ones): a flushed denormal becomes a zero of its sign, as rt.ftz does
  flush = "(((x) & 0x7F800000u) == 0 ? (x) & 0x80000000u : (x))"
  out = [_PRELUDE, f"#define FI(x) {'(x)' if mode & 2 else flush}", f"#define FO(x) {'(x)' if mode & 1 else flush}",
         "__attribute__((target_clones(\"avx2\", \"default\")))",
         "int block(uint32_t **S, uint32_t **V, uint32_t *SCC, const int64_t *idx, int64_t n,",
         "          const uint64_t *rs, const uint64_t *re, int64_t nr, uint64_t *fault) {",
         *[f"  uint64_t rc{i}[2] = {{0, 0}};" for i in range(1, g.sites + 1)],
         "  for (int64_t k = 0; k < n; k++) {",
         "    int64_t w = idx ? idx[k] : k;",
         "    uint32_t scc = SCC[w]; (void)scc;"]
  out += [f"    uint32_t s{r} = S[{i}][w];" for i, r in enumerate(sregs)]
  # a VGPR the block writes (all lanes, under the EXEC it started with) before it reads it is not copied in when that
  # EXEC is every lane (a wide batch's register file is mostly fresh zero pages: reading them costs page faults)
  out += [f"    uint32_t v{r}[32]; memcpy(v{r}, V[{i}] + 32 * w, 128);" if r in g.read_first else
          f"    uint32_t v{r}[32]; if (s126 != 0xFFFFFFFFu) memcpy(v{r}, V[{i}] + 32 * w, 128);"
          for i, r in enumerate(vregs)]
  out += g.lines
  out += ["  }", "  return 0;", "}", ""]
  return "\n".join(out) + f"/* sregs {','.join(map(str, sregs))} vregs {','.join(map(str, vregs))} */\n"


# ---- running ------------------------------------------------------------------------------------------------------
class _Build:
  """The built C function of one block translation (cfn: None = not built yet, False = cannot be built)."""

  def __init__(self):
    self.cfn = None
    self.error = None
    self.lock = threading.Lock()


class NativeBlock:
  """The callable put in place of a block's numpy function (the same signature: S, V, st, idx)."""

  def __init__(self, fn, src: str, sregs: list[int], vregs: list[int], build: "_Build | None" = None):
    self.numpy_fn, self.src, self.sregs, self.vregs = fn, src, sregs, vregs
    # the build, shared by the copies of one cached translation on every device (blockcache.py)
    self.build = build if build is not None else _Build()
    self.fault = (ctypes.c_uint64 * 3)()   # per copy: a device's fault is read back after its own call
    self.calls = 0           # batches run natively by this copy (tests check that the native path ran)

  def sharing_build(self) -> "NativeBlock":
    """Another callable for the same block (its own fault buffer and call count) sharing this one's build."""
    return NativeBlock(self.numpy_fn, self.src, self.sregs, self.vregs, self.build)

  @property
  def cfn(self):
    """The built function: None before the first wide batch, False when it cannot be built."""
    return self.build.cfn

  @property
  def error(self):
    """Why the build failed, when it did."""
    return self.build.error

  def _build(self):
    from ....compiler.backend.c import build_shared_object
    from ....config import from_env
    try:
      # PyDLL: the call keeps the GIL, as a numpy operation of the numpy path does, so that no other thread of the
      # host (the driver, unmapping a buffer) runs between the range checks and the accesses of a block
      lib = ctypes.PyDLL(build_shared_object(self.src, from_env().cache_dir, compiler()))
    except Exception as e:   # no usable compiler or cache folder: the numpy function stays (it is the reference)
      self.build.error = f"{type(e).__name__}: {e}"   # kept for whoever wonders why a block runs numpy
      return False
    fn = lib.block
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                           ctypes.c_void_p]
    fn._lib = lib
    return fn

  def __call__(self, S, V, st, idx):
    n = st.n if idx is None else len(idx)
    if n < MIN_WAVES or self.cfn is False or not ENABLED: return self.numpy_fn(S, V, st, idx)
    cfn = self.build.cfn
    if cfn is None:
      with self.build.lock:               # one build per translation, whichever device's thread gets there first
        if self.build.cfn is None: self.build.cfn = self._build()
        cfn = self.build.cfn
    if cfn is False: return self.numpy_fn(S, V, st, idx)
    W = st.n
    rows = [S[r] for r in self.sregs]
    vrows = [V[r] for r in self.vregs]
    for a in rows:
      if a.dtype != np.uint32 or a.shape != (W,) or not a.flags.c_contiguous: return self.numpy_fn(S, V, st, idx)
    for a in vrows:
      if a.dtype != np.uint32 or a.shape != (W, 32) or not a.flags.c_contiguous: return self.numpy_fn(S, V, st, idx)
    scc = st.scc
    if scc.dtype != np.uint32 or scc.shape != (W,) or not scc.flags.c_contiguous: return self.numpy_fn(S, V, st, idx)
    if idx is not None:
      idx = np.ascontiguousarray(idx, np.int64)
    # one snapshot of the mapped ranges (GPUMemory.arrays: the RangeTable's starts and ends as numpy arrays); peer
    # windows (mockgpu/peer.py) are not in it, so a shader's access there faults here as on the numpy path
    starts, ends = st.mem.mem.arrays()
    sp = (ctypes.c_void_p * len(rows))(*[a.ctypes.data for a in rows])
    vp = (ctypes.c_void_p * max(1, len(vrows)))(*[a.ctypes.data for a in vrows])
    rc = cfn(sp, vp, scc.ctypes.data, None if idx is None else idx.ctypes.data, n, starts.ctypes.data,
                  ends.ctypes.data, len(starts), self.fault)
    self.calls += 1
    global RUNS
    RUNS += 1
    if rc:
      addr, nb, what = self.fault
      raise GPUFault(f"{_WHAT[what]} of {nb} bytes outside every mapped range", address=int(addr), kind="page fault")
    return -1


def attach(blk, insts, mode: int) -> None:
  """Put a NativeBlock in place of blk.fn when the block qualifies (see the module docstring); builds nothing yet."""
  if not blk.ends or blk.barrier or not compiler(): return
  src = source(insts, mode)
  if src is None: return
  tail = src.rsplit("/* sregs ", 1)[1]
  s_part, v_part = tail.split(" */")[0].split(" vregs ")
  sregs = [int(x) for x in s_part.split(",") if x]
  vregs = [int(x) for x in v_part.split(",") if x]
  blk.fn = NativeBlock(blk.fn, src, sregs, vregs)
