"""The RDNA3 (gfx1100) backend end to end: DSL kernel -> code object -> llvm-objdump-19 (no unknown words; llvm-mc-19
and hcq's own assembler re-encode every printed instruction to the same bytes) -> the wave emulator, compared with the C backend
(bit-exact for integers, 1e-5 relative for floats) and with numpy where the example carries its answer."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import amd_kernels
from amd_reference import assert_same, objdump, run_c, run_gfx1100, unknown_words
from hcq.autogen.isa.llvm_oracle import assemble as llvm_mc_assemble
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler import AddrSpace, CompileError, KernelInfo, UOp, compile as hcq_compile, dtypes, examples

pytestmark = pytest.mark.tools("cc", "llvm-objdump-19", "llvm-mc-19")


def _check_disassembly(blob: bytes):
  dis = objdump(blob)
  assert not unknown_words(dis), unknown_words(dis)
  insts = re.findall(r"^\t(\S.*?)\s+// [0-9A-F]+: ([0-9A-F ]+)", dis, re.M)
  assert insts, dis
  # llvm-mc re-encodes what llvm-objdump printed: the same words (our encoder agrees with LLVM's)
  encs = llvm_mc_assemble([t.strip() for t, _ in insts])
  assert len(encs) == len(insts), f"llvm-mc-19 answered {len(encs)} of {len(insts)} instructions"
  for (t, words), enc in zip(insts, encs):
    assert not isinstance(enc, str), f"{t}: llvm-mc-19 rejects it: {enc}"
    got = enc[1]
    ours = b"".join(int(w, 16).to_bytes(4, "little") for w in words.split())
    assert got == ours, f"{t}: llvm-mc {got.hex()} vs ours {ours.hex()}"
    assert assemble(t) == ours, f"{t}: the ISA helper's text assembler disagrees"
  return dis


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_compiler_core_examples(make):
  ex = make()
  ref = run_c(ex.sink, ex.args, ex.global_size, ex.local_size)
  got, blob, stats = run_gfx1100(ex.sink, ex.args, ex.global_size, ex.local_size)
  _check_disassembly(blob)
  assert stats.wave_instructions > 0
  for slot, want in ex.expected.items():
    assert_same(got[slot], ref[slot], what=f"{ex.name} slot {slot} vs the C backend")
    assert_same(got[slot], want, what=f"{ex.name} slot {slot} vs numpy")


@pytest.mark.parametrize("make", amd_kernels.ALL, ids=[f.__name__ for f in amd_kernels.ALL])
def test_feature_kernels(make):
  c = make()
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, blob, _ = run_gfx1100(c.sink, c.args, c.global_size, c.local_size)
  _check_disassembly(blob)
  for slot in c.outputs:
    assert_same(got[slot], ref[slot], c.float_rtol, what=f"{c.name} slot {slot} vs the C backend")


def test_runtime_loop_trip_counts_really_are_runtime():
  """One code object, several trip counts (0 included: the loop is skipped by its scalar guard)."""
  ex = examples.runtime_loop(n=37)
  blob = hcq_compile(ex.sink, "gfx1100")
  from amd_emu_runner import run
  a = ex.args[0]
  for n in (0, 1, 64):
    (_, out, _), _ = run(blob, [a, np.zeros(16, np.float32), n], ex.global_size, ex.local_size)
    np.testing.assert_allclose(out, a[:, :n].sum(1), rtol=1e-5, atol=1e-5)


def test_code_uses_the_features():
  """The disassembly shows what the backend is meant to do: SGPR-based global addressing, LDS, barriers, EXEC-masked
  control flow, scalar loop branches, counted waits."""
  dis = {}
  for name, c in (("tiled", examples.matmul_tiled()), ("stencil", examples.gated_stencil()),
                  ("runtime", examples.runtime_loop()), ("divergent", amd_kernels.divergent_loop())):
    dis[name] = objdump(hcq_compile(c.sink, "gfx1100"))
  assert re.search(r"global_load_b32 v\d+, v\d+, s\[\d+:\d+\]", dis["tiled"])
  assert "ds_store_b32" in dis["tiled"] and "ds_load_b32" in dis["tiled"] and "s_barrier" in dis["tiled"]
  assert "v_mul_f32" in dis["tiled"] and "v_add_f32" in dis["tiled"]   # no contraction (the C semantics)
  assert "ds_load_b128" in dis["tiled"]   # a row of the A tile, 16-byte aligned, read four dwords at once
  assert "exec_lo" in dis["stencil"] and "s_cbranch_execz" in dis["stencil"]
  assert "s_cmp_lt_i32" in dis["runtime"] and "s_cbranch_scc1" in dis["runtime"]
  assert "s_cbranch_execz" in dis["divergent"] and "s_branch" in dis["divergent"]
  assert "s_waitcnt vmcnt(0)" in dis["divergent"] and "s_waitcnt lgkmcnt(0)" in dis["runtime"]
  # the row loop reads a[gidx * cols + k]: one address per wave, a scalar load with a register offset
  assert re.search(r"s_load_b32 s\d+, s\[\d+:\d+\], s\d+", dis["runtime"]) and "global_load" not in dis["runtime"]


def test_code_object_metadata():
  from hcq.compiler.isa.amd.codeobject import CodeObject
  ex = examples.local_reduction()
  co = CodeObject.parse(hcq_compile(ex.sink, "gfx1100"))
  assert co.target == "amdgcn-amd-amdhsa--gfx1100" and co.code_object_version == 5
  (k,) = co.kernels.values()
  assert k.name == "local_sum" and k.wavefront_size == 32
  assert k.group_segment_fixed_size == 64 * 4
  assert [(a.offset, a.size, a.value_kind) for a in k.explicit_args] == [(0, 8, "global_buffer"), (8, 8, "global_buffer")]
  d = k.descriptor
  assert d.wavefront_size32 and d.enable_sgpr_kernarg_segment_ptr and d.user_sgpr_layout()["kernarg_segment_ptr"] == 0
  assert d.enable_sgpr_workgroup_id == (True, False, False) and d.enable_vgpr_workitem_id == 0
  assert d.vgpr_count() >= k.vgpr_count
  assert k.reqd_workgroup_size == (64, 1, 1) and k.max_flat_workgroup_size == 64
  p = subprocess.run(["llvm-readelf-19", "--notes", "-s", "/dev/stdin"], input=hcq_compile(ex.sink, "gfx1100"),
                     capture_output=True, timeout=60)
  out = p.stdout.decode()
  assert p.returncode == 0 and "local_sum.kd" in out and ".group_segment_fixed_size: 256" in out, out


def test_unselectable_op_names_the_uop_and_target():
  a = UOp.param(0, dtypes.float64, 16)
  i = UOp.special(16, "lidx0")
  sink = a.index(i).store(a.index(i).load().exp2()).sink(arg=KernelInfo("f64"))   # f64 exp2: not selected
  with pytest.raises(CompileError) as e:
    hcq_compile(sink, "gfx1100")
  msg = str(e.value)
  assert "gfx1100" in msg and "EXP2" in msg and "float64" in msg


def test_spills_and_private_arrays_use_scratch():
  from hcq.compiler.isa.amd.codeobject import CodeObject
  for make, spills in ((amd_kernels.register_spills, True), (amd_kernels.private_array_dynamic, False)):
    blob = hcq_compile(make().sink, "gfx1100")
    (k,) = CodeObject.parse(blob).kernels.values()
    assert k.private_segment_fixed_size > 0 and k.descriptor.enable_private_segment
    assert (k.metadata[".vgpr_spill_count"] > 0) == spills
    dis = objdump(blob)
    assert "scratch_store_b32" in dis and "scratch_load_b32" in dis
  assert re.search(r"scratch_load_b32 v\d+, v\d+, off", objdump(hcq_compile(amd_kernels.private_array_dynamic().sink,
                                                                          "gfx1100")))


def test_sgpr_pressure_spills_to_vgpr_lanes():
  """More live uniform values than 106 SGPRs: the furthest-reaching ones go to lanes of a VGPR (v_writelane after
  each definition, v_readlane before each use); the kernels that run so are in test_amd_scalar.py."""
  from hcq.compiler.backend.amd.isel_mir import MInst, VReg
  from hcq.compiler.backend.amd.regalloc import LIMITS, allocate_with_spills
  regs = [VReg("s") for _ in range(120)]
  code = [MInst("s_mov_b32", {"sdst": r}, {"ssrc0": VReg("s", 1, fixed=0)}) for r in regs]
  code += [MInst("s_add_i32", {"sdst": regs[0]}, {"ssrc0": r, "ssrc1": regs[0]}) for r in regs]
  out, alloc, _ = allocate_with_spills(code, [], "many")
  assert alloc.sgpr_spills > 0 and alloc.sgprs <= LIMITS["s"] and alloc.vgprs == 1
  names = [m.name for m in out]
  assert names.count("v_writelane_b32") >= alloc.sgpr_spills and "v_readlane_b32" in names


def test_isel_output_as_ins_uops():
  from hcq.compiler import Ops
  from hcq.compiler.backend.amd.isel import select
  from hcq.compiler.backend.amd.isel_mir import to_uops
  from hcq.compiler.backend.amd.render import GFX1100_TARGET
  from hcq.compiler.lower import lower
  sel = select(lower(examples.elementwise_add().sink, GFX1100_TARGET))
  lin = to_uops(sel.code)
  assert lin.op is Ops.LINEAR and all(u.op is Ops.INS for u in lin.src)
  names = [u.arg[0] for u in lin.src]
  assert "global_load_b32" in names and "v_add_f32_e64" in names and names[-1] == "s_endpgm"
  types = {u.arg[0]: u.arg[1] for u in lin.src}
  assert types["v_add_f32_e64"] == dtypes.float32 and types["s_load_b64"] == dtypes.uint64
  assert types["global_store_b32"] == dtypes.void and all(u.dtype == u.arg[1] for u in lin.src)


def test_gfx11_hazard_waits():
  """A transcendental result read right away, a lane-mask SGPR rewritten by SALU, an EXEC write: each gets its
  s_waitcnt_depctr; the code still computes the same on the emulator (covered by the feature kernels)."""
  dis = objdump(hcq_compile(amd_kernels.transcendental().sink, "gfx1100"))
  lines = [l.split("//")[0].strip() for l in dis.splitlines() if l.startswith("\t")]
  for k, l in enumerate(lines):
    if l.startswith(("v_exp_f32", "v_log_f32", "v_sqrt_f32", "v_rcp_f32")):
      dst = l.split()[1].rstrip(",")
      for nxt in lines[k + 1:k + 6]:
        if nxt.startswith("s_waitcnt_depctr"): break
        assert not (nxt.startswith("v_") and dst in nxt.split(None, 1)[1].split(",")[1:]), (l, nxt)
  dis = objdump(hcq_compile(examples.gated_stencil().sink, "gfx1100"))
  assert re.search(r"s_and_saveexec_b32[^\n]*\n\s*s_waitcnt_depctr", dis)


def test_code_end_padding_and_no_garbage_after_endpgm():
  dis = objdump(hcq_compile(examples.elementwise_add().sink, "gfx1100"))
  insts = [l.split("//")[0].strip() for l in dis.splitlines() if l.startswith("\t")]
  end = insts.index("s_endpgm")
  assert insts[end + 1:] and all(i == "s_code_end" for i in insts[end + 1:])


def test_too_much_local_memory_is_refused():
  tile = UOp.placeholder(20000, dtypes.float32, 0, AddrSpace.LOCAL)
  l = UOp.special(64, "lidx0")
  out = UOp.param(0, dtypes.float32, 64)
  with pytest.raises(CompileError, match="80000 bytes of LOCAL memory exceed the gfx1100 limit of 65536"):
    hcq_compile(out.index(l).store(tile.after(tile.index(l).store(1.0)).index(l).load()).sink(), "gfx1100")


@pytest.mark.parametrize("seed", range(24))
def test_random_expressions_match_c_backend(seed):
  from amd_random import random_case
  c = random_case(seed)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, blob, _ = run_gfx1100(c.sink, c.args, c.global_size, c.local_size)
  _check_disassembly(blob)
  for slot in c.outputs:
    want, have = ref[slot], got[slot]
    if want.dtype.kind == "f":   # inf/nan where the expression overflows: the same on both sides
      fin = np.isfinite(want)
      assert np.array_equal(np.isnan(want), np.isnan(have)) and np.array_equal(want[~fin & ~np.isnan(want)],
                                                                              have[~fin & ~np.isnan(want)])
      assert_same(have[fin], want[fin], 1e-5, what=f"{c.name} slot {slot}")
    else:
      assert_same(have, want, what=f"{c.name} slot {slot}")


@pytest.mark.parametrize("seed", range(16))
def test_random_loop_nests_match_c_backend(seed):
  from amd_random import random_loop_case
  c = random_loop_case(seed)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, blob, _ = run_gfx1100(c.sink, c.args, c.global_size, c.local_size)
  _check_disassembly(blob)
  for slot in c.outputs: assert_same(got[slot], ref[slot], what=f"{c.name} slot {slot}")


def test_compilation_is_deterministic():
  for make in (examples.matmul_tiled, amd_kernels.divergent_loop, amd_kernels.register_spills):
    assert hcq_compile(make().sink, "gfx1100") == hcq_compile(make().sink, "gfx1100")


ALL_CASES = [(f.__name__, f) for f in examples.ALL] + [(f.__name__, f) for f in amd_kernels.ALL]


@pytest.mark.parametrize("make", [f for _, f in ALL_CASES], ids=[n for n, _ in ALL_CASES])
def test_64bit_address_arithmetic(make):
  """Buffers of 4 GiB and more are addressed with 64-bit VGPR pairs (v_mad_u64_u32: base + index * size, saddr off);
  the threshold lowered to 0 bytes runs every kernel that way (no test buffer is that big)."""
  from amd_emu_runner import run
  from hcq.compiler.backend.amd.render import GFX1100_TARGET, compile_linear
  from hcq.compiler.backend.amd.render import code_object
  from hcq.compiler.lower import lower
  c = make()
  outputs = list(c.expected) if hasattr(c, "expected") else c.outputs
  blob = code_object(compile_linear(lower(c.sink, GFX1100_TARGET), addr64_bytes=0))
  dis = _check_disassembly(blob)
  assert "v_mad_u64_u32" in dis and not re.search(r"global_\w+ [^\n]*s\[\d+:\d+\]", dis)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, _ = run(blob, [np.array(a) if isinstance(a, np.ndarray) else a for a in c.args], c.global_size, c.local_size)
  for s in outputs: assert_same(got[s], ref[s], getattr(c, "float_rtol", 1e-5), what=f"{c.name} slot {s}")


def test_lds_vector_loads_only_when_aligned():
  """tile[l*k + j] for j = 0..3: one ds_load_b128 when l*k*4 is a multiple of 16 (k = 4), four ds_load_b32 when it
  is not known to be (k = 3); both compute what the C backend does."""
  for k, vector in ((4, True), (3, False)):
    out = UOp.param(0, dtypes.int32, 32)
    l = UOp.special(32, "lidx0")
    tile = UOp.placeholder(32 * 4, dtypes.int32, 0, AddrSpace.LOCAL)
    st = UOp.group(*[tile.index(l * 4 + j).store(l * 10 + j) for j in range(4)])
    t = tile.after(st)
    v = t.index(l * k).load() * 1 + t.index(l * k + 1).load() * 10 + t.index(l * k + 2).load() * 100 + \
        t.index(l * k + 3).load() * 1000
    sink = out.index(l).store(v).sink(arg=KernelInfo(f"vec{k}"))
    args = [np.zeros(32, np.int32)]
    ref = run_c(sink, args, (1, 1, 1), (32, 1, 1))
    got, blob, _ = run_gfx1100(sink, args, (1, 1, 1), (32, 1, 1))
    assert_same(got[0], ref[0])
    assert ("ds_load_b128" in _check_disassembly(blob)) == vector


@pytest.mark.parametrize("seed", range(8))
def test_random_f16_expressions_bit_exact(seed):
  from amd_random import random_half_case
  c = random_half_case(seed)
  ref = run_c(c.sink, c.args, c.global_size, c.local_size)
  got, blob, _ = run_gfx1100(c.sink, c.args, c.global_size, c.local_size)
  _check_disassembly(blob)
  for slot in c.outputs:
    r, h = ref[slot], got[slot]
    assert np.array_equal(np.isnan(r), np.isnan(h))
    np.testing.assert_array_equal(h[~np.isnan(r)], r[~np.isnan(r)], err_msg=c.name)
