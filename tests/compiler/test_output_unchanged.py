"""The compile-speed work of issue #30 on the shared lowering (compiler/lower, compiler/ir) and the C/PTX renderers is
a pure speed-up: what it emits must not change by one byte. Pinned here by hashes recorded with the tree before that
work (test_codegen_golden.py pins the example kernels' code per target the same way):
  * the kernels bench/compile.py times (the two 20,000-node ALU chains, the tiled matmul 64x64 with 8x8 tiles) on every
    target: the LINEAR form ("linear": lowered for C), the C source, the PTX text, the AMD code objects;
  * the LINEAR form each backend consumes (lowered for its own Target: PTX, gfx1100, gfx1200, gfx942, ir3) of those
    and of every example kernel. The ir3 words are the ir3 backend's to pin (tests/qcom/test_ir3_words.py): its own
    work changes them on purpose, the lowering it reads must not change.
The 20,000-node chains on every target are slow (about 20 s): the default run checks the C source and the LINEAR form
of one, and everything else.
  .venv/bin/python tests/compiler/test_output_unchanged.py   prints the table anew (after a deliberate change)"""
from __future__ import annotations

import hashlib

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.amd.render import TARGETS as AMD_TARGETS
from hcq.compiler.backend.ir3 import IR3_TARGET
from hcq.compiler.backend.ptx import PTX_TARGETS
from hcq.compiler.examples import ALL, matmul_tiled_kernel
from hcq.compiler.lower import lower

# the lowering Target each backend runs (compiler/backend/ptx.compile_ptx, amd/render.compile_kernel, ir3.compile_ir3)
LOWERED_FOR = {"lin-ptx": PTX_TARGETS["sm_90"], "lin-gfx1100": AMD_TARGETS["gfx1100"],
               "lin-gfx1200": AMD_TARGETS["gfx1200"], "lin-gfx942": AMD_TARGETS["gfx942"], "lin-ir3": IR3_TARGET}


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
  """What target makes of kernel name, as bytes: a LINEAR form's repr ("linear": lowered for C; "lin-X": for backend
  X); C: the source and the CArtifact's fields; AMD: the code object; PTX: the text."""
  sink = KERNELS[name]()
  if target == "linear": return repr(lower(sink, "c")).encode()
  if target in LOWERED_FOR: return repr(lower(sink, LOWERED_FOR[target])).encode()
  out = compile_kernel(sink, target)
  if target == "c": return (out.source + repr(out)).encode()
  return out if isinstance(out, bytes) else out.encode()


def digest(name: str, target: str) -> str: return hashlib.sha256(artefact(name, target)).hexdigest()[:16]


GOLDEN = {
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
  ('chain20k_mul', 'lin-gfx1100'): 'ca7ebda9cbc9a4fc',
  ('chain20k_mul', 'lin-gfx1200'): 'ca7ebda9cbc9a4fc',
  ('chain20k_mul', 'lin-gfx942'): 'ca7ebda9cbc9a4fc',
  ('chain20k_mul', 'lin-ir3'): 'ca7ebda9cbc9a4fc',
  ('chain20k_mul', 'lin-ptx'): 'ca7ebda9cbc9a4fc',
  ('chain20k_xor', 'lin-gfx1100'): '2974386be0433783',
  ('chain20k_xor', 'lin-gfx1200'): '2974386be0433783',
  ('chain20k_xor', 'lin-gfx942'): '2974386be0433783',
  ('chain20k_xor', 'lin-ir3'): '2974386be0433783',
  ('chain20k_xor', 'lin-ptx'): '2974386be0433783',
  ('elementwise_add', 'lin-gfx1100'): '0eaa217893673914',
  ('elementwise_add', 'lin-gfx1200'): '0eaa217893673914',
  ('elementwise_add', 'lin-gfx942'): '0eaa217893673914',
  ('elementwise_add', 'lin-ir3'): '0eaa217893673914',
  ('elementwise_add', 'lin-ptx'): '0eaa217893673914',
  ('elementwise_fma', 'lin-gfx1100'): 'f00a8bd4e97aaef5',
  ('elementwise_fma', 'lin-gfx1200'): 'f00a8bd4e97aaef5',
  ('elementwise_fma', 'lin-gfx942'): 'f00a8bd4e97aaef5',
  ('elementwise_fma', 'lin-ir3'): 'f00a8bd4e97aaef5',
  ('elementwise_fma', 'lin-ptx'): 'f00a8bd4e97aaef5',
  ('gated_stencil', 'lin-gfx1100'): '47593f1335ab54a3',
  ('gated_stencil', 'lin-gfx1200'): '47593f1335ab54a3',
  ('gated_stencil', 'lin-gfx942'): '47593f1335ab54a3',
  ('gated_stencil', 'lin-ir3'): '47593f1335ab54a3',
  ('gated_stencil', 'lin-ptx'): '47593f1335ab54a3',
  ('grid_2d', 'lin-gfx1100'): 'fecec77a8fbd6dcc',
  ('grid_2d', 'lin-gfx1200'): 'fecec77a8fbd6dcc',
  ('grid_2d', 'lin-gfx942'): 'fecec77a8fbd6dcc',
  ('grid_2d', 'lin-ir3'): 'fecec77a8fbd6dcc',
  ('grid_2d', 'lin-ptx'): 'fecec77a8fbd6dcc',
  ('int_bitops', 'lin-gfx1100'): '87fa51faed9c8756',
  ('int_bitops', 'lin-gfx1200'): '87fa51faed9c8756',
  ('int_bitops', 'lin-gfx942'): '87fa51faed9c8756',
  ('int_bitops', 'lin-ir3'): '87fa51faed9c8756',
  ('int_bitops', 'lin-ptx'): '87fa51faed9c8756',
  ('local_reduction', 'lin-gfx1100'): 'dcef2ab5cc776fd3',
  ('local_reduction', 'lin-gfx1200'): 'dcef2ab5cc776fd3',
  ('local_reduction', 'lin-gfx942'): 'dcef2ab5cc776fd3',
  ('local_reduction', 'lin-ir3'): 'dcef2ab5cc776fd3',
  ('local_reduction', 'lin-ptx'): 'dcef2ab5cc776fd3',
  ('matmul_naive', 'lin-gfx1100'): '2f9a1db886ee0030',
  ('matmul_naive', 'lin-gfx1200'): '2f9a1db886ee0030',
  ('matmul_naive', 'lin-gfx942'): '2f9a1db886ee0030',
  ('matmul_naive', 'lin-ir3'): '2f9a1db886ee0030',
  ('matmul_naive', 'lin-ptx'): '2f9a1db886ee0030',
  ('matmul_tiled_64_8', 'lin-gfx1100'): 'c497464495ad904c',
  ('matmul_tiled_64_8', 'lin-gfx1200'): 'c497464495ad904c',
  ('matmul_tiled_64_8', 'lin-gfx942'): 'c497464495ad904c',
  ('matmul_tiled_64_8', 'lin-ir3'): 'c497464495ad904c',
  ('matmul_tiled_64_8', 'lin-ptx'): 'c497464495ad904c',
  ('matmul_tiled', 'lin-gfx1100'): 'c497464495ad904c',
  ('matmul_tiled', 'lin-gfx1200'): 'c497464495ad904c',
  ('matmul_tiled', 'lin-gfx942'): 'c497464495ad904c',
  ('matmul_tiled', 'lin-ir3'): 'c497464495ad904c',
  ('matmul_tiled', 'lin-ptx'): 'c497464495ad904c',
  ('register_accumulator', 'lin-gfx1100'): '80df202505ec67d3',
  ('register_accumulator', 'lin-gfx1200'): '80df202505ec67d3',
  ('register_accumulator', 'lin-gfx942'): '80df202505ec67d3',
  ('register_accumulator', 'lin-ir3'): '80df202505ec67d3',
  ('register_accumulator', 'lin-ptx'): '80df202505ec67d3',
  ('runtime_loop', 'lin-gfx1100'): '9f0004d025fe2c56',
  ('runtime_loop', 'lin-gfx1200'): '9f0004d025fe2c56',
  ('runtime_loop', 'lin-gfx942'): '9f0004d025fe2c56',
  ('runtime_loop', 'lin-ir3'): '9f0004d025fe2c56',
  ('runtime_loop', 'lin-ptx'): '9f0004d025fe2c56',
  ('where_compare', 'lin-gfx1100'): '69d8d0a1e828c073',
  ('where_compare', 'lin-gfx1200'): '69d8d0a1e828c073',
  ('where_compare', 'lin-gfx942'): '69d8d0a1e828c073',
  ('where_compare', 'lin-ir3'): '69d8d0a1e828c073',
  ('where_compare', 'lin-ptx'): '69d8d0a1e828c073',
}

FAST = {("chain20k_xor", "linear"), ("chain20k_xor", "c")}
CASES = [pytest.param(n, t, marks=() if (n, t) in FAST or not n.startswith("chain20k") else pytest.mark.slow, id=f"{n}-{t}")
         for (n, t) in GOLDEN]


@pytest.mark.parametrize("name,target", CASES)
def test_output_unchanged(name, target):
  assert digest(name, target) == GOLDEN[(name, target)], f"{name} on {target}: the generated code changed"


if __name__ == "__main__":
  for (n, t) in GOLDEN: print(f"  ({n!r}, {t!r}): {digest(n, t)!r},")
