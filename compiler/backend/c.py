"""C backend: render a LINEAR kernel as C, build it with the system C compiler, run it on the CPU.

The work-group model is real: `hcq_launch(args, gx, gy, gz, lx, ly, lz)` (generated with the kernel) starts one
POSIX thread per work-item of a group (lx*ly*lz threads); the threads walk the work-groups in order, share one
LOCAL memory block, and meet at BARRIERs with a pthread_barrier_t (and at the end of each group, so that a group's
local memory is not overwritten while another work-item still uses it). A kernel without barriers runs all
work-items in the calling thread.

Arguments: `uint64_t args[]`, indexed by slot: a buffer's address, an integer's value, a float's bit pattern.
Integers wrap (-fwrapv) and floats are not contracted into FMAs (-ffp-contract=off), as the reference semantics.
An integer IDIV/IMOD whose divisor may be zero is guarded: a zero divisor records the first such fault in the
work-group state, the kernel goes on with 0, and hcq_launch returns 1 + the index of the faulting division, which
CProgram.launch raises as KernelFault naming the kernel and the division (a trapping idiv would SIGFPE the whole
process). INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 (compiler/ir/evaluate.py), without the trapping idiv.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from ...safefiles import atomic_writer, is_private_file, private_dir
from ..ir import AddrSpace, CompileError, KernelInfo, PtrDType, UOp, dtypes
from ..ir.uop import _short
from ..ir.ops import O

_BIN = {O.ADD: "+", O.SUB: "-", O.MUL: "*", O.FDIV: "/", O.IDIV: "/", O.IMOD: "%", O.AND: "&",
        O.OR: "|", O.XOR: "^", O.SHL: "<<", O.SHR: ">>", O.CMPLT: "<", O.CMPEQ: "==", O.CMPNE: "!="}
_FLOAT_FN = {O.SQRT: "sqrt", O.EXP2: "exp2", O.LOG2: "log2", O.SIN: "sin", O.TRUNC: "trunc"}


def _ctype(dt) -> str:
  if isinstance(dt, PtrDType): return dt.base.cname + "*"
  return dt.cname


def _float_literal(v: float, dt) -> str:
  suffix = "f" if dt.itemsize == 4 else ""
  if math.isnan(v): return f"__builtin_nan{suffix}(\"\")"
  if math.isinf(v): return ("-" if v < 0 else "") + f"__builtin_inf{suffix}()"
  return f"{v.hex()}{suffix}" if dt.itemsize != 2 else f"(_Float16){v.hex()}"


def _literal(v, dt) -> str:
  if dt.is_bool: return "1" if v else "0"
  if dt.is_float: return _float_literal(float(v), dt)
  if dt.kind == "uint": return f"{int(v)}u" + ("ll" if dt.itemsize == 8 else "")
  if dt.itemsize == 8: return f"{int(v)}ll" if int(v) != -2**63 else "(-9223372036854775807ll-1)"
  if int(v) == -2**31: return "(-2147483647-1)"
  return f"({dt.cname}){int(v)}" if dt.itemsize < 4 else str(int(v))


def _needs_guard(u: UOp) -> bool:
  """An integer IDIV/IMOD whose divisor may be 0 (x86 traps: SIGFPE would kill the process), or -1 with a dividend
  that may be the type's minimum (INT_MIN / -1 traps too). A divisor known to be safe needs no check."""
  a, d = u.src
  if d.vmin <= 0 <= d.vmax: return True
  return d.vmin <= -1 <= d.vmax and u.dtype.kind == "int" and u.dtype.itemsize >= 4 and a.vmin <= u.dtype.bounds[0]


def _guarded_div(u: UOp, a: str, b: str, site: int) -> str:
  """C for a / b or a % b that never traps: a zero divisor records fault `site` in the work-group and yields 0;
  x / -1 is the wrapping negation and x % -1 is 0 (the reference semantics, compiler/ir/evaluate.py: INT_MIN / -1
  wraps to INT_MIN), computed without the idiv that traps on INT_MIN / -1."""
  dt = u.dtype
  zero = f"hcq_div_fault(hcq_wg, {site})"
  if dt.kind == "uint" or dt.itemsize < 4:   # no minimum / -1 trap: narrow types are promoted to int first
    return f"{b} == 0 ? {zero} : {a} {_BIN[u.op]} {b}"
  minus_one = f"({dt.cname})(0 - (unsigned {dt.cname}){a})" if u.op is O.IDIV else "0"
  return f"{b} == 0 ? {zero} : {b} == -1 ? {minus_one} : {a} {_BIN[u.op]} {b}"


@dataclass
class CArtifact:
  """What compile(sink, "c") returns: the C source and what a launcher needs to know."""
  name: str
  source: str
  params: list            # [(slot, "buffer"|"int"|"float", dtype, size, readonly)] in slot order
  global_size: tuple
  local_size: tuple
  has_barrier: bool
  local_bytes: int
  linear: UOp = field(repr=False, default=None)
  faults: list = field(default_factory=list)   # what each guarded integer division is (for the error a fault raises)

  def meta(self) -> dict:
    """What a loader needs, embedded in the shared object as the string hcq_kernel_meta."""
    return {"name": self.name, "params": [[p[0], p[1], p[2].name, p[3], p[4]] for p in self.params],
            "global_size": list(self.global_size), "local_size": list(self.local_size),
            "has_barrier": self.has_barrier, "local_bytes": self.local_bytes, "faults": self.faults}

  @staticmethod
  def from_meta(meta: dict, source: str = "") -> "CArtifact":
    params = [(slot, kind, getattr(dtypes, dt), size, ro) for slot, kind, dt, size, ro in meta["params"]]
    return CArtifact(meta["name"], source, params, tuple(meta["global_size"]), tuple(meta["local_size"]),
                     meta["has_barrier"], meta["local_bytes"], faults=list(meta.get("faults", [])))


# binary ALU ops rendered as `a <op> b` with no guard (IDIV/IMOD may need one: _needs_guard)
_PLAIN_BIN = frozenset(_BIN) - {O.IDIV, O.IMOD}


def render_c(lin: UOp) -> CArtifact:
  info: KernelInfo = lin.arg if isinstance(lin.arg, KernelInfo) else KernelInfo()
  name = "".join(c if c.isalnum() else "_" for c in info.name) or "kernel"
  names: dict[UOp, str] = {}
  body: list[str] = []
  params: dict[int, tuple] = {}
  local_off = 0
  depth = 1
  counter = 0
  has_barrier = False

  def new(prefix: str) -> str:
    nonlocal counter
    counter += 1
    return f"{prefix}{counter}"

  def emit(line: str): body.append("  " * depth + line)

  faults: list[str] = []   # the guarded integer divisions: hcq_launch returns 1 + the index of the one that faulted
  for pos, u in enumerate(lin.src):
    op, src = u.op, u.src
    if op in _PLAIN_BIN:   # the most frequent element: what the last branches below give it, without the tests
      counter += 1
      names[u] = n = f"alu{counter}"
      cname = u.dtype.cname
      body.append(f"{'  ' * depth}{cname} {n} = ({cname})({names.get(src[0])} {_BIN[op]} {names.get(src[1])});")
      continue
    if op is O.CONST:   # literals next (a kernel has many): they read no operand name
      names[u] = _literal(u.arg, u.dtype if not u.dtype.is_weak else (dtypes.float32 if isinstance(u.arg, float) else dtypes.int64))
      continue
    if op is O.CAST and src[0].op is O.CONST:
      names[u] = _literal(u._cv, u.dtype)   # (its const_value)
      continue
    r = list(map(names.get, src))   # (map with the dict's own get: no comprehension frame per element)
    if op is O.PARAM:
      a = u.arg
      if a.slot in params: raise CompileError(f"two kernel arguments in slot {a.slot}: {_short(u)}", u)
      params[a.slot] = (a.slot, "buffer", a.dtype, a.size, a.readonly)
      names[u] = f"data{a.slot}"
      # a volatile buffer: the C compiler must neither merge nor drop its accesses either
      const = ("const " if a.readonly else "") + ("volatile " if a.volatile else "")
      emit(f"{const}{a.dtype.cname}* data{a.slot} = ({const}{a.dtype.cname}*)(uintptr_t)args[{a.slot}];")
    elif op is O.DEFINE_VAR:
      a = u.arg
      if a.slot in params: raise CompileError(f"two kernel arguments in slot {a.slot}: {_short(u)}", u)
      params[a.slot] = (a.slot, "int", a.dtype, 0, True)
      names[u] = a.name if a.name.isidentifier() else f"var{a.slot}"
      emit(f"{a.dtype.cname} {names[u]} = ({a.dtype.cname})args[{a.slot}];")
    elif op is O.BUFFER:
      a = u.arg
      names[u] = n = f"{'local' if a.addrspace is AddrSpace.LOCAL else 'reg'}{a.slot}"
      if a.addrspace is AddrSpace.LOCAL:
        local_off = (local_off + 15) // 16 * 16
        emit(f"{a.dtype.cname}* {n} = ({a.dtype.cname}*)(hcq_lmem + {local_off});")
        local_off += a.dtype.itemsize * a.size
      else:
        emit(f"{a.dtype.cname} {n}[{a.size}];")
    elif op is O.SPECIAL:
      names[u] = n = new(u.arg)
      emit(f"{u.dtype.cname} {n} = ({u.dtype.cname}){'hcq_gid' if u.arg[0] == 'g' else 'hcq_lid'}[{u.arg[4]}];")
    elif op is O.RANGE:
      names[u] = n = new("ridx")
      emit(f"for ({u.dtype.cname} {n} = 0; {n} < {r[0]}; {n}++) {{")
      depth += 1
    elif op in (O.END, O.ENDIF):
      depth -= 1
      emit("}")
    elif op is O.IF:
      emit(f"if ({r[0]}) {{")
      depth += 1
    elif op is O.BARRIER:
      has_barrier = True
      emit("hcq_barrier(hcq_wg);")
    elif op is O.INDEX:
      names[u] = f"({r[0]} + {r[1]})"
    elif op is O.LOAD:
      idx = src[0]
      names[u] = n = new("val")
      if len(idx.src) == 3:
        emit(f"{u.dtype.cname} {n} = {names[idx.src[2]]} ? *({names[idx.src[0]]} + {names[idx.src[1]]}) : "
             f"{_literal(0, u.dtype)};")
      else:
        emit(f"{u.dtype.cname} {n} = *{r[0]};")
    elif op is O.STORE:
      emit(f"*{r[0]} = {r[1]};")
    elif op is O.CAST:
      names[u] = n = new("cast")
      if src[0].dtype.is_float and u.dtype.is_int:   # C leaves out-of-range and NaN undefined: dtypes.float_to_int
        cvt = f"hcq_f2{'u' if u.dtype.kind == 'uint' else 'i'}{64 if u.dtype.itemsize == 8 else 32}"
        emit(f"{u.dtype.cname} {n} = ({u.dtype.cname}){cvt}((double)({r[0]}));")
      else:
        emit(f"{u.dtype.cname} {n} = ({u.dtype.cname})({r[0]});")
    elif op is O.BITCAST:
      names[u] = n = new("bits")
      emit(f"{u.dtype.cname} {n}; {{ {src[0].dtype.cname} t_ = {r[0]}; memcpy(&{n}, &t_, sizeof({n})); }}")
    elif op is O.CUSTOM:
      names[u] = n = new("custom")
      emit(f"{u.dtype.cname} {n} = {u.arg[0].format(*r)};")
    elif op in (O.IDIV, O.IMOD) and u.dtype.is_int and _needs_guard(u):
      faults.append(f"{op.name} {u.dtype.name} at position {pos} of the linear kernel ({r[0]} {_BIN[op]} {r[1]})")
      names[u] = n = new("alu")
      emit(f"{u.dtype.cname} {n} = ({u.dtype.cname})({_guarded_div(u, r[0], r[1], len(faults))});")
    elif op in _BIN or op in (O.MAX, O.WHERE, O.NEG, O.NOT, O.RECIP, O.MULACC) or op in _FLOAT_FN:
      if op in _BIN: expr = f"{r[0]} {_BIN[op]} {r[1]}"
      elif op is O.MAX: expr = f"{r[0]} > {r[1]} ? {r[0]} : {r[1]}"
      elif op is O.WHERE: expr = f"{r[0]} ? {r[1]} : {r[2]}"
      elif op is O.NEG: expr = f"-{r[0]}"
      elif op is O.NOT: expr = f"!{r[0]}" if u.dtype.is_bool else f"~{r[0]}"
      elif op is O.RECIP: expr = f"{_literal(1.0, u.dtype)} / {r[0]}"
      elif op is O.MULACC: expr = f"{r[0]} * {r[1]} + {r[2]}"
      else: expr = f"{_FLOAT_FN[op]}{'f' if u.dtype.itemsize == 4 else ''}({r[0]})"
      names[u] = n = new("alu")
      emit(f"{u.dtype.cname} {n} = ({u.dtype.cname})({expr});")
    else:
      raise CompileError(f"the C backend can't render {op.name}: {_short(u)}", u)

  src_text = _PRELUDE + f"static void {name}_body(const uint64_t* args, const int* hcq_gid, const int* hcq_lid, " \
    f"hcq_wg_t* hcq_wg, char* hcq_lmem) {{\n" + "\n".join(body) + "\n}\n" + \
    _LAUNCHER.replace("KERNEL", name).replace("LOCAL_BYTES", str(max(local_off, 16))) \
             .replace("HAS_BARRIER", "1" if has_barrier else "0")
  ordered = [params[k] for k in sorted(params)]
  art = CArtifact(name, src_text, ordered, info.global_size or (1, 1, 1), info.local_size or (1, 1, 1), has_barrier,
                  local_off, lin, faults)
  art.source += f"const char hcq_kernel_meta[] = {json.dumps(json.dumps(art.meta()))};\n"
  return art


_PRELUDE = """#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
typedef struct { pthread_barrier_t bar; int nthreads; pthread_mutex_t m; pthread_cond_t c; int go; int fault; } hcq_wg_t;
static inline void hcq_barrier(hcq_wg_t* wg) { if (wg->nthreads > 1) pthread_barrier_wait(&wg->bar); }
/* float -> integer as compiler/ir/dtypes.float_to_int: NaN is 0, out of range saturates (C leaves both undefined) */
static inline int hcq_f2i32(double x) {
  return x != x ? 0 : x >= 2147483648.0 ? 2147483647 : x <= -2147483649.0 ? (-2147483647 - 1) : (int)x;
}
static inline unsigned hcq_f2u32(double x) { return x != x ? 0 : x >= 4294967296.0 ? 4294967295u : x <= -1.0 ? 0u : (unsigned)x; }
static inline long long hcq_f2i64(double x) {
  return x != x ? 0 : x >= 9223372036854775808.0 ? 9223372036854775807ll
       : x < -9223372036854775808.0 ? (-9223372036854775807ll - 1) : (long long)x;
}
static inline unsigned long long hcq_f2u64(double x) {
  return x != x ? 0 : x >= 18446744073709551616.0 ? 18446744073709551615ull : x <= -1.0 ? 0ull : (unsigned long long)x;
}
/* an integer division by zero: record the first one (the launch returns it) and go on with 0 */
static inline int hcq_div_fault(hcq_wg_t* wg, int site) {
  int none = 0;
  __atomic_compare_exchange_n(&wg->fault, &none, site, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return 0;
}
"""

_LAUNCHER = """
typedef struct { const uint64_t* args; int gs[3], ls[3]; int tid; hcq_wg_t* wg; char* lmem; } hcq_thread_t;
static void* KERNEL_thread(void* p) {
  hcq_thread_t* t = (hcq_thread_t*)p;
  /* start only when every work-item's thread exists: one that could not be created would leave the others
     waiting at a barrier for ever */
  pthread_mutex_lock(&t->wg->m);
  while (t->wg->go == 0) pthread_cond_wait(&t->wg->c, &t->wg->m);
  int go = t->wg->go;
  pthread_mutex_unlock(&t->wg->m);
  if (go < 0) return 0;
  int lid[3] = { t->tid % t->ls[0], (t->tid / t->ls[0]) % t->ls[1], t->tid / (t->ls[0] * t->ls[1]) };
  for (int gz = 0; gz < t->gs[2]; gz++) for (int gy = 0; gy < t->gs[1]; gy++) for (int gx = 0; gx < t->gs[0]; gx++) {
    int gid[3] = { gx, gy, gz };
    KERNEL_body(t->args, gid, lid, t->wg, t->lmem);
    hcq_barrier(t->wg);  /* the group's local memory is reused by the next group */
  }
  return 0;
}
int hcq_launch(const uint64_t* args, int gx, int gy, int gz, int lx, int ly, int lz) {
  int n = lx * ly * lz;
  char* lmem = (char*)aligned_alloc(64, ((LOCAL_BYTES) + 63) / 64 * 64);
  if (!lmem) return -1;
  memset(lmem, 0, LOCAL_BYTES);
  hcq_wg_t wg; wg.nthreads = HAS_BARRIER ? n : 1; wg.fault = 0;
  int rc = 0;
  if (!HAS_BARRIER || n == 1) {
    for (int gz_ = 0; gz_ < gz; gz_++) for (int gy_ = 0; gy_ < gy; gy_++) for (int gx_ = 0; gx_ < gx; gx_++)
      for (int t = 0; t < n && !wg.fault; t++) {
        int gid[3] = { gx_, gy_, gz_ }, lid[3] = { t % lx, (t / lx) % ly, t / (lx * ly) };
        KERNEL_body(args, gid, lid, &wg, lmem);
      }
  } else {
    pthread_barrier_init(&wg.bar, 0, n);
    pthread_mutex_init(&wg.m, 0); pthread_cond_init(&wg.c, 0); wg.go = 0;
    pthread_t* th = (pthread_t*)calloc(n, sizeof(pthread_t));
    hcq_thread_t* ts = (hcq_thread_t*)calloc(n, sizeof(hcq_thread_t));
    pthread_attr_t attr; pthread_attr_init(&attr); pthread_attr_setstacksize(&attr, 1 << 18);
    int created = 0;
    for (int t = 0; t < n; t++) {
      ts[t] = (hcq_thread_t){ args, { gx, gy, gz }, { lx, ly, lz }, t, &wg, lmem };
      if (pthread_create(&th[t], &attr, KERNEL_thread, &ts[t]) != 0) { rc = -2; break; }
      created++;
    }
    pthread_mutex_lock(&wg.m); wg.go = rc ? -1 : 1; pthread_cond_broadcast(&wg.c); pthread_mutex_unlock(&wg.m);
    for (int t = 0; t < created; t++) pthread_join(th[t], 0);
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&wg.bar);
    pthread_mutex_destroy(&wg.m); pthread_cond_destroy(&wg.c);
    free(th); free(ts);
  }
  free(lmem);
  return rc ? rc : wg.fault;   /* > 0: 1 + the index of the guarded division that divided by zero */
}
"""


# ------------------------------------------------------------------------------------------------------------------
# building and running

CC_FLAGS = ["-O2", "-shared", "-fPIC", "-pthread", "-fwrapv", "-ffp-contract=off", "-fno-strict-aliasing", "-std=gnu11"]


def kernel_cache(cache_dir: str) -> str:
  """<cache_dir>/c, where built and loaded shared objects are kept: both folders checked to be this user's alone
  (safefiles.private_dir), since what is found there is loaded and run."""
  hint = "choose another cache folder with HCQ_CACHE_DIR (Config.cache_dir)"
  return private_dir(os.path.join(private_dir(cache_dir, hint), "c"), hint)


def build_shared_object(source: str, cache_dir: str, cc: str = "cc") -> str:
  """Compile C source into a shared object, cached in kernel_cache(cache_dir) by the hash of the compiler, its flags
  and the source; returns its path.

  The object is built in a fresh private folder (mkdtemp) and renamed into place, so no planted name is written
  through and a reader never sees half an object. A cached object is used only if safefiles.is_private_file says so
  (a regular file of ours that nobody else may write), else it is built again. No hash of the object is kept
  beside it: a second file in the same folder would be exactly as trustworthy as the object itself, and the
  atomic rename already rules out a half-written one."""
  digest = hashlib.sha256((cc + " ".join(CC_FLAGS) + source).encode()).hexdigest()[:24]
  folder = kernel_cache(cache_dir)
  so = os.path.join(folder, f"k_{digest}.so")
  if is_private_file(so): return so
  kept = so[:-3] + ".c"   # the source is kept next to the .so for reading, and named by a failure
  build = tempfile.mkdtemp(prefix=".build-", dir=folder)
  try:
    src, out = os.path.join(build, "k.c"), os.path.join(build, "k.so")
    with open(src, "w") as f: f.write(source)
    try: proc = subprocess.run([cc, *CC_FLAGS, "-o", out, src, "-lm"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
      os.replace(src, kept)
      raise CompileError(f"could not run the C compiler {cc!r} on {kept}: {e}") from e
    os.replace(src, kept)
    if proc.returncode != 0:
      raise CompileError(f"{cc} failed on {kept} (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    os.chmod(out, 0o700)   # the compiler's mode follows the umask: a group-writable object would not be loaded
    os.replace(out, so)
  finally:
    shutil.rmtree(build, ignore_errors=True)
  return so


def load_shared_object(image: bytes, cache_dir: str) -> str:
  """Put a shared object's bytes in kernel_cache(cache_dir), named by their hash; returns the path to dlopen. A file
  already there is used only if it is ours (is_private_file) and holds exactly these bytes; else it is rewritten."""
  path = os.path.join(kernel_cache(cache_dir), f"so_{hashlib.sha256(image).hexdigest()[:24]}.so")
  if is_private_file(path):
    with open(path, "rb") as f:
      if f.read() == image: return path
  with atomic_writer(path, perm=0o700) as f: f.write(image)
  return path


class KernelFault(CompileError):
  """A kernel faulted while it ran (an integer division by zero); .site says which operation of the kernel."""
  def __init__(self, msg: str, site: str):
    super().__init__(msg)
    self.site = site


class CProgram:
  """A kernel built to a shared object, loaded with dlopen (ctypes), launched through hcq_launch. The shared object
  carries its own description (hcq_kernel_meta), so a program can be loaded from the file alone."""
  def __init__(self, path: str):
    self.path = path
    self.lib = ctypes.CDLL(path)
    try:
      meta = json.loads(ctypes.cast(self.lib.hcq_kernel_meta, ctypes.c_char_p).value)
      self.fn = self.lib.hcq_launch
    except (AttributeError, ValueError) as e:
      raise CompileError(f"{path}: not an hcq C kernel (no hcq_launch/hcq_kernel_meta: {e})") from None
    self.art = CArtifact.from_meta(meta)
    self.name = self.art.name
    self.fn.restype = ctypes.c_int
    self.fn.argtypes = [ctypes.POINTER(ctypes.c_uint64)] + [ctypes.c_int] * 6

  @staticmethod
  def from_artifact(art: CArtifact, cache_dir: str, cc: str = "cc") -> "CProgram":
    return CProgram(build_shared_object(art.source, cache_dir, cc))

  def pack_args(self, args) -> ctypes.Array:
    nslots = (max((p[0] for p in self.art.params), default=-1) + 1)
    if len(args) != len(self.art.params):
      raise CompileError(f"kernel {self.name} takes {len(self.art.params)} arguments "
                         f"({', '.join(f'slot {p[0]}: {p[1]}' for p in self.art.params)}), got {len(args)}")
    words = (ctypes.c_uint64 * max(nslots, 1))()
    for (slot, kind, dt, size, _), a in zip(self.art.params, args):
      if kind == "buffer":
        va = getattr(a, "va", a)
        if not isinstance(va, int): raise CompileError(f"kernel {self.name} slot {slot}: expected a buffer, got {a!r}")
        nbytes = getattr(a, "size", None)
        if nbytes is not None and nbytes < size * dt.itemsize:
          raise CompileError(f"kernel {self.name} slot {slot}: buffer of {nbytes} bytes, the kernel reads/writes "
                             f"{size} x {dt.name} = {size * dt.itemsize}")
        words[slot] = va
      elif dt.is_float: words[slot] = struct.unpack("<I", struct.pack("<f", float(a)))[0]
      else:
        v = int(a)
        lo, hi = dt.bounds
        if not lo <= v <= hi: raise CompileError(f"kernel {self.name} slot {slot}: {v} does not fit {dt.name}")
        words[slot] = v & 0xFFFFFFFFFFFFFFFF
    return words

  def __call__(self, *args, global_size=None, local_size=None) -> float:
    words = self.pack_args(args)
    return self.launch(words, global_size, local_size)

  def check_dims(self, gs: tuple, ls: tuple, local_given: bool = True):
    if local_given and self.art.local_size != (1, 1, 1) and ls != self.art.local_size:
      raise CompileError(f"kernel {self.name} is built for local size {self.art.local_size}, launched with {ls}")
    for d in range(3):   # more work-groups than the kernel's gidx range would index past its buffers
      if self.art.global_size[d] > 1 and gs[d] > self.art.global_size[d]:
        raise CompileError(f"kernel {self.name}: global size {gs} exceeds the {self.art.global_size} it was built for")
    if math.prod(ls) > 1024 or min(gs + ls) < 1:
      raise CompileError(f"kernel {self.name}: bad launch dimensions global {gs} local {ls}")

  def launch(self, words, global_size=None, local_size=None) -> float:
    """Run with packed arguments (pack_args); returns seconds."""
    gs = tuple(global_size) if global_size is not None else self.art.global_size
    ls = tuple(local_size) if local_size is not None else self.art.local_size
    gs, ls = (tuple(gs) + (1, 1, 1))[:3], (tuple(ls) + (1, 1, 1))[:3]
    self.check_dims(gs, ls, local_size is not None)
    t0 = time.perf_counter()
    rc = self.fn(words, *gs, *ls)
    dt = time.perf_counter() - t0
    if rc > 0:
      site = self.art.faults[rc - 1] if rc <= len(self.art.faults) else f"guarded division #{rc}"
      raise KernelFault(f"kernel {self.name}: integer division by zero in {site}", site)
    if rc != 0:
      raise CompileError(f"kernel {self.name}: launch failed ({'no memory' if rc == -1 else 'could not start a thread per work-item'})")
    return dt
