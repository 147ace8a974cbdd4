"""RDNA4 (gfx1200, wave32) instructions that RDNA3 does not have or encodes differently, assembled by llvm-mc-19
-mcpu=gfx1200, run on the emulator and compared with values computed here from the "AMD RDNA4 Instruction Set
Architecture" reference guide (sections cited per test). Harness: asmrun.py."""
import numpy as np
import pytest

from .asmrun import run

pytestmark = [pytest.mark.tools("llvm-mc-19")]


def test_salu_64bit_add_and_renamed_carry_forms():
  """RDNA4 ISA "SALU": S_ADD_NC_U64 (64-bit add, SCC unchanged), S_ADD_CO_U32 / S_ADD_CO_CI_U32 (RDNA3's
  S_ADD_U32 / S_ADDC_U32: carry in SCC), S_ADD_CO_I32 (SCC = signed overflow)."""
  a, b = 0x89ABCDEF_FFFFFFF0, 0x01234567_00000020
  v1, v3 = run("""
    s_cmp_eq_u32 0, 0
    s_add_nc_u64 s[20:21], s[4:5], s[6:7]
    s_cselect_b32 s26, 1, 0
    s_add_co_u32 s22, s4, s6
    s_add_co_ci_u32 s23, s5, s7
    s_add_co_i32 s24, s5, s5
    s_cselect_b32 s25, 1, 0
    v_mov_b32 v1, s20
    v_writelane_b32 v1, s21, 1
    v_writelane_b32 v1, s22, 2
    v_writelane_b32 v1, s23, 3
    v_writelane_b32 v1, s24, 4
    v_writelane_b32 v1, s25, 5
    v_writelane_b32 v1, s26, 6
  """, "gfx1200", scalars=(a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32))
  s = (a + b) & (2**64 - 1)
  dbl = (2 * (a >> 32)) & 0xFFFFFFFF
  overflow = int(not -2**31 <= 2 * ((a >> 32) - 2**32 if a >> 63 else a >> 32) < 2**31)
  assert list(v1[:7]) == [s & 0xFFFFFFFF, s >> 32, s & 0xFFFFFFFF, s >> 32, dbl, overflow, 1]


def test_salu_float():
  """RDNA4 ISA "SALU floating point": S_CVT_F32_U32, S_CVT_F32_I32, S_ADD_F32, S_MUL_F32, S_CVT_U32_F32
  (round toward zero, saturating)."""
  v1, v3 = run("""
    s_cvt_f32_u32 s20, s4
    s_cvt_f32_i32 s21, s5
    s_add_f32 s22, s20, s6
    s_mul_f32 s23, s22, s21
    s_cvt_u32_f32 s24, s6
    v_mov_b32 v1, s20
    v_writelane_b32 v1, s21, 1
    v_writelane_b32 v1, s22, 2
    v_writelane_b32 v1, s23, 3
    v_writelane_b32 v1, s24, 4
  """, "gfx1200", scalars=(3_000_000_001, -7 & 0xFFFFFFFF, np.float32(2.75).view(np.uint32), 0))
  f = np.float32
  a, b = f(3_000_000_001), f(-7)
  c = (a + f(2.75))
  assert list(v1[:5].view(np.float32)[:4]) == [a, b, c, c * b] and v1[4] == 2


def test_scalar_sub_dword_loads():
  """RDNA4 ISA "Scalar memory": S_LOAD_U8/I8/U16/I16 load one byte or short, zero- or sign-extended."""
  mem = np.array([0x80F1_7F02, 0x1234_ABCD], np.uint32)
  base = 16 * 32
  v1, v3, _ = run(f"""
    s_load_u8 s20, s[2:3], {base + 1}
    s_load_i8 s21, s[2:3], {base + 1}
    s_load_u16 s22, s[2:3], {base + 2}
    s_load_i16 s23, s[2:3], {base + 2}
    s_load_i16 s24, s[2:3], {base + 4}
    s_wait_kmcnt 0
    v_mov_b32 v1, s20
    v_writelane_b32 v1, s21, 1
    v_writelane_b32 v1, s22, 2
    v_writelane_b32 v1, s23, 3
    v_writelane_b32 v1, s24, 4
  """, "gfx1200", memory=mem)
  assert list(v1[:5]) == [0x7F, 0x7F, 0x80F1, 0xFFFF80F1, 0xFFFFABCD]


def test_split_barrier_orders_lds_between_waves():
  """RDNA4 ISA S_BARRIER_SIGNAL / S_BARRIER_WAIT: a wave waits until every wave of the work-group has signalled.
  Wave 1 first runs a delay loop placed after the barrier code, so wave 0 reaches the barrier long before wave 1
  has stored; each wave then reads what the other stored."""
  v1, v3 = run("""
    v_readfirstlane_b32 s20, v0
    v_lshlrev_b32 v4, 2, v0
    v_mul_u32_u24 v5, 3, v0
    v_add_nc_u32 v5, 1, v5
    s_cmp_ge_u32 s20, 32
    s_cbranch_scc1 delay
  store:
    ds_store_b32 v4, v5
    s_wait_dscnt 0
    s_barrier_signal -1
    s_barrier_wait -1
    v_xor_b32 v6, 32, v0
    v_lshlrev_b32 v6, 2, v6
    ds_load_b32 v1, v6
    s_wait_dscnt 0
    s_branch end
  delay:
    s_mov_b32 s21, 20
  loop:
    s_sub_co_i32 s21, s21, 1
    s_cmp_lg_u32 s21, 0
    s_cbranch_scc1 loop
    s_branch store
  end:
  """, "gfx1200", threads=64)
  ids = np.arange(64)
  np.testing.assert_array_equal(v1, 3 * (ids ^ 32) + 1)


def test_num_min_max_and_med3():
  """RDNA4 ISA V_MAX_NUM_F32 / V_MIN_NUM_F32 / V_MED3_NUM_F32 (IEEE 754-2019 maximumNumber/minimumNumber: a NaN
  operand loses to a number)."""
  rng = np.random.default_rng(6)
  a, b, c = (rng.random(32, dtype=np.float32) * 10 - 5 for _ in range(3))
  a[:3] = np.nan
  b[3:5] = np.nan
  v1, v3 = run("""
    v_max_num_f32 v1, v10, v11
    v_min_num_f32 v4, v10, v11
    v_med3_num_f32 v3, v11, v12, v4
    v_sub_f32 v1, v1, v4
  """, "gfx1200", ins=[a, b, c])
  mx, mn = np.fmax(a, b), np.fmin(a, b)
  np.testing.assert_array_equal(v1.view(np.float32), mx - mn)
  med = np.fmax(np.fmin(b, c), np.fmin(np.fmax(b, c), mn))
  np.testing.assert_array_equal(v3.view(np.float32), med)


def test_vglobal_24bit_offsets_and_returning_atomic():
  """RDNA4 ISA "VGLOBAL": a signed 24-bit IOFFSET (past RDNA3's 13 bits, and negative); TH:TH_ATOMIC_RETURN makes
  an atomic return the pre-op value."""
  mem = np.arange(2048, dtype=np.uint32) * 5
  base = 16 * 32                                        # byte offset of `memory` in the input buffer
  v1, v3, after = run(f"""
    v_lshlrev_b32 v4, 2, v0
    global_load_b32 v1, v4, s[2:3] offset:{base + 0x1100}
    s_add_nc_u64 s[20:21], s[2:3], {base + 0x1F00}
    global_load_b32 v5, v4, s[20:21] offset:-0x1E00
    v_mov_b32 v6, 1
    global_atomic_add_u32 v3, v4, v6, s[2:3] offset:{base} th:TH_ATOMIC_RETURN
    s_wait_loadcnt 0
    v_add_nc_u32 v3, v3, v5
  """, "gfx1200", memory=mem)
  lane = np.arange(32)
  np.testing.assert_array_equal(v1, mem[0x1100 // 4 + lane])
  np.testing.assert_array_equal(v3, mem[lane] + mem[0x100 // 4 + lane])
  np.testing.assert_array_equal(after[:32], mem[:32] + 1)


def test_workgroup_ids_in_ttmp9_ttmp7():
  """RDNA4 architected work-group ids (LLVM AMDGPUUsage, "Initial Kernel Execution State" for GFX12): TTMP9 = X,
  TTMP7 = Y | Z << 16. Each group of a 3x2x2 grid stores its ids at its own slot."""
  mem = np.zeros(2 * 12, np.uint32)
  base = 16 * 32
  _, _, after = run(f"""
    s_and_b32 s20, ttmp7, 0xffff
    s_lshr_b32 s21, ttmp7, 16
    s_mul_i32 s20, s20, 3
    s_mul_i32 s21, s21, 6
    s_add_co_i32 s20, s20, s21
    s_add_co_i32 s20, s20, ttmp9
    s_lshl_b32 s20, s20, 3
    s_add_co_i32 s20, s20, {base}
    v_cmp_eq_u32 vcc_lo, 0, v0
    s_and_saveexec_b32 s22, vcc_lo
    v_mov_b32 v4, s20
    v_mov_b32 v6, ttmp9
    v_mov_b32 v7, ttmp7
    global_store_b64 v4, v[6:7], s[2:3]
    s_mov_b32 exec_lo, s22
  """, "gfx1200", memory=mem, grid=(3, 2, 2))
  ids = [(x, y, z) for z in range(2) for y in range(2) for x in range(3)]
  expect = np.array([v for x, y, z in ids for v in (x, y | z << 16)], np.uint32)
  np.testing.assert_array_equal(after, expect)
