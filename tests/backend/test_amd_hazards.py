"""gfx11 hazards: the independent checker (compiler/backend/amd/hazard_check.py, over decoded bytes and every
control-flow path) flags hand-written code that breaks each rule, accepts it with the wait the rule asks for, and
finds nothing in any kernel the backend compiles for the tests, while it does find the hazards when the backend's
fixer (render_hazards.fix_hazards) is switched off."""
from __future__ import annotations

import pytest

import amd_kernels
import test_amd_scalar
import test_amd_wide
from hcq.compiler import compile as hcq_compile, examples
from hcq.compiler.backend.amd import render
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.backend.amd.hazard_check import check_hazards
from hcq.compiler.backend.amd.isel_mir import MInst, VReg
from hcq.compiler.backend.amd.render_hazards import VA_VDST0 as VA_VDST0_SIMM, fix_hazards

VA_VDST0 = "s_waitcnt_depctr depctr_va_vdst(0)"
SA_SDST0 = "s_waitcnt_depctr depctr_sa_sdst(0)"

# (rule, code that breaks it, the same code made safe)
CASES = {
  "trans_use": ("trans-use", "v_exp_f32 v1, v2\nv_add_f32 v3, v1, v1",
                f"v_exp_f32 v1, v2\n{VA_VDST0}\nv_add_f32 v3, v1, v1"),
  "trans_use_after_4_valus": ("trans-use", "v_rcp_f32 v1, v2\n" + "v_mov_b32 v9, 0\n" * 4 + "v_add_f32 v3, v1, v1",
                              "v_rcp_f32 v1, v2\n" + "v_mov_b32 v9, 0\n" * 6 + "v_add_f32 v3, v1, v1"),
  # LLVM's fixVALUTransUseHazard: still a hazard with 5 VALUs in between, gone after 6
  "trans_use_after_5_valus": ("trans-use", "v_rcp_f32 v1, v2\n" + "v_mov_b32 v9, 0\n" * 5 + "v_add_f32 v3, v1, v1",
                              f"v_rcp_f32 v1, v2\n" + "v_mov_b32 v9, 0\n" * 5 + f"{VA_VDST0}\nv_add_f32 v3, v1, v1"),
  # the read at the loop's top sees the transcendental of the previous iteration (through the back edge)
  "trans_use_around_a_loop": ("trans-use", "s_mov_b32 s0, 0\n.L:\nv_add_f32 v3, v1, v1\nv_sqrt_f32 v1, v2\n"
                                           "s_add_i32 s0, s0, 1\ns_cmp_lt_i32 s0, 4\ns_cbranch_scc1 .L\ns_endpgm",
                              f"s_mov_b32 s0, 0\n.L:\n{VA_VDST0}\nv_add_f32 v3, v1, v1\nv_sqrt_f32 v1, v2\n"
                              "s_add_i32 s0, s0, 1\ns_cmp_lt_i32 s0, 4\ns_cbranch_scc1 .L\ns_endpgm"),
  "mask_write_cndmask": ("mask-write", "v_cndmask_b32_e64 v1, v2, v3, s4\ns_mov_b32 s4, 0\nv_add_f32 v5, v6, v7",
                         f"v_cndmask_b32_e64 v1, v2, v3, s4\ns_mov_b32 s4, 0\n{SA_SDST0}\nv_add_f32 v5, v6, v7"),
  "mask_write_carry": ("mask-write", "v_add_co_ci_u32_e64 v1, null, v2, v3, s6\ns_add_i32 s6, s7, 1\ns_cmp_lt_i32 s6, 3",
                       f"v_add_co_ci_u32_e64 v1, null, v2, v3, s6\ns_add_i32 s6, s7, 1\n{SA_SDST0}\ns_cmp_lt_i32 s6, 3"),
  "exec_forwarding": ("exec-forward", "v_mov_b32 v1, 1\ns_mov_b32 exec_lo, s4\nv_add_nc_u32 v2, v1, v1",
                      f"v_mov_b32 v1, 1\ns_mov_b32 exec_lo, s4\n{VA_VDST0}\nv_add_nc_u32 v2, v1, v1"),
  "exec_forwarding_saveexec": ("exec-forward", "v_mov_b32 v1, 1\ns_and_saveexec_b32 s2, s4\nv_add_nc_u32 v2, v1, v1",
                               f"v_mov_b32 v1, 1\ns_and_saveexec_b32 s2, s4\n{VA_VDST0}\nv_add_nc_u32 v2, v1, v1"),
  "mad_overlap": ("mad-overlap", "v_mad_u64_u32 v[2:3], null, v2, v4, 0", "v_mad_u64_u32 v[6:7], null, v2, v4, 0"),
  "mad_overlap_addend": ("mad-overlap", "v_mad_u64_u32 v[2:3], null, v5, v4, v[2:3]",
                         "v_mad_u64_u32 v[6:7], null, v5, v4, v[2:3]"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_checker_flags_each_rule_and_accepts_the_wait(case):
  rule, bad, good = CASES[case]
  found = check_hazards(assemble(bad))
  assert found and {v.rule for v in found} == {rule}, [str(v) for v in found]
  assert check_hazards(assemble(good)) == []


def test_fixer_waits_for_a_transcendental_result_read_5_valus_later_but_not_6():
  v = lambda k: VReg("v", fixed=k)
  for between, waits in ((5, 1), (6, 0)):
    code = [MInst("v_rcp_f32_e32", {"vdst": v(1)}, {"src0": v(2)})]
    code += [MInst("v_mov_b32_e32", {"vdst": v(9)}, {"src0": v(3)}) for _ in range(between)]
    code += [MInst("v_add_f32_e32", {"vdst": v(4)}, {"src0": v(1), "src1": v(1)})]
    fixed = fix_hazards(code)
    assert [m.name for m in fixed].count("s_waitcnt_depctr") == waits, (between, fixed)
    if waits: assert fixed[-2].name == "s_waitcnt_depctr" and fixed[-2].mods["simm16"] == VA_VDST0_SIMM


def _kernels():
  out = [(f.__name__, lambda f=f: f().sink) for f in examples.ALL + amd_kernels.ALL]
  out += [("int64", lambda: test_amd_wide.int64_case()[0]), ("float64", lambda: test_amd_wide.float64_case()[0]),
          ("uniform_loads", lambda: test_amd_scalar.uniform_loads_kernel()[0]),
          ("many_scalar_args", lambda: test_amd_scalar.many_scalar_args_kernel()[0]),
          ("many_buffers", lambda: test_amd_scalar.many_buffers_kernel()[0])]
  return out


def _text(sink) -> bytes:
  (k,) = CodeObject.parse(hcq_compile(sink, "gfx1100")).kernels.values()
  return k.code


KERNELS = dict(_kernels())


@pytest.mark.parametrize("name", list(KERNELS))
def test_every_backend_kernel_passes_the_checker(name):
  found = check_hazards(_text(KERNELS[name]()))
  assert not found, "\n".join(map(str, found[:10]))


def test_checker_catches_the_backend_without_its_fixer(monkeypatch):
  """Not a checker that finds nothing: without fix_hazards, the kernels with transcendentals, 64-bit carries
  reused by the SALU and EXEC-masked control flow break the rules."""
  monkeypatch.setattr(render, "fix_hazards", lambda code: code)
  rules = set()
  for name in ("transcendental", "int64", "gated_stencil", "divergent_loop"):
    rules |= {v.rule for v in check_hazards(_text(KERNELS[name]()))}
  assert rules == {"trans-use", "mask-write", "exec-forward"}
