"""hcq's own RDNA3 backend output (hcq.compiler.examples compiled by compile_sink) run on the emulator: results
must equal the examples' numpy answers."""
import numpy as np
import pytest

from hcq.compiler import examples
from hcq.compiler.backend.amd import render
from hcq.mockgpu.amd.emu import GPUMemory

from .loader import HostBuffers, Kernel

EXAMPLES = {ex.name: ex for ex in examples.all_examples()}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_compiler_example_on_emulator(name):
  ex = EXAMPLES[name]
  co = render.compile_sink(ex.sink)
  bufs = HostBuffers(GPUMemory())
  k = Kernel(bufs, co)
  args, views = [], {}
  for slot, a in enumerate(ex.args):
    if isinstance(a, np.ndarray):
      addr, view = bufs.array(a)
      args.append(addr)
      views[slot] = view
    else:
      args.append(a)
  k(*args, grid=ex.global_size, block=ex.local_size)
  for slot, want in ex.expected.items():
    if want.dtype.kind == "f": np.testing.assert_allclose(views[slot], want, rtol=1e-5, atol=1e-5)   # as tests/compiler
    else: np.testing.assert_array_equal(views[slot], want)
