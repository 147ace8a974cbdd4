"""`hcq decode --qcom` and `hcq run` of an ir3 program on MOCK+QCOM."""
from __future__ import annotations

import pathlib
import struct

import numpy as np

from hcq.autogen.qcom import a6xx
from hcq.cli import main
from hcq.drivers.qcom import cp

PROGRAMS = pathlib.Path(__file__).parent / "programs"


def test_decode_qcom_prints_packets_and_register_names(tmp_path, capsys):
  words = cp.pkt4(a6xx.REG_A6XX_HLSQ_CS_KERNEL_GROUP_X, 1, 1, 1) + cp.exec_cs(2, 3, 4)
  f = tmp_path / "ib.bin"
  f.write_bytes(struct.pack(f"<{len(words)}I", *words))
  assert main(["decode", "--qcom", str(f)]) == 0
  out = capsys.readouterr().out.splitlines()
  assert "HLSQ_CS_KERNEL_GROUP_X=0x1 HLSQ_CS_KERNEL_GROUP_Y=0x1 HLSQ_CS_KERNEL_GROUP_Z=0x1" in out[0]
  assert out[1].split()[1:] == ["CP_EXEC_CS", "0x0", "0x2", "0x3", "0x4"]
  words[4] ^= 1 << 23                          # CP_EXEC_CS's opcode parity
  f.write_bytes(struct.pack(f"<{len(words)}I", *words))
  assert main(["decode", "--qcom", str(f)]) == 1
  cap = capsys.readouterr()
  assert "dword 4" in cap.err and "bad parity" in cap.err and "Traceback" not in cap.err
  assert main(["decode", "--qcom", "--engine", "sdma", str(f)]) == 2


def test_run_takes_an_ir3_program(tmp_path, capsys, monkeypatch):
  a = np.arange(256, dtype=np.float32)
  np.save(tmp_path / "a.npy", a)
  np.save(tmp_path / "b.npy", a * 2)
  args = ["run", str(PROGRAMS / "vadd.asm"), "--device", "MOCK+QCOM", "--grid", "4", "--block", "64",
          str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "256:float32", "--out", str(tmp_path)]
  assert main(args) == 0
  np.testing.assert_array_equal(np.load(tmp_path / "arg2.npy"), a * 3)
  args[args.index("--block") + 1] = "32"
  assert main(args) == 1                                             # the program's @localsize is 64
  assert "work-group size of (64, 1, 1)" in capsys.readouterr().err
