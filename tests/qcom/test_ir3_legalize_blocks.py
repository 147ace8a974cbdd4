"""The ir3 legalizer across block boundaries (compiler/backend/ir3/legalize.py): a label's state is the merge of the
states every branch to it and the fall-through bring, to a fixed point over loops' back edges (Mesa's
ir3_legalize.c legalize_block), instead of a drain of everything pending before each branch and label. The strict
mock (tests/qcom/test_ir3_backend.py) runs the compiled kernels; these check the rules on small programs."""
from __future__ import annotations

from hcq.compiler.backend.ir3.legalize import P0, Ins, legalize

R1X, R2X, R3X, R0Z = 4, 8, 12, 2


def _texts(prog):
  return [i.flags + i.text for i in prog]


def test_a_branch_waits_for_its_p0_only_and_the_pending_load_flows_to_both_paths():
  prog = [Ins("ld_sy", "ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0", (R1X,), (R0Z,)),
          Ins("alu", "cmps.s.lt p0.x, r0.z, r0.z", (P0,), (R0Z, R0Z)),
          Ins("br", "br p0.x, #L1", (), (P0,), target="L1"),
          Ins("alu", "add.u r2.x, r1.x, r1.x", (R2X,), (R1X, R1X)),
          Ins("label", "L1"),
          Ins("alu", "mov.u32u32 r3.x, r1.x", (R3X,), (R1X,)),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  br = out.index("br p0.x, #L1")
  assert out[br - 1] == "(rpt5)nop"                     # p0.x's non-ALU delay, no (sy) drain before the branch
  assert "(sy)add.u r2.x, r1.x, r1.x" in out            # the fall-through reads the load: (sy) there
  # the taken branch arrives at L1 with the load still pending: the read after the label waits too
  assert "(sy)mov.u32u32 r3.x, r1.x" in out


def test_a_loops_back_edge_brings_its_pending_load_to_the_top():
  prog = [Ins("alu", "mov.u32u32 r1.x, 0", (R1X,), ()),
          Ins("label", "L0"),
          Ins("alu", "add.u r2.x, r1.x, r1.x", (R2X,), (R1X, R1X)),
          Ins("ld_sy", "ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0", (R1X,), (R0Z,)),
          Ins("jump", "jump #L0", target="L0"),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  # the second iteration reads the load of the first: found by iterating to the fixed point over the back edge
  assert "(sy)add.u r2.x, r1.x, r1.x" in out
  assert out[out.index("jump #L0") - 1] == "ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0"    # no drain before the jump
