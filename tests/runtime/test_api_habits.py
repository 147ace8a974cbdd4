"""The Python API for GPU programmers' habits: copyout(dtype=/into=), memset, shared_mem=, load() of a code object
with several kernels as a Module (loaded once); global_size keeps counting work-groups."""
import pathlib

import numpy as np
import pytest

import hcq

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = (ROOT / "drivers" / "amd" / "kernels" / "demo.hsaco").read_bytes()       # kernels empty, vadd, matmul
VADD = (ROOT / "tests" / "fixtures" / "opencl" / "hsaco" / "vadd.hsaco").read_bytes()


@pytest.fixture(scope="module")
def dev():
  with hcq.open("MOCK+AMD") as d: yield d


def test_copyout_with_a_dtype_returns_a_numpy_array(dev):
  buf = dev.alloc(4096)
  dev.copyin(buf, np.arange(1024, dtype=np.float32))
  a = dev.copyout(buf, dtype=np.float32)
  assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (1024,) and (a == np.arange(1024)).all()
  a[0] = 5   # the caller's own, writable copy
  assert dev.copyout(buf, 8, 4, dtype="int32").tolist() == [0x3F800000, 0x40000000]   # 1.0f, 2.0f
  with pytest.raises(hcq.DeviceError, match="6 bytes are not whole float32 elements of 4 bytes"):
    dev.copyout(buf, 6, dtype=np.float32)
  with pytest.raises(hcq.DeviceError, match="not a type of numbers"):
    dev.copyout(buf, dtype=object)


def test_copyout_into_fills_the_callers_array(dev):
  buf = dev.alloc(256)
  dev.copyin(buf, np.arange(64, dtype=np.int32))
  out = np.zeros(64, np.int32)
  assert dev.copyout(buf, into=out) is out and (out == np.arange(64)).all()
  part = np.zeros(4, np.int32)
  dev.copyout(buf, offset=16, into=part)
  assert part.tolist() == [4, 5, 6, 7]
  with pytest.raises(hcq.DeviceError, match="into= is read-only"):
    dev.copyout(buf, into=bytes(256))
  with pytest.raises(hcq.DeviceError, match="into= holds 16 bytes, the copy is 8"):
    dev.copyout(buf, 8, into=np.zeros(4, np.int32))
  with pytest.raises(hcq.DeviceError, match="outside"):
    dev.copyout(buf, offset=200, into=np.zeros(64, np.int32))
  with pytest.raises(hcq.DeviceError, match="not both"):
    dev.copyout(buf, dtype=np.int32, into=out)
  assert dev.copyout(buf, 4) == b"\0\0\0\0"   # neither: bytes, as before


def test_memset_sets_bytes_within_the_range(dev):
  buf = dev.alloc(4096)
  dev.memset(buf, 0)
  dev.memset(buf, 0xAB, 100, 10)
  got = dev.copyout(buf, dtype=np.uint8)
  assert (got[10:110] == 0xAB).all() and (got[:10] == 0).all() and (got[110:] == 0).all()
  with pytest.raises(hcq.DeviceError, match="value 256 is not a byte"):
    dev.memset(buf, 256)
  with pytest.raises(hcq.DeviceError, match="memset of 8 bytes at offset 4092 is outside"):
    dev.memset(buf, 1, 8, 4092)


def test_a_code_object_with_several_kernels_is_a_module_loaded_once(dev):
  before = len(dev._images)
  mod = dev.load(DEMO)
  assert list(mod) == ["empty", "vadd", "matmul"] and "vadd" in mod and len(mod) == 3
  vadd = mod["vadd"]
  assert mod["vadd"] is vadd and mod["matmul"].name == "matmul"
  assert len(dev._images) == before + 1       # the image went to the GPU once for both kernels
  with pytest.raises(hcq.DeviceError, match=r"no kernel 'nope' in the code object \(it has empty, vadd, matmul\)"):
    mod["nope"]
  # one kernel: the Program itself, as before; global_size still counts work-groups (16 x 64 threads)
  prog = dev.load(VADD)
  a = dev.alloc(4096)
  dev.copyin(a, np.arange(1024, dtype=np.float32))
  prog(a, a, a, global_size=(16, 1, 1), local_size=(64, 1, 1), wait=True)
  assert (dev.copyout(a, dtype=np.float32) == 2 * np.arange(1024)).all()


def test_shared_mem_is_a_named_argument():
  from hcq.config import Config
  from hcq.drivers.nv import open_device
  from hcq.mockgpu import mock_nv_os
  from tests.fixtures.cuda.kernels import KERNELS
  os = mock_nv_os(Config(timeout_s=10))
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  with dev:
    prog = dev.load(KERNELS["dyn_shared"].ptx().encode())
    src, dst = dev.alloc(512 * 4), dev.alloc(512 * 4)
    dev.copyin(src, np.arange(512, dtype=np.int32))
    prog(src, dst, global_size=4, local_size=128, shared_mem=128 * 4, wait=True)
    want = np.arange(512, dtype=np.int32).reshape(4, 128)[:, ::-1].ravel()
    assert (dev.copyout(dst, dtype=np.int32) == want).all()
    with pytest.raises(hcq.DeviceError, match="shared_mem must be a number of bytes >= 0"):
      prog(src, dst, global_size=4, local_size=128, shared_mem=-1)
  with hcq.open("MOCK+AMD") as amd:
    with pytest.raises(hcq.DeviceError, match="uses no dynamic shared memory"):
      amd.load(VADD)(amd.alloc(64), amd.alloc(64), amd.alloc(64), global_size=1, local_size=1, shared_mem=64)
