"""The context save/restore (CWSR) area sizes of a GPU's compute queues: what the KFD topology publishes and what
CREATE_QUEUE checks (one formula, used by kfd.py and topology.py)."""
from __future__ import annotations

PAGE = 0x1000


def cwsr_sizes(props) -> dict:
  """kfd_queue_ctx_save_restore_size (kfd_queue.c, linux 6.12): the sizes the topology reports (cwsr_size,
  ctl_stack_size), CREATE_QUEUE checks, and the per-XCC debugger area after the save area (debug_memory_size).

  The driver has the same formula (drivers/amd/kfd.cwsr_sizes) for kernels older than the one the mock models, whose
  topology lacks cwsr_size/ctl_stack_size, and for debug_memory_size, which no kernel publishes; the mock may not
  import the driver and the driver may not import the mock, so the formula is written in both, and
  tests/mockgpu/test_hardware_facts.py holds the two equal over gfx9-gfx12 and a range of CU counts."""
  gfxv = props.gfx_target_version
  cu_num = props.simd_count // props.simd_per_cu // props.num_xcc
  if gfxv < 100100:           # before GFX_VERSION_NAVI10: waves limited by the shader arrays too, 8-byte entries
    wave_num = min(cu_num * 40, props.array_count // props.simd_arrays_per_engine * 512)
  else: wave_num = cu_num * 32
  if gfxv // 100 * 100 == 90400 or gfxv in (90010, 90008): vgpr = 0x80000         # kfd_get_vgpr_size_per_cu
  elif gfxv in (110000, 110001, 110501, 120000, 120001): vgpr = 0x60000
  else: vgpr = 0x40000
  wg_data = (cu_num * (vgpr + 0x4000 + 0x10000 + 0x1000) + PAGE - 1) & ~(PAGE - 1)   # VGPR + SGPR + LDS + HWREG per CU
  ctl_stack = (40 + wave_num * (12 if gfxv >= 100100 else 8) + 8 + PAGE - 1) & ~(PAGE - 1)   # header + entries + 8
  if gfxv // 10000 == 10: ctl_stack = min(ctl_stack, 0x7000)    # gfx10: the hardware's control stack limit
  return {"ctl_stack_size": ctl_stack, "cwsr_size": ctl_stack + wg_data,
          "debug_memory_size": (wave_num * 32 + 63) & ~63, "eop_buffer_size": 4096}
