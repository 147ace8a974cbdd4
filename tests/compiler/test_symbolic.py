"""Symbolic simplification: random integer expressions over bounded variables keep their values, and vmin/vmax
bound every value (hypothesis)."""
import itertools

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hcq.compiler.ir import UOp, dtypes
from hcq.compiler.ir.evaluate import EvalError, evaluate
from hcq.compiler.ir.symbolic import simplify

VARS = [UOp.variable("a", -4, 7), UOp.variable("b", 0, 9), UOp.variable("c", 1, 5)]

BINOPS = ["add", "sub", "mul", "floordiv", "floormod", "lt", "max", "and", "idiv", "imod", "xor", "shift", "neg", "eq",
          "not_lt", "divmod", "mask"]
MASKS = [-1, 0, 1, 3, 6, 7, 15, 0xF0, -16]


def masked(draw, a: UOp) -> UOp:
  """(a & m) by itself, or divided, reduced or shifted by a power of two (the masked folds)."""
  m, k = draw(st.sampled_from(MASKS)), draw(st.integers(0, 5))
  how = draw(st.sampled_from(["and", "div", "mod", "shr"]))
  x = a & m
  return x if how == "and" else x // (1 << k) if how == "div" else x % (1 << k) if how == "mod" else x >> k


@st.composite
def expressions(draw, depth=4):
  if depth == 0 or draw(st.integers(0, 3)) == 0:
    if draw(st.booleans()): return draw(st.sampled_from(VARS))
    return UOp.const(draw(st.integers(-8, 12)))
  op = draw(st.sampled_from(BINOPS))
  a = draw(expressions(depth=depth - 1))
  if op in ("floordiv", "floormod", "idiv", "imod"):
    b = UOp.const(draw(st.sampled_from([-7, -3, -2, -1, 1, 2, 3, 4, 5, 8, 16]))) if draw(st.booleans()) else VARS[2]
  else:
    b = draw(expressions(depth=depth - 1))
  if op == "add": return a + b
  if op == "sub": return a - b
  if op == "mul": return a * b
  if op == "floordiv": return a // b
  if op == "floormod": return a % b
  if op == "idiv": return a.idiv(b)
  if op == "imod": return a.imod(b)
  if op == "max": return a.maximum(b)
  if op == "xor": return a ^ b
  if op == "divmod":
    k = draw(st.sampled_from([-3, 2, 4, 5]))
    return (a // k * k + b) + a % k if draw(st.booleans()) else a % k + a // k * k
  if op == "mask": return masked(draw, a)
  if op == "shift": return (a << UOp.const(draw(st.integers(0, 4)))) if draw(st.booleans()) else (a >> UOp.const(draw(st.integers(0, 3))))
  if op == "neg": return -a
  if op == "eq": return (a.eq(b) | a.ne(b * 2)).where(a, b - 1)
  if op == "not_lt": return (a <= b).where(a + 1, (a >= b).where(b, a))
  if op == "and": return (a & b) if draw(st.booleans()) else (a < b).where(a, b)
  return (a < b).where(a * 2, b + 1)


def envs():
  for va, vb, vc in itertools.product(range(-4, 8), range(0, 10, 3), range(1, 6, 2)):
    yield dict(zip(VARS, (va, vb, vc)))


# the default suite runs FAST (a minute for the whole area on a loaded machine); -m slow runs THOROUGH as well
FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
THOROUGH = settings(max_examples=1500, derandomize=False, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fast_and_thorough(check, *strategies):
  """Two property tests of one check: FAST in the default suite, THOROUGH under -m slow."""
  return FAST(given(*strategies)(check)), pytest.mark.slow(THOROUGH(given(*strategies)(check)))


def check_simplify_keeps_values(e):
  s = simplify(e)
  for env in envs():
    try: want = evaluate(e, env)
    except EvalError: continue
    assert evaluate(s, env) == want, f"{e} -> {s} differs at {({k.arg.name: v for k, v in env.items()})}"


test_simplify_keeps_values, test_simplify_keeps_values_thorough = \
  fast_and_thorough(check_simplify_keeps_values, expressions())


def check_vmin_vmax_bound_values(e):
  for u in (e, simplify(e)):
    for env in envs():
      try: v = evaluate(u, env)
      except EvalError: continue
      assert u.vmin <= v <= u.vmax, f"{u}: {v} outside [{u.vmin}, {u.vmax}]"


test_vmin_vmax_bound_values, test_vmin_vmax_bound_values_thorough = \
  fast_and_thorough(check_vmin_vmax_bound_values, expressions())


def test_typical_index_simplifications():
  g, l = UOp.special(16, "gidx0"), UOp.special(8, "lidx0")
  idx = g * 8 + l
  assert simplify(idx // 8) is g
  assert simplify(idx % 8) is l
  assert simplify((idx + 3) - 3) is simplify(idx)
  assert simplify(l < 8).const_value is True
  assert simplify(idx < 200).const_value is True
  assert simplify(l // 8).const_value == 0
  assert simplify((l * 4) // 4) is l
  x = UOp.variable("x", 0, 100)
  assert simplify(x + 0) is x and simplify(x * 1) is x and simplify(x * 0).const_value == 0
  assert simplify(UOp.const(3) + 4).const_value == 7


def test_fixed_width_constant_folding_wraps():
  big = UOp.const(2**31 - 1, dtypes.int32)
  s = simplify(big + UOp.const(1, dtypes.int32))
  assert s.const_value == -2**31 and s.dtype == dtypes.int32
  assert simplify(UOp.const(7, dtypes.int32).idiv(-2)).const_value == -3
  assert simplify(UOp.const(7, dtypes.int32) // -2).const_value == -4


I32 = [UOp.variable("p", -2**31, 2**31 - 1, dtype=dtypes.int32), UOp.variable("q", -100, 100, dtype=dtypes.int32)]


@st.composite
def int32_expressions(draw, depth=3):
  if depth == 0 or draw(st.integers(0, 3)) == 0:
    if draw(st.booleans()): return draw(st.sampled_from(I32))
    return UOp.const(draw(st.sampled_from([0, 1, -1, 3, 7, 2**30, -2**31, 2**31 - 1])), dtypes.int32)
  op = draw(st.sampled_from(["add", "sub", "mul", "xor", "lt", "shl", "idiv", "floordiv", "floormod", "neg", "mask"]))
  a, b = draw(int32_expressions(depth=depth - 1)), draw(int32_expressions(depth=depth - 1))
  if op == "mask":
    m = UOp.const(draw(st.sampled_from(MASKS + [2**31 - 1, -2**31])), dtypes.int32)
    k = draw(st.integers(0, 31))
    how = draw(st.sampled_from(["and", "div", "mod", "shr"]))
    x = a & m
    if how == "and": return x
    if how == "shr": return x >> UOp.const(k, dtypes.int32)
    p2 = UOp.const(1 << min(k, 30), dtypes.int32)
    return x // p2 if how == "div" else x % p2
  if op == "add": return a + b
  if op == "sub": return a - b
  if op == "mul": return a * b
  if op == "xor": return a ^ b
  if op == "divmod":
    k = draw(st.sampled_from([-3, 2, 4, 5]))
    return (a // k * k + b) + a % k if draw(st.booleans()) else a % k + a // k * k
  if op == "lt": return (a < b).where(a, b)
  if op == "shl": return a << UOp.const(draw(st.integers(0, 31)), dtypes.int32)
  if op == "neg": return -a
  d = UOp.const(draw(st.sampled_from([1, -1, 2, 3, 16, -5])), dtypes.int32)
  return a.idiv(d) if op == "idiv" else a // d if op == "floordiv" else a % d


POINTS = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-100, 100)), min_size=8, max_size=8)


def check_int32_wraparound(e, points):
  """Fixed-width ints wrap; the simplifier must not use rules that only hold for unbounded integers there."""
  s = simplify(e)
  assert s.dtype == e.dtype
  for p, q in points + [(2**31 - 1, 100), (-2**31, -100), (0, 0)]:
    env = dict(zip(I32, (p, q)))
    try: want = evaluate(e, env)
    except EvalError: continue
    assert evaluate(s, env) == want
    assert e.vmin <= want <= e.vmax and s.vmin <= want <= s.vmax


test_int32_wraparound_semantics_survive_simplification, test_int32_wraparound_thorough = \
  fast_and_thorough(check_int32_wraparound, int32_expressions(), POINTS)


def test_divmod_recombines():
  x, y = UOp.variable("x", -50, 50), UOp.variable("y", 0, 9)
  assert simplify(x // 8 * 8 + x % 8) is x
  assert simplify(x % 8 + x // 8 * 8) is x
  assert simplify((y + x // 4 * 4) + x % 4) is simplify(y + x)
