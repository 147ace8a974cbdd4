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
# kernel when the end stopped draining what was pending (Mesa: no delay or flag for OPC_END)
WORDS = {
  'ex_elementwise_add': '2f0caf27ee192e1d0e41cdee',
  'ex_elementwise_fma': '4cbab958f8cffe446c292098',
  'ex_int_bitops': '17963745181563d9e740c75d',
  'ex_where_compare': '15161bb1397c72aba9d88ddc',
  'ex_grid_2d': 'c0cb1d1ca350891412519fbc',
  'ex_runtime_loop': '38e69a8a9919225116fec7be',
  'ex_gated_stencil': '7bead6812b6a2a71b99e1045',
  'ex_local_reduction': 'bb31a42bd22640e7d139d0b0',
  'ex_matmul_naive': '48aca0a84436652a53cd8115',
  'ex_matmul_tiled': '06f6f1324fa971fab70d70bc',
  'ex_register_accumulator': 'd6e4de9004a86fcb3ff50d98',
  'reversed_index': '7e40217ce9fe6e9a753c6775',
  'f16_arith': 'c779b96ff96d91ce2151da81',
  'conversions': 'e7179f19d2d982a1cc24b9db',
  'transcendental': '43c172b3b680912be75c9297',
  'int_div_runtime': 'fc7d1f0c9b8524c31b5b4c13',
  'uint_div': 'fe67ac9360ce454e6a83f3ae',
  'int_div_const': 'da255ae6839e53f498bb6293',
  'divergent_loop': 'dc742d71c123325aafca495d',
  'nested_runtime_loops': '97e357b4da58d533ec763c33',
  'lds_transpose': '6f685d59ae7b635a1d095cea',
  'select_minmax': '3d9eee21d43aeb84e888478f',
  'narrow_memory': '8ba6efe6da1a036691cdecc8',
  'uniform_scalar_math': 'a4e4dde9adce8f6090f26050',
  'grid_3d': '83316a1bfcdb48d77007fe02',
  'big_offsets': '6e0b88913275b113df05d2b3',
  'transcendental_sin': 'ea3cd250f2652c0e1146b7be',
  'lds_mirror_two_waves': '2b41815c65bb66a23d887069',
  'private_array_dynamic': 'ec900e7576a4764955513f77',
  'register_spills': '3aa0007deac47219fc549aaf',
  'int64_case': 'e0f665f66657d2d8152e555e',
  'int64_constant_divisor_case': 'f2d47e13500237cb6c2b0966',
  'chain_xor_2000': '9f4903bb91a07e62ae1b8a27',
  'chain_mul_2000': 'cb6cd40f363ab9c52ebe66a6',
  'chain_xor_20000': '3c1fec5e092dd9c3f078afb6',
  'matmul_tiled_64_8': '06f6f1324fa971fab70d70bc',
  'ex_matmul_tiled_a740': '27148d382907d65293f365a6',
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
