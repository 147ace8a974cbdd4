"""The code every example kernel compiles to, pinned by hash: a change to the rewrite engine or to a pass that is
meant to be a pure speed-up (issues #20, #30) must not change one byte of it. The hashes were recorded before that work
(gfx1200 and gfx942: before the end-to-end speed work of issue #30);
a deliberate change of the generated code regenerates them with
  .venv/bin/python tests/compiler/test_codegen_golden.py
and says why in its commit."""
from __future__ import annotations

import hashlib

import pytest

from hcq.compiler import KernelInfo, UOp, dtypes
from hcq.compiler import compile as compile_kernel
from hcq.compiler.backend.ptx import ARCHS
from hcq.compiler.examples import ALL
from hcq.compiler.lower import lower

TARGETS = ["linear", "c", "gfx1100", "gfx1200", "gfx942", *ARCHS]


def chain(n: int, step) -> UOp:
  """out[0] = step(step(...step(x, 0)..., n-1)) on a loaded int32: the long ALU chains bench/compile.py times."""
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(n): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{n}"))


def chain_mul_add(): return chain(300, lambda v, i: v * 3 + 1)
def chain_xor_add(): return chain(300, lambda v, i: (v ^ i) + 1)


KERNELS = {**{f.__name__: (lambda f=f: f().sink) for f in ALL}, "chain_mul_add": chain_mul_add,
           "chain_xor_add": chain_xor_add}


def artefact(name: str, target: str) -> bytes:
  """What target makes of kernel name, as bytes (linear: the printed LINEAR form of the C lowering)."""
  sink = KERNELS[name]()
  if target == "linear": return repr(lower(sink, "c")).encode()
  out = compile_kernel(sink, target)
  if target == "c": return out.source.encode()
  return out if isinstance(out, bytes) else out.encode()


def digest(name: str, target: str) -> str: return hashlib.sha256(artefact(name, target)).hexdigest()[:16]


GOLDEN = {
  ('elementwise_add', 'linear'): '0eaa217893673914',
  ('elementwise_add', 'c'): '0d061bad7ec6eaad',
  ('elementwise_add', 'gfx1100'): '727bfcb11d13ab00',
  ('elementwise_add', 'sm_80'): '1ae247d75f6ffb99',
  ('elementwise_add', 'sm_86'): '8381faab564eeffd',
  ('elementwise_add', 'sm_89'): '80cc5bc1f05c9d3f',
  ('elementwise_add', 'sm_90'): 'fb01a291c587db2c',
  ('elementwise_add', 'sm_100'): '5c19cbaff35b85e2',
  ('elementwise_fma', 'linear'): 'f00a8bd4e97aaef5',
  ('elementwise_fma', 'c'): 'e2f5280856252226',
  ('elementwise_fma', 'gfx1100'): '78506e9428f21318',
  ('elementwise_fma', 'sm_80'): 'b15bbd21b8118608',
  ('elementwise_fma', 'sm_86'): 'f16eec1ffcc2d71a',
  ('elementwise_fma', 'sm_89'): 'efa47c1dd9c44ced',
  ('elementwise_fma', 'sm_90'): 'f4479c48203ee9bc',
  ('elementwise_fma', 'sm_100'): 'a83b087a6137f9b2',
  ('int_bitops', 'linear'): '87fa51faed9c8756',
  ('int_bitops', 'c'): 'ba0a0ccd1918245a',
  ('int_bitops', 'gfx1100'): '3dbe813a48c2c545',
  ('int_bitops', 'sm_80'): '16dda511413561c0',
  ('int_bitops', 'sm_86'): 'ac36eba91354f4b8',
  ('int_bitops', 'sm_89'): 'a887a9d0b7b46a38',
  ('int_bitops', 'sm_90'): '8f2fb94cc1902a47',
  ('int_bitops', 'sm_100'): '40785a69cb1e42d1',
  ('where_compare', 'linear'): '69d8d0a1e828c073',
  ('where_compare', 'c'): 'f7ce00852351397a',
  ('where_compare', 'gfx1100'): '6c42eeccbde8f04b',
  ('where_compare', 'sm_80'): 'e3fe34f892dfb232',
  ('where_compare', 'sm_86'): 'aadc93a6015a653a',
  ('where_compare', 'sm_89'): '4955c4f404043be0',
  ('where_compare', 'sm_90'): '7b98f71e8e42fbdb',
  ('where_compare', 'sm_100'): '980f60a3f749ff9d',
  ('grid_2d', 'linear'): 'fecec77a8fbd6dcc',
  ('grid_2d', 'c'): '7db31a2500ff54f6',
  ('grid_2d', 'gfx1100'): '3ba272bd392e82c6',
  ('grid_2d', 'sm_80'): '173624d59e397ee3',
  ('grid_2d', 'sm_86'): 'e9f6cfad8781ece5',
  ('grid_2d', 'sm_89'): '6d77355d6d3664ba',
  ('grid_2d', 'sm_90'): 'f4ea1c337bfec57b',
  ('grid_2d', 'sm_100'): '1a85d6bd89945564',
  ('runtime_loop', 'linear'): '9f0004d025fe2c56',
  ('runtime_loop', 'c'): '4a3600c2ab37f66c',
  ('runtime_loop', 'gfx1100'): 'd14ebb218136f5e3',
  ('runtime_loop', 'sm_80'): '8857f0bed6995ce2',
  ('runtime_loop', 'sm_86'): 'b0cfa6773c7ca58e',
  ('runtime_loop', 'sm_89'): '95745bd427383fa4',
  ('runtime_loop', 'sm_90'): '9bc0cc4abb8d17e6',
  ('runtime_loop', 'sm_100'): '66939ef91395d643',
  ('gated_stencil', 'linear'): '47593f1335ab54a3',
  ('gated_stencil', 'c'): '2923e0ed46fff8e3',
  ('gated_stencil', 'gfx1100'): 'ccc490cf7e94ce18',
  ('gated_stencil', 'sm_80'): '5f3ff86efb3ab2f5',
  ('gated_stencil', 'sm_86'): '174b751257bb5295',
  ('gated_stencil', 'sm_89'): 'f42de6af6dec7062',
  ('gated_stencil', 'sm_90'): '11bf32f0f397b4a4',
  ('gated_stencil', 'sm_100'): '0fc796840ee1d69e',
  ('local_reduction', 'linear'): 'dcef2ab5cc776fd3',
  ('local_reduction', 'c'): 'cbab524267c2b1d0',
  ('local_reduction', 'gfx1100'): 'fca926ea09aa5168',
  ('local_reduction', 'sm_80'): '1c0fbc2ef7518779',
  ('local_reduction', 'sm_86'): '6018a02ef2f550ea',
  ('local_reduction', 'sm_89'): '8af54ece4bd86c38',
  ('local_reduction', 'sm_90'): '5b36c4c9286cc96b',
  ('local_reduction', 'sm_100'): 'f415a216db07e695',
  ('matmul_naive', 'linear'): '2f9a1db886ee0030',
  ('matmul_naive', 'c'): '574b6a1ea5800c43',
  ('matmul_naive', 'gfx1100'): '0e8634e553feb7eb',
  ('matmul_naive', 'sm_80'): '9366ae5f6ffa0bda',
  ('matmul_naive', 'sm_86'): '3f5ed888a1922761',
  ('matmul_naive', 'sm_89'): '3be09ef65c2fb390',
  ('matmul_naive', 'sm_90'): '32b0b415f761429f',
  ('matmul_naive', 'sm_100'): 'af6e11a898bc8e9a',
  ('matmul_tiled', 'linear'): 'c497464495ad904c',
  ('matmul_tiled', 'c'): 'debae208fe23b1dd',
  ('matmul_tiled', 'gfx1100'): '0c521e61508e41cb',
  ('matmul_tiled', 'sm_80'): 'a3e07098d95684bb',
  ('matmul_tiled', 'sm_86'): '3f61f9548fd188e7',
  ('matmul_tiled', 'sm_89'): 'd1ff38407f6be266',
  ('matmul_tiled', 'sm_90'): 'be663755c28eb877',
  ('matmul_tiled', 'sm_100'): '61d841df1242c06e',
  ('register_accumulator', 'linear'): '80df202505ec67d3',
  ('register_accumulator', 'c'): 'ac8cf171f18d82a6',
  ('register_accumulator', 'gfx1100'): 'e20b134aa24c85c2',
  ('register_accumulator', 'sm_80'): '5e7967379a6964c9',
  ('register_accumulator', 'sm_86'): 'b6e26377be9897ac',
  ('register_accumulator', 'sm_89'): 'bde9f046521bde47',
  ('register_accumulator', 'sm_90'): '72e8a32480cf39cc',
  ('register_accumulator', 'sm_100'): '9357b0b80a70564f',
  ('chain_mul_add', 'linear'): '0ace3580f4ba1325',
  ('chain_mul_add', 'c'): '0d3eb7bdc1211e9b',
  ('chain_mul_add', 'gfx1100'): 'bc088b4dd6eeaf09',
  ('chain_mul_add', 'sm_80'): '45525442cf25f268',
  ('chain_mul_add', 'sm_86'): 'dc8963d5dd0428f8',
  ('chain_mul_add', 'sm_89'): '678fac3a34c55abe',
  ('chain_mul_add', 'sm_90'): '97058369c1d7b8af',
  ('chain_mul_add', 'sm_100'): 'd03a4c509100c103',
  ('chain_xor_add', 'linear'): '14aed658719c0dd3',
  ('chain_xor_add', 'c'): 'db21ef27d3f92900',
  ('chain_xor_add', 'gfx1100'): '1654b3852e9893aa',
  ('chain_xor_add', 'sm_80'): '9f768c2cae69aa66',
  ('chain_xor_add', 'sm_86'): 'db6b0f745d70aad3',
  ('chain_xor_add', 'sm_89'): '2aacb249a6203f12',
  ('chain_xor_add', 'sm_90'): '51e91ed10eda0e81',
  ('chain_xor_add', 'sm_100'): 'c982d97c4c5c61f9',
  ('elementwise_add', 'gfx1200'): '2922d4daf96682ce',
  ('elementwise_add', 'gfx942'): '7f38bad8e9d7e9f5',
  ('elementwise_fma', 'gfx1200'): 'c0a1b43df69a0cfd',
  ('elementwise_fma', 'gfx942'): 'bf890365dfdf39dc',
  ('int_bitops', 'gfx1200'): 'd835445088682025',
  ('int_bitops', 'gfx942'): '9a3fd3a71c35b8c2',
  ('where_compare', 'gfx1200'): 'ef9ce79e394a3649',
  ('where_compare', 'gfx942'): '4e77354eed2a1080',
  ('grid_2d', 'gfx1200'): '1b1d7c5ac0ce08b9',
  ('grid_2d', 'gfx942'): '07c0b8f7e17f276e',
  ('runtime_loop', 'gfx1200'): '6f724ac8cf504945',
  ('runtime_loop', 'gfx942'): '41c5b1daf3410144',
  ('gated_stencil', 'gfx1200'): '4ec8e9acc9db4ea8',
  ('gated_stencil', 'gfx942'): 'e56db55341a5e382',
  ('local_reduction', 'gfx1200'): 'a0ca3fe44839c1a4',
  ('local_reduction', 'gfx942'): '2a8435bced6521f3',
  ('matmul_naive', 'gfx1200'): '1b7f4392397a7465',
  ('matmul_naive', 'gfx942'): '102a0e7ce2489e89',
  ('matmul_tiled', 'gfx1200'): '6dbeef6227d802f5',
  ('matmul_tiled', 'gfx942'): 'f22f24acc8930b96',
  ('register_accumulator', 'gfx1200'): '03f382ad6c671ffa',
  ('register_accumulator', 'gfx942'): '4c072c61aee3b0a5',
  ('chain_mul_add', 'gfx1200'): '8aa1a20f54787c47',
  ('chain_mul_add', 'gfx942'): '6c769cb8afef8daf',
  ('chain_xor_add', 'gfx1200'): '41ff97fa673f8acf',
  ('chain_xor_add', 'gfx942'): 'edd135fcae8de7c2',
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", KERNELS)
def test_generated_code_unchanged(name, target):
  assert digest(name, target) == GOLDEN[(name, target)], f"{name} on {target}: the generated code changed"


if __name__ == "__main__":
  for name in KERNELS:
    for t in TARGETS: print(f"  ({name!r}, {t!r}): {digest(name, t)!r},")
