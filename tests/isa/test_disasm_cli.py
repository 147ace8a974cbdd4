"""`hcq disasm` on bad requests: one-line errors naming the file / kernel / target, exit status 1 (2 for a bad
--mcpu), no traceback; undecodable words printed as llvm-objdump-19 prints them; and
--kernel picks one kernel of a code object (checked against llvm-objdump-19's listing of that kernel)."""
import re
import subprocess

import pytest

from hcq.cli import main
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.cowriter import KernelSpec, write_code_object


def _two_kernels(tmp_path):
  blob = write_code_object([KernelSpec("first", assemble("s_mov_b32 s0, 1\ns_endpgm")),
                            KernelSpec("second", assemble("v_add_f32 v1, v1, v0\ns_endpgm"))])
  path = tmp_path / "two.hsaco"
  path.write_bytes(blob)
  return path


def _err(capsys, argv, status=1) -> str:
  assert main(argv) == status
  cap = capsys.readouterr()
  assert "Traceback" not in cap.err and cap.out == ""
  assert cap.err.startswith("hcq disasm: error: ") and cap.err.count("\n") == 1, cap.err
  return cap.err


def test_missing_file(tmp_path, capsys):
  err = _err(capsys, ["disasm", str(tmp_path / "nope.hsaco")])
  assert "nope.hsaco" in err and "No such file" in err


def test_directory(tmp_path, capsys):
  assert "is a folder, not a regular file" in _err(capsys, ["disasm", str(tmp_path)])


def test_not_an_elf(tmp_path, capsys):
  path = tmp_path / "notes.txt"
  path.write_text("hello, this is not machine code\n")
  err = _err(capsys, ["disasm", str(path)])
  assert "notes.txt" in err and "not an ELF" in err and "byte offset 0x0" in err and "--raw" in err


def test_elf_of_another_machine(capsys):
  err = _err(capsys, ["disasm", "/bin/sh"])
  assert "EM_AMDGPU" in err


def test_truncated_code_object(tmp_path, capsys):
  path = tmp_path / "cut.hsaco"
  path.write_bytes(_two_kernels(tmp_path).read_bytes()[:200])
  assert "offset" in _err(capsys, ["disasm", str(path)])


def test_unknown_kernel_lists_the_kernels(tmp_path, capsys):
  err = _err(capsys, ["disasm", str(_two_kernels(tmp_path)), "--kernel", "thrid"])
  assert "'thrid'" in err and "first, second" in err


def test_unknown_mcpu(tmp_path, capsys):
  err = _err(capsys, ["disasm", "--raw", "--mcpu", "gfx9999", str(_two_kernels(tmp_path))], status=2)   # usage
  assert "gfx9999" in err and "gfx1100" in err


@pytest.mark.tools("llvm-objdump-19")
def test_kernel_option_selects_one_kernel(tmp_path, capsys):
  path = _two_kernels(tmp_path)
  assert main(["disasm", str(path), "--kernel", "second"]) == 0
  out = capsys.readouterr().out
  assert "<second>:" in out and "<first>:" not in out
  mine = [" ".join(l.split("//")[0].split()) for l in out.splitlines() if "//" in l]
  ref = subprocess.run(["llvm-objdump-19", "-d", "--mcpu=gfx1100", "--disassemble-symbols=second", str(path)],
                       capture_output=True, text=True, check=True).stdout
  theirs = [" ".join(m.group(1).split()) for m in re.finditer(r"^\s+(\S.*?)\s*// [0-9A-F]{12}:", ref, re.M)]
  assert mine == theirs[:len(mine)] and mine == ["v_add_f32_e32 v1, v1, v0", "s_endpgm"], (mine, theirs)


def test_output_closed_early_is_not_an_error(tmp_path):
  """`hcq disasm --raw BIG | head -1`: the reader goes away early; no BrokenPipeError traceback, exit status 0."""
  path = tmp_path / "nops.bin"
  path.write_bytes(assemble("s_nop 0") * 20_000)   # ~1.8 MB of text: far more than a pipe buffers
  from tests.pipes import first_line_then_close
  rc, first, err = first_line_then_close(["disasm", "--raw", str(path)])
  assert rc == 0 and first.split("//")[0].strip() == "s_nop 0", (rc, first, err)
  assert "Traceback" not in err and "BrokenPipe" not in err, err


BAD = (0x180 << 23 | 0x1234).to_bytes(4, "little")   # identifying bits 0x180: no gfx1100 encoding
UNDECODABLE = {   # raw code -> its listing, as llvm-objdump-19 prints it (see the test below)
  "bad word": (assemble("s_nop 0") + BAD + assemble("v_add_f32 v1, v1, v0\ns_endpgm"),
               ["s_nop 0", ".long 0xc0001234", "v_add_f32_e32 v1, v1, v0", "s_endpgm"]),
  "trailing bytes": (assemble("s_nop 0\ns_endpgm") + b"\x01\x02", ["s_nop 0", "s_endpgm", ".byte 0x01, 0x02"]),
  "literal cut off": (assemble("s_nop 0") + assemble("s_mov_b32 s0, 0x12345678")[:4], ["s_nop 0", ".long 0xbe8000ff"]),
}


def _listing(out: str) -> list[tuple[str, str]]:
  return [(" ".join(m.group(1).split()), m.group(2)) for m in re.finditer(r"^\s+(\S.*?)\s*// [0-9A-F]{12}: (.*)$", out, re.M)]


@pytest.mark.parametrize("case", UNDECODABLE)
def test_raw_listing_goes_on_past_an_undecodable_word(case, tmp_path, capsys):
  """One bad dword used to make `hcq disasm --raw` print nothing but an error; llvm-objdump prints it as data and
  goes on."""
  code, want = UNDECODABLE[case]
  path = tmp_path / "code.bin"
  path.write_bytes(code)
  assert main(["disasm", "--raw", str(path)]) == 0
  got = _listing(capsys.readouterr().out)
  assert [t for t, _ in got] == want
  if case == "trailing bytes": assert got[-1][1] == "01 02"


def test_code_object_listing_goes_on_past_an_undecodable_word(tmp_path, capsys):
  path = tmp_path / "k.hsaco"
  path.write_bytes(write_code_object([KernelSpec("k", UNDECODABLE["bad word"][0])]))
  assert main(["disasm", str(path)]) == 0
  assert [t for t, _ in _listing(capsys.readouterr().out)] == UNDECODABLE["bad word"][1]


@pytest.mark.tools("llvm-objdump-19", "llvm-objcopy-19")
@pytest.mark.parametrize("case", UNDECODABLE)
def test_undecodable_words_match_llvm_objdump(case, tmp_path, capsys):
  """llvm-objdump-19 reads no raw binary (no -b binary): the bytes go into an ELF .data section with llvm-objcopy-19
  and are disassembled with -D, as hcq disasm --raw disassembles the file."""
  path, obj = tmp_path / "code.bin", tmp_path / "code.o"
  path.write_bytes(UNDECODABLE[case][0])
  subprocess.run(["llvm-objcopy-19", "-I", "binary", "-O", "elf64-x86-64", str(path), str(obj)], check=True, timeout=60)
  ref = subprocess.run(["llvm-objdump-19", "-D", "-j", ".data", "--mcpu=gfx1100", "--triple=amdgcn-amd-amdhsa", str(obj)],
                       capture_output=True, text=True, check=True, timeout=60).stdout
  assert main(["disasm", "--raw", str(path)]) == 0
  assert _listing(capsys.readouterr().out) == _listing(ref)
