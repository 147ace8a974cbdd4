"""issue 33 P6: the mock NV GPU decodes a GPFIFO entry's method headers once per distinct header sequence
(mockgpu/nv/gpu.py MockNVGPU._sequence) and runs the entry from the kept decode when the headers match. Differential
fuzzing: random method streams cut into GPFIFO entries and run one after another (the first; its headers with other
data, the kept decode's case; other headers of the same length, which must not match it), with the decode kept and
without it, must leave the same memory, method state, subchannels, pending header, position, block and error."""
import ctypes

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hcq
from hcq.config import Config
from hcq.mockgpu import mock_nv_os
from hcq.mockgpu.nv import abi
from hcq.mockgpu.nv.gpu import Channel, MockNVGPU

REGION = 0x4000          # pushbuffer in the first half, semaphores and copy buffers in the second
SEMS = 0x2000
COPY, COMPUTE = abi.HOPPER_DMA_COPY_A, abi.HOPPER_COMPUTE_A
# host methods (SEM address/payload/execute, SET_OBJECT, a no-effect one), copy methods (offsets, length, semaphore,
# LAUNCH_DMA), the compute launch, and methods on a subchannel without an object
METHODS = [(0, 0x0), (0, 0x5C), (0, 0x60), (0, 0x64), (0, 0x68), (0, 0x6C), (0, 0x20), (4, 0x400), (4, 0x408),
           (4, 0x418), (4, 0x240), (4, 0x248), (4, 0x300), (1, 0x2B4), (1, 0x2C0), (2, 0x200), (1, 0x0), (4, 0x0)]


@pytest.fixture(scope="module")
def gpu():
  os = mock_nv_os(Config())
  g = os.devices[0].gpus[0]
  assert isinstance(g, MockNVGPU)
  buf = (ctypes.c_uint8 * (REGION + 0x1000))()
  base = (ctypes.addressof(buf) + 0xFFF) & ~0xFFF
  g.map_range(base, REGION)
  yield g, base, buf
  g.unmap_range(base)
  os.close()


def values(base: int):
  """Data dwords: a semaphore or copy address's halves, small payloads (acquires that pass and block), classes."""
  return st.one_of(st.sampled_from([base >> 32, (base + SEMS) & 0xFFFFFFFF, (base + SEMS + 8) & 0xFFFFFFFF,
                                    (base + SEMS + 2) & 0xFFFFFFFF, COPY, COMPUTE, 0x1234]),
                   st.integers(0, 7), st.integers(0, 0xFFFFFFFF), st.sampled_from([0x1 | 1 << 3 | 3 << 7, 0x8, 0x18]))


def words_of(packets) -> list[int]:
  out = []
  for op, (subc, method), data in packets:
    if op == 4: out.append(4 << 29 | (data[0] & 0x1FFF) << 16 | subc << 13 | method >> 2)
    else:
      out.append(op << 29 | len(data) << 16 | subc << 13 | method >> 2)
      out += data
  return out


def run_entries(gpu, base, entries: list[list[int]], keep: bool, monkeypatch):
  """Run each entry (a list of dwords) after the last on one fresh channel; the state after all."""
  if not keep: monkeypatch.setattr(MockNVGPU, "_sequence", lambda self, *a: None)
  gpu._sequences.clear()
  ctypes.memset(base, 0, REGION)
  ch = Channel(gpu, 1, 7, base + SEMS + 0x800, 4, base + SEMS + 0x900, base + SEMS + 0xA00, {COPY: 1, COMPUTE: 2})
  ch.subchannels[4] = COPY
  results = []
  for words in entries:
    pb = (ctypes.c_uint32 * len(words)).from_address(base)
    pb[:] = words
    if ch.current is None: ch.current = [base, len(words), 0]
    try: done = gpu._run_pushbuffer(ch)
    except Exception as e:
      results.append((type(e).__name__, str(e)))
      break
    results.append(done)
    if not done: break
    ch.current = None
  monkeypatch.undo()
  return (results, ctypes.string_at(base, REGION), dict(ch.state), dict(ch.subchannels), ch.pending, ch.current,
          ch.blocked_on, gpu.stats.get("copies"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kept_method_decodes_change_nothing(gpu, monkeypatch, data):
  g, base, _ = gpu
  vals = values(base)
  packet = st.tuples(st.sampled_from([1, 3, 4, 5, 1, 1, 6]), st.sampled_from(METHODS), st.lists(vals, min_size=0, max_size=5))
  # a semaphore release or acquire as drivers write one (one INC run from SEM_ADDR_LO to SEM_EXECUTE): acquires that
  # block leave a pending header mid-run
  sem = st.builds(lambda off, payload, op: (1, (0, 0x5C), [(base + SEMS + off) & 0xFFFFFFFF, base >> 32, payload, 0, op]),
                  st.sampled_from([0, 8, 2]), st.integers(0, 2), st.integers(0, 7) | st.just(1 << 24))
  packets = [(op, m, d if op != 4 else (d or [0])[:1])
             for op, m, d in data.draw(st.lists(packet | sem | sem, min_size=1, max_size=8))]
  first = words_of(packets)
  same_headers = words_of([(op, m, [data.draw(vals) for _ in d]) for op, m, d in packets])   # the kept decode's case
  other = first[:]
  other[0] = data.draw(st.integers(0, 0xFFFFFFFF))                       # same length, another first header
  cut = data.draw(st.integers(1, len(first)))                               # a run continuing in the next entry
  entries = [first, same_headers, same_headers, other, first[:cut], first[cut:] or [0]]
  g.stats["copies"] = 0
  kept = run_entries(g, base, entries, True, monkeypatch)
  g.stats["copies"] = 0
  fresh = run_entries(g, base, entries, False, monkeypatch)
  assert kept == fresh


def test_repeat_launches_decode_once():
  """Repeat launches of one shape on MOCK+NV decode their entry's headers once; every launch still runs and signals."""
  calls = []
  real = MockNVGPU._sequence
  def counting(self, *a):
    calls.append(1)
    return real(self, *a)
  ptx = b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry empty()\n{\n  ret;\n}\n"
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(MockNVGPU, "_sequence", counting)
    with hcq.open("MOCK+NV") as dev:
      prog = dev.load(ptx, "empty")
      prog(global_size=(1,), local_size=(1,))
      dev.synchronize()
      gpu = dev.os.devices[0].gpus[0]
      before, decoded = gpu.stats["launches"], len(calls)
      for _ in range(20): prog(global_size=(1,), local_size=(1,))
      dev.synchronize()
      assert gpu.stats["launches"] - before == 20 and dev.timeline.signal.value == dev.timeline.value
      assert len(calls) - decoded <= 1, f"{len(calls) - decoded} decodes for 20 launches of one shape"
