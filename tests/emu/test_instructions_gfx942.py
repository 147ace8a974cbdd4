"""CDNA3 (gfx942, wave64) instructions, assembled by llvm-mc-19 -mcpu=gfx942, run on the emulator (waves of 64
lanes) and compared with values computed here from the "AMD Instinct MI300 ISA Reference Guide" definitions (section
names cited per test), independently of the emulator's code. Harness: asmrun.py (v10..v13 = per-lane inputs,
s4..s7 = scalars, v1 and v3 of all 64 lanes come back)."""
import numpy as np
import pytest

from .asmrun import run

pytestmark = [pytest.mark.tools("llvm-mc-19")]
LANES = np.arange(64, dtype=np.uint64)


def mask64(bits) -> int:
  return int(sum(int(b) << i for i, b in enumerate(bits)))


def test_vopc_writes_64_lane_vcc_and_cndmask_reads_it():
  """MI300 ISA "Vector Compare (VOPC)": VOPC writes one bit per lane of the 64-bit VCC; V_CNDMASK_B32 selects by
  VCC[lane]; a VOP3 compare writes an SGPR pair."""
  rng = np.random.default_rng(1)
  a, b = rng.integers(0, 100, 64).astype(np.uint32), rng.integers(0, 100, 64).astype(np.uint32)
  v1, v3 = run("""
    v_cmp_gt_u32 vcc, v10, v11
    v_cndmask_b32 v1, 7, 9, vcc
    v_cmp_lt_u32_e64 s[20:21], v10, v11
    s_mov_b64 s[22:23], vcc
    v_mov_b32 v3, s22
    v_writelane_b32 v3, s23, 1
    v_writelane_b32 v3, s20, 2
    v_writelane_b32 v3, s21, 3
  """, "gfx942", ins=[a, b])
  np.testing.assert_array_equal(v1, np.where(a > b, 9, 7))
  gt, lt = mask64(a > b), mask64(a < b)
  assert list(v3[:4]) == [gt & 0xFFFFFFFF, gt >> 32, lt & 0xFFFFFFFF, lt >> 32]


def test_saveexec_b64_divergence_in_the_upper_half():
  """MI300 ISA S_AND_SAVEEXEC_B64: D = EXEC; EXEC = S0 & EXEC; SCC = EXEC != 0; S_ANDN2_B64 / S_OR_B64 on EXEC
  restore it; S_CBRANCH_EXECZ jumps when no lane is active."""
  v1, v3 = run("""
    v_mov_b32 v1, 1
    v_cmp_le_u32 vcc, 40, v0
    s_and_saveexec_b64 s[20:21], vcc
    s_cbranch_execz skip
    v_mov_b32 v1, 2
    v_cmp_gt_u32 vcc, 50, v0
    s_and_saveexec_b64 s[24:25], vcc
    v_add_u32 v1, 10, v1
    s_or_b64 exec, exec, s[24:25]
  skip:
    s_or_b64 exec, exec, s[20:21]
    s_mov_b64 exec, 0
    s_cbranch_execz done
    v_mov_b32 v1, 99
  done:
    s_mov_b64 exec, -1
    s_bcnt1_i32_b64 s26, s[20:21]
    s_ff1_i32_b64 s27, s[24:25]
    v_mov_b32 v3, s26
    v_writelane_b32 v3, s27, 1
  """, "gfx942")
  lane = np.arange(64)
  np.testing.assert_array_equal(v1, np.where(lane < 40, 1, np.where(lane < 50, 12, 2)))
  assert v3[0] == 64 and v3[1] == 40       # saved EXEC: all 64 lanes; second saved EXEC: lanes 40..63, first 40


def test_readlane_readfirstlane_mbcnt_over_64_lanes():
  """MI300 ISA V_READLANE_B32 (lane select S1[5:0]), V_READFIRSTLANE_B32 (the lowest active lane),
  V_MBCNT_LO_U32_B32 / V_MBCNT_HI_U32_B32 (bits of S0 below the lane within EXEC_LO / EXEC_HI, plus S1)."""
  vals = (np.arange(64, dtype=np.uint32) * 3 + 5)
  v1, v3 = run("""
    s_mov_b32 s20, 53
    v_readlane_b32 s21, v10, s20
    v_cmp_le_u32 vcc, 37, v0
    s_and_saveexec_b64 s[22:23], vcc
    v_readfirstlane_b32 s24, v10
    s_mov_b64 exec, -1
    v_mbcnt_lo_u32_b32 v1, s5, 0
    v_mbcnt_hi_u32_b32 v1, s6, v1
    v_mov_b32 v3, s21
    v_writelane_b32 v3, s24, 1
  """, "gfx942", ins=[vals], scalars=(0, 0xAAAAAAAA, 0x0000FFFF, 0))
  mask = 0x0000FFFF_AAAAAAAA
  expect = [bin(mask & ((1 << l) - 1)).count("1") for l in range(64)]
  np.testing.assert_array_equal(v1, expect)
  assert v3[0] == vals[53] and v3[1] == vals[37]


def test_vop2_carry_chain_writes_and_reads_64_lane_vcc():
  """MI300 ISA V_ADD_CO_U32 (VCC[lane] = carry out), V_ADDC_CO_U32 (carry in from VCC), V_SUB_CO_U32,
  V_SUBB_CO_U32: 64-bit per-lane arithmetic in 32-bit halves."""
  rng = np.random.default_rng(2)
  a, b, c, d = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(4))
  a[:8] = 0xFFFFFFFF
  v1, v3 = run("""
    v_add_co_u32 v4, vcc, v10, v11
    v_addc_co_u32 v5, vcc, v12, v13, vcc
    v_sub_co_u32 v6, vcc, v4, v13
    v_subb_co_u32 v7, vcc, v5, v12, vcc
    v_xor_b32 v1, v4, v6
    v_xor_b32 v3, v5, v7
  """, "gfx942", ins=[a, b, c, d])
  x = (c.astype(object) << 32 | a.astype(object)) + (d.astype(object) << 32 | b.astype(object))
  x &= (1 << 64) - 1
  y = (x - (c.astype(object) << 32 | d.astype(object))) & ((1 << 64) - 1)
  np.testing.assert_array_equal(v1, np.array([(p ^ q) & 0xFFFFFFFF for p, q in zip(x, y)], np.uint32))
  np.testing.assert_array_equal(v3, np.array([((p ^ q) >> 32) & 0xFFFFFFFF for p, q in zip(x, y)], np.uint32))


def test_sdwa_selects_and_destination_fields():
  """MI300 ISA "SDWA": SRC*_SEL picks a byte/word (sign-extended with SEXT), DST_SEL/DST_UNUSED place the result:
  UNUSED_PRESERVE keeps the other bits; VOPC SDWA writes SDST when SD is set."""
  rng = np.random.default_rng(3)
  a, b = (rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32) for _ in range(2))
  a[:4] = [0x00000000, 0x00010000, 0xFFFF0000, 0x12340000]
  v1, v3 = run("""
    v_mov_b32 v1, v12
    v_add_u32_sdwa v1, sext(v10), v11 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:WORD_0
    v_cmp_ne_u16_sdwa s[20:21], v10, v3 src0_sel:WORD_1 src1_sel:DWORD
    v_cndmask_b32 v3, 0, 1, s[20:21]
  """, "gfx942", ins=[a, b, np.full(64, 0xCAFEF00D, np.uint32)])
  byte1 = ((a >> 8) & 0xFF).astype(np.int64)
  byte1 = np.where(byte1 >= 128, byte1 - 256, byte1)
  s = (byte1 + (b & 0xFFFF)) & 0xFFFF
  np.testing.assert_array_equal(v1, (np.uint32(0x0000F00D) | (s.astype(np.uint32) << 16)))
  np.testing.assert_array_equal(v3, ((a >> 16) != 0).astype(np.uint32))


def test_packed_f32_math_on_register_pairs():
  """MI300 ISA V_PK_FMA_F32 / V_PK_MUL_F32 / V_PK_ADD_F32: D[31:0] from the dwords OP_SEL picks of each source
  pair, D[63:32] from those OP_SEL_HI picks; NEG_LO/NEG_HI negate a source of the low/high result."""
  rng = np.random.default_rng(4)
  a, b, c, d = (rng.random(64, dtype=np.float32) * 4 - 2 for _ in range(4))
  v1, v3 = run("""
    v_pk_fma_f32 v[4:5], v[10:11], v[12:13], v[10:11] op_sel:[1,0,0] op_sel_hi:[0,1,1] neg_hi:[0,0,1]
    v_pk_mul_f32 v[6:7], v[10:11], v[12:13]
    v_pk_add_f32 v[6:7], v[6:7], v[4:5]
    v_mov_b32 v1, v6
    v_mov_b32 v3, v7
  """, "gfx942", ins=[a, b, c, d])
  f64 = np.float64
  lo_fma = (b.astype(f64) * c + a).astype(np.float32)         # lo: S0 hi dword (b), S1 lo (c), S2 lo (a)
  hi_fma = (a.astype(f64) * d - b).astype(np.float32)         # hi: S0 lo (a), S1 hi (d), -S2 hi (b)
  np.testing.assert_array_equal(v1.view(np.float32), (a * c) + lo_fma)
  np.testing.assert_array_equal(v3.view(np.float32), (b * d) + hi_fma)


def test_fmac_f64_and_lshl_add_u64():
  """MI300 ISA V_FMAC_F64 (D = S0 * S1 + D, fused) and V_LSHL_ADD_U64 (D = (S0.u64 << S1[2:0]) + S2.u64)."""
  rng = np.random.default_rng(5)
  x = rng.random(32) * 3
  y = rng.random(32) - 0.5
  lo = np.concatenate([x.view(np.uint32)[0::2], np.zeros(32, np.uint32)])
  hi = np.concatenate([x.view(np.uint32)[1::2], np.zeros(32, np.uint32)])
  ylo = np.concatenate([y.view(np.uint32)[0::2], np.zeros(32, np.uint32)])
  yhi = np.concatenate([y.view(np.uint32)[1::2], np.zeros(32, np.uint32)])
  v1, v3 = run("""
    v_mov_b32 v4, v12
    v_mov_b32 v5, v13
    v_fmac_f64 v[4:5], v[10:11], v[10:11]
    v_lshl_add_u64 v[6:7], v[10:11], 3, v[12:13]
    v_xor_b32 v1, v4, v6
    v_xor_b32 v3, v5, v7
  """, "gfx942", ins=[lo, hi, ylo, yhi])
  from fractions import Fraction
  fma = np.array([float(Fraction(float(p)) * Fraction(float(p)) + Fraction(float(q))) for p, q in zip(x, y)])
  fma_bits = np.concatenate([fma, np.zeros(32)]).view(np.uint64)
  xs = (lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(32))
  ys = (ylo.astype(np.uint64) | yhi.astype(np.uint64) << np.uint64(32))
  shl = (xs << np.uint64(3)) + ys
  expect = fma_bits ^ shl
  np.testing.assert_array_equal(v1, (expect & np.uint64(0xFFFFFFFF)).astype(np.uint32))
  np.testing.assert_array_equal(v3, (expect >> np.uint64(32)).astype(np.uint32))


def test_dpp_whole_wave_shifts_and_bpermute_across_64_lanes():
  """MI300 ISA "DPP": wave_shr:1 (lane l reads lane l-1 of the wave), row_bcast:15 (lane 15 of each row to the
  next row, rows 1-3 per ROW_MASK), and DS_BPERMUTE_B32 (lane l reads lane addr[l]/4 mod 64)."""
  vals = np.arange(64, dtype=np.uint32) * 7 + 1
  v1, v3 = run("""
    v_mov_b32 v1, 5
    v_mov_b32_dpp v1, v10 wave_shr:1 row_mask:0xf bank_mask:0xf
    v_mov_b32 v3, 0
    v_mov_b32_dpp v3, v10 row_bcast:15 row_mask:0xa bank_mask:0xf
    v_sub_u32 v4, 63, v0
    v_lshlrev_b32 v4, 2, v4
    ds_bpermute_b32 v5, v4, v10
    s_waitcnt lgkmcnt(0)
    v_add_u32 v3, v3, v5
  """, "gfx942", ins=[vals])
  lane = np.arange(64)
  np.testing.assert_array_equal(v1, np.where(lane == 0, 5, vals[np.maximum(lane - 1, 0)]))
  bcast = np.where(np.isin(lane // 16, [1, 3]), vals[np.maximum(lane // 16 * 16 - 1, 0)], 0)
  np.testing.assert_array_equal(v3, bcast + vals[63 - lane])


def test_partial_wave_exec_and_ds_read2_write():
  """A work-group of 100 work-items: the second wave has lanes 0-35 (EXEC = 2^36 - 1 at start, MI300 ISA
  "Initial wave state"); ds_write_b32 / ds_read2_b32 (MI300 ISA DS_READ2_B32: two dwords at ADDR + OFFSET0*4
  and ADDR + OFFSET1*4) move data between the waves across s_barrier."""
  v1, v3 = run("""
    v_lshlrev_b32 v4, 2, v0
    v_add_u32 v5, 1000, v0
    ds_write_b32 v4, v5
    s_waitcnt lgkmcnt(0)
    s_barrier
    ds_read2_b32 v[6:7], v4 offset1:1
    s_waitcnt lgkmcnt(0)
    v_xor_b32 v1, v6, v7
    s_bcnt1_i32_b64 s20, exec
    v_mov_b32 v3, s20
  """, "gfx942", threads=100)
  ids = np.arange(100)
  nxt = np.where(ids < 99, 1001 + ids, 0)
  np.testing.assert_array_equal(v1, (1000 + ids) ^ nxt)
  np.testing.assert_array_equal(v3, np.where(ids < 64, 64, 36))


def test_16bit_results_clear_the_high_half_but_mac_keeps_it():
  """gfx9 16-bit VALU results: V_ADD_U16 / V_SUBREV_U16 write the low half and clear the high half; the
  accumulating V_MAC_F16 (D = S0 * S1 + D, product rounded first) keeps it (LLVM
  GCNSubtarget::zeroesHigh16BitsOfDest); V_MOV_B64 copies a register pair (MI300 ISA V_MOV_B64)."""
  rng = np.random.default_rng(7)
  a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
  b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
  h = (rng.random(64) * 4 - 2).astype(np.float16).view(np.uint16).astype(np.uint32)
  k = (rng.random(64) * 4 - 2).astype(np.float16).view(np.uint16).astype(np.uint32)
  acc = (rng.random(64) * 4 - 2).astype(np.float16).view(np.uint16).astype(np.uint32) | np.uint32(0xBEEF0000)
  v1, v3 = run("""
    v_mov_b32 v1, -1
    v_add_u16 v1, v10, v11
    v_subrev_u16 v4, v10, v11
    v_lshlrev_b32 v4, 16, v4
    v_or_b32 v1, v1, v4
    v_mov_b32 v3, v13
    v_mac_f16 v3, v12, v12
    v_mov_b64 v[6:7], v[10:11]
    v_xor_b32 v6, v6, v10
    v_xor_b32 v7, v7, v11
    v_or_b32 v3, v3, v6
    v_or_b32 v3, v3, v7
  """, "gfx942", ins=[a, b, h, acc])
  lo = (a + b) & 0xFFFF
  rev = (b - a) & 0xFFFF
  np.testing.assert_array_equal(v1, lo | (rev << 16))
  f16 = np.float16
  mac = (h.astype(np.uint16).view(f16) * h.astype(np.uint16).view(f16) + (acc & 0xFFFF).astype(np.uint16).view(f16))
  np.testing.assert_array_equal(v3, mac.view(np.uint16).astype(np.uint32) | np.uint32(0xBEEF0000))


def test_accvgprs_moves_and_memory_data():
  """MI300 ISA V_ACCVGPR_WRITE_B32 / V_ACCVGPR_READ_B32 / V_ACCVGPR_MOV_B32, and memory instructions whose data and
  destination are AccVGPRs (ACC = 1): a value goes VGPR -> AGPR -> AGPR -> LDS -> AGPR -> global -> VGPR."""
  vals = np.arange(64, dtype=np.uint32) * 11 + 3
  v1, v3 = run("""
    v_accvgpr_write_b32 a3, v10
    v_accvgpr_write_b32 a4, 7
    v_accvgpr_mov_b32 a5, a3
    v_lshlrev_b32 v4, 2, v0
    ds_write_b32 v4, a5
    s_waitcnt lgkmcnt(0)
    ds_read_b32 a6, v4
    s_waitcnt lgkmcnt(0)
    global_store_dword v4, a6, s[2:3] offset:1024
    s_waitcnt vmcnt(0)
    global_load_dword a7, v4, s[2:3] offset:1024
    s_waitcnt vmcnt(0)
    v_accvgpr_read_b32 v1, a7
    v_accvgpr_read_b32 v3, a4
    v_add_u32 v3, v3, v10
  """, "gfx942", ins=[vals], memory=np.zeros(64, np.uint32))[:2]
  np.testing.assert_array_equal(v1, vals)
  np.testing.assert_array_equal(v3, vals + 7)
