"""The ir3 backend (compiler/backend/ir3) on MOCK+QCOM: every example kernel and the backend dialect kernels
(tests/backend/amd_kernels.py, the ones the gfx1200/gfx942 suites run) give numpy's / the C backend's results,
synchronous and threaded, under the mock's strict ir3_legalize checks; our disassembler prints every emitted word
back as the emitted line; dev.compile programs the dispatch from the compiled program's metadata; `hcq demo` and
`hcq kernels` run through the compiler."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import hcq
from hcq.compiler import CompileError, examples
from hcq.compiler.backend.ir3 import compile_ir3
from hcq.compiler.isa.ir3.asm import canonical
from hcq.compiler.isa.ir3.isa import ISA
from hcq.config import Config
from hcq.errors import GPUFault

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
import amd_kernels  # noqa: E402
from amd_reference import assert_same, run_c  # noqa: E402
from tests.compiled_runs import run_example  # noqa: E402

UNSUPPORTED: set = set()
FEATURES = [f for f in amd_kernels.ALL if f.__name__ not in UNSUPPORTED]


@pytest.fixture(scope="module", params=[False, True], ids=["synchronous", "threaded"])
def dev(request):
  d = hcq.open("MOCK+QCOM", Config(timeout_s=30.0, mock_threaded=request.param))
  yield d
  d.close()


_run = run_example


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_examples_give_numpys_results_on_mock_qcom(dev, make):
  ex = make()
  got = _run(dev, ex, list(ex.expected))
  for s, want in ex.expected.items(): assert_same(got[s], want, 1e-5, what=f"{ex.name} slot {s} on {dev.name}")


def _feature(dev, make):
  c = make()
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got = _run(dev, c, c.outputs)
  for s in c.outputs: assert_same(got[s], ref[s], getattr(c, "float_rtol", 1e-5), what=f"{c.name} slot {s}")


@pytest.fixture(scope="module")
def sync_dev():
  d = hcq.open("MOCK+QCOM", Config(timeout_s=30.0))
  yield d
  d.close()


@pytest.mark.tools("cc")
@pytest.mark.parametrize("make", FEATURES, ids=[f.__name__ for f in FEATURES])
def test_feature_kernels_match_c_backend_on_mock_qcom(sync_dev, make):
  _feature(sync_dev, make)


@pytest.mark.slow
@pytest.mark.tools("cc")
@pytest.mark.parametrize("make", FEATURES, ids=[f.__name__ for f in FEATURES])
def test_feature_kernels_match_c_backend_on_threaded_mock_qcom(make):
  """The same on the threaded mock (the examples above run threaded in the default suite)."""
  with hcq.open("MOCK+QCOM", Config(timeout_s=30.0, mock_threaded=True)) as d: _feature(d, make)


def test_unsupported_types_are_refused_at_compile_time():
  from hcq.compiler import KernelInfo, UOp, dtypes
  p = UOp.param(0, dtypes.float64, 8, readonly=False)
  sink = p.index(UOp.special(8, "lidx0")).store(UOp.const(1.5, dtypes.float64)).sink(arg=KernelInfo("f64"))
  with pytest.raises(CompileError, match="ir3 backend: dtypes.float64"): compile_ir3(sink)


CORPUS = [("ex_" + f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in FEATURES]


@pytest.mark.parametrize("make", [f for _, f in CORPUS], ids=[n for n, _ in CORPUS])
def test_our_disassembler_prints_every_emitted_word_as_emitted(make):
  prog = compile_ir3(make().sink)
  isa = ISA(630)
  words = np.frombuffer(prog.code, np.uint64)
  assert len(words) == len(prog.lines)
  for w, line in zip(words, prog.lines):
    assert canonical(isa.disasm_word(int(w))) == canonical(line) and not isa.errors, (line, hex(int(w)), isa.errors)


def test_the_legalizer_is_what_makes_the_mock_accept_the_code(monkeypatch):
  """Without the delay-slot nops (or without the (sy) flags) the strict mock faults naming the hazard: the sync the
  backend emits is needed, not decorative."""
  from hcq.compiler.backend.ir3 import legalize as L
  orig = L.legalize
  ex = examples.elementwise_add()
  for drop in (lambda i: i.kind == "nop" and "rpt" in i.text, None):
    def weak(prog, drop=drop):
      out = orig(prog)
      if drop is not None: return [i for i in out if not drop(i)]
      for i in out: i.flags = i.flags.replace("(sy)", "")
      return out
    monkeypatch.setattr(L, "legalize", weak)
    with hcq.open("MOCK+QCOM") as d, pytest.raises(GPUFault, match="sync hazard|needs \\(sy\\)|too early"):
      _run(d, ex, [2])


@pytest.mark.parametrize("weaken", ["flags after bar", "delay nops", "(ss) flags", "(nopN) fields", "mad src2 late"])
def test_at_a_barrier_the_flags_after_it_are_what_makes_the_mock_accept_the_code(monkeypatch, weaken):
  """A barrier takes Mesa's rule (legalize.py: nothing drained before it, (ss)(sy) on the instruction after it): in
  local_reduction the instruction after each barrier is an ALU one, and the store before the barrier still reads its
  address register when the code after the barrier overwrites it. Without those flags (or without the delay nops)
  the strict mock faults: the barrier's code is not left with too few waits."""
  import dataclasses
  import re
  from hcq.compiler.backend.ir3 import legalize as L
  orig = L.legalize

  def weak(prog):
    out = orig(prog)
    if weaken == "mad src2 late": return out
    if weaken == "delay nops": return [i for i in out if not (i.kind == "nop" and "rpt" in i.text)]
    if weaken == "(nopN) fields":   # the delay cycles legalize put in cat2/cat3 instructions
      return [dataclasses.replace(i, flags=re.sub(r"\(nop\d\) ", "", i.flags)) for i in out]
    if weaken == "(ss) flags":      # on the instructions and on the nops carrying it for the stores
      return [dataclasses.replace(i, text=i.text.replace("(ss)", ""), flags=i.flags.replace("(ss)", "")) for i in out]
    after = {k + 1 for k, i in enumerate(out) if i.kind == "bar"}
    assert after and all(out[k].kind == "alu" and out[k].flags.startswith("(sy)(ss)") for k in after)
    return [dataclasses.replace(i, flags=i.flags[8:]) if k in after else i for k, i in enumerate(out)]
  monkeypatch.setattr(L, "legalize", weak)
  if weaken == "mad src2 late":   # a madsh's third source taken as read 3 cycles late, one more than the hardware
    monkeypatch.setattr(L, "CAT3_SRC2_READ", 3)
  ex = examples.local_reduction()
  with hcq.open("MOCK+QCOM") as d, pytest.raises(GPUFault, match="sync hazard|\\(ss\\) first|too early"):
    _run(d, ex, list(ex.expected))


def test_dispatch_state_comes_from_the_compiled_metadata():
  from hcq.drivers.qcom.program import shared_size_field
  with hcq.open("MOCK+QCOM") as d:
    prog = d.compile(examples.local_reduction().sink)
    assert prog.kernel.localmem == prog.compiled.localmem == 64 * 4
    assert prog.required_block == (64, 1, 1) and prog.kernel.invocation_id == 0 and prog.kernel.wgid == 48 * 4
    assert prog.full_regs == prog.compiled.full_regs and prog.kernel.branchstack == prog.compiled.branchstack >= 1
    assert shared_size_field(prog.kernel.localmem) == 1
    tiled = d.compile(examples.matmul_tiled().sink)
    assert tiled.kernel.localmem == 2 * 8 * 8 * 4 and tiled.required_block == (8, 8, 1)
    with pytest.raises(hcq.DeviceError, match="takes 3 argument"): tiled(global_size=(8, 8, 1), local_size=(8, 8, 1))


def test_scalar_arguments_are_constants_and_buffers_ibos_bounded_by_their_size():
  """runtime_loop's trip count is an integer argument (a constant); a buffer's IBO covers the Buffer's own size."""
  ex = examples.runtime_loop()
  with hcq.open("MOCK+QCOM") as d:
    got = _run(d, ex, [1])[1]
    assert_same(got, ex.expected[1])
    ex.args[2] = 5
    a = ex.args[0]
    assert_same(_run(d, ex, [1])[1], a[:, :5].sum(1, dtype=np.float32))


def test_hcq_demo_runs_through_the_compiler(capsys):
  import argparse

  from hcq.cli import demo
  assert demo.run(argparse.Namespace(device="MOCK+QCOM", n=1000, m=37)) == 0
  out = capsys.readouterr().out
  assert "a630" in out and out.count(" ok ") == 2, out


def test_hcq_kernels_passes_every_example(capsys):
  import argparse

  from hcq.cli import kernels
  assert kernels.run(argparse.Namespace(names=[], device="MOCK+QCOM", show=None)) == 0
  out = capsys.readouterr().out
  assert out.count(" ok ") == len(examples.ALL), out


def test_template_encoder_gives_the_assemblers_words():
  """Lines of a common shape are encoded from the shape's template (compiler/isa/ir3/template.py): the words equal
  the assembler's for registers, offsets and immediates it was not built from."""
  from hcq.compiler.isa.ir3.asm import Assembler
  from hcq.compiler.isa.ir3.template import TEMPLATE_AFTER, TemplateEncoder
  asm = Assembler(630)
  enc = TemplateEncoder(asm)
  rng = np.random.default_rng(3)
  shapes = ["(sy)add.u r{a}.{c}, r{b}.{c}, r{d}.x", "ldp.u32 r{a}.y, p[r{b}.{c}+{off}], 1",
            "mov.u32u32 r{a}.{c}, {imm}", "(sy)stp.u32 p[r{b}.x+{off}], r{a}.{c}, 1", "cov.f32f16 hr{a}.{c}, r{b}.x"]
  for shape in shapes:
    for k in range(TEMPLATE_AFTER + 6):
      line = shape.format(a=rng.integers(0, 48), b=rng.integers(0, 48), d=rng.integers(0, 48), c="xyzw"[k % 4],
                          off=rng.integers(1, 4096), imm=rng.integers(0, 2**32))
      assert enc.encode(line) == asm.assemble_line(line), line
  assert all(enc.templates.values()) and len(enc.templates) == len(shapes)


# ---------------------------------------------------------------------------------------------------- 64-bit integers
def _wide_chunks():
  """tests/backend/test_amd_wide.py's int64 kernels, a few outputs per kernel (the whole kernel runs longer than the
  mock's 2 s hang timer on the emulator: its 64-step divisions are emulated per fiber)."""
  import test_amd_wide as W
  out = []
  for case in (W.int64_case, W.int64_constant_divisor_case):
    cap = {}
    orig = W._kernel
    def grab(name, ins, exprs_of, out_dtypes, cap=cap):
      cap.update(ins=ins, f=exprs_of)
      return orig(name, ins, exprs_of, out_dtypes)
    W._kernel = grab
    try: _, _, want = case()
    finally: W._kernel = orig
    nin, n = len(cap["ins"]), len(want)
    for lo in range(0, n, 6):
      sel = list(range(lo, min(n, lo + 6)))
      out.append((f"{case.__name__}[{lo}:{sel[-1] + 1}]", cap["ins"], cap["f"], sel, [want[nin + k] for k in sel]))
  return out


WIDE = _wide_chunks()


@pytest.mark.parametrize("chunk", [c if c[0].startswith("int64_case") else pytest.param(c, marks=pytest.mark.slow)
                                   for c in WIDE], ids=[c[0] for c in WIDE])
def test_int64_kernels_match_numpy_on_mock_qcom(chunk):
  import test_amd_wide as W
  name, ins, f, sel, want = chunk
  sink, args, nin = W._kernel("wide", ins, lambda *v: [f(*v)[k] for k in sel], [np.int64] * len(sel))
  with hcq.open("MOCK+QCOM") as d:
    prog = d.compile(sink)
    bufs = []
    for a in args:
      b = d.alloc(max(a.nbytes, 4))
      d.copyin(b, a.tobytes())
      bufs.append(b)
    prog(*bufs, global_size=(W.N // 32, 1, 1), local_size=(32, 1, 1), wait=True)
    for j, w in enumerate(want):
      got = np.frombuffer(d.copyout(bufs[nin + j])[:w.nbytes], np.int64)
      np.testing.assert_array_equal(got, w, err_msg=f"{name} output {sel[j]}")


def test_compile_targets_and_a7xx_words():
  """compile(sink, "a630"|"a730"|"a740") is the ir3 backend; a7xx words are decoded by the generation-7 ISA as the
  same lines (the instructions used encode alike there)."""
  from hcq.compiler import compile as hcq_compile
  ex = examples.matmul_tiled()
  p6, p7 = hcq_compile(ex.sink, "a630"), hcq_compile(ex.sink, "a740")
  assert p6.gpu_id == 630 and p7.gpu_id == 740 and p6.lines == p7.lines
  isa7 = ISA(740)
  for w, line in zip(np.frombuffer(p7.code, np.uint64), p7.lines):
    assert canonical(isa7.disasm_word(int(w))) == canonical(line) and not isa7.errors, line
  with pytest.raises(CompileError, match="not an Adreno"): compile_ir3(ex.sink, 540)


def test_float16_runs_on_half_registers():
  """f16 arithmetic is half-precision ALU work on half registers (merged: hr(2R) is r(R)'s low half), loaded and
  stored as 16-bit, not float32 work with conversions around it."""
  lines = compile_ir3(amd_kernels.f16_arith().sink).lines
  ops = [l.split(")")[-1].lstrip() for l in lines]        # without the sync flags and (nopN)
  # x * y - x, x + y, y * 0.5, the f16 + of the bool/select constants: half-precision ALU instructions
  assert sum(o.startswith(("mul.f hr", "add.f hr")) for o in ops) >= 4
  assert sum(o.startswith("cmps.f.lt r") and ", hr" in o for o in ops) >= 2        # f16 compares, a full bool result
  assert any("ldib.b.untyped.1d.f16.1.imm hr" in o for o in ops) and any("stib.b.untyped.1d.f16.1.imm hr" in o
                                                                        for o in ops)
  assert not any("cov.f32f16" in o for o in ops)          # no float32 work rounded back to f16


def test_conversions_between_floats_and_64_bit_and_narrow_unsigned_integers():
  """float32 -> int64/uint64 (truncating, saturating, NaN 0), int64/uint64 -> float32 (one rounding) and float32 ->
  uint8/uint16 (saturating at the uint32 range, then the low bits) as compiler/ir/dtypes.float_to_int defines them."""
  from hcq.compiler import KernelInfo, UOp, dtypes
  from hcq.compiler.ir.dtypes import float_to_int
  rng = np.random.default_rng(5)
  n = 128
  special = [np.nan, np.inf, -np.inf, 2.0**63, -2.0**63, 2.0**64, -1.5, 0.0, -0.0, 4294967296.0, 4294967295.0, 1e30,
             -1e30, 255.9, -255.9, 65536.5]
  f = np.concatenate([rng.standard_normal(40) * 1e3, rng.standard_normal(40) * 1e15, special,
                      rng.standard_normal(n - 80 - len(special)) * 1e9]).astype(np.float32)
  i = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
  i[:8] = [0, 1, -1, 2**63 - 1, -2**63, 2**24 + 1, 2**53 + 3, -(2**40) - 7]
  def P(slot, arr, ro=True): return UOp.param(slot, dtypes.from_numpy(arr.dtype), arr.size, readonly=ro)
  outs = [np.zeros(n, np.int64), np.zeros(n, np.uint64), np.zeros(n, np.float32), np.zeros(n, np.float32),
          np.zeros(n, np.uint8), np.zeros(n, np.uint16)]
  F, I, O = P(0, f), P(1, i), [P(2 + k, o, False) for k, o in enumerate(outs)]
  g = UOp.special(n // 32, "gidx0") * 32 + UOp.special(32, "lidx0")
  x, y = F.index(g).load(), I.index(g).load()
  vals = [x.cast(dtypes.int64), x.cast(dtypes.uint64), y.cast(dtypes.float32),
          y.cast(dtypes.uint64).cast(dtypes.float32), x.cast(dtypes.uint8), x.cast(dtypes.uint16)]
  sink = UOp.sink(*[o.index(g).store(v) for o, v in zip(O, vals)], arg=KernelInfo("cvt64"))
  want = [np.array([float_to_int(float(v), dtypes.int64) for v in f], np.int64),
          np.array([float_to_int(float(v), dtypes.uint64) for v in f], np.uint64),
          i.astype(np.float32), i.view(np.uint64).astype(np.float32),
          np.array([float_to_int(float(v), dtypes.uint8) & 0xFF for v in f], np.uint8),
          np.array([float_to_int(float(v), dtypes.uint16) & 0xFFFF for v in f], np.uint16)]
  with hcq.open("MOCK+QCOM") as d:
    prog = d.compile(sink)
    bufs = []
    for a in [f, i, *outs]:
      b = d.alloc(a.nbytes)
      d.copyin(b, a.tobytes())
      bufs.append(b)
    prog(*bufs, global_size=(n // 32, 1, 1), local_size=(32, 1, 1), wait=True)
    for k, w in enumerate(want):
      np.testing.assert_array_equal(np.frombuffer(d.copyout(bufs[2 + k]), w.dtype), w, err_msg=f"output {k}")
