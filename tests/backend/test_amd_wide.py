"""64-bit arithmetic on the RDNA3 backend: int64/uint64 and float64 kernels compiled for gfx1100 and run on MOCK+AMD
(the real bytes on the wave emulator, through the KFD/PM4 path) and on the CPU (C backend), each compared with numpy
bit for bit (NaNs compare as NaN: their payloads are not part of the reference semantics)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import hcq
from amd_reference import objdump, run_c
from hcq.compiler import KernelInfo, Ops, UOp, compile as hcq_compile, dtypes

pytestmark = pytest.mark.tools("cc", "llvm-objdump-19", "llvm-mc-19")

N = 128
I64_MIN, I64_MAX = -2**63, 2**63 - 1


def _p(slot, arr, readonly=True):
  return UOp.param(slot, dtypes.from_numpy(arr.dtype), arr.size, readonly=readonly)


def _gid():
  return UOp.special(N // 32, "gidx0") * 32 + UOp.special(32, "lidx0")


def _wrap64(v: int, unsigned=False) -> int:
  v &= (1 << 64) - 1
  return v - (1 << 64) if not unsigned and v >> 63 else v


def _tdiv(a: int, b: int) -> int:   # C's truncating division, on Python ints
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def _kernel(name, ins: list, exprs_of, out_dtypes):
  """ins: input arrays (slots 0..); exprs_of(loaded values) -> expressions, stored to outputs of out_dtypes."""
  params = [_p(k, a) for k, a in enumerate(ins)]
  g = _gid()
  vals = [p.index(g).load() for p in params]
  exprs = exprs_of(*vals)
  outs = [np.zeros(N, dt) for dt in out_dtypes]
  assert len(outs) == len(exprs)
  O = [_p(len(ins) + k, o, False) for k, o in enumerate(outs)]
  sink = UOp.sink(*[o.index(g).store(e) for o, e in zip(O, exprs)], arg=KernelInfo(name))
  return sink, list(ins) + outs, len(ins)


def int64_case():
  rng = np.random.default_rng(20)
  a = rng.integers(I64_MIN, I64_MAX, N, dtype=np.int64)
  b = rng.integers(I64_MIN, I64_MAX, N, dtype=np.int64)
  b[N // 2:] >>= rng.integers(0, 62, N // 2)           # divisors of every size
  a[:6] = [I64_MIN, I64_MIN, I64_MAX, -1, 5, -7]
  b[:6] = [-1, 1, -3, 7, -2, 0x100000000]
  b[b == 0] = 3
  s = rng.integers(0, 64, N).astype(np.int64)
  ua, ub = a.view(np.uint64), b.view(np.uint64)

  def exprs(x, y, z):
    ux, uy = x.cast(dtypes.uint64), y.cast(dtypes.uint64)
    return [x + y, x - y, x * y, x & y, x | y, x ^ y, x << z, x >> z, -x, x.maximum(y),
            x.idiv(y), x.imod(y), x // y, x % y,
            (ux.idiv(uy)).cast(dtypes.int64), (ux.imod(uy)).cast(dtypes.int64), (ux >> z.cast(dtypes.uint64)).cast(dtypes.int64),
            (x < y).cast(dtypes.int64) + (ux < uy).cast(dtypes.int64) * 2 + x.eq(y).cast(dtypes.int64) * 4 +
            x.ne(y).cast(dtypes.int64) * 8,
            x.cast(dtypes.int32).cast(dtypes.int64), x.cast(dtypes.uint32).cast(dtypes.int64),
            (x + 12345678901).cast(dtypes.int16).cast(dtypes.int64),
            # constants as 64-bit operands: inline (sign-extended) and SGPR-pair ones
            (x < -5).cast(dtypes.int64) + x.eq(0).cast(dtypes.int64) * 2 + (x < 2**40).cast(dtypes.int64) * 4,
            x * -3 + 7, x * (2**40 + 3), x.maximum(-1)]
  ints = [(int(p), int(q), int(r)) for p, q, r in zip(a, b, s)]
  want = [
    [_wrap64(p + q) for p, q, _ in ints], [_wrap64(p - q) for p, q, _ in ints], [_wrap64(p * q) for p, q, _ in ints],
    a & b, a | b, a ^ b, [_wrap64(p << r) for p, q, r in ints], a >> s, [_wrap64(-p) for p, _, _ in ints], np.maximum(a, b),
    [_wrap64(_tdiv(p, q)) for p, q, _ in ints], [_wrap64(p - q * _tdiv(p, q)) for p, q, _ in ints],
    [_wrap64(p // q) for p, q, _ in ints], [_wrap64(p % q) for p, q, _ in ints],
    (ua // ub).view(np.int64), (ua % ub).view(np.int64), (ua >> s.astype(np.uint64)).view(np.int64),
    (a < b).astype(np.int64) + (ua < ub) * 2 + (a == b) * 4 + (a != b) * 8,
    a.astype(np.int32).astype(np.int64), a.astype(np.uint32).astype(np.int64),
    [((_wrap64(p + 12345678901) & 0xFFFF) ^ 0x8000) - 0x8000 for p, _, _ in ints],
    (a < -5).astype(np.int64) + (a == 0) * 2 + (a < 2**40) * 4,
    [_wrap64(p * -3 + 7) for p, _, _ in ints], [_wrap64(p * (2**40 + 3)) for p, _, _ in ints], np.maximum(a, -1)]
  sink, args, nin = _kernel("int64_ops", [a, b, s], exprs, [np.int64] * len(want))
  return sink, args, {nin + k: np.asarray(w, np.int64) for k, w in enumerate(want)}


U64_DIVISORS = [7, 3, 1, 5, 64, 65, 2**40 + 3, 2**64 - 3, 2**63 + 11]
# floor // and % by a constant beyond int32 too: their sign correction compares two literals of different widths
# (lower/commit.py gives such a comparison one type; it failed to lower before)
I64_DIVISORS = [7, -3, 1, -1, -16, 64, 65, 2**40 + 3, -(2**40 + 3)]


def int64_constant_divisor_case():
  """Division and remainder by constant divisors: small ones are inline 64-bit constants (-16..64), the others live
  in an SGPR pair; each has to reach the division loop as its value."""
  rng = np.random.default_rng(22)
  a = rng.integers(I64_MIN, I64_MAX, N, dtype=np.int64)
  a[N // 2:] >>= rng.integers(0, 62, N // 2)
  a[:8] = [I64_MIN, I64_MAX, -1, 0, 1, 6, 7, -7]
  ua = a.view(np.uint64)

  def exprs(x):
    ux = x.cast(dtypes.uint64)
    out = []
    for c in U64_DIVISORS: out += [ux.idiv(c).cast(dtypes.int64), ux.imod(c).cast(dtypes.int64)]
    for c in I64_DIVISORS: out += [x.idiv(c), x.imod(c), x // c, x % c]
    return out
  ints = [int(p) for p in a]
  want = []
  for c in U64_DIVISORS: want += [(ua // np.uint64(c)).view(np.int64), (ua % np.uint64(c)).view(np.int64)]
  for c in I64_DIVISORS:
    want += [[_wrap64(_tdiv(p, c)) for p in ints], [_wrap64(p - c * _tdiv(p, c)) for p in ints]]
    want += [[_wrap64(p // c) for p in ints], [_wrap64(p % c) for p in ints]]
  sink, args, nin = _kernel("int64_const_div", [a], exprs, [np.int64] * len(want))
  return sink, args, {nin + k: np.asarray(w, np.int64) for k, w in enumerate(want)}


def _f64_to_i64(t: np.ndarray, unsigned: bool) -> np.ndarray:
  """compiler/ir/dtypes.float_to_int for 64-bit targets: truncate, NaN 0, saturate."""
  lo, hi = (0, 2**64 - 1) if unsigned else (I64_MIN, I64_MAX)
  out = []
  for v in t:
    if np.isnan(v): out.append(0)
    elif v >= float(hi) + 1 or np.isinf(v) and v > 0: out.append(hi)
    elif v < lo: out.append(lo)
    else: out.append(int(np.trunc(v)))
  return np.array(out, np.uint64 if unsigned else np.int64)


def float64_case():
  rng = np.random.default_rng(21)
  a = rng.standard_normal(N) * np.exp2(rng.integers(-80, 80, N))
  b = rng.standard_normal(N) * np.exp2(rng.integers(-80, 80, N))
  a[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, 2.0**-1070, 1e300, 9.3e18, -9.3e18, 2.0**63, 3.0]
  b[:12] = [0.0, 3.0, np.inf, 2.0, 1.0, 1e-300, 3e-320, 1e-10, 1.5, 0.0, -0.0, 1e308]
  # quotients near overflow and in the denormals, huge and denormal divisors (every v_div_scale case)
  a[12:20] = [2.0**1000, 1.0, 2.0**-1000, 3e-320, 1e308, 2.0**-1060, 7.0, 1e-300]
  b[12:20] = [2.0**-20, 2.0**1023, 2.0**100, 7.0, 1e-10, 2.0**-30, 3e-310, 1e300]
  i = rng.integers(I64_MIN, I64_MAX, N, dtype=np.int64)
  i[:4] = [0, -1, 2**53 + 1, I64_MIN]
  f = (rng.standard_normal(N) * np.exp2(rng.integers(-20, 70, N))).astype(np.float32)
  f[:3] = [np.nan, np.inf, -3e38]

  def exprs(x, y, k, g):
    return [x + y, x - y, x * y, x / y, x.alu(Ops.MULACC, y, x), (x * x).sqrt(), y.sqrt(), x.maximum(y), -x, y.recip(),
            (x < y).cast(dtypes.float64) + x.eq(y).cast(dtypes.float64) * 2 + x.ne(y).cast(dtypes.float64) * 4,
            k.cast(dtypes.float64), k.cast(dtypes.uint64).cast(dtypes.float64), g.cast(dtypes.float64),
            x.cast(dtypes.float32).cast(dtypes.float64), x.cast(dtypes.int32).cast(dtypes.float64),
            x.cast(dtypes.uint32).cast(dtypes.float64),
            x.cast(dtypes.int64).bitcast(dtypes.float64), x.cast(dtypes.uint64).bitcast(dtypes.float64),
            g.cast(dtypes.int64).bitcast(dtypes.float64), k.cast(dtypes.float32).cast(dtypes.float64),
            k.cast(dtypes.uint64).cast(dtypes.float32).cast(dtypes.float64)]
  with np.errstate(all="ignore"):
    cvt32 = lambda v, lo, hi, dt: np.where(np.isnan(v), 0, np.clip(np.trunc(np.nan_to_num(v, posinf=hi, neginf=lo)), lo, hi)).astype(dt)
    ui = i.view(np.uint64)
    want = [a + b, a - b, a * b, a / b, a * b + a, np.sqrt(a * a), np.sqrt(b), np.maximum(a, b), -a, 1.0 / b,
            (a < b) + (a == b) * 2.0 + (a != b) * 4.0,
            i.astype(np.float64), ui.astype(np.float64), f.astype(np.float64),
            a.astype(np.float32).astype(np.float64), cvt32(a, -2**31, 2**31 - 1, np.int32).astype(np.float64),
            cvt32(a, 0, 2**32 - 1, np.uint32).astype(np.float64),
            _f64_to_i64(a, False).view(np.float64), _f64_to_i64(a, True).view(np.float64),
            _f64_to_i64(f.astype(np.float64), False).view(np.float64), i.astype(np.float32).astype(np.float64),
            ui.astype(np.float32).astype(np.float64)]
  np.fmax(a, b, out=want[7])   # MAX: v_max_f64 returns the number when one side is NaN (as the f32 backend does)
  sink, args, nin = _kernel("float64_ops", [a, b, i, f], exprs, [np.float64] * len(want))
  return sink, args, {nin + k: np.asarray(w, np.float64) for k, w in enumerate(want)}


def _same_bits(got, want, what):
  got, want = np.asarray(got).reshape(want.shape), np.asarray(want)
  if want.dtype.kind == "f":
    both_nan = np.isnan(got) & np.isnan(want)
    gb, wb = got.view(np.uint64), want.view(np.uint64)
    bad = np.nonzero((gb != wb) & ~both_nan)[0]
  else:
    bad = np.nonzero(got != want)[0]
  assert not len(bad), f"{what}: {len(bad)} differ, first at {bad[:4]}: got {got[bad[:4]]}, want {want[bad[:4]]}"


@pytest.fixture(scope="module", params=["gfx1100", "gfx1200", "gfx942"])
def mock_amd(request):
  """MOCK+AMD posing as each AMD target the backend compiles for (HCQ_MOCK_GPU): the same kernels on all three."""
  import dataclasses

  from hcq.config import from_env
  with hcq.open("MOCK+AMD", dataclasses.replace(from_env(), mock_gpu=request.param)) as d: yield d


def _run_device(dev, sink, args, outputs):
  prog = dev.compile(sink)
  bufs = []
  for a in args:
    b = dev.alloc(max(a.nbytes, 4))
    dev.copyin(b, a.tobytes())
    bufs.append(b)
  prog(*bufs, global_size=(N // 32, 1, 1), local_size=(32, 1, 1), wait=True)
  return {s: np.frombuffer(dev.copyout(bufs[s])[:args[s].nbytes], args[s].dtype) for s in outputs}


CASES = {"int64": int64_case, "int64_constant_divisor": int64_constant_divisor_case, "float64": float64_case}


@pytest.mark.parametrize("case", list(CASES))
def test_64bit_kernels_match_numpy_on_mock_amd_and_cpu(mock_amd, case):
  sink, args, want = CASES[case]()
  got = _run_device(mock_amd, sink, args, list(want))
  ref = run_c(sink, args, (N // 32, 1, 1), (32, 1, 1))
  for slot, w in want.items():
    _same_bits(got[slot], w, f"{case} output {slot - min(want)} on MOCK+AMD vs numpy")
    _same_bits(ref[slot], w, f"{case} output {slot - min(want)} on the CPU vs numpy")


def test_64bit_code_uses_the_isa_sequences():
  """The instructions the issue names: carry chains, v_mad_u64_u32, 64-bit shifts and compares, the software
  division's loop, and the correctly rounded f64 division (v_div_scale / v_div_fmas / v_div_fixup)."""
  dis_i = objdump(hcq_compile(int64_case()[0], "gfx1100"))
  for pat in ("v_add_co_u32", "v_add_co_ci_u32", "v_sub_co_u32", "v_mad_u64_u32", "v_lshlrev_b64", "v_ashrrev_i64",
              "v_lshrrev_b64", "v_cmp_lt_i64", "v_cmp_lt_u64", "v_alignbit_b32", "s_cbranch_scc1"):
    assert pat in dis_i, pat
  dis_f = objdump(hcq_compile(float64_case()[0], "gfx1100"))
  for pat in ("v_div_scale_f64", "v_div_fmas_f64", "v_div_fixup_f64", "v_rsq_f64", "v_fma_f64", "v_cvt_f64_i32",
              "v_trunc_f64", "v_cvt_f32_f64"):
    assert pat in dis_f, pat
  assert re.search(r"v_fma_f64 v\[\d+:\d+\], -v\[\d+:\d+\]", dis_f), "the Newton-Raphson steps negate with the VOP3 neg bit"


def test_int64_scalar_argument_and_f64_accumulator():
  """A 64-bit kernel argument (s_load_b64 into an SGPR pair) and a float64 register accumulator over a loop."""
  rng = np.random.default_rng(22)
  a = rng.standard_normal((N, 40))
  out, out_i = np.zeros(N), np.zeros(N, np.int64)
  A, O, OI = _p(0, a), _p(1, out, False), _p(2, out_i, False)
  k = UOp.variable("k", -2**62, 2**62, 3, dtypes.int64)
  g = _gid()
  r = UOp.range(40, 0)
  total = A.index(g * 40 + r).load().reduce(r, arg=Ops.ADD)
  sink = UOp.sink(O.index(g).store(total), OI.index(g).store(g.cast(dtypes.int64) * k + k), arg=KernelInfo("wide_args"))
  kv = 3 * 10**17 + 7
  co = hcq_compile(sink, "gfx1100")
  assert "s_load_b64" in objdump(co)
  from amd_emu_runner import run
  views, _ = run(co, [a, out, out_i, kv], (N // 32, 1, 1), (32, 1, 1))
  acc = np.zeros(N)
  for j in range(40): acc += a[:, j]     # the kernel's order of additions
  _same_bits(views[1], acc, "f64 reduction")
  _same_bits(views[2], np.arange(N, dtype=np.int64) * kv + kv, "int64 argument")


def test_f64_division_and_sqrt_are_correctly_rounded_over_the_whole_range():
  """Random bit patterns (denormals to 1e308, both signs): every quotient and square root bit for bit as numpy's,
  overflowing quotients included (inf, not the NaN the scaled estimate's residual makes)."""
  from amd_emu_runner import run
  n = 1024
  rng = np.random.default_rng(23)
  a = np.abs(rng.integers(0, 2**63 - 1, n, dtype=np.int64).view(np.float64))
  b = rng.integers(0, 2**63 - 1, n, dtype=np.int64).view(np.float64) * rng.choice([-1.0, 1.0], n)
  a[~np.isfinite(a)], b[~np.isfinite(b)] = 1.0, 3.0
  A, B = _p(0, a), _p(1, b)
  q, r = np.zeros(n), np.zeros(n)
  Q, R = _p(2, q, False), _p(3, r, False)
  g = UOp.special(n // 32, "gidx0") * 32 + UOp.special(32, "lidx0")
  x, y = A.index(g).load(), B.index(g).load()
  sink = UOp.sink(Q.index(g).store(x / y), R.index(g).store(x.sqrt()), arg=KernelInfo("f64_div_sqrt"))
  views, _ = run(hcq_compile(sink, "gfx1100"), [a, b, q, r], (n // 32, 1, 1), (32, 1, 1))
  with np.errstate(all="ignore"):
    _same_bits(views[2], a / b, "x / y")
    _same_bits(views[3], np.sqrt(a), "sqrt(x)")
    assert np.isinf(a / b).sum() > 10          # the overflowing quotients are really exercised


def test_64bit_values_in_local_memory():
  """int64 and float64 tiles in LDS (ds_store_b64 / ds_load_b64) summed by halving steps with gated loads (a gated
  64-bit load gives 0 where its gate is off): per work-group sums, bit for bit as numpy's same tree of additions."""
  from hcq.compiler import AddrSpace
  from amd_emu_runner import run
  groups, local = 4, 64
  rng = np.random.default_rng(24)
  a = rng.integers(-2**58, 2**58, groups * local, dtype=np.int64)
  f = rng.standard_normal(groups * local) * 1e10
  out, outf = np.zeros(groups, np.int64), np.zeros(groups)
  A, F, O, OF = _p(0, a), _p(1, f), _p(2, out, False), _p(3, outf, False)
  g, l = UOp.special(groups, "gidx0"), UOp.special(local, "lidx0")
  sinks = []
  for src, dst, slot, dt in ((A, O, 0, dtypes.int64), (F, OF, 1, dtypes.float64)):
    tile = UOp.placeholder(local, dt, slot, AddrSpace.LOCAL)
    st = tile.index(l).store(src.index(g * local + l).load())
    step = local // 2
    while step >= 1:
      cur = tile.after(st)
      st = cur.index(l).valid(l < step).store(cur.index(l).load() + cur.index(l + step).valid(l < step).load())
      step //= 2
    sinks.append(dst.index(g).valid(l.eq(0)).store(tile.after(st).index(0).load()))
  sink = UOp.sink(*sinks, arg=KernelInfo("local_sum64"))
  co = hcq_compile(sink, "gfx1100")
  dis = objdump(co)
  assert "ds_store_b64" in dis and "ds_load_b64" in dis
  views, _ = run(co, [a, f, out, outf], (groups, 1, 1), (local, 1, 1))
  ta, tf = a.reshape(groups, local).copy(), f.reshape(groups, local).copy()
  step = local // 2
  while step >= 1:
    ta[:, :step] += ta[:, step:2 * step]
    tf[:, :step] += tf[:, step:2 * step]
    step //= 2
  _same_bits(views[2], ta[:, 0], "int64 LDS sums")
  _same_bits(views[3], tf[:, 0], "float64 LDS sums")


def test_a_64bit_loop_counter_is_a_clear_error():
  """A loop whose trip count may pass int32 (its counter int64): not selected, and the error says why."""
  from hcq.compiler import AxisType, CompileError
  out = UOp.param(0, dtypes.int64, 4)
  n = UOp.variable("n", 0, 2**40, 1, dtypes.int64)
  r = UOp.range(n, 0, AxisType.REDUCE)
  sink = out.index(0).store(r.cast(dtypes.int64).reduce(r)).sink(arg=KernelInfo("loop64"))
  with pytest.raises(CompileError, match="gfx1100: can't select RANGE .*64-bit counter"):
    hcq_compile(sink, "gfx1100")


def test_uniform_f64_operands_and_literals_beyond_float32():
  """float64 values that s_load reads into SGPR pairs (w[gidx], w[gidx + 2], w[5]) in instructions with more scalar
  operands than the constant bus takes (a pair is copied to a VGPR pair), and f64 literals outside the float32 range
  (1e300, 1e-300): bit for bit as numpy."""
  from amd_emu_runner import run
  n = 64
  w, x = np.random.default_rng(7).standard_normal(8), np.random.default_rng(8).standard_normal(n)
  W, X, O = _p(0, w), _p(1, x), _p(2, np.zeros(n), False)
  g = UOp.special(n // 32, "gidx0")
  i = g * 32 + UOp.special(32, "lidx0")
  a, b, c = W.index(g).load(), W.index(g + 2).load(), W.index(5).load()
  e = (a < b).where(a / b, c.abs().sqrt() if hasattr(c, "abs") else (c * c).sqrt()) + X.index(i).load() * (a + b) - \
      (a * b + 1e-300) / (c * 1e300)
  sink = O.index(i).store(e).sink(arg=KernelInfo("uniform_f64"))
  co = hcq_compile(sink, "gfx1100")
  assert "s_load_b64" in objdump(co)
  views, _ = run(co, [w, x, np.zeros(n)], (n // 32, 1, 1), (32, 1, 1))
  gi = np.arange(n) // 32
  av, bv, cv = w[gi], w[gi + 2], w[5]
  with np.errstate(all="ignore"):
    want = np.where(av < bv, av / bv, np.sqrt(cv * cv)) + x * (av + bv) - (av * bv + 1e-300) / (cv * 1e300)
  _same_bits(views[2], want, "uniform f64 expression")


def test_a_third_sgpr_pair_goes_to_a_vgpr_pair():
  """The constant bus takes two scalar operands: a third SGPR pair is copied to a VGPR pair, both halves (a 32-bit
  copy would lose the high one)."""
  from hcq.compiler.backend.amd.isel import ISel
  from hcq.compiler.backend.amd.isel_mir import Sub, VReg
  from hcq.compiler.backend.amd.render import GFX1100_TARGET
  from hcq.compiler.lower import lower
  o = UOp.param(0, dtypes.float64, 1)
  isel = ISel(lower(o.index(0).store(UOp.const(1.0, dtypes.float64)).sink(arg=KernelInfo("k")), GFX1100_TARGET))
  pairs = [VReg("s", 2) for _ in range(3)]
  out = isel.legal_vop3(pairs, "f64")
  assert out[:2] == pairs[:2] and out[2].cls == "v" and out[2].n == 2
  copies = [m for m in isel.code if any(isinstance(d, Sub) and d.reg is out[2] for d in m.defs.values())]
  assert [m.uses["src0"] for m in copies] == [Sub(pairs[2], 0), Sub(pairs[2], 1)]
