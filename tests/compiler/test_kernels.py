"""The acceptance kernels (hcq.compiler.examples) run on hcq.open("CPU") and match numpy."""
import numpy as np
import pytest

import hcq
from hcq.compiler import examples

pytestmark = pytest.mark.tools("cc")


@pytest.fixture(scope="module")
def dev():
  with hcq.open("CPU") as d: yield d


def run_example(dev, ex):
  bufs = []
  for a in ex.args:
    if isinstance(a, np.ndarray):
      b = dev.alloc(max(a.nbytes, 1))
      dev.copyin(b, a)
      bufs.append(b)
    else:
      bufs.append(a)
  prog = dev.compile(ex.sink)
  t = prog(*bufs, global_size=ex.global_size, local_size=ex.local_size, wait=True)
  assert t >= 0
  return {slot: np.frombuffer(dev.copyout(bufs[slot]), ex.args[slot].dtype).reshape(ex.args[slot].shape)
          for slot in ex.expected}


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_example_matches_numpy(dev, make):
  ex = make()
  got = run_example(dev, ex)
  for slot, want in ex.expected.items():
    if want.dtype.kind == "f": np.testing.assert_allclose(got[slot], want, rtol=1e-5, atol=1e-5)
    else: np.testing.assert_array_equal(got[slot], want)


def test_runtime_trip_count_really_is_runtime(dev):
  ex = examples.runtime_loop(n=37)
  prog = dev.compile(ex.sink)
  a, out = ex.args[0], np.zeros(16, np.float32)
  ba, bo = dev.alloc(a.nbytes), dev.alloc(out.nbytes)
  dev.copyin(ba, a)
  for n in (0, 1, 64):
    prog(ba, bo, n, global_size=(16, 1, 1), local_size=(1, 1, 1))
    got = np.frombuffer(dev.copyout(bo), np.float32)
    np.testing.assert_allclose(got, a[:, :n].sum(1), rtol=1e-5, atol=1e-5)


def test_local_memory_is_shared_and_barriers_are_real(dev):
  """Work-item l reads what work-item 63-l stored: only right with one LOCAL block per group and a real barrier."""
  from hcq.compiler import AddrSpace, KernelInfo, UOp, dtypes
  out = UOp.param(0, dtypes.int32, 4 * 64)
  g, l = UOp.special(4, "gidx0"), UOp.special(64, "lidx0")
  tile = UOp.placeholder(64, dtypes.int32, 0, AddrSpace.LOCAL)
  st = tile.index(l).store(g * 1000 + l)
  sink = out.index(g * 64 + l).store(tile.after(st).index(63 - l).load()).sink(arg=KernelInfo("mirror"))
  prog = dev.compile(sink)
  b = dev.alloc(4 * 64 * 4)
  prog(b, global_size=(4, 1, 1), local_size=(64, 1, 1))
  got = np.frombuffer(dev.copyout(b), np.int32).reshape(4, 64)
  want = np.arange(4)[:, None] * 1000 + (63 - np.arange(64))[None, :]
  np.testing.assert_array_equal(got, want)
  assert "hcq_barrier" in prog.prog.art.source or prog.prog.art.has_barrier


def test_load_the_shared_object_itself(dev):
  ex = examples.elementwise_add()
  first = dev.compile(ex.sink)
  with open(first.prog.path, "rb") as f: image = f.read()
  prog = dev.load(image, name="add")
  a, b = ex.args[0], ex.args[1]
  bufs = [dev.alloc(x.nbytes) for x in ex.args]
  dev.copyin(bufs[0], a); dev.copyin(bufs[1], b)
  prog(*bufs, global_size=ex.global_size, local_size=ex.local_size)
  np.testing.assert_allclose(np.frombuffer(dev.copyout(bufs[2]), np.float32), a + b, rtol=1e-6)
  with pytest.raises(hcq.DeviceError, match="holds kernel 'add'"): dev.load(image, name="other")


def test_wrong_arguments_are_errors(dev):
  ex = examples.elementwise_add()
  prog = dev.compile(ex.sink)
  small = dev.alloc(16)
  with pytest.raises(hcq.DeviceError, match="takes 3 arguments"): prog(small)
  with pytest.raises(hcq.DeviceError, match="slot 0: buffer of 16 bytes"): prog(small, small, small)


def test_write_after_read_in_straight_line_code_gets_a_barrier(dev):
  """tile[l] = a; x = tile[63-l]; tile[l] = b (after the read); y = tile[(l+1)%64]: two barriers make it right."""
  from hcq.compiler import AddrSpace, KernelInfo, Ops, UOp, dtypes
  from hcq.compiler.lower import lower
  out = UOp.param(0, dtypes.int32, 64)
  l = UOp.special(64, "lidx0")
  tile = UOp.placeholder(64, dtypes.int32, 0, AddrSpace.LOCAL)
  x = tile.after(tile.index(l).store(l * 10)).index(63 - l).load()
  second = tile.after(x).index(l).store(l * 1000)
  y = tile.after(second).index((l + 1) % 64).load()
  sink = out.index(l).store(x + y).sink(arg=KernelInfo("war"))
  assert sum(u.op is Ops.BARRIER for u in lower(sink).src) == 3
  b = dev.alloc(256)
  dev.compile(sink)(b, global_size=(1, 1, 1), local_size=(64, 1, 1))
  ls = np.arange(64)
  np.testing.assert_array_equal(np.frombuffer(dev.copyout(b), np.int32), (63 - ls) * 10 + ((ls + 1) % 64) * 1000)


def test_launch_beyond_the_kernel_grid_is_refused(dev):
  ex = examples.elementwise_add()
  prog = dev.compile(ex.sink)
  bufs = [dev.alloc(a.nbytes) for a in ex.args]
  with pytest.raises(hcq.DeviceError, match="exceeds"):
    prog(*bufs, global_size=(ex.global_size[0] * 2, 1, 1), local_size=ex.local_size)


def test_too_much_local_memory_is_refused():
  from hcq.compiler import AddrSpace, CompileError, UOp, dtypes
  from hcq.compiler.lower import lower
  tile = UOp.placeholder(20000, dtypes.float32, 0, AddrSpace.LOCAL)
  l = UOp.special(64, "lidx0")
  out = UOp.param(0, dtypes.float32, 64)
  with pytest.raises(CompileError, match="80000 bytes of LOCAL memory exceed the c limit of 65536"):
    lower(out.index(l).store(tile.after(tile.index(l).store(1.0)).index(l).load()).sink())


def test_async_launch_and_synchronize(dev):
  ex = examples.matmul_naive()
  prog = dev.compile(ex.sink)
  bufs = [dev.alloc(a.nbytes) for a in ex.args]
  for b, a in zip(bufs, ex.args): dev.copyin(b, a)
  assert prog(*bufs, global_size=ex.global_size, local_size=ex.local_size, wait=False) is None
  dev.synchronize()
  np.testing.assert_allclose(np.frombuffer(dev.copyout(bufs[2]), np.float32).reshape(64, 64), ex.expected[2], rtol=1e-5, atol=1e-5)


def test_a_kernel_that_runs_too_long_times_out():
  """A float sum over 2**31 iterations (C may not reassociate it) against a 0.3 s device timeout."""
  from hcq.compiler import AxisType, KernelInfo, UOp, dtypes
  from hcq.config import Config
  out = UOp.param(0, dtypes.float32, 1)
  r = UOp.range(UOp.variable("n", 0, 2**31 - 1, slot=1), 0, AxisType.REDUCE)
  sink = out.index(0).store(r.cast(dtypes.float32).reduce(r)).sink(arg=KernelInfo("spin"))
  dev = hcq.open("CPU", config=Config(timeout_s=0.3))
  prog = dev.compile(sink)
  with pytest.raises(hcq.Timeout, match="kernel spin to finish"):
    prog(dev.alloc(4), 2**31 - 1, wait=True)
  with pytest.raises(hcq.DeviceError, match="closed"): dev.alloc(4)
  # the kernel's thread cannot be stopped from outside (it runs C code in this process): let it end here, not in a
  # later test (on a loaded machine it may outlive the thread guard's one second of grace)
  import threading
  for t in threading.enumerate():
    if t.name == "hcq-cpu-spin": t.join(timeout=120)


def test_a_raw_address_is_not_a_buffer(dev):
  ex = examples.elementwise_add()
  prog = dev.compile(ex.sink)
  with pytest.raises(hcq.DeviceError, match="slot 0 takes a Buffer, got int"): prog(0x1000, 0x2000, 0x3000)


def test_cpu_launches_and_copies_run_in_order():
  """wait=False launches run one after the other, and a copy waits for the launches before it (as on a GPU queue):
  each step reads what the one before wrote."""
  import numpy as np
  from hcq.compiler import KernelInfo, UOp, dtypes
  n = 1 << 22                     # 16 MiB: each launch takes long enough that an unordered one would overlap
  buf = UOp.param(0, dtypes.float32, n)
  i = UOp.special(n, "gidx0")
  sink = buf.index(i).store(buf.index(i).load() * 2.0 + 1.0).sink(arg=KernelInfo("step"))
  with hcq.open("CPU") as dev:
    prog = dev.compile(sink)
    a = dev.alloc(4 * n)
    dev.copyin(a, np.zeros(n, np.float32))
    for _ in range(6): prog(a, global_size=(n, 1, 1), wait=False)
    assert (np.frombuffer(dev.copyout(a), np.float32) == 63).all()     # ((((((0*2+1)*2+1)...) = 2^6 - 1
