"""The compile-speed work of issue #30 on the shared lowering (compiler/lower, compiler/ir) and the C/PTX renderers is
a pure speed-up: what every target makes of the kernels bench/compile.py times (the two 20,000-node ALU chains and
the tiled matmul 64x64 with 8x8 tiles), and the ir3 code of every example kernel (which test_codegen_golden.py does not
pin), must not change by one byte. The hashes were recorded with the tree before that work; test_codegen_golden.py pins
the other example kernels the same way. The 20,000-node chains on every target are slow (about 20 s): the default run
checks the C source and the LINEAR form of one, and the matmul everywhere.
  .venv/bin/python tests/compiler/test_output_unchanged.py   prints the table anew (after a deliberate change)"""
from __future__ import annotations

import hashlib

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.ptx import ARCHS
from hcq.compiler.examples import ALL, matmul_tiled_kernel
from hcq.compiler.lower import lower

TARGETS = ["linear", "c", "gfx1100", "gfx1200", "gfx942", "a630", *ARCHS]


def chain(steps: int, step) -> UOp:
  """bench/compile.py's alu_chain: 2 * steps ALU nodes on a loaded int32."""
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(steps): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{steps}"))


KERNELS = {**{f.__name__: (lambda f=f: f().sink) for f in ALL},
           "chain20k_xor": lambda: chain(10_000, lambda v, i: (v ^ i) + 1),
           "chain20k_mul": lambda: chain(10_000, lambda v, i: v * 3 + 1),
           "matmul_tiled_64_8": lambda: matmul_tiled_kernel(64, 8)}


def artefact(name: str, target: str) -> bytes:
  """What target makes of kernel name, as bytes: the LINEAR form's repr; C: the source and the CArtifact's fields;
  AMD: the code object; PTX: the text; ir3: the IR3Program's repr (its words and dispatch metadata)."""
  sink = KERNELS[name]()
  if target == "linear": return repr(lower(sink, "c")).encode()
  out = compile_kernel(sink, target)
  if target == "c": return (out.source + repr(out)).encode()
  if isinstance(out, bytes): return out
  return out.encode() if isinstance(out, str) else repr(out).encode()


def digest(name: str, target: str) -> str: return hashlib.sha256(artefact(name, target)).hexdigest()[:16]


GOLDEN = {
  ('chain20k_mul', 'a630'): '02709955b452f6f1',
  ('chain20k_mul', 'c'): '328646b7fc1cc919',
  ('chain20k_mul', 'gfx1100'): 'a5ae3613dff48843',
  ('chain20k_mul', 'gfx1200'): '8bf819d9e1cf8e89',
  ('chain20k_mul', 'gfx942'): 'a1fa916e846f8974',
  ('chain20k_mul', 'linear'): 'ca7ebda9cbc9a4fc',
  ('chain20k_mul', 'sm_100'): '4de09165d5d2ab7d',
  ('chain20k_mul', 'sm_80'): '966d7f7e7c07ad34',
  ('chain20k_mul', 'sm_86'): '80bec3001f45ccae',
  ('chain20k_mul', 'sm_89'): 'b215fdbe12e67957',
  ('chain20k_mul', 'sm_90'): 'a807bdab93cf8703',
  ('chain20k_xor', 'a630'): 'ff0de68a2d75c027',
  ('chain20k_xor', 'c'): 'a7860dab54581519',
  ('chain20k_xor', 'gfx1100'): '40e5e86788dc7713',
  ('chain20k_xor', 'gfx1200'): 'c6435af079119b61',
  ('chain20k_xor', 'gfx942'): '92d9866a16da19c6',
  ('chain20k_xor', 'linear'): '2974386be0433783',
  ('chain20k_xor', 'sm_100'): '3531d7b30d7e94d2',
  ('chain20k_xor', 'sm_80'): '9d8e7465512174b9',
  ('chain20k_xor', 'sm_86'): 'be6d9b4aa431a047',
  ('chain20k_xor', 'sm_89'): 'c64b14f1b7b9005f',
  ('chain20k_xor', 'sm_90'): '1931d89ebd42fff4',
  ('elementwise_add', 'a630'): '37ff93c45c2baaea',
  ('elementwise_fma', 'a630'): '8ff4d74dd1caa12b',
  ('gated_stencil', 'a630'): 'e9a69206fa4599c5',
  ('grid_2d', 'a630'): '61f530a229504afc',
  ('int_bitops', 'a630'): 'e4f2a2316d13cbb3',
  ('local_reduction', 'a630'): 'e1faf9585c5b5caf',
  ('matmul_naive', 'a630'): '96287c6ccc09bcba',
  ('matmul_tiled_64_8', 'a630'): 'c66e761d98300c53',
  ('matmul_tiled_64_8', 'c'): 'cdd200ea2be92c7f',
  ('matmul_tiled_64_8', 'gfx1100'): '0c521e61508e41cb',
  ('matmul_tiled_64_8', 'gfx1200'): '6dbeef6227d802f5',
  ('matmul_tiled_64_8', 'gfx942'): 'f22f24acc8930b96',
  ('matmul_tiled_64_8', 'linear'): 'c497464495ad904c',
  ('matmul_tiled_64_8', 'sm_100'): '61d841df1242c06e',
  ('matmul_tiled_64_8', 'sm_80'): 'a3e07098d95684bb',
  ('matmul_tiled_64_8', 'sm_86'): '3f61f9548fd188e7',
  ('matmul_tiled_64_8', 'sm_89'): 'd1ff38407f6be266',
  ('matmul_tiled_64_8', 'sm_90'): 'be663755c28eb877',
  ('matmul_tiled', 'a630'): 'c66e761d98300c53',
  ('register_accumulator', 'a630'): 'f8d00d46cf697349',
  ('runtime_loop', 'a630'): '6d0ff6216237bee5',
  ('where_compare', 'a630'): '5cb86e7c74959b97',
}

FAST = {("chain20k_xor", "linear"), ("chain20k_xor", "c")}
CASES = [pytest.param(n, t, marks=() if (n, t) in FAST or not n.startswith("chain20k") else pytest.mark.slow, id=f"{n}-{t}")
         for (n, t) in GOLDEN]


@pytest.mark.parametrize("name,target", CASES)
def test_output_unchanged(name, target):
  assert digest(name, target) == GOLDEN[(name, target)], f"{name} on {target}: the generated code changed"


if __name__ == "__main__":
  for (n, t) in GOLDEN: print(f"  ({n!r}, {t!r}): {digest(n, t)!r},")
