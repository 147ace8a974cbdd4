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
# delay cycles after a cat2/cat3 instruction went into its (nopN) field (Mesa's a6xx rule), and the kernels with a
# madsh when its third source was waited for as read 2 cycles late (Mesa's cat3_src2_read)
WORDS = {
  'ex_elementwise_add': '67fc2b1ef7fea320132d1acf',
  'ex_elementwise_fma': '40325ec4d7bb763597e8f5c0',
  'ex_int_bitops': '03be228e1493e5e576d54202',
  'ex_where_compare': '20043ad0e22837cf4990903b',
  'ex_grid_2d': '867aef0c1550591023bf8c99',
  'ex_runtime_loop': '639a1ff7b52651e0375df104',
  'ex_gated_stencil': 'd8f333d3d4fca0b0e9c204e8',
  'ex_local_reduction': '795a40af4e296698d953ba28',
  'ex_matmul_naive': '6deadfe7b4f358956f7d26c1',
  'ex_matmul_tiled': '31fa79acce0adcddc3d63497',
  'ex_register_accumulator': '77bfc5a01307054fc927afa4',
  'reversed_index': 'b052a8023d39a8ea9400ca7c',
  'f16_arith': '0d38848aaa7890113cdf3b9c',
  'conversions': 'e5feffd2961730b69f0007ff',
  'transcendental': '5d50cd7846455f09d7a0e2f0',
  'int_div_runtime': '74ab67faf4cd760e1763a3bc',
  'uint_div': 'd96c2e0dacba596506359233',
  'int_div_const': '103feb6625437aeedf1e1811',
  'divergent_loop': 'a7c5e3c68692a7ddd328e84b',
  'nested_runtime_loops': '8739d625ed2f233de65f2218',
  'lds_transpose': '99a7ff365547e0ada11fc368',
  'select_minmax': 'c2db146a93da49cc0c8a6b71',
  'narrow_memory': '27a0f935b9bf8770ee211e88',
  'uniform_scalar_math': '55f8979c73f512d292c42d32',
  'grid_3d': '447b79fd530c698c11b0af2b',
  'big_offsets': 'e42d59c32a6d305059a9a9ac',
  'transcendental_sin': '8b7ae90adbc49be5bb15ca56',
  'lds_mirror_two_waves': '67abd7bab90533bb2d8fb9fc',
  'private_array_dynamic': '5f364d324d115472918d571a',
  'register_spills': '057e047a510185b3f7007526',
  'int64_case': '2811f5a02a6b7b1dfebb8713',
  'int64_constant_divisor_case': '4c99f497dbd6eb337d18b6cc',
  'chain_xor_2000': '74b721b5705a4595f96354f1',
  'chain_mul_2000': 'db47fa9ac25cf49488ae040c',
  'chain_xor_20000': '482ed181102ebe0837572e86',
  'matmul_tiled_64_8': '31fa79acce0adcddc3d63497',
  'ex_matmul_tiled_a740': '3396dca4ba07470b63dfecaf',
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
