"""The public API (alloc, free, copyin, copyout, load) checks its inputs before doing anything: a bad value is a
DeviceError naming the device, the call and the value, never a TypeError from inside a driver; and the device still
works after one."""
import pathlib

import numpy as np
import pytest

import hcq
from hcq import DeviceError

DEMO = pathlib.Path(hcq.__file__).parent / "drivers" / "amd" / "kernels" / "demo.hsaco"


@pytest.fixture(scope="module", params=["MOCK+AMD", "CPU"])
def dev(request):
  with hcq.open(request.param) as d: yield d


@pytest.fixture
def buf(dev):
  b = dev.alloc(1 << 16)
  yield b
  if not b.freed: dev.free(b)


def _refused(call, *words):
  with pytest.raises(DeviceError) as e: call()
  msg = str(e.value)
  for w in words: assert w in msg, msg
  return msg


@pytest.mark.parametrize("nbytes", [4096.0, 1.5, "4096", None, True, False, 0, -1, np.float32(64)])
def test_alloc_refuses_a_size_that_is_not_a_positive_integer(dev, nbytes):
  _refused(lambda: dev.alloc(nbytes), dev.name, "alloc")


@pytest.mark.parametrize("nbytes", [np.int64(4096), np.uint16(64), np.int8(1)])
def test_alloc_takes_any_integral_type(dev, nbytes):
  b = dev.alloc(nbytes)
  assert type(b.size) is int and b.size == int(nbytes)
  dev.free(b)


def test_alloc_refuses_unknown_or_non_bool_options(dev):
  _refused(lambda: dev.alloc(4096, bogus=1), "bogus", "host")
  _refused(lambda: dev.alloc(4096, host="yes"), "host", "'yes'")


@pytest.mark.parametrize("data", ["str", None, 5, 1.5, object(), np.array([object()])])
def test_copyin_refuses_data_without_bytes(dev, buf, data):
  _refused(lambda: dev.copyin(buf, data), dev.name, "copyin")


@pytest.mark.parametrize("offset", [1.5, 0.0, "0", None, True])
def test_copyin_and_copyout_refuse_offsets_that_are_not_integers(dev, buf, offset):
  _refused(lambda: dev.copyin(buf, b"abcd", offset), "copyin", "offset")
  _refused(lambda: dev.copyout(buf, 4, offset), "copyout", "offset")


@pytest.mark.parametrize("size", [16.0, "16", True])
def test_copyout_refuses_a_size_that_is_not_an_integer(dev, buf, size):
  _refused(lambda: dev.copyout(buf, size), "copyout", "size")


def test_copyin_and_copyout_take_numpy_integers(dev, buf):
  dev.copyin(buf, b"abcd", np.int64(8))
  assert dev.copyout(buf, np.uint32(4), np.int16(8)) == b"abcd"


def test_a_refused_copy_leaves_the_device_working(dev, buf):
  """A float offset of 0.0 passes a range check; the copy of a large array (several staging chunks) must be refused
  before any chunk is submitted, and the device must work afterwards."""
  big = np.arange((1 << 16) // 4, dtype=np.uint32)
  _refused(lambda: dev.copyin(buf, big, 0.0), "offset")
  _refused(lambda: dev.copyout(buf, None, 0.0), "offset")
  dev.copyin(buf, big)
  dev.synchronize()
  assert np.array_equal(np.frombuffer(dev.copyout(buf), np.uint32), big)


@pytest.mark.parametrize("what", [5, None, "buf", b"x"])
def test_free_and_copies_refuse_what_is_not_a_buffer(dev, what):
  _refused(lambda: dev.free(what), "free", "Buffer")
  _refused(lambda: dev.copyout(what), "copyout", "Buffer")
  _refused(lambda: dev.copyin(what, b"x"), "copyin", "Buffer")


def test_free_refuses_a_buffer_of_another_device(dev):
  with hcq.open("CPU") as other:
    b = other.alloc(64)
    _refused(lambda: dev.free(b), "another device")
    assert not b.freed
    other.free(b)


@pytest.mark.parametrize("code", [None, 5, 1.5, object(), ["x"]])
def test_load_refuses_what_is_not_bytes(dev, code):
  _refused(lambda: dev.load(code), dev.name, "load", type(code).__name__)


def test_load_refuses_a_kernel_name_that_is_not_a_str():
  with hcq.open("MOCK+AMD") as d:
    _refused(lambda: d.load(DEMO.read_bytes(), 5), "name", "int")
    assert d.load(memoryview(DEMO.read_bytes()), "vadd").name == "vadd"
