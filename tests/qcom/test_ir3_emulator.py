"""Instruction-level behaviour of the mock Adreno's ir3 emulator, each through a small program on MOCK+QCOM, with the
expected values written from the ISA's documented meaning (Mesa's ir3 description: (rptN)/(r) repetition, a6xx's
merged half registers, cov rounding modes ROUND_ZERO/EVEN/POS_INF/NEG_INF = 0..3, relative addressing through a0.x,
brao/braa on two predicates, getone, atomics returning the old value, 64-bit global addresses) and faults."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from tests.hangguard import ends

import hcq
from hcq.errors import GPUFault

from .test_programs import run


@pytest.fixture
def dev():
  with hcq.open("MOCK+QCOM") as d: yield d


def f32bits(x): return np.asarray(x, np.float32).view(np.uint32)


def test_repeat_steps_the_destination_and_the_r_sources(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
@buf 8
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 4
mov.f32f32 r3.x, (0.5)
(rpt5)nop
ldib.b.untyped.1d.u32.4.imm r2.x, r0.x, 0
(sy)(rpt3)add.f r4.x, (r)r2.x, r3.x
(rpt2)mov.u32u32 r5.x, (r)r2.y
(rpt5)nop
stib.b.untyped.1d.u32.4.imm r4.x, r0.x, 1
stib.b.untyped.1d.u32.3.imm r5.x, r0.y, 1
end
"""
  inp = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
  out = run(dev, text, [inp, None])[1]
  np.testing.assert_array_equal(out[:4].view(np.float32), inp + 0.5)       # r3.x is not stepped (no (r))
  np.testing.assert_array_equal(out[4:7], f32bits(inp[1:4]))


def test_half_registers_are_halves_of_the_full_ones(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u16u16 hr2.x, 0x1234
mov.u16u16 hr2.y, 0x5678
mov.u16u16 hr2.w, 0
(rpt1)nop
add.s hr2.z, hr2.x, h(-1)
mov.u32u32 r0.x, 0
(rpt5)nop
stib.b.untyped.1d.u32.2.imm r1.x, r0.x, 0
end
"""
  out = run(dev, text, [None])[0]
  assert out[0] == 0x56781234 and out[1] == 0x1233      # hr2.x/hr2.y: r1.x's low/high half; hr2.z: r1.y's low half


def test_conversions_round_as_their_mode_says(dev):
  text = b"""@localsize 8, 1, 1
@buf 8
@buf 64
@invocationid(r0.x)
shl.b r0.y, r0.x, 2
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
(sy)cov.f32s32 r2.x, r1.x
cov.f32s32 (even)r2.y, r1.x
cov.f32s32 (pos_infinity)r2.z, r1.x
cov.f32s32 (neg_infinity)r2.w, r1.x
(rpt5)nop
stib.b.untyped.1d.u32.4.imm r2.x, r0.y, 1
end
"""
  x = np.array([2.5, -2.5, 3.7, -3.7, 100.5, -1.5, 0.5, 1.5], np.float32)
  out = run(dev, text, [x, None])[1][:32].view(np.int32).reshape(8, 4)
  np.testing.assert_array_equal(out[:, 0], np.trunc(x))
  np.testing.assert_array_equal(out[:, 1], np.rint(x))
  np.testing.assert_array_equal(out[:, 2], np.ceil(x))
  np.testing.assert_array_equal(out[:, 3], np.floor(x))


def test_relative_register_reads_through_a0(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u16u16 hr10.x, 2
mov.u32u32 r1.z, 77
mov.u32u32 r1.w, 88
(rpt5)nop
mova a0.x, hr10.x
(rpt5)nop
(ul)mov.u32u32 r2.x, r<a0.x + 4>
(ul)mov.u32u32 r2.y, r<a0.x + 5>
mov.u32u32 r0.x, 0
(rpt5)nop
stib.b.untyped.1d.u32.2.imm r2.x, r0.x, 0
end
"""
  np.testing.assert_array_equal(run(dev, text, [None])[0][:2], [77, 88])    # regid 2 + 4 = r1.z, 2 + 5 = r1.w


def test_brao_and_braa_combine_two_predicates(dev):
  text = b"""@localsize 4, 1, 1
@buf 8
@invocationid(r0.x)
and.b r0.y, r0.x, 1
and.b r0.z, r0.x, 2
add.u r0.w, r0.x, 4
mov.u32u32 r1.x, 0
mov.u32u32 r1.y, 0
(rpt3)nop
cmps.u.ne p0.x, r0.y, 0
cmps.u.ne p0.y, r0.z, 0
(rpt5)nop
brao p0.x, p0.y, #or_taken
jump #or_done
or_taken:
(jp)mov.u32u32 r1.x, 1
or_done:
(jp)nop
braa p0.x, p0.y, #and_taken
jump #and_done
and_taken:
(jp)mov.u32u32 r1.y, 1
and_done:
(jp)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
stib.b.untyped.1d.u32.1.imm r1.y, r0.w, 0
end
"""
  out = run(dev, text, [None])[0]
  np.testing.assert_array_equal(out[:4], [0, 1, 1, 1])
  np.testing.assert_array_equal(out[4:], [0, 0, 0, 1])


def test_getone_runs_a_block_on_one_fiber(dev):
  text = b"""@localsize 8, 1, 1
@buf 8
@pvtmem 4
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
"""
  assert run(dev, text, [None])[0].sum() == 1


def test_transcendentals(dev):
  text = b"""@localsize 8, 1, 1
@buf 8
@buf 64
@invocationid(r0.x)
shl.b r0.y, r0.x, 3
(rpt2)nop
add.u r0.z, r0.y, 4
(rpt5)nop
ldib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
(sy)rsq r2.x, r1.x
log2 r2.y, r1.x
exp2 r2.z, r1.x
sin r2.w, r1.x
cos r3.x, r1.x
rcp r3.y, r1.x
sqrt r3.z, r1.x
mov.u32u32 r3.w, 0
(ss)(rpt5)nop
stib.b.untyped.1d.u32.4.imm r2.x, r0.y, 1
stib.b.untyped.1d.u32.4.imm r3.x, r0.z, 1
end
"""
  x = np.array([0.25, 0.5, 1.0, 2.0, 3.0, 5.5, 10.0, 0.1], np.float32)
  out = run(dev, text, [x, None])[1].view(np.float32).reshape(8, 8)      # SFU results: (ss) on a nop before stib
  for col, want in enumerate([1 / np.sqrt(x), np.log2(x), np.exp2(x), np.sin(x), np.cos(x), 1 / x, np.sqrt(x)]):
    np.testing.assert_allclose(out[:, col], want, rtol=1e-5, atol=1e-6)


def test_ibo_atomics_return_the_old_value(dev):
  """atomic.b's vector (Mesa ir3_a6xx.c emit_intrinsic_atomic_ssbo): .x receives the old value, .y is the data (the
  compare value of a cmpxchg), .z the new value of a cmpxchg; resinfo writes 3 components."""
  text = b"""@localsize 4, 1, 1
@buf 4
@buf 12
@invocationid(r0.x)
mov.u32u32 r1.x, 0
sub.s r1.y, r0.x, 2
mov.u32u32 r1.z, 0
mov.u32u32 r2.x, 0
mov.u32u32 r2.y, 10
add.u r2.z, r0.x, 20
mov.u32u32 r1.w, 1
mov.u32u32 r3.y, 0x5555
(rpt5)nop
atomic.b.min.untyped.1d.s32.1.imm r1.x, r1.z, 0
atomic.b.cmpxchg.untyped.1d.u32.1.imm r2.x, r1.w, 0
resinfo.b.untyped.1d.u32.1.imm r3.x, 0
(ss)nop
add.u r0.y, r0.x, 4
add.u r0.z, r0.x, 8
(rpt5)nop
(sy)nop
stib.b.untyped.1d.u32.1.imm r2.x, r0.x, 1
stib.b.untyped.1d.u32.1.imm r3.x, r0.y, 1
stib.b.untyped.1d.u32.1.imm r3.y, r0.z, 1
end
"""
  buf, out = run(dev, text, [np.array([5, 10, 0, 0], np.uint32), None])
  assert buf[0].view(np.int32) == -2                          # signed min of 5 and lid - 2 (the data in .y)
  assert 20 <= buf[1] <= 23                                   # exactly one compare (.y = 10) swapped in its .z
  assert sorted(out[:4].tolist()).count(10) == 1 and all(v == buf[1] for v in out[:4] if v != 10)
  np.testing.assert_array_equal(out[4:8], [4, 4, 4, 4])       # resinfo: the IBO's element count in .x
  assert not (out[8:12] == 0x5555).any()                      # ... and .y is written too


def test_global_loads_and_stores_take_64_bit_addresses(dev):
  text = b"""@localsize 4, 1, 1
@buf 16 (c0.x)
@invocationid(r0.x)
mov.u32u32 r1.x, c0.x
mov.u32u32 r1.y, c0.y
shl.b r2.x, r0.x, 2
(rpt5)nop
add.u r1.x, r1.x, r2.x
(rpt5)nop
ldg.u32 r3.x, g[r1.x+16], 1
(sy)add.u r3.x, r3.x, 1000
(rpt5)nop
stg.u32 g[r1.x+32], r3.x, 1
end
"""
  out = run(dev, text, [np.arange(16, dtype=np.uint32)])[0]
  np.testing.assert_array_equal(out[8:12], np.arange(4, 8) + 1000)
  np.testing.assert_array_equal(out[:8], np.arange(8))


def test_private_memory_is_per_fiber(dev):
  text = b"""@localsize 8, 1, 1
@buf 8
@pvtmem 4
@invocationid(r0.x)
mov.u32u32 r1.x, 0
mul.u24 r2.x, r0.x, 3
(rpt5)nop
stp.u32 p[r1.x], r2.x, 1
ldp.u32 r3.x, p[r1.x], 1
(sy)(rpt5)nop
stib.b.untyped.1d.u32.1.imm r3.x, r0.x, 0
end
"""
  np.testing.assert_array_equal(run(dev, text, [None])[0], np.arange(8) * 3)


def test_local_memory_past_the_shared_size_reads_offset_0(dev):
  """SP_CS_CTRL_REG1.SHARED_SIZE enables (SHARED_SIZE + 1) KiB; a6xx.xml: "the ldl/stl offset seems to be
  rewritten to 0 when it is beyond this limit". Without @localmem the driver writes computerator's SHARED_SIZE(1)."""
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 0
mov.u32u32 r0.y, 7
mov.u32u32 r0.z, 3000
mov.u32u32 r0.w, 99
(rpt5)nop
stl.u32 l[r0.x], r0.y, 1
stl.u32 l[r0.z], r0.w, 1
ldl.u32 r1.x, l[r0.x], 1
(ss)nop
stib.b.untyped.1d.u32.1.imm r1.x, r0.x, 0
end
"""
  assert run(dev, text, [None])[0][0] == 99                  # 3000 is past 2 KiB: the store went to offset 0
  assert run(dev, text.replace(b"@buf 4", b"@buf 4\n@localmem 4096"), [None])[0][0] == 7


def test_an_ibo_slot_that_was_not_loaded_faults(dev):
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 0
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r0.x, r0.x, 3
end
"""
  with pytest.raises(GPUFault, match=r"IBO slot 3 is past SP_CS_CONFIG.NIBO \(1\)"): run(dev, text, [None])


def test_an_endless_shader_is_a_gpu_hang_within_the_hang_timeout(dev):
  from hcq.drivers.qcom.program import Kernel
  dev.owned_os.devices[0].hang_timeout_s = 0.2
  prog = dev.load_code(Kernel(), struct.pack("<2Q", 0x0100000000000000, 0), "spin")      # "jump #0": forever
  with pytest.raises(GPUFault, match=r"context 1 faulted at timestamp \d+.*GPU hang: .*still runs at pc 0"):
    ends(prog, global_size=(1,), local_size=(1,), wait=True)     # the hang timer ends it, named as a GPU hang
