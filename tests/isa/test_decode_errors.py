"""Bad machine code and bad assembly: clear errors that name the byte offset (or the line)."""
import pytest

from hcq.compiler.isa.amd.asm import Asm, assemble, v, s
from hcq.compiler.isa.amd.decode import decode, decode_all
from hcq.compiler.isa.amd.errors import AssembleError, DecodeError


def test_truncated_instruction():
  code = assemble("s_endpgm\nv_add_f32_e64 v1, v2, v3")
  with pytest.raises(DecodeError, match="offset 0x4"): decode_all(code[:-2])
  lit = assemble("v_add_f32 v1, 0x12345678, v3")
  assert len(lit) == 8 and decode(lit).literal == 0x12345678 and decode(lit).size == 8
  with pytest.raises(DecodeError, match="literal.*offset 0x0"): decode(lit[:4])


def test_unknown_opcode():
  with pytest.raises(DecodeError, match=r"unknown SOPP opcode 127 .* at byte offset 0x8"):
    decode_all(assemble("s_nop 0\ns_nop 0") + (0xbfff0000).to_bytes(4, "little"))
  with pytest.raises(DecodeError, match="offset"): decode(b"\xff\xff\xff\xff")


def test_inst_fields_and_operands():
  i = decode(assemble("v_add_f32_e64 v5, -v2, |s3| clamp"))
  assert (i.name, i.encoding, i.opcode, i.size) == ("v_add_f32_e64", "VOP3", 0x103, 8)
  assert i.fields["vdst"] == 5 and i.fields["src0"] == 258 and i.fields["src1"] == 3
  assert i.fields["neg"] == 1 and i.fields["abs"] == 2 and i.fields["clmp"] == 1
  kinds = [(o.kind, o.index, o.count) for o in i.operands]
  assert kinds == [("vgpr", 5, 1), ("vgpr", 2, 1), ("sgpr", 3, 1)]
  i = decode(assemble("s_load_b64 s[4:5], s[0:1], 0x10"))
  assert i.encoding == "SMEM" and i.fields["sbase"] == 0 and i.fields["sdata"] == 4 and i.fields["offset"] == 0x10
  i = decode(assemble("v_mul_f32 v1, 2.0, v1"))
  assert i.operands[1].kind == "float" and i.operands[1].value == 2.0
  i = decode(assemble("v_dual_mul_f32 v10, v20, v30 :: v_dual_add_f32 v11, v41, v51"))
  assert i.encoding == "VOPD" and str(i) == "v_dual_mul_f32 v10, v20, v30 :: v_dual_add_f32 v11, v41, v51"


def test_out_of_range_operands():
  with pytest.raises(AssembleError, match="v256"): assemble("v_mov_b32 v256, v1")
  with pytest.raises(AssembleError, match="s106"): assemble("s_mov_b32 s106, 0")
  with pytest.raises(AssembleError, match="offset 70000 out of range"): assemble("ds_load_b32 v1, v2 offset:70000")
  with pytest.raises(AssembleError, match="line 2"): assemble("s_nop 0\nv_bogus_op v1")
  with pytest.raises(AssembleError, match="offset 5000 out of range"): assemble("global_load_b32 v1, v[2:3], off offset:5000")


def test_dsl_matches_text():
  a = Asm()
  a.s_load_b128(s[4:7], s[0:1], 0)
  a.v_add_f32_e32(v[2], v[2], v[3])
  a.global_store_b32(v[0:1], v[2], "off", offset=16, glc=True)
  a.v_fma_f32(v[1], -v[2], abs(v[3]), 1.0, clamp=True)
  a.s_endpgm()
  assert a.code == assemble("s_load_b128 s[4:7], s[0:1], null\nv_add_f32_e32 v2, v2, v3\n"
                            "global_store_b32 v[0:1], v2, off offset:16 glc\nv_fma_f32 v1, -v2, |v3|, 1.0 clamp\ns_endpgm")


@pytest.mark.tools("llvm-mc-19")
def test_labels_and_branches_match_llvm_mc(tmp_path):
  import subprocess
  src = """s_mov_b32 s0, 0
loop:
  s_add_u32 s0, s0, 1
  s_cmp_lt_u32 s0, 10
  s_cbranch_scc1 loop
  s_branch done
  v_add_f32 v1, 0x40490fdb, v1
done:
  s_endpgm"""
  (tmp_path / "a.s").write_text(src + "\n")
  subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-filetype=obj", str(tmp_path / "a.s"),
                  "-o", str(tmp_path / "a.o")], check=True)
  from hcq.compiler.isa.amd.elf import parse_elf
  elf = parse_elf((tmp_path / "a.o").read_bytes())
  assert assemble(src) == elf.section_bytes(elf.section(".text"))
  a = Asm()
  a.s_mov_b32(s[0], 0)
  a.label("loop")
  a.s_add_u32(s[0], s[0], 1)
  a.s_cmp_lt_u32(s[0], 10)
  a.s_cbranch_scc1("loop")
  a.s_branch("done")
  a.v_add_f32(v[1], 0x40490fdb, v[1])
  a.label("done")
  a.s_endpgm()
  assert a.code == assemble(src)
  with pytest.raises(AssembleError, match="undefined label 'nowhere'.*line 1"): assemble("s_branch nowhere")


def test_smem_offsets_are_signed_21_bit_on_gfx11_and_24_bit_on_gfx12():
  """The ranges and encodings of llvm-mc-19 (-show-encoding; outside them: "expected a 21-bit signed offset"): a
  bigger offset is an error, not silently cut to its low bits."""
  enc = lambda text, arch="gfx1100": assemble(text, arch).hex()  # noqa: E731
  assert enc("s_load_b32 s1, s[0:1], 0xfffff") == "400000f4ffff0ff8"
  assert enc("s_load_b32 s1, s[0:1], -0x1") == "400000f4ffff1ff8"
  assert enc("s_load_b32 s1, s[0:1], -0x100000") == "400000f4000010f8"
  for bad in ("0x100000", "-0x100001", "0x2000000"):
    with pytest.raises(AssembleError, match="s_load_b32: offset .* is not a 21-bit signed offset"):
      assemble(f"s_load_b32 s1, s[0:1], {bad}")
  assert enc("s_load_b32 s1, s[0:1], 0x7fffff", "gfx1200") == "400000f4ffff7ff8"
  assert enc("s_load_b32 s1, s[0:1], -0x800000", "gfx1200") == "400000f4000080f8"
  with pytest.raises(AssembleError, match="not a 24-bit signed offset"): assemble("s_load_b32 s1, s[0:1], 0x800000", "gfx1200")


def test_nsa_address_lists_are_checked_as_llvm_mc_checks_them():
  """gfx11 MIMG-NSA: encodings as llvm-mc-19 -show-encoding gives them; a list with a non-VGPR, a range before the
  last address, or a register count the opcode and dim do not take is an error (llvm-mc-19: "invalid operand",
  "image address size does not match dim and a16"), not an instruction built from part of it."""
  tail = "s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_"
  assert assemble(f"image_sample v[0:3], [v4, v8, v5], {tail}3D").hex() == "090f6cf00400000808050000"
  assert assemble(f"image_sample v[0:3], [v4, v8], {tail}2D").hex() == "050f6cf00400000808000000"
  with pytest.raises(AssembleError, match="'s8' in the address list .* is not a VGPR"):
    assemble(f"image_sample v[0:3], [v4, s8], {tail}2D")
  with pytest.raises(AssembleError, match="has 3 VGPRs .* need 2"):
    assemble(f"image_sample v[0:3], [v4, v8, v9], {tail}2D")
  with pytest.raises(AssembleError, match="only the last address"):
    assemble(f"image_sample v[0:3], [v[4:5], v8], {tail}3D")
