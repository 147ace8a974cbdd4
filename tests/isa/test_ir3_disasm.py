"""hcq's ir3 disassembler against Mesa's own test vectors: src/freedreno/ir3/tests/disasm.c of Mesa 25.0.7 (Debian
trixie's source package, the pin of autogen/manifest.json "mesa") lists instruction words with the text Mesa's
disassembler prints for them (a4xx, a5xx, a6xx and a7xx). They are kept, as read off that file by
tests/isa/mesa_disasm_vectors.py, in tests/fixtures/ir3/mesa_25.0.7_disasm_vectors.json; where the Mesa package is
at hand, the fixture is held equal to what the file gives."""
from __future__ import annotations

import collections
import importlib
import json
import struct
import time

import pytest

from hcq.cli import main
from hcq.compiler.isa.ir3.isa import ISA, DecodeError
from hcq.config import from_env

from .mesa_disasm_vectors import fixture_data, isa_gpu_id, load_fixture

generator = importlib.import_module("hcq.autogen.generator")
GPU_IDS = {"4XX": 420, "5XX": 540, "6XX": 630, "7XX": 730}
GENS = {400: "4XX", 500: "5XX", 600: "6XX", 700: "7XX"}


def mesa_vectors() -> list[tuple[str, int, str]]:
  """(generation, word, Mesa's text) of every vector of the fixture."""
  return [(GENS[isa_gpu_id(v)], int(v["word"], 16), v["text"]) for v in load_fixture()["vectors"]]


@pytest.fixture(scope="module")
def vectors():
  return mesa_vectors()


def test_the_fixture_is_what_mesas_file_gives():
  """The fixture is disasm.c read by mesa_disasm_vectors.parse (tables, #if 0/#else, the generated stib/ldib
  vectors); checked against the pinned package's file where it can be had."""
  manifest = generator.load_manifest()
  assert manifest["packages"]["mesa"]["version"] == "25.0.7-2+deb13u1"
  roots = generator.Roots(manifest, from_env().autogen_cache, lambda *a: None)
  try: path = roots.path("mesa:src/freedreno/ir3/tests/disasm.c")
  except Exception as e: pytest.skip(f"the Mesa source package is not available here: {e}")
  assert fixture_data(path) == load_fixture()


def test_the_fixture_holds_every_generation():
  count = collections.Counter(g for g, _, _ in mesa_vectors())
  # disasm.c of Mesa 25.0.7: 216 a6xx table vectors + 60 generated (stib/ldib offsets 1..30), 37 a7xx, 22 a5xx, 2 a4xx
  assert count == {"6XX": 276, "7XX": 37, "5XX": 22, "4XX": 2}
  texts = {t for _, _, t in mesa_vectors()}
  for new in ("shfl.up.u32 r1.z, r0.x, 5", "ldg.k.u32 c[16], g[r48.x+208], 1", "stc.u32 c[32], r0.x, 3", "sleep.l",
              "dccln.all", "tcinv", "ccinv", "lock"):
    assert new in texts


def _mesa_text(isa: ISA, word: int) -> str:
  """What disasm.c's main() compares: ir3_isa_disasm with show_errors and no_match_cb = print_raw."""
  try: return isa.disasm_word(word, errors=True)
  except DecodeError: return isa.no_match_text(word, "raw")


@pytest.mark.parametrize("gen", ["6XX", "7XX", "5XX", "4XX"])
def test_every_mesa_vector_disassembles_to_mesas_text(vectors, gen):
  isa = ISA(GPU_IDS[gen])
  mine = [(w, t) for g, w, t in vectors if g == gen]
  wrong = [(f"{w:016x}", t, got) for w, t in mine if (got := _mesa_text(isa, w)) != t]
  assert not wrong, f"{len(wrong)} of {len(mine)} {gen} vectors differ, e.g. {wrong[:5]}"
  print(f"{gen}: {len(mine)} of {len(mine)} vectors equal Mesa's text")


@pytest.mark.parametrize("gen,gpu_id", [("6XX", 630), ("7XX", 730), ("7XX", 740), ("5XX", 540), ("4XX", 420)])
def test_cli_prints_mesas_text_for_every_vector(vectors, gen, gpu_id, tmp_path, capsys):
  """`hcq disasm --isa ir3 --no-match raw`, all of a generation's vectors in one file: one line each, Mesa's."""
  mine = [(w, t) for g, w, t in vectors if g == gen]
  f = tmp_path / "vectors.bin"
  f.write_bytes(b"".join(struct.pack("<Q", w) for w, _ in mine))
  rc = main(["disasm", "--isa", "ir3", "--gpu-id", str(gpu_id), "--no-match", "raw", "--raw", str(f)])
  out = capsys.readouterr().out.splitlines()
  assert out == [t for _, t in mine]
  # a word that is no instruction (disasm.c's ffffffff_ffffffff) is printed as Mesa prints it and fails the run
  assert rc == (1 if any(t.startswith("raw 0x") for _, t in mine) else 0)


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


def test_a_word_whose_operand_matches_nothing_is_reported(tmp_path, capsys):
  """The instruction matches but an operand does not: the line carries Mesa's "\\t; <errors>" and the exit status
  is 1 (the text alone would be a shortened instruction)."""
  f = tmp_path / "bad.bin"
  f.write_bytes(struct.pack("<Q", 0x78e510617311d8a3))
  assert main(["disasm", "--isa", "ir3", "--raw", str(f)]) == 1
  cap = capsys.readouterr()
  assert "\t; " in cap.out and "1 of 1 words" in cap.err


def _load_oracle() -> dict:
  from .mesa_ir3_oracle import FIXTURE
  with open(FIXTURE) as f: return json.load(f)


@pytest.mark.parametrize("gen", [600, 700, 500, 400])
def test_mesas_own_decoder_agrees_on_random_words(gen):
  """Mesa 25's decoder itself (built from the pinned package by tests/isa/mesa_ir3_oracle.py) on random words of every
  instruction of the generation, decode warnings included: the fixture holds its text for each."""
  pairs = _load_oracle()["gens"][str(gen)]
  isa = ISA(gen)
  wrong = [(w, t, got) for w, t in pairs if (got := _mesa_text(isa, int(w, 16))) != t]
  assert len(pairs) > 300 and not wrong, f"{len(wrong)} of {len(pairs)} words differ from Mesa's decoder, e.g. {wrong[:3]}"
  print(f"gen {gen}: {len(pairs)} of {len(pairs)} random words equal Mesa's decoder")


@pytest.mark.slow
@pytest.mark.tools("gcc")
def test_mesas_own_decoder_agrees_on_fresh_random_words():
  """The same with Mesa's decoder built here and new words (needs the Mesa package, gcc and mako)."""
  pytest.importorskip("mako")
  from . import mesa_ir3_oracle
  try: data = mesa_ir3_oracle.oracle(seed=time.time_ns() & 0xFFFF, per_leaf=4)
  except Exception as e: pytest.skip(f"Mesa's decoder cannot be built here: {e}")
  for gen, pairs in data["gens"].items():
    isa = ISA(int(gen))
    wrong = [(w, t, got) for w, t in pairs if (got := _mesa_text(isa, int(w, 16))) != t]
    assert not wrong, f"seed {data['seed']}, gen {gen}: {len(wrong)} of {len(pairs)} differ, e.g. {wrong[:3]}"


def test_cli_takes_a_chip_id_as_mesas_ir3_disasm_does(tmp_path, capsys):
  """--chip-id: the generation of the device Mesa's table gives for it (a740's 0x43050a01 is a7xx: disasm.c's
  a7xx isam vector; a630's chip id decodes the same word as a6xx, another text)."""
  f = tmp_path / "w.bin"
  f.write_bytes(struct.pack("<Q", 0xa0081f02_e2000001))
  assert main(["disasm", "--isa", "ir3", "--chip-id", "43050a01", "--raw", str(f)]) == 0
  assert capsys.readouterr().out == "isam.base0.1d (f32)(xyzw)r0.z, r0.x, t#16, a1.x\n"
  main(["disasm", "--isa", "ir3", "--chip-id", "06030001", "--raw", str(f)])
  a6xx = capsys.readouterr().out
  assert a6xx == ISA(630).disasm_word(0xa0081f02_e2000001, errors=True) + "\n" and "t#16" not in a6xx
  assert main(["disasm", "--isa", "ir3", "--chip-id", "12345678", "--raw", str(f)]) == 2
  assert "no Adreno of that chip id" in capsys.readouterr().err
  assert main(["disasm", "--chip-id", "43050a01", str(f)]) == 2
