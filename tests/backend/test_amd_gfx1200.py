"""The gfx1200 (RDNA4) backend: RDNA4 encodings and rules (s_wait_* counters, the split barrier, VGLOBAL scope bits,
RDNA4 mnemonics), the hazard checker's RDNA4 SGPR rules, llvm-objdump-19 --mcpu=gfx1200 agreement with our
disassembler, and numpy's results on MOCK+AMD posing as gfx1200 (synchronous and threaded)."""
from __future__ import annotations

import numpy as np
import pytest

import amd_kernels
import hcq
from amd_reference import assert_same, objdump_agrees, run_c
from hcq.compiler import UOp, KernelInfo, compile as hcq_compile, dtypes, examples
from hcq.compiler.backend.amd import render
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.decode import decode_all
from hcq.compiler.backend.amd.hazard_check import check_hazards
from hcq.config import Config
from tests.compiled_runs import run_example

ARCH = "gfx1200"
CASES = [("ex_" + f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in amd_kernels.ALL]


def _code(blob: bytes) -> bytes:
  (k,) = CodeObject.parse(blob).kernels.values()
  return k.code


def _names(blob: bytes) -> list[str]:
  return [i.name for i in decode_all(_code(blob), arch=ARCH)]


def test_code_object_is_for_gfx1200():
  blob = hcq_compile(examples.elementwise_add().sink, ARCH)
  co = CodeObject.parse(blob)
  assert co.mach == ARCH and co.target.endswith("gfx1200")
  (k,) = co.kernels.values()
  # rsrc1: gfx12's WG_RR_EN (21) and DISABLE_PERF (23) left clear as clang-19 -mcpu=gfx1200 does; WGP_MODE set
  assert k.descriptor.compute_pgm_rsrc1 & (1 << 21 | 1 << 23) == 0 and k.descriptor.compute_pgm_rsrc1 >> 29 & 1


def test_rdna4_counters_barrier_and_mnemonics():
  names = _names(hcq_compile(examples.local_reduction().sink, ARCH))
  assert "s_waitcnt" not in names and "s_barrier" not in names
  # the split barrier, LDS waited for first; global loads by LOADcnt, LDS by DScnt, scalar loads by KMcnt
  k = names.index("s_barrier_signal")
  assert names[k + 1] == "s_barrier_wait" and "s_wait_dscnt" in names[:k]
  assert {"s_wait_loadcnt", "s_wait_dscnt", "s_wait_kmcnt"} <= set(names)
  loop = _names(hcq_compile(examples.runtime_loop().sink, ARCH))
  assert "s_add_co_i32" in loop and "s_add_i32" not in loop


def test_volatile_accesses_get_system_scope():
  a = UOp.param(0, dtypes.float32, 64, volatile=True)
  b = UOp.param(1, dtypes.float32, 64)
  i = UOp.special(64, "lidx0")
  sink = b.index(i).store(a.index(i).load() * 2.0).sink(arg=KernelInfo("vol"))
  mem = [x for x in decode_all(_code(hcq_compile(sink, ARCH)), arch=ARCH) if x.name.startswith("global_")]
  scope = {x.name: x.fields["scope"] for x in mem}
  assert scope == {"global_load_b32": 3, "global_store_b32": 0}, scope     # SCOPE_SYS for the volatile param only
  assert "scope:SCOPE_SYS" in str(next(x for x in mem if x.name == "global_load_b32"))


@pytest.mark.tools("llvm-objdump-19")
@pytest.mark.parametrize("make", [f for _, f in CASES], ids=[n for n, _ in CASES])
def test_objdump_decodes_every_word_and_agrees(make):
  blob = hcq_compile(make().sink, ARCH)
  assert objdump_agrees(blob, ARCH) > 5


# ---------------------------------------------------------------------------------------------------- hazards
WAIT_SA = "s_wait_alu depctr_sa_sdst(0)"
WAIT_VA = "s_wait_alu depctr_va_sdst(0) depctr_va_vcc(0)"
RULES = {
  # VALU reads s4, an SALU rewrites it, then a read: sa_sdst(0) after the write
  "sgpr_rw_valu": ("sgpr-rw", "v_add_nc_u32 v1, s4, v2\ns_mov_b32 s4, 0\nv_add_nc_u32 v3, s4, v2",
                   f"v_add_nc_u32 v1, s4, v2\ns_mov_b32 s4, 0\n{WAIT_SA}\nv_add_nc_u32 v3, s4, v2"),
  # SGPRs are tracked as pairs: s5 shares s4's pair
  "sgpr_rw_pair": ("sgpr-rw", "v_cndmask_b32_e64 v1, v2, v3, s4\ns_mov_b32 s5, 0\ns_add_co_i32 s6, s5, 1",
                   f"v_cndmask_b32_e64 v1, v2, v3, s4\ns_mov_b32 s5, 0\n{WAIT_SA}\ns_add_co_i32 s6, s5, 1"),
  # a compare's lane mask read by an SALU: va_sdst(0) between
  "va_sdst": ("va-sdst", "v_cmp_lt_u32_e64 s2, v1, v2\ns_and_saveexec_b32 s3, s2",
              f"v_cmp_lt_u32_e64 s2, v1, v2\n{WAIT_VA}\ns_and_saveexec_b32 s3, s2"),
  "va_vcc": ("va-sdst", "v_cmp_lt_u32_e32 vcc_lo, v1, v2\ns_and_b32 s3, vcc_lo, exec_lo",
             "v_cmp_lt_u32_e32 vcc_lo, v1, v2\ns_wait_alu depctr_va_vcc(0)\ns_and_b32 s3, vcc_lo, exec_lo"),
  # through a loop's back edge: the VALU read at the bottom, the SALU write at the top
  "sgpr_rw_loop": ("sgpr-rw", ".L:\ns_mov_b32 s4, 1\ns_add_co_i32 s5, s4, 1\nv_add_nc_u32 v1, s4, v2\ns_cbranch_scc1 .L\n"
                              "s_endpgm",
                   f".L:\ns_mov_b32 s4, 1\n{WAIT_SA}\ns_add_co_i32 s5, s4, 1\nv_add_nc_u32 v1, s4, v2\n"
                   "s_cbranch_scc1 .L\ns_endpgm"),
}


@pytest.mark.parametrize("case", list(RULES))
def test_checker_flags_each_rdna4_rule_and_accepts_the_wait(case):
  rule, bad, good = RULES[case]
  found = check_hazards(assemble(bad, ARCH), ARCH)
  assert found and {v.rule for v in found} == {rule}, [str(v) for v in found]
  assert check_hazards(assemble(good, ARCH), ARCH) == []


def test_gfx11_only_rules_do_not_apply_to_rdna4():
  # LLVM 19 applies the transcendental-use wait to GFX11 only (clang-19 -mcpu=gfx1200 reads a v_rcp result next)
  text = "v_rcp_f32 v1, v2\nv_add_f32 v3, v1, v1"
  assert check_hazards(assemble(text, ARCH), ARCH) == []
  assert {v.rule for v in check_hazards(assemble(text))} == {"trans-use"}


@pytest.mark.parametrize("make", [f for _, f in CASES], ids=[n for n, _ in CASES])
def test_compiled_kernels_have_no_rdna4_hazards(make):
  assert check_hazards(_code(hcq_compile(make().sink, ARCH)), ARCH) == []


def test_checker_finds_hazards_without_the_fixer(monkeypatch):
  monkeypatch.setattr(render, "fix_hazards_gfx12", lambda code: code)
  found = {v.rule for f in (examples.elementwise_fma, examples.runtime_loop, examples.gated_stencil)
           for v in check_hazards(_code(hcq_compile(f().sink, ARCH)), ARCH)}
  assert found == {"sgpr-rw", "va-sdst"}, found


# ---------------------------------------------------------------------------------------------------- on the mock
@pytest.fixture(scope="module", params=[False, True], ids=["synchronous", "threaded"])
def dev(request):
  d = hcq.open("MOCK+AMD", Config(timeout_s=20.0, mock_threaded=request.param, mock_gpu=ARCH))
  assert d.arch == ARCH
  yield d
  d.close()


_run = run_example


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_examples_give_numpys_results_on_mock_gfx1200(dev, make):
  ex = make()
  got = _run(dev, ex, list(ex.expected))
  for s, want in ex.expected.items(): assert_same(got[s], want, 1e-5, what=f"{ex.name} slot {s} on {dev.name}")


@pytest.mark.tools("cc")
@pytest.mark.parametrize("make", amd_kernels.ALL, ids=[f.__name__ for f in amd_kernels.ALL])
def test_feature_kernels_match_c_backend_on_mock_gfx1200(dev, make):
  c = make()
  outputs = c.outputs
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got = _run(dev, c, outputs)
  for s in outputs: assert_same(got[s], ref[s], getattr(c, "float_rtol", 1e-5), what=f"{c.name} slot {s}")
