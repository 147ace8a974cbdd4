"""The emulator's scalar and vector ALU translation tables (mockgpu/amd/emu: xlate_scalar.SALU, xlate_vector
.VALU_SPECIAL): every entry is an instruction some target decodes to (no dead entries), and the SALU instructions of
gfx1100 the table lacks are exactly the known unsupported ones (an entry dropped from the table fails here, before a
kernel meets it as an illegal instruction). Instruction words: tests/isa/forms.py, every opcode of every encoding."""
import importlib.util
import pathlib

import pytest

from hcq.mockgpu.amd.emu.decode import decode
from hcq.mockgpu.amd.emu.translate import NOOPS
from hcq.mockgpu.amd.emu.xlate_scalar import SALU
from hcq.mockgpu.amd.emu.xlate_vector import VALU_SPECIAL

_FORMS = importlib.util.spec_from_file_location("isa_forms", pathlib.Path(__file__).parent.parent / "isa" / "forms.py")
forms = importlib.util.module_from_spec(_FORMS)
_FORMS.loader.exec_module(forms)

ARCHS = ("gfx1100", "gfx1200", "gfx942")
SALU_ENCODINGS = ("SOP1", "SOP2", "SOPC", "SOPK")
VALU_ENCODINGS = ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC")
# gfx1100 SALU instructions the emulator does not run (relative register moves, calls, traps, message returns, ...)
GFX1100_UNSUPPORTED = {"s_bitreplicate_b64_b32", "s_call_b64", "s_cls_i32_i64", "s_movreld_b32", "s_movreld_b64",
                       "s_movrels_b32", "s_movrels_b64", "s_movrelsd_2_b32", "s_quadmask_b64", "s_rfe_b64",
                       "s_sendmsg_rtn_b32", "s_sendmsg_rtn_b64", "s_subvector_loop_begin", "s_subvector_loop_end",
                       "s_wqm_b64"}


def _decoded(arch: str, encodings) -> set[tuple[str, str]]:
  """(encoding, mnemonic) of every instruction the emulator's decoder gives for the sample words of encodings."""
  out = set()
  for w in forms.sample_words(2, seed=3, arch=arch, encodings=encodings):
    try: inst = decode(w + bytes(16), 0, arch)
    except Exception: continue   # a word the hardware would refuse (llvm-mc decides in tests/isa)
    out.add((inst.encoding, inst.name))
  return out


@pytest.fixture(scope="module")
def salu_seen():
  return {arch: _decoded(arch, SALU_ENCODINGS) for arch in ARCHS}


def test_every_salu_table_entry_is_an_instruction_of_some_target(salu_seen):
  seen = set().union(*salu_seen.values())
  assert len(SALU) > 100 and not sorted(k for k in SALU if k not in seen)


def test_the_salu_instructions_gfx1100_lacks_are_the_known_ones(salu_seen):
  missing = {n for e, n in salu_seen["gfx1100"] if (e, n) not in SALU and n not in NOOPS}
  assert missing == GFX1100_UNSUPPORTED


def test_every_valu_special_entry_is_an_instruction_of_some_target():
  seen = {n for arch in ARCHS for _, n in _decoded(arch, VALU_ENCODINGS)}
  assert len(VALU_SPECIAL) > 15 and not sorted(n for n in VALU_SPECIAL if n not in seen)
