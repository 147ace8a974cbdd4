"""Every instruction of every kernel of the clang-19 OpenCL corpus (tests/fixtures/opencl, code object v5):
`hcq disasm` prints what llvm-objdump-19 prints, and re-assembling our text gives the original bytes."""
import re
import subprocess

import pytest

from hcq.cli import main as hcq_main
from hcq.compiler.isa.amd.asm import Assembler
from hcq.compiler.isa.amd.codeobject import CodeObject

LINE = re.compile(r"^\s+(\S.*?)\s*// ([0-9A-F]{12}): ([0-9A-F ]+?)( <.*>)?$")


def objdump_listing(path: str, mcpu: str = "gfx1100") -> dict[int, tuple[str, str]]:
  out = subprocess.run(["llvm-objdump-19", "-d", f"--mcpu={mcpu}", path], capture_output=True, text=True, check=True).stdout
  return {int(m.group(2), 16): (" ".join(m.group(1).split()), m.group(3)) for m in map(LINE.match, out.splitlines()) if m}


def hcq_listing(path: str, capsys) -> dict[int, tuple[str, str]]:
  assert hcq_main(["disasm", path]) == 0
  out = capsys.readouterr().out
  return {int(m.group(2), 16): (" ".join(m.group(1).split()), m.group(3)) for m in map(LINE.match, out.splitlines()) if m}


@pytest.mark.tools("llvm-objdump-19")
def test_disasm_matches_llvm_objdump(hsaco_files, capsys):
  total = 0
  for path in hsaco_files:
    ref = objdump_listing(path)
    mine = hcq_listing(path, capsys)
    assert mine, path
    for addr, (text, words) in mine.items():
      assert addr in ref, f"{path}: {addr:#x} not an instruction start for llvm-objdump"
      assert ref[addr] == (text, words), f"{path} @ {addr:#x}: llvm-objdump {ref[addr]} vs hcq {(text, words)}"
      total += 1
  assert total > 1000


def test_reassemble_corpus(hsaco_files):
  from hcq.compiler.isa.amd.decode import decode_all
  asm = Assembler()
  n = 0
  for path in hsaco_files:
    co = CodeObject.parse(open(path, "rb").read())
    for k in co.kernels.values():
      for inst in decode_all(k.code):
        assert asm.assemble_line(str(inst)) == inst.data, f"{path} {k.name}+{inst.offset:#x}: {inst}"
        n += 1
  assert n > 1000
