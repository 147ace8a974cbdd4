"""Differential fuzzing of the PM4 processor's IB parse cache: random packet streams run from an indirect buffer with
the cache on (every IB parsed once per content, packets then run from the parse) and off (the IB decoded packet by
packet, as before the cache existed) must leave the same memory, registers, recorded dispatches, packet count, wait
state and error message. Random WRITE_DATA/COPY_DATA/RELEASE_MEM packets land in the IB itself now and then, so a
stream that rewrites its own IB and runs it again (the second IB packet in the ring) is covered too."""
import ctypes

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hcq.mockgpu.amd import pm4 as pm4_engine
from hcq.mockgpu.amd.queues import COMPUTE
from test_mock_fuzz import REGION, RING, Bench, packets

IB_AT = 0xC000             # the IB's offset in the bench region (ring at +0, pointers at +0x8000)
IB_PACKET = 0x3F           # nvd.h PACKET3_INDIRECT_BUFFER


@pytest.fixture(scope="module")
def bench():
  b = Bench()
  b.gpu.clock = lambda: 0x1234_5678_9ABC      # GPU-clock packets write the same value in both runs
  yield b
  b.close()


def run_ib(b: Bench, words: list[int], plans: bool, monkeypatch):
  monkeypatch.setattr(pm4_engine, "IB_PLAN_MAX_DWORDS", pm4_engine.IB_PLAN_MAX_DWORDS if plans else 0)
  ctypes.memset(b.base, 0, REGION)
  b.gpu.regs.clear()
  b.dispatches.clear()
  n = min(len(words), (REGION - IB_AT) // 4)
  ib = (ctypes.c_uint32 * n).from_address(b.base + IB_AT)
  for i, w in enumerate(words[:n]): ib[i] = w
  addr = b.base + IB_AT
  call = [(3 << 30) | (2 << 16) | (IB_PACKET << 8), addr & 0xFFFFFFFF, addr >> 32, n | (1 << 23)] if n else []
  ring = call * 2                             # the same IB twice: the second run may see contents the first changed
  (ctypes.c_uint32 * len(ring)).from_address(b.base)[:] = ring
  b.qid += 1
  q = b.gpu.create_queue(COMPUTE, b.qid, b.base, RING, b.base + 0x8000, b.base + 0x8008, 0)
  q.engine.max_packets = 256
  q.doorbell(len(ring))
  for _ in range(64):
    if not q.poll(): break
  b.gpu.destroy_queue(b.qid)
  err = None if q.error is None else (type(q.error).__name__, str(q.error).replace(q.name, "QUEUE"))
  return (ctypes.string_at(b.base, REGION), dict(q.engine.sh), dict(q.engine.uconfig), dict(b.gpu.regs),
          [dict(d) for d in b.dispatches], q.engine.packets, q.engine.blocked_on, q.ring.pos, err)


def test_ib_parse_cache_changes_nothing(bench, monkeypatch):
  @settings(max_examples=250, deadline=None, database=None, suppress_health_check=list(HealthCheck))
  @given(words=st.one_of(packets(bench.base, COMPUTE), st.lists(st.integers(0, 0xFFFFFFFF), max_size=60)))
  def one(words):
    with_plans = run_ib(bench, words, True, monkeypatch)
    without = run_ib(bench, words, False, monkeypatch)
    assert with_plans[1:] == without[1:]
    assert with_plans[0] == without[0]
  one()


def test_the_differential_bench_sees_the_ib_run(bench, monkeypatch):
  """Not vacuous: a WRITE_DATA in the IB lands in memory, and the IB really went through the parse cache."""
  target = bench.base + 0x9000
  write = [(3 << 30) | (3 << 16) | (0x37 << 8), 5 << 8, target & 0xFFFFFFFF, target >> 32, 0xC0FFEE]
  plans_before = []
  monkeypatch.setattr(pm4_engine.PM4Engine, "_ib_plan", lambda self, raw, real=pm4_engine.PM4Engine._ib_plan:
                      plans_before.append(raw) or real(self, raw))
  mem, *_rest, err = run_ib(bench, write, True, monkeypatch)
  assert err is None and int.from_bytes(mem[0x9000:0x9004], "little") == 0xC0FFEE
  assert len(plans_before) == 2          # both IB packets looked their parse up
