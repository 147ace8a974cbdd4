"""issue 33 P1: the PM4 processor decodes a ring's run of packets once per distinct header sequence
(mockgpu/amd/pm4.py PM4Engine._sequence) and runs it again from the kept decode when the headers match. Differential
fuzzing: random packet streams written to the ring one after another (the first; its headers with other bodies, the kept
decode's case; the same length with other headers, which must not match it; ...), with the decode kept and without it, must leave the same
memory, registers, recorded dispatches, packet count, wait state, ring position and error message."""
import ctypes

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hcq
from hcq.drivers.amd.kernels import demo_code_object
from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.amd.pm4 import PM4Engine
from hcq.mockgpu.amd.queues import COMPUTE
from test_mock_fuzz import REGION, RING, Bench, addresses

# mostly the packets a decode keeps; now and then one it does not (an IB, PRED_EXEC, an unknown opcode, a filler)
SEQ_OPS = [R.PM4_NOP, R.PM4_SET_SH_REG, R.PM4_SET_UCONFIG_REG, R.PM4_DISPATCH_DIRECT, R.PM4_WAIT_REG_MEM,
           R.PM4_RELEASE_MEM, R.PM4_EVENT_WRITE, R.PM4_ACQUIRE_MEM, R.PM4_WRITE_DATA, R.PM4_COPY_DATA]
OTHER_OPS = [R.PM4_INDIRECT_BUFFER, R.PM4_PRED_EXEC, 0xEE]


@pytest.fixture(scope="module")
def bench():
  b = Bench()
  b.gpu.clock = lambda: 0x1234_5678_9ABC      # GPU-clock packets write the same value in both runs
  yield b
  b.close()


def run_ring(b: Bench, streams: list[list[int]], keep: bool, monkeypatch):
  """Write each stream after the last into one queue's ring, ring its doorbell and poll; the state after all."""
  if not keep: monkeypatch.setattr(PM4Engine, "_sequence", lambda self, *a: None)
  ctypes.memset(b.base, 0, REGION)
  b.gpu.regs.clear()
  b.dispatches.clear()
  b.qid += 1
  q = b.gpu.create_queue(COMPUTE, b.qid, b.base, RING, b.base + 0x8000, b.base + 0x8008, 0)
  q.engine.max_packets = 256
  ring = (ctypes.c_uint32 * (RING // 4)).from_address(b.base)
  at = 0
  for words in streams:
    for w in words:
      ring[at % (RING // 4)] = w
      at += 1
    q.doorbell(at)
    for _ in range(64):
      if not q.poll(): break
    if q.error is not None: break
  b.gpu.destroy_queue(b.qid)
  monkeypatch.undo()
  err = None if q.error is None else (type(q.error).__name__, str(q.error).replace(q.name, "QUEUE"))
  return (ctypes.string_at(b.base, REGION), dict(q.engine.sh), dict(q.engine.uconfig), dict(b.gpu.regs),
          [dict(d) for d in b.dispatches], q.engine.packets, q.engine.blocked_on, q.ring.pos, err)


def test_kept_ring_decodes_change_nothing(bench, monkeypatch):
  header = st.builds(lambda op, n, t: (t << 30) | (n << 16) | (op << 8),
                     st.one_of(st.sampled_from(SEQ_OPS), st.sampled_from(OTHER_OPS)), st.integers(0, 8),
                     st.sampled_from([3] * 12 + [2, 0]))

  @settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))
  @given(data=st.data())
  def one(data):
    ps = data.draw(st.lists(st.tuples(header, st.lists(addresses(bench.base), max_size=9)), max_size=8))
    first = [w for h, body in ps for w in [h, *body]]
    # the same headers and body lengths, other bodies: runs from the decode kept for the first stream
    second = [w for h, body in ps for w in
              [h, *data.draw(st.lists(addresses(bench.base), min_size=len(body), max_size=len(body)))]]
    # the same length, other headers: one packet's opcode changed; all of it as one NOP's body (other positions)
    swapped = list(first)
    if ps:
      i = data.draw(st.integers(0, len(ps) - 1))
      at = sum(1 + len(body) for _, body in ps[:i])
      op = data.draw(st.sampled_from(SEQ_OPS + OTHER_OPS))
      swapped[at] = (swapped[at] & ~0xFF00) | (op << 8)
    one_nop = [(3 << 30) | ((len(first) - 2) << 16) | (R.PM4_NOP << 8)] + first[1:] if len(first) >= 2 else first
    streams = [first, second, swapped, first, one_nop, second]
    kept = run_ring(bench, streams, True, monkeypatch)
    decoded = run_ring(bench, streams, False, monkeypatch)
    assert kept[1:] == decoded[1:]
    assert kept[0] == decoded[0]
  one()


def test_a_launch_is_decoded_once():
  """Repeat launches of one shape on MOCK+AMD decode their ring packets once; every launch still runs its dispatch
  and its fence."""
  calls = []
  real = PM4Engine._sequence
  def counting(self, *a):
    calls.append(1)
    return real(self, *a)
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(PM4Engine, "_sequence", counting)
    with hcq.open("MOCK+AMD") as dev:
      prog = dev.load(demo_code_object(), "empty")
      prog(global_size=(1,), local_size=(1,))
      dev.synchronize()
      gpu = dev.os.devices[0].gpus[0]
      before, decoded = gpu.stats["dispatches"], len(calls)
      for _ in range(20): prog(global_size=(1,), local_size=(1,))
      dev.synchronize()
      assert gpu.stats["dispatches"] - before == 20 and dev.timeline.signal.value == dev.timeline.value
      assert len(calls) - decoded <= 1, f"{len(calls) - decoded} decodes for 20 launches of one shape"
