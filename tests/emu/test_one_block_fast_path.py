"""The one-block fast path (engine._run_entry): a kernel whose entry block ends every wave, launched again in the same
shape, runs that block once over the pooled register files without resetting them. Every way the cached state could
go stale must send the dispatch back to the full path: code rewritten in memory (even from s_endpgm alone), code
unmapped, another shape, another float mode, LDS or scratch left written by the previous dispatch, a fault, the
instruction budget, two threads on one GPUMemory. Programs are assembled by llvm-mc-19; expected values are computed
here with numpy / Python integers."""
import functools
import re
import subprocess
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst

from hcq.errors import GPUFault
from hcq.mockgpu.amd.emu import GPUMemory, InstructionBudgetExceeded, ScratchSetup, dispatch, engine

from .loader import HostBuffers, Kernel, run_corpus_kernel
from .test_instructions import assemble

pytestmark = [pytest.mark.tools("llvm-mc-19")]

SENTINEL = 0xDEADBEEF


def store_literal(value: int) -> str:
  """out[0] = value (s[0:1] = out)."""
  return f"""
    s_mov_b32 s2, {value:#x}
    v_mov_b32 v0, s2
    v_mov_b32 v1, 0
    global_store_b32 v1, v0, s[0:1]
    s_endpgm"""


# out[wg * 64 + tid] = wg * 1000 + tid (s[0:1] = out, s2 = work-group id X: rsrc2 USER_SGPR_COUNT 2, TGID_X_EN)
IDS = """
    v_lshlrev_b32 v1, 2, v0
    s_lshl_b32 s3, s2, 8
    v_add_nc_u32 v1, s3, v1
    s_mul_i32 s4, s2, 1000
    v_add_nc_u32 v2, s4, v0
    global_store_b32 v1, v2, s[0:1]
    s_endpgm"""
IDS_RSRC2 = 2 << 1 | 1 << 7

# out[tid] = LDS[tid], then LDS[tid] = 0x5eed: a fresh (zeroed) LDS gives zeros on every dispatch
LDS = """
    v_lshlrev_b32 v1, 2, v0
    ds_load_b32 v2, v1
    s_waitcnt lgkmcnt(0)
    global_store_b32 v1, v2, s[0:1]
    v_mov_b32 v3, 0x5eed
    ds_store_b32 v1, v3
    s_endpgm"""

# out[tid] = the lane's first scratch dword, then that dword = 0x5eed
SCRATCH = """
    v_mov_b32 v1, 0
    scratch_load_b32 v2, v1, off
    s_waitcnt vmcnt(0)
    v_lshlrev_b32 v4, 2, v0
    global_store_b32 v4, v2, s[0:1]
    v_mov_b32 v3, 0x5eed
    scratch_store_b32 v1, v3, off
    s_endpgm"""

# out[0] = s2 * 1.0 in f32 (s2 = a user SGPR): a denormal input is flushed or kept per rsrc1 FLOAT_DENORM_MODE_32
FMUL = """
    v_mul_f32 v2, s2, 1.0
    v_mov_b32 v1, 0
    global_store_b32 v1, v2, s[0:1]
    s_endpgm"""

# out[0] = *(uint *)s[2:3]
LOAD = """
    v_mov_b32 v1, 0
    global_load_b32 v2, v1, s[2:3]
    s_waitcnt vmcnt(0)
    global_store_b32 v1, v2, s[0:1]
    s_endpgm"""

# two blocks: out[0] = 99 after a branch
TWO_BLOCKS = """
    s_mov_b32 s2, 99
    s_branch .Lstore
    s_endpgm
.Lstore:
    v_mov_b32 v0, s2
    v_mov_b32 v1, 0
    global_store_b32 v1, v0, s[0:1]
    s_endpgm"""


class Rig:
  """One GPUMemory, a code buffer, and a count of the dispatches that took the one-block fast path."""

  def __init__(self, monkeypatch, code_bytes=1024):
    self.bufs = HostBuffers(GPUMemory())
    self.mem = self.bufs.memory
    self.pc, self.code = self.bufs.alloc(code_bytes)
    self.fast = 0
    real = engine._run_entry

    def counting(*args):
      self.fast += 1
      return real(*args)
    monkeypatch.setattr(engine, "_run_entry", counting)

  def load(self, text: str, at: int = 0) -> int:
    blob = assemble(text)
    self.code[at:at + len(blob)] = np.frombuffer(blob, np.uint8)
    return self.pc + at

  def out(self, n: int = 1):
    return self.bufs.array(np.full(n, SENTINEL, np.uint32))

  def run(self, pc, user, *, grid=(1, 1, 1), block=(1, 1, 1), rsrc1=0, rsrc2=None, **kw):
    user = [u & 0xFFFFFFFF for u in user]
    return dispatch(self.mem, pgm_addr=pc, rsrc1=rsrc1, rsrc2=(len(user) << 1) if rsrc2 is None else rsrc2,
                    user_sgprs=user, grid=grid, block=block, **kw)


def ptr(address: int) -> list[int]:
  return [address & 0xFFFFFFFF, address >> 32]


def test_a_one_block_kernel_takes_the_fast_path_with_new_arguments_each_time(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load(store_literal(0x1234))
  for i in range(4):
    pout, out = rig.out()
    st = rig.run(pc, ptr(pout))      # another output buffer each time: the user SGPRs change
    assert out[0] == 0x1234 and st.waves == 1 and st.wave_instructions == 5
  assert rig.fast == 3               # all but the first


def test_code_rewritten_between_dispatches_is_translated_again(monkeypatch):
  rig = Rig(monkeypatch)
  pout, out = rig.out()
  pc = rig.load("s_endpgm")
  for _ in range(3): assert rig.run(pc, ptr(pout)).wave_instructions == 1    # s_endpgm alone: not even called
  assert rig.fast == 2 and out[0] == SENTINEL
  for value in (7, 1234, 0xCAFE):         # the same address now stores; then only its literal changes
    rig.load(store_literal(value))
    for _ in range(2):
      out[0] = SENTINEL
      rig.run(pc, ptr(pout))
      assert out[0] == value
  rig.load(TWO_BLOCKS)                    # no longer a one-block kernel
  fast = rig.fast
  for _ in range(2):
    out[0] = SENTINEL
    assert rig.run(pc, ptr(pout)).wave_instructions == 6
    assert out[0] == 99
  assert rig.fast == fast
  rig.load(store_literal(5))              # and back
  for _ in range(2): rig.run(pc, ptr(pout))
  assert out[0] == 5 and rig.fast == fast + 1


def test_code_unmapped_after_a_fast_dispatch_faults_and_runs_again_once_mapped(monkeypatch):
  rig = Rig(monkeypatch)
  pout, out = rig.out()
  pc = rig.load(store_literal(77))
  rig.run(pc, ptr(pout))
  rig.run(pc, ptr(pout))
  assert rig.fast == 1
  rig.mem.remove_range(rig.pc)
  with pytest.raises(GPUFault) as e:
    rig.run(pc, ptr(pout))
  assert e.value.address == pc and e.value.kind == "page fault"
  rig.mem.add_range(rig.pc, 1024)
  out[0] = SENTINEL
  rig.run(pc, ptr(pout))
  rig.run(pc, ptr(pout))
  assert out[0] == 77


def _ids_expected(grid_x, block_x, n):
  out = np.full(n, SENTINEL, np.uint32)
  for g in range(grid_x): out[g * 64:g * 64 + block_x] = g * 1000 + np.arange(block_x)
  return out


def test_shapes_interleaved_with_the_same_kernel(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load(IDS)
  shapes = [(1, 1), (1, 1), (1, 64), (2, 64), (2, 64), (3, 5), (1, 1), (1, 64), (3, 5), (2, 64)]
  for grid_x, block_x in shapes:
    pout, out = rig.out(4 * 64)
    rig.run(pc, ptr(pout), grid=(grid_x, 1, 1), block=(block_x, 1, 1), rsrc2=IDS_RSRC2)
    np.testing.assert_array_equal(out, _ids_expected(grid_x, block_x, 4 * 64), err_msg=f"{grid_x}x{block_x}")
  assert rig.fast == 6      # each shape's repeats


def test_the_kernel_changes_within_one_shape(monkeypatch):
  rig = Rig(monkeypatch)
  pa = rig.load(store_literal(1), at=0)
  pb = rig.load(store_literal(2), at=256)
  pout, out = rig.out()
  for pc, value in ((pa, 1), (pb, 2), (pb, 2), (pa, 1), (pa, 1), (pb, 2)):
    out[0] = SENTINEL
    rig.run(pc, ptr(pout))
    assert out[0] == value
  assert rig.fast == 4      # both kernels are remembered for the shape once each has run after a reset


# out[tid] = v2 (0 at start-up): reads a register that DIVERGE leaves written in some waves only
STORE_V2 = """
    v_and_b32 v3, 63, v0
    v_lshlrev_b32 v4, 2, v3
    global_store_b32 v4, v2, s[0:1]
    s_endpgm"""
# wave 0 (lanes 0-31) sets v2 and s6, wave 1 branches around: a write-back to some waves of the pooled files
DIVERGE = """
    v_cmp_gt_u32 vcc_lo, 32, v0
    s_cbranch_vccz .Lskip
    v_mov_b32 v2, 0x1234
    s_branch .Lskip
.Lskip:
    s_endpgm"""


def test_a_divergent_kernel_between_launches_of_a_one_block_kernel(monkeypatch):
  """A kernel whose waves diverge writes registers of some waves in place in the pooled files: the one-block kernel
  launched next in that shape must not run on them as they are."""
  rig = Rig(monkeypatch)
  p_store = rig.load(STORE_V2, at=0)
  p_div = rig.load(DIVERGE, at=256)
  for pc in (p_store, p_store, p_div, p_store, p_store, p_div, p_div, p_store):
    pout, out = rig.out(64)
    rig.run(pc, ptr(pout), block=(64, 1, 1))
    if pc == p_store: np.testing.assert_array_equal(out, np.zeros(64, np.uint32))
  assert rig.fast == 2


def test_lds_and_scratch_start_zeroed_on_every_dispatch(monkeypatch):
  rig = Rig(monkeypatch)
  p_lds = rig.load(LDS, at=0)
  p_scr = rig.load(SCRATCH, at=512)
  for lds_bytes in (128, 128, 256, 256, 128):
    pout, out = rig.out(32)
    rig.run(p_lds, ptr(pout), block=(32, 1, 1), lds_bytes=lds_bytes)
    np.testing.assert_array_equal(out, np.zeros(32, np.uint32))
  for per_lane in (16, 16, 16, 32, 32):
    pout, out = rig.out(32)
    rig.run(p_scr, ptr(pout), block=(32, 1, 1), scratch=ScratchSetup(None, per_lane))
    np.testing.assert_array_equal(out, np.zeros(32, np.uint32))
  assert rig.fast == 3 + 3      # every repeat of a (shape, LDS, scratch), the last LDS 128 included


def test_float_mode_is_part_of_the_fast_path_key(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load(FMUL)
  tiny = 1                                       # the smallest f32 denormal, as bits
  expected_kept = np.array(np.array([tiny], np.uint32).view(np.float32) * np.float32(1.0), np.float32).view(np.uint32)
  assert expected_kept[0] == tiny                # numpy keeps the denormal
  for mode, expected in ((3, tiny), (3, tiny), (0, 0), (0, 0), (3, tiny)):   # FLOAT_DENORM_MODE_32: rsrc1[17:16]
    pout, out = rig.out()
    rig.run(pc, ptr(pout) + [tiny], rsrc1=mode << 16)
    assert out[0] == expected, f"mode {mode}"


def test_a_fault_in_the_fast_path_then_a_good_dispatch(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load(LOAD)
  pin, _ = rig.bufs.array(np.array([0x600D], np.uint32))
  pout, out = rig.out()
  rig.run(pc, ptr(pout) + ptr(pin))
  rig.run(pc, ptr(pout) + ptr(pin))
  assert out[0] == 0x600D and rig.fast == 1
  unmapped = 0x7000_0000_0000
  assert rig.mem.range_of(unmapped) is None
  out[0] = SENTINEL
  with pytest.raises(GPUFault) as e:
    rig.run(pc, ptr(pout) + ptr(unmapped))
  assert e.value.address == unmapped and e.value.kind == "page fault"
  assert out[0] == SENTINEL and rig.fast == 2
  rig.run(pc, ptr(pout) + ptr(pin))
  assert out[0] == 0x600D and rig.fast == 3


def test_instruction_budget_on_the_fast_path(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load("s_endpgm")
  rig.run(pc, [], block=(64, 1, 1), instruction_budget=2)       # 2 waves x 1 instruction
  rig.run(pc, [], block=(64, 1, 1), instruction_budget=2)
  with pytest.raises(InstructionBudgetExceeded) as e:
    rig.run(pc, [], block=(64, 1, 1), instruction_budget=1)
  assert e.value.address == pc and e.value.kind == "instruction budget"
  assert rig.run(pc, [], block=(64, 1, 1), instruction_budget=2).wave_instructions == 2
  assert rig.fast == 3


def test_the_pooled_registers_stay_the_start_up_values_after_one_block_kernels():
  """The fast path rests on this: a block that ends the waves writes no register back and changes none in place, so
  the pooled S/V files (and SCC) stay the start-up templates, but for the user SGPRs. Checked after every kernel of
  the fixture corpus (clang-19 code) ran twice, for the shapes whose kernel was one block."""
  from tests.fixtures.opencl import kernels
  bufs = HostBuffers(GPUMemory())
  one_block = 0
  for name in sorted(kernels.KERNELS):
    k = kernels.KERNELS[name]
    prog = Kernel(bufs, k.code_object(), k.name)
    for seed in (0, 1):
      run_corpus_kernel(bufs, prog, k, kernels, seed)
    for shape in bufs.memory.dispatch_launches.values():
      if not shape.clean: continue
      one_block += 1
      uc = shape.user_count
      np.testing.assert_array_equal(shape.S[uc:], shape.S0[uc:], err_msg=f"{name}: SGPRs")
      np.testing.assert_array_equal(shape.V, shape.V0, err_msg=f"{name}: VGPRs")
      assert not shape.st.scc.any(), name
    bufs.memory.dispatch_launches.clear()
  assert one_block >= 3    # e.g. vadd, copy_u32, saxpy, empty


def test_two_threads_on_one_memory(monkeypatch):
  rig = Rig(monkeypatch)
  pc = rig.load(IDS)
  errors = []

  def worker(grid_x, block_x):
    try:
      for _ in range(200):
        pout, out = rig.out(4 * 64)
        rig.run(pc, ptr(pout), grid=(grid_x, 1, 1), block=(block_x, 1, 1), rsrc2=IDS_RSRC2)
        np.testing.assert_array_equal(out, _ids_expected(grid_x, block_x, 4 * 64))
    except Exception as e:   # reported by the main thread
      errors.append(e)
  threads = [threading.Thread(target=worker, args=shape) for shape in ((2, 64), (2, 64), (1, 7))]
  for t in threads: t.start()
  for t in threads: t.join()
  assert not errors, errors[0]
  assert rig.fast > 0


# ---- differential fuzz: one GPUMemory with every cache against a fresh GPUMemory per dispatch ----

S_ENDPGM = 0xBFB00000
# Instructions the programs are made of (user SGPRs: s[0:1] = data, s[2:3] = data + 4096; s4 = work-group id X; v0 =
# packed work-item ids): scalar and vector ALU, divergence through VCC/EXEC, global/LDS/scratch loads, stores and
# atomics, a barrier, forward branches (by raw offsets: one may land inside an 8-byte instruction: an error both
# sides must agree on). One line: one pick ("|" separates the instructions of a pick that reads LDS or scratch
# and stores what it read).
POOL = """s_mov_b32 s5, 3
s_add_u32 s6, s5, s4
s_cmp_eq_u32 s4, 0
s_cselect_b32 s7, 1, 2
s_mul_i32 s6, s6, s7
v_mov_b32 v1, s5
v_add_nc_u32 v2, v0, v1
v_and_b32 v3, 63, v0
v_lshlrev_b32 v4, 2, v3
v_mul_lo_u32 v2, v2, v3
v_cvt_f32_u32 v5, v0
v_mul_f32 v6, v5, v5
v_cmp_gt_u32 vcc_lo, 5, v3
v_cndmask_b32 v2, v1, v2, vcc_lo
s_and_saveexec_b32 s8, vcc_lo
s_or_b32 exec_lo, exec_lo, s8
s_mov_b32 exec_lo, -1
global_load_b32 v7, v4, s[0:1]
global_store_b32 v4, v2, s[0:1]
global_store_b32 v4, v6, s[2:3] offset:64
global_atomic_add_u32 v4, v1, s[0:1]
ds_store_b32 v4, v2
ds_load_b32 v8, v4
ds_add_u32 v4, v1
scratch_store_b32 v9, v2, off
scratch_load_b32 v10, v9, off
s_barrier
s_waitcnt vmcnt(0) lgkmcnt(0)
s_cbranch_scc1 2
s_cbranch_execz 1
s_branch 1
v_readfirstlane_b32 s9, v2
s_load_b32 s10, s[0:1], 0x10
v_add_nc_u32 v2, v7, v8
v_add_nc_u32 v2, v2, v10
global_load_b32 v7, v4, s[0:1] offset:512 | s_waitcnt vmcnt(0) | ds_store_b32 v4, v7 | scratch_store_b32 v9, v7, off
ds_load_b32 v8, v4 | s_waitcnt lgkmcnt(0) | global_store_b32 v4, v8, s[2:3] offset:128
scratch_load_b32 v10, v9, off | s_waitcnt vmcnt(0) | global_store_b32 v4, v10, s[2:3] offset:384""".splitlines()


@functools.lru_cache(maxsize=None)
def pool_words() -> tuple:
  """Each POOL line's dwords, from llvm-mc-19 -show-encoding."""
  lines = [[inst.strip() for inst in line.split("|")] for line in POOL]
  out = subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-show-encoding"],
                       input="\n".join(inst for line in lines for inst in line) + "\n", capture_output=True,
                       text=True, check=True).stdout
  encodings = [bytes(int(b, 16) for b in m.split(",")) for m in re.findall(r"encoding: \[([^\]]*)\]", out)]
  assert len(encodings) == sum(map(len, lines)), out
  words, at = [], 0
  for line in lines:
    words.append(tuple(w for e in encodings[at:at + len(line)] for w in np.frombuffer(e, np.uint32).tolist()))
    at += len(line)
  return tuple(words)


SHAPES = [((1, 1, 1), (1, 1, 1)), ((2, 1, 1), (8, 4, 2)), ((1, 1, 1), (64, 1, 1))]


class Differential:
  """The same programs, in the same host memory, dispatched on a long-lived GPUMemory (translated blocks, shape and
  launch caches, the one-block fast path all in play) and on a fresh GPUMemory each time (none of them): the memory
  they leave and the error they raise must be the same."""

  def __init__(self):
    self.cached = GPUMemory()
    self.bufs = HostBuffers(self.cached)
    self.pcode, self.code = self.bufs.alloc(4096)
    self.pdata, self.data = self.bufs.alloc(6 << 10)
    self.pattern = np.random.default_rng(3).integers(0, 256, self.data.size, dtype=np.uint8)
    self.fast = 0

  def fresh(self) -> GPUMemory:
    mem = GPUMemory()
    for start, size in self.cached.ranges(): mem.add_range(start, size)
    return mem

  def run(self, mem, words, shape, mode, offset):
    code = np.array(list(words) + [S_ENDPGM] * 4, np.uint32)
    self.code[:] = 0
    self.code[:code.nbytes] = code.view(np.uint8)
    self.data[:] = self.pattern
    a, b = self.pdata + offset, self.pdata + 4096 + offset     # the user SGPRs change with `offset`
    user = [a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32]
    try:
      dispatch(mem, pgm_addr=self.pcode, rsrc1=0x3F | mode << 16, rsrc2=(4 << 1) | (1 << 7) | (2 << 11),
               user_sgprs=user, grid=shape[0], block=shape[1], lds_bytes=1024, scratch=ScratchSetup(None, 64),
               instruction_budget=20_000)
      outcome = None
    except GPUFault as e:
      outcome = (type(e).__name__, e.kind, e.address)
    return outcome, self.data.copy()


DIFF = Differential()
PROGRAM = hst.lists(hst.integers(0, len(POOL) - 1), min_size=1, max_size=20)


@given(hst.lists(hst.tuples(PROGRAM, hst.integers(0, len(SHAPES) - 1), hst.sampled_from([0, 0xF])), min_size=1,
                 max_size=3))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_cached_dispatches_match_fresh_ones(programs):
  words_of = pool_words()
  for picks, shape, mode in programs:
    words = [w for i in picks for w in words_of[i]]
    for repeat in range(3):       # again through the launch cache (and the fast path when one block)
      got = DIFF.run(DIFF.cached, words, SHAPES[shape], mode, 1024 * (repeat & 1))
      want = DIFF.run(DIFF.fresh(), words, SHAPES[shape], mode, 1024 * (repeat & 1))
      assert got[0] == want[0], (repeat, [POOL[i] for i in picks], got[0], want[0])
      np.testing.assert_array_equal(got[1], want[1], err_msg=f"{[POOL[i] for i in picks]}, repeat {repeat}")


@pytest.mark.slow
@given(hst.lists(hst.tuples(PROGRAM, hst.integers(0, len(SHAPES) - 1), hst.sampled_from([0, 0xF])), min_size=1,
                 max_size=4))
@settings(max_examples=3000, derandomize=False, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_cached_dispatches_match_fresh_ones_long(programs):
  """3,000 sequences (`pytest -m slow`): about 43 s on the project's 2-core machine."""
  test_cached_dispatches_match_fresh_ones.hypothesis.inner_test(programs)
