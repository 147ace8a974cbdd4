"""Code-object reader and writer, checked against llvm-readelf-19 / llvm-objdump-19 / clang-19 output."""
import os
import re
import shutil
import struct
import subprocess

import msgpack
import pytest

from hcq.compiler.isa.amd.asm import Asm
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.cowriter import Arg, KernelSpec, write_code_object
from hcq.compiler.isa.amd.decode import decode_all
from hcq.compiler.isa.amd.errors import CodeObjectError

VADD = """s_load_b128 s[4:7], s[0:1], null
s_load_b64 s[8:9], s[0:1], 0x10
v_and_b32_e32 v0, 0x3ff, v0
v_lshl_add_u32 v0, s15, 6, v0
v_lshlrev_b32_e32 v0, 2, v0
s_waitcnt lgkmcnt(0)
global_load_b32 v1, v0, s[4:5]
global_load_b32 v2, v0, s[6:7]
s_waitcnt vmcnt(0)
v_add_f32_e32 v1, v1, v2
global_store_b32 v0, v1, s[8:9]
s_endpgm"""


def readelf_notes(path: str) -> str:
  return subprocess.run(["llvm-readelf-19", "--notes", path], capture_output=True, text=True, check=True).stdout


def test_corpus_metadata_matches_readelf(hsaco_files):
  for path in hsaco_files[:8]:
    co = CodeObject.parse(open(path, "rb").read())
    assert co.target == "amdgcn-amd-amdhsa--gfx1100" and co.code_object_version == 5
    if shutil.which("llvm-readelf-19") is None: continue
    notes = readelf_notes(path)
    for k in co.kernels.values():
      assert f".name:           {k.name}" in notes
      m = re.search(rf"\.kernarg_segment_size: (\d+)(?:(?!\.name).)*\.name:\s+{k.name}\n", notes, re.S)
      assert m and int(m.group(1)) == k.kernarg_segment_size, (path, k.name)
      assert f".vgpr_count:     {k.vgpr_count}" in notes
      assert k.descriptor.kernarg_size == k.kernarg_segment_size
      assert k.descriptor.wavefront_size32 and k.wavefront_size == 32
      kinds = [a.value_kind for a in k.args]
      for a in k.args: assert f".value_kind:     {a.value_kind}" in notes
      if k.hidden_args: assert "hidden_block_count_x" in kinds


def test_vadd_descriptor_and_hidden_args(hsaco_files):
  path = [p for p in hsaco_files if p.endswith("vadd.hsaco")][0]
  co = CodeObject.parse(open(path, "rb").read())
  k = co.kernels["vadd"]
  # facts from llvm-readelf / the kernel descriptor of clang-19 output (LLVM AMDGPUUsage, "Kernel Descriptor")
  assert k.descriptor.user_sgpr_count == 15 and k.descriptor.enable_sgpr_workgroup_id == (True, False, False)
  assert k.descriptor.user_sgpr_layout() == {"kernarg_segment_ptr": 0, "workgroup_id_x": 15}
  offsets = {a.value_kind: a.offset for a in k.args}
  assert offsets["hidden_block_count_x"] == 24 and offsets["hidden_group_size_x"] == 36
  assert k.code[:4] != b"\0\0\0\0" and (k.entry_address % 256) == 0


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_relocatable_object_applies_rel64(tmp_path):
  src = tmp_path / "k.cl"
  src.write_text("__kernel void k(__global int *p) { p[0] = 42; }\n__kernel void k2(__global int *p) { p[1] = 7; }\n")
  obj = tmp_path / "k.o"
  subprocess.run(["clang-19", "-x", "cl", "-Xclang", "-finclude-default-header", "-target", "amdgcn-amd-amdhsa",
                  "-mcpu=gfx1100", "-mcode-object-version=5", "-O2", "-nogpulib", "-c", str(src), "-o", str(obj)],
                 check=True)
  subprocess.run(["ld.lld-19", "-shared", str(obj), "-o", str(tmp_path / "k.hsaco")], check=True)
  rel = CodeObject.parse(obj.read_bytes())
  exe = CodeObject.parse((tmp_path / "k.hsaco").read_bytes())
  assert rel.elf.type == 1 and exe.elf.type == 3
  for name in ("k", "k2"):
    # after applying R_AMDGPU_REL64 the descriptor points at the same code in both files
    assert rel.kernels[name].code.rstrip(b"\0") [:16] == exe.kernels[name].code[:16]
    assert [str(i) for i in decode_all(rel.kernels[name].code)][:4] == [str(i) for i in decode_all(exe.kernels[name].code)][:4]
    assert rel.kernels[name].descriptor.kernel_code_entry_byte_offset != 0


def written_code_object() -> bytes:
  empty = Asm()
  empty.s_endpgm()
  vadd = Asm()
  for line in VADD.splitlines(): vadd.emit(line)
  args = [Arg(0, 8, "global_buffer", "a"), Arg(8, 8, "global_buffer", "b"), Arg(16, 8, "global_buffer", "c")]
  return write_code_object([KernelSpec("empty", empty.code),
                            KernelSpec("vadd", vadd.code, args, vgpr_count=3, sgpr_count=10)])


@pytest.mark.tools("llvm-objdump-19", "llvm-readelf-19")
def test_written_code_object_accepted_by_llvm(tmp_path):
  path = tmp_path / "w.hsaco"
  path.write_bytes(written_code_object())
  out = subprocess.run(["llvm-objdump-19", "-d", "--mcpu=gfx1100", str(path)], capture_output=True, text=True, check=True).stdout
  insts = [" ".join(m.group(1).split()) for m in re.finditer(r"^\s+(\S.*?)\s*// [0-9A-F]{12}:", out, re.M)]
  assert insts[0] == "s_endpgm"
  assert insts[1:] == VADD.splitlines()
  assert "<vadd>:" in out and "<empty>:" in out
  notes = readelf_notes(str(path))
  assert "NT_AMDGPU_METADATA" in notes and "amdhsa.target:   amdgcn-amd-amdhsa--gfx1100" in notes
  assert ".name:           vadd" in notes and ".kernarg_segment_size: 24" in notes and ".value_kind:     global_buffer" in notes
  co = CodeObject.parse(path.read_bytes())
  assert [str(i) for i in decode_all(co.kernels["vadd"].code)] == VADD.splitlines()
  assert co.kernels["vadd"].descriptor.enable_sgpr_workgroup_id == (True, False, False)
  assert co.kernels["vadd"].descriptor.user_sgpr_layout() == {"kernarg_segment_ptr": 0, "workgroup_id_x": 15}


def test_truncated_and_corrupt_elf_raise_with_offset(hsaco_files):
  data = open(hsaco_files[0], "rb").read()
  for cut in list(range(0, 128, 7)) + list(range(128, len(data), max(1, len(data) // 150))):
    with pytest.raises(CodeObjectError) as e:
      CodeObject.parse(data[:cut])
    assert "offset" in str(e.value)
  # corrupt section header offset, section name index, note sizes
  shoff = struct.unpack_from("<Q", data, 0x28)[0]
  bad = bytearray(data); struct.pack_into("<Q", bad, 0x28, len(data) + 100)
  with pytest.raises(CodeObjectError, match="offset"): CodeObject.parse(bytes(bad))
  bad = bytearray(data); struct.pack_into("<I", bad, shoff + 64 * 1, 0xffffff)
  with pytest.raises(CodeObjectError, match="offset"): CodeObject.parse(bytes(bad))
  bad = bytearray(data); bad[0] = 0
  with pytest.raises(CodeObjectError, match="offset 0x0"): CodeObject.parse(bytes(bad))
  co = CodeObject.parse(data)
  note = co.elf.section(".note")
  bad = bytearray(data); struct.pack_into("<I", bad, note.offset + 4, 0x7fffffff)
  with pytest.raises(CodeObjectError, match="offset"): CodeObject.parse(bytes(bad))
  # random byte flips never escape as IndexError/struct.error
  import random
  rng = random.Random(3)
  for _ in range(300):
    bad = bytearray(data)
    for _ in range(4): bad[rng.randrange(len(bad))] = rng.randrange(256)
    try: CodeObject.parse(bytes(bad))
    except CodeObjectError: pass


def _clang_object(tmp_path, source: str, *flags: str) -> CodeObject:
  """An OpenCL C kernel compiled (not linked) by clang-19 for gfx1100, parsed."""
  src, obj = tmp_path / "k.cl", tmp_path / "k.o"
  src.write_text(source + "\n")
  subprocess.run(["clang-19", "-x", "cl", "-Xclang", "-finclude-default-header", "-target", "amdgcn-amd-amdhsa",
                  "-mcpu=gfx1100", *flags, "-O2", "-nogpulib", "-c", str(src), "-o", str(obj)], check=True, timeout=120)
  return CodeObject.parse(obj.read_bytes())


@pytest.mark.tools("clang-19")
def test_code_object_v4_metadata(tmp_path):
  co = _clang_object(tmp_path, "__kernel void k(__global float *p, int n) { p[__builtin_amdgcn_workitem_id_x()] = n; }",
                     "-mcode-object-version=4")
  assert co.code_object_version == 4 and co.metadata["amdhsa.version"] == [1, 1]
  k = co.kernels["k"]
  assert [(a.offset, a.size, a.value_kind) for a in k.explicit_args] == [(0, 8, "global_buffer"), (8, 4, "by_value")]
  assert k.kernarg_segment_size == k.descriptor.kernarg_size and k.wavefront_size == 32


def test_disasm_raw_cli(tmp_path, capsys):
  from hcq.cli import main
  from hcq.compiler.isa.amd.asm import assemble
  path = tmp_path / "code.bin"
  path.write_bytes(assemble("v_add_f32 v2, v2, v3\ns_load_b32 s2, s[0:1], 0x24\ns_endpgm"))
  assert main(["disasm", "--raw", str(path)]) == 0
  out = capsys.readouterr().out.splitlines()
  assert [" ".join(l.split("//")[0].split()) for l in out] == ["v_add_f32_e32 v2, v2, v3", "s_load_b32 s2, s[0:1], 0x24", "s_endpgm"]
  assert out[1].split("//")[1].strip() == "000000000004: F4000080 F8000024"
  bad = tmp_path / "bad.hsaco"
  bad.write_bytes(b"\x7fELF\x02\x01\x01\x40" + bytes(20))
  assert main(["disasm", str(bad)]) == 1
  assert "offset" in capsys.readouterr().err


@pytest.mark.tools("clang-19")
def test_undefined_symbols_are_reported_not_silently_zero(tmp_path):
  """A relocation against a symbol nothing defines resolves to 0 in the image: the reader must say which symbols."""
  co = _clang_object(tmp_path, "extern void helper(global int *p);\nkernel void k(global int *p) { helper(p); }")
  assert co.undefined_symbols == ["helper"]
