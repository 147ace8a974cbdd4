"""The code objects the AMD backend makes, pinned by hash for every AMD target (gfx1100, gfx1101, gfx1102, gfx1200,
gfx942): the compiler-core examples, the ALU chains, the backend's own feature kernels (amd_kernels.ALL: f16,
conversions, division, loops, LDS, private arrays, register spills), the 64-bit kernels, seeded random kernels and a
gfx942 kernel that spills to AccVGPRs and then to scratch. The speed work of issue #30 on the backend (instruction
selection, register allocation, waits, hazards, encoding, the code-object writer) must not change one byte of them.
The hashes were recorded on the tree before that work; a deliberate change of the generated code regenerates them with
  .venv/bin/python tests/backend/test_amd_codegen_golden.py
and says why in its commit. The 20,000-node chain bench/compile.py times is pinned too (marked slow)."""
from __future__ import annotations

import hashlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # amd_kernels, amd_random, test_amd_wide

import amd_kernels  # noqa: E402
from amd_random import random_case, random_half_case, random_loop_case  # noqa: E402
from hcq.compiler import KernelInfo, UOp, dtypes  # noqa: E402
from hcq.compiler import compile as compile_kernel  # noqa: E402
from hcq.compiler.backend.amd import gfx9  # noqa: E402
from hcq.compiler.examples import ALL as EXAMPLES  # noqa: E402

ARCHS = ("gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx942")


def chain(n: int, step) -> UOp:
  """out[0] = step(step(...step(x, 0)..., n-1)) on a loaded int32 (bench/compile.py's alu_chain: 2 nodes a step)."""
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(n): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{n}"))


def _wide(name):
  def make():
    import test_amd_wide
    return getattr(test_amd_wide, name)()[0]
  return make


KERNELS = {
  **{f"ex_{f.__name__}": (lambda f=f: f().sink) for f in EXAMPLES},
  "chain_mul_add": lambda: chain(300, lambda v, i: v * 3 + 1),
  "chain_xor_add": lambda: chain(300, lambda v, i: (v ^ i) + 1),
  **{f"k_{f.__name__}": (lambda f=f: f().sink) for f in amd_kernels.ALL},
  **{f"wide_{n}": _wide(n) for n in ("int64_case", "int64_constant_divisor_case", "float64_case")},
  **{f"random_{s}": (lambda s=s: random_case(s).sink) for s in range(4)},
  **{f"loops_{s}": (lambda s=s: random_loop_case(s).sink) for s in range(3)},
  **{f"half_{s}": (lambda s=s: random_half_case(s).sink) for s in range(2)},
}


def digest(make, arch: str) -> str:
  out = compile_kernel(make(), arch)
  return hashlib.sha256(out).hexdigest()[:16]


def agpr_and_scratch_digest() -> str:
  """register_spills on gfx942 with 16 AccVGPRs: both AccVGPR and scratch spills in one kernel."""
  saved = gfx9.AGPRS
  gfx9.AGPRS = 16
  try: return digest(lambda: amd_kernels.register_spills().sink, "gfx942")
  finally: gfx9.AGPRS = saved


def chain20k_digest(arch: str) -> str: return digest(lambda: chain(10_000, lambda v, i: (v ^ i) + 1), arch)


@pytest.mark.parametrize("name", KERNELS)
def test_amd_code_objects_unchanged(name):
  got = {arch: digest(KERNELS[name], arch) for arch in ARCHS}
  want = {arch: GOLDEN[(name, arch)] for arch in ARCHS}
  assert got == want, f"{name}: the generated code changed on {[a for a in ARCHS if got[a] != want[a]]}"


def test_accvgpr_and_scratch_spills_unchanged():
  assert agpr_and_scratch_digest() == GOLDEN[("register_spills_agpr16", "gfx942")]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_bench_chain_unchanged(arch):
  assert chain20k_digest(arch) == GOLDEN[("chain20k", arch)]


GOLDEN = {
  ('ex_elementwise_add', 'gfx1100'): '727bfcb11d13ab00',
  ('ex_elementwise_add', 'gfx1101'): 'f823da502e4a425f',
  ('ex_elementwise_add', 'gfx1102'): '85c19b2a6a717118',
  ('ex_elementwise_add', 'gfx1200'): '2922d4daf96682ce',
  ('ex_elementwise_add', 'gfx942'): '7f38bad8e9d7e9f5',
  ('ex_elementwise_fma', 'gfx1100'): '78506e9428f21318',
  ('ex_elementwise_fma', 'gfx1101'): '69fca541941b9a86',
  ('ex_elementwise_fma', 'gfx1102'): 'a497d5492a3b3d97',
  ('ex_elementwise_fma', 'gfx1200'): 'c0a1b43df69a0cfd',
  ('ex_elementwise_fma', 'gfx942'): 'bf890365dfdf39dc',
  ('ex_int_bitops', 'gfx1100'): '3dbe813a48c2c545',
  ('ex_int_bitops', 'gfx1101'): '0c51623ba83e494b',
  ('ex_int_bitops', 'gfx1102'): '441f80c4b92145ec',
  ('ex_int_bitops', 'gfx1200'): 'd835445088682025',
  ('ex_int_bitops', 'gfx942'): '9a3fd3a71c35b8c2',
  ('ex_where_compare', 'gfx1100'): '6c42eeccbde8f04b',
  ('ex_where_compare', 'gfx1101'): '6e1a828379d3c7ea',
  ('ex_where_compare', 'gfx1102'): 'f3c72f0f67b8d532',
  ('ex_where_compare', 'gfx1200'): 'ef9ce79e394a3649',
  ('ex_where_compare', 'gfx942'): '4e77354eed2a1080',
  ('ex_grid_2d', 'gfx1100'): '3ba272bd392e82c6',
  ('ex_grid_2d', 'gfx1101'): 'a30fdc68bd702d83',
  ('ex_grid_2d', 'gfx1102'): 'ffa04ccf6c8f42fb',
  ('ex_grid_2d', 'gfx1200'): '1b1d7c5ac0ce08b9',
  ('ex_grid_2d', 'gfx942'): '07c0b8f7e17f276e',
  ('ex_runtime_loop', 'gfx1100'): 'd14ebb218136f5e3',
  ('ex_runtime_loop', 'gfx1101'): 'a65f8bbdb46aab38',
  ('ex_runtime_loop', 'gfx1102'): 'ddeed0672caf2407',
  ('ex_runtime_loop', 'gfx1200'): '6f724ac8cf504945',
  ('ex_runtime_loop', 'gfx942'): '41c5b1daf3410144',
  ('ex_gated_stencil', 'gfx1100'): 'ccc490cf7e94ce18',
  ('ex_gated_stencil', 'gfx1101'): 'cbc707b4c01af316',
  ('ex_gated_stencil', 'gfx1102'): 'db2d2816c353172c',
  ('ex_gated_stencil', 'gfx1200'): '4ec8e9acc9db4ea8',
  ('ex_gated_stencil', 'gfx942'): 'e56db55341a5e382',
  ('ex_local_reduction', 'gfx1100'): 'fca926ea09aa5168',
  ('ex_local_reduction', 'gfx1101'): '35faf529ea60133c',
  ('ex_local_reduction', 'gfx1102'): 'aaf8eb500e40967b',
  ('ex_local_reduction', 'gfx1200'): 'a0ca3fe44839c1a4',
  ('ex_local_reduction', 'gfx942'): '2a8435bced6521f3',
  ('ex_matmul_naive', 'gfx1100'): '0e8634e553feb7eb',
  ('ex_matmul_naive', 'gfx1101'): 'e60de7db38c646f4',
  ('ex_matmul_naive', 'gfx1102'): 'dea5e1421678148b',
  ('ex_matmul_naive', 'gfx1200'): '1b7f4392397a7465',
  ('ex_matmul_naive', 'gfx942'): '102a0e7ce2489e89',
  ('ex_matmul_tiled', 'gfx1100'): '0c521e61508e41cb',
  ('ex_matmul_tiled', 'gfx1101'): '673359453bfd2892',
  ('ex_matmul_tiled', 'gfx1102'): 'ac1126103172fecc',
  ('ex_matmul_tiled', 'gfx1200'): '6dbeef6227d802f5',
  ('ex_matmul_tiled', 'gfx942'): 'f22f24acc8930b96',
  ('ex_register_accumulator', 'gfx1100'): 'e20b134aa24c85c2',
  ('ex_register_accumulator', 'gfx1101'): '0b531d3acb4f68bd',
  ('ex_register_accumulator', 'gfx1102'): '2bffb55d76589a20',
  ('ex_register_accumulator', 'gfx1200'): '03f382ad6c671ffa',
  ('ex_register_accumulator', 'gfx942'): '4c072c61aee3b0a5',
  ('chain_mul_add', 'gfx1100'): 'bc088b4dd6eeaf09',
  ('chain_mul_add', 'gfx1101'): 'eb78843dfe92ae4e',
  ('chain_mul_add', 'gfx1102'): 'f2c59fe28405d3f1',
  ('chain_mul_add', 'gfx1200'): '8aa1a20f54787c47',
  ('chain_mul_add', 'gfx942'): '6c769cb8afef8daf',
  ('chain_xor_add', 'gfx1100'): '1654b3852e9893aa',
  ('chain_xor_add', 'gfx1101'): '8d44cbae56b929dc',
  ('chain_xor_add', 'gfx1102'): 'a99e04bcef998ad1',
  ('chain_xor_add', 'gfx1200'): '41ff97fa673f8acf',
  ('chain_xor_add', 'gfx942'): 'edd135fcae8de7c2',
  ('k_reversed_index', 'gfx1100'): '934fa743d5096340',
  ('k_reversed_index', 'gfx1101'): '4a13cae81033e331',
  ('k_reversed_index', 'gfx1102'): '34ba8e429f0daaf0',
  ('k_reversed_index', 'gfx1200'): '1fe034f7c9b670d3',
  ('k_reversed_index', 'gfx942'): '93a95fd458fccee0',
  ('k_f16_arith', 'gfx1100'): 'a45847aceaa66a5e',
  ('k_f16_arith', 'gfx1101'): 'a6e39eb75cff498b',
  ('k_f16_arith', 'gfx1102'): '2d51bb668247a6ef',
  ('k_f16_arith', 'gfx1200'): 'bd0edc08faa947f4',
  ('k_f16_arith', 'gfx942'): 'ee19401816490009',
  ('k_conversions', 'gfx1100'): '44d9789a0cf3e8b2',
  ('k_conversions', 'gfx1101'): '96d4543c58a3094c',
  ('k_conversions', 'gfx1102'): '90e93921634b4aaa',
  ('k_conversions', 'gfx1200'): '7d6e95e51579f74e',
  ('k_conversions', 'gfx942'): '734be3c309400a95',
  ('k_transcendental', 'gfx1100'): '16e452afb3d98523',
  ('k_transcendental', 'gfx1101'): '97f4a953532d4ee7',
  ('k_transcendental', 'gfx1102'): '8b56b3458e17a8dd',
  ('k_transcendental', 'gfx1200'): '350383d43655e649',
  ('k_transcendental', 'gfx942'): '4e256288603c4a5f',
  ('k_int_div_runtime', 'gfx1100'): 'f7b46a801368dd54',
  ('k_int_div_runtime', 'gfx1101'): '85eca41e0cdd95d7',
  ('k_int_div_runtime', 'gfx1102'): 'dd2f79635a44272b',
  ('k_int_div_runtime', 'gfx1200'): '9ca312e4287c9991',
  ('k_int_div_runtime', 'gfx942'): '9e9a227b1855eab4',
  ('k_uint_div', 'gfx1100'): '4e0554d3c212cbb8',
  ('k_uint_div', 'gfx1101'): '22042ec752184725',
  ('k_uint_div', 'gfx1102'): '3f49a1a12f44b088',
  ('k_uint_div', 'gfx1200'): '6c67e3ec9870077d',
  ('k_uint_div', 'gfx942'): 'd9dcc8685c6a6074',
  ('k_int_div_const', 'gfx1100'): '99d97df9f29448d7',
  ('k_int_div_const', 'gfx1101'): 'b43f5cc9163ad7b4',
  ('k_int_div_const', 'gfx1102'): 'ec25a63cf43da676',
  ('k_int_div_const', 'gfx1200'): '9961a06c3068222b',
  ('k_int_div_const', 'gfx942'): '41087c94df5a4c3c',
  ('k_divergent_loop', 'gfx1100'): '703169f446880efd',
  ('k_divergent_loop', 'gfx1101'): 'a8ca29190bdd627d',
  ('k_divergent_loop', 'gfx1102'): '89f35ac8239c74fa',
  ('k_divergent_loop', 'gfx1200'): '81c546dadb0a96ea',
  ('k_divergent_loop', 'gfx942'): 'be73a46be92482f6',
  ('k_nested_runtime_loops', 'gfx1100'): '2c29d3523c3182e3',
  ('k_nested_runtime_loops', 'gfx1101'): '6295343fc36ab641',
  ('k_nested_runtime_loops', 'gfx1102'): 'b208339cbadc0f87',
  ('k_nested_runtime_loops', 'gfx1200'): 'fb09e7e2bc1c4063',
  ('k_nested_runtime_loops', 'gfx942'): '43b9eb587261d173',
  ('k_lds_transpose', 'gfx1100'): '63c222681f32ff8a',
  ('k_lds_transpose', 'gfx1101'): 'b813f2737ca90931',
  ('k_lds_transpose', 'gfx1102'): '4424250a32419e7c',
  ('k_lds_transpose', 'gfx1200'): 'ebf01b96dfb62f6f',
  ('k_lds_transpose', 'gfx942'): '6bcbb46eca755b69',
  ('k_select_minmax', 'gfx1100'): '03bf3e274491222e',
  ('k_select_minmax', 'gfx1101'): '57fc6a65f6a5838b',
  ('k_select_minmax', 'gfx1102'): '01c4fb84029ca361',
  ('k_select_minmax', 'gfx1200'): 'f0d255dbe5532020',
  ('k_select_minmax', 'gfx942'): 'ff1063a6acb95bea',
  ('k_narrow_memory', 'gfx1100'): 'be6b348015a41d10',
  ('k_narrow_memory', 'gfx1101'): '1eb700e48275fdef',
  ('k_narrow_memory', 'gfx1102'): '1949f581a7bc22b6',
  ('k_narrow_memory', 'gfx1200'): '8f1125a12e61643a',
  ('k_narrow_memory', 'gfx942'): '697c9b2ec335bb49',
  ('k_uniform_scalar_math', 'gfx1100'): '7e4a104df74f3118',
  ('k_uniform_scalar_math', 'gfx1101'): '113cd6453f142ff7',
  ('k_uniform_scalar_math', 'gfx1102'): 'c0542b18c4e9d970',
  ('k_uniform_scalar_math', 'gfx1200'): '1a5bb2e5c2a8372f',
  ('k_uniform_scalar_math', 'gfx942'): 'a75022f144bda99c',
  ('k_grid_3d', 'gfx1100'): '99af6dbc25996418',
  ('k_grid_3d', 'gfx1101'): 'fe58500223e4af4f',
  ('k_grid_3d', 'gfx1102'): '871cc4c57ad66b95',
  ('k_grid_3d', 'gfx1200'): 'bd6c55b90c513dc7',
  ('k_grid_3d', 'gfx942'): '6698653a9b1dc577',
  ('k_big_offsets', 'gfx1100'): '42b0484767c9700e',
  ('k_big_offsets', 'gfx1101'): 'bee8ef60e071a2ba',
  ('k_big_offsets', 'gfx1102'): 'd27f3cb520faa103',
  ('k_big_offsets', 'gfx1200'): '35e29a6d4693c3aa',
  ('k_big_offsets', 'gfx942'): '003d60024e58e251',
  ('k_transcendental_sin', 'gfx1100'): 'd0bed157fbd2b96f',
  ('k_transcendental_sin', 'gfx1101'): '1a5208541c1a0647',
  ('k_transcendental_sin', 'gfx1102'): 'fda236ea2725f39b',
  ('k_transcendental_sin', 'gfx1200'): 'b3bdeea05cf9e23f',
  ('k_transcendental_sin', 'gfx942'): '38690df3a9be14b7',
  ('k_lds_mirror_two_waves', 'gfx1100'): '692a67c01fae2d63',
  ('k_lds_mirror_two_waves', 'gfx1101'): '136d6cf9d32804d6',
  ('k_lds_mirror_two_waves', 'gfx1102'): '308e9beb21d755d2',
  ('k_lds_mirror_two_waves', 'gfx1200'): 'f74b350e14b6ddfe',
  ('k_lds_mirror_two_waves', 'gfx942'): '20a11e62521b6ff4',
  ('k_private_array_dynamic', 'gfx1100'): '790f0936670be50b',
  ('k_private_array_dynamic', 'gfx1101'): '721de3138ce40e8d',
  ('k_private_array_dynamic', 'gfx1102'): '82e491d908632db0',
  ('k_private_array_dynamic', 'gfx1200'): '23b65583f2844920',
  ('k_private_array_dynamic', 'gfx942'): 'a2be9cb575d1e2a6',
  ('k_register_spills', 'gfx1100'): 'e21a15562f5984f6',
  ('k_register_spills', 'gfx1101'): '892f1251fe1fa6a1',
  ('k_register_spills', 'gfx1102'): '0bac4c90d48e61a7',
  ('k_register_spills', 'gfx1200'): 'd81fd9d3b67eb246',
  ('k_register_spills', 'gfx942'): '4d7723ed2533c7c6',
  ('wide_int64_case', 'gfx1100'): 'cbf58c3a5575d876',
  ('wide_int64_case', 'gfx1101'): '4a2e884ca243b90e',
  ('wide_int64_case', 'gfx1102'): '78fda451c8315e3d',
  ('wide_int64_case', 'gfx1200'): 'dbe7a71ab9790052',
  ('wide_int64_case', 'gfx942'): 'b2c37e1385bccda5',
  ('wide_int64_constant_divisor_case', 'gfx1100'): '1a84f3f83b4eb7d6',
  ('wide_int64_constant_divisor_case', 'gfx1101'): '2a9c0acdd50b8665',
  ('wide_int64_constant_divisor_case', 'gfx1102'): 'a87e860776ce8468',
  ('wide_int64_constant_divisor_case', 'gfx1200'): 'ed32298239c92b03',
  ('wide_int64_constant_divisor_case', 'gfx942'): '5c0afc3741f15dfc',
  ('wide_float64_case', 'gfx1100'): '16de18e6b69ee211',
  ('wide_float64_case', 'gfx1101'): '1ae68b10fcee4cb3',
  ('wide_float64_case', 'gfx1102'): 'd23bd8b07a8afea9',
  ('wide_float64_case', 'gfx1200'): 'c83938a9915b29d6',
  ('wide_float64_case', 'gfx942'): '3fdd97f3f27d60bf',
  ('random_0', 'gfx1100'): '16cc535d17848f5b',
  ('random_0', 'gfx1101'): '01c3ad736d376fd9',
  ('random_0', 'gfx1102'): '4e8a942559bbb280',
  ('random_0', 'gfx1200'): 'd8d6a42b94f35d49',
  ('random_0', 'gfx942'): '5322503c997b7ee0',
  ('random_1', 'gfx1100'): 'da3884cd56bcd38b',
  ('random_1', 'gfx1101'): 'ed6b89560e0151ab',
  ('random_1', 'gfx1102'): '31458058548fd432',
  ('random_1', 'gfx1200'): 'cbb0debd25c6bb68',
  ('random_1', 'gfx942'): 'ba50b28ad070e0c6',
  ('random_2', 'gfx1100'): '5fccd588b6738b0b',
  ('random_2', 'gfx1101'): '22c4475f86534dbd',
  ('random_2', 'gfx1102'): '6b0b1c929abcafb7',
  ('random_2', 'gfx1200'): '4ca25c66cc2ad198',
  ('random_2', 'gfx942'): 'fb633abf89e51861',
  ('random_3', 'gfx1100'): '7f0ff89b3876d0f8',
  ('random_3', 'gfx1101'): 'bdcff110ca4311a0',
  ('random_3', 'gfx1102'): '3dd5685dd213d18b',
  ('random_3', 'gfx1200'): '959f322cb65ee6c5',
  ('random_3', 'gfx942'): 'e9adbcc63cf7d151',
  ('loops_0', 'gfx1100'): 'f13eb2447f2557c6',
  ('loops_0', 'gfx1101'): 'c82143dbec30d94f',
  ('loops_0', 'gfx1102'): 'a72530e4cda72c41',
  ('loops_0', 'gfx1200'): 'b7f5bbb3d17f6941',
  ('loops_0', 'gfx942'): '3b83861a23296b4f',
  ('loops_1', 'gfx1100'): '0888df86218dce5c',
  ('loops_1', 'gfx1101'): 'd0c1e36f2b39ab24',
  ('loops_1', 'gfx1102'): '098322bcf527c52d',
  ('loops_1', 'gfx1200'): '47ce484b302f4cdd',
  ('loops_1', 'gfx942'): '82b653f1d1d61c8f',
  ('loops_2', 'gfx1100'): '8c0d416f66e1548d',
  ('loops_2', 'gfx1101'): '8d03b93b74af7c3c',
  ('loops_2', 'gfx1102'): 'd1b689e16382b76b',
  ('loops_2', 'gfx1200'): 'ca2e84151673ed75',
  ('loops_2', 'gfx942'): 'c8d0ce7c42728b2d',
  ('half_0', 'gfx1100'): 'f1148c37a1b33c13',
  ('half_0', 'gfx1101'): 'fc518aada0b9a138',
  ('half_0', 'gfx1102'): 'dc2fadcb878ea537',
  ('half_0', 'gfx1200'): '0c50590795543f5c',
  ('half_0', 'gfx942'): '9400de36d111e58f',
  ('half_1', 'gfx1100'): 'cea4b7742cd50462',
  ('half_1', 'gfx1101'): '4f6f0571257f51f6',
  ('half_1', 'gfx1102'): '0b9ab872b5dc20e0',
  ('half_1', 'gfx1200'): 'c7289434b4736eec',
  ('half_1', 'gfx942'): 'b680b980f74d7be3',
  ('register_spills_agpr16', 'gfx942'): '2e02841c1093f83c',
  ('chain20k', 'gfx1100'): '40e5e86788dc7713',
  ('chain20k', 'gfx1101'): '6677a69804c7ba56',
  ('chain20k', 'gfx1102'): '67593ae9158e6317',
  ('chain20k', 'gfx1200'): 'c6435af079119b61',
  ('chain20k', 'gfx942'): '92d9866a16da19c6',
}


if __name__ == "__main__":
  for name, make in KERNELS.items():
    for arch in ARCHS: print(f"  ({name!r}, {arch!r}): {digest(make, arch)!r},")
  print(f"  ('register_spills_agpr16', 'gfx942'): {agpr_and_scratch_digest()!r},")
  for arch in ARCHS: print(f"  ('chain20k', {arch!r}): {chain20k_digest(arch)!r},")
