"""issue 33 P1: a kept ring run's SET_SH_REG and RELEASE_MEM steps are specialised when the run is decoded, by the
register offset (SET_SH_REG's first body dword) and the data/interrupt selector (RELEASE_MEM's second), which are then
kept with the run's headers (mockgpu/amd/pm4.py PM4Engine._sh_step, _fence_step). Differential test: streams of these
packets around the user data, the launch-state registers, the SH window's end, and fences of every data size, each
run again with the same headers and other first dwords, must leave the same state with the decode kept and without."""
import ctypes

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.amd.pm4 import PM4Engine
from hcq.mockgpu.amd.queues import COMPUTE
from test_mock_fuzz import REGION, RING, Bench

USER = R.COMPUTE_USER_DATA_0
SH_OFFSETS = [USER, USER + 3, USER + 14, USER - 2, USER - 1, R.LAUNCH_STATE_REGS[0], R.LAUNCH_STATE_REGS[-1] - 1,
              0x21B, 0x3FC, 0x3FF, 0x400]
SELECTORS = [R.RELEASE_DATA_64 << 29, R.RELEASE_DATA_32 << 29, 0, (R.RELEASE_DATA_64 << 29) | (2 << 24),
             (R.RELEASE_DATA_64 << 29) | (5 << 24), 7 << 29]


def header(op: int, body: int) -> int: return (3 << 30) | ((body - 1) << 16) | (op << 8)


@pytest.fixture(scope="module")
def bench():
  b = Bench()
  yield b
  b.close()


def run(b: Bench, streams: list[list[int]], keep: bool, monkeypatch):
  if not keep: monkeypatch.setattr(PM4Engine, "_sequence", lambda self, *a: None)
  ctypes.memset(b.base, 0, REGION)
  b.qid += 1
  q = b.gpu.create_queue(COMPUTE, b.qid, b.base, RING, b.base + 0x8000, b.base + 0x8008, 0)
  e = q.engine
  ring = (ctypes.c_uint32 * (RING // 4)).from_address(b.base)
  at, states = 0, []
  for words in streams:
    e.launch_state = ("converted before",)     # (as a DISPATCH_DIRECT leaves it: a launch register write drops it)
    for w in words:
      ring[at % (RING // 4)] = w
      at += 1
    q.doorbell(at)
    for _ in range(8):
      if not q.poll(): break
    states.append((dict(e.sh), list(e.user_data), e.launch_state, e.packets, q.ring.pos))
    if q.error is not None: break
  b.gpu.destroy_queue(b.qid)
  monkeypatch.undo()
  err = None if q.error is None else str(q.error).replace(q.name, "QUEUE")
  return ctypes.string_at(b.base + 0x8000, REGION - 0x8000), states, err


@st.composite
def packet(draw, base: int) -> list[int]:
  if draw(st.booleans()):
    n = draw(st.integers(1, 5))
    return [header(R.PM4_SET_SH_REG, n + 1), draw(st.sampled_from(SH_OFFSETS)),
            *draw(st.lists(st.integers(0, 0xFFFFFFFF), min_size=n, max_size=n))]
  n = draw(st.sampled_from([7, 7, 6, 5]))
  addr = base + 0x8000 + 8 * draw(st.integers(0, 64)) + draw(st.sampled_from([0, 0, 4]))
  body = [0, draw(st.sampled_from(SELECTORS)), addr & 0xFFFFFFFF, addr >> 32, draw(st.integers(0, 0xFFFFFFFF)),
          draw(st.integers(0, 0xFFFFFFFF)), 0][:n]
  return [header(R.PM4_RELEASE_MEM, n), *body]


def test_specialised_steps_change_nothing(bench, monkeypatch):
  # the GPU's clock and interrupts: the same in both runs (RELEASE_MEM's clock data, int_sel)
  monkeypatch.setattr(bench.gpu, "clock", lambda: 0x1234_5678_9ABC)
  monkeypatch.setattr(bench.gpu, "interrupt", lambda queue, ctx: None)
  patched = monkeypatch.context

  @settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
  @given(data=st.data())
  def one(data):
    ps = data.draw(st.lists(packet(bench.base), min_size=1, max_size=5))
    first = [w for p in ps for w in p]
    # the same headers, other register offsets and selectors (the specialising dwords): must not run the kept steps
    other = []
    for p in ps:
      p = list(p)
      if (p[0] >> 8) & 0xFF == R.PM4_SET_SH_REG: p[1] = data.draw(st.sampled_from(SH_OFFSETS))
      elif len(p) > 2: p[2] = data.draw(st.sampled_from(SELECTORS))
      other.append(p)
    second = [w for p in other for w in p]
    streams = [first, first, second, first, second]
    with patched() as mp: kept = run(bench, streams, True, mp)
    with patched() as mp: decoded = run(bench, streams, False, mp)
    assert kept == decoded
  one()


def test_the_kept_steps_are_specialised_and_follow_the_register_offset(bench):
  """The register write and the fence of a kept run are specialised steps (not the general handlers); the same headers
  with another register offset are decoded again, and write where that offset says."""
  fence = bench.base + 0x8100
  words = [header(R.PM4_SET_SH_REG, 3), USER + 2, 0xAB, 0xCD,
           header(R.PM4_RELEASE_MEM, 7), 0, R.RELEASE_DATA_64 << 29, fence & 0xFFFFFFFF, fence >> 32, 5, 6, 0]
  moved = list(words)
  moved[1] = USER + 4
  ctypes.memset(bench.base, 0, REGION)
  bench.qid += 1
  q = bench.gpu.create_queue(COMPUTE, bench.qid, bench.base, RING, bench.base + 0x8000, bench.base + 0x8008, 0)
  try:
    ring = (ctypes.c_uint32 * (RING // 4)).from_address(bench.base)
    seen = []
    for at, stream in enumerate([words, words, moved]):
      ring[at * len(words):(at + 1) * len(words)] = stream
      q.doorbell((at + 1) * len(words))
      q.poll()
      seen.append(list(q.engine.user_data))
    assert q.error is None
    assert seen[1][2:4] == [0xAB, 0xCD] and seen[2][2:6] == [0xAB, 0xCD, 0xAB, 0xCD]
    assert ctypes.c_uint64.from_address(fence).value == (6 << 32) | 5
    (seq,) = q.engine._seqs[1].values()
    handlers = [step[0] for step in seq[3]]
    assert [getattr(h, "__name__", None) for h in handlers] == ["user_step", "fence_step"]
    assert seq[1] == (USER + 4, words[0], R.RELEASE_DATA_64 << 29, words[4])   # offset, selector kept with headers
  finally: bench.gpu.destroy_queue(bench.qid)
