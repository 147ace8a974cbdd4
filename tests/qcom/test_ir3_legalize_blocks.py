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
  # p0.x's non-ALU delay (6: 3 in the compare's (nopN) field, 3 on a nop), no (sy) drain before the branch
  assert out[br - 2:br] == ["(nop3) cmps.s.lt p0.x, r0.z, r0.z", "(rpt2)nop"]
  assert "(sy)add.u r2.x, r1.x, r1.x" in out            # the fall-through reads the load: (sy) there
  # the taken branch arrives at L1 with the load still pending: the read after the label waits too (and is the join
  # point: (jp))
  assert "(sy)(jp)mov.u32u32 r3.x, r1.x" in out


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


# barriers: Mesa's ir3_legalize.c legalize_block ("last_n && is_barrier(last_n)": apply_ss, apply_sy on the next
# instruction; a cat7 instruction is not counted as a cycle), instead of a drain of everything before the barrier
R2Y = 9


def test_a_barrier_waits_for_nothing_and_the_next_instruction_takes_both_flags():
  prog = [Ins("alu", "add.u r2.x, r0.z, r0.z", (R2X,), (R0Z, R0Z)),
          Ins("st", "stl.u32 l[r0.z], r1.x, 1", (), (R0Z, R1X)),
          Ins("bar", "bar"),
          Ins("alu", "add.u r3.x, r2.x, r2.x", (R3X,), (R2X, R2X)),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  bar = out.index("bar")
  assert out[bar - 1] == "stl.u32 l[r0.z], r1.x, 1"              # no (ss)/(rptN) nop before the barrier
  # the add's ALU delay (alu_to_alu 3) runs on across the store and the barrier, neither counted as a cycle
  # (count_instruction): 3 nop cycles, then the flags on the reader
  assert out[bar + 1:bar + 3] == ["(rpt2)nop", "(sy)(ss)add.u r3.x, r2.x, r2.x"]


def test_after_a_barrier_a_memory_instruction_takes_the_flags_on_a_nop_and_across_a_label_the_next_instruction():
  prog = [Ins("ld_ss", "ldl.u32 r1.x, l[r0.z], 1", (R1X,), (R0Z,)),
          Ins("bar", "bar"),
          Ins("ld_ss", "ldl.u32 r2.x, l[r0.z], 1", (R2X,), (R0Z,)),
          Ins("bar", "bar"),
          Ins("label", "L1"),
          Ins("alu", "add.u r3.x, r0.z, r0.z", (R3X,), (R0Z, R0Z)),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  # ldl has a (sy) bit but no (ss) bit: the (ss) on a nop, the (sy) on the load
  assert out[:4] == ["ldl.u32 r1.x, l[r0.z], 1", "bar", "(ss)nop", "(sy)ldl.u32 r2.x, l[r0.z], 1"]
  # the end waits for nothing (Mesa: no delay for OPC_END): not for the add's result either
  assert out[4:] == ["bar", "L1", "(sy)(ss)(jp)add.u r3.x, r0.z, r0.z", "end"]


def test_a_load_before_a_barrier_is_waited_for_by_the_flags_after_it():
  """The register an ldl loads before the barrier is read after it with no flag of its own: the barrier's (ss) on
  the instruction after it covered it (apply_ss clears needs_ss)."""
  prog = [Ins("ld_ss", "ldl.u32 r1.x, l[r0.z], 1", (R1X,), (R0Z,)),
          Ins("bar", "bar"),
          Ins("alu", "mov.u32u32 r2.y, 0", (R2Y,), ()),
          Ins("alu", "add.u r3.x, r1.x, r1.x", (R3X,), (R1X, R1X)),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  assert out[1:4] == ["bar", "(sy)(ss)mov.u32u32 r2.y, 0", "add.u r3.x, r1.x, r1.x"]


def test_a_memory_instruction_takes_its_sy_itself_and_its_ss_on_a_nop_with_the_delay():
  """Mesa ir3_legalize.c legalize_block: flags go on the instruction that needs them; "cat5+ does not have an (ss)
  bit": a nop carries it, taking one cycle, and the delay still to wait is merged into that nop as repeats."""
  R3Y = 13
  prog = [Ins("ld_sy", "ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0", (R1X,), (R0Z,)),
          Ins("st", "stib.b.untyped.1d.u32.1.imm r1.x, r0.z, 1", (), (R1X, R0Z)),       # reads the load: (sy)
          Ins("alu", "add.u r2.x, r0.z, r0.z", (R2X,), (R0Z, R0Z)),
          Ins("sfu", "rcp r3.y, r0.z", (R3Y,), (R0Z,)),
          Ins("st", "stl.u32 l[r2.x], r3.y, 1", (), (R2X, R3Y)),                        # (ss) and the add's delay
          Ins("end", "end")]
  out = _texts(legalize(prog))
  assert out[:2] == ["ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0", "(sy)stib.b.untyped.1d.u32.1.imm r1.x, r0.z, 1"]
  # the add's result is ready for a non-ALU reader 6 cycles after its own: one (ss) nop of 6 cycles
  assert out[2:6] == ["add.u r2.x, r0.z, r0.z", "rcp r3.y, r0.z", "(ss)(rpt5)nop", "stl.u32 l[r2.x], r3.y, 1"]


def test_the_join_point_flag_goes_on_the_first_instruction_after_a_label_nop_or_not():
  """Mesa ir3_legalize.c mark_jp: (jp) on the first instruction of a branch target, after the nops legalize put
  there; no nop of its own (two labels at one place: one flag)."""
  prog = [Ins("alu", "cmps.s.lt p0.x, r0.z, r0.z", (P0,), (R0Z, R0Z)),
          Ins("alu", "add.u r1.x, r0.z, r0.z", (R1X,), (R0Z, R0Z)),
          Ins("jump", "jump #L1", target="L1"),
          Ins("label", "L1"),
          Ins("alu", "add.u r2.x, r1.x, r1.x", (R2X,), (R1X, R1X)),      # waits for r1.x: the nop is first
          Ins("br", "br p0.x, #L2", (), (P0,), target="L2"),
          Ins("label", "L2"),
          Ins("label", "L3"),
          Ins("bar", "bar"),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  at = out.index("L1")
  assert out[at + 1:at + 3] == ["(jp)(rpt2)nop", "(nop1) add.u r2.x, r1.x, r1.x"]
  assert out[out.index("L3") + 1] == "(jp)bar" and sum("(jp)" in t for t in out) == 2


def test_the_end_waits_for_nothing_pending():
  """Mesa ir3_legalize.c: delay_calc is 0 for OPC_END and the end reads no register: a store, a load and an ALU
  result still pending at the end get no nop and no flag (the stores complete after it)."""
  prog = [Ins("ld_sy", "ldib.b.untyped.1d.u32.1.imm r1.x, r0.z, 0", (R1X,), (R0Z,)),
          Ins("alu", "add.u r2.x, r0.z, r0.z", (R2X,), (R0Z, R0Z)),
          Ins("st", "stl.u32 l[r0.z], r0.z, 1", (), (R0Z, R0Z)),
          Ins("end", "end"),
          Ins("nop", "nop")]
  assert _texts(legalize(prog))[-3:] == ["stl.u32 l[r0.z], r0.z, 1", "end", "nop"]


def test_a_delay_after_a_cat2_or_cat3_instruction_goes_into_its_nop_field():
  """Mesa ir3_legalize.c legalize_block (a6xx): up to 3 delay cycles after a cat2/cat3 instruction without (rptN)
  are its (nopN) field, the rest a nop; a cat1 mov has no such field; after the join point's (jp) the flags come
  first ((sy)(ss)(jp)(nopN), the disassembler's order)."""
  R3Y = 13
  prog = [Ins("alu", "add.u r1.x, r0.z, r0.z", (R1X,), (R0Z, R0Z)),
          Ins("alu", "add.u r2.x, r1.x, r1.x", (R2X,), (R1X, R1X)),          # alu_to_alu 3: all in (nop3)
          Ins("alu", "sel.b32 r3.x, r2.x, r0.z, r2.x", (R3X,), (R2X, R0Z, R2X)),
          Ins("st", "stl.u32 l[r0.z], r3.x, 1", (), (R0Z, R3X)),              # non_alu 6: (nop3) and 3 on a nop
          Ins("alu", "mov.u32u32 r3.y, 1", (R3Y,), ()),
          Ins("alu", "add.u r2.x, r3.y, r3.y", (R2X,), (R3Y, R3Y)),          # after a mov: a nop
          Ins("label", "L1"),
          Ins("alu", "add.u r1.x, r2.x, r2.x", (R1X,), (R2X, R2X)),          # across a label: a nop, (jp) on it
          Ins("end", "end")]
  out = _texts(legalize(prog))
  assert out == ["(nop3) add.u r1.x, r0.z, r0.z", "(nop3) add.u r2.x, r1.x, r1.x", "(nop3) sel.b32 r3.x, r2.x, r0.z, r2.x",
                 "(rpt2)nop", "stl.u32 l[r0.z], r3.x, 1", "mov.u32u32 r3.y, 1", "(rpt2)nop",
                 "add.u r2.x, r3.y, r3.y", "L1", "(jp)(rpt2)nop", "add.u r1.x, r2.x, r2.x", "end"]


def test_a_mads_third_source_is_read_two_cycles_late():
  """Mesa ir3_delay.c ir3_src_read_delay: mad/madsh read their third source cat3_src2_read (2 on a6xx) cycles after
  issue, so an ALU result there waits 3 - 2 cycles, one in the source's first two places 3."""
  R3Y = 13
  prog = [Ins("alu", "mull.u r1.x, r0.z, r0.z", (R1X,), (R0Z, R0Z)),
          Ins("alu", "madsh.m16 r2.x, r0.z, r0.z, r1.x", (R2X,), (R0Z, R0Z, R1X)),
          Ins("alu", "madsh.m16 r3.y, r2.x, r0.z, r0.z", (R3Y,), (R2X, R0Z, R0Z)),
          Ins("end", "end")]
  out = _texts(legalize(prog))
  assert out[:3] == ["(nop1) mull.u r1.x, r0.z, r0.z", "(nop3) madsh.m16 r2.x, r0.z, r0.z, r1.x",
                     "madsh.m16 r3.y, r2.x, r0.z, r0.z"]
