"""gfx1200 (RDNA4) tables from the same generator: ALU, DS, SMEM, VFLAT/VSCRATCH/VGLOBAL and VBUFFER formats,
checked against llvm-mc-19 / llvm-objdump-19 (-mcpu=gfx1200). Image and export formats are not tabulated yet."""
import re
import subprocess

import pytest

from hcq.autogen.isa.llvm_oracle import assemble, disassemble
from hcq.compiler.isa.amd.asm import Assembler
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.decode import decode, decode_all

from .forms import sample_words

# not modelled for gfx1200 yet: exports, s_version names, s_*prefetch* operand forms, byte_sel (fp8 conversions)
SKIP = ("export", "s_version", "s_prefetch", "s_buffer_prefetch")


@pytest.fixture(scope="module")
def forms():
  words = sample_words(per_opcode=3, seed=11, arch="gfx1200")
  out = []
  for res in disassemble(words, "gfx1200"):
    if res and "nvalid" not in res[0][0] and not res[0][0].startswith(SKIP) and "byte_sel" not in res[0][0]:
      out.append(res[0])
  return out


@pytest.mark.tools("llvm-mc-19")
def test_gfx1200_decode_prints_llvm_text(forms):
  bad = [(t, str(decode(e + bytes(12), arch="gfx1200"))) for t, e in forms
         if " ".join(str(decode(e + bytes(12), arch="gfx1200")).split()) != " ".join(t.split())]
  encs = {decode(e + bytes(12), arch="gfx1200").encoding for _, e in forms}
  assert {"SMEM", "VGLOBAL", "VFLAT", "VSCRATCH", "VBUFFER", "VOPD", "VOP3", "DS"} <= encs
  assert len(forms) > 3000 and len(bad) <= len(forms) // 200, bad[:10]


@pytest.mark.tools("llvm-mc-19")
def test_gfx1200_encode_matches_llvm_mc(forms):
  texts = [t for t, _ in forms]
  asm, bad, n = Assembler("gfx1200"), [], 0
  for text, r in zip(texts, assemble(texts, "gfx1200")):
    if isinstance(r, str): continue
    n += 1
    try: mine = asm.assemble_line(text)
    except Exception as e: mine = f"{type(e).__name__}: {e}"
    if mine != r[1]: bad.append((text, r[1].hex(), mine))
  assert n > 3000 and not bad, bad[:10]


@pytest.mark.tools("clang-19", "ld.lld-19", "llvm-objdump-19")
def test_gfx1200_kernel_matches_objdump(tmp_path):
  src = tmp_path / "k.cl"
  src.write_text("__kernel void k(__global float *a, __global const float *b) {\n"
                 "  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();\n"
                 "  a[i] = a[i] * 2.0f + b[i]; }\n")
  hsaco = tmp_path / "k.hsaco"
  subprocess.run(["clang-19", "-x", "cl", "-Xclang", "-finclude-default-header", "-target", "amdgcn-amd-amdhsa",
                  "-mcpu=gfx1200", "-mcode-object-version=5", "-O2", "-nogpulib", str(src), "-o", str(hsaco)], check=True)
  out = subprocess.run(["llvm-objdump-19", "-d", "--mcpu=gfx1200", str(hsaco)], capture_output=True, text=True,
                       check=True).stdout
  ref = {int(m.group(2), 16): " ".join(m.group(1).split())
         for m in re.finditer(r"^\s+(\S.*?)\s*// ([0-9A-F]{12}):", out, re.M)}
  co = CodeObject.parse(hsaco.read_bytes())
  assert co.target == "amdgcn-amd-amdhsa--gfx1200"
  k = co.kernels["k"]
  insts = decode_all(k.code, arch="gfx1200")
  assert any(i.encoding == "VGLOBAL" for i in insts)
  for i in insts:
    assert " ".join(str(i).split()) == ref[k.entry_address + i.offset]
    assert Assembler("gfx1200").assemble_line(str(i)) == i.data
