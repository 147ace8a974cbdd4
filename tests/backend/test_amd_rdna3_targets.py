"""gfx1101 (Navi 32: the V710 VF's target) and gfx1102 (Navi 33) as compile targets: gfx1100's encodings and decode
tables, their own code-object machine and metadata target, the user SGPR padding only where LLVM has
FeatureUserSGPRInit16Bug (gfx1100, gfx1102), gfx1102's smaller VGPR file; checked against clang-19 and
llvm-objdump-19 where the tools are present. The emulator runs and llvm-objdump agreement of random kernels on these
targets: test_amd_targets_random.py; on the mock VF: tests/amd/am/test_am_vf.py."""
from __future__ import annotations

import struct
import subprocess

import pytest

from amd_reference import objdump_agrees
from hcq.compiler import compile as hcq_compile
from hcq.compiler import examples
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.backend.amd.render import max_flat_workgroup_size
from hcq.compiler.isa.amd.tables import arch_tables

RDNA3 = ("gfx1100", "gfx1101", "gfx1102")
MACH = {"gfx1100": 0x41, "gfx1101": 0x46, "gfx1102": 0x47}   # AMDGPUUsage "AMDGPU ELF Header" EF_AMDGPU_MACH_*


def _kernel(blob: bytes):
  (k,) = CodeObject.parse(blob).kernels.values()
  return k


@pytest.mark.parametrize("arch", RDNA3)
def test_code_object_names_its_target(arch):
  blob = hcq_compile(examples.grid_2d().sink, arch)
  e_flags = struct.unpack_from("<I", blob, 0x30)[0]           # Elf64_Ehdr.e_flags
  co = CodeObject.parse(blob)
  assert e_flags & 0xff == MACH[arch] and co.mach == arch
  assert co.metadata["amdhsa.target"] == f"amdgcn-amd-amdhsa--{arch}"


def test_the_rdna3_targets_share_gfx1100s_decode_tables():
  assert arch_tables("gfx1101") is arch_tables("gfx1100") is arch_tables("gfx1102")
  with pytest.raises(ValueError, match="no instruction tables for 'gfx1103'"): arch_tables("gfx1103")


def test_user_sgprs_are_padded_only_on_targets_with_the_init16_bug():
  """grid_2d reads TGID_X and TGID_Y after the kernarg pointer: gfx1100/gfx1102 pad to 16 - 2 = 14 user SGPRs,
  gfx1101 keeps the 2 it uses (clang-19's figures: test_user_sgpr_counts_are_clang_19s)."""
  counts = {a: _kernel(hcq_compile(examples.grid_2d().sink, a)).descriptor.user_sgpr_count for a in RDNA3}
  assert counts == {"gfx1100": 14, "gfx1101": 2, "gfx1102": 14}


@pytest.mark.tools("clang-19")
def test_user_sgpr_counts_are_clang_19s(tmp_path):
  src = tmp_path / "k.cl"
  src.write_text("__kernel void k(__global int *a) { a[__builtin_amdgcn_workgroup_id_x()] = 1; }\n")
  for arch in RDNA3:
    obj = tmp_path / f"{arch}.o"
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-O2",
                    "-nogpulib", "-c", str(src), "-o", str(obj)], check=True, timeout=120)
    theirs = _kernel(obj.read_bytes()).descriptor.user_sgpr_count
    ours = _kernel(hcq_compile(examples.elementwise_add().sink, arch)).descriptor.user_sgpr_count
    assert theirs == ours, (arch, theirs, ours)


@pytest.mark.parametrize("arch,vgprs,fits", [
  # clang-19 under amdgpu_flat_work_group_size(1, N) (render.VGPR_FILE): the most VGPRs that still fit N work-items
  ("gfx1101", 192, 1024), ("gfx1101", 240, 768), ("gfx1102", 128, 1024), ("gfx1102", 160, 768)])
def test_vgpr_file_and_granule_per_target(arch, vgprs, fits):
  assert max_flat_workgroup_size("k", vgprs, None, arch) >= fits
  assert max_flat_workgroup_size("k", vgprs + 1, None, arch) < fits


@pytest.mark.tools("llvm-objdump-19")
@pytest.mark.parametrize("arch", ("gfx1101", "gfx1102"))
def test_llvm_objdump_decodes_every_example_as_we_do(arch):
  assert sum(objdump_agrees(hcq_compile(make().sink, arch), arch) for make in examples.ALL) > 200


def test_hcq_disasm_accepts_the_targets(tmp_path, capsys):
  from hcq.cli import main
  path = tmp_path / "k.co"
  path.write_bytes(hcq_compile(examples.elementwise_add().sink, "gfx1101"))
  assert main(["disasm", str(path)]) == 0
  out = capsys.readouterr().out
  assert "s_load_b64" in out and "s_endpgm" in out, out
  (path.parent / "raw.bin").write_bytes(bytes.fromhex("00009fbf"))
  assert main(["disasm", "--raw", "--mcpu", "gfx1102", str(path.parent / "raw.bin")]) == 0
  assert "s_code_end" in capsys.readouterr().out
