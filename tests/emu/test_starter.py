"""issue 33 P1: the mock GPU starts its DISPATCH_DIRECTs through emu.starter (the engine function and the target's
bits, looked up once) instead of emu.start's keyword call: the same dispatch started either way gives the same
statistics and the same memory, sliced or not, for every target; a target the emulator lacks is refused by both."""
import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.amd.gpu import TARGETS
from hcq.mockgpu.amd import emu
from hcq.mockgpu.amd.emu import GPUMemory, ScratchSetup

from .loader import HostBuffers
from .test_instructions import assemble
from .test_one_block_fast_path import SENTINEL, ptr, store_literal

TWO_BLOCKS = """
  s_mov_b32 s4, 0
  s_cmp_eq_u32 s4, 0
  s_cbranch_scc1 1
  s_endpgm
  v_mov_b32 v1, 0x77
  v_mov_b32 v0, 0
  global_store_b32 v0, v1, s[0:1]
  s_endpgm
"""


def _run(started, text, grid=(2, 1, 1)):
  bufs = HostBuffers(GPUMemory())
  pc, code = bufs.alloc(1024)
  blob = assemble(text)
  code[:len(blob)] = np.frombuffer(blob, np.uint8)
  pout, out = bufs.array(np.full(1, SENTINEL, np.uint32))
  results = [started(bufs.memory, pc, ptr(pout), grid) for _ in range(3)]    # the second and third: the fast path
  return [(r.waves, r.wave_instructions) for r in results], int(out[0])


@pytest.mark.parametrize("text", [store_literal(0x1234), TWO_BLOCKS, "s_endpgm"], ids=["one block", "two blocks", "empty"])
def test_the_started_dispatch_is_start_s(text):
  def by_start(memory, pc, user, grid):
    return emu.start(memory, pgm_addr=pc, rsrc1=0, rsrc2=len(user) << 1, user_sgprs=user, grid=grid, block=(32, 1, 1),
                     scratch=ScratchSetup(), arch="gfx1100", wave_size=32)
  run, bits = emu.starter("gfx1100", 32)

  def by_starter(memory, pc, user, grid):
    return run(memory, pc, 0, len(user) << 1, 0, user, grid, (32, 1, 1), 0, ScratchSetup(), emu.DEFAULT_INSTRUCTION_BUDGET,
               True, bits)
  assert _run(by_start, text) == _run(by_starter, text)


def test_starter_refuses_what_start_refuses():
  with pytest.raises(GPUFault, match="gfx9999"): emu.starter("gfx9999", 32)
  with pytest.raises(GPUFault, match="32 lanes"): emu.starter("gfx942", 32)     # CDNA3 runs wave64 only
  for target in TARGETS:
    wave = 64 if target == "gfx942" else 32
    assert emu.starter(target, wave)[1] == emu._target(target, wave)
