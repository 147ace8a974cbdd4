"""gfx942 spills VGPRs to AccVGPRs before scratch (regalloc._spill_agpr): v_accvgpr_write_b32 after each definition,
v_accvgpr_read_b32 before each use, the descriptor's ACCUM_OFFSET and rsrc1 VGPR granule and the metadata's
.agpr_count / .vgpr_count as LLVM fills them (AMDGPUUsage "compute_pgm_rsrc3 for GFX90A, GFX942"; AMDGPUBaseInfo
getTotalNumVGPRs), scratch only past the AccVGPRs; the emulator and the driver's loader refuse AccVGPRs that the
descriptor does not place where the code uses them."""
from __future__ import annotations

import dataclasses
import re
import struct

import numpy as np
import pytest

import amd_kernels
import hcq
from amd_emu_runner import run
from amd_reference import assert_same, objdump, objdump_agrees
from hcq.compiler import compile as hcq_compile
from hcq.compiler.backend.amd import gfx9
from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.compiler.isa.amd.cowriter import KernelSpec
from hcq.compiler.backend.amd.hazard_check import check_hazards
from hcq.compiler.backend.amd.isel_mir import MInst, VReg
from hcq.compiler.backend.amd.regalloc import allocate_with_spills
from hcq.errors import DeviceError, GPUFault

ARCH = "gfx942"
KD_RSRC3, KD_RSRC1 = 44, 48     # kernel descriptor byte offsets (AMDGPUUsage "Kernel Descriptor")


def _numpy_spills(case) -> np.ndarray:
  """What the register_spills kernel computes, in float32 and in its order: prod * 1e-3 + total per work-item."""
  a = case.args[0].reshape(64, -1)
  n = a.shape[1]
  prod, total = a[:, 0].copy(), a[:, 0].copy()
  for k in range(1, n): prod = prod * a[:, n - k]
  for k in range(1, n): total = total + a[:, k]
  return prod * np.float32(1e-3) + total


def _kernel(blob):
  (k,) = CodeObject.parse(blob).kernels.values()
  return k


def _run_emu(blob, case):
  got, stats = run(blob, [np.array(a, copy=True) for a in case.args], case.global_size, case.local_size, arch=ARCH)
  return got[1], stats


def test_register_pressure_spills_to_accvgprs_without_scratch():
  case = amd_kernels.register_spills()
  blob = hcq_compile(case.sink, ARCH)
  k = _kernel(blob)
  md, kd = k.metadata, k.descriptor
  agprs, total = md[".agpr_count"], md[".vgpr_count"]
  assert agprs > 0 and md[".vgpr_spill_count"] == 0
  assert k.private_segment_fixed_size == 0 and not kd.enable_private_segment
  dis = objdump(blob, ARCH)
  assert "scratch_" not in dis and "v_accvgpr_write_b32" in dis and "v_accvgpr_read_b32" in dis
  used_a = {int(x) for x in re.findall(r"\ba(\d+)\b", dis)}
  used_v = {int(x) for x in re.findall(r"\bv(\d+)\b", dis)} | {int(b) for b in re.findall(r"\bv\[\d+:(\d+)\]", dis)}
  assert max(used_a) == agprs - 1
  # ACCUM_OFFSET right after the ArchVGPRs (rounded to 4), the VGPR granule counting both (blocks of 8)
  arch_vgprs = -(-(max(used_v) + 1) // 4) * 4
  assert kd.accum_offset() == arch_vgprs and total == arch_vgprs + agprs
  assert kd.unified_vgprs() == -(-total // 8) * 8
  objdump_agrees(blob, ARCH)
  assert check_hazards(k.code, ARCH) == []
  got, _ = _run_emu(blob, case)
  assert_same(got, _numpy_spills(case), 1e-5, what="register_spills on the gfx942 emulator")


def test_gfx1100_still_spills_to_scratch():
  k = _kernel(hcq_compile(amd_kernels.register_spills().sink, "gfx1100"))
  assert k.metadata[".agpr_count"] == 0 and k.metadata[".vgpr_spill_count"] > 0 and k.private_segment_fixed_size > 0


def test_scratch_only_once_the_accvgprs_are_taken(monkeypatch):
  """With 16 AccVGPRs, the rest of the spilled values go to scratch: both kinds in one kernel, numpy's result."""
  monkeypatch.setattr(gfx9, "AGPRS", 16)
  case = amd_kernels.register_spills()
  blob = hcq_compile(case.sink, ARCH)
  k = _kernel(blob)
  assert k.metadata[".agpr_count"] == 16 and k.metadata[".vgpr_spill_count"] > 0 and k.private_segment_fixed_size > 0
  dis = objdump(blob, ARCH)
  assert "v_accvgpr_write_b32 a15" in dis and "scratch_store_dword" in dis and "scratch_load_dword" in dis
  assert check_hazards(k.code, ARCH) == []
  got, _ = _run_emu(blob, case)
  assert_same(got, _numpy_spills(case), 1e-5, what="AccVGPR + scratch spills on the gfx942 emulator")


def test_allocator_fills_accvgprs_before_scratch_slots():
  vals = [VReg("v") for _ in range(300)]
  code = [MInst("v_mov_b32_e32", {"vdst": r}, {"src0": VReg("v", 1, fixed=0)}) for r in vals]
  code += [MInst("v_add_u32_e32", {"vdst": vals[0]}, {"src0": r, "src1": vals[0]}) for r in vals]
  out, alloc, slots = allocate_with_spills(list(code), [], "many", agprs=8)
  names = [m.name for m in out]
  assert alloc.agprs == 8 and alloc.spills == slots > 0 and alloc.vgprs <= 256
  assert "v_accvgpr_write_b32" in names and "v_accvgpr_read_b32" in names and "scratch_store_b32" in names
  acc = sorted({m.defs["vdst"].phys for m in out if m.name == "v_accvgpr_write_b32"})
  assert acc == list(range(8))
  # no AccVGPRs where the target has none (gfx1100, gfx1200)
  vals = [VReg("v") for _ in range(300)]
  code = [MInst("v_mov_b32_e32", {"vdst": r}, {"src0": VReg("v", 1, fixed=0)}) for r in vals]
  code += [MInst("v_add_u32_e32", {"vdst": vals[0]}, {"src0": r, "src1": vals[0]}) for r in vals]
  out, alloc, _ = allocate_with_spills(code, [], "many")
  assert alloc.agprs == 0 and not any(m.name.startswith("v_accvgpr") for m in out)


def test_descriptor_and_metadata_count_accvgprs_as_llvm_does():
  spec = KernelSpec("k", b"", vgpr_count=10, agpr_count=5, wavefront_size=64)
  kd = spec.descriptor(ARCH)
  md = spec.metadata()
  # ArchVGPRs 10 -> ACCUM_OFFSET 12 (field 2); total alignTo(10, 4) + 5 = 17 -> granule ceil(17 / 8) - 1 = 2
  assert kd.compute_pgm_rsrc3 & 0x3F == 2 and kd.accum_offset() == 12
  assert kd.compute_pgm_rsrc1 & 0x3F == 2 and md[".vgpr_count"] == 17 and md[".agpr_count"] == 5
  plain = KernelSpec("k", b"", vgpr_count=10, wavefront_size=64)
  assert plain.metadata()[".vgpr_count"] == 10 and plain.metadata()[".agpr_count"] == 0
  assert plain.descriptor(ARCH).compute_pgm_rsrc1 & 0x3F == 1


def _patched(blob: bytes, rsrc3=None, rsrc1=None) -> bytes:
  """The code object with its kernel descriptor's rsrc3 / rsrc1 replaced."""
  k = _kernel(blob)
  kd = k.descriptor
  raw = bytearray(blob)
  at = raw.find(kd.pack())
  assert at >= 0 and raw.find(kd.pack(), at + 1) < 0
  if rsrc3 is not None: struct.pack_into("<I", raw, at + KD_RSRC3, rsrc3)
  if rsrc1 is not None: struct.pack_into("<I", raw, at + KD_RSRC1, rsrc1)
  return bytes(raw)


def test_emulator_refuses_accvgprs_the_descriptor_does_not_place():
  case = amd_kernels.register_spills()
  blob = hcq_compile(case.sink, ARCH)
  kd = _kernel(blob).descriptor
  accum = kd.compute_pgm_rsrc3 & 0x3F
  # ACCUM_OFFSET one step lower: the highest ArchVGPRs would be AccVGPRs
  with pytest.raises(GPUFault, match=r"v\d+ .*at or above ACCUM_OFFSET"):
    _run_emu(_patched(blob, rsrc3=(kd.compute_pgm_rsrc3 & ~0x3F) | (accum - 1)), case)
  # one VGPR granule fewer: the last AccVGPRs would lie past the wave's registers
  with pytest.raises(GPUFault, match=r"AccVGPR a\d+ .*past the wave's \d+ VGPRs"):
    _run_emu(_patched(blob, rsrc1=kd.compute_pgm_rsrc1 - 1), case)


@pytest.fixture(scope="module")
def dev():
  from hcq.config import from_env
  with hcq.open("MOCK+AMD", dataclasses.replace(from_env(), mock_gpu=ARCH, timeout_s=20.0)) as d: yield d


def test_spilling_kernel_gives_numpys_result_on_mock_gfx942_without_scratch(dev):
  case = amd_kernels.register_spills()
  prog = dev.compile(case.sink)
  assert prog.private == 0 and prog.scratch is None
  src, out = dev.alloc(case.args[0].nbytes), dev.alloc(case.args[1].nbytes)
  dev.copyin(src, case.args[0].tobytes())
  prog(src, out, global_size=case.global_size, local_size=case.local_size, wait=True)
  got = np.frombuffer(dev.copyout(out)[:case.args[1].nbytes], np.float32)
  assert_same(got, _numpy_spills(case), 1e-5, what=f"register_spills on {dev.name}")


def test_loader_refuses_a_descriptor_whose_accvgprs_overrun(dev):
  blob = hcq_compile(amd_kernels.register_spills().sink, ARCH)
  kd = _kernel(blob).descriptor
  with pytest.raises(DeviceError, match=r"AccVGPRs from ACCUM_OFFSET \d+ .*past the \d+ VGPRs"):
    dev.load(_patched(blob, rsrc1=kd.compute_pgm_rsrc1 - 1))
  with pytest.raises(DeviceError, match=r"ArchVGPRs .* reach past ACCUM_OFFSET"):
    dev.load(_patched(blob, rsrc3=(kd.compute_pgm_rsrc3 & ~0x3F) | ((kd.compute_pgm_rsrc3 & 0x3F) - 1)))


ACC_HAZARDS = [
  # a transcendental result moved into an AccVGPR: v_accvgpr_write_b32 is a VALU reading it (trans-forward, 1)
  ("v_exp_f32_e32 v1, v2\nv_accvgpr_write_b32 a0, v1", {"trans-forward"}),
  ("v_exp_f32_e32 v1, v2\ns_nop 0\nv_accvgpr_write_b32 a0, v1", set()),
  # a1 is not v1: reading an AccVGPR after a transcendental wrote the VGPR of the same number is no hazard
  ("v_exp_f32_e32 v1, v2\nv_accvgpr_read_b32 v3, a1", set()),
  # gfx908's AccVGPR write -> read (3) and AccVGPR read -> memory use (2) wait states are not CDNA3's (interlocked)
  ("v_accvgpr_write_b32 a0, v1\nv_accvgpr_read_b32 v2, a0\nglobal_store_dword v3, v2, s[4:5]", set()),
]


@pytest.mark.parametrize("text,rules", ACC_HAZARDS)
def test_hazard_checker_on_accvgpr_moves(text, rules):
  from hcq.compiler.isa.amd.asm import assemble
  assert {v.rule for v in check_hazards(assemble(text, ARCH), ARCH)} == rules


def test_fixer_waits_between_a_transcendental_and_its_spill_to_an_accvgpr():
  from hcq.compiler.backend.amd.render_hazards import fix_hazards_gfx9
  v1, v2, a0 = VReg("v", fixed=1), VReg("v", fixed=2), VReg("a", fixed=0)
  out = fix_hazards_gfx9([MInst("v_exp_f32_e32", {"vdst": v1}, {"src0": v2}),
                          MInst("v_accvgpr_write_b32", {"vdst": a0}, {"src0": v1}, spill=True)])
  assert [m.name for m in out] == ["v_exp_f32_e32", "s_nop", "v_accvgpr_write_b32"]


def test_accvgprs_only_where_the_required_work_group_still_fits():
  """A kernel that requires 512 work-items (2 waves per SIMD: 256 registers each) spills to scratch, not to
  AccVGPRs that would leave room for one wave per SIMD; at 256 work-items and below every AccVGPR is available."""
  from hcq.compiler.backend.amd.render import accvgpr_budget
  from types import SimpleNamespace as NS
  assert accvgpr_budget(NS(uses_local_ids=True, local_size=(64, 1, 1))) == 256
  assert accvgpr_budget(NS(uses_local_ids=True, local_size=(16, 16, 1))) == 256
  assert accvgpr_budget(NS(uses_local_ids=True, local_size=(512, 1, 1))) == 0
  assert accvgpr_budget(NS(uses_local_ids=False, local_size=(1, 1, 1))) == gfx9.AGPRS
  k = _kernel(hcq_compile(_spills_sink(64), ARCH))
  assert k.metadata[".agpr_count"] > 0 and k.max_flat_workgroup_size == 64
  k = _kernel(hcq_compile(_spills_sink(512), ARCH))
  assert k.metadata[".agpr_count"] == 0 and k.metadata[".vgpr_spill_count"] > 0 and k.max_flat_workgroup_size == 512


def _spills_sink(lanes: int, n: int = 300):
  """register_spills' computation for a work-group of `lanes` work-items (it reads lidx0: a required shape)."""
  from hcq.compiler import KernelInfo, UOp
  A, O = amd_kernels._p(0, np.zeros(n * lanes, np.float32)), amd_kernels._p(1, np.zeros(lanes, np.float32), False)
  l = UOp.special(lanes, "lidx0")
  vals = [A.index(l * n + k).load() for k in range(n)]
  prod, total = vals[0], vals[0]
  for k in range(1, n): prod = prod * vals[n - k]
  for v in vals[1:]: total = total + v
  return O.index(l).store(prod * 1e-3 + total).sink(arg=KernelInfo("spills"))
