"""`hcq decode`, `hcq run` and `hcq demo` as a user runs them."""
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from hcq.cli import main
from hcq.drivers.amd import pm4, sdma

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KERNELS = os.path.join(ROOT, "drivers", "amd", "kernels", "demo.hsaco")


def test_decode_binary_pm4_file(tmp_path, capsys):
  words = pm4.wait_reg_mem(0x1000, 7) + pm4.dispatch_direct(8, 1, 1, 0x8005)
  f = tmp_path / "stream.bin"
  f.write_bytes(struct.pack(f"<{len(words)}I", *words))
  assert main(["decode", str(f)]) == 0
  out = capsys.readouterr().out.splitlines()
  assert out[0].split()[:2] == ["0", "WAIT_REG_MEM"] and "reference=0x7" in out[0]
  assert out[1].split()[:2] == ["7", "DISPATCH_DIRECT"] and "dim_x=8" in out[1]


def test_decode_hex_text_sdma(tmp_path, capsys):
  words = sdma.copy(0x2000, 0x1000, 256) + sdma.fence(0x3000, 5)
  f = tmp_path / "stream.txt"
  f.write_text(" ".join(f"{w:08x}" for w in words))
  assert main(["decode", "--engine", "sdma", str(f)]) == 0
  out = capsys.readouterr().out
  assert "COPY_LINEAR" in out and "bytes=256" in out and "src=0x1000" in out and "FENCE" in out and "data=0x5" in out


def test_decode_reports_a_broken_stream(tmp_path, capsys):
  f = tmp_path / "bad.bin"
  f.write_bytes(struct.pack("<2I", pm4.header(pm4.RELEASE_MEM, 7), 0))
  assert main(["decode", str(f)]) == 1
  assert "needs 7 body dwords" in capsys.readouterr().err


def test_run_vector_add_from_npy_files(tmp_path):
  a, b = np.arange(300, dtype=np.float32), np.full(300, 2.0, np.float32)
  np.save(tmp_path / "a.npy", a); np.save(tmp_path / "b.npy", b)
  r = subprocess.run([sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))",
                      "run", KERNELS, "--kernel", "vadd", "--grid", "2", "--block", "256", "--device", "MOCK+AMD",
                      "--out", str(tmp_path / "out"), str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "300:float32",
                      "=300"], capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  assert "vadd on " in r.stdout and "(MockOS)" in r.stdout    # says that the mock ran it
  c = np.load(tmp_path / "out" / "arg2.npy")
  assert c.dtype == np.float32 and np.array_equal(c, a + b)
  assert np.array_equal(np.load(tmp_path / "out" / "arg0.npy"), a)


def test_run_rejects_wrong_arguments_before_running(tmp_path, capsys):
  assert main(["run", KERNELS, "--kernel", "vadd", "--device", "MOCK+AMD", "--out", str(tmp_path), "=1.5"]) == 1
  assert "takes 4 arguments" in capsys.readouterr().err


def test_decode_the_rings_of_a_device(capsys):
  assert main(["decode", "--device", "MOCK+AMD"]) == 0
  out = capsys.readouterr().out
  pm4_part, sdma_part = out.split("== sdma ring")
  assert "== pm4 ring" in pm4_part and "DISPATCH_DIRECT" in pm4_part and "COMPUTE_PGM_LO=" in pm4_part
  assert "RELEASE_MEM" in pm4_part and "data_sel=2 int_sel=0" in pm4_part   # the timeline value, no interrupt
  assert "COPY_LINEAR" in sdma_part and "bytes=1024" in sdma_part and "FENCE" in sdma_part


def test_decode_prints_the_packets_before_a_broken_one(tmp_path, capsys):
  words = pm4.wait_reg_mem(0x1000, 7) + [pm4.header(pm4.RELEASE_MEM, 7), 0]
  f = tmp_path / "cut.bin"
  f.write_bytes(struct.pack(f"<{len(words)}I", *words))
  assert main(["decode", str(f)]) == 1
  out, err = capsys.readouterr()
  assert out.split()[:2] == ["0", "WAIT_REG_MEM"] and "dword 7: RELEASE_MEM needs 7 body dwords" in err


def test_decode_and_run_name_a_missing_file(tmp_path, capsys):
  for argv, msg in [(["decode", str(tmp_path / "nope.bin")], "hcq decode: error: cannot read"),
                    (["run", str(tmp_path / "nope.co"), "=1"], "hcq run: error: cannot read the code object"),
                    (["run", KERNELS, "--kernel", "vadd", str(tmp_path / "nope.npy")], "hcq run: error: cannot read")]:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(msg) and "No such file" in err


def test_run_help_lists_its_options(capsys):
  assert main(["run", "-h"]) == 0
  out = capsys.readouterr().out
  for opt in ("--kernel", "--grid", "--block", "--device", "--out", "CODE_OBJECT", "FILE.npy", "=VALUE"): assert opt in out


def test_run_takes_options_before_and_after_the_code_object(tmp_path, capsys):
  a = np.arange(64, dtype=np.float32)
  np.save(tmp_path / "a.npy", a)
  assert main(["run", "--kernel", "vadd", "--device", "MOCK+AMD", KERNELS, str(tmp_path / "a.npy"), "--block", "64",
               str(tmp_path / "a.npy"), "64:float32", "=64", "--out", str(tmp_path / "o")]) == 0
  assert np.array_equal(np.load(tmp_path / "o" / "arg2.npy"), a + a)
  assert "grid (1,) x block (64,)" in capsys.readouterr().out
