"""The GC register offsets and fields that mockgpu/amd/regs.py writes out (to keep the 1.2 MB generated module
hcq.autogen.amd.gc_11_0_0 out of the start-up path) equal the generated bindings of gc_11_0_0_offset.h/_sh_mask.h."""
import subprocess
import sys

from hcq.autogen.amd import gc_11_0_0 as gc
from hcq.autogen.amd import sdma
from hcq.mockgpu.amd import regs as R


def test_written_out_gc_registers_equal_the_generated_bindings():
  for name, value in R.GC_REGS.items():
    assert getattr(gc, "reg" + name) == value, name
    assert getattr(gc, "reg" + name + "_BASE_IDX") == 0, name    # SET_SH_REG offsets assume segment 0
  for name, value in R.GC_FIELDS.items():
    assert getattr(gc, name) == value, name


def test_written_out_sdma_opcodes_equal_the_generated_bindings():
  for name, value in R.SDMA_CONSTS.items():
    assert getattr(sdma, name) == value, name


def test_sh_offsets_follow_from_the_generated_bindings():
  assert R.COMPUTE_PGM_LO == gc.regCOMPUTE_PGM_LO + R.GC_BASE_SEG0 - R.SET_SH_REG_START
  assert R.COMPUTE_USER_DATA_0 + R.NUM_USER_DATA - 1 == gc.regCOMPUTE_USER_DATA_15 + R.GC_BASE_SEG0 - R.SET_SH_REG_START
  assert R.RSRC2_LDS_MASK << R.RSRC2_LDS_SHIFT == gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK


def test_the_mock_does_not_import_the_big_generated_modules():
  code = ("import sys, hcq; from hcq.mockgpu import mock_amd_os; os = mock_amd_os(); "
          "print([m for m in ('hcq.autogen.amd.gc_11_0_0', 'hcq.autogen.amd.sdma') if m in sys.modules]); os.close()")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "[]"
