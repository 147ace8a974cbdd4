"""Faults and limits: an access outside every mapping is a GPUFault carrying the address (the host survives);
a kernel that never ends is stopped by the instruction budget; the code must lie in mapped memory."""
import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.amd.emu import GPUMemory, InstructionBudgetExceeded, dispatch

from . import clbuild
from .loader import HostBuffers, Kernel

# tests that build a kernel skip through _kernel() when clang-19 or rocm-device-libs is missing
COPY = """kernel void copy(global const uint *src, global uint *dst) {
  uint i = get_global_id(0);
  dst[i] = src[i];
}"""
SPIN = """kernel void spin(global volatile const uint *flag, global uint *out) {
  uint n = 0;
  while (flag[0] == 0u) n++;
  out[get_global_id(0)] = n;
}"""


def _kernel(source, name):
  if not clbuild.available(): pytest.skip("clang-19 / rocm-device-libs missing")
  bufs = HostBuffers(GPUMemory())
  return Kernel(bufs, clbuild.build(source), name), bufs


def test_load_from_unmapped_address_faults_with_that_address():
  k, bufs = _kernel(COPY, "copy")
  pd, dst = bufs.array(np.zeros(64, np.uint32))
  unmapped = 0x7000_0000_0000
  assert bufs.memory.range_of(unmapped) is None
  with pytest.raises(GPUFault) as e:
    k(unmapped, pd, grid=(1, 1, 1), block=(64, 1, 1))
  assert e.value.address == unmapped
  assert e.value.kind == "page fault"
  assert (dst == 0).all()


def test_load_past_the_end_of_a_buffer_faults_at_the_first_bad_address():
  k, bufs = _kernel(COPY, "copy")
  ps, src = bufs.array(np.arange(32, dtype=np.uint32))   # 32 elements, 64 threads read
  pd, dst = bufs.array(np.zeros(64, np.uint32))
  with pytest.raises(GPUFault) as e:
    k(ps, pd, grid=(1, 1, 1), block=(64, 1, 1))
  start, end = bufs.memory.range_of(ps)
  assert end <= e.value.address < ps + 64 * 4
  assert bufs.memory.range_of(e.value.address) is None


def test_store_to_unmapped_address_faults_and_writes_nothing():
  k, bufs = _kernel(COPY, "copy")
  ps, src = bufs.array(np.arange(64, dtype=np.uint32))
  pd, dst = bufs.array(np.zeros(64, np.uint32))
  bufs.memory.remove_range(pd)
  with pytest.raises(GPUFault) as e:
    k(ps, pd, grid=(1, 1, 1), block=(64, 1, 1))
  assert e.value.address == pd
  assert (dst == 0).all()


def test_kernel_that_never_ends_is_stopped_by_the_budget():
  k, bufs = _kernel(SPIN, "spin")
  pf, flag = bufs.array(np.zeros(1, np.uint32))
  po, out = bufs.array(np.zeros(64, np.uint32))
  with pytest.raises(InstructionBudgetExceeded) as e:
    k(pf, po, grid=(1, 1, 1), block=(64, 1, 1), budget=100_000)
  assert "100000" in str(e.value) and "budget" in str(e.value)
  assert isinstance(e.value, GPUFault) and e.value.kind == "instruction budget"
  flag[0] = 1   # the same kernel ends once the flag is set
  st = k(pf, po, grid=(1, 1, 1), block=(64, 1, 1), budget=100_000)
  assert st.wave_instructions < 100_000 and (out == 0).all()


def test_program_counter_outside_every_mapping_faults():
  mem = GPUMemory()
  with pytest.raises(GPUFault) as e:
    dispatch(mem, pgm_addr=0x1000_0000, rsrc1=0, rsrc2=0, user_sgprs=[], grid=(1, 1, 1), block=(32, 1, 1))
  assert e.value.address == 0x1000_0000


def test_code_rewritten_in_place_is_retranslated():
  mem = GPUMemory()
  bufs = HostBuffers(mem)
  pcode, code = bufs.alloc(256)
  pout, out = bufs.array(np.zeros(2, np.uint32))
  # s_mov_b32 s2, <literal>; v_mov_b32 v0, s2; v_mov_b32 v1, 0; global_store_b32 v1, v0, s[0:1]; s_endpgm
  # (encodings from llvm-mc-19 -show-encoding)
  def program(value):
    words = [0xBE8200FF, value, 0x7E000202, 0x7E020280, 0xDC6A0000, 0x00000001, 0xBFB00000]
    code[:4 * len(words)] = np.array(words, np.uint32).view(np.uint8)
  for value in (7, 1234):
    program(value)
    dispatch(mem, pgm_addr=pcode, rsrc1=0, rsrc2=2 << 1, user_sgprs=[pout & 0xFFFFFFFF, pout >> 32],
             grid=(1, 1, 1), block=(1, 1, 1))
    assert out[0] == value


def test_grid_larger_than_one_batch_of_waves():
  from hcq.mockgpu.amd.emu import engine
  k, bufs = _kernel(COPY, "copy")
  groups = engine.MAX_BATCH_WAVES // 2 + 100      # 64-thread groups: two waves each, so more than one batch
  n = groups * 64
  src = np.arange(n, dtype=np.uint32) * 3
  ps, _ = bufs.array(src)
  pd, dst = bufs.array(np.zeros(n, np.uint32))
  st = k(ps, pd, grid=(groups, 1, 1), block=(64, 1, 1))
  assert st.waves == 2 * groups
  np.testing.assert_array_equal(dst, src)


PRIVATE = """kernel void priv(global const int *idx, global int *out) {
  int i = get_global_id(0);
  volatile int arr[16];
  for (int k = 0; k < 16; k++) arr[k] = k * 1000 + i;
  out[i] = arr[idx[i] & 15];
}"""


def test_scratch_in_host_memory_given_by_the_dispatch():
  k, bufs = _kernel(PRIVATE, "priv")
  n = 64
  idx = np.arange(n, dtype=np.int32) * 5
  pi, _ = bufs.array(idx)
  po, out = bufs.array(np.zeros(n, np.int32))
  per_lane = k.private_fixed
  assert per_lane >= 64
  base, scratch = bufs.alloc(n * per_lane)
  k(pi, po, grid=(1, 1, 1), block=(64, 1, 1), scratch_base=base)
  np.testing.assert_array_equal(out, (idx & 15) * 1000 + np.arange(n))
  # lane L of wave W owns base + (W * 32 + L) * bytes_per_lane: lane 3's array lies in its window
  lane3 = scratch[3 * per_lane:4 * per_lane].view(np.int32)
  assert set(np.arange(16) * 1000 + 3) <= set(lane3.tolist())
  with pytest.raises(GPUFault) as e:     # a scratch window that is not mapped is refused up front
    k(pi, po, grid=(1, 1, 1), block=(64, 1, 1), scratch_base=base + 4096 * 1024)
  assert e.value.kind == "page fault"


HANDOFF = """kernel void handoff(global volatile uint *flag, global uint *out, uint waiter, uint writer) {
  uint g = get_group_id(0);
  if (g == waiter) {
    while (flag[0] == 0u) {}        // spins until the writer group, at another PC, sets the flag
    out[0] = flag[0];
  } else if (g == writer) {
    for (int k = 0; k < 8; k++) out[1 + k] = k;
    flag[0] = 42u;
  }
}"""


@pytest.mark.parametrize("waiter,writer", [(0, 3), (3, 0)])
def test_spinning_wave_does_not_starve_the_wave_it_waits_for(waiter, writer):
  k, bufs = _kernel(HANDOFF, "handoff")
  pf, flag = bufs.array(np.zeros(1, np.uint32))
  po, out = bufs.array(np.zeros(9, np.uint32))
  k(pf, po, np.uint32(waiter), np.uint32(writer), grid=(4, 1, 1), block=(32, 1, 1), budget=2_000_000)
  assert flag[0] == 42 and out[0] == 42
  np.testing.assert_array_equal(out[1:], np.arange(8))


BARRIER_THEN_SIGNAL = """kernel void barrier_signal(global volatile uint *flag, global uint *out) {
  local uint l[64];
  uint g = get_group_id(0), lid = get_local_id(0);
  if (g == 1) {
    while (flag[0] == 0u) {}        // group 1 waits for group 0, which is past a barrier
    if (lid == 0) out[1] = flag[0];
  } else {
    l[lid] = lid;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) { out[0] = l[63]; flag[0] = 7u; }
  }
}"""


def test_barrier_of_one_group_does_not_wait_for_other_groups():
  k, bufs = _kernel(BARRIER_THEN_SIGNAL, "barrier_signal")
  pf, flag = bufs.array(np.zeros(1, np.uint32))
  po, out = bufs.array(np.zeros(2, np.uint32))
  k(pf, po, grid=(2, 1, 1), block=(64, 1, 1), budget=2_000_000)
  assert list(out) == [63, 7]
