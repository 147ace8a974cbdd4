"""Hand-written RDNA3 code entering the pipeline as PROGRAM(LINEAR(INS ...)) (issue #20): an INS carries one
instruction (LLVM-syntax text, a label, or its encoding), a PROGRAM of them goes through the code-object writer
compiled kernels go through (program.code_object; render.code_object writes a compiled kernel's text and metadata
the same way, and its PROGRAM, render.compiled_program, gives the same bytes), and
dev.compile() loads it like a compiled kernel. Runs on MOCK+AMD against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import hcq
from hcq.compiler import CompileError, Ops, compile as hcq_compile, examples
from hcq.compiler.isa.amd.asm import Asm, assemble
from hcq.compiler.isa.amd.cowriter import Arg, KernelSpec, write_code_object
from hcq.compiler.isa.amd.errors import AssembleError, CodeObjectError
from hcq.compiler.backend.amd.program import KernelMeta, code_object, ins, program, program_code
from hcq.compiler.backend.amd.render import compile_linear, compiled_program, GFX1100_TARGET
from hcq.compiler.lower import lower

ARGS = [Arg(0, 8, "global_buffer", "a"), Arg(8, 8, "global_buffer", "b"), Arg(16, 8, "global_buffer", "c")]
META = dict(args=ARGS, vgpr_count=3, sgpr_count=16)
# c[i] = a[i] + 3 * b[i], 64 work-items per group, the work-group id in s15 (gfx11 user-SGPR padding)
AXPY3 = """s_load_b128 s[4:7], s[0:1], null
s_load_b64 s[8:9], s[0:1], 0x10
v_and_b32_e32 v0, 0x3ff, v0
v_lshl_add_u32 v0, s15, 6, v0
v_lshlrev_b32_e32 v0, 2, v0
s_waitcnt lgkmcnt(0)
global_load_b32 v1, v0, s[4:5]
global_load_b32 v2, v0, s[6:7]
s_mov_b32 s10, 3
s_waitcnt vmcnt(0)
loop:
v_add_f32_e32 v1, v1, v2
s_sub_u32 s10, s10, 1
s_cmp_lg_u32 s10, 0
s_cbranch_scc1 loop
global_store_b32 v0, v1, s[8:9]
s_endpgm"""


def _asm() -> Asm:
  a = Asm()
  for line in AXPY3.splitlines():
    if line.endswith(":"): a.label(line[:-1])
    else: a.emit(line)
  return a


def _mixed() -> object:
  """The same kernel built from INS UOps directly, the loop body's add given encoded: the branch counts its bytes."""
  body = [ins(assemble(line)) if line.startswith("v_add_f32") else ins(line) for line in AXPY3.splitlines()]
  return program("axpy3", body, **META)


@pytest.fixture(scope="module")
def dev():
  with hcq.open("MOCK+AMD") as d: yield d


def test_an_ins_is_one_instruction():
  u = ins("  v_add_f32 v2, v2, v3 ")
  assert u.op is Ops.INS and u.arg[0] == "v_add_f32 v2, v2, v3" and not u.src
  assert ins(b"\x00\x00\x9f\xbf").arg[0] == b"\x00\x00\x9f\xbf"
  with pytest.raises(AssembleError, match="one instruction"): ins("s_nop 0\ns_endpgm")
  p = program("k", [ins("s_nop 0"), "s_nop 0", "s_endpgm"])
  assert p.op is Ops.PROGRAM and p.src[0].op is Ops.LINEAR and p.src[0].src[0] is p.src[0].src[1]
  assert isinstance(p.arg, KernelMeta) and p is program("k", ["s_nop 0", "s_nop 0", "s_endpgm"])   # hash-consed


def test_asm_dsl_program_writes_the_asm_dsl_code_object():
  a = _asm()
  prog = program("axpy3", a, **META)
  assert [u.arg[0] for u in prog.src[0].src] == a.lines
  by_hand = write_code_object([KernelSpec("axpy3", a.code, ARGS, vgpr_count=3, sgpr_count=16)])
  assert code_object(prog) == by_hand
  assert code_object(_mixed()) == by_hand                   # encoded INS and labels mix
  assert hcq_compile(prog, "gfx1100") == by_hand            # the compiler's entry takes a PROGRAM too


def test_program_of_an_asm_takes_its_target():
  a = Asm("gfx1200")
  a.s_endpgm()
  assert program("k", a).arg.arch == "gfx1200" and program("k", a, arch="gfx1100").arg.arch == "gfx1100"
  assert program("k", _asm(), **META).arg == KernelMeta.make("k", **META)          # an Asm() targets gfx1100


def test_hand_written_program_runs_on_mock_amd(dev):
  rng = np.random.default_rng(5)
  a, b = rng.standard_normal(256).astype(np.float32), rng.standard_normal(256).astype(np.float32)
  for prog in (program("axpy3", _asm(), **META), _mixed()):
    bufs = [dev.alloc(1024) for _ in range(3)]
    dev.copyin(bufs[0], a)
    dev.copyin(bufs[1], b)
    dev.compile(prog)(*bufs, global_size=(4, 1, 1), local_size=(64, 1, 1), wait=True)
    got = np.frombuffer(dev.copyout(bufs[2]), np.float32)
    np.testing.assert_array_equal(got, ((a + b) + b) + b)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200", "gfx942"])
@pytest.mark.parametrize("example", [examples.elementwise_add, examples.matmul_tiled])
def test_compiled_kernels_take_the_same_path(arch, example):
  """render.code_object writes a compiled kernel's text and metadata directly (issue #30: no INS per instruction
  decoded again); its PROGRAM of one encoded INS per instruction makes the very same code object."""
  from hcq.compiler.backend.amd.render import TARGETS
  lin = lower(example().sink, TARGETS[arch])
  c = compile_linear(lin, arch)
  prog = compiled_program(c, arch)
  assert all(u.op is Ops.INS and isinstance(u.arg[0], bytes) for u in prog.src[0].src)
  assert program_code(prog) == c.text
  assert code_object(prog) == hcq_compile(example().sink, arch)


def test_bad_programs_are_refused_naming_the_instruction():
  with pytest.raises(AssembleError, match=r"PROGRAM k: INS 1: .*v_bogus"): code_object(program("k", ["s_nop 0", "v_bogus v1"]))
  with pytest.raises(AssembleError, match="INS 0 holds 8 bytes"): code_object(program("k", [assemble("s_nop 0\ns_endpgm")]))
  with pytest.raises(AssembleError, match="undefined label"): code_object(program("k", ["s_branch nowhere", "s_endpgm"]))
  with pytest.raises(CodeObjectError, match="no code-object field vgprs"): program("k", ["s_endpgm"], vgprs=3)
  with pytest.raises(CompileError, match="not an INS"):
    program_code(program("k", [ins("s_endpgm")]).replace(src=(lower(examples.elementwise_add().sink),)))
  with pytest.raises(CompileError, match="targets 'gfx1200'"):
    hcq_compile(program("k", ["s_endpgm"], arch="gfx1200"), "gfx1100")
  with pytest.raises(CompileError, match="does not compile for 'c'"): hcq_compile(program("k", ["s_endpgm"]), "c")


def test_a_malformed_argument_tuple_is_a_code_object_error():
  from hcq.compiler.isa.amd.errors import CodeObjectError
  from hcq.compiler.backend.amd.program import KernelMeta
  with pytest.raises(CodeObjectError, match=r"kernel k: argument \('a',\): .*missing"): KernelMeta.make("k", [("a",)])
