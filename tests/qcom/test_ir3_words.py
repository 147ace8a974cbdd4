"""The ir3 backend's output is pinned: the sha256 of the words (and the dispatch metadata) it emits for a corpus of
kernels, as the backend emitted them before its compile-speed work (issue #30, Speed). A change to isel, legalize,
emit or the ir3 assembler/template encoder that is meant to keep the code the same must keep these hashes; a change
meant to alter the code updates them (`python tests/qcom/test_ir3_words.py` prints the table) after the strict mock,
our disassembler and the results tests (tests/qcom/test_ir3_backend.py) have accepted the new words.

The corpus: the examples, the feature kernels (tests/backend/amd_kernels.py), the int64 kernels of
tests/backend/test_amd_wide.py, ALU chains as bench/compile.py builds them, the tiled matmul, and one kernel for a7xx.
Each corpus kernel is also checked here against our disassembler (every word prints back as its line)."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backend"))

from hcq.compiler import KernelInfo, UOp, dtypes, examples  # noqa: E402
from hcq.compiler.backend.ir3 import compile_ir3  # noqa: E402
from hcq.compiler.isa.ir3.asm import canonical  # noqa: E402
from hcq.compiler.isa.ir3.isa import ISA  # noqa: E402


def _chain(nodes: int, step):
  """bench/compile.py's alu_chain: `nodes` ALU nodes (two per step) on a loaded int32, stored."""
  v = UOp.param(1, dtypes.int32, 1, readonly=True).index(0).load()
  for i in range(nodes // 2): v = step(v, i)
  return UOp.param(0, dtypes.int32, 1).index(0).store(v).sink(arg=KernelInfo(f"chain{nodes}"))


def _wide(case):
  import test_amd_wide as W
  return lambda: getattr(W, case)()[0]


def corpus() -> dict:
  """name -> (make the sink, gpu id)."""
  import amd_kernels
  out = {f"ex_{f.__name__}": ((lambda f=f: f().sink), 630) for f in examples.ALL}
  out.update({f.__name__: ((lambda f=f: f().sink), 630) for f in amd_kernels.ALL})
  out["int64_case"] = (_wide("int64_case"), 630)
  out["int64_constant_divisor_case"] = (_wide("int64_constant_divisor_case"), 630)
  out["chain_xor_2000"] = ((lambda: _chain(2000, lambda v, i: (v ^ i) + 1)), 630)
  out["chain_mul_2000"] = ((lambda: _chain(2000, lambda v, i: v * 3 + 1)), 630)
  out["matmul_tiled_64_8"] = ((lambda: examples.matmul_tiled_kernel(64, 8)), 630)
  out["ex_matmul_tiled_a740"] = ((lambda: examples.matmul_tiled().sink), 740)
  return out


def digest(prog) -> str:
  meta = (prog.name, prog.gpu_id, prog.args, prog.global_size, prog.local_size, prog.localmem, prog.full_regs,
          prog.branchstack, prog.pvtmem, prog.invocation_id, prog.wgid)
  return hashlib.sha256(prog.code + repr(meta).encode()).hexdigest()[:24]


# produced by the backend of main at 87d83bc (before the speed work), `python tests/qcom/test_ir3_words.py`
WORDS = {
  'ex_elementwise_add': '0f6496794aade3c9fa722198',
  'ex_elementwise_fma': 'b1f2c1a0947e47b65bb321b7',
  'ex_int_bitops': '20f9db8f4ed8901d5b3b14d5',
  'ex_where_compare': '28c21b1479fe244b5732c3df',
  'ex_grid_2d': '64b9440acb9056efbc93b35a',
  'ex_runtime_loop': 'e89b91fea91a20f14fa73878',
  'ex_gated_stencil': 'da4b81f13191e381954c198f',
  'ex_local_reduction': '5df65ab067cd4414125daca1',
  'ex_matmul_naive': '8f9797c37f9a5d8cbd70e335',
  'ex_matmul_tiled': '41b24da46a2f0d947d7cf377',
  'ex_register_accumulator': '56ce01f39fbc0b2f4a79d97f',
  'reversed_index': 'ab6eeb696eb737d4679759cc',
  'f16_arith': 'a15aa0291c0868038c580ab4',
  'conversions': '12dc7f1df691f68c3f25f9b0',
  'transcendental': '6664e3bbc01f6e9ab8dfd15f',
  'int_div_runtime': 'a801b36b8426894d0d487287',
  'uint_div': 'a3bb22e2d9ce958340575197',
  'int_div_const': '1ce1813edb6abdd516981fbd',
  'divergent_loop': '5337325949daf17f82c17fe1',
  'nested_runtime_loops': '1e2f0373c4bb50cfce17cc16',
  'lds_transpose': 'e6c8863fe83831de2faa85ff',
  'select_minmax': '6ce04931899c0de8a9a2fbe2',
  'narrow_memory': 'fb16e8e5b67876bcc9f872de',
  'uniform_scalar_math': '4e0fc0efb08ae6a4b4e7fddc',
  'grid_3d': '221cb66b5e18b6b5d2eba2db',
  'big_offsets': '6a05464d4a746f0b545d299c',
  'transcendental_sin': 'e799b2c29fa1c608a38e1146',
  'lds_mirror_two_waves': '844e2a0e16004a9316336f42',
  'private_array_dynamic': '5d20aa059ab4677fe58c90ce',
  'register_spills': '3a389e1d3072498e881eb02d',
  'int64_case': '22fa890c065e3e64701e3ac4',
  'int64_constant_divisor_case': '74bd890ee442f73c9176d7b2',
  'chain_xor_2000': 'f4a47c9e0958a8ec2bfa49ca',
  'chain_mul_2000': '20d82c839fc72a7e3d660d03',
  'matmul_tiled_64_8': '41b24da46a2f0d947d7cf377',
  'ex_matmul_tiled_a740': '0723744ed17d0a5b02d06f8b',
}

CORPUS = corpus()


@pytest.mark.parametrize("name", list(CORPUS))
def test_emitted_words_are_the_pinned_ones(name):
  make, gpu_id = CORPUS[name]
  prog = compile_ir3(make(), gpu_id)
  isa = ISA(gpu_id)
  words = np.frombuffer(prog.code, np.uint64)
  assert len(words) == len(prog.lines)
  for w, line in set(zip(words.tolist(), prog.lines)):    # each distinct word once
    assert canonical(isa.disasm_word(w)) == canonical(line) and not isa.errors, (name, line, hex(w))
  assert digest(prog) == WORDS[name], f"{name}: the emitted words or metadata changed ({len(words)} words)"


@pytest.mark.parametrize("name", ["ex_matmul_tiled", "int64_case", "register_spills", "f16_arith", "chain_xor_2000"])
def test_a_lines_shape_from_the_selector_is_its_texts(name):
  """Ins.enc (the shape and values the selector builds with a line, for the template encoder) is what
  compiler/isa/ir3/template.split reads from the line's text, sync flags included: encoding without parsing the text
  gives the word of the text."""
  from hcq.compiler.backend.ir3 import IR3_TARGET
  from hcq.compiler.backend.ir3.isel import Selector
  from hcq.compiler.backend.ir3.legalize import legalize
  from hcq.compiler.isa.ir3.template import split
  from hcq.compiler.lower import lower
  prog = legalize(Selector(lower(CORPUS[name][0](), IR3_TARGET)).run())
  checked = 0
  for ins in prog:
    if ins.enc is None or ins.target is not None: continue
    shape, values = ins.enc
    assert split(ins.flags + ins.text) == ((ins.flags + shape[0], *shape[1:]), list(values)), ins
    checked += 1
  assert checked >= 10


@pytest.mark.parametrize("name", ["ex_elementwise_add", "ex_gated_stencil", "int64_case", "register_spills",
                                  "chain_mul_2000"])
def test_straight_ranges_are_live_ranges_without_loops(name):
  """The selector's live ranges of a loop-free kernel (isel.straight_ranges) are compiler/lower/regalloc.live_ranges'."""
  from hcq.compiler import Ops
  from hcq.compiler.backend.ir3 import IR3_TARGET
  from hcq.compiler.backend.ir3.isel import straight_ranges
  from hcq.compiler.lower import lower
  from hcq.compiler.lower.regalloc import live_ranges, produces_value
  lin = lower(CORPUS[name][0](), IR3_TARGET)
  assert not any(u.op is Ops.END for u in lin.src)
  for needs in ({u for u in lin.src if produces_value(u)}, set(lin.src[::3])):
    got = straight_ranges(lin, needs)
    want = live_ranges(lin, needs.__contains__)
    assert list(got) == list(want) and {u: tuple(r) for u, r in got.items()} == want


def test_the_table_covers_the_corpus():
  assert set(WORDS) == set(CORPUS)


if __name__ == "__main__":
  for name, (make, gpu_id) in CORPUS.items(): print(f"  {name!r}: {digest(compile_ir3(make(), gpu_id))!r},")
