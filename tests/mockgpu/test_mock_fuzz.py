"""Fuzzing the PM4 and SDMA processors: random dword streams (and random packets with plausible headers and
addresses) must end in completed packets, a blocked queue, a QueueError or a GPUFault, never another exception.

The default suite runs a short pass; `pytest -m slow tests/mockgpu/test_mock_fuzz.py` runs each for >= 60 s."""
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hcq.config import Config
from hcq.errors import HCQError
from hcq.mockgpu import mock_amd_os
from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.amd.queues import COMPUTE, COMPUTE_AQL, SDMA

REGION = 1 << 16
RING = 0x4000          # bytes: 4096 dwords
PM4_OPS = [R.PM4_NOP, R.PM4_DISPATCH_DIRECT, R.PM4_PRED_EXEC, R.PM4_WRITE_DATA, R.PM4_WAIT_REG_MEM,
           R.PM4_INDIRECT_BUFFER, R.PM4_COPY_DATA, R.PM4_EVENT_WRITE, R.PM4_RELEASE_MEM, R.PM4_ACQUIRE_MEM,
           R.PM4_SET_SH_REG, R.PM4_SET_UCONFIG_REG]
SDMA_OPS = [R.SDMA_NOP, R.SDMA_COPY, R.SDMA_WRITE, R.SDMA_INDIRECT, R.SDMA_FENCE, R.SDMA_TRAP, R.SDMA_POLL_REGMEM,
            R.SDMA_CONST_FILL, R.SDMA_TIMESTAMP, R.SDMA_GCR]


class Bench:
  """One mock GPU with a mapped 64 KiB region: ring at +0, pointers at +0x8000, the rest is scratch memory."""

  def __init__(self):
    self.os = mock_amd_os(Config(mock_instruction_budget=10_000))
    self.gpu = self.os.devices[0].gpus[0]
    self.dispatches = []
    self.gpu._run_emulator = lambda queue=None, extra=None, **kw: self.dispatches.append(kw)   # the packet processors are under test here
    self.base = self.os.memory.alloc(REGION, what="fuzz region")
    self.gpu.map_range(self.base, REGION)
    self.qid = 0

  def run(self, kind: int, words: list[int]) -> HCQError | None:
    import ctypes
    ctypes.memset(self.base, 0, REGION)
    ring = (ctypes.c_uint32 * (RING // 4)).from_address(self.base)
    for i, w in enumerate(words[:RING // 4]): ring[i] = w
    self.qid += 1
    q = self.gpu.create_queue(kind, self.qid, self.base, RING, self.base + 0x8000, self.base + 0x8008, 0)
    q.engine.max_packets = 256
    n = min(len(words), RING // 4)
    q.doorbell({COMPUTE: n, SDMA: 4 * n, COMPUTE_AQL: n // 16 - 1}[kind])
    for _ in range(64):
      if not q.poll(): break
    self.gpu.destroy_queue(self.qid)
    assert q.error is None or isinstance(q.error, HCQError), repr(q.error)
    return q.error

  def close(self): self.os.close()


@pytest.fixture(scope="module")
def bench():
  b = Bench()
  yield b
  b.close()


def addresses(base):
  """Dword values that are sometimes addresses inside (or just outside) the mapped region."""
  return st.one_of(st.integers(0, 0xFFFFFFFF), st.integers(base & 0xFFFFFFFF, (base + REGION + 64) & 0xFFFFFFFF),
                   st.just(base >> 32))


def packets(base, kind):
  body = st.lists(addresses(base), min_size=0, max_size=10)
  if kind == COMPUTE:
    header = st.builds(lambda op, n, t: (t << 30) | (n << 16) | (op << 8), st.sampled_from(PM4_OPS + [0, 0xEE]),
                       st.integers(0, 9), st.sampled_from([3, 3, 3, 2, 0]))
  else:
    header = st.builds(lambda op, sub, hi: op | (sub << 8) | (hi << 16), st.sampled_from(SDMA_OPS + [0x3F]),
                       st.sampled_from([0, 0, 1, 2]), st.integers(0, 0xFFFF))
  return st.lists(st.tuples(header, body), max_size=40).map(lambda ps: [w for h, b in ps for w in [h, *b]])


def streams(base, kind):
  return st.one_of(st.lists(st.integers(0, 0xFFFFFFFF), max_size=200), packets(base, kind))


def fuzz(bench, kind, examples: int, seconds: float = 0.0):
  # a timed run calls one() again and again: each call must draw new examples
  @settings(max_examples=examples, derandomize=not seconds, deadline=None, database=None,
            suppress_health_check=list(HealthCheck))
  @given(words=streams(bench.base, kind))
  def one(words): bench.run(kind, words)
  end = time.monotonic() + seconds
  one()
  while time.monotonic() < end: one()


def aql_packets(base):
  """64-byte AQL packets: a plausible header (type, barrier bit, vendor format) and random/plausible fields."""
  header = st.builds(lambda t, fmt, b: t | (b << 8) | (fmt << 16), st.sampled_from([0, 1, 2, 2, 3, 4, 5, 9]),
                     st.sampled_from([0, 1, 1, 7]), st.integers(0, 1))
  return st.lists(st.tuples(header, st.lists(addresses(base), min_size=15, max_size=15)), max_size=12).map(
    lambda ps: [w for h, rest in ps for w in [h, *rest]])


def test_aql_random_packets_short(bench):
  @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
  @given(words=aql_packets(bench.base))
  def one(words): bench.run(COMPUTE_AQL, words)
  one()


def test_pm4_random_streams_short(bench): fuzz(bench, COMPUTE, 300)
def test_sdma_random_streams_short(bench): fuzz(bench, SDMA, 300)


def test_fuzz_bench_finds_real_errors(bench):
  """The bench is not vacuous: known-bad streams give the errors the fuzzer tolerates, good ones none."""
  assert bench.run(COMPUTE, [(3 << 30) | (0xEE << 8), 0]).opcode == 0xEE
  assert bench.run(SDMA, [0x3F]).opcode == 0x3F
  assert bench.run(COMPUTE, [(3 << 30) | (1 << 16) | (R.PM4_NOP << 8), 1, 2]) is None
  assert bench.run(SDMA, [0x5, 0x1000, 0, 1]).address == 0x1000


@pytest.mark.slow
def test_pm4_random_streams_60s(bench): fuzz(bench, COMPUTE, 2000, seconds=60)


@pytest.mark.slow
def test_sdma_random_streams_60s(bench): fuzz(bench, SDMA, 2000, seconds=60)


@pytest.mark.slow
def test_random_bytes_60s(bench):
  """Plain random dwords with a Python RNG (no shrinking), for volume."""
  rng = random.Random(5)
  end = time.monotonic() + 60
  n = 0
  while time.monotonic() < end:
    bench.run(rng.choice([COMPUTE, SDMA, COMPUTE_AQL]), [rng.getrandbits(32) for _ in range(rng.randint(1, 400))])
    n += 1
  assert n > 100
