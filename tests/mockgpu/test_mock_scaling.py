"""issue 29 item 7: the mocks' allocation and close paths are linear in the number of buffers. 10,000 allocations
took 24-42 s (MOCK+NV, MOCK+AMD) and a close 29-36 s (MOCK+QCOM, MOCK+AMD): each allocation or free walked every
allocation there was (overlap checks, memory in use, the deferred frees, a table copied whole at every map).

No duration is asserted (bench/ times it): the work is counted. The Python lines the whole stack executes (driver,
OS interface, mock: a walk over n allocations is n lines, also inside a comprehension) for 4N allocations and a close
must be at most about 4 times those for N; a quadratic path makes it 16 times. And the structures behind the index
are checked for what makes them cheap: a change of the emulator's range table shares the blocks it does not touch."""
import sys

import pytest

import hcq
from hcq.mockgpu.intervals import Intervals, RangeTable

N = 400


def _lines(spec: str, n: int) -> int:
  """Line events of n 4 KiB allocations and the close, on a device opened beforehand."""
  dev = hcq.open(spec)
  count = 0

  def local(frame, event, arg):
    nonlocal count
    if event == "line": count += 1
    return local

  def tracer(frame, event, arg): return local

  sys.settrace(tracer)
  try:
    for _ in range(n): dev.alloc(4096)
    dev.close()
  finally: sys.settrace(None)
  return count


@pytest.mark.parametrize("spec", ["MOCK+AMD", "MOCK+NV", "MOCK+QCOM"])
def test_allocations_and_close_cost_the_same_per_buffer_at_any_count(spec):
  small, large = _lines(spec, N), _lines(spec, 4 * N)
  assert large <= 4.5 * small, f"{spec}: {large} lines for {4 * N} buffers, {small} for {N}: {large / small:.1f}x"


def test_intervals_find_ranges_without_a_walk():
  iv = Intervals()
  for i in range(1000): iv.add(i * 0x2000, i * 0x2000 + 0x1000, i)
  assert iv.overlapping(0x3000, 0x6001) == [2, 3] and iv.containing(0x5fff) is None and iv.containing(0x6000) == 3
  with pytest.raises(ValueError, match="overlaps"): iv.add(0x6800, 0x8800, "x")
  assert iv.remove(0x6000) == 3 and iv.overlapping(0x6000, 0x7000) == [] and len(iv) == 999


def test_a_change_of_the_range_table_shares_every_block_it_does_not_touch():
  t = RangeTable()
  for i in range(2000): t = t.with_range(i * 0x2000, i * 0x2000 + 0x1000)
  assert len(t.blocks) >= 2000 // (2 * RangeTable.BLOCK) and all(len(s) <= 2 * RangeTable.BLOCK for s, _ in t.blocks)
  u = t.with_range(0x1001, 0x1800)
  changed = [i for i, (a, b) in enumerate(zip(t.blocks, u.blocks)) if a is not b]
  assert len(changed) == 1 and u.range_of(0x1400) == (0x1001, 0x1800) and t.range_of(0x1400) is None
  v = u.without(0x2000 * 1500)
  assert sum(a is not b for a, b in zip(u.blocks, v.blocks)) == 1 and v.range_of(0x2000 * 1500) is None
  assert not t.cache, "the numpy arrays of a table are made on first use, not at every change"
