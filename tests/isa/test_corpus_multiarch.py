"""The clang-19 OpenCL corpus built for gfx1200 (RDNA4) and gfx942 (CDNA3, wave64) by tests/fixtures/opencl/build.py
(hsaco/<mcpu>/*.hsaco): `hcq disasm` prints every instruction of every kernel as llvm-objdump-19 -d --mcpu=<mcpu>
does, compared line by line (text with whitespace runs collapsed, and the instruction words) as the gfx1100 corpus is
in test_corpus_llvm.py."""
import glob
import os

import pytest

from .conftest import CORPUS
from .test_corpus_llvm import hcq_listing, objdump_listing

# instructions compared per target when this test was written (every instruction hcq lists)
MIN_INSTRUCTIONS = {"gfx1200": 2400, "gfx942": 2000}


def corpus(mcpu: str) -> list[str]:
  files = sorted(glob.glob(os.path.join(CORPUS, mcpu, "*.hsaco")))
  if len(files) < 20: pytest.fail(f"{mcpu} corpus has {len(files)} code objects: run tests/fixtures/opencl/build.py")
  return files


@pytest.mark.tools("llvm-objdump-19")
@pytest.mark.parametrize("mcpu", sorted(MIN_INSTRUCTIONS))
def test_disasm_matches_llvm_objdump(mcpu, capsys):
  total, bad = 0, []
  for path in corpus(mcpu):
    ref = objdump_listing(path, mcpu)
    mine = hcq_listing(path, capsys)
    for addr, (text, words) in mine.items():
      total += 1
      if ref.get(addr) != (text, words): bad.append(f"{os.path.basename(path)} @ {addr:#x}: {ref.get(addr)} vs {(text, words)}")
  assert not bad, f"{len(bad)} of {total} {mcpu} instructions differ: " + "\n".join(bad[:20])
  assert total >= MIN_INSTRUCTIONS[mcpu]


@pytest.mark.tools("llvm-mc-19")
@pytest.mark.parametrize("mcpu", sorted(MIN_INSTRUCTIONS))
def test_assembler_matches_llvm_mc_on_the_corpus(mcpu):
  """Every distinct instruction text of the target's corpus (as `hcq disasm` prints it, equal to llvm-objdump's):
  hcq's assembler encodes it as `llvm-mc-19 -show-encoding --mcpu=<mcpu>` does, and as the code object holds it."""
  from hcq.autogen.isa.llvm_oracle import assemble
  from hcq.compiler.isa.amd.asm import Assembler
  from hcq.compiler.isa.amd.codeobject import CodeObject
  from hcq.compiler.isa.amd.decode import decode_all
  seen = {}
  for path in corpus(mcpu):
    co = CodeObject.parse(open(path, "rb").read())
    for k in co.kernels.values():
      for inst in decode_all(k.code, mcpu): seen.setdefault(str(inst), inst.data)
  texts = sorted(seen)
  ref = assemble(texts, mcpu)
  asm = Assembler(mcpu)
  bad = []
  for text, r in zip(texts, ref):
    try: mine = asm.assemble_line(text)
    except Exception as e: mine = f"{type(e).__name__}: {e}"   # reported with the others, not stopping the test
    want = r[1] if not isinstance(r, str) else f"llvm-mc-19 rejects it: {r}"
    if mine != want or mine != seen[text]:
      bad.append(f"{text}: llvm-mc {want!r}, code object {seen[text].hex()}, hcq {mine!r}")
  assert not bad, f"{len(bad)} of {len(texts)} {mcpu} instructions differ: " + "\n".join(bad[:20])
  assert len(texts) > 300


# instruction forms the assembler does not model per target (printed by the disassembler, refused or encoded otherwise
# by the assembler): gfx942 MTBUF (not tabulated) and the gpr_idx() operand; gfx1200 s_(buffer_)prefetch_* SGPR operands,
# export, s_version names, ds_direct_load, v_permlane* op_sel
ASM_UNMODELLED = {"gfx942": ("tbuffer_", "s_set_gpr_idx_"),
                  "gfx1200": ("s_prefetch_", "s_buffer_prefetch_", "export", "s_version", "ds_direct_load",
                              "v_permlane")}


@pytest.mark.tools("llvm-mc-19")
@pytest.mark.parametrize("mcpu", sorted(ASM_UNMODELLED))
def test_assembler_matches_llvm_mc_on_generated_forms(mcpu):
  """Random words of every opcode (tests/isa/forms.py) that llvm-mc-19 disassembles: hcq encodes llvm's text as
  `llvm-mc-19 -show-encoding` does (the gfx1100 check of test_encode_llvm, for the other targets)."""
  from hcq.autogen.isa.llvm_oracle import assemble, disassemble
  from hcq.compiler.isa.amd.asm import Assembler
  from .forms import sample_words
  words = sample_words(per_opcode=3, seed=7, arch=mcpu, skip_prefixes=("v_mfma", "v_smfmac"))
  texts = [res[0][0] for res in disassemble(words, mcpu) if res and "nvalid" not in res[0][0]]
  texts = [t for t in texts if not t.startswith(ASM_UNMODELLED[mcpu])]
  asm, checked, bad = Assembler(mcpu), 0, []
  for text, r in zip(texts, assemble(texts, mcpu)):
    if isinstance(r, str): continue        # llvm-mc rejects its own disassembly (operand rules): not a form
    checked += 1
    try: mine = asm.assemble_line(text)
    except Exception as e: mine = f"{type(e).__name__}: {e}"
    if mine != r[1]: bad.append((text, r[1].hex(), mine.hex() if isinstance(mine, bytes) else mine))
  assert checked >= 3000, checked
  assert not bad, f"{len(bad)} of {checked} differ: {bad[:10]}"
