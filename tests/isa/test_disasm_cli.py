"""`hcq disasm` on bad requests: one-line errors naming the file / kernel / target, exit status 1, no traceback; and
--kernel picks one kernel of a code object (checked against llvm-objdump-19's listing of that kernel)."""
import re
import subprocess

import pytest

from hcq.cli import main
from hcq.compiler.backend.amd.asm import assemble
from hcq.compiler.backend.amd.cowriter import KernelSpec, write_code_object


def _two_kernels(tmp_path):
  blob = write_code_object([KernelSpec("first", assemble("s_mov_b32 s0, 1\ns_endpgm")),
                            KernelSpec("second", assemble("v_add_f32 v1, v1, v0\ns_endpgm"))])
  path = tmp_path / "two.hsaco"
  path.write_bytes(blob)
  return path


def _err(capsys, argv) -> str:
  assert main(argv) == 1
  cap = capsys.readouterr()
  assert "Traceback" not in cap.err and cap.out == ""
  assert cap.err.startswith("hcq disasm: error: ") and cap.err.count("\n") == 1, cap.err
  return cap.err


def test_missing_file(tmp_path, capsys):
  err = _err(capsys, ["disasm", str(tmp_path / "nope.hsaco")])
  assert "nope.hsaco" in err and "No such file" in err


def test_directory(tmp_path, capsys):
  assert "Is a directory" in _err(capsys, ["disasm", str(tmp_path)])


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
  err = _err(capsys, ["disasm", "--raw", "--mcpu", "gfx9999", str(_two_kernels(tmp_path))])
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
  import sys
  import threading
  path = tmp_path / "nops.bin"
  path.write_bytes(assemble("s_nop 0") * 20_000)   # ~1.8 MB of text: far more than a pipe buffers
  main_py = "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"
  p = subprocess.Popen([sys.executable, "-c", main_py, "disasm", "--raw", str(path)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
  # every step below is bounded: the watchdog kills a child that hangs before its first line (readline then sees
  # end of file), communicate() waits at most 120 s for the exit and the stderr text
  watchdog = threading.Timer(120, p.kill)
  watchdog.start()
  try:
    first = p.stdout.readline()
    p.stdout.close()
    _, err = p.communicate(timeout=120)
  finally:
    watchdog.cancel()
    if p.poll() is None:
      p.kill()
      p.wait()
  assert p.returncode == 0 and first.split("//")[0].strip() == "s_nop 0", (p.returncode, first, err)
  assert "Traceback" not in err and "BrokenPipe" not in err, err
