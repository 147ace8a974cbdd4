"""A compute launch whose program address holds the PTX text itself (a PTX image: what tinygrad's NV driver loads on
a mock interface), and the QMD V03_00 release semaphores (clc9c0qmd.h RELEASE0/1), written when the grid completes."""
import ctypes
import struct

import numpy as np
import pytest

from hcq.autogen.nv import rm_abi as abi
from hcq.autogen.nv.tables import qmd as qmd_table
from hcq.config import Config
from hcq.drivers.nv.rm import RMSession
from hcq.errors import QueueError
from hcq.mockgpu import mock_nv_os

PTX = b"""
.version 7.8
.target sm_89
.address_size 64
.visible .entry twice(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 1;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


def _set(buf: bytearray, field, value: int) -> None:
  hi, lo = field
  v = int.from_bytes(buf, "little")
  mask = ((1 << (hi - lo + 1)) - 1) << lo
  buf[:] = ((v & ~mask) | ((value << lo) & mask)).to_bytes(len(buf), "little")


@pytest.fixture
def ada():
  os = mock_nv_os(Config(), gpu="AD102")
  rm = RMSession(os, 0, os.config, label="MOCK+NV:0")
  ch = rm.create_channel(rm.compute_class, 64)
  gpu = os.devices[0].gpus[0]
  mock_ch = next(c for c in gpu.channels if c.handle == ch.handle)
  yield rm, gpu, mock_ch
  rm.close()
  os.close()


def _qmd(prog: int, cb0: int, block: int, releases=()) -> bytes:
  L = qmd_table.for_major(3)
  q = bytearray(L.size_bytes)
  for name, v in (("QMD_MAJOR_VERSION", 3), ("CTA_RASTER_WIDTH", 1), ("CTA_RASTER_HEIGHT", 1), ("CTA_RASTER_DEPTH", 1),
                  ("CTA_THREAD_DIMENSION0", block), ("CTA_THREAD_DIMENSION1", 1), ("CTA_THREAD_DIMENSION2", 1),
                  ("PROGRAM_ADDRESS_LOWER", prog & 0xFFFFFFFF), ("PROGRAM_ADDRESS_UPPER", prog >> 32),
                  ("CONSTANT_BUFFER_ADDR_LOWER_0", cb0 & 0xFFFFFFFF), ("CONSTANT_BUFFER_ADDR_UPPER_0", cb0 >> 32),
                  ("CONSTANT_BUFFER_SIZE_SHIFTED4_0", 0x200 >> 4), ("CONSTANT_BUFFER_VALID_0", 1),
                  ("REGISTER_COUNT_V", 16)):                     # a thread has 1..255 registers (the SM refuses 0)
    _set(q, L[name], v)
  for i, (addr, payload, size, wide) in enumerate(releases):
    for f, v in (("ENABLE", 1), ("ADDRESS_LOWER", addr & 0xFFFFFFFF), ("ADDRESS_UPPER", addr >> 32),
                 ("PAYLOAD_LOWER", payload & 0xFFFFFFFF), ("PAYLOAD_UPPER", payload >> 32), ("STRUCTURE_SIZE", size),
                 ("PAYLOAD64B", wide)):
      _set(q, L[f"RELEASE{i}_{f}"], v)
  return bytes(q)


def test_a_ptx_image_runs_and_the_qmd_releases_its_semaphores(ada):
  rm, gpu, ch = ada
  prog, cb0, out, sem = (rm.alloc(0x2000, cpu_access=True) for _ in range(4))
  prog.cpu[:len(PTX)] = PTX
  struct.pack_into("<Q", cb0.cpu, 0x160, out.va)                 # the parameter bank of sm_89 (PARAM_BASE)
  sem.cpu[:32] = b"\xee" * 32
  qmd_mem = rm.alloc(0x1000, cpu_access=True)
  qmd = _qmd(prog.va, cb0.va, 32, releases=[(sem.va, 0x1_2345_6789, 0, 1), (sem.va + 16, 7, 1, 0)])
  qmd_mem.cpu[:len(qmd)] = qmd
  gpu._launch(ch, abi.ADA_COMPUTE_A, qmd_mem.va)
  assert np.array_equal(np.frombuffer(bytes(out.cpu[:128]), np.uint32), np.arange(32, dtype=np.uint32) * 2)
  value, stamp, one_word = struct.unpack_from("<QQI", sem.cpu, 0)
  assert value == 0x1_2345_6789 and 0 < stamp < 1 << 63      # FOUR_WORDS, PAYLOAD64B: payload then timestamp
  assert one_word == 7 and bytes(sem.cpu[20:24]) == b"\xee" * 4   # ONE_WORD, 32-bit: nothing else written


def test_an_image_that_is_not_ptx_or_names_several_kernels_is_refused(ada):
  rm, gpu, ch = ada
  prog, cb0 = rm.alloc(0x2000, cpu_access=True), rm.alloc(0x1000, cpu_access=True)
  qmd_mem = rm.alloc(0x1000, cpu_access=True)
  qmd_mem.cpu[:] = _qmd(prog.va, cb0.va, 1).ljust(0x1000, b"\0")
  prog.cpu[:8] = b"\x7fELF\x02\x01\x01\0"              # a cubin
  with pytest.raises(QueueError, match="SASS without its PTX"): gpu._launch(ch, abi.ADA_COMPUTE_A, qmd_mem.va)
  two = PTX + PTX.replace(b".entry twice", b".entry again").split(b".address_size 64", 1)[1]
  prog.cpu[:len(two)] = two
  with pytest.raises(QueueError, match="2 entries .*again, twice"): gpu._launch(ch, abi.ADA_COMPUTE_A, qmd_mem.va)
