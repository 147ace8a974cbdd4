"""Queue programs as UOps and the cross-queue dependency tracker."""
from hcq.compiler.ir import Ops, PatternMatcher, UOp, dtypes
from hcq.compiler.queue import (QPat, QueueScheduler, barrier, buffer, call, copy, element_kind, lower_queue, program,
                                queue, signal, store, timestamp, wait)


def _kinds(prog):
  out = []
  for e in prog.src:
    k = element_kind(e)
    if k in ("wait", "store"): k += f"({e.src[0].tag[1]},{e.src[1].const_value})"
    out.append(k)
  return out


def make():
  s = QueueScheduler({"C": signal(0, "c"), "D": signal(1, "d"), "E": signal(2, "e")})
  bufs = [buffer(3 + i, 64, f"b{i}") for i in range(4)]
  return s, bufs, program("k")


def test_same_queue_needs_no_wait():
  s, (a, b, *_), p = make()
  s.submit("C", call(p, a, b), reads=(a,), writes=(b,))
  s.submit("C", call(p, b, a), reads=(b,), writes=(a,))
  assert _kinds(s.programs()["C"]) == ["call", "call"]


def test_raw_war_waw_across_queues():
  s, (a, b, h, _), p = make()
  s.submit("D", copy(a, h, 64))                                # writes a
  s.submit("C", call(p, a, b), reads=(a,), writes=(b,))        # RAW on a -> wait D>=1
  s.submit("D", copy(a, h, 64))                                # WAR on a (C read it) -> wait C>=1
  s.submit("E", copy(b, h, 64))                                # WAW on b (C wrote it) -> wait C>=1
  progs = s.programs()
  assert _kinds(progs["D"]) == ["copy", "store(d,1)", "wait(c,1)", "copy"]
  assert _kinds(progs["C"]) == ["wait(d,1)", "call", "store(c,1)"]
  assert _kinds(progs["E"]) == ["wait(c,1)", "copy"]


def test_only_latest_dependency_per_queue_and_no_repeated_wait():
  s, (a, b, h, x), p = make()
  s.submit("D", copy(a, h, 64))
  s.submit("D", copy(b, h, 64))
  s.submit("C", call(p, a, b, x), reads=(a, b), writes=(x,))  # depends on D#1 and D#2: only wait(d, 2)
  s.submit("C", call(p, a, x), reads=(a,), writes=(x,))       # D#1 already covered by the wait above
  progs = s.programs()
  assert _kinds(progs["C"]) == ["wait(d,2)", "call", "call"]
  assert _kinds(progs["D"]) == ["copy", "copy", "store(d,2)"]


def test_elements_and_lowering_with_a_pattern_matcher():
  sig, buf = signal(0, "s"), buffer(1, 16, "t")
  prog = queue("C", wait(sig, 3), barrier(), timestamp(buf), call(program("k"), buf), store(sig, 4))
  assert prog.op is Ops.LINEAR and [element_kind(e) for e in prog.src] == ["wait", "barrier", "timestamp", "call", "store"]
  # a toy packet lowering: every element becomes INS("pkt_<kind>") carrying the same operands
  def pkt(kind): return lambda **kw: UOp(Ops.INS, tuple(v for k, v in sorted(kw.items()) if k != "ins"), (f"pkt_{kind}", dtypes.void))
  pm = PatternMatcher([(QPat.wait(), pkt("wait")), (QPat.store(), pkt("store")), (QPat.timestamp(), pkt("ts")),
                       (QPat.barrier(), pkt("barrier")), (QPat.call(), lambda prog, call: UOp(Ops.INS, call.src, ("pkt_dispatch", dtypes.void)))])
  low = lower_queue(prog, pm)
  assert [e.arg[0] for e in low.src] == ["pkt_wait", "pkt_barrier", "pkt_ts", "pkt_dispatch", "pkt_store"]
  assert low.src[0].src == (sig, UOp.const(3, dtypes.uint64))
