"""Run a kernel sink with the C backend (the reference results) and with the RDNA3 backend on the emulator."""
from __future__ import annotations

import subprocess
import tempfile
from types import SimpleNamespace

import numpy as np

from hcq.compiler import compile as hcq_compile
from hcq.compiler.backend.c import CProgram
from hcq.config import from_env

from amd_emu_runner import run


def run_c(sink, args, global_size, local_size) -> list:
  """Outputs of the C backend: a copy of every argument array after the launch (None for scalars)."""
  prog = CProgram.from_artifact(hcq_compile(sink, "c"), from_env().cache_dir)
  arrays = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
  ptrs = [SimpleNamespace(va=a.ctypes.data, size=a.nbytes) if isinstance(a, np.ndarray) else a for a in arrays]
  prog(*ptrs, global_size=global_size, local_size=local_size)
  return [a if isinstance(a, np.ndarray) else None for a in arrays]


def run_gfx1100(sink, args, global_size, local_size):
  """(outputs, code object bytes, DispatchStats) of the RDNA3 backend's code on the wave emulator."""
  blob = hcq_compile(sink, "gfx1100")
  views, stats = run(blob, [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args],
                     global_size, local_size)
  return views, blob, stats


def objdump(blob: bytes, mcpu: str = "gfx1100") -> str:
  with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
    f.write(blob)
    f.flush()
    p = subprocess.run(["llvm-objdump-19", "-d", f"--mcpu={mcpu}", f.name], capture_output=True, text=True, timeout=60)
  assert p.returncode == 0, p.stderr
  return p.stdout


def unknown_words(dis: str) -> list[str]:
  return [line for line in dis.splitlines() if "<unknown>" in line or "unknown" in line.split("//")[0]]


def assert_same(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, what: str = ""):
  got = got.reshape(want.shape)
  if want.dtype.kind == "f":
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol, err_msg=what)
  else:
    np.testing.assert_array_equal(got, want, err_msg=what)


def objdump_agrees(blob: bytes, arch: str) -> int:
  """llvm-objdump-19 --mcpu=arch decodes every word of the code object's kernels (no <unknown>), and each instruction
  it prints is what our disassembler (decode.py) prints for the same bytes. Returns the number of instructions."""
  import re

  from hcq.compiler.isa.amd.codeobject import CodeObject
  from hcq.compiler.isa.amd.decode import decode_all
  dis = objdump(blob, arch)
  assert not unknown_words(dis), unknown_words(dis)[:5]
  theirs = [" ".join(t.split()) for t, _ in re.findall(r"^\t(\S.*?)\s+// [0-9A-F]+: ([0-9A-F ]+)", dis, re.M)]
  co = CodeObject.parse(blob)
  ours = []
  for k in co.kernels.values():
    ours += [" ".join(str(i).split()) for i in decode_all(k.code, arch=arch)]
  assert theirs, dis
  n = min(len(theirs), len(ours))
  bad = [(a, b) for a, b in zip(theirs[:n], ours[:n]) if a != b]
  assert not bad and len(theirs) == len(ours), (bad[:5], len(theirs), len(ours))
  return n
