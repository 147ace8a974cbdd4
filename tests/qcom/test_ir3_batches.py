"""The ir3 emulator's batching (mockgpu/qcom/ir3/dispatch.py): register files are kept between batches and
dispatches, so what one batch or program wrote must never be seen by the next one; grids larger than a batch
(BATCH fibers) run every work-group; divergent and uniform fibers reconverge at the same results."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import hcq
from hcq.errors import GPUFault
from hcq.mockgpu.qcom.ir3.values import BATCH

from .test_programs import run


@pytest.fixture(scope="module")
def dev():
  with hcq.open("MOCK+QCOM") as d: yield d


GROUPS = 2 * BATCH // 64 + 3             # two full batches and a short one

# stores r2.x before the program writes it (every batch must see 0), then writes r2.x and r5.x
READ_BEFORE_WRITE = b"""@localsize 64, 1, 1
@buf %d
@buf %d
@invocationid(r0.x)
@wgid(r48.x)
shl.b r1.x, r48.x, 6
(rpt2)nop
add.u r1.x, r1.x, r0.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r2.x, r1.x, 0
(ss)mov.u32u32 r2.x, 0x1234
mov.u32u32 r5.x, 0x5678
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r5.x, r1.x, 1
end
nop
""" % (GROUPS * 64, GROUPS * 64)

# stores r5.x, which this program never writes: the program above wrote it in an earlier dispatch
READ_UNWRITTEN = b"""@localsize 64, 1, 1
@buf %d
@invocationid(r0.x)
@wgid(r48.x)
shl.b r1.x, r48.x, 6
(rpt2)nop
add.u r1.x, r1.x, r0.x
(rpt5)nop
stib.b.untyped.1d.u32.1.imm r5.x, r1.x, 0
end
nop
""" % (GROUPS * 64)


def test_every_batch_starts_from_zeroed_registers(dev):
  first, second = run(dev, READ_BEFORE_WRITE, [np.full(GROUPS * 64, 7, np.uint32), None], groups=GROUPS)
  np.testing.assert_array_equal(first, np.zeros(GROUPS * 64, np.uint32))      # not the last batch's 0x1234
  np.testing.assert_array_equal(second, np.full(GROUPS * 64, 0x5678, np.uint32))


def test_a_dispatch_does_not_see_the_registers_of_the_one_before(dev):
  run(dev, READ_BEFORE_WRITE, [None, None], groups=GROUPS)
  (out,) = run(dev, READ_UNWRITTEN, [np.full(GROUPS * 64, 7, np.uint32)], groups=GROUPS)
  np.testing.assert_array_equal(out, np.zeros(GROUPS * 64, np.uint32))


def test_a_failed_dispatch_leaves_no_registers_behind():
  # one @buf: the second stib (IBO slot 1) faults after the program wrote r5.x; the device stops its queues, so the
  # mock's kept register files are looked at directly: every one must be zeroed (the failed batch's is not kept)
  text = READ_BEFORE_WRITE.replace(b"@buf %d\n" % (GROUPS * 64), b"", 1)
  with hcq.open("MOCK+QCOM") as d:
    run(d, READ_UNWRITTEN, [None], groups=GROUPS)                 # fills the kept register files
    with pytest.raises(GPUFault, match="IBO slot 1"):
      run(d, text, [None], groups=GROUPS)
    kept = d.owned_os.devices[0].cp.programs[("register files",)]
    assert kept and all(not R.any() for R in kept.values())


def test_divergent_loops_over_several_batches(dev):
  text = (pathlib.Path(__file__).parent / "programs" / "loop.asm").read_bytes()
  (out,) = run(dev, text, [None], groups=GROUPS)
  lid = np.arange(64, dtype=np.uint32)
  np.testing.assert_array_equal(out, lid * (lid + 1) // 2)


def test_the_uint32_forms_of_the_alu_operations_match_their_int64_definitions():
  from hcq.mockgpu.qcom.ir3 import alu
  rng = np.random.default_rng(3)
  edges = np.array([0, 1, 2, 31, 32, 33, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, 0x7FFFFFFF, 0x80000000,
                    0xFFFFFFFE, 0xFFFFFFFF], np.uint32)
  a = np.concatenate([np.repeat(edges, len(edges)), rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)])
  b = np.concatenate([np.tile(edges, len(edges)), rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)])
  for name, fn in alu.FAST32.items():
    want = alu.CAT2[name][1](True)(a, b)
    np.testing.assert_array_equal(alu._fast32(fn)(a, b), want, err_msg=name)
    # an immediate or a constant operand: a scalar
    np.testing.assert_array_equal(alu._fast32(fn)(a, np.uint32(b[5])), alu.CAT2[name][1](True)(a, np.uint32(b[5])),
                                  err_msg=name)
    assert int(alu._fast32(fn)(np.uint32(a[7]), np.uint32(b[9]))) == int(alu.CAT2[name][1](True)(a[7:8], b[9:10])[0])


def test_local_memory_unaligned_and_narrow_accesses_take_the_byte_path(dev):
  # stl of a word at byte 1, then an aligned word load over it, a u8 (into hr2.z) and a u16 (into hr2.w) inside it:
  # little-endian bytes 00 11 22 33 44; hr2.z and hr2.w are the halves of r1.y (merged registers)
  text = b"""@localsize 1, 1, 1
@buf 4
mov.u32u32 r0.x, 1
mov.u32u32 r0.y, 0
mov.u32u32 r1.x, 0x44332211
(rpt5)nop
stl.u32 l[r0.x], r1.x, 1
ldl.u32 r1.w, l[r0.y], 1
ldl.u8 r2.z, l[r0.y+2], 1
ldl.u16 r2.w, l[r0.y+3], 1
(ss)nop
stib.b.untyped.1d.u32.4.imm r1.x, r0.y, 0
end
nop
"""
  (out,) = run(dev, text, [None])
  np.testing.assert_array_equal(out, [0x44332211, 0x44330022, 0, 0x33221100])


class _Obj:
  def __init__(self, oid, arr): self.id, self.arr, self.va, self.size = oid, arr, arr.ctypes.data, arr.nbytes


class _Model:
  """Two objects side by side in the GPU's address space (find() as the KGSL model's: the object holding a range)."""
  def __init__(self, *objs): self.objs = objs
  def find(self, va, size=1):
    return next((o for o in self.objs if o.va <= va and va + size <= o.va + o.size), None)


def test_element_accesses_read_the_object_or_fault_naming_the_first_address_outside():
  from hcq.mockgpu.qcom.ir3.state import Memory
  a = np.arange(64, dtype=np.uint32)
  mem = Memory(_Model(_Obj(1, a)))
  elem = np.array([3, 0, 63, 5], np.int64)
  np.testing.assert_array_equal(mem.load_elems(a.ctypes.data, elem, 4, "ldib"), a[elem])
  np.testing.assert_array_equal(mem.load_elems(a.ctypes.data + 8, elem[:3] // 2, 4, "ldib"), a[elem[:3] // 2 + 2])
  mem.store_elems(a.ctypes.data, np.array([1, 2], np.int64), np.array([70, 71], np.uint32), 4, "stib")
  assert a[1] == 70 and a[2] == 71
  with pytest.raises(GPUFault, match=rf"ldib: 4 bytes at {a.ctypes.data + 64 * 4:#x} are outside every memory object"):
    mem.load_elems(a.ctypes.data, np.array([0, 64, 65], np.int64), 4, "ldib")
  with pytest.raises(GPUFault, match="outside every memory object"):
    mem.store_elems(a.ctypes.data, np.array([70], np.int64), np.array([1], np.uint32), 4, "stib")
  assert a[63] == 63


def test_the_kept_fiber_arrays_of_small_shapes_are_the_arrays_built_afresh(dev):
  """Small batches' fiber arrays (work-group, local id, wave, local x/y/z) are kept between dispatches (issue 33 P9):
  each kept entry equals its definition and what a Dispatch with no cache builds; at most 16 small shapes are kept."""
  from hcq.mockgpu.qcom.ir3.dispatch import Dispatch
  shapes = [((1,), (1, 1, 1)), ((3,), (8, 2, 1)), ((2, 2), (4, 3, 2)), ((5,), (64, 2, 1))]
  shapes += [((1,), (k, 1, 1)) for k in range(2, 20)]
  for grid, local in shapes:
    prog = dev.load(b"@localsize %d, %d, %d\nend\nnop\n" % local, "empty")
    prog(global_size=grid, local_size=local, wait=True)
  kept = dev.owned_os.devices[0].cp.programs[("fiber arrays",)]
  small = [k for k in kept if k[0] * k[1] < BATCH // 2]
  assert 0 < len(small) <= 16 and (1, 19, (19, 1, 1), 64) in kept and (1, 1, (1, 1, 1), 64) not in kept
  for (ng, per, local, wave), got in kept.items():
    fresh = Dispatch.__new__(Dispatch)
    fresh.cache, fresh.local_size, fresh.wave = {}, local, wave
    want = fresh._fiber_arrays(ng, per)
    fiber = np.arange(ng * per)
    lid = fiber % per
    lx, ly, _ = local
    np.testing.assert_array_equal(got[0], fiber // per)
    np.testing.assert_array_equal(got[1], lid)
    np.testing.assert_array_equal(got[2], (fiber // per) * ((per - 1) // wave + 1) + lid // wave)
    for c, v in enumerate((lid % lx, lid // lx % ly, lid // (lx * ly))): np.testing.assert_array_equal(got[3][c], v)
    for a, b in zip(got[:3] + tuple(got[3]), want[:3] + tuple(want[3])): np.testing.assert_array_equal(a, b)


def test_the_kept_group_ids_of_one_batch_grids_are_the_ids_built_afresh(dev):
  """A grid that fits in one batch keeps its fibers' work-group ids (issue 33 P9): each kept entry equals the
  x/y/z ids by definition (y and z only where not all 0) and what a Dispatch with no cache builds; a grid of
  several batches keeps none; at most 16 grids are kept."""
  from hcq.mockgpu.qcom.ir3.dispatch import Dispatch
  grids = [(1, 1, 1), (3, 1, 1), (2, 3, 1), (2, 2, 3)] + [(k, 1, 1) for k in range(4, 20)] + [(BATCH // 4 + 3, 1, 1)]
  prog = dev.load(b"@localsize 4, 1, 1\n@wgid(r48.x)\nend\nnop\n", "wgid")
  for grid in grids: prog(global_size=grid, local_size=(4, 1, 1), wait=True)
  kept = dev.owned_os.devices[0].cp.programs[("group ids",)]
  assert len(kept) == 16 and ((19, 1, 1), 4) in kept and ((BATCH // 4 + 3, 1, 1), 4) not in kept
  for (groups, per), got in kept.items():
    fresh = Dispatch.__new__(Dispatch)
    fresh.cache, fresh.groups = {}, groups
    total = groups[0] * groups[1] * groups[2]
    want = fresh._group_ids(0, total, per)
    g = np.arange(total * per) // per
    ids = [g % groups[0], g // groups[0] % groups[1], g // (groups[0] * groups[1])]
    assert [c for c, _ in got] == [c for c, _ in want] == [c for c in range(3) if c == 0 or ids[c].any()]
    for (c, a), (_, b) in zip(got, want):
      np.testing.assert_array_equal(a, ids[c])
      np.testing.assert_array_equal(a, b)
