"""Adreno as the hardware runs it (issue 28): the ir3 semantics Mesa documents and the pipeline's sync rules, in the
mock's emulator, each through a small program on MOCK+QCOM with the expected values written from the cited source.

  - atomic.b's vector: .x receives the old value, .y is the data (the compare of a cmpxchg), .z a cmpxchg's new
    value (Mesa ir3_a6xx.c emit_intrinsic_atomic_ssbo); atomic.g.cmpxchg's data: (compare, value);
  - mull.u multiplies the low 16 bits (nir umul_low); madsh.m16 is imadsh_mix16 (nir_opcodes.py); a 32-bit
    multiply is ir3_nir_imul.py's sequence of the two;
  - (ss) after local loads, SFU results, resinfo; (sy) after ldib/ldg and global/IBO atomics; 3 cycles between an
    ALU result and an ALU reader (Mesa ir3_legalize.c, ir3_compiler.c delay_slots) -- strict mode faults, poison
    mode hands the reader POISON;
  - getone/bany/ball act per wave (THREADSIZE: 64 fibers), stc's a1.x form, sel.f32 refused (undocumented)."""
from __future__ import annotations

import numpy as np
import pytest

import hcq
from hcq.errors import GPUFault
from hcq.mockgpu.qcom.sync import POISON

from .test_programs import run


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM") as d: yield d


def mock_of(dev): return dev.owned_os.devices[0]


# ---- atomics: operand layout as Mesa builds it
ATOMIC_B = b"""@localsize 1, 1, 1
@buf 4
@buf 4
mov.u32u32 r1.x, 100
mov.u32u32 r1.y, 7
mov.u32u32 r1.z, 0
mov.u32u32 r2.x, 100
mov.u32u32 r2.y, 5
mov.u32u32 r2.z, 42
mov.u32u32 r3.x, 1
mov.u32u32 r3.y, 0
(rpt5)nop
atomic.b.add.untyped.1d.u32.1.imm r1.x, r1.z, 0
atomic.b.cmpxchg.untyped.1d.u32.1.imm r2.x, r3.x, 0
(sy)nop
stib.b.untyped.1d.u32.1.imm r1.x, r3.y, 1
stib.b.untyped.1d.u32.1.imm r2.x, r3.x, 1
end
nop
"""


def test_atomic_b_takes_its_data_from_y_and_returns_the_old_value_in_x(dev):
  counters, olds = run(dev, ATOMIC_B, [np.array([10, 5, 0, 0], np.uint32), None])
  assert counters[0] == 17                  # 10 + .y (7); with the data read from .x it would be 110
  assert counters[1] == 42                  # element 1 held .y (5, the compare): swapped for .z (42)
  assert olds[0] == 10 and olds[1] == 5     # .x received the old values


def test_atomic_b_cmpxchg_that_does_not_match_keeps_the_value(dev):
  counters, olds = run(dev, ATOMIC_B, [np.array([10, 6, 0, 0], np.uint32), None])
  assert counters[1] == 6 and olds[1] == 6


def test_atomic_g_cmpxchg_takes_compare_then_value(dev):
  text = b"""@localsize 1, 1, 1
@buf 4 (c0.x)
mov.u32u32 r1.x, c0.x
mov.u32u32 r1.y, c0.y
mov.u32u32 r2.x, 5
mov.u32u32 r2.y, 42
mov.u32u32 r3.x, 0
(rpt5)nop
atomic.g.cmpxchg.untyped.1d.u32.1.g r4.x, r1.x, r2.x
(sy)nop
stib.b.untyped.1d.u32.1.imm r4.x, r3.x, 0
end
nop
"""
  out = run(dev, text, [np.array([5, 0, 0, 0], np.uint32)])[0]
  assert out[0] == 5                          # the old value (5 matched the compare in r2.x; 42 written... then
  out = run(dev, text, [np.array([42, 0, 0, 0], np.uint32)])[0]
  assert out[0] == 42                         # ...a memory holding the new value (42) is not the compare: unchanged


def test_atomic_g_cmpxchg_swaps_in_the_second_component(dev):
  text = b"""@localsize 1, 1, 1
@buf 4 (c0.x)
mov.u32u32 r1.x, c0.x
mov.u32u32 r1.y, c0.y
mov.u32u32 r2.x, 5
mov.u32u32 r2.y, 42
(rpt5)nop
atomic.g.cmpxchg.untyped.1d.u32.1.g r4.x, r1.x, r2.x
end
nop
"""
  assert run(dev, text, [np.array([5, 0, 0, 0], np.uint32)])[0][0] == 42


# ---- multiplies
MUL = b"""@localsize 1, 1, 1
@buf 2
@buf 4
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 1
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
ldib.b.untyped.1d.u32.1.imm r1.y, r0.y, 0
(sy)mull.u r2.x, r1.x, r1.y
madsh.m16 r2.y, r1.x, r1.y, r0.x
(rpt2)nop
madsh.m16 r2.z, r1.x, r1.y, r2.x
(rpt2)nop
madsh.m16 r2.w, r1.y, r1.x, r2.z
(rpt5)nop
stib.b.untyped.1d.u32.4.imm r2.x, r0.x, 1
end
nop
"""


@pytest.mark.parametrize("a, b", [(0x12345678, 0x9ABCDEF0), (0xFFFFFFFF, 0xFFFFFFFF), (3, 0x10001)])
def test_mull_u_is_16x16_and_the_imul_sequence_is_32x32(dev, a, b):
  out = run(dev, MUL, [np.array([a, b], np.uint32), None])[1]
  assert out[0] == (a & 0xFFFF) * (b & 0xFFFF) & 0xFFFFFFFF           # nir umul_low
  assert out[1] == ((a >> 16) * (b & 0xFFFF) << 16) & 0xFFFFFFFF       # imadsh_mix16(a, b, 0)
  assert out[3] == (a * b) & 0xFFFFFFFF                                # ir3_nir_imul.py's lowering of imul


def test_sel_f32_is_refused_as_undocumented(dev):
  text = b"""@localsize 1, 1, 1
mov.u32u32 r1.x, 0
(rpt2)nop
sel.f32 r0.x, r1.x, r1.x, r1.x
end
nop
"""
  with pytest.raises(GPUFault, match=r"sel.f32's semantics are not documented by Mesa"): run(dev, text, [])


# ---- sync flags and delay slots
LDIB_THEN_USE = b"""@localsize 1, 1, 1
@buf 1
@buf 1
mov.u32u32 r0.x, 0
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
%sadd.u r1.y, r1.x, 1
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.y, r0.x, 1
end
nop
"""


def test_an_ldib_result_read_without_sy_faults_in_strict_mode(dev):
  with pytest.raises(GPUFault, match=r"add.u r1.y, r1.x, 1 at pc 3 reads r1.x: the result of pc 2 needs \(sy\) first"):
    run(dev, LDIB_THEN_USE % b"", [np.array([41], np.uint32), None])


def test_an_ldib_result_read_with_ss_instead_of_sy_still_faults(dev):
  with pytest.raises(GPUFault, match=r"needs \(sy\)"):
    run(dev, LDIB_THEN_USE % b"(ss)", [np.array([41], np.uint32), None])


def test_with_sy_the_value_arrives(dev):
  assert run(dev, LDIB_THEN_USE % b"(sy)", [np.array([41], np.uint32), None])[1][0] == 42


def test_poison_mode_hands_the_early_reader_poison(dev):
  mock_of(dev).sync_check = "poison"
  assert run(dev, LDIB_THEN_USE % b"", [np.array([41], np.uint32), None])[1][0] == (POISON + 1) & 0xFFFFFFFF


LDL_THEN_USE = b"""@localsize 1, 1, 1
@buf 1
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 9
(rpt5)nop
stl.u32 l[r0.x], r0.y, 1
ldl.u32 r1.x, l[r0.x], 1
%snop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""


def test_a_local_load_needs_ss_not_sy(dev):
  with pytest.raises(GPUFault, match=r"needs \(ss\)"): run(dev, LDL_THEN_USE % b"(sy)", [None])
  with hcq.open("MOCK+QCOM") as fresh: assert run(fresh, LDL_THEN_USE % b"(ss)", [None])[0][0] == 9


def test_resinfo_and_sfu_results_need_ss(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 0
mov.f32f32 r2.x, (2.0)
(rpt5)nop
resinfo.b.untyped.1d.u32.1.imm r1.x, 0
rcp r1.w, r2.x
%snop
stib.b.untyped.1d.u32.4.imm r1.x, r0.x, 0
end
nop
"""
  with pytest.raises(GPUFault, match=r"needs \(ss\)"): run(dev, text % b"", [None])
  with hcq.open("MOCK+QCOM") as fresh: out = run(fresh, text % b"(ss)", [None])[0]
  assert out[0] == 4 and out[3:4].view(np.float32)[0] == 0.5


def test_resinfo_writes_three_components(dev):
  """resinfo.b has no writemask and writes 3 components (ir3_a6xx.c): an instruction writing .y or .z before the
  (ss) races with it."""
  text = b"""@localsize 1, 1, 1
@buf 4
(rpt5)nop
resinfo.b.untyped.1d.u32.1.imm r1.x, 0
mov.u32u32 r1.z, 3
end
nop
"""
  with pytest.raises(GPUFault, match=r"writes r1.z: the result of pc 1 needs \(ss\)"): run(dev, text, [None])


@pytest.mark.parametrize("nops, ok", [(b"", False), (b"nop\n", False), (b"(rpt1)nop\n", True)])
def test_an_alu_result_is_read_by_an_alu_instruction_3_cycles_later(dev, nops, ok):
  text = b"""@localsize 1, 1, 1
@buf 1
mov.u32u32 r1.x, 5
mov.u32u32 r0.x, 0
%sadd.u r1.y, r1.x, 1
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.y, r0.x, 0
end
nop
""" % nops
  if ok: assert run(dev, text, [None])[0][0] == 6
  else:
    with pytest.raises(GPUFault, match=r"reads r1.x: \d cycle\(s\) too early"): run(dev, text, [None])


def test_a_compare_is_read_by_a_branch_after_the_non_alu_delay(dev):
  text = b"""@localsize 1, 1, 1
mov.u32u32 r0.x, 0
(rpt2)nop
cmps.u.eq p0.x, r0.x, 0
br p0.x, #done
done:
(jp)end
nop
"""
  with pytest.raises(GPUFault, match=r"br p0.x.* reads p0.x: \d cycle\(s\) too early"): run(dev, text, [])


# ---- per-wave flow control
def test_getone_runs_its_block_once_per_wave(dev):
  text = b"""@localsize 128, 1, 1
@buf 128
@invocationid(r0.x)
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, 1
(rpt5)nop
getone #skip
mov.u32u32 r1.x, r1.y
skip:
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""
  out = run(dev, text, [None])[0]
  assert out[:64].sum() == 1 and out[64:].sum() == 1          # two waves of 64 (THREAD64): one fiber each


def test_bany_votes_within_a_wave(dev):
  text = b"""@localsize 128, 1, 1
@buf 128
@invocationid(r0.x)
mov.u32u32 r1.x, 0
(rpt2)nop
cmps.u.eq p0.x, r0.x, 3
(rpt5)nop
bany p0.x, #taken
jump #done
taken:
(jp)mov.u32u32 r1.x, 1
done:
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""
  out = run(dev, text, [None])[0]
  assert (out[:64] == 1).all() and (out[64:] == 0).all()      # only fiber 3's wave voted


def test_stc_a1_form_writes_at_a1_plus_the_offset(dev):
  text = b"""@localsize 1, 1, 1
@buf 1
@const(c2.x) 0, 0, 0, 0
mov.u32u32 r0.x, 0
mov.u32u32 r1.x, 77
mova1 a1.x, 8
(rpt5)nop
stc.u32 c[a1.x], r1.x, 1
(ss)mov.u32u32 r2.x, c2.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r2.x, r0.x, 0
end
nop
"""
  assert run(dev, text, [None])[0][0] == 77          # c[a1.x + 0] = c[8] = c2.x


def test_a_constant_read_after_stc_needs_ss(dev):
  text = b"""@localsize 1, 1, 1
@const(c1.x) 0, 0, 0, 0
mov.u32u32 r1.x, 77
(rpt5)nop
stc.u32 c[4], r1.x, 1
mov.u32u32 r2.x, c1.x
end
nop
"""
  with pytest.raises(GPUFault, match=r"reads the constant file: a constant after stc at pc 2 without \(ss\)"):
    run(dev, text, [])


def test_ball_votes_within_a_wave(dev):
  text = b"""@localsize 128, 1, 1
@buf 128
@invocationid(r0.x)
mov.u32u32 r1.x, 0
(rpt2)nop
cmps.u.lt p0.x, r0.x, 64
(rpt5)nop
ball p0.x, #taken
jump #done
taken:
(jp)mov.u32u32 r1.x, 1
done:
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
nop
"""
  out = run(dev, text, [None])[0]
  assert (out[:64] == 1).all() and (out[64:] == 0).all()      # wave 0: all below 64; wave 1: none


def test_overwriting_a_store_source_with_an_alu_result_needs_ss(dev):
  """A store may read its sources late (Mesa ir3_legalize.c is_war_hazard_producer): an ALU write to one of them
  needs (ss) first; a later memory instruction may write it (queued in order)."""
  text = b"""@localsize 1, 1, 1
@buf 2
mov.u32u32 r0.x, 0
mov.u32u32 r1.x, 5
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
%smov.u32u32 r1.x, 6
end
nop
"""
  with pytest.raises(GPUFault, match=r"writes r1.x: a source of the instruction at pc 3 .* \(ss\) first"):
    run(dev, text % b"", [None])
  with hcq.open("MOCK+QCOM") as fresh: assert run(fresh, text % b"(ss)", [None])[0][0] == 5
