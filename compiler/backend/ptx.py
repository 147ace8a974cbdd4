"""PTX backend: render a LINEAR kernel (compiler/lower) as PTX text for NVIDIA GPUs (sm_80, sm_86, sm_89, sm_90,
sm_100).

    from hcq.compiler import compile
    ptx = compile(sink, "sm_90")                 # str: one .visible .entry, what ptxas / the driver's JIT take
    prog = render_ptx(lower(sink, PTX_TARGETS["sm_90"]), "sm_90")   # PTXProgram: source, params, launch dims

References are to NVIDIA's "Parallel Thread Execution ISA" (version 8.x) by section name.

Registers: every LINEAR element that has a value gets its own typed virtual register ("Register State Space"):
  .pred %p (bool)   .b16 %rs (int8/int16/uint8/uint16, float16)   .b32 %r (32-bit ints)   .b64 %rd (64-bit ints,
  addresses)   .f32 %f   .f64 %fd.  8-bit integers live in 16-bit registers: PTX has no 8-bit arithmetic, so an
  int8/uint8 result is re-wrapped to 8 bits after each operation that can leave the range (as C's (signed char) cast).
Control flow is structured: RANGE/END is a counted loop with the test at the top (a runtime trip count may be 0),
IF/ENDIF a forward predicated branch over the gated stores ("Control Flow Instructions: bra"). An innermost RANGE
with a constant trip count of at most UNROLL_MAX is unrolled, as the RDNA3 backend does: its counter is then a known
constant in each copy, integer operations of known values are folded, and the known part of an index becomes the
immediate offset of the load or store ([reg+imm], "Addresses as Operands") when the bounds show the split cannot
change the address (rest + c does not wrap in the index type). bench/ptx_sass.py measures the effect after ptxas.
Memory: GLOBAL buffers are kernel parameters (.param .u64, converted with cvta.to.global), LOCAL buffers .shared
arrays of the entry, REG buffers .local arrays of the entry (ptxas keeps a small constant-indexed one in registers);
every access uses a 64-bit address. A BARRIER is bar.sync 0 ("Parallel Synchronization and Communication
Instructions: bar, barrier"); the pipeline never puts one inside an IF or a work-item-dependent loop (lower/
check_barriers_uniform), so every thread of the CTA reaches it, as bar.sync (aligned) requires.

Semantics follow the C backend (the reference):
- float add/sub/mul/div/sqrt carry an explicit .rn: IEEE round-to-nearest-even and, as the ISA says of an explicit
  rounding modifier ("Floating Point Instructions: add"), never contracted into an fma, as C's -ffp-contract=off.
  MULACC is therefore mul.rn + add.rn, not fma. Subnormals are kept (no .ftz).
- integer add/sub/mul wrap (add.s32, mul.lo); IDIV/IMOD truncate toward zero as div/rem do ("Integer Arithmetic
  Instructions: div, rem"). The ISA leaves a zero divisor machine-specific, so a divisor that may be 0 is tested:
  the result is 0 there (the C backend also records a fault; PTX has no fault report here yet). x / -1 is the
  wrapping negation and x % -1 is 0 (compiler/ir/evaluate.py), computed without div where the bounds allow -1.
- comparisons of floats are ordered (NaN: false) except != (setp.neu: NaN is unequal), as C.
- MAX is a compare and select (a > b ? a : b, as C), not max.f32, whose NaN rule differs.
- float -> int conversion (dtypes.float_to_int): cvt.rzi truncates and clamps to the 32-bit (64-bit for 8-byte types)
  range of the destination's signedness ("Conversion Instructions: cvt": float-to-integer results are clamped);
  NaN is tested explicitly and gives 0; a narrower type keeps the low bits of that 32-bit result.
- transcendentals are the approximate instructions ("Floating Point Instructions: ex2, lg2, sin"):
  ex2.approx.f32 (max relative error about 2 ulp over the full range), lg2.approx.f32 (max absolute error 2^-22.6
  for the mantissa), sin.approx.f32 (max absolute error 2^-20.9 in -pi..pi, larger outside); these bounds are
  the ISA's as recalled here, for the PTX interpreter's tolerance to be checked against its text. float16 and float64
  operands are converted to float32 for them, so float64 EXP2/LOG2/SIN have float32 precision. RECIP is rcp.rn
  (IEEE), not rcp.approx.
- the IR has no atomics yet: nothing to render for them.

Parameters follow the CUDA ABI ("Kernel Function Parameters"): one .param per kernel argument in slot order, a
buffer as .param .u64 (its global address), a scalar by its type (.s32, .u64, .f32, ...); the entry is named after
the kernel (extern "C", no mangling), its parameters <name>_param_<n>.
"""
from __future__ import annotations

import bisect

import struct
from dataclasses import dataclass, field
from functools import lru_cache

from ..ir import AddrSpace, CompileError, KernelInfo, Ops, PtrDType, UOp, dtypes
from ..ir.dtypes import DType
from ..ir.evaluate import EvalError, exec_alu
from ..ir.uop import _short
from ..lower.target import Target
from ..ir.ops import O

# the targets: the PTX ISA version each needs ("PTX ISA Version" / "Target ISA notes": sm_90 from 7.8, sm_100 from 8.6);
# 8.0 (CUDA 12.0) is the floor, so one driver generation accepts all the Ampere..Hopper ones
ARCHS = {"sm_80": "8.0", "sm_86": "8.0", "sm_89": "8.0", "sm_90": "8.0", "sm_100": "8.6"}
# 48 KiB of static .shared per CTA: more needs the dynamic opt-in, which a static .shared array cannot use
PTX_TARGETS = {a: Target(a, local_memory_bytes=48 * 1024, shifts_for_pow2=True) for a in ARCHS}

_SREG = {"gidx": "%ctaid", "lidx": "%tid"}   # "Special Registers": CTA index in the grid, thread index in the CTA
_DIM = "xyz"


@lru_cache(maxsize=None)   # DTypes are interned: the cache looks them up by identity
def _rclass(dt: DType) -> tuple[str, str]:
  """(register prefix, .reg type) of a value type."""
  if dt.is_bool: return "%p", ".pred"
  if dt.is_float: return {2: ("%h", ".b16"), 4: ("%f", ".f32"), 8: ("%fd", ".f64")}[dt.itemsize]
  return {1: ("%rs", ".b16"), 2: ("%rs", ".b16"), 4: ("%r", ".b32"), 8: ("%rd", ".b64")}[dt.itemsize]


@lru_cache(maxsize=None)   # DTypes are interned: the cache looks them up by identity
def _t(dt: DType) -> str:
  """The instruction type suffix of a value type (without the dot)."""
  if dt.is_bool: return "pred"
  if dt.is_float: return f"f{8 * dt.itemsize}"
  return f"{'u' if dt.kind == 'uint' else 's'}{8 * dt.itemsize}"


@lru_cache(maxsize=None)   # DTypes are interned: the cache looks them up by identity
def _op_t(dt: DType) -> str:
  """The type arithmetic runs in: 8-bit integers compute in 16 bits (and are re-wrapped)."""
  return _t(dt) if not (dt.is_int and dt.itemsize == 1) else _t(dt)[0] + "16"


def _b(dt: DType) -> str: return f"b{8 * max(dt.itemsize, 2)}"


@lru_cache(maxsize=None)   # DTypes are interned: the cache looks them up by identity
def _mov(dt: DType) -> str:
  """The start of the line _Renderer.const emits for a literal of a non-bool type: "\tmov.<type> "."""
  return f"\tmov.{_b(dt) if dt.is_float and dt.itemsize == 2 else _op_t(dt)} "


def _literal(v, dt: DType) -> str:
  """A PTX immediate of type dt ("Constants": 0fXXXXXXXX for f32, 0dXXXXXXXXXXXXXXXX for f64; an f16 value is its
  bit pattern, moved with mov.b16)."""
  if dt.is_float:
    v = float(v)
    if dt.itemsize == 8: return "0d%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
    if dt.itemsize == 4:
      try: bits = struct.unpack("<I", struct.pack("<f", v))[0]
      except OverflowError: bits = 0x7F800000 if v > 0 else 0xFF800000
      return "0f%08X" % bits
    try: bits = struct.unpack("<H", struct.pack("<e", v))[0]
    except OverflowError: bits = 0x7C00 if v > 0 else 0xFC00
    return "0x%04X" % bits
  if dt.is_bool: return "1" if v else "0"
  v = int(v) & ((1 << (8 * dt.itemsize)) - 1)
  if dt.kind == "int" and v >= 1 << (8 * dt.itemsize - 1): v -= 1 << (8 * dt.itemsize)
  return str(v)


@dataclass
class PTXProgram:
  """What render_ptx returns: the PTX text and what a launcher needs."""
  name: str
  source: str
  arch: str
  params: list            # [(slot, "buffer"|"int"|"float", dtype, size, readonly)] in slot order (= .param order)
  global_size: tuple
  local_size: tuple
  has_barrier: bool
  local_bytes: int
  linear: UOp = field(repr=False, default=None)


class _Renderer:
  def __init__(self, arch: str):
    self.arch = arch
    self.counts: dict[tuple, int] = {}
    self.lines: list[str] = []
    self.decls: list[str] = []
    self.names: dict[UOp, str] = {}
    self.labels = 0
    # integer values known at compile time in the code being rendered: the counter of an unrolled loop (one value per
    # copy of the body) and integer ALU results of known values
    self.known: dict[UOp, int] = {}
    # 64-bit element addresses (base + x * size) already computed in the current straight-line region; emptied at
    # every label or branch, so that a reused register always holds its value on every path to the use
    self.addresses: dict[tuple, str] = {}

  def reg(self, dt: DType) -> str:
    key = _rclass(dt)
    n = self.counts.get(key, 0) + 1
    self.counts[key] = n
    return f"{key[0]}{n}"

  def emit(self, line: str): self.lines.append("\t" + line)

  def branch(self, line: str):
    """A branch: the addresses computed before it are not known to hold on every path after it."""
    self.emit(line)
    self.addresses.clear()

  def label(self, name: str):
    self.lines.append(f"{name}:")
    self.addresses.clear()

  def new_label(self, what: str) -> str:
    self.labels += 1
    return f"$L_{what}_{self.labels}"

  def const(self, v, dt: DType) -> str:
    """A register holding a literal (f16 has no immediates in arithmetic, and a register suits every operand)."""
    r = self.reg(dt)
    if dt.is_bool: self.emit(f"setp.ne.u32 {r}, {1 if v else 0}, 0;")
    else: self.lines.append(f"{_mov(dt)}{r}, {_literal(v, dt)};")   # (emit's line)
    return r

  def wrap8(self, r: str, dt: DType):
    """Re-wrap an 8-bit integer computed in 16 bits to its 8-bit value (sign- or zero-extended), as C's narrowing."""
    if dt.is_int and dt.itemsize == 1:
      self.emit(f"cvt.{_op_t(dt)}.{_t(dt)} {r}, {r};")


def render_ptx(lin: UOp, arch: str = "sm_90") -> PTXProgram:
  if arch not in ARCHS: raise CompileError(f"unknown PTX target {arch!r} (known: {', '.join(ARCHS)})")
  info: KernelInfo = lin.arg if isinstance(lin.arg, KernelInfo) else KernelInfo()
  name = "".join(c if c.isalnum() else "_" for c in info.name) or "kernel"
  if name[0].isdigit(): name = "k_" + name
  R = _Renderer(arch)
  params: dict[int, tuple] = {}
  pnames: dict[int, str] = {}
  addr_of: dict[UOp, str] = {}     # PARAM/BUFFER -> 64-bit register holding its base address
  local_bytes = 0
  has_barrier = False
  loops: list[tuple[str, str]] = []
  ifs: list[str] = []

  # parameters first, in slot order: the .param list is positional (the CUDA ABI)
  for u in lin.src:
    if u.op in (O.PARAM, O.DEFINE_VAR):
      a = u.arg
      if a.slot in params: raise CompileError(f"two kernel arguments in slot {a.slot}: {_short(u)}", u)
      if u.op is O.PARAM: params[a.slot] = (a.slot, "buffer", a.dtype, a.size, a.readonly)
      else: params[a.slot] = (a.slot, "float" if a.dtype.is_float else "int", a.dtype, 0, True)
  for n, slot in enumerate(sorted(params)): pnames[slot] = f"{name}_param_{n}"

  def one(u: UOp) -> None:
    nonlocal local_bytes, has_barrier
    op, src = u.op, u.src
    dt = u.dtype
    if op is O.CAST and src[0].op is O.CONST:   # a typed literal (a kernel has many): it reads no operand name
      R.names[u] = R.const(u._cv, dt)   # (its const_value)
      if dt.is_int: R.known[u] = u._cv
      return
    if op is O.CONST and dt.is_weak: return       # only ever feeds a CAST that gives it a type
    r = list(map(R.names.get, src))   # (map with the dict's own get: no comprehension frame per element)
    if op in _ALU:   # the most frequent element; no other branch below takes an ALU op
      if dt.is_int and src:
        known = R.known
        for x in src:
          if x not in known: break
        else:
          if _fold(R, u):
            R.names[u] = R.const(known[u], dt)
            return
      R.names[u] = _ALU[op](R, u, r)
    elif op is O.PARAM:
      raw, g = R.reg(dtypes.uint64), R.reg(dtypes.uint64)
      R.emit(f"ld.param.u64 {raw}, [{pnames[u.arg.slot]}];")
      R.emit(f"cvta.to.global.u64 {g}, {raw};")   # "Generic Addressing": the parameter is a generic address
      addr_of[u] = g
    elif op is O.DEFINE_VAR:
      v = R.reg(dt)
      if dt.is_bool:   # a bool argument is a byte: load it, then test it
        b = R.reg(dtypes.uint16)
        R.emit(f"ld.param.u8 {b}, [{pnames[u.arg.slot]}];")
        R.emit(f"setp.ne.u16 {v}, {b}, 0;")
      else: R.emit(f"ld.param.{_param_t(dt)} {v}, [{pnames[u.arg.slot]}];")
      R.names[u] = v
    elif op is O.BUFFER:
      a = u.arg
      space = "shared" if a.addrspace is AddrSpace.LOCAL else "local"
      sym = f"{'smem' if space == 'shared' else 'lmem'}{a.slot}"
      nbytes = max(a.size * a.dtype.itemsize, 1)
      R.decls.append(f"\t.{space} .align 16 .b8 {sym}[{nbytes}];")
      if space == "shared": local_bytes += (nbytes + 15) // 16 * 16
      base = R.reg(dtypes.uint64)
      R.emit(f"mov.u64 {base}, {sym};")     # the symbol's address in its own state space
      addr_of[u] = base
    elif op is O.SPECIAL:
      kind, dim = u.arg[:4], int(u.arg[4])
      if kind not in _SREG or dim > 2: raise CompileError(f"the PTX backend has no special register for {u.arg!r}", u)
      # the special registers are .u32 (at most 2^31 - 1 CTAs per dimension, 1024 threads): an int32 takes it as it is
      v32 = R.reg(dtypes.uint32)
      R.emit(f"mov.u32 {v32}, {_SREG[kind]}.{_DIM[dim]};")
      R.names[u] = v32 if dt.itemsize == 4 else _convert_int(R, v32, dtypes.uint32, dt)
    elif op is O.CONST:
      R.names[u] = R.const(u.arg, dt)
      if dt.is_int: R.known[u] = u.arg
    elif op is O.RANGE:
      i = R.reg(dt)
      top, end = R.new_label("loop"), R.new_label("endloop")
      R.emit(f"mov.{_op_t(dt)} {i}, 0;")
      R.label(top)
      p = R.reg(dtypes.bool)
      R.emit(f"setp.ge.{_op_t(dt)} {p}, {i}, {r[0]};")
      R.branch(f"@{p} bra {end};")
      R.names[u] = i
      loops.append((top, end, i, dt))
    elif op is O.END:
      top, end, i, idt = loops.pop()
      R.emit(f"add.{_op_t(idt)} {i}, {i}, 1;")
      R.branch(f"bra {top};")
      R.label(end)
    elif op is O.IF:
      end = R.new_label("endif")
      R.branch(f"@!{r[0]} bra {end};")
      ifs.append(end)
    elif op is O.ENDIF:
      R.label(ifs.pop())
    elif op is O.BARRIER:
      has_barrier = True
      R.emit("bar.sync 0;")
    elif op is O.INDEX:
      addr_of[u] = _address(R, addr_of[src[0]], src[1], u)
    elif op is O.LOAD:
      R.names[u] = _load(R, u, addr_of[src[0]])
    elif op is O.STORE:
      _store(R, src[0], addr_of[src[0]], r[1], src[1].dtype)
    elif op is O.CAST:
      R.names[u] = _cast(R, r[0], src[0].dtype, dt)
    elif op is O.BITCAST:
      R.names[u] = _bitcast(R, r[0], src[0].dtype, dt)
    else:
      raise CompileError(f"the PTX backend can't render {op.name}: {_short(u)}", u)

  elements = list(lin.src)
  # the elements between two RANGEs are rendered one after the other (a kernel without loops: all of them)
  ranges = [k for k, u in enumerate(elements) if u.op is O.RANGE]
  ranges.append(len(elements))
  i = 0
  while i < len(elements):
    nxt = ranges[bisect.bisect_left(ranges, i)]
    for u in elements[i:nxt]: one(u)
    if nxt == len(elements): break
    i = nxt
    u = elements[i]
    n = _unroll_count(u)
    if n is None:
      one(u)
      i += 1
      continue
    j = _matching_end(elements, i)
    body = elements[i + 1:j]
    # innermost loops only (as clang's unroller starts with them): unrolling an outer loop multiplies the code
    if n * max(len(body), 1) > UNROLL_BUDGET or any(b.op is O.RANGE for b in body):
      one(u)
      i += 1
      continue
    for k in range(n):   # the counter is a constant in each copy: addresses get immediate offsets
      R.names[u] = R.const(k, u.dtype)
      R.known[u] = k
      for b in body: R.known.pop(b, None)
      for b in body: one(b)
    i = j + 1
  if loops or ifs: raise CompileError(f"kernel {name}: unclosed RANGE/IF in the linear program")

  ordered = [params[k] for k in sorted(params)]
  plist = ",\n".join(f"\t.param .{'u64' if kind == 'buffer' else _param_t(pdt)} {pnames[slot]}"
                     for slot, kind, pdt, _, _ in ordered)
  gs, ls = info.global_size or (1, 1, 1), info.local_size or (1, 1, 1)
  # .reqntid: the kernel indexes with the local size it was built for (the C backend checks the same at launch)
  directive = f"\n.reqntid {ls[0]}, {ls[1]}, {ls[2]}" if tuple(ls) != (1, 1, 1) else ""
  regdecl = [f"\t.reg {rt} {pre}<{n + 1}>;" for (pre, rt), n in sorted(R.counts.items())]
  text = (f"//\n// Generated by hcq's PTX backend: kernel {name}\n//\n\n.version {ARCHS[arch]}\n.target {arch}\n"
          f".address_size 64\n\n.visible .entry {name}(\n{plist}\n){directive}\n{{\n"
          + "\n".join(regdecl + R.decls) + "\n\n" + "\n".join(R.lines) + "\n\tret;\n}\n")
  return PTXProgram(name, text, arch, ordered, tuple(gs), tuple(ls), has_barrier, local_bytes, lin)


UNROLL_MAX = 16          # unroll a RANGE with a constant trip count up to this many iterations ...
UNROLL_BUDGET = 800      # ... when iterations x body elements stays below this (as the RDNA3 backend does)


def _unroll_count(u: UOp) -> int | None:
  """The trip count of a RANGE to unroll (a constant of at most UNROLL_MAX), else None."""
  if u.op is not O.RANGE: return None
  b = u.src[0]
  if b.op is O.CAST and b.src[0].op is O.CONST: b = b.src[0]
  if b.op is not O.CONST or not isinstance(b.arg, int) or not 0 <= b.arg <= UNROLL_MAX: return None
  return b.arg


def _matching_end(elements: list, i: int) -> int:
  """The index of the END that closes the RANGE at elements[i] (RANGE/END nest)."""
  depth = 0
  for j in range(i, len(elements)):
    if elements[j].op is O.RANGE: depth += 1
    elif elements[j].op is O.END:
      depth -= 1
      if depth == 0: return j
  raise CompileError(f"unclosed RANGE in the linear program: {_short(elements[i])}", elements[i])


def _param_t(dt: DType) -> str:
  """A scalar parameter's .param type, as CUDA declares it (a char is .u8/.s8, a bool .u8)."""
  return "u8" if dt.is_bool else _t(dt) if not (dt.is_float and dt.itemsize == 2) else "b16"


# ------------------------------------------------------------------------------------------------------------------
# memory

def _space(ptr: PtrDType) -> str:
  return {AddrSpace.GLOBAL: "global", AddrSpace.LOCAL: "shared", AddrSpace.REG: "local"}[ptr.addrspace]


def _fold(R: _Renderer, u: UOp) -> bool:
  """Record the value of an integer ALU op whose operands are all known; False when it cannot be evaluated here."""
  try: R.known[u] = exec_alu(u.op, u.dtype, [R.known[x] for x in u.src])
  except (EvalError, ArithmeticError, TypeError): return False
  return True


def _split_index(R: _Renderer, idx: UOp) -> tuple[UOp | None, int]:
  """idx as rest + c with c known (rest None when all of idx is known), or (idx, 0) when that split could change the
  address: the unwrapped sum rest + c must stay in idx's type for every value rest can take (a uint16 i - 1 is
  i + 65535 after symbolic: it wraps, and base + (i + 65535) * size would be another element)."""
  if idx in R.known: return None, R.known[idx]
  if idx.op is not O.ADD or not idx.dtype.is_int: return idx, 0
  a, b = idx.src
  if a in R.known: a, b = b, a
  if b not in R.known: return idx, 0
  rest, c = _split_index(R, a)
  c += R.known[b]
  lo, hi = idx.dtype.bounds
  smallest, largest = (c, c) if rest is None else (rest.vmin + c, rest.vmax + c)
  if not (lo <= smallest and largest <= hi): return idx, 0
  return rest, c


def _address(R: _Renderer, base: str, idx: UOp, u: UOp) -> str:
  """base + idx * itemsize as a 64-bit address operand: "reg" or "reg+imm" (the index sign- or zero-extended by its
  type: mul.wide). A known constant part of the index becomes the immediate offset of ld/st ("Addresses as
  Operands": [reg+imm]), and base + rest * size is computed once per straight-line region."""
  size = u.dtype.base.itemsize
  rest, c = _split_index(R, idx)
  if rest is idx or not -(1 << 31) <= c * size < (1 << 31): return _element_address(R, base, idx, size)
  a = base if rest is None else _element_address(R, base, rest, size)
  return a if c == 0 else f"{a}+{c * size}"    # a negative offset is written [reg+-n], as LLVM's NVPTX backend does


def _element_address(R: _Renderer, base: str, idx: UOp, size: int) -> str:
  key = (base, R.names[idx], size)
  if key in R.addresses: return R.addresses[key]
  ireg, it = R.names[idx], idx.dtype
  off = R.reg(dtypes.uint64)
  if it.itemsize == 8: R.emit(f"mul.lo.s64 {off}, {ireg}, {size};")
  else:
    if it.itemsize < 4: ireg = _convert_int(R, ireg, it, dtypes.int32 if it.kind == "int" else dtypes.uint32)
    R.emit(f"mul.wide.{'u' if it.kind == 'uint' else 's'}32 {off}, {ireg}, {size};")
  a = R.reg(dtypes.uint64)
  R.emit(f"add.s64 {a}, {base}, {off};")
  R.addresses[key] = a
  return a


def _mem_t(dt: DType) -> str:
  """The ld/st type: bool is a byte, f16 moves as b16 ("Data Movement and Conversion Instructions: ld")."""
  if dt.is_bool: return "u8"
  if dt.is_float: return _b(dt) if dt.itemsize == 2 else _t(dt)
  return _t(dt)


def _load(R: _Renderer, u: UOp, addr: str) -> str:
  """A load; a gated INDEX loads only where its gate holds and gives 0 elsewhere (no memory access there)."""
  idx, dt = u.src[0], u.dtype
  space = _space(idx.dtype)
  dst = R.reg(dt)
  tmp = R.reg(dtypes.uint16) if dt.is_bool else dst
  guard = ""
  if len(idx.src) == 3:
    R.emit(f"mov.{_b(dt) if dt.is_float else _op_t(dt) if not dt.is_bool else 'u16'} {tmp}, "
           f"{_literal(0, dt) if not dt.is_bool else 0};")
    guard = f"@{R.names[idx.src[2]]} "
  R.emit(f"{guard}ld{_volatile(idx)}.{space}.{_mem_t(dt)} {tmp}, [{addr}];")
  if dt.is_bool: R.emit(f"setp.ne.u16 {dst}, {tmp}, 0;")
  return dst


def _store(R: _Renderer, idx: UOp, addr: str, val: str, dt: DType):
  if dt.is_bool:
    b = R.reg(dtypes.uint16)
    R.emit(f"selp.u16 {b}, 1, 0, {val};")
    val = b
  R.emit(f"st{_volatile(idx)}.{_space(idx.dtype)}.{_mem_t(dt)} [{addr}], {val};")


def _volatile(idx: UOp) -> str:
  """".volatile" for an access of a volatile param: ptxas may neither merge nor drop it ("Data Movement and
  Conversion Instructions: ld", the .volatile qualifier)."""
  buf = idx.buffer
  return ".volatile" if buf.op is O.PARAM and buf.arg.volatile else ""


# ------------------------------------------------------------------------------------------------------------------
# conversions ("Data Movement and Conversion Instructions: cvt")

def _convert_int(R: _Renderer, src: str, st: DType, dt: DType) -> str:
  """Integer -> integer as C: widening sign- or zero-extends by the source's type, narrowing keeps the low bits."""
  if st == dt: return src
  d = R.reg(dt)
  if _rclass(st) == _rclass(dt) and st.itemsize == dt.itemsize:
    R.emit(f"mov.{_b(dt)} {d}, {src};")
    R.wrap8(d, dt)   # int8 <-> uint8: the 16-bit register holds the other extension
  else:
    # cvt with an 8-bit type reads / writes the low byte of a 16-bit register and sign- or zero-extends it
    R.emit(f"cvt.{_op_t(dt) if dt.itemsize == 1 else _t(dt)}.{_t(st) if st.itemsize != 1 else _t(st)} {d}, {src};")
    if dt.itemsize == 1: R.wrap8(d, dt)
  return d


def _cast(R: _Renderer, src: str, st: DType, dt: DType) -> str:
  if st == dt: return src
  if dt.is_bool:   # x != 0; a NaN is true (C: (bool)NaN is 1): unordered-or-not-equal
    p = R.reg(dt)
    if st.is_float: R.emit(f"setp.neu.{_t(st)} {p}, {src}, {_float_zero(R, st)};")
    else: R.emit(f"setp.ne.{_op_t(st)} {p}, {src}, 0;")
    return p
  if st.is_bool:
    d = R.reg(dt)
    if dt.is_float and dt.itemsize == 2: R.emit(f"selp.b16 {d}, 0x3C00, 0x0000, {src};")
    else: R.emit(f"selp.{_op_t(dt)} {d}, {_literal(1, dt)}, {_literal(0, dt)}, {src};")
    return d
  if st.is_int and dt.is_int: return _convert_int(R, src, st, dt)
  d = R.reg(dt)
  if st.is_int:    # int -> float: round to nearest even
    R.emit(f"cvt.rn.{_t(dt)}.{_t(st)} {d}, {src};")
  elif dt.is_float:
    # widening is exact (no rounding modifier allowed), narrowing rounds to nearest even
    rnd = ".rn" if dt.itemsize < st.itemsize else ""
    R.emit(f"cvt{rnd}.{_t(dt)}.{_t(st)} {d}, {src};")
  else:
    return _float_to_int(R, src, st, dt)
  return d


def _float_zero(R: _Renderer, dt: DType) -> str:
  return R.const(0.0, dt) if dt.itemsize == 2 else _literal(0.0, dt)


def _float_to_int(R: _Renderer, src: str, st: DType, dt: DType) -> str:
  """dtypes.float_to_int: truncate toward zero, clamp to the 32-bit (64-bit for 8-byte dt) range of dt's signedness
  (cvt.rzi clamps float-to-integer results), NaN -> 0; a 1- or 2-byte dt keeps the low bits of the 32-bit value."""
  wide = (dtypes.uint64 if dt.kind == "uint" else dtypes.int64) if dt.itemsize == 8 else \
         (dtypes.uint32 if dt.kind == "uint" else dtypes.int32)
  w = R.reg(wide)
  R.emit(f"cvt.rzi.{_t(wide)}.{_t(st)} {w}, {src};")
  nan = R.reg(dtypes.bool)
  R.emit(f"setp.nan.{_t(st)} {nan}, {src}, {src};")
  R.emit(f"selp.{_t(wide)} {w}, 0, {w}, {nan};")
  return _convert_int(R, w, wide, dt)


def _bitcast(R: _Renderer, src: str, st: DType, dt: DType) -> str:
  if st.itemsize != dt.itemsize: raise CompileError(f"BITCAST between sizes {st.name} -> {dt.name}")
  d = R.reg(dt)
  R.emit(f"mov.{_b(dt)} {d}, {src};")
  R.wrap8(d, dt)
  return d


# ------------------------------------------------------------------------------------------------------------------
# ALU ("Integer Arithmetic Instructions", "Floating Point Instructions", "Half Precision Floating Point
# Instructions", "Comparison and Selection Instructions", "Logic and Shift Instructions")

def _is_f16(dt: DType) -> bool: return dt.is_float and dt.itemsize == 2


def _binary(R: _Renderer, u: UOp, r: list) -> str:
  dt, op = u.dtype, u.op
  key = _rclass(dt)   # R.reg(dt), inlined (a binary op is the most frequent element)
  counts = R.counts
  n = counts.get(key, 0) + 1
  counts[key] = n
  d = f"{key[0]}{n}"
  if dt.is_float and _is_f16(dt) and op is O.FDIV:
    return _via_f32(R, u, r, lambda a, b, o: R.emit(f"div.rn.f32 {o}, {a}, {b};"))
  tmpl = _BINARY_LINES.get((op, dt))
  if tmpl is None: tmpl = _BINARY_LINES[(op, dt)] = _binary_line(op, dt)
  R.lines.append(tmpl.format(d, r[0], r[1]))
  if dt.itemsize == 1 and not (dt.is_bool or dt.is_float): R.wrap8(d, dt)   # (wrap8 acts on 8-bit ints only)
  return d


_BINARY_LINES: dict = {}   # (op, dtype) -> the instruction line of _binary with {0} = {1} op {2}, made once


def _binary_line(op: Ops, dt: DType) -> str:
  if dt.is_bool: return f"\t{_LOGIC[op]}.pred {{0}}, {{1}}, {{2}};"
  if dt.is_float:
    name = {O.ADD: "add", O.SUB: "sub", O.MUL: "mul", O.FDIV: "div"}[op]
    return f"\t{name}.rn.{_t(dt)} {{0}}, {{1}}, {{2}};"
  t = _op_t(dt)
  if op in (O.AND, O.OR, O.XOR): return f"\t{_LOGIC[op]}.b{t[1:]} {{0}}, {{1}}, {{2}};"
  if op is O.MUL: return f"\tmul.lo.{t} {{0}}, {{1}}, {{2}};"
  return f"\t{'add' if op is O.ADD else 'sub'}.{t} {{0}}, {{1}}, {{2}};"


_LOGIC = {O.AND: "and", O.OR: "or", O.XOR: "xor"}


def _shift(R: _Renderer, u: UOp, r: list) -> str:
  """shl/shr take a .u32 shift amount; shr.s is arithmetic on signed types, logical on unsigned (as C)."""
  dt, amt_dt = u.dtype, u.src[1].dtype
  amt = _convert_int(R, r[1], amt_dt, dtypes.uint32) if amt_dt.itemsize != 4 else r[1]
  d = R.reg(dt)
  bits = _op_t(dt)[1:]
  if u.op is O.SHL: R.emit(f"shl.b{bits} {d}, {r[0]}, {amt};")
  else: R.emit(f"shr.{_op_t(dt)} {d}, {r[0]}, {amt};")
  R.wrap8(d, dt)
  return d


def _divmod(R: _Renderer, u: UOp, r: list) -> str:
  """C's truncating / and % (div.s/div.u, rem.s/rem.u truncate toward zero). The ISA leaves a zero divisor's result
  machine-specific and says nothing of MIN / -1, so a divisor that may be either is replaced by 1 before the
  division and the result fixed afterwards: 0 for a zero divisor, -x and 0 for -1 (the reference semantics)."""
  dt = u.dtype
  t = _op_t(dt)
  a, b = u.src
  may_zero = b.vmin <= 0 <= b.vmax
  may_m1 = dt.kind == "int" and b.vmin <= -1 <= b.vmax
  name = "div" if u.op is O.IDIV else "rem"
  if not (may_zero or may_m1):
    d = R.reg(dt)
    R.emit(f"{name}.{t} {d}, {r[0]}, {r[1]};")
    R.wrap8(d, dt)
    return d
  bad = R.reg(dtypes.bool)
  if may_zero and may_m1:
    p0, p1 = R.reg(dtypes.bool), R.reg(dtypes.bool)
    R.emit(f"setp.eq.{t} {p0}, {r[1]}, 0;")
    R.emit(f"setp.eq.{t} {p1}, {r[1]}, -1;")
    R.emit(f"or.pred {bad}, {p0}, {p1};")
  else:
    R.emit(f"setp.eq.{t} {bad}, {r[1]}, {0 if may_zero else -1};")
  safe = R.reg(dt)
  R.emit(f"selp.{t} {safe}, 1, {r[1]}, {bad};")
  q = R.reg(dt)
  R.emit(f"{name}.{t} {q}, {r[0]}, {safe};")
  if may_m1:   # b == -1: x / -1 = 0 - x (wrapping), x % -1 = 0
    m1, alt = R.reg(dtypes.bool), R.reg(dt)
    R.emit(f"setp.eq.{t} {m1}, {r[1]}, -1;")
    if u.op is O.IDIV: R.emit(f"sub.{t} {alt}, 0, {r[0]};")
    else: R.emit(f"mov.{t} {alt}, 0;")
    R.emit(f"selp.{t} {q}, {alt}, {q}, {m1};")
  if may_zero:
    z = R.reg(dtypes.bool)
    R.emit(f"setp.eq.{t} {z}, {r[1]}, 0;")
    R.emit(f"selp.{t} {q}, 0, {q}, {z};")
  R.wrap8(q, dt)
  return q


def _compare(R: _Renderer, u: UOp, r: list) -> str:
  st = u.src[0].dtype
  d = R.reg(dtypes.bool)
  if st.is_bool:    # on predicates: a < b is !a & b, a == b is !(a ^ b)
    if u.op is O.CMPNE: R.emit(f"xor.pred {d}, {r[0]}, {r[1]};")
    else:
      x = R.reg(dtypes.bool)
      if u.op is O.CMPEQ: R.emit(f"xor.pred {x}, {r[0]}, {r[1]};")
      else: R.emit(f"not.pred {x}, {r[0]};")
      if u.op is O.CMPEQ: R.emit(f"not.pred {d}, {x};")
      else: R.emit(f"and.pred {d}, {x}, {r[1]};")
    return d
  cmp = {O.CMPLT: "lt", O.CMPEQ: "eq", O.CMPNE: "neu" if st.is_float else "ne"}[u.op]
  R.emit(f"setp.{cmp}.{_op_t(st)} {d}, {r[0]}, {r[1]};")
  return d


def _where(R: _Renderer, u: UOp, r: list) -> str:
  dt = u.dtype
  d = R.reg(dt)
  if dt.is_bool:    # selp has no .pred form: (c & a) | (!c & b)
    nc, t1, t2 = R.reg(dt), R.reg(dt), R.reg(dt)
    R.emit(f"not.pred {nc}, {r[0]};")
    R.emit(f"and.pred {t1}, {r[0]}, {r[1]};")
    R.emit(f"and.pred {t2}, {nc}, {r[2]};")
    R.emit(f"or.pred {d}, {t1}, {t2};")
    return d
  R.emit(f"selp.{_b(dt) if dt.is_float else _op_t(dt)} {d}, {r[1]}, {r[2]}, {r[0]};")
  return d


def _max(R: _Renderer, u: UOp, r: list) -> str:
  """a > b ? a : b (the C backend's form: with a NaN operand the result is b, where max.f32 would drop the NaN)."""
  dt = u.dtype
  if dt.is_bool:
    d = R.reg(dt)
    R.emit(f"or.pred {d}, {r[0]}, {r[1]};")
    return d
  p, d = R.reg(dtypes.bool), R.reg(dt)
  R.emit(f"setp.gt.{_op_t(dt)} {p}, {r[0]}, {r[1]};")
  R.emit(f"selp.{_b(dt) if dt.is_float else _op_t(dt)} {d}, {r[0]}, {r[1]}, {p};")
  return d


def _neg(R: _Renderer, u: UOp, r: list) -> str:
  dt = u.dtype
  d = R.reg(dt)
  if dt.is_bool: R.emit(f"mov.pred {d}, {r[0]};")   # -x of a bool is x as C's (_Bool)(-x)
  else:
    R.emit(f"neg.{_op_t(dt)} {d}, {r[0]};")
    R.wrap8(d, dt)
  return d


def _not(R: _Renderer, u: UOp, r: list) -> str:
  dt = u.dtype
  d = R.reg(dt)
  if dt.is_bool: R.emit(f"not.pred {d}, {r[0]};")
  else:
    R.emit(f"not.b{_op_t(dt)[1:]} {d}, {r[0]};")
    R.wrap8(d, dt)
  return d


def _via_f32(R: _Renderer, u: UOp, r: list, body) -> str:
  """Compute an f16/f64 operation in f32 (cvt to f32, body(a, b, out), cvt.rn back) where PTX has no form for the
  type: f16 division, sqrt and reciprocal, and every transcendental. For f16 /, sqrt and 1/x the result is still the
  correctly rounded f16 one: f32's 24-bit significand is at least 2 * 11 + 2 bits, so rounding twice (to f32, then
  to f16) equals rounding once for these operations. f64 transcendentals get f32 precision (and f32's range)."""
  dt = u.dtype
  args = []
  for s, x in zip(u.src, r):
    if s.dtype == dtypes.float32: args.append(x); continue
    f = R.reg(dtypes.float32)
    R.emit(f"cvt{'.rn' if s.dtype.itemsize > 4 else ''}.f32.{_t(s.dtype)} {f}, {x};")
    args.append(f)
  out = R.reg(dtypes.float32)
  body(*args, out) if len(args) == 2 else body(args[0], out)
  if dt == dtypes.float32: return out
  d = R.reg(dt)
  R.emit(f"cvt{'.rn' if dt.itemsize < 4 else ''}.{_t(dt)}.f32 {d}, {out};")
  return d


def _unary_float(R: _Renderer, u: UOp, r: list) -> str:
  dt, op = u.dtype, u.op
  if op in (O.SQRT, O.RECIP) and not _is_f16(dt):   # IEEE round-to-nearest forms exist for f32 and f64
    d = R.reg(dt)
    R.emit(f"{'sqrt' if op is O.SQRT else 'rcp'}.rn.{_t(dt)} {d}, {r[0]};")
    return d
  if op is O.TRUNC:   # round to an integral value toward zero, in the type itself
    d = R.reg(dt)
    R.emit(f"cvt.rzi.{_t(dt)}.{_t(dt)} {d}, {r[0]};")
    return d
  ins = {O.EXP2: "ex2.approx.f32", O.LOG2: "lg2.approx.f32", O.SIN: "sin.approx.f32", O.SQRT: "sqrt.rn.f32",
         O.RECIP: "rcp.rn.f32"}[op]
  return _via_f32(R, u, r, lambda a, o: R.emit(f"{ins} {o}, {a};"))


def _mulacc(R: _Renderer, u: UOp, r: list) -> str:
  """a * b + c, rounded twice (mul.rn then add.rn: no fma), as the C backend computes it."""
  dt = u.dtype
  m, d = R.reg(dt), R.reg(dt)
  if dt.is_float:
    R.emit(f"mul.rn.{_t(dt)} {m}, {r[0]}, {r[1]};")
    R.emit(f"add.rn.{_t(dt)} {d}, {m}, {r[2]};")
  else:
    R.emit(f"mul.lo.{_op_t(dt)} {m}, {r[0]}, {r[1]};")
    R.emit(f"add.{_op_t(dt)} {d}, {m}, {r[2]};")
    R.wrap8(d, dt)
  return d


_ALU = {O.ADD: _binary, O.SUB: _binary, O.MUL: _binary, O.FDIV: _binary, O.AND: _binary, O.OR: _binary,
        O.XOR: _binary, O.SHL: _shift, O.SHR: _shift, O.IDIV: _divmod, O.IMOD: _divmod,
        O.CMPLT: _compare, O.CMPEQ: _compare, O.CMPNE: _compare, O.WHERE: _where, O.MAX: _max,
        O.NEG: _neg, O.NOT: _not, O.SQRT: _unary_float, O.EXP2: _unary_float, O.LOG2: _unary_float,
        O.SIN: _unary_float, O.RECIP: _unary_float, O.TRUNC: _unary_float, O.MULACC: _mulacc}


def compile_ptx(sink: UOp, arch: str = "sm_90") -> str:
  """Kernel sink from the DSL -> lowering -> PTX text (what hcq.compiler.compile(sink, "sm_XX") returns)."""
  if arch not in ARCHS: raise CompileError(f"unknown PTX target {arch!r} (known: {', '.join(ARCHS)})")
  from ..lower import lower
  return render_ptx(lower(sink, PTX_TARGETS[arch]), arch).source
