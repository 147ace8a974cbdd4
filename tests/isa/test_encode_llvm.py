"""A generated sample of >= 5,000 instruction forms (every opcode of every encoding, varied operands): llvm-mc-19
disassembles the words (giving its text), then hcq must (1) print the same text from the same bytes and (2) encode
that text exactly as `llvm-mc-19 -show-encoding` does. Forms we do not model are listed in SKIP and counted."""
import pytest

from hcq.autogen.isa.llvm_oracle import assemble, disassemble
from hcq.compiler.isa.amd.asm import Assembler
from hcq.compiler.isa.amd.decode import decode

from .forms import sample_words

# text syntaxes not modelled (decoded, but printed/parsed differently from LLVM): image atomics with unusual dmask,
# s_version names, integer sext() source modifiers.
SKIP = ("image_atomic", "s_version")


@pytest.fixture(scope="module")
def llvm_forms():
  words = sample_words(per_opcode=5, seed=7)
  forms = []
  for w, res in zip(words, disassemble(words)):
    if not res or "nvalid" in res[0][0]: continue
    text, enc = res[0]
    if text.startswith(SKIP) or "sext(" in text: continue
    forms.append((text, enc))
  return forms


@pytest.mark.tools("llvm-mc-19")
def test_every_encoding_covered(llvm_forms):
  encs = {decode(enc + bytes(8)).encoding for _, enc in llvm_forms}
  for e in ("SOP1", "SOP2", "SOPK", "SOPC", "SOPP", "SMEM", "VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC", "VOP3P",
            "VOPD", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "MIMG", "VINTERP", "LDSDIR", "EXP"):
    assert e in encs, e


@pytest.mark.tools("llvm-mc-19")
def test_decode_prints_llvm_text(llvm_forms):
  bad = [(t, str(decode(enc + bytes(8)))) for t, enc in llvm_forms if " ".join(str(decode(enc + bytes(8))).split()) != " ".join(t.split())]
  # known gap (~0.25%): 16-bit integer VOP3 ops print inline float constants as f16 hex (0x3c00), some sources
  # of v_ldexp/v_cvt_pk_u8 take no ABS, v_fmac_f16_e64's op_sel has a 4th (tied) entry, s_sendmsghalt RTN names
  assert len(bad) <= len(llvm_forms) // 200, f"{len(bad)} of {len(llvm_forms)} differ: {bad[:20]}"


@pytest.mark.tools("llvm-mc-19")
def test_encode_matches_llvm_mc(llvm_forms):
  texts = [t for t, _ in llvm_forms]
  ref = assemble(texts)
  asm = Assembler()
  checked, bad = 0, []
  for text, r in zip(texts, ref):
    if isinstance(r, str): continue  # llvm-mc itself rejects it (constant-bus/bank rules): not a form
    checked += 1
    try:
      mine = asm.assemble_line(text)
    except Exception as e:  # report, do not stop
      mine = f"{type(e).__name__}: {e}"
    if mine != r[1]: bad.append((text, r[1].hex(), mine.hex() if isinstance(mine, bytes) else mine))
  assert checked >= 5000, checked
  assert not bad, f"{len(bad)} of {checked} differ: {bad[:10]}"


@pytest.mark.tools("llvm-mc-19")
def test_dpp_forms_decode_and_encode_like_llvm():
  """DPP16 and DPP8 forms of VOP1/VOP2/VOPC/VOP3: printed like llvm-mc's disassembler, encoded like its assembler."""
  from .forms import dpp_words
  words = dpp_words(1)
  forms = [res[0] for res in disassemble(words) if res and "nvalid" not in res[0][0]]
  assert len(forms) > 400
  bad = [(t, str(decode(enc + bytes(8)))) for t, enc in forms
         if "0x" not in t and " ".join(str(decode(enc + bytes(8))).split()) != " ".join(t.split())]
  assert len(bad) <= len(forms) // 100, bad[:10]
  asm, mism = Assembler(), []
  texts = [t for t, _ in forms]
  for text, r in zip(texts, assemble(texts)):
    if isinstance(r, str): continue
    if asm.assemble_line(text) != r[1]: mism.append(text)
  assert not mism, mism[:10]


@pytest.mark.tools("llvm-mc-19")
def test_float_literals_take_the_operand_type():
  """A non-inline float constant is encoded in the operand's type (f32, high dword of f64, f16, packed f16)."""
  lines = ["v_add_f64 v[0:1], 1.5, v[2:3]", "v_mul_f16 v1, 1.5, v2", "v_mul_f32 v1, 1.5, v2",
           "v_fma_f64 v[0:1], v[2:3], 3.25, v[4:5]", "v_pk_add_f16 v1, 1.5, v2", "s_mov_b32 s0, 1.5",
           "v_add_f16_e64 v1, 1.5, v2", "v_add_f32 v1, -7.0, v2", "v_mov_b32 v1, 0.15915494"]
  asm = Assembler()
  for line, ref in zip(lines, assemble(lines)):
    assert not isinstance(ref, str), ref
    assert asm.assemble_line(line) == ref[1], line


@pytest.mark.tools("llvm-mc-19")
def test_mimg_a16_and_nsa_addresses_like_llvm():
  """MIMG with 16-bit addresses (A16: packed two to a VGPR) and non-sequential addresses (gfx11 NSA: one dword of
  address bytes after the first two, the last byte starting a range for the rest): llvm-mc-19's text and size, for
  every opcode and DIM, and our assembler gives the same bytes back. Words LLVM prints but will not assemble (an NSA
  form of a single address, sampling an MSAA image) are not forms and are skipped."""
  from hcq.autogen.isa import gfx1100
  from hcq.autogen.isa.gen_rdna3 import encode_fields
  layout = gfx1100.LAYOUTS["MIMG"]
  words = []
  for op, e in sorted(gfx1100.OPS["MIMG"].items()):
    vals = {t[1]: {"vdata": 8, "vaddr": 16, "srsrc": 6, "ssamp": 10}[t[1]] for t in e["operands"] if t[0] == "reg"}
    for dim in range(8):
      for a16 in (0, 1):
        words.append(encode_fields(layout, dict(vals, op=op, dim=dim, dmask=1, a16=a16)) + bytes(8))
        words.append(encode_fields(layout, dict(vals, op=op, dim=dim, dmask=1, a16=a16, nsa=1)) + bytes(range(40, 48)))
  forms = [(w, res[0]) for w, res in zip(words, disassemble(words)) if res and "nvalid" not in res[0][0]]
  valid = [(w, text, enc) for (w, (text, enc)), r in zip(forms, assemble([t for _, (t, _) in forms]))
           if not isinstance(r, str) and r[1] == enc]
  bad = []
  for w, text, enc in valid:
    mine = decode(w)
    if " ".join(str(mine).split()) != " ".join(text.split()) or mine.size != len(enc) or Assembler().assemble_line(str(mine)) != enc:
      bad.append((text, len(enc), str(mine), mine.size))
  assert len(valid) > 1000 and sum("[" in t for _, t, _ in valid) > 400, len(valid)
  assert not bad, f"{len(bad)} of {len(valid)}: {bad[:5]}"
