"""bench/wavecount.py (how the benches count a kernel's wave-instructions from its code, since they measure the
emulator from outside, through hcq.open) against the emulator's own count: for every corpus kernel it counts, and for
the clang-19 and hcq tiled matmuls of bench/codegen.py; and the kernels whose count depends on the data, which it
must refuse rather than guess."""
import importlib.util
import pathlib

import numpy as np
import pytest

from hcq.compiler import compile as hcq_compile, examples
from hcq.mockgpu.amd.emu import GPUMemory
from tests.fixtures.opencl import kernels

from . import clbuild
from .loader import HostBuffers, Kernel

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wavecount", ROOT / "bench" / "wavecount.py")
wavecount = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wavecount)

# the corpus kernels whose path depends on lanes (EXEC/VCC branches) or on loaded values: no count from the code
DATA_DEPENDENT = {"atomics_global", "atomics_lds", "branch", "copy_u32", "divergent_loop", "intdiv", "lds_reduce",
                  "lds_scan", "math", "matmul_tiled", "saxpy", "uniform_loop"}


def _emulated(blob: bytes, name, args, grid, block):
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, blob, name)
  addrs = [bufs.array(a)[0] if isinstance(a, np.ndarray) else a for a in args]
  return prog(*addrs, grid=grid, block=block, budget=500_000_000)


@pytest.mark.parametrize("name", sorted(set(kernels.KERNELS) - DATA_DEPENDENT))
def test_count_matches_the_emulator(name):
  k = kernels.KERNELS[name]
  data = k.inputs(seed=0)
  args = [data[a.name] for a in k.args]
  st = _emulated(k.code_object(), k.name, args, k.groups, k.local_size)
  groups = int(np.prod(k.groups))
  assert wavecount.kernel_waves(k.code_object(), k.name, groups, int(np.prod(k.local_size))) == st.waves
  assert wavecount.wave_instructions(k.code_object(), k.name) * st.waves == st.wave_instructions


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_data_dependent_kernel_is_refused(name):
  k = kernels.KERNELS[name]
  with pytest.raises(wavecount.NotCountable, match=k.name):
    wavecount.wave_instructions(k.code_object(), k.name)


def _matmul_inputs(n):
  rng = np.random.default_rng(0)
  return [rng.standard_normal((n, n)).astype(np.float32) for _ in range(2)] + [np.zeros((n, n), np.float32)]


def test_hcq_matmul_count_matches_the_emulator():
  n, tile = 64, 16
  blob = hcq_compile(examples.matmul_tiled_kernel(n, tile), "gfx1100")
  st = _emulated(blob, None, _matmul_inputs(n), (n // tile, n // tile, 1), (tile, tile, 1))
  assert wavecount.wave_instructions(blob) * st.waves == st.wave_instructions


@pytest.mark.tools("clang-19", "ld.lld-19")
def test_loop_with_a_known_trip_count_matches_the_emulator():
  """clang-19 keeps the tile loop of bench/codegen.py's OpenCL matmul (a counter in an SGPR, unrolled by 2): the walk
  follows its s_cbranch_scc0 back edge as often as the counter says."""
  src = (ROOT / "bench" / "codegen.py").read_text()
  opencl = src.split('OPENCL = """', 1)[1].split('"""', 1)[0]
  n, tile = 256, 16      # at N=64 clang unrolls the loop away; 4 of the 256 work-groups suffice to count
  blob = clbuild.build(opencl, (f"-DN={n}", f"-DT={tile}"))
  st = _emulated(blob, None, _matmul_inputs(n), (2, 2, 1), (tile, tile, 1))
  per_wave = wavecount.wave_instructions(blob)
  assert per_wave * st.waves == st.wave_instructions
  assert per_wave > len(wavecount.decode_all(wavecount.CodeObject.parse(blob).kernels["matmul_tiled"].code)), \
    "the loop body must be counted once per trip"
