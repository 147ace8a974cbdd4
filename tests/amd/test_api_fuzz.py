"""Property-based fuzz of the public API on MOCK+AMD against a numpy model of the same sequence.

Random sequences of: launches (demo kernels empty/vadd/matmul, corpus kernels copy_u32/saxpy/private_array/lds_scan,
and small clang-19 kernels for the emulator's one-block fast path, LDS and dynamic __local arguments) with varying
grids, blocks and arguments, timed (wait=True) and not; bound launches (dev.bind / bind_many) run once or again later;
raw PM4 (dev.submit_pm4) whose SET_SH_REG packets clobber the compute queue's registers; copies in and out (device and
host buffers); buffers freed and allocated again; synchronize; launches refused before submit. Every buffer read back
is compared with the model, so a fast path (the driver's register tracking, the mock's launch state, the emulator's
one-block path and pooled state) that leaves a different result than the general path shows up as a mismatch.
A quarter of the sequences end with a GPU fault (fault_ending): every device on the GPU must report it, then refuse
new work.

Default run (~12 s): 50 synchronous sequences, 25 threaded, 15 of two devices on one GPU, 25 operations each (no
shrinking: a failure lists its operations). `-m slow`: 400 sequences of 60 operations in each of the four set-ups
(~12 min)."""
from __future__ import annotations

import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import hcq
from hcq import DeviceError, GPUFault
from hcq.config import Config
from hcq.drivers.amd import pm4
from hcq.drivers.amd.kernels import demo_code_object
from hcq.drivers.hcq import Buffer
from tests.fixtures.opencl.kernels import KERNELS

NF = NI = 512          # elements of each float32 / uint32 buffer
POOL = 3               # buffers per type (the last one host memory)

FUZZ_CL = """
#define T __builtin_amdgcn_workitem_id_x()
#define G __builtin_amdgcn_workgroup_id_x()
#define N __builtin_amdgcn_workgroup_size_x()
// one basic block: the emulator's one-block fast path; reads its kernarg pointer (user SGPRs) every launch
__kernel void put(__global uint *o, uint v) { o[G * N + T] = v + G; }
// the same resources as put (a code rewrite test copies it over put's code)
__kernel void put2(__global uint *o, uint v) { o[G * N + T] = v ^ (G + 0x1000); }
// one basic block reading LDS nobody wrote in this dispatch (the mock gives every dispatch zeroed LDS)
__kernel void ldsr(__global uint *o) { __local volatile uint s[256]; o[G * N + T] = s[T] + 1u; }
// writes the same LDS words, with a barrier
__kernel void ldsw(__global uint *o, uint v) {
  __local volatile uint s[256];
  s[T] = v + T;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  o[G * N + T] = s[N - 1 - T];
}
// one basic block that writes LDS (and leaves it written for whatever runs next in its shape)
__kernel void ldsw1(__global uint *o, uint v) { __local volatile uint s[256]; s[T] = v + T; o[G * N + T] = s[T]; }
// the dispatch packet (dispatch_ptr user SGPRs; COMPUTE_PGM_LO's packet carries its per-launch address)
__kernel void dptr(__global uint *o) {
  __constant uint *p = (__constant uint *)__builtin_amdgcn_dispatch_ptr();
  o[G * N + T] = p[3] ^ ((p[1] & 0xFFFF) << 20);   // grid_size_x, workgroup_size_x
}
// __local pointer arguments: LDS sized per launch (COMPUTE_PGM_RSRC2.LDS_SIZE differs from the program's)
__kernel void dyn(__global float *o, __local float *a, __local float4 *b) {
  uint t = T, n = N;
  a[t] = t; b[t] = (float4)(1000 + t);
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  o[G * n + t] = a[(t + 1) % n] + b[n - 1 - t].w;
}
"""


@lru_cache(maxsize=None)
def fuzz_code_object() -> bytes:
  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "k.cl").write_text(FUZZ_CL)
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100",
                    "-nogpulib", "-O2", "-c", str(tmp / "k.cl"), "-o", str(tmp / "k.o")], check=True)
    subprocess.run(["ld.lld-19", "-shared", str(tmp / "k.o"), "-o", str(tmp / "k.co")], check=True)
    return (tmp / "k.co").read_bytes()


# ---------------------------------------------------------------------------------------------------- the model
def _f32(x): return np.asarray(x, np.float32)


def _wrap_i32(x): return (np.asarray(x, np.int64) & 0xFFFFFFFF).astype(np.uint32)


class World:
  """The device under test and the numpy model of its buffers."""

  def __init__(self, dev):
    self.dev = dev
    demo, fuzz = demo_code_object(), fuzz_code_object()
    self.codes = {"demo": demo, "fuzz": fuzz, **{n: KERNELS[n].code_object() for n in CORPUS}}
    self.progs = {}
    for name, (code, kname) in PROGRAMS.items(): self.progs[name] = dev.load(self.codes[code], kname)
    self.f = [self._new(4 * NF, i == POOL - 1) for i in range(POOL)]
    self.i = [self._new(4 * NI, i == POOL - 1) for i in range(POOL)]
    rng = np.random.default_rng(0)
    self.mf = [_f32(rng.uniform(-1, 1, NF)) for _ in range(POOL)]
    self.mi = [rng.integers(0, 1 << 32, NI, dtype=np.uint32) for _ in range(POOL)]
    for b, m in zip(self.f + self.i, self.mf + self.mi): dev.copyin(b, m)
    self.bound = []        # [(BoundLaunch, [effect, ...], {buffer ids it refers to})]
    self.log = []

  def _new(self, nbytes, host):
    return self.dev.alloc(nbytes, host=True) if host else self.dev.alloc(nbytes)

  def buf(self, kind, j): return (self.f if kind == "f" else self.i)[j]

  def model(self, kind, j): return (self.mf if kind == "f" else self.mi)[j]

  def check(self, kind, j):
    got = np.frombuffer(self.dev.copyout(self.buf(kind, j)), np.float32 if kind == "f" else np.uint32)
    want = self.model(kind, j)
    if kind == "i":
      bad = got != want
    else:
      bad = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4, atol=1e-4, equal_nan=True)
    if bad.any():
      k = int(np.argmax(bad))
      raise AssertionError(f"buffer {kind}{j}: {int(bad.sum())} of {bad.size} elements differ, first at {k}: got "
                           f"{got[k]!r}, expected {want[k]!r}\nops:\n  " + "\n  ".join(self.log))
    if kind == "f": self.mf[j] = got.copy()      # float results within tolerance: carry on from the device's values

  def check_all(self):
    for j in range(POOL):
      self.check("f", j)
      self.check("i", j)


# each launch kind: draw(data) -> (program name, args builder, grid, block, effect(world))
CORPUS = ("copy_u32", "saxpy", "private_array", "lds_scan")
PROGRAMS = {"empty": ("demo", "empty"), "vadd": ("demo", "vadd"), "matmul": ("demo", "matmul"),
            "copy_u32": ("copy_u32", "copy_u32"), "saxpy": ("saxpy", "saxpy"),
            "private_array": ("private_array", "private_array"), "lds_scan": ("lds_scan", "lds_scan"),
            "put": ("fuzz", "put"), "ldsr": ("fuzz", "ldsr"), "ldsw": ("fuzz", "ldsw"), "ldsw1": ("fuzz", "ldsw1"), "dptr": ("fuzz", "dptr"), "dyn": ("fuzz", "dyn")}
BLOCKS = (1, 2, 31, 32, 33, 64, 96, 128)


def _grid_block(data, max_threads, blocks=BLOCKS):
  forced = getattr(data, "forced_shape", None)     # a burst: launches of one shape (see run_sequence)
  if forced is not None and forced[0] * forced[1] <= max_threads and forced[1] in blocks: return forced
  lx = data.draw(st.sampled_from([b for b in blocks if b <= max_threads]))
  gx = data.draw(st.integers(1, max(1, min(4, max_threads // lx))))
  return gx, lx


# bursts favour the one-block kernels (the emulator's entry path) and LDS writers/readers
BURST_KINDS = ("put", "put", "ldsr", "ldsr", "ldsw1", "ldsw1", "ldsw", "empty", "empty", "dptr", "vadd", "copy_u32",
               "private_array", "lds_scan", "dyn", "saxpy")


def draw_launch(data, w: World, kinds=tuple(PROGRAMS)):
  """A launch: (label, args (buffers as ('f'|'i', index)), grid, block, effect(w))."""
  kind = data.draw(st.sampled_from(kinds))
  pick = lambda: data.draw(st.integers(0, POOL - 1))  # noqa: E731
  if kind == "empty":
    gx, lx = _grid_block(data, 1024, BLOCKS + (256,))
    return kind, [], (gx,), (lx,), lambda w: None
  if kind == "vadd":
    a, b, c = pick(), pick(), pick()
    gx, lx = _grid_block(data, NF)
    n = data.draw(st.integers(0, NF))

    def vadd(w):
      lim = min(n, gx * lx)
      with np.errstate(all="ignore"):       # overflow to inf, inf + -inf: as on the device
        w.mf[c][:lim] = w.mf[a][:lim] + w.mf[b][:lim]
    return kind, [("f", a), ("f", b), ("f", c), n], (gx,), (lx,), vadd
  if kind == "matmul":
    a, b, c = data.draw(st.permutations(range(POOL)))
    m, n, k = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12)), data.draw(st.integers(1, 8))
    lx, ly = data.draw(st.sampled_from([1, 4, 8, 16])), data.draw(st.sampled_from([1, 2, 4, 8]))
    gx, gy = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))

    def matmul(w):
      rows, cols = min(m, gy * ly), min(n, gx * lx)
      A = w.mf[a][:m * k].astype(np.float64).reshape(m, k)
      B = w.mf[b][:k * n].astype(np.float64).reshape(k, n)
      C = w.mf[c][:m * n].copy().reshape(m, n)
      # as the kernel does: acc = fma(a, b, acc) in f32, i = 0..k-1 (demo.cl; v_fmac_f32 in demo.hsaco). The product of
      # two f32 is exact in f64, so each step rounds once (to f64, then f32). Values that grew past f32 over many
      # launches overflow at the same step as on the device: the sign of an inf depends on the order of the sum.
      acc = np.zeros((m, n), np.float32)
      with np.errstate(all="ignore"):
        for i in range(k): acc = (A[:, i:i + 1] * B[i:i + 1, :] + acc.astype(np.float64)).astype(np.float32)
      C[:rows, :cols] = acc[:rows, :cols]
      w.mf[c][:m * n] = C.reshape(-1)
    return kind, [("f", a), ("f", b), ("f", c), m, n, k], (gx, gy), (lx, ly), matmul
  if kind == "copy_u32":
    s, d = pick(), pick()
    gx, lx = _grid_block(data, NI)
    n = data.draw(st.integers(0, NI))

    def copy_u32(w):
      lim = min(n, gx * lx)
      w.mi[d][:lim] = w.mi[s][:lim]
    return kind, [("i", s), ("i", d), n], (gx,), (lx,), copy_u32
  if kind == "saxpy":
    x, y = pick(), pick()
    alpha = data.draw(st.sampled_from([0.0, 1.0, -0.5, 2.5]))
    gx, lx = _grid_block(data, NF)
    n = data.draw(st.integers(0, NF))

    def saxpy(w):
      lim = min(n, gx * lx)
      with np.errstate(all="ignore"):       # inf + -inf: nan, as on the device
        w.mf[y][:lim] = _f32(alpha * w.mf[x][:lim].astype(np.float64) + w.mf[y][:lim])
    return kind, [alpha, ("f", x), ("f", y), n], (gx,), (lx,), saxpy
  if kind == "private_array":
    s, d = pick(), pick()
    gx, lx = _grid_block(data, NI)

    def private_array(w):
      t = gx * lx
      idx = w.mi[s][:t].view(np.int32).astype(np.int64)
      i = np.arange(t, dtype=np.int64)
      acc = np.zeros(t, np.int64)
      for kk in range(8):
        j = (idx + 7 * kk) & 63
        acc += j * i + (j ^ 5)
      w.mi[d][:t] = _wrap_i32(acc)
    return kind, [("i", s), ("i", d)], (gx,), (lx,), private_array
  if kind == "lds_scan":
    s, d = pick(), pick()
    gx, lx = _grid_block(data, NI)

    def lds_scan(w):
      v = w.mi[s][:gx * lx].view(np.int32).astype(np.int64).reshape(gx, lx)
      w.mi[d][:gx * lx] = _wrap_i32(np.cumsum(v, axis=1).reshape(-1))
    return kind, [("i", s), ("i", d)], (gx,), (lx,), lds_scan
  if kind == "put":
    o = pick()
    v = data.draw(st.integers(0, (1 << 32) - 1))
    gx, lx = _grid_block(data, NI)

    def put(w):
      w.mi[o][:gx * lx] = _wrap_i32(np.repeat(np.arange(gx, dtype=np.int64) + v, lx))
    return kind, [("i", o), v], (gx,), (lx,), put
  if kind == "ldsr":
    o = pick()
    gx, lx = _grid_block(data, NI)

    def ldsr(w): w.mi[o][:gx * lx] = 1
    return kind, [("i", o)], (gx,), (lx,), ldsr
  if kind == "dptr":
    o = pick()
    gx, lx = _grid_block(data, NI)

    def dptr(w): w.mi[o][:gx * lx] = (gx * lx) ^ (lx << 20)
    return kind, [("i", o)], (gx,), (lx,), dptr
  if kind == "ldsw1":
    o = pick()
    v = data.draw(st.integers(0, (1 << 31)))
    gx, lx = _grid_block(data, NI)

    def ldsw1(w): w.mi[o][:gx * lx] = _wrap_i32(np.tile(v + np.arange(lx, dtype=np.int64), gx))
    return kind, [("i", o), v], (gx,), (lx,), ldsw1
  if kind == "ldsw":
    o = pick()
    v = data.draw(st.integers(0, (1 << 31)))
    gx, lx = _grid_block(data, NI)

    def ldsw(w):
      t = np.arange(lx, dtype=np.int64)
      w.mi[o][:gx * lx] = _wrap_i32(np.tile(v + (lx - 1 - t), gx))
    return kind, [("i", o), v], (gx,), (lx,), ldsw
  assert kind == "dyn"
  o = pick()
  gx, lx = _grid_block(data, NF)
  extra_a, extra_b = data.draw(st.sampled_from([0, 4, 512, 4096])), data.draw(st.sampled_from([0, 16, 1024]))

  def dyn(w):
    t = np.arange(lx)
    w.mf[o][:gx * lx] = np.tile(_f32((t + 1) % lx + 1000 + (lx - 1 - t)), gx)
  return kind, [("f", o), 4 * lx + extra_a, 16 * lx + extra_b], (gx,), (lx,), dyn


def _args(w: World, args):
  return [w.buf(*a) if isinstance(a, tuple) else a for a in args]


def _refs(args) -> set:
  return {a for a in args if isinstance(a, tuple)}


# raw PM4: SET_SH_REG packets over the registers a launch sets (values a launch would never leave there)
CLOBBER = {
  "PGM_LO..RSRC2": (pm4.COMPUTE_PGM_LO, 8), "NUM_THREAD": (pm4.COMPUTE_NUM_THREAD_X, 3), "START": (pm4.COMPUTE_START_X, 3),
  "RSRC3": (pm4.COMPUTE_PGM_RSRC3, 1), "TMPRING": (pm4.COMPUTE_TMPRING_SIZE, 1),
  "USER_DATA": (pm4.COMPUTE_USER_DATA_0, 16), "RESOURCE_LIMITS": (pm4.COMPUTE_RESOURCE_LIMITS, 1),
  "RESTART": (pm4.COMPUTE_RESTART_X, 3),
}


def _open(config: Config, devices: int):
  """hcq.open("MOCK+AMD"), or `devices` devices on one mock GPU (each with its own compute and SDMA queues)."""
  if devices == 1: return [hcq.open("MOCK+AMD", config)]
  from hcq.drivers.amd import open_device
  from hcq.mockgpu import mock_amd_os
  osi = mock_amd_os(config, gpus=1)
  devs = [open_device("KFD", 0, osi, osi.config) for _ in range(devices)]
  devs[0].owned_os = osi        # closed with the device closed last (its worker thread, in threaded mode)
  return devs


def run_sequence(data, config: Config, steps: int, devices: int = 1):
  devs = _open(config, devices)
  worlds, w = [], None
  try:
    worlds = [World(d) for d in devs]
    for _ in range(steps):
      w = worlds[data.draw(st.integers(0, devices - 1))] if devices > 1 else worlds[0]
      dev = w.dev
      if devices > 1: w.log.append(f"-- device {worlds.index(w)}")
      op = data.draw(st.sampled_from(["launch", "launch", "launch", "timed", "burst", "burst", "bind", "bind_many", "rerun", "pm4",
                                      "copyin", "copyout", "sync", "refused", "realloc", "reload"]))
      if op in ("launch", "timed"):
        label, args, grid, block, effect = draw_launch(data, w)
        w.log.append(f"{op} {label}{tuple(args)} grid={grid} block={block}")
        t = w.progs[label](*_args(w, args), global_size=grid, local_size=block, wait=op == "timed")
        if op == "timed": assert isinstance(t, float) and t >= 0
        else: assert t is None
        effect(w)
      elif op == "burst":
        # launches of one shape in a row, of several kernels: the fast paths keyed by shape (the driver's registers,
        # the mock's launch state, the emulator's pooled set-up and one-block entries) see each other's leftovers
        data.forced_shape = (data.draw(st.integers(1, 2)), data.draw(st.sampled_from([32, 64])))
        try:
          for _ in range(data.draw(st.integers(2, 8))):
            label, args, grid, block, effect = draw_launch(data, w, BURST_KINDS)
            timed = data.draw(st.booleans())
            w.log.append(f"burst {label}{tuple(args)} grid={grid} block={block} timed={timed}")
            w.progs[label](*_args(w, args), global_size=grid, local_size=block, wait=timed)
            effect(w)
            if data.draw(st.booleans()):      # before a later launch overwrites what this one left
              for kind, j in sorted(_refs(args)): w.check(kind, j)
        finally: data.forced_shape = None
      elif op in ("bind", "bind_many"):
        launches = [draw_launch(data, w) for _ in range(1 if op == "bind" else data.draw(st.integers(2, 4)))]
        w.log.append(f"{op} #{len(w.bound)}: " + "; ".join(f"{l[0]}{tuple(l[1])} {l[2]} {l[3]}" for l in launches))
        if op == "bind":
          label, args, grid, block, _ = launches[0]
          bl = dev.bind(w.progs[label], *_args(w, args), global_size=grid, local_size=block)
        else:
          bl = dev.bind_many([(w.progs[label], _args(w, args), grid, block) for label, args, grid, block, _ in launches])
        w.bound.append((bl, [l[4] for l in launches], set().union(*(_refs(l[1]) for l in launches))))
        for _ in range(data.draw(st.integers(0, 2))):
          bl(wait=data.draw(st.booleans()))
          for effect in w.bound[-1][1]: effect(w)
      elif op == "rerun":
        if not w.bound: continue
        j = data.draw(st.integers(0, len(w.bound) - 1))
        wait = data.draw(st.booleans())
        w.log.append(f"rerun #{j} wait={wait}")
        bl, effects, _ = w.bound[j]
        bl(wait=wait)
        for effect in effects: effect(w)
      elif op == "pm4":
        names = data.draw(st.lists(st.sampled_from(sorted(CLOBBER)), min_size=1, max_size=3))
        words = []
        for name in names:
          reg, n = CLOBBER[name]
          words += pm4.set_sh_reg(reg, *data.draw(st.lists(st.integers(0, (1 << 32) - 1), min_size=n, max_size=n)))
        if data.draw(st.booleans()): words += pm4.nop(2)
        w.log.append(f"submit_pm4 {names}")
        dev.submit_pm4(words)
      elif op == "copyin":
        kind, j = data.draw(st.sampled_from("fi")), data.draw(st.integers(0, POOL - 1))
        n = NF if kind == "f" else NI
        off = data.draw(st.integers(0, n - 1))
        cnt = data.draw(st.integers(1, n - off))
        seed = data.draw(st.integers(0, 1000))
        rng = np.random.default_rng(seed)
        vals = _f32(rng.uniform(-4, 4, cnt)) if kind == "f" else rng.integers(0, 1 << 32, cnt, dtype=np.uint32)
        w.log.append(f"copyin {kind}{j}[{off}:{off + cnt}]")
        dev.copyin(w.buf(kind, j), vals, offset=4 * off)
        w.model(kind, j)[off:off + cnt] = vals
      elif op == "copyout":
        kind, j = data.draw(st.sampled_from("fi")), data.draw(st.integers(0, POOL - 1))
        w.log.append(f"copyout {kind}{j}")
        w.check(kind, j)
      elif op == "sync":
        w.log.append("synchronize")
        dev.synchronize()
      elif op == "refused":
        # refused before anything is submitted: nothing may change (the register state included)
        label = data.draw(st.sampled_from(["vadd", "put", "empty"]))
        w.log.append(f"refused {label}")
        with pytest.raises(DeviceError):
          if label == "vadd": w.progs["vadd"](w.f[0], w.f[1], global_size=(1,), local_size=(32,))
          elif label == "put": w.progs["put"](w.i[0], 1, global_size=(0,), local_size=(32,))
          else: w.progs["empty"](global_size=(1,), local_size=(2048,))
      elif op == "realloc":
        kind, j = data.draw(st.sampled_from("fi")), data.draw(st.integers(0, POOL - 1))
        w.log.append(f"realloc {kind}{j}")
        w.bound = [b for b in w.bound if (kind, j) not in b[2]]   # bound launches pointing at it go first
        old = w.buf(kind, j)
        dev.free(old)
        new = w._new(old.size, j == POOL - 1)
        (w.f if kind == "f" else w.i)[j] = new
        dev.copyin(new, w.model(kind, j))
      elif op == "reload":
        label = data.draw(st.sampled_from(sorted(PROGRAMS)))
        w.log.append(f"reload {label}")
        code, kname = PROGRAMS[label]
        w.progs[label] = dev.load(w.codes[code], kname)
    for w in worlds:
      w.log.append("final check")
      w.check_all()
    if data.draw(st.integers(0, 3)) == 0: fault_ending(data, worlds)
  except Exception as e:
    if w is not None and not isinstance(e, AssertionError): e.add_note("ops:\n  " + "\n  ".join(w.log))
    raise
  finally:
    for d in reversed(devs):
      try: d.close()
      except GPUFault: pass      # its queues stopped at the fault of fault_ending


UNMAPPED = 0x7000_0000_0000    # no buffer of the fuzz lies there


def fault_ending(data, worlds) -> None:
  """A kernel that reads unmapped memory after whatever the sequence left in flight: GPUFault with the address, at
  the launch (the synchronous mock runs it inside the doorbell write) or at the wait. KFD evicts the process's queues
  on the GPU, so every other device on it raises the same fault at its next wait; after a fault each device refuses
  new work before submitting it."""
  w = worlds[data.draw(st.integers(0, len(worlds) - 1))]
  wait = data.draw(st.booleans())
  w.log.append(f"fault: vadd reading {UNMAPPED:#x} wait={wait}")
  with pytest.raises(GPUFault) as e:
    w.progs["vadd"](w.f[0], Buffer(w.dev, UNMAPPED, 4096), w.f[1], 64, global_size=(1,), local_size=(64,), wait=wait)
    w.dev.synchronize()
  assert e.value.address is not None and UNMAPPED <= e.value.address < UNMAPPED + 4096
  for other in worlds:
    if other is w: continue
    other.log.append("after the other device's fault: put, synchronize")
    with pytest.raises(GPUFault) as e2:
      other.progs["put"](other.i[0], 1, global_size=(1,), local_size=(32,))
      other.dev.synchronize()
    assert e2.value.address == e.value.address
  for x in worlds:
    with pytest.raises(DeviceError, match="faulted earlier"):
      x.progs["empty"](global_size=(1,), local_size=(32,))


# far above what any launch here executes (a few 10k wave-instructions), far below what garbage registers (a launch
# running another program's code) could take to fail on their own
BUDGET = 1_000_000
# No shrinking: each try opens a device and loads 8 code objects (~0.3 s), so shrinking takes minutes; a failure names
# the operations of its sequence instead (the AssertionError, or a note on any other exception)
_NO_SHRINK = dict(deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.mark.tools("clang-19", "ld.lld-19")
@settings(max_examples=50, **_NO_SHRINK)
@given(data=st.data())
def test_api_sequences_match_numpy(data):
  run_sequence(data, Config(timeout_s=3.0, mock_instruction_budget=BUDGET), steps=25)


@pytest.mark.tools("clang-19", "ld.lld-19")
@settings(max_examples=25, **_NO_SHRINK)
@given(data=st.data())
def test_api_sequences_match_numpy_threaded(data):
  run_sequence(data, Config(timeout_s=3.0, mock_instruction_budget=BUDGET, mock_threaded=True), steps=25)


@pytest.mark.tools("clang-19", "ld.lld-19")
@settings(max_examples=15, **_NO_SHRINK)
@given(data=st.data())
def test_api_sequences_of_two_devices_on_one_gpu(data):
  """Two devices of one process on one GPU: their queues keep their own registers; the GPU's emulator caches (shapes,
  one-block entries, launch states) are shared."""
  run_sequence(data, Config(timeout_s=3.0, mock_instruction_budget=BUDGET), steps=30, devices=2)


@pytest.mark.slow
@pytest.mark.tools("clang-19", "ld.lld-19")
@pytest.mark.parametrize("threaded,devices", [(False, 1), (True, 1), (False, 2), (True, 2)],
                         ids=["synchronous", "threaded", "two-devices", "two-devices-threaded"])
@settings(max_examples=400, derandomize=False, **_NO_SHRINK)
@given(data=st.data())
def test_api_sequences_match_numpy_long(threaded, devices, data):
  run_sequence(data, Config(timeout_s=3.0, mock_instruction_budget=BUDGET, mock_threaded=threaded), steps=60,
               devices=devices)


@pytest.mark.tools("clang-19", "ld.lld-19")
@pytest.mark.parametrize("threaded", [False, True], ids=["synchronous", "threaded"])
def test_a_one_block_kernel_whose_code_sdma_rewrites_between_launches(threaded):
  """put's code overwritten (SDMA copy) with put2's between repeat launches of one shape (the driver's repeat
  packets, the mock's kept launch state and the emulator's one-block entry all in play): each launch runs the code
  that is there at the time."""
  co = fuzz_code_object()
  with hcq.open("MOCK+AMD", Config(timeout_s=3.0, mock_threaded=threaded)) as dev:
    put, put2 = dev.load(co, "put"), dev.load(co, "put2")
    assert (put.rsrc1, put.rsrc2) == (put2.rsrc1, put2.rsrc2)
    out, saved = dev.alloc(4 * 64), dev.alloc(256)
    dev.wait_value(dev.copy_async(saved.va, put.entry, 256))
    g = np.repeat(np.arange(2, dtype=np.uint32), 32)
    for v in (5, 6, 7):
      for _ in range(2):
        put(out, v, global_size=(2,), local_size=(32,))
        assert np.array_equal(np.frombuffer(dev.copyout(out), np.uint32), v + g)
      dev.wait_value(dev.copy_async(put.entry, put2.entry, 256))
      for _ in range(2):
        put(out, v, global_size=(2,), local_size=(32,))
        assert np.array_equal(np.frombuffer(dev.copyout(out), np.uint32), v ^ (g + 0x1000))
      dev.wait_value(dev.copy_async(put.entry, saved.va, 256))
