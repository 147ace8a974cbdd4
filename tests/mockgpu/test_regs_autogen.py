"""The SDMA opcodes that mockgpu/amd/regs.py writes out (to keep the 180 KB generated module hcq.autogen.amd.sdma out
of the start-up path) equal the generated bindings of sdma_v6_0_0_pkt_open.h; the GC registers come from the small
generated module amd.gc_11_0_0_compute, whose values equal the whole-GC module's."""
import subprocess
import sys

from hcq.autogen.amd import gc_11_0_0 as gc
from hcq.autogen.amd import gc_11_0_0_compute as gc_compute
from hcq.autogen.amd import sdma
from hcq.mockgpu.amd import regs as R


def test_the_compute_register_module_is_the_compute_part_of_the_gc_module():
  names = [k for k in vars(gc_compute) if k.startswith(("regCOMPUTE_", "COMPUTE_"))]
  assert len(names) > 200
  for name in names: assert getattr(gc, name) == getattr(gc_compute, name), name


def test_written_out_sdma_opcodes_equal_the_generated_bindings():
  for name, value in R.SDMA_CONSTS.items():
    assert getattr(sdma, name) == value, name


def test_sh_offsets_follow_from_the_generated_bindings():
  assert R.COMPUTE_PGM_LO == gc.regCOMPUTE_PGM_LO + R.GC_BASE_SEG0 - R.SET_SH_REG_START == 0x20C
  assert R.COMPUTE_USER_DATA_0 + R.NUM_USER_DATA - 1 == gc.regCOMPUTE_USER_DATA_15 + R.GC_BASE_SEG0 - R.SET_SH_REG_START
  assert R.RSRC2_LDS_MASK << R.RSRC2_LDS_SHIFT == gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK


def test_the_mock_does_not_import_the_big_generated_modules():
  code = ("import sys, hcq; from hcq.mockgpu import mock_amd_os; os = mock_amd_os(); "
          "print([m for m in ('hcq.autogen.amd.gc_11_0_0', 'hcq.autogen.amd.sdma') if m in sys.modules]); os.close()")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "[]"


def test_written_out_sdma_copy_count_masks_equal_the_generated_bindings():
  from hcq.autogen.amd import sdma_4
  assert R.SDMA_COPY_COUNT_MASKS[4] == sdma_4.SDMA_PKT_COPY_LINEAR_COUNT_count_mask
  assert R.SDMA_COPY_COUNT_MASKS[6] == R.SDMA_COPY_COUNT_MASKS[7] == sdma.SDMA_PKT_COPY_LINEAR_COUNT_count_mask
