"""Integer division faults in the C backend: a zero divisor is an error naming the kernel and the operation (never a
SIGFPE that kills the process), INT_MIN / -1 wraps as the reference semantics say, and divisors known to be safe
are not guarded."""
import re

import numpy as np
import pytest

import hcq
from hcq.compiler import KernelInfo, UOp, compile as compile_kernel, dtypes
from hcq.compiler.backend.c import CProgram, KernelFault
from hcq.compiler.ir import Ops
from hcq.compiler.ir.evaluate import exec_alu
from hcq.config import from_env
from hcq.errors import DeviceError

pytestmark = pytest.mark.tools("cc")
N = 8


@pytest.fixture(scope="module")
def dev():
  with hcq.open("CPU") as d: yield d


def div_kernel(dt, op, name="divk"):
  out, a, b = UOp.param(0, dt, N), UOp.param(1, dt, N, readonly=True), UOp.param(2, dt, N, readonly=True)
  g = UOp.special(N, "gidx0")
  x, y = a.index(g).load(), b.index(g).load()
  return out.index(g).store(UOp(op, (x, y))).sink(arg=KernelInfo(name))


def run(dev, sink, a, b):
  bufs = [dev.alloc(a.nbytes) for _ in range(3)]
  dev.copyin(bufs[1], a); dev.copyin(bufs[2], b)
  dev.compile(sink)(*bufs, global_size=(N, 1, 1), local_size=(1, 1, 1))
  return np.frombuffer(dev.copyout(bufs[0]), a.dtype)


@pytest.mark.parametrize("name", ["int8", "int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.IMOD, Ops.FLOORDIV, Ops.FLOORMOD])
def test_division_by_zero_is_an_error_naming_the_kernel(dev, name, op):
  a = np.arange(1, N + 1, dtype=name)
  b = np.ones(N, dtype=name); b[5] = 0
  with pytest.raises(DeviceError, match=r"kernel divk_\w+: integer division by zero in I(DIV|MOD) " + name):
    run(dev, div_kernel(getattr(dtypes, name), op, f"divk_{name}_{op.name}"), a, b)
  b[5] = 3   # the device is still usable, and the same kernel without the zero is right
  got = run(dev, div_kernel(getattr(dtypes, name), op, f"divk_{name}_{op.name}"), a, b)
  want = [exec_alu(op, getattr(dtypes, name), [int(p), int(q)]) for p, q in zip(a.tolist(), b.tolist())]
  assert got.tolist() == want


@pytest.mark.parametrize("name", ["int32", "int64"])
@pytest.mark.parametrize("op", [Ops.IDIV, Ops.IMOD, Ops.FLOORDIV, Ops.FLOORMOD])
def test_min_divided_by_minus_one_wraps_like_the_reference(dev, name, op):
  info = np.iinfo(name)
  a = np.array([info.min, info.min, info.min + 1, -7, 7, info.max, 0, info.min], dtype=name)
  b = np.array([-1, 1, -1, -1, -1, -1, -1, 2], dtype=name)
  got = run(dev, div_kernel(getattr(dtypes, name), op, f"minus_one_{name}_{op.name}"), a, b)
  want = [exec_alu(op, getattr(dtypes, name), [int(p), int(q)]) for p, q in zip(a.tolist(), b.tolist())]
  assert got.tolist() == want
  assert want[0] == (info.min if op in (Ops.IDIV, Ops.FLOORDIV) else 0)


def test_a_fault_in_a_kernel_with_barriers_is_reported():
  lx = 4
  out, b = UOp.param(0, dtypes.int32, lx), UOp.param(1, dtypes.int32, lx, readonly=True)
  lid = UOp.special(lx, "lidx0")
  tile = UOp.placeholder(lx, dtypes.int32, slot=2)
  st = tile.index(lid).store(b.index(lid).load())
  v = tile.after(st).index((lid + 1) % lx).load()          # a neighbour's value: needs the barrier
  sink = out.index(lid).store(100 // v).sink(arg=KernelInfo("barrier_div"))
  art = compile_kernel(sink, "c")
  assert "hcq_barrier(hcq_wg)" in art.source
  prog = CProgram.from_artifact(art, from_env().cache_dir)
  with hcq.open("CPU") as d:
    bo, bb = d.alloc(4 * lx), d.alloc(4 * lx)
    d.copyin(bb, np.array([1, 2, 0, 4], np.int32))
    with pytest.raises(KernelFault, match="kernel barrier_div: integer division by zero") as e:
      prog(bo, bb, global_size=(1, 1, 1), local_size=(lx, 1, 1))
    assert re.match(r"I(DIV|MOD) int32 at position \d+ of the linear kernel", e.value.site)


def test_safe_divisors_are_not_guarded():
  x = UOp.param(1, dtypes.int32, N, readonly=True).index(UOp.special(N, "gidx0")).load()
  out = UOp.param(0, dtypes.int32, N)
  i = UOp.special(N, "gidx0")
  safe = compile_kernel(out.index(i).store(x.idiv(UOp.const(7, dtypes.int32)) + x.imod(i + 1)).sink(), "c")
  assert not re.search(r"hcq_div_fault\(hcq_wg, \d", safe.source) and safe.faults == []
  risky = compile_kernel(out.index(i).store(x.idiv(x)).sink(), "c")
  assert len(re.findall(r"hcq_div_fault\(hcq_wg, \d", risky.source)) == 1 and len(risky.faults) == 1
