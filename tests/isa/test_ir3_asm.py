"""hcq's ir3 assembler (compiler/isa/ir3/asm.py): Mesa 25's disasm.c text assembles to Mesa's own instruction words,
and Mesa's computerator example programs assemble (labels, directives, the parser's spellings) into words whose
disassembly is their source."""
from __future__ import annotations

import glob
import importlib
import os
import struct
import time

import pytest

from tests.hangguard import ends

from hcq.compiler.isa.ir3.asm import Assembler, AsmError, canonical
from hcq.compiler.isa.ir3.isa import ISA
from hcq.config import from_env

from .mesa_disasm_vectors import load_fixture
from .test_ir3_disasm import GPU_IDS, vectors  # noqa: F401   (the fixture: Mesa's disasm.c vectors)

generator = importlib.import_module("hcq.autogen.generator")


@pytest.mark.parametrize("gen", ["6XX", "7XX", "5XX", "4XX"])
def test_every_mesa_vector_assembles_to_mesas_word(vectors, gen):  # noqa: F811
  """disasm.c's second check: the expected text assembles to the vector's word (a vector marked .parse_fail, which
  Mesa's own assembler cannot read, is left out as Mesa leaves it out; Mesa 25.0.7 marks none)."""
  asm = Assembler(GPU_IDS[gen])
  failing = {int(v["word"], 16) for v in load_fixture()["vectors"] if v["parse_fail"]}
  mine = [(w, t) for g, w, t in vectors if g == gen and w not in failing]
  assert mine
  wrong, t0 = [], time.perf_counter()
  for word, text in mine:
    try: got = asm.assemble_line(text)
    except AsmError as e: got = str(e)
    if got != word: wrong.append((text, f"{word:016x}", got if isinstance(got, str) else f"{got:016x}"))
  assert not wrong, f"{len(wrong)} of {len(mine)} {gen} vectors assemble to other words, e.g. {wrong[:5]}"
  print(f"{gen}: {len(mine)} of {len(mine)} vectors give Mesa's words ({(time.perf_counter() - t0) * 1e3:.0f} ms)")


def computerator_examples() -> list[str]:
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  try: folder = roots.path("mesa:src/freedreno/computerator/examples")
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")
  return sorted(glob.glob(os.path.join(folder, "*.asm")))


def test_mesas_computerator_examples_assemble_and_read_back():
  files = computerator_examples()
  assert len(files) >= 6
  asm, isa = Assembler(630), ISA(630)
  for path in files:
    src = open(path).read()
    code = asm.assemble(src)
    body = [line for line in (canonical(x) for x in src.splitlines())
            if line and not line.startswith("@") and not line.endswith(":")]
    words = [struct.unpack("<Q", code[i:i + 8])[0] for i in range(0, len(code), 8)]
    assert len(words) == len(body), path
    for word, line in zip(words, body):
      got = canonical(isa.disasm_word(word))
      if "#" in line and not line.split("#")[1][:1].lstrip("-").isdigit(): continue   # a label operand: below
      assert got == line, f"{os.path.basename(path)}: {line!r} -> {got!r}"


def test_labels_become_offsets_from_the_branch():
  code = Assembler(630).assemble("""
    cmps.u.gt p0.x, r0.x, 0
    br !p0.x, #skip   ; forward
    nop
    skip:
    (jp)nop
    br p0.x, #start2
    start2: end
  """)
  isa = ISA(630)
  text = [isa.disasm_word(struct.unpack("<Q", code[i:i + 8])[0]) for i in range(0, len(code), 8)]
  assert text == ["cmps.u.gt p0.x, r0.x, 0", "br !p0.x, #2", "nop", "(jp)nop", "br p0.x, #1", "end"]


def test_the_parsers_spellings_are_accepted():
  asm = Assembler(630)
  assert asm.assemble_line("nop(sy)") == asm.assemble_line("(sy)nop")
  assert asm.assemble_line("stp.u32 p[r0.x + 0], r1.x, 1") == asm.assemble_line("stp.u32 p[r0.x], r1.x, 1")
  assert asm.assemble_line("mov.u32u32 r0.x, 0x12345678") == asm.assemble_line("mov.u32u32 r0.x, 305419896")


def test_bad_lines_are_errors_naming_them():
  asm = Assembler(630)
  with pytest.raises(AsmError, match="frobnicate"): asm.assemble_line("frobnicate r0.x")
  with pytest.raises(AsmError, match="line 2"): asm.assemble("nop\nadd.f r0.x, r0.y\n")
  with pytest.raises(AsmError, match="no label 'nowhere'"): asm.assemble("br p0.x, #nowhere\n")
  with pytest.raises(AsmError, match="defined twice"): asm.assemble("a: nop\na: nop\n")


def test_hostile_lines_are_errors_and_quick():
  """Junk, very long lines, many operands and numbers of thousands of digits are AsmErrors (never a traceback), each
  in well under a second (the search over unshown fields is bounded)."""
  asm = Assembler(630)
  lines = ["x" * 100_000, "add.f " + ", ".join(["r0.x"] * 200), "(sy)" * 500 + "nop",
           "mov.f32f32 r0.x, " + "9" * 5000, "add.f r0.x, r0.y, 0x" + "f" * 4000, "mov.u32u32 r0.x, c<a0.x + -999999999999>"]
  for line in lines:
    with pytest.raises(AsmError): ends(asm.assemble_line, line)     # refused, never a search without end
