"""Small dispatches reuse a per-shape set-up (register-file templates and pooled register files, engine.py): a
dispatch must see exactly the start-up state a fresh one would, whatever ran before it on the same GPUMemory
(other arguments, other shapes, a fault), and give the same results as the uncached path (numpy as reference)."""
import os

import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.amd.emu import GPUMemory, engine

from .loader import HostBuffers, Kernel, run_corpus_kernel

HSACO = os.path.join(os.path.dirname(__file__), "..", "fixtures", "opencl", "hsaco")


def _load(bufs, name):
  with open(os.path.join(HSACO, name + ".hsaco"), "rb") as f: return Kernel(bufs, f.read(), name)


def _ids_expected(grid, block):
  """ids2d.cl's output computed with numpy: per work-item (gy * global_x + gx) * 8 + [lid0, lid1, gid0, gid1,
  lsize0, lsize1, ngroups0, ngroups1]."""
  gsx, gsy = grid[0] * block[0], grid[1] * block[1]
  gy, gx = np.meshgrid(np.arange(gsy), np.arange(gsx), indexing="ij")
  rows = np.stack([gx % block[0], gy % block[1], gx // block[0], gy // block[1], np.full_like(gx, block[0]),
                   np.full_like(gx, block[1]), np.full_like(gx, grid[0]), np.full_like(gx, grid[1])], axis=-1)
  return rows.reshape(-1).astype(np.uint32)


SHAPES = [((1, 1, 1), (1, 1, 1)), ((2, 3, 1), (8, 4, 1)), ((1, 1, 1), (64, 1, 1)), ((3, 1, 1), (5, 7, 1)),
          ((2, 3, 1), (8, 4, 1)), ((1, 1, 1), (1, 1, 1))]


@pytest.mark.parametrize("cached", [True, False])
def test_interleaved_shapes_see_fresh_start_up_state(monkeypatch, cached):
  if not cached: monkeypatch.setattr(engine, "SMALL_BATCH_WAVES", 0)
  bufs = HostBuffers(GPUMemory())
  ids, copy = _load(bufs, "ids2d"), _load(bufs, "copy_u32")
  rng = np.random.default_rng(1)
  for round_ in range(2):
    for grid, block in SHAPES:
      n = grid[0] * block[0] * grid[1] * block[1] * 8
      pout, out = bufs.array(np.full(n, 0xDEADBEEF, np.uint32))
      ids(pout, grid=grid, block=block)
      np.testing.assert_array_equal(out, _ids_expected(grid, block), err_msg=f"ids2d {grid} {block}")
      # the same shape with another kernel and other arguments in between: different user SGPRs, VGPR use
      src = rng.integers(0, 2**32, 96, dtype=np.uint32)
      psrc, _ = bufs.array(src)
      pdst, dst = bufs.array(np.zeros(96, np.uint32))
      limit = 70 + round_
      copy(psrc, pdst, np.uint32(limit), grid=(3, 1, 1), block=(32, 1, 1))
      np.testing.assert_array_equal(dst, np.where(np.arange(96) < limit, src, 0))


def test_a_fault_does_not_spoil_the_next_dispatch_of_the_shape():
  bufs = HostBuffers(GPUMemory())
  copy = _load(bufs, "copy_u32")
  pdst, dst = bufs.array(np.zeros(32, np.uint32))
  with pytest.raises(GPUFault):
    copy(0x7000_0000_0000, pdst, np.uint32(32), grid=(1, 1, 1), block=(32, 1, 1))
  src = np.arange(32, dtype=np.uint32) * 3
  psrc, _ = bufs.array(src)
  copy(psrc, pdst, np.uint32(32), grid=(1, 1, 1), block=(32, 1, 1))
  np.testing.assert_array_equal(dst, src)


def test_corpus_twice_on_one_memory_with_other_data():
  """Every corpus kernel (LDS, private arrays, barriers, atomics) twice in a row on one GPUMemory with other inputs:
  the second run reuses the first one's pooled registers, LDS and scratch and must still match numpy."""
  from tests.fixtures.opencl import kernels
  bufs = HostBuffers(GPUMemory())
  progs = {name: Kernel(bufs, k.code_object(), k.name) for name, k in kernels.KERNELS.items()}
  for seed in (0, 1, 2):
    for name in sorted(kernels.KERNELS):
      k = kernels.KERNELS[name]
      run_corpus_kernel(bufs, progs[name], k, kernels, seed)
