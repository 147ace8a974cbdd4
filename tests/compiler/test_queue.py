"""Queue programs as UOps and their lowering by a pattern matcher (ordering across queues is the runtime's timeline:
tests/runtime)."""
from hcq.compiler.ir import Ops, PatternMatcher, UOp, dtypes
from hcq.compiler.queue import QPat, barrier, buffer, call, element_kind, to_packets, program, queue, signal, store, timestamp, wait


def test_elements_and_lowering_with_a_pattern_matcher():
  sig, buf = signal(0, "s"), buffer(1, 16, "t")
  prog = queue("C", wait(sig, 3), barrier(), timestamp(buf), call(program("k"), buf), store(sig, 4))
  assert prog.op is Ops.LINEAR and [element_kind(e) for e in prog.src] == ["wait", "barrier", "timestamp", "call", "store"]
  # a toy packet lowering: every element becomes INS("pkt_<kind>") carrying the same operands
  def pkt(kind): return lambda **kw: UOp(Ops.INS, tuple(v for k, v in sorted(kw.items()) if k != "ins"), (f"pkt_{kind}", dtypes.void))
  pm = PatternMatcher([(QPat.wait(), pkt("wait")), (QPat.store(), pkt("store")), (QPat.timestamp(), pkt("ts")),
                       (QPat.barrier(), pkt("barrier")), (QPat.call(), lambda prog, call: UOp(Ops.INS, call.src, ("pkt_dispatch", dtypes.void)))])
  low = to_packets(prog, pm)
  assert [e.arg[0] for e in low.src] == ["pkt_wait", "pkt_barrier", "pkt_ts", "pkt_dispatch", "pkt_store"]
  assert low.src[0].src == (sig, UOp.const(3, dtypes.uint64))
