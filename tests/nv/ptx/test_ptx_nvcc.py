"""nvcc 12.4's own PTX (tests/fixtures/nvcc, from github.com/mikex86/LibreCuda; SOURCES.md cites each file) parses and
runs on the interpreter with the CUDA C source's results, checked against numpy."""
from __future__ import annotations

import os

import numpy as np
import pytest

from hcq.mockgpu.nv.ptx import parse, run
from ptx_launch import HostMemory, pack_params

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "nvcc")


def _module(name: str):
  with open(os.path.join(FIX, name)) as f: text = f.read()
  assert "Cuda compilation tools, release 12." in text   # the fixture is nvcc 12.x output
  return parse(text)


def test_every_fixture_is_cited_and_parses():
  files = sorted(f for f in os.listdir(FIX) if f.endswith(".ptx"))
  with open(os.path.join(FIX, "SOURCES.md")) as f: sources = f.read()
  assert files and all(f"| {f} |" in sources for f in files)
  for f in files: assert _module(f).kernels


def test_memcpy_kernels_copy_what_memcpy_cu_says():
  mod = _module("librecuda_memcpy_sm_90.ptx")
  rng = np.random.default_rng(1)
  hm = HostMemory()
  # memcpyKernelHighBW: idx = ((256 * (ctaid.y * nctaid.x + ctaid.x)) << 2) + tid.x, four words 256 apart
  src = rng.integers(0, 2**32, 1024 * 6, dtype=np.uint32)   # 6 CTAs x 4 x 256 words
  sa, _ = hm.array(src)
  da, dst = hm.array(np.zeros_like(src))
  k = mod.kernels["memcpyKernelHighBW"]
  run(k, (3, 2, 1), (256, 1, 1), pack_params(k, [da, sa]), hm.mem)
  assert np.array_equal(dst, src)
  # memcpyKernelLowLatency: 256 * ctaid.x + tid.x < n, 32-bit words; a partial last block writes nothing past n
  n = 1000
  src2 = rng.integers(0, 2**32, 1024, dtype=np.uint32)
  sa2, _ = hm.array(src2)
  da2, dst2 = hm.array(np.full(1024, 7, np.uint32))
  k = mod.kernels["memcpyKernelLowLatency"]
  run(k, (4,), (256,), pack_params(k, [da2, sa2, np.uint64(n)]), hm.mem)
  assert np.array_equal(dst2[:n], src2[:n]) and (dst2[n:] == 7).all()
  # memcpyKernelTrailing: the same on bytes (ld.global.u8 / st.global.u8 through a .b16 register)
  src3 = rng.integers(0, 256, 300, dtype=np.uint8)
  sa3, _ = hm.array(src3)
  da3, dst3 = hm.array(np.zeros(512, np.uint8))
  k = mod.kernels["memcpyKernelTrailing"]
  run(k, (2,), (256,), pack_params(k, [da3, sa3, np.uint64(300)]), hm.mem)
  assert np.array_equal(dst3[:300], src3) and (dst3[300:] == 0).all()


def test_indexing_writes_one_float_per_thread():
  k = _module("librecuda_indexing_write_float.ptx").kernels["write_float"]
  hm = HostMemory()
  da, dst = hm.array(np.zeros(3 * 96, np.float32))
  run(k, (3,), (96,), pack_params(k, [da, np.uint64(3 * 96)]), hm.mem)   # blockDim.x * blockIdx.x + threadIdx.x
  assert (dst == 1.0).all()


def test_dynamic_shared_store_and_short_parameter():
  k = _module("librecuda_dynamic_shared_write_float.ptx").kernels["write_float_sum"]
  hm = HostMemory()
  da, dst = hm.array(np.zeros(1, np.float32))
  # sharedData[1024], [1025] at +4096: needs 4104 bytes of dynamic shared memory; (float)a + b
  run(k, (1,), (1,), pack_params(k, [da, np.int16(-1234), np.float32(0.25)]), hm.mem, dynamic_shared=4104)
  assert dst[0] == np.float32(-1234) + np.float32(0.25)


def test_dynamic_shared_store_past_the_allocation_faults():
  from hcq.errors import GPUFault
  k = _module("librecuda_dynamic_shared_write_float.ptx").kernels["write_float_sum"]
  hm = HostMemory()
  da, _ = hm.array(np.zeros(1, np.float32))
  with pytest.raises(GPUFault):
    run(k, (1,), (1,), pack_params(k, [da, np.int16(1), np.float32(1)]), hm.mem, dynamic_shared=1024)


def test_struct_parameter_read_at_its_offset():
  k = _module("librecuda_read_from_struct.ptx").kernels["read_from_struct"]
  hm = HostMemory()
  da, dst = hm.array(np.zeros(1, np.int32))
  s = np.zeros(14, np.int32)
  s[:6] = [11, 22, 33, 44, 55, 66]       # x, y, z, w, h, d, then char str[33], char me_ugly (56 bytes, align 4)
  run(k, (1,), (1,), pack_params(k, [s.tobytes(), da]), hm.mem)
  assert dst[0] == 44                    # *pWout = s.w


def test_write_float_kernels_including_a_module_global():
  mod = _module("librecuda_write_float.ptx")
  hm = HostMemory()
  sa, _ = hm.array(np.array([3.5], np.float32))
  da, dst = hm.array(np.zeros(1, np.float32))
  k = mod.kernels["write_float_ptr"]
  run(k, (1,), (1,), pack_params(k, [da, sa]), hm.mem)
  assert dst[0] == 3.5
  k = mod.kernels["write_float_value"]
  run(k, (1,), (1,), pack_params(k, [da, np.float32(-2.25)]), hm.mem)
  assert dst[0] == -2.25
  k = mod.kernels["write_float_sum"]   # a + b + global_int, global_int = 0x69 (its .global initialiser)
  run(k, (1,), (1,), pack_params(k, [da, np.int16(7), np.float32(0.5)]), hm.mem)
  assert dst[0] == np.float32(7 + 0.5 + 0x69)
