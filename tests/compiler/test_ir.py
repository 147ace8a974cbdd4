"""The UOp IR: hash-consing, derived dtypes, weak literals, repr round trip, pattern matching, graph_rewrite."""
import gc
import weakref

import pytest

from hcq.compiler.ir import (AddrSpace, AxisType, Ops, PatternMatcher, PtrDType, RewriteError,
                             UOp, UOpTypeError, UPat, dtypes, eval_repr, graph_rewrite)


def test_hash_consing_returns_the_same_object():
  a = UOp(Ops.CONST, (), 42)
  assert UOp(Ops.CONST, (), 42) is a
  assert UOp(Ops.ADD, (a, a)) is UOp(Ops.ADD, (a, a))
  assert UOp(Ops.CONST, (), 1) is not UOp(Ops.CONST, (), 1.0) is not UOp(Ops.CONST, (), True)
  assert UOp(Ops.CONST, (), 0.0) is not UOp(Ops.CONST, (), -0.0)
  assert a.rtag("t") is not a and a.rtag("t") is a.rtag("t")


def test_cache_holds_weak_references():
  x = UOp.variable("zz_weak", 0, 3) + 12345
  ref = weakref.ref(x)
  del x
  gc.collect()
  assert ref() is None


def test_dtype_is_derived():
  buf = UOp.param(0, dtypes.float32, 16)
  assert buf.dtype == PtrDType(dtypes.float32, AddrSpace.GLOBAL, 16)
  v = buf.index(3).load()
  assert v.dtype == dtypes.float32
  assert (v + 1).dtype == dtypes.float32          # weak int literal meets float32
  assert (v * 2.5).dtype == dtypes.float32        # weak float literal too
  assert (v < 1).dtype == dtypes.bool
  assert UOp.const(3).dtype == dtypes.weakint and UOp.const(0.5).dtype == dtypes.weakfloat
  assert (UOp.const(3) + 0.5).dtype == dtypes.weakfloat
  i16 = UOp.param(1, dtypes.int16, 4).index(0).load()
  assert (i16 + 1).dtype == dtypes.int16 and (i16 << 2).dtype == dtypes.int16
  assert v.cast(dtypes.int32).dtype == dtypes.int32
  assert v.bitcast(dtypes.uint32).dtype == dtypes.uint32
  assert UOp(Ops.INS, (), ("v_add_f32", dtypes.float32)).dtype == dtypes.float32
  assert UOp(Ops.CUSTOM, (v,), ("sqrtf({0})", dtypes.float32)).dtype == dtypes.float32
  r = UOp.range(8, 0, AxisType.LOOP)
  assert r.dtype == dtypes.weakint and (r * 4).dtype == dtypes.weakint
  assert UOp.placeholder((4, 4), dtypes.float32, 0, AddrSpace.LOCAL).dtype.size == 16


def test_call_tuple_gettuple():
  x = UOp.param(0, dtypes.int32, 1).index(0).load()
  body = UOp(Ops.TUPLE, (x + 1, (x + 1).cast(dtypes.float32)))
  call = UOp(Ops.CALL, (body, x))
  assert UOp(Ops.GETTUPLE, (call,), 1).dtype == dtypes.float32
  with pytest.raises(UOpTypeError, match="GETTUPLE"):
    UOp(Ops.GETTUPLE, (UOp(Ops.CALL, (UOp(Ops.PROGRAM, (), "p"),)),), 0)


def test_ill_typed_uop_error_names_it():
  f = UOp.param(0, dtypes.float32, 4).index(0).load()
  i = UOp.param(1, dtypes.int32, 4).index(0).load()
  with pytest.raises(UOpTypeError) as e:
    f + i
  assert "mismatched dtypes dtypes.float32 and dtypes.int32" in str(e.value)
  assert "UOp(Ops.ADD" in str(e.value) and "PARAM" in str(e.value)
  with pytest.raises(UOpTypeError, match="FLOORMOD needs integers"): f % 2
  with pytest.raises(UOpTypeError, match="WHERE condition"): f.where(1.0, 2.0)
  with pytest.raises(UOpTypeError, match="storing a dtypes.float32 into a buffer of dtypes.int32"):
    UOp.param(1, dtypes.int32, 4).index(0).store(f)
  with pytest.raises(UOpTypeError, match="changes the size"): f.bitcast(dtypes.int64)


def test_repr_round_trip_shares_nodes():
  a = UOp.const(42)
  u = UOp(Ops.ADD, (a, a))
  assert repr(u) == "UOp(Ops.ADD, arg=None, src=(x0:=UOp(Ops.CONST, arg=42, src=()), x0,))"
  buf = UOp.param(0, dtypes.float32, 64)
  g = UOp.special(64, "gidx0")
  k = buf.index(g).store(buf.index(g).load() * 2.0 + float("inf")).sink()
  assert eval_repr(repr(k)) is k
  assert repr(k).count("PARAM") == 1 and repr(k).count("SPECIAL") == 1


def test_repr_and_toposort_of_a_deep_graph_do_not_recurse():
  x = UOp.variable("deep", 0, 10)
  for _ in range(30000): x = x + 1
  text = repr(x)   # Python's parser can't nest 30000 calls deep: check the text, and eval a shallower one
  assert text.count("UOp(Ops.ADD") == 30000 and text.count("x0:=") == 1
  y = UOp.variable("deep", 0, 10)
  for i in range(40): y = y * 3 + i   # 80 nodes deep, under the parser limit of 200 parentheses
  assert eval_repr(repr(y)) is y
  assert len(x.toposort()) == 30000 * 2 + 1 - 29999
  assert x.vmax == 30010


def test_upat_captures_commutative_and_early_reject():
  x = UOp.variable("x", 0, 10)
  pat = UPat(Ops.ADD, src=[UPat.var("v"), UPat.cvar("c")])
  assert pat.match(x + 3, {}) == [{"v": x, "c": UOp.const(3)}]
  assert pat.match(UOp.const(3) + x, {}) == [{"v": x, "c": UOp.const(3)}]
  assert pat.match(x + x, {}) == []
  assert pat.early_reject == {Ops.CONST}
  same = UPat(Ops.ADD, src=(UPat.var("v"), UPat.var("v")))
  assert same.match(x + x, {}) and not same.match(x + 1, {})
  allsrc = UPat(Ops.SINK, src=UPat(Ops.STORE))
  assert allsrc.match(UOp(Ops.SINK, ()), {}) and not allsrc.match(UOp(Ops.SINK, (x,)), {})


def test_patternmatcher_compose_and_rewrite_modes():
  x = UOp.variable("x", 0, 10)
  zero = PatternMatcher([(UPat.var("v") + 0, lambda v: v)], name="add0")
  one = PatternMatcher([(UPat.var("v") * 1, lambda v: v)], name="mul1")
  both = zero + one
  e = ((x * 1) + 0) * 1
  assert graph_rewrite(e, both) is x
  assert graph_rewrite(e, both, bottom_up=True) is x
  assert graph_rewrite(e, zero) is (x * 1) * 1
  # a rule that sees the node before its sources (bottom_up) versus after them
  seen = []
  spy = PatternMatcher([(UPat(Ops.ADD, name="n"), lambda n: seen.append(n) and None)])
  graph_rewrite((x + 1) + 2, spy, bottom_up=True)
  assert seen[0] is (x + 1) + 2


def test_rewrite_that_never_settles_raises_a_clear_error():
  x = UOp.variable("x", 0, 10)
  grow = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: UOp.variable(v.arg.name, 0, v.arg.vmax + 1))])
  with pytest.raises(RewriteError, match="no fixed point after 50 rewrites"):
    graph_rewrite(x + 1, grow, step_limit=50)
  flip = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: UOp(Ops.MUL, a.src)),
                         (UPat(Ops.MUL, name="a"), lambda a: UOp(Ops.ADD, a.src))])
  with pytest.raises(RewriteError, match="UOp\\(Ops"):
    graph_rewrite(x + 1, flip, step_limit=1000)
  wrap = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: v + 0)])
  with pytest.raises(RewriteError, match="never settles"):
    graph_rewrite(x * 2, wrap)


def test_deep_graph_rewrite_has_no_recursion_error():
  x = UOp.variable("x", 0, 10)
  e = x
  for _ in range(20000): e = e + 0
  assert graph_rewrite(e, PatternMatcher([(UPat.var("v") + 0, lambda v: v)])) is x


def test_hash_consing_holds_across_threads():
  import threading
  results = [[] for _ in range(4)]
  def build(out):
    for i in range(300): out.append(UOp.variable("thr", 0, 9) * 7 + i)
  ts = [threading.Thread(target=build, args=(r,)) for r in results]
  for t in ts: t.start()
  for t in ts: t.join()
  for i in range(300): assert len({id(r[i]) for r in results}) == 1
