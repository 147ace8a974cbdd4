"""The ir3 backend's output is pinned: the sha256 of the words (and the dispatch metadata) it emits for a corpus of
kernels (see WORDS for where they come from). A change to isel, legalize, emit or the ir3 assembler/template encoder
that is meant to keep the code the same (issue #30's compile-speed work kept them) must keep these hashes; a change
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
  out["chain_xor_20000"] = ((lambda: _chain(20000, lambda v, i: (v ^ i) + 1)), 630)   # bench/compile.py's chain
  out["matmul_tiled_64_8"] = ((lambda: examples.matmul_tiled_kernel(64, 8)), 630)
  out["ex_matmul_tiled_a740"] = ((lambda: examples.matmul_tiled().sink), 740)
  return out


def digest(prog) -> str:
  meta = (prog.name, prog.gpu_id, prog.args, prog.global_size, prog.local_size, prog.localmem, prog.full_regs,
          prog.branchstack, prog.pvtmem, prog.invocation_id, prog.wgid)
  return hashlib.sha256(prog.code + repr(meta).encode()).hexdigest()[:24]


# produced by `python tests/qcom/test_ir3_words.py`: first by the backend of main at 87d83bc (before the speed work,
# which kept every hash), then again when legalize.py stopped draining the pipeline at every branch and label (the
# kernels with control flow changed; the strict mock, our disassembler and the results tests accept the new words);
# chain_xor_20000 (the bench's 20,000-node chain) pinned by main at 0d6ce68 before the second round of speed work
# (which kept every hash); then the kernels with barriers changed when a barrier took Mesa's rule (no drain before
# it, (ss)(sy) on the instruction after it; the strict mock and our disassembler accept the new words), and again
# when a cat6 instruction took its (sy) itself (Mesa's rule: only its (ss) goes on a nop), and the kernels with
# labels when (jp) went on a label's first instruction instead of a (jp)nop of its own (Mesa's mark_jp), and every
# kernel when the end stopped draining what was pending (Mesa: no delay or flag for OPC_END), and again when up to 3
# delay cycles after a cat2/cat3 instruction went into its (nopN) field (Mesa's a6xx rule)
WORDS = {
  'ex_elementwise_add': 'ee65fcae38bbf08d682aff5a',
  'ex_elementwise_fma': '99262e4ff9f7ca3c632e1701',
  'ex_int_bitops': '1d8c398aa1f13dfd7acc45cd',
  'ex_where_compare': '1ada89e0564e4ea7dc4b9eb4',
  'ex_grid_2d': '63d545cb3571a17f2ef67f6e',
  'ex_runtime_loop': 'abdb60f99a5d94cd53942d40',
  'ex_gated_stencil': 'cd6ea6402ff54e2763231685',
  'ex_local_reduction': 'd618409241f581ad4155837a',
  'ex_matmul_naive': '903c6627158fb1cab40c3b93',
  'ex_matmul_tiled': '11a5455e62a13084657a8b79',
  'ex_register_accumulator': '11e69a79c54e1e9e36257f8c',
  'reversed_index': '1461868d7f63697672cb9534',
  'f16_arith': 'ec6737821e347561d0129fb4',
  'conversions': '668ca01a22645cba2f07b153',
  'transcendental': '9d445513f537fd452025b186',
  'int_div_runtime': '5af4b330b7a9e0b703b04789',
  'uint_div': 'e854db7fe1a51ed9a31a64a9',
  'int_div_const': '4abdd4de270cb4620f38539a',
  'divergent_loop': 'b711ed52a4d0a7fe4eda74f0',
  'nested_runtime_loops': 'c350017eb904209b895bd6a0',
  'lds_transpose': 'b806910bd8ab2c3768d75172',
  'select_minmax': 'f72f05e76b364ff31875c8e5',
  'narrow_memory': '5d93f797c6b44dd0a3f9edc1',
  'uniform_scalar_math': 'a5e4b09d95e8c0d0fd5fd3f9',
  'grid_3d': '6977987a60b857d496c01b5b',
  'big_offsets': '8e0db1f8d90a5f2436f52a38',
  'transcendental_sin': '03d91194df9e3c1ad4813dda',
  'lds_mirror_two_waves': '73d501fbf7c5c5fc6bada189',
  'private_array_dynamic': '10cb4a5ab7860024cf31f6ad',
  'register_spills': '1d4f495be6384b53f3be03b8',
  'int64_case': '35e4529a8e5fb86f4f0d83f4',
  'int64_constant_divisor_case': '77d197534dd057caf230f424',
  'chain_xor_2000': '74b721b5705a4595f96354f1',
  'chain_mul_2000': '5b901d3e748f7b8514df5570',
  'chain_xor_20000': '482ed181102ebe0837572e86',
  'matmul_tiled_64_8': '11a5455e62a13084657a8b79',
  'ex_matmul_tiled_a740': '273d8e7827bba66fb48bf968',
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


@pytest.mark.parametrize("name", ["ex_elementwise_add", "ex_matmul_tiled", "ex_local_reduction", "int64_case",
                                  "nested_runtime_loops", "register_spills", "chain_mul_2000"])
def test_the_one_pass_scan_is_the_spilling_scan_when_nothing_spills(name):
  """isel._scan_fits (the free registers as an int's bits, the registers freed per position in a list) gives every
  value the register the heap-based Selector._scan_spilling gives it whenever no value has to be spilled (with the
  registers the kernel takes and with one more), and refuses (None) where the spilling scan spills; the live ranges
  of a loop-free kernel found by the selector's first walk are straight_ranges'."""
  from hcq.compiler import CompileError, Ops
  from hcq.compiler.backend.ir3 import IR3_TARGET
  from hcq.compiler.backend.ir3.isel import MAX_FULL, NTEMP, Selector, _scan_fits, straight_ranges
  from hcq.compiler.lower import lower
  lin = lower(CORPUS[name][0](), IR3_TARGET)
  if not any(u.op is Ops.END for u in lin.src):
    sel = Selector(lin)
    want = straight_ranges(lin, sel.needs.union(sel.indexes))
    assert list(sel.straight) == list(want) and all(tuple(sel.straight[u]) == tuple(r) for u, r in want.items())

  def scans(nregs):
    sel = Selector(lin)
    sel.spilled.clear()
    ranges, wide = sel._ranges()
    fast = _scan_fits(dict(ranges), sel.needs, wide, nregs, 4, len(lin.src))
    try: slow = sel._scan_spilling(dict(ranges), sel.needs, wide, nregs, 4)
    except CompileError: return fast, None, True       # too few even with spilling (loop counters, pairs)
    return fast, slow, bool(sel.spilled)
  fast, slow, spilled = scans(MAX_FULL * 4 - 4 - NTEMP)
  if spilled:                                 # register_spills: more values live than registers
    assert fast is None
    return
  assert fast == slow and fast
  wide = Selector(lin)._ranges()[1]
  used = max(r + (2 if u in wide else 1) for u, r in fast.items()) - 4    # the registers the kernel takes
  for nregs in (used, used + 1):
    fast, slow, spilled = scans(nregs)
    assert not spilled and fast == slow
  fast, slow, spilled = scans(used - 2)
  assert spilled and fast is None


def test_the_line_cache_is_bounded_and_the_words_stay(monkeypatch):
  """emit.py's per-process line -> word cache starts over at CACHE_LINES lines (a chain's distinct immediates would
  grow it without end); the words of a kernel compiled through a small cache are the pinned ones."""
  from hcq.compiler.backend.ir3 import emit
  monkeypatch.setattr(emit, "CACHE_LINES", 64)
  monkeypatch.setitem(emit._CACHE, 630, {})
  prog = compile_ir3(CORPUS["chain_xor_2000"][0]())
  assert 0 < len(emit._CACHE[630]) <= 64
  assert digest(prog) == WORDS["chain_xor_2000"]


def test_the_table_covers_the_corpus():
  assert set(WORDS) == set(CORPUS)


if __name__ == "__main__":
  for name, (make, gpu_id) in CORPUS.items(): print(f"  {name!r}: {digest(compile_ir3(make(), gpu_id))!r},")
