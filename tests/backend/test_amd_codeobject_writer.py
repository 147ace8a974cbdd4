"""The one code-object writer (compiler/isa/amd/cowriter.py) as both the assembler's users and the RDNA3 backend use
it: the gfx11 user-SGPR padding the code relies on (a hand-written vadd reading its work-group id from s15 runs on the
wave emulator), dynamic symbols a loader can look up (llvm-readelf-19), and the work-group size metadata."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from amd_emu_runner import run
from hcq.compiler import CompileError, compile as hcq_compile, examples
from hcq.compiler.isa.amd.asm import Asm
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.cowriter import Arg, KernelSpec, user_sgpr_count, write_code_object
from hcq.compiler.backend.amd.render import max_flat_workgroup_size

VADD = """s_load_b128 s[4:7], s[0:1], null
s_load_b64 s[8:9], s[0:1], 0x10
v_and_b32_e32 v0, 0x3ff, v0
v_lshl_add_u32 v0, s{wgid}, 6, v0
v_lshlrev_b32_e32 v0, 2, v0
s_waitcnt lgkmcnt(0)
global_load_b32 v1, v0, s[4:5]
global_load_b32 v2, v0, s[6:7]
s_waitcnt vmcnt(0)
v_add_f32_e32 v1, v1, v2
global_store_b32 v0, v1, s[8:9]
s_endpgm"""
ARGS = [Arg(0, 8, "global_buffer", "a"), Arg(8, 8, "global_buffer", "b"), Arg(16, 8, "global_buffer", "c")]


def _vadd(wgid: int, **kw) -> bytes:
  a = Asm()
  for line in VADD.format(wgid=wgid).splitlines(): a.emit(line)
  return write_code_object([KernelSpec("vadd", a.code, ARGS, vgpr_count=3, sgpr_count=10, **kw)])


def test_user_sgpr_padding_rule():
  # what clang-19 writes for gfx1100 (tests/fixtures/opencl: USER_SGPR_COUNT 15 with TGID_X, 14 with TGID_X and Y)
  assert user_sgpr_count(2, 1) == 15 and user_sgpr_count(2, 2) == 14 and user_sgpr_count(2, 3) == 13
  assert user_sgpr_count(2, 1, "gfx1200") == 2 and user_sgpr_count(2, 1, "gfx1100", 64) == 2


@pytest.mark.parametrize("explicit", [None, 12])
def test_written_vadd_runs_with_its_work_group_id_where_the_descriptor_says(explicit):
  wgid = 15 if explicit is None else explicit
  blob = _vadd(wgid, user_sgpr_count=explicit)
  (k,) = CodeObject.parse(blob).kernels.values()
  assert k.descriptor.user_sgpr_layout() == {"kernarg_segment_ptr": 0, "workgroup_id_x": wgid}
  rng = np.random.default_rng(1)
  x, y = rng.standard_normal(256).astype(np.float32), rng.standard_normal(256).astype(np.float32)
  (_, _, out), _ = run(blob, [x, y, np.zeros(256, np.float32)], (4, 1, 1), (64, 1, 1))
  np.testing.assert_array_equal(out, x + y)


def test_bad_user_sgpr_count_is_refused():
  from hcq.compiler.isa.amd.errors import CodeObjectError
  with pytest.raises(CodeObjectError, match="user_sgpr_count 17"): _vadd(15, user_sgpr_count=17)
  with pytest.raises(CodeObjectError, match="user_sgpr_count 1 "): _vadd(15, user_sgpr_count=1)


@pytest.mark.tools("llvm-readelf-19")
def test_dynamic_symbols_of_several_kernels():
  a, b = Asm(), Asm()
  a.s_endpgm()
  b.emit("v_mov_b32 v1, v0")
  b.s_endpgm()
  blob = write_code_object([KernelSpec("one", a.code), KernelSpec("two", b.code), KernelSpec("three", a.code)])
  out = subprocess.run(["llvm-readelf-19", "--dyn-syms", "-l", "-d", "/dev/stdin"], input=blob, capture_output=True,
                       check=True).stdout.decode()
  syms = re.findall(r"^\s*\d+: ([0-9a-f]{16})\s+(\d+) (FUNC|OBJECT)\s+GLOBAL PROTECTED\s+\d+ (\S+)$", out, re.M)
  co = CodeObject.parse(blob)
  want = []
  for name in ("one", "two", "three"):
    k = co.kernels[name]
    want += [(k.entry_address, "FUNC", name), (k.descriptor_address, "OBJECT", f"{name}.kd")]
  assert [(int(v, 16), t, n) for v, _, t, n in syms] == want, out
  assert "DYNAMIC" in out and "(HASH)" in out and "(SYMTAB)" in out and "(STRTAB)" in out


def test_max_flat_workgroup_size_follows_the_register_file():
  # the figures clang-19 -mcpu=gfx1100 gives under amdgpu_flat_work_group_size(1, N): 1024 -> 192 VGPRs, 768 -> 240
  assert max_flat_workgroup_size("k", 192, None) == 1024 and max_flat_workgroup_size("k", 193, None) < 1024
  assert max_flat_workgroup_size("k", 240, None) == 768 and max_flat_workgroup_size("k", 256, None) < 768
  assert max_flat_workgroup_size("k", 24, (16, 16, 1)) == 256
  with pytest.raises(CompileError, match="kernel k uses 256 VGPRs"): max_flat_workgroup_size("k", 256, (32, 32, 1))


def test_reqd_workgroup_size_only_where_the_code_reads_work_item_ids():
  reads = examples.local_reduction()            # lidx0: the code is built for its work-group shape
  (k,) = CodeObject.parse(hcq_compile(reads.sink, "gfx1100")).kernels.values()
  assert k.reqd_workgroup_size == tuple(reads.local_size) + (1,) * (3 - len(reads.local_size))
  assert k.max_flat_workgroup_size == int(np.prod(reads.local_size))
  groups_only = [m() for m in examples.ALL]
  groups_only = [e for e in groups_only if not any(u.op.name == "SPECIAL" and u.arg.startswith("l")
                                                   for u in _lowered(e.sink).toposort())]
  assert groups_only, "no example without work-item ids"
  for e in groups_only:
    (k,) = CodeObject.parse(hcq_compile(e.sink, "gfx1100")).kernels.values()
    assert k.reqd_workgroup_size is None and k.max_flat_workgroup_size == 1024, e.name
    assert k.descriptor.enable_vgpr_workitem_id == 0


def _lowered(sink):
  from hcq.compiler.backend.amd.render import GFX1100_TARGET
  from hcq.compiler.lower import lower
  return lower(sink, GFX1100_TARGET)
