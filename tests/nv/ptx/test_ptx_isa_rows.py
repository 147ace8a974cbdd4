"""Edge cases of the PTX ISA's own text (9.1) that the interpreter once got wrong; each test names its section.
min/max: -0.0 < +0.0 and canonical NaNs (9.7.3.11/12, 9.7.4.7/8); .xorsign.abs (9.7.3.11); bf16x2 min/max on
each half (9.7.4.7); testp.normal of zeros (9.7.3.1); cvt float->int of NaN (9.7.9.21, "Integer Notes")."""
from __future__ import annotations

import numpy as np
import pytest

from test_ptx_interp import apply

F32_NAN = np.float32("nan")


def _bits(x):
  x = np.asarray(x)
  return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]).tolist()


def test_float_min_max_order_signed_zeros_and_give_the_canonical_nan():
  a = np.array([F32_NAN, 1, F32_NAN, -0.0, 0.0, 3], np.float32)
  b = np.array([2, F32_NAN, F32_NAN, 0.0, -0.0, -4], np.float32)
  # 9.7.3.11 min: "If values of both inputs are 0.0, then +0.0 > -0.0"; two NaNs give NaN, one gives the other
  assert _bits(apply("min.f32 %d, %a, %b;", np.float32, a, b)) == [0x40000000, 0x3F800000, 0x7FFFFFFF, 0x80000000,
                                                                  0x80000000, 0xC0800000]
  assert _bits(apply("max.f32 %d, %a, %b;", np.float32, a, b)) == [0x40000000, 0x3F800000, 0x7FFFFFFF, 0, 0, 0x40400000]
  # .NaN: "the result is canonical NaN if any of the inputs is NaN"
  assert _bits(apply("min.NaN.f32 %d, %a, %b;", np.float32, a, b))[:3] == [0x7FFFFFFF] * 3
  assert _bits(apply("max.f64 %d, %a, %b;", np.float64, a.astype(np.float64), b.astype(np.float64)))[3:5] == [0, 0]
  h, hb = a.astype(np.float16), b.astype(np.float16)
  assert _bits(apply("min.f16 %d, %a, %b;", np.float16, h, hb)) == [0x4000, 0x3C00, 0x7FFF, 0x8000, 0x8000, 0xC400]


def test_min_max_xorsign_abs():
  a = np.array([-3, 3, -1, F32_NAN], np.float32)
  b = np.array([2, -5, -7, 1], np.float32)
  # 9.7.3.11: |min| of the magnitudes, the sign bit a's XOR b's; a NaN result ignores both modifiers
  assert apply("min.xorsign.abs.f32 %d, %a, %b;", np.float32, a, b).tolist() == [-2.0, -3.0, 1.0, 1.0]
  assert _bits(apply("min.NaN.xorsign.abs.f32 %d, %a, %b;", np.float32, a, b))[3] == 0x7FFFFFFF
  assert apply("max.xorsign.abs.f32 %d, %a, %b;", np.float32, a, b)[:3].tolist() == [-3.0, -5.0, 7.0]


def _bf16(xs):
  return (np.array(xs, np.float32).view(np.uint32) >> 16).astype(np.uint32)


def test_bf16x2_min_max_work_on_each_half_not_on_the_bits():
  lo_a, hi_a = _bf16([-2.0, 1.0]), _bf16([3.0, -1.0])
  lo_b, hi_b = _bf16([1.0, -4.0]), _bf16([-5.0, 2.0])
  a = (lo_a | (hi_a << 16)).astype(np.uint32)
  b = (lo_b | (hi_b << 16)).astype(np.uint32)
  out = apply("min.bf16x2 %d, %a, %b;", np.uint32, a, b)
  lo = ((out & 0xFFFF).astype(np.uint32) << 16).view(np.float32)
  hi = ((out >> 16).astype(np.uint32) << 16).view(np.float32)
  assert lo.tolist() == [-2.0, -4.0] and hi.tolist() == [-5.0, -1.0]   # as unsigned bits, 1.0 < -2.0 would win


def test_testp_normal_counts_zeros_as_normal():
  x = np.array([0.0, -0.0, 1e-40, 1.0, np.inf, np.nan], np.float32)
  # 9.7.3.1: "As a special case, positive and negative zero are considered normal numbers."
  assert apply("testp.normal.f32 %d, %a;", "pred", x).tolist() == [True, True, False, True, False, False]
  assert apply("testp.subnormal.f32 %d, %a;", "pred", x).tolist() == [False, False, True, False, False, False]


@pytest.mark.parametrize("dst,src,nan_result", [
  ("s32", "f32", 0), ("u32", "f32", 0), ("s32", "f64", 0x80000000), ("u32", "f64", 0x80000000),
  ("s64", "f32", 1 << 63), ("u64", "f32", 1 << 63), ("s64", "f64", 1 << 63), ("u64", "f64", 1 << 63),
  ("s16", "f16", 0)])
def test_cvt_float_to_int_nan_follows_the_isa(dst, src, nan_result):
  # 9.7.9.21 cvt, Integer Notes: NaN gives 0 "if source is not .f64 and destination is not .s64, .u64", otherwise
  # 1 << (BitWidth(dst) - 1); out-of-range values saturate either way
  dt = {"s16": np.int16, "s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64}[dst]
  x = np.array([np.nan, 1e30, -1e30, 2.7], {"f16": np.float16, "f32": np.float32, "f64": np.float64}[src])
  if src == "f16": x[1:3] = [60000, -60000]
  out = apply(f"cvt.rzi.{dst}.{src} %d, %a;", dt, x)
  w = np.dtype(dt).itemsize * 8
  info = np.iinfo(dt)
  assert int(out.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[w // 8])[0]) == nan_result
  big = 60000 if src == "f16" else 1e30
  assert int(out[1]) == min(info.max, big) and int(out[2]) == max(info.min, -big) and out[3] == 2


@pytest.mark.parametrize("op,typ,bound", [("add", "f32", None), ("max", "s32", None), ("min", "u32", None),
                                          ("or", "b32", None), ("inc", "u32", 5), ("dec", "u32", 5), ("inc", "u32", 0),
                                          ("dec", "u32", 0xFFFFFFFF), ("exch", "b32", None), ("cas", "b32", None)])
def test_contended_atomics_match_a_sequential_model(op, typ, bound):
  """Lanes hitting the same word take their turns in lane order (9.7.13.5 atom): every returned old value and the
  final word equal a one-lane-at-a-time model, for the forms the interpreter runs as one accumulate per address."""
  from test_ptx_interp import kernel_ptx, launch
  n, words = 96, 3
  rng = np.random.default_rng(7)
  dt = {"f32": np.float32, "s32": np.int32, "u32": np.uint32, "b32": np.uint32}[typ]
  vals = (rng.standard_normal(n) * 1000).astype(np.float32) if typ == "f32" else \
    rng.integers(-50 if typ == "s32" else 0, 6 if op == "cas" else 50, n).astype(dt)
  init = np.array([3, 9, 0], dt) if typ != "f32" else np.array([0.1, 1e8, -3], np.float32)
  slot = rng.integers(0, words, n)
  b = "%rb" if bound is None else str(bound)
  if op == "cas": b = "%rb, %rc"     # cas(p, v, v + 1): succeeds when the word holds v
  reg = "f32" if typ == "f32" else "b32"
  ptx = kernel_ptx(f"""
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [p_w];
  ld.param.u64 %rd2, [p_v];
  ld.param.u64 %rd3, [p_s];
  ld.param.u64 %rd4, [p_o];
  mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd6, %rd2, %rd5;
  ld.global.{typ} %rb, [%rd6];
  {"add.u32 %rc, %rb, 1;" if op == "cas" else ""}
  add.s64 %rd6, %rd3, %rd5;
  ld.global.u32 %r2, [%rd6];
  mul.wide.u32 %rd7, %r2, 4;
  add.s64 %rd7, %rd1, %rd7;
  atom.global.{op}.{typ} %ro, [%rd7], {b};
  add.s64 %rd6, %rd4, %rd5;
  st.global.{typ} [%rd6], %ro;
  """, params=".param .u64 p_w, .param .u64 p_v, .param .u64 p_s, .param .u64 p_o",
    decls=f".reg .b32 %r<4>;\n.reg .{reg} %rb, %rc, %ro;\n.reg .b64 %rd<8>;")
  (w, _, _, olds), _ = launch(ptx, (1,), (n,), init.copy(), vals, slot.astype(np.uint32), np.zeros(n, dt))
  ref, ref_old = init.copy(), np.zeros(n, dt)
  for t in range(n):        # the model: one lane at a time, in lane order
    o = ref[slot[t]]
    ref_old[t] = o
    v = vals[t]
    if op == "add": new = np.float32(o + v)
    elif op == "max": new = max(o, v)
    elif op == "min": new = min(o, v)
    elif op == "or": new = o | v
    elif op == "exch": new = v
    elif op == "cas": new = v + 1 if o == v else o
    elif op == "inc": new = 0 if int(o) >= bound else int(o) + 1
    else: new = bound if int(o) == 0 or int(o) > bound else int(o) - 1
    ref[slot[t]] = new
  assert np.array_equal(olds.view(np.uint32), ref_old.view(np.uint32))
  assert np.array_equal(w.view(np.uint32), ref.view(np.uint32))


def _ref_directed(exact, dt, mode):
  """exact (a Fraction, or None for NaN) rounded once toward mode in dt, by stepping through dt's values."""
  from fractions import Fraction
  if exact is None: return dt("nan")
  if exact == 0: return dt(0)
  fmax = np.finfo(dt).max
  if exact > Fraction(float(fmax)): return dt(np.inf) if mode == "rp" else fmax
  if exact < -Fraction(float(fmax)): return dt(-np.inf) if mode == "rm" else -fmax
  v = dt(float(exact))                      # within an ulp (float(), then a second rounding to dt)
  while Fraction(float(v)) > exact: v = np.nextafter(v, dt(-np.inf))
  while np.isfinite(np.nextafter(v, dt(np.inf))) and Fraction(float(np.nextafter(v, dt(np.inf)))) <= exact:
    v = np.nextafter(v, dt(np.inf))
  if Fraction(float(v)) == exact: return v   # exact: every mode agrees
  lo, hi = v, np.nextafter(v, dt(np.inf))
  if mode == "rm": return lo
  if mode == "rp": return hi
  return lo if exact > 0 else hi


def _exact(op, *xs):
  from fractions import Fraction
  if not all(np.isfinite(float(x)) for x in xs): return None
  f = [Fraction(float(x)) for x in xs]
  if op == "add": return f[0] + f[1]
  if op == "sub": return f[0] - f[1]
  if op == "mul": return f[0] * f[1]
  if op == "fma": return f[0] * f[1] + f[2]
  if op == "div": return None if f[1] == 0 else f[0] / f[1]
  if op == "rcp": return None if f[0] == 0 else 1 / f[0]
  if op == "sqrt":   # exact square roots are rational only sometimes: bracket by the f64 root's residue instead
    raise AssertionError


@pytest.mark.parametrize("typ", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma", "div", "rcp"])
def test_directed_rounding_of_float_arithmetic(op, mode, typ):
  """add/sub/mul/fma/div/rcp .rz/.rm/.rp .f32/.f64 (9.7.3.3-8, 9.7.3.13: "mantissa LSB rounds towards zero /
  negative infinity / positive infinity"; nvcc's __fadd_rz, __fmul_ru, __fdiv_rd, __dadd_rz ...): each result is
  the exact value rounded once in that direction, checked with rationals."""
  dt = np.float32 if typ == "f32" else np.float64
  rng = np.random.default_rng(11)
  n = 48 if op == "fma" and typ == "f64" else 160
  def pick(k):
    m = rng.standard_normal(n)
    e = rng.integers(-40, 40, n) if typ == "f32" else rng.integers(-300, 300, n)
    x = (m * np.exp2(e.astype(np.float64))).astype(dt)
    x[rng.integers(0, n, 6)] = dt(1.5) * (k + 1)      # some exact results
    return x
  a, b, c = pick(0), pick(1), pick(2)
  b[:4] = -a[:4]                                      # exact cancellations (the sign of zero)
  a[4], b[4] = np.finfo(dt).max, np.finfo(dt).max      # overflow
  nsrc = {"rcp": 1, "fma": 3}.get(op, 2)
  ins = {"rcp": f"rcp.{mode}.{typ} %d, %a;", "fma": f"fma.{mode}.{typ} %d, %a, %b, %c;"}.get(
    op, f"{op}.{mode}.{typ} %d, %a, %b;")
  out = apply(ins, dt, *(a, b, c)[:nsrc])
  for i in range(n):
    xs = [v[i] for v in (a, b, c)[:nsrc]]
    exp = _ref_directed(_exact(op, *xs), dt, mode)
    got = out[i]
    if np.isnan(exp): assert np.isnan(got); continue
    if exp == 0 and op in ("add", "sub") and float(xs[0]) != 0:   # an exact zero sum: -0 only when rounding down
      assert np.signbit(got) == (mode == "rm"), (i, xs, got)
    assert got == exp, f"{op}.{mode}.{typ}({', '.join(repr(float(x)) for x in xs)}) = {got!r}, expected {exp!r}"


@pytest.mark.parametrize("typ", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_directed_rounding_of_sqrt(mode, typ):
  from fractions import Fraction
  dt = np.float32 if typ == "f32" else np.float64
  rng = np.random.default_rng(5)
  x = np.abs(rng.standard_normal(128) * np.exp2(rng.integers(-30, 30, 128).astype(np.float64))).astype(dt)
  x[:8] = np.array([4, 9, 2, 0.25, 1e-30, 3, 0, 1], dt)
  out = apply(f"sqrt.{mode}.{typ} %d, %a;", dt, x)
  for xi, got in zip(x, out):   # got is the mode's neighbour of sqrt(x): got^2 on the right side, one step over not
    X, G = Fraction(float(xi)), Fraction(float(got))
    up, dn = Fraction(float(np.nextafter(got, dt(np.inf)))), Fraction(float(np.nextafter(got, dt(0))))
    if mode == "rp": assert G * G >= X and (got == 0 or dn * dn < X)
    else: assert G * G <= X and up * up > X


def test_half_precision_arithmetic_refuses_directed_rounding():
  # 9.7.4.1 add (f16/bf16): ".rnd = { .rn }": add.rz.f16 is not PTX, and the mock names it instead of rounding to nearest
  from hcq.mockgpu.nv.ptx import PTXError
  with pytest.raises(PTXError, match=r"rounding \.rz of add\.f16"):
    apply("add.rz.f16 %d, %a, %b;", np.float16, np.ones(4, np.float16), np.ones(4, np.float16))


def _f16_bits(xs):
  return np.array(xs, np.float16).view(np.uint16).astype(np.uint32)


def _bf16_bits(xs):
  return (np.array(xs, np.float32).view(np.uint32) >> 16).astype(np.uint32)   # exact for these test values


def test_cvt_to_packed_halves_relu_satfinite_and_tf32():
  a = np.array([1.5, -2.0, 1e6, np.nan, -1e6], np.float32)
  b = np.array([0.25, 3.0, -7.0, 1.0, 0.5], np.float32)
  # 9.7.9.21: "the value converted from input a is stored in the upper half of d and ... b in the lower half"
  out = apply("cvt.rn.f16x2.f32 %d, %a, %b;", np.uint32, a[:2], b[:2])
  assert out.tolist() == (_f16_bits([1.5, -2.0]) << 16 | _f16_bits([0.25, 3.0])).tolist()
  out = apply("cvt.rn.bf16x2.f32 %d, %a, %b;", np.uint32, a[:2], b[:2])
  assert out.tolist() == (_bf16_bits([1.5, -2.0]) << 16 | _bf16_bits([0.25, 3.0])).tolist()
  # .satfinite: |x| past the largest finite value gives it with x's sign, a NaN stays NaN; .relu: negatives to +0,
  # NaN to the canonical NaN (was: .relu and .satfinite silently ignored)
  sat = apply("cvt.rn.satfinite.f16.f32 %d, %a;", np.float16, a)
  assert sat[[0, 1, 2, 4]].tolist() == [1.5, -2.0, 65504.0, -65504.0] and np.isnan(sat[3])
  relu = apply("cvt.rn.relu.f16.f32 %d, %a;", np.float16, a).view(np.uint16)
  assert relu.tolist() == [0x3E00, 0, 0x7C00, 0x7FFF, 0]
  both = apply("cvt.rn.relu.satfinite.bf16x2.f32 %d, %a, %b;", np.uint32, a, b)
  assert ((both >> 16) & 0xFFFF).tolist() == [0x3FC0, 0, 0x4974, 0x7FFF, 0]    # 1e6 is finite in bf16
  big = apply("cvt.rn.satfinite.bf16.f32 %d, %a;", np.uint16, np.array([3.4e38, -3.4e38, np.inf, 1.0], np.float32))
  assert big.tolist() == [0x7F7F, 0xFF7F, 0x7F7F, 0x3F80]
  # cvt.rna.tf32.f32: 10 fraction bits, ties away from zero, the low 13 bits 0
  x = np.array([1 + 2**-11, 1 + 2**-11 + 2**-23, -(1 + 2**-11), 3.0], np.float32)
  t = apply("cvt.rna.tf32.f32 %d, %a;", np.uint32, x)
  assert t.view(np.float32).tolist() == [1 + 2**-10, 1 + 2**-10, -(1 + 2**-10), 3.0] and not (t & 0x1FFF).any()


def test_fma_relu_and_bf16_fma_round_once():
  from fractions import Fraction
  out = apply("fma.rn.relu.f16 %d, %a, %b, %c;", np.float16, np.array([2, -2, 1], np.float16),
              np.array([3, 3, np.inf], np.float16), np.array([-1, -1, -np.inf], np.float16)).view(np.uint16)
  assert out.tolist() == [np.float16(5).view(np.uint16), 0, 0x7FFF]     # 5; -7 -> +0; inf - inf = NaN -> canonical
  # bf16 fma with a product on a bf16 tie and a tiny addend: rounding the f32 fma to bf16 again would round the tie
  # to even; the fused result is above the tie and must round up
  a = _bf16_bits([1 + 2**-7, 1.0, 3.0])
  b = _bf16_bits([1 + 2**-1, 1 + 2**-7, 1.5])
  c = _bf16_bits([2**-40, -(2**-40), 2**-60])
  out = apply("fma.rn.bf16 %d, %a, %b, %c;", np.uint16, a.astype(np.uint16), b.astype(np.uint16), c.astype(np.uint16))
  def ref(x, y, z):
    f = lambda v: Fraction(float(np.array(v << 16, np.uint32).view(np.float32)))
    exact = f(x) * f(y) + f(z)
    lo = (np.array(float(exact), np.float32).view(np.uint32) >> 16).astype(np.uint32)   # a bf16 at or below it
    best = min((lo, lo + 1), key=lambda v: (abs(f(v) - exact), int(v) & 1))           # nearest, ties to even
    return int(best)
  assert out.tolist() == [ref(x, y, z) for x, y, z in zip(a, b, c)]
  packed = apply("fma.rn.bf16x2 %d, %a, %b, %c;", np.uint32, (a << 16 | a).astype(np.uint32), (b << 16 | b).astype(np.uint32),
                 (c << 16 | c).astype(np.uint32))
  assert ((packed >> 16) & 0xFFFF).tolist() == out.tolist() and (packed & 0xFFFF).tolist() == out.tolist()


def test_lop3_every_lut_and_packed_16_bit_integers():
  rng = np.random.default_rng(2)
  a, b, c = (rng.integers(0, 2**32, 8, dtype=np.uint32) for _ in range(3))
  for lut in (0x00, 0x96, 0xE8, 0xF0, 0xCC, 0xAA, 0xFF, 0x1E, 0x6A):
    out = apply(f"lop3.b32 %d, %a, %b, %c, {lut};", np.uint32, a, b, c)
    ref = [sum(((lut >> ((((int(x) >> i) & 1) << 2) | (((int(y) >> i) & 1) << 1) | ((int(z) >> i) & 1))) & 1) << i
               for i in range(32)) for x, y, z in zip(a, b, c)]
    assert out.tolist() == ref, hex(lut)
  x = np.array([0x7FFF0001, 0x8000FFFF], np.uint32)
  y = np.array([0x00010002, 0xFFFF0001], np.uint32)
  assert apply("add.s16x2 %d, %a, %b;", np.uint32, x, y).tolist() == [0x80000003, 0x7FFF0000]   # each half wraps
  assert apply("min.s16x2 %d, %a, %b;", np.uint32, x, y).tolist() == [0x00010001, 0x8000FFFF]
  assert apply("max.u16x2 %d, %a, %b;", np.uint32, x, y).tolist() == [0x7FFF0002, 0xFFFFFFFF]
  assert apply("max.relu.s16x2 %d, %a, %b;", np.uint32, x, y).tolist() == [0x7FFF0002, 0x00000001]
