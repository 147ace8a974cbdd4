"""Register allocation on the LINEAR form: loop-aware live ranges, no two overlapping values in one register."""
import pytest

from hcq.compiler import CompileError, Ops, dtypes
from hcq.compiler import examples
from hcq.compiler.ir import PtrDType
from hcq.compiler.lower import lower
from hcq.compiler.lower.regalloc import allocate, live_ranges


def width(u):   # 64-bit values and pointers take two 32-bit registers
  return 2 if isinstance(u.dtype, PtrDType) or u.dtype.itemsize == 8 else 1


@pytest.mark.parametrize("make", examples.ALL, ids=[f.__name__ for f in examples.ALL])
def test_no_two_live_values_share_a_register(make):
  lin = lower(make().sink)
  ranges = live_ranges(lin)
  regs = allocate(lin, 512, width=width)
  assert set(regs) == set(ranges)
  items = list(regs.items())
  for i, (u, r) in enumerate(items):
    assert r % width(u) == 0
    for v, q in items[i + 1:]:
      share = r < q + width(v) and q < r + width(u)
      overlap = ranges[u][0] <= ranges[v][1] and ranges[v][0] <= ranges[u][1]
      assert not (share and overlap), f"{u.op} and {v.op} share register {max(r, q)} while both live"


def test_values_used_inside_a_loop_live_until_its_end():
  lin = lower(examples.matmul_tiled().sink)
  ranges = live_ranges(lin)
  at = {u: i for i, u in enumerate(lin.src)}
  loops = [(at[u.src[0]], i) for i, u in enumerate(lin.src) if u.op is Ops.END]
  outer = min(loops)
  # the row offset (computed before the K-tile loop, read inside it) must survive the whole loop
  used_inside = [u for u in ranges if ranges[u][0] < outer[0] and any(outer[0] < at[x] < outer[1] and u in x.src for x in lin.src)]
  assert used_inside and all(ranges[u][1] >= outer[1] for u in used_inside)
  for r, e in loops:   # each loop counter lives until its END
    assert ranges[lin.src[r]][1] >= e


def test_too_few_registers_is_a_clear_error():
  lin = lower(examples.matmul_tiled().sink)
  with pytest.raises(CompileError, match="regalloc: more than 4 registers live at element"):
    allocate(lin, 4)
  assert max(allocate(lin, 64).values()) < 64
