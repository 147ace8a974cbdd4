"""The gfx942 (CDNA3, wave64) backend: 64-lane masks in SGPR pairs, gfx9 encodings and legalization (no VOP3
literal, one constant-bus read), CDNA3's s_waitcnt fields and s_nop hazards (checked by the hazard checker), the
code-object metadata, llvm-objdump-19 --mcpu=gfx942 agreement with our disassembler, and numpy's results on MOCK+AMD
posing as gfx942 (AQL queue; synchronous and threaded)."""
from __future__ import annotations

import numpy as np
import pytest

import amd_kernels
import hcq
from amd_reference import assert_same, objdump_agrees, run_c
from hcq.compiler import compile as hcq_compile, examples
from hcq.compiler.backend.amd import render
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.decode import decode_all
from hcq.compiler.isa.amd.descriptor import KCP_WAVEFRONT_SIZE32
from hcq.compiler.backend.amd.gfx9 import waitcnt_simm16
from hcq.compiler.backend.amd.hazard_check import check_hazards
from hcq.config import Config
from tests.compiled_runs import run_example

ARCH = "gfx942"
CASES = [("ex_" + f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in amd_kernels.ALL]


def _kernel(blob: bytes):
  (k,) = CodeObject.parse(blob).kernels.values()
  return k


def _insts(blob: bytes):
  return decode_all(_kernel(blob).code, arch=ARCH)


def test_code_object_is_wave64_gfx942():
  blob = hcq_compile(examples.matmul_tiled().sink, ARCH)
  co = CodeObject.parse(blob)
  k = _kernel(blob)
  assert co.mach == ARCH and k.metadata[".wavefront_size"] == 64
  d = k.descriptor
  assert not d.kernel_code_properties & KCP_WAVEFRONT_SIZE32
  vgprs = k.metadata[".vgpr_count"]
  # VGPR blocks of 8 on gfx90a/gfx940; ACCUM_OFFSET right after the VGPRs; no WGP_MODE / MEM_ORDERED on gfx9
  assert d.compute_pgm_rsrc1 & 0x3F == (vgprs + 7) // 8 - 1
  assert d.compute_pgm_rsrc3 & 0x3F == (vgprs + 3) // 4 - 1 and not d.compute_pgm_rsrc3 >> 16 & 1
  assert d.compute_pgm_rsrc1 >> 29 == 0
  assert k.metadata[".sgpr_count"] <= 102 + 6


def test_lane_masks_are_64_bit_and_vop3_has_no_literal():
  insts = _insts(hcq_compile(examples.elementwise_fma().sink, ARCH))
  names = [i.name for i in insts]
  assert "s_and_saveexec_b64" in names and not any(n.endswith("saveexec_b32") for n in names)
  cmps = [i for i in insts if i.name.startswith("v_cmp") and i.encoding == "VOP3"]
  assert cmps and all(o.count == 2 for i in cmps for o in i.operands if o.field == "vdst")    # an SGPR pair
  for f in (examples.int_bitops, examples.where_compare, examples.matmul_tiled):
    for i in _insts(hcq_compile(f().sink, ARCH)):
      assert not (i.encoding in ("VOP3", "VOP3SD") and i.literal is not None), str(i)
      scalar = {(o.kind, o.index) for o in i.operands
                if o.field in ("src0", "src1", "src2") and o.kind in ("sgpr", "special")}
      assert len(scalar) <= 1 or not i.name.startswith("v_"), f"{i}: {scalar} (gfx9 reads one scalar per VALU)"


def test_gfx9_waitcnt_counts_stores_and_fields():
  assert waitcnt_simm16(vm=0) == 0x0F70 and waitcnt_simm16(lgkm=0) == 0xC07F and waitcnt_simm16(vm=17) == 0x4F71
  names = [i.name for i in _insts(hcq_compile(examples.local_reduction().sink, ARCH))]
  assert "s_waitcnt" in names and "s_barrier" in names and "s_code_end" not in names
  assert names[names.index("s_barrier") - 1] == "s_waitcnt"      # LDS stores waited for before the barrier


@pytest.mark.tools("llvm-objdump-19")
@pytest.mark.parametrize("make", [f for _, f in CASES], ids=[n for n, _ in CASES])
def test_objdump_decodes_every_word_and_agrees(make):
  assert objdump_agrees(hcq_compile(make().sink, ARCH), ARCH) > 5


# ---------------------------------------------------------------------------------------------------- hazards
RULES = {
  "vmem_sgpr": ("vmem-sgpr", "v_readfirstlane_b32 s4, v1\nglobal_load_dword v2, v3, s[4:5]",
                "v_readfirstlane_b32 s4, v1\ns_nop 4\nglobal_load_dword v2, v3, s[4:5]"),
  "vmem_sgpr_4_is_too_few": ("vmem-sgpr", "v_readfirstlane_b32 s4, v1\ns_nop 3\nglobal_load_dword v2, v3, s[4:5]",
                             "v_readfirstlane_b32 s4, v1\ns_nop 3\nv_mov_b32 v9, 0\nglobal_load_dword v2, v3, s[4:5]"),
  "div_fmas": ("div-fmas-vcc", "v_cmp_lt_u32_e32 vcc, v1, v2\nv_div_fmas_f32 v1, v2, v3, v4",
               "v_cmp_lt_u32_e32 vcc, v1, v2\ns_nop 3\nv_div_fmas_f32 v1, v2, v3, v4"),
  "trans_forward": ("trans-forward", "v_exp_f32_e32 v1, v2\nv_add_f32_e32 v3, v1, v1",
                    "v_exp_f32_e32 v1, v2\ns_nop 0\nv_add_f32_e32 v3, v1, v1"),
  "lane_select": ("lane-select", "v_mov_b32 v5, 0\nv_readfirstlane_b32 s4, v1\nv_readlane_b32 s1, v1, s4",
                  "v_mov_b32 v5, 0\nv_readfirstlane_b32 s4, v1\ns_nop 3\nv_readlane_b32 s1, v1, s4"),
}


@pytest.mark.parametrize("case", list(RULES))
def test_checker_flags_each_cdna3_rule_and_accepts_the_wait(case):
  rule, bad, good = RULES[case]
  found = check_hazards(assemble(bad, ARCH), ARCH)
  assert found and {v.rule for v in found} == {rule}, [str(v) for v in found]
  assert check_hazards(assemble(good, ARCH), ARCH) == []


@pytest.mark.parametrize("make", [f for _, f in CASES], ids=[n for n, _ in CASES])
def test_compiled_kernels_have_no_cdna3_hazards(make):
  assert check_hazards(_kernel(hcq_compile(make().sink, ARCH)).code, ARCH) == []


def test_checker_finds_hazards_without_the_fixer(monkeypatch):
  monkeypatch.setattr(render, "fix_hazards_gfx9", lambda code: code)
  found = {v.rule for f in amd_kernels.ALL for v in check_hazards(_kernel(hcq_compile(f().sink, ARCH)).code, ARCH)}
  assert "trans-forward" in found, found


# ---------------------------------------------------------------------------------------------------- on the mock
@pytest.fixture(scope="module", params=[False, True], ids=["synchronous", "threaded"])
def dev(request):
  d = hcq.open("MOCK+AMD", Config(timeout_s=20.0, mock_threaded=request.param, mock_gpu=ARCH))
  assert d.arch == ARCH
  yield d
  d.close()


_run = run_example


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_examples_give_numpys_results_on_mock_gfx942(dev, make):
  ex = make()
  got = _run(dev, ex, list(ex.expected))
  for s, want in ex.expected.items(): assert_same(got[s], want, 1e-5, what=f"{ex.name} slot {s} on {dev.name}")


@pytest.mark.tools("cc")
@pytest.mark.parametrize("make", amd_kernels.ALL, ids=[f.__name__ for f in amd_kernels.ALL])
def test_feature_kernels_match_c_backend_on_mock_gfx942(dev, make):
  c = make()
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got = _run(dev, c, c.outputs)
  for s in c.outputs: assert_same(got[s], ref[s], getattr(c, "float_rtol", 1e-5), what=f"{c.name} slot {s}")


# ---------------------------------------------------------------------------------------------------- hcq demo
@pytest.mark.parametrize("target", ["gfx1200", "gfx942"])
def test_hcq_demo_runs_through_the_compiler(monkeypatch, capsys, target):
  """`hcq demo` on a mock AMD target without a shipped code object: vadd and matmul compiled from the DSL
  (compiler/demo.py), checked against numpy by the demo itself (odd sizes: partial work-groups)."""
  import argparse

  from hcq.cli import demo
  monkeypatch.setenv("HCQ_MOCK_GPU", target)
  assert demo.run(argparse.Namespace(device="MOCK+AMD", n=1000, m=37)) == 0
  out = capsys.readouterr().out
  assert target in out and out.count(" ok ") == 2, out


@pytest.mark.parametrize("target", ["gfx1200", "gfx942"])
def test_hcq_kernels_passes_every_example_on_the_target(monkeypatch, capsys, target):
  import argparse

  from hcq.cli import kernels
  monkeypatch.setenv("HCQ_MOCK_GPU", target)
  assert kernels.run(argparse.Namespace(names=[], device="MOCK+AMD", show=None)) == 0
  out = capsys.readouterr().out
  assert target in out and out.count(" ok ") == len(examples.ALL), out
