"""hcq's ir3 disassembler against Mesa's own test vectors: src/freedreno/ir3/tests/disasm.c lists instruction words
with the text Mesa's disassembler prints for them (INSTR_6XX for gpu 630, INSTR_5XX 540, INSTR_4XX 420). The file
comes from the pinned Mesa source package (autogen/manifest.json "mesa"); the tests skip where it cannot be had."""
from __future__ import annotations

import importlib
import re
import struct

import pytest

from hcq.cli import main
from hcq.compiler.backend.ir3.isa import ISA, DecodeError
from hcq.config import from_env

generator = importlib.import_module("hcq.autogen.generator")
GPU_IDS = {"6XX": 630, "5XX": 540, "4XX": 420}


def mesa_vectors() -> list[tuple[str, int, str]]:
  manifest = generator.load_manifest()
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  try: path = roots.path("mesa:src/freedreno/ir3/tests/disasm.c")
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")
  src = open(path).read()
  src = re.sub(r"#if 0.*?#else", "", src, flags=re.S)              # the disabled alternatives
  src = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("//"))
  out = []
  for gen, hi, lo, text in re.findall(r'INSTR_(\dXX)\(([0-9a-f]{8})_([0-9a-f]{8}),\s*"((?:[^"\\]|\\.)*)"', src):
    out.append((gen, int(hi + lo, 16), text.encode().decode("unicode_escape")))
  return out


@pytest.fixture(scope="module")
def vectors():
  return mesa_vectors()


@pytest.mark.parametrize("gen", ["6XX", "5XX", "4XX"])
def test_every_mesa_vector_disassembles_to_mesas_text(vectors, gen):
  isa = ISA(GPU_IDS[gen])
  mine = [(w, t) for g, w, t in vectors if g == gen]
  assert gen != "6XX" or len(mine) >= 180       # the a6xx vectors are the acceptance set: all of them
  wrong = []
  for word, text in mine:
    try: got = isa.disasm_word(word)
    except DecodeError as e: got = f"<{e}>"
    if got != text: wrong.append((f"{word:016x}", text, got))
  assert not wrong, f"{len(wrong)} of {len(mine)} {gen} vectors differ, e.g. {wrong[:5]}"
  print(f"{gen}: {len(mine)} of {len(mine)} vectors equal Mesa's text")


def test_a_word_of_no_instruction_is_an_error():
  with pytest.raises(DecodeError, match="no #instruction matches"):
    ISA(630).disasm_word(0xc0c00000_00000000)   # disasm.c's own "TODO is this a real instruction?" word


def test_the_generation_decides_the_encoding():
  """The description restricts encodings to generations (<gen min/max>): an a6xx-only form is no instruction on a5xx."""
  word = 0xc0260200_03676100      # disasm.c: "stib.b.untyped.1d.u32.3.imm.base0 r0.x, r0.w, 1" (a6xx)
  assert ISA(630).disasm_word(word).startswith("stib.b.untyped.1d.u32.3")
  with pytest.raises(DecodeError, match="gpu 540"): ISA(540).disasm_word(word)


def test_cli_prints_one_line_per_word(tmp_path, capsys):
  words = [0x20244000_00000020, 0x03000000_00000000, 0xc0060006_0181800f]
  f = tmp_path / "code.bin"
  f.write_bytes(b"".join(struct.pack("<Q", w) for w in words))
  assert main(["disasm", "--isa", "ir3", "--gpu-id", "630", "--raw", str(f)]) == 0
  assert capsys.readouterr().out.splitlines() == ["mov.f32f32 r0.x, c8.x", "end", "ldg.u32 r1.z, g[r1.z+7], 1"]
  f.write_bytes(struct.pack("<Q", 0xc0c00000_00000000) + b"\0\0\0")
  assert main(["disasm", "--isa", "ir3", "--raw", str(f)]) == 1
  err = capsys.readouterr().err
  assert "not a whole number of 64-bit instructions" in err and "Traceback" not in err
  f.write_bytes(struct.pack("<Q", 0xc0c00000_00000000))
  assert main(["disasm", "--isa", "ir3", "--raw", str(f)]) == 1
  cap = capsys.readouterr()
  assert cap.out == "no match: c0c0000000000000\n" and "1 of 1 words" in cap.err
  assert main(["disasm", "--isa", "ir3", "--gpu-id", "9", "--raw", str(f)]) == 2
  assert "--gpu-id 9" in capsys.readouterr().err
