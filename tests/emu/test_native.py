"""The native (C) translation of blocks (mockgpu/amd/emu/native.py) gives what the numpy translation gives: the same
registers, memory and faults, under partial EXEC and with several waves per work-group; it runs where it should
(wide batches, ending gfx1100 wave32 blocks) and the numpy path alone still works."""
import os

import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.amd.emu import native

from .asmrun import run

pytestmark = pytest.mark.skipif(not native.compiler(), reason="no C compiler: the emulator runs numpy only")

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "opencl", "hsaco", "vadd.hsaco")

# covered operations (native.COVERED) over the four per-lane inputs v10..v13 and the scalars s4..s7, results folded
# into v1 and v3 (asmrun's outputs); exec_lo changes midway so that the blends of inactive lanes are checked
BODY = """
  s_add_u32 s20, s4, s5
  s_addc_u32 s21, s6, s7
  s_cselect_b32 s22, 7, 9
  s_and_b32 s23, s4, 0xffff
  s_mul_i32 s24, s23, s5
  s_lshl_b32 s25, s6, 3
  s_sub_u32 s26, s5, s4
  s_or_b32 s27, s25, s26
  v_add_nc_u32 v1, v10, v11
  v_sub_nc_u32 v3, v12, v13
  v_xor_b32 v1, v1, s20
  v_lshlrev_b32 v3, 5, v3
  v_ashrrev_i32 v4, 3, v10
  v_add3_u32 v1, v1, v4, s24
  v_mul_lo_u32 v3, v3, v11
  v_lshlrev_b64 v[4:5], 3, v[10:11]
  v_add_co_u32 v6, vcc_lo, v4, v12
  v_add_co_ci_u32_e32 v7, vcc_lo, v5, v13, vcc_lo
  v_add_co_ci_u32_e32 v15, vcc_lo, 0, v10, vcc_lo
  v_sub_co_u32 v8, s28, v6, v13
  v_sub_co_ci_u32_e64 v9, s29, v7, v10, s28
  v_mbcnt_lo_u32_b32 v14, -1, 0
  s_and_b32 exec_lo, exec_lo, 0x5a5a5a5a
  v_add_f32 v1, v1, v10
  v_mul_f32 v3, v3, v11
  v_fma_f32 v3, v3, v12, v13
  v_max_u32 v6, v6, s27
  s_mov_b32 exec_lo, s30
  v_add_nc_u32 v1, v1, v6
  v_xor_b32 v1, v1, v8
  v_add3_u32 v1, v1, v15, s29
  v_add3_u32 v3, v3, v9, v7
  v_add_nc_u32 v3, v3, v14
  v_add_nc_u32 v3, v3, s22
  v_or_b32 v3, v3, s21
"""


@pytest.fixture
def force_native(monkeypatch):
  """Native blocks for every batch (even one wave); yields the count of native batches run before."""
  monkeypatch.setattr(native, "MIN_WAVES", 0)
  monkeypatch.setattr(native, "ENABLED", True)
  return native.RUNS


def _inputs(n, seed):
  rng = np.random.default_rng(seed)
  ins = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
  ins[0][:4] = [0, 0xFFFFFFFF, 0x80000000, 0x7F800001]    # carries, signs and a NaN among the inputs
  return ins


@pytest.mark.parametrize("threads,grid", [(32, 1), (64, 3), (48, 2)])
def test_native_block_matches_numpy(monkeypatch, force_native, threads, grid):
  ins = _inputs(max(32, threads), threads)
  scalars = (0xFFFFFFF0, 0x12345678, 0xFFFFFFFF, 1)
  native_out = run(BODY, "gfx1100", ins=ins, scalars=scalars, threads=threads, grid=(grid, 1, 1))
  assert native.RUNS > force_native, "the block did not run natively"
  monkeypatch.setattr(native, "ENABLED", False)
  before = native.RUNS
  numpy_out = run(BODY, "gfx1100", ins=ins, scalars=scalars, threads=threads, grid=(grid, 1, 1))
  assert native.RUNS == before
  for a, b in zip(native_out, numpy_out): np.testing.assert_array_equal(a, b)
  assert numpy_out[0].any() and numpy_out[1].any()


def test_uncovered_instruction_stays_numpy(force_native):
  before = native.RUNS
  v1, _ = run("v_cvt_f32_u32 v1, v10", "gfx1100", ins=[np.arange(32, dtype=np.uint32)])
  np.testing.assert_array_equal(v1.view(np.float32), np.arange(32, dtype=np.float32))
  assert native.RUNS == before


def test_wide_vadd_through_the_mock_gpu_matches_numpy_and_runs_natively(monkeypatch):
  import hcq
  monkeypatch.setattr(native, "ENABLED", True)
  n = 192 * 180                     # >= 1,080 waves: wide enough for the native path; groups of 48: partial waves
  with open(FIXTURE, "rb") as f: blob = f.read()
  with hcq.open("MOCK+AMD") as dev:
    prog = dev.load(blob, "vadd")
    rng = np.random.default_rng(1)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    a[:3] = [np.inf, np.nan, 1e-40]      # a denormal input is kept (the descriptor's f32 mode)
    da, db, dc = dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n)
    dev.copyin(da, a)
    dev.copyin(db, b)
    for enabled, local in ((True, 48), (False, 48), (True, 64)):
      monkeypatch.setattr(native, "ENABLED", enabled)
      dev.copyin(dc, np.full(n, 7, np.float32))
      before = native.RUNS
      prog(da, db, dc, global_size=(n // local,), local_size=(local,), wait=True)
      assert (native.RUNS > before) == enabled
      c = np.frombuffer(dev.copyout(dc), np.float32)
      np.testing.assert_array_equal(c.view(np.uint32), (a + b).view(np.uint32))


def test_native_fault_names_the_address_as_numpy_does(monkeypatch, force_native):
  body = """
  s_mov_b32 s20, 0
  s_mov_b32 s21, 0x100
  v_mov_b32 v4, 0
  global_load_b32 v1, v4, s[20:21] offset:16
  """
  errors = []
  for enabled in (True, False):
    monkeypatch.setattr(native, "ENABLED", enabled)
    before = native.RUNS
    with pytest.raises(GPUFault) as e:
      run(body, "gfx1100")
    assert (native.RUNS > before) == enabled
    assert e.value.kind == "page fault" and e.value.address == 0x100_0000_0010
    errors.append(str(e.value))
  assert errors[0] == errors[1] and "global load of 4 bytes" in errors[0]


def test_native_blocks_run_for_a_subset_of_the_waves(monkeypatch, force_native):
  """Work-group 1 branches away from the others: the two ending blocks each run for some of the waves (the
  scheduler's wave subset, idx), natively, and give what numpy gives."""
  body = """
  s_cmp_eq_u32 s8, 1
  s_cbranch_scc1 .Lother
  v_add_nc_u32 v1, v10, v11
  v_mov_b32 v3, s8
  s_branch .Ljoin
.Lother:
  v_sub_nc_u32 v1, v10, v11
  v_add_nc_u32 v3, 7, v12
.Ljoin:
  """
  ins = _inputs(64, 5)
  got = run(body, "gfx1100", ins=ins, threads=64, grid=(3, 1, 1))
  assert native.RUNS >= force_native + 2, "the ending blocks did not run natively"
  monkeypatch.setattr(native, "ENABLED", False)
  want = run(body, "gfx1100", ins=ins, threads=64, grid=(3, 1, 1))
  for a, b in zip(got, want): np.testing.assert_array_equal(a, b)
