"""The backend's passes on their own: magic-number division, s_waitcnt placement (a counter simulation over the
final code), live intervals across loops, and the encoder against llvm-mc-19."""
from __future__ import annotations

import random

import numpy as np
import pytest

import amd_kernels

pytestmark = pytest.mark.tools("llvm-mc-19")
from hcq.compiler import examples
from hcq.compiler.backend.amd.isel_divmod import magic_u32
from hcq.compiler.backend.amd.isel_mir import Imm, MInst, Spec, VReg
from hcq.compiler.backend.amd.regalloc import allocate, live_intervals
from hcq.autogen.isa.llvm_oracle import assemble as llvm_mc_assemble
from hcq.compiler.isa.amd.asm import assemble as text_assemble
from hcq.compiler.backend.amd.render import GFX1100_TARGET, assemble, compile_linear
from hcq.compiler.lower import lower


@pytest.mark.parametrize("nmax", [2**31 - 1, 2**32 - 1, 1000, 65535])
def test_magic_division_is_exact(nmax):
  rng = random.Random(nmax)
  divisors = list(range(2, 300)) + [641, 1000, 6700417, 2**31 - 1, 2**31 + 1, 0xFFFFFFFF, 3 * 2**20] + \
      [rng.randrange(2, 2**32) for _ in range(200)]
  ns = np.array(sorted({0, 1, nmax, nmax - 1, *[rng.randrange(0, nmax + 1) for _ in range(3000)]}), np.uint64)
  found = 0
  for d in divisors:
    mg = magic_u32(d, nmax)
    if mg is None: continue
    found += 1
    m, s = mg
    assert 0 < m < 2**32
    near = np.array([x for k in range(1, 4) for x in (k * d - 1, k * d) if x <= nmax], np.uint64)
    n = np.concatenate([ns, near])
    q = ((n * np.uint64(m)) >> np.uint64(32)) >> np.uint64(s)   # v_mul_hi_u32 then v_lshrrev_b32
    np.testing.assert_array_equal(q, n // np.uint64(d), err_msg=f"d={d} m={m} s={s}")
  assert found > len(divisors) // 2


def _waitcnt_fields(simm16: int):
  return (simm16 >> 10) & 0x3F, (simm16 >> 4) & 0x3F


def _phys(r: VReg):
  return {(r.cls, r.phys + k) for k in range(r.n)}


def check_waits(code: list[MInst]):
  """Walk the final code with the hardware's counters: a register a load writes may be touched only after a
  s_waitcnt guarantees that load is done (VM_CNT in order; LGKM_CNT in order without scalar loads pending)."""
  vm, lgkm = [], []
  for m in code:
    if m.name == "s_waitcnt":
      v, l = _waitcnt_fields(m.mods["simm16"])
      vm = vm[len(vm) - v:] if v < len(vm) else vm
      if l < len(lgkm): lgkm = [] if any(s for _, s in lgkm) and l == 0 else lgkm[len(lgkm) - l:]
      assert not (any(s for _, s in lgkm) and l < 63 and l > 0), "counted LGKM wait with scalar loads pending"
      continue
    touched = set()
    for r in m.regs_used() + m.regs_defined(): touched |= _phys(r)
    for regs in vm: assert not (regs & touched), f"{m!r} touches a pending global load's register"
    for regs, _ in lgkm:
      assert not (regs and regs & touched), f"{m!r} touches a pending LDS/scalar load's register"
    if m.name in ("LABEL",) or m.name.startswith(("s_branch", "s_cbranch")):
      assert not vm and not any(r for r, _ in lgkm), f"loads pending at {m!r}"
    if m.name == "s_barrier": assert not lgkm, "LDS operations pending at s_barrier"
    if m.name.startswith(("global_load", "scratch_load")): vm.append(_phys(m.defs["vdst"]))
    elif m.name.startswith("ds_load"): lgkm.append((_phys(m.defs["vdst"]), False))
    elif m.name.startswith("ds_store"): lgkm.append((set(), False))
    elif m.name.startswith("s_load"): lgkm.append((_phys(m.defs["sdata"]), True))


SINKS = [(f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in amd_kernels.ALL]


@pytest.mark.parametrize("make", [f for _, f in SINKS], ids=[n for n, _ in SINKS])
def test_waits_cover_every_load(make):
  c = compile_linear(lower(make().sink, GFX1100_TARGET))
  check_waits(c.code)


def test_waits_are_counted_not_all_zero():
  """In the unrolled tiled matmul the LDS loads are hoisted ahead of their uses, and waited for with counts > 0,
  one wait serving several FMAs (fewer waits than FMAs)."""
  c = compile_linear(lower(examples.matmul_tiled_kernel(64, 8), GFX1100_TARGET))
  waits = [m.mods["simm16"] for m in c.code if m.name == "s_waitcnt"]
  fmas = [m for m in c.code if m.name == "v_add_f32_e64"]
  assert fmas and len(waits) < len(fmas)
  assert any(0 < _waitcnt_fields(w)[1] < 63 for w in waits)


def test_live_interval_spans_loop_for_loop_carried_values():
  a, b, t = VReg("v"), VReg("v"), VReg("v")
  code = [MInst("v_mov_b32_e32", {"vdst": a}, {"src0": Imm(0)}),          # 0 a defined before the loop
          MInst("LABEL", label="head"),                                   # 1
          MInst("v_add_nc_u32_e64", {"vdst": t}, {"src0": a, "src1": Imm(1)}),   # 2 t lives only inside
          MInst("v_mov_b32_e32", {"vdst": a}, {"src0": t}),               # 3
          MInst("v_mov_b32_e32", {"vdst": b}, {"src0": a}),               # 4 b defined in the loop ...
          MInst("s_cbranch_scc1", target="head"),                         # 5
          MInst("LABEL", label="exit"),                                   # 6
          MInst("global_store_b32", {}, {"addr": b, "data": b, "saddr": VReg("s", 2, fixed=0)})]   # 7 ... read after
  iv = live_intervals(code, [("head", "exit")])
  assert iv[a] == [0, 6] and iv[t] == [2, 3] and iv[b] == [1, 7]
  alloc = allocate(code, [("head", "exit")])
  assert len({a.phys, b.phys}) == 2 and t.phys not in (a.phys, b.phys) and alloc.vgprs == 3


def test_encoder_matches_llvm_mc():
  v = lambda n: VReg("v", 1, fixed=n)            # noqa: E731
  s = lambda n, k=1: VReg("s", k, fixed=n)       # noqa: E731
  cases = [
    ("s_waitcnt vmcnt(1) lgkmcnt(2)", MInst("s_waitcnt", simm16=(1 << 10) | (2 << 4) | 7)),
    ("v_cmp_lt_f32_e64 s5, v1, s2", MInst("v_cmp_lt_f32_e64", {"vdst": s(5)}, {"src0": v(1), "src1": s(2)})),
    ("global_load_b32 v1, v2, s[4:5] offset:-8", MInst("global_load_b32", {"vdst": v(1)}, {"addr": v(2), "saddr": s(4, 2)}, offset=-8)),
    ("global_store_b16 v1, v2, s[4:5] offset:16", MInst("global_store_b16", {}, {"addr": v(1), "data": v(2), "saddr": s(4, 2)}, offset=16)),
    ("ds_store_b32 v1, v2 offset:300", MInst("ds_store_b32", {}, {"addr": v(1), "data0": v(2)}, offset=300)),
    ("ds_load_u8 v7, v1 offset:65535", MInst("ds_load_u8", {"vdst": v(7)}, {"addr": v(1)}, offset=65535)),
    ("v_add_f32_e64 v0, v1, 1.0", MInst("v_add_f32_e64", {"vdst": v(0)}, {"src0": v(1), "src1": Imm(0x3f800000, "f32")})),
    ("v_add_f32_e64 v0, v1, 0x41200000", MInst("v_add_f32_e64", {"vdst": v(0)}, {"src0": v(1), "src1": Imm(0x41200000, "f32")})),
    ("v_add_f16_e64 v0, v1, 1.0", MInst("v_add_f16_e64", {"vdst": v(0)}, {"src0": v(1), "src1": Imm(0x3c00, "f16")})),
    ("s_load_b64 s[2:3], s[0:1], 0x10", MInst("s_load_b64", {"sdata": s(2, 2)}, {"sbase": s(0, 2)}, offset=16)),
    ("v_cndmask_b32_e64 v1, 0, v2, s3", MInst("v_cndmask_b32_e64", {"vdst": v(1)}, {"src0": Imm(0), "src1": v(2), "src2": s(3)})),
    ("s_and_saveexec_b32 s4, s5", MInst("s_and_saveexec_b32", {"sdst": s(4)}, {"ssrc0": s(5)})),
    ("s_and_b32 exec_lo, exec_lo, s6", MInst("s_and_b32", {"sdst": Spec(126)}, {"ssrc0": Spec(126), "ssrc1": s(6)})),
    ("s_and_not1_b32 s1, s2, s3", MInst("s_and_not1_b32", {"sdst": s(1)}, {"ssrc0": s(2), "ssrc1": s(3)})),
    ("v_mul_hi_u32 v1, v2, 0x12345", MInst("v_mul_hi_u32", {"vdst": v(1)}, {"src0": v(2), "src1": Imm(0x12345)})),
    ("v_bfe_i32 v3, v4, 0, 16", MInst("v_bfe_i32", {"vdst": v(3)}, {"src0": v(4), "src1": Imm(0), "src2": Imm(16)})),
    ("s_add_i32 s7, s8, -16", MInst("s_add_i32", {"sdst": s(7)}, {"ssrc0": s(8), "ssrc1": Imm(-16)})),
    ("s_mul_i32 s7, s8, 0x10001", MInst("s_mul_i32", {"sdst": s(7)}, {"ssrc0": s(8), "ssrc1": Imm(0x10001)})),
    ("s_cmp_lt_i32 s1, 0x400", MInst("s_cmp_lt_i32", {}, {"ssrc0": s(1), "ssrc1": Imm(1024)})),
    ("v_fma_f32 v5, v6, v10, v5", MInst("v_fma_f32", {"vdst": v(5)}, {"src0": v(6), "src1": v(10), "src2": v(5)})),
    ("s_barrier", MInst("s_barrier")),
    ("s_waitcnt_depctr depctr_va_vdst(0)", MInst("s_waitcnt_depctr", simm16=0x0F9F)),
  ]
  encs = llvm_mc_assemble([t for t, _ in cases])
  assert len(encs) == len(cases), f"llvm-mc-19 answered {len(encs)} of {len(cases)} cases"
  for (t, m), enc in zip(cases, encs):
    assert not isinstance(enc, str), f"{t}: {enc}"
    assert assemble([m]) == enc[1], t
    # the text assembler (the same encode_fields core) agrees on every case
    assert text_assemble(t) == assemble([m]), t


def test_encoder_errors_name_the_instruction():
  from hcq.compiler import CompileError
  big = MInst("ds_load_b32", {"vdst": VReg("v", 1, fixed=1)}, {"addr": VReg("v", 1, fixed=2)}, offset=70000)
  with pytest.raises(CompileError, match="LDS offset 70000"): assemble([big])
  wrong = MInst("s_mov_b32", {"sdst": VReg("s", 1, fixed=1)}, {"ssrc0": VReg("s", 1, fixed=2), "vaddr": VReg("v", 1, fixed=0)})
  with pytest.raises(CompileError, match=r"gfx1100: SOP1: no field vaddr .*s_mov_b32"): assemble([wrong])
  # as many fields as the encoding's operands but one name misspelled: an error, not a field silently left at 0
  typo = MInst("v_add_f32_e32", {"vdst": VReg("v", 1, fixed=1)}, {"src0": VReg("v", 1, fixed=2), "vsrc1x": VReg("v", 1, fixed=3)})
  with pytest.raises(CompileError, match=r"gfx1100: VOP2: no field vsrc1x in this encoding \(its fields: .*\bvsrc1\b.*v_add_f32_e32"):
    assemble([typo])
  with pytest.raises(CompileError, match="no instruction 'v_frobnicate'"): assemble([MInst("v_frobnicate")])


def test_branch_offsets():
  code = [MInst("LABEL", label="top"), MInst("s_nop", simm16=0), MInst("s_cbranch_scc1", target="top"),
          MInst("s_branch", target="end"), MInst("s_nop", simm16=0), MInst("LABEL", label="end"), MInst("s_endpgm")]
  words = np.frombuffer(assemble(code), np.uint32)
  assert words[1] & 0xFFFF == 0xFFFE     # back to top: (0 - (4 + 4)) / 4 = -2
  assert words[2] & 0xFFFF == 1          # over one s_nop
