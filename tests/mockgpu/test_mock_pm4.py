"""The PM4 processor of the mock GPU, driven through mock KFD queues (no wave emulator needed here)."""
import ctypes

import pytest

from hcq.config import Config
from hcq.errors import GPUFault, QueueError
from mock_kfd_harness import Harness, pm4

NOP, WRITE_DATA, WAIT_REG_MEM, IB, COPY_DATA, EVENT_WRITE, RELEASE_MEM, ACQUIRE_MEM, SET_SH_REG = \
  0x10, 0x37, 0x3C, 0x3F, 0x40, 0x46, 0x49, 0x58, 0x76


@pytest.fixture(params=[False, True], ids=["sync", "threaded"])
def h(request):
  har = Harness(Config(mock_threaded=request.param, timeout_s=2))
  yield har
  har.os.close()


def write_data(addr, *values):
  return pm4(WRITE_DATA, 5 << 8, addr, addr >> 32, *values)    # dst_sel 5: memory


def settle(h, cond, timeout=2.0):
  """Let the mock run (the driver's way: read the clock, sleep) until cond() holds."""
  end = h.os.monotonic() + timeout
  while not cond():
    assert h.os.monotonic() < end, "the mock made no progress"
    h.os.sleep(0.0005)


def test_write_data_release_mem_and_the_queue_event(h):
  q = h.queue("compute")
  sig = h.signals
  q.submit(write_data(sig.va + 64, 0x11, 0x22, 0x33) + pm4(ACQUIRE_MEM, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0, 0xC3F1) +
           pm4(EVENT_WRITE, 0x407) + pm4(RELEASE_MEM, 0x514, 1 << 29, sig.va + 8, (sig.va + 8) >> 32, 0xDEADBEEF, 0xCAFE, 0) +
           h.release_signal(sig.va, 7))
  result, events = h.wait()
  assert result == 0
  settle(h, lambda: sig.u64()[0] == 7)
  assert list(sig.u32()[16:19]) == [0x11, 0x22, 0x33]
  assert sig.u32()[2] == 0xDEADBEEF and sig.u32()[3] == 0           # data_sel 1: only 32 bits
  assert q.rptr == q.put
  assert ctypes.c_uint64.from_address(h.mailbox).value == 0xFFFFFFFFFFFFFFFF   # KFD re-armed the slot
  result, _ = h.wait(timeout_ms=20)
  assert result == 1                                                # auto-reset: nothing pending now


def test_gpu_clock_timestamps_increase(h):
  q = h.queue("compute")
  sig = h.signals
  q.submit(pm4(RELEASE_MEM, 0x514, 3 << 29, sig.va + 16, (sig.va + 16) >> 32, 0, 0, 0))
  settle(h, lambda: sig.u64()[2] != 0)       # threaded: the first timestamp may land late
  h.os.sleep(0.002)
  q.submit(pm4(RELEASE_MEM, 0x514, 3 << 29, sig.va + 24, (sig.va + 24) >> 32, 0, 0, 0) + h.release_signal(sig.va, 1))
  settle(h, lambda: sig.u64()[0] == 1)
  t0, t1 = int(sig.u64()[2]), int(sig.u64()[3])
  assert 0 < t0 < t1 and t1 - t0 >= 100_000 * 2 * 0.9     # 100 MHz counter, >= 2 ms apart


def test_wait_reg_mem_blocks_until_host_writes_memory(h):
  q = h.queue("compute")
  sig = h.signals
  q.submit(pm4(WAIT_REG_MEM, 0x15, sig.va + 128, (sig.va + 128) >> 32, 5, 0xFFFFFFFF, 4) + write_data(sig.va + 132, 1) +
           h.release_signal(sig.va, 3))
  h.os.sleep(0.01)
  assert sig.u32()[33] == 0 and sig.u64()[0] == 0                 # still waiting: 0 >= 5 is false
  (queue,) = [x for x in h.gpu.queues.values()]
  assert queue.blocked and "WAIT_REG_MEM" in queue.blocked_on and f"{sig.va + 128:#x}" in queue.blocked_on
  sig.u32()[32] = 4
  h.os.sleep(0.01)
  assert sig.u32()[33] == 0
  sig.u32()[32] = 5
  settle(h, lambda: sig.u64()[0] == 3)
  assert sig.u32()[33] == 1 and not queue.blocked


def test_hdp_flush_register_form_completes(h):
  q = h.queue("compute")
  sig = h.signals
  # operation 1: write the request register (0xe26, nbio 4.3 HDP_FLUSH_REQ), wait on the done register (0xe27)
  q.submit(pm4(WAIT_REG_MEM, 0x45, 0xE26, 0xE27, 0xFFFFFFFF, 0xFFFFFFFF, 4) + h.release_signal(sig.va, 9))
  settle(h, lambda: sig.u64()[0] == 9)


def test_indirect_buffers_nest_and_resume_after_a_wait(h):
  q = h.queue("compute")
  sig = h.signals
  ib2 = h.alloc(0x1000, "gtt")
  ib1 = h.alloc(0x1000, "gtt")
  inner = write_data(sig.va + 200, 2) + pm4(WAIT_REG_MEM, 0x13, sig.va + 256, (sig.va + 256) >> 32, 1, 1, 4) + write_data(sig.va + 204, 3)
  ib2.u32()[:len(inner)] = inner
  outer = write_data(sig.va + 196, 1) + pm4(IB, ib2.va, ib2.va >> 32, len(inner) | (1 << 23)) + write_data(sig.va + 208, 4)
  ib1.u32()[:len(outer)] = outer
  q.submit(pm4(IB, ib1.va, ib1.va >> 32, len(outer) | (1 << 23)) + write_data(sig.va + 212, 5) + h.release_signal(sig.va, 1))
  h.os.sleep(0.01)
  assert list(sig.u32()[49:54]) == [1, 2, 0, 0, 0]
  sig.u32()[64] = 1
  settle(h, lambda: sig.u64()[0] == 1)
  assert list(sig.u32()[49:54]) == [1, 2, 3, 4, 5]


def test_copy_data_and_set_registers(h):
  q = h.queue("compute")
  sig = h.signals
  sig.u32()[100] = 0xABCD
  q.submit(pm4(COPY_DATA, (5 << 8) | 1, sig.va + 400, (sig.va + 400) >> 32, sig.va + 404, (sig.va + 404) >> 32) +                 # memory -> memory
           pm4(COPY_DATA, (5 << 8) | 5 | (1 << 16), 0x1234, 0x5678, sig.va + 408, (sig.va + 408) >> 32) +     # immediate 64-bit
           pm4(SET_SH_REG, 0x240, 1, 2, 3) + pm4(0x79, 0x200, 0xE0000000) + pm4(NOP, 0, 0, 0) +
           h.release_signal(sig.va, 1))
  settle(h, lambda: sig.u64()[0] == 1)
  assert sig.u32()[101] == 0xABCD and sig.u64()[51] == 0x5678_0000_1234


def test_packets_wrap_around_the_ring_end(h):
  q = h.queue("compute", ring_size=0x1000)
  sig = h.signals
  n = 0
  for i in range(300):          # 1024-dword ring: 300 x 5 dwords wraps with packets split across the end
    q.submit(write_data(sig.va + 512, i))
    n = i
  q.submit(h.release_signal(sig.va, 2))
  settle(h, lambda: sig.u64()[0] == 2)
  assert sig.u32()[128] == n and q.rptr == q.put


def test_unknown_opcode_is_a_queue_error_with_opcode_and_offset(h):
  q = h.queue("compute")
  sig = h.signals
  good = write_data(sig.va + 64, 1)
  bad = [(3 << 30) | (0 << 16) | (0xEE << 8), 0]
  if h.os.config.mock_threaded:
    q.submit(good + bad + write_data(sig.va + 68, 2))
    settle(h, lambda: h.wait(timeout_ms=10)[1][2].hw_exception_data.gpu_id == h.gpu_id)
    err = h.gpu.queues[q.queue_id].error
  else:
    with pytest.raises(QueueError) as e: q.submit(good + bad + write_data(sig.va + 68, 2))
    err = e.value
    assert h.wait(timeout_ms=10)[1][2].hw_exception_data.gpu_id == h.gpu_id
  assert isinstance(err, QueueError) and err.opcode == 0xEE and err.offset == 4 * len(good)
  assert "opcode 0xee" in str(err) and f"ring offset {4 * len(good):#x}" in str(err)
  assert sig.u32()[16] == 1 and sig.u32()[17] == 0          # executed up to the bad packet, not beyond


def test_type0_packet_and_bad_ib_are_queue_errors():
  h = Harness()
  q = h.queue("compute")
  with pytest.raises(QueueError, match="type-0 PM4 packet"): q.submit([0x00001234, 0])
  q2 = h.queue("compute")
  ib = h.alloc(0x1000, "gtt")
  ib.u32()[:2] = [(3 << 30) | (5 << 16) | (NOP << 8), 0]           # a NOP claiming 6 body dwords in a 2-dword IB
  with pytest.raises(QueueError, match="runs past the end of the IB1") as e:
    q2.submit(pm4(NOP, 0) + pm4(IB, ib.va, ib.va >> 32, 2 | (1 << 23)))
  assert e.value.offset == 8 and e.value.opcode == NOP
  q3 = h.queue("compute")
  with pytest.raises(QueueError, match="VALID"): q3.submit(pm4(IB, ib.va, ib.va >> 32, 2))


def test_write_to_unmapped_memory_is_a_gpu_fault_with_the_address():
  h = Harness()
  q = h.queue("compute")
  bad = 0x7F0000001000
  with pytest.raises(GPUFault) as e: q.submit(pm4(RELEASE_MEM, 0x514, 2 << 29, bad, bad >> 32, 1, 0, 0))
  assert e.value.address == bad
  _, events = h.wait(timeout_ms=10)
  assert events[1].memory_exception_data.gpu_id == h.gpu_id and events[1].memory_exception_data.va == bad
  assert events[1].memory_exception_data.failure.NotPresent == 1


def test_an_ib_run_again_sees_its_current_contents(h):
  """The processor keeps the parse of an IB's contents: a rerun of the same IB must still execute what the IB holds
  now (a patched value, a packet replaced by another of the same size), and an unknown opcode written into it later
  must still be a queue error at that IB's ring offset."""
  q = h.queue("compute")
  sig = h.signals
  ib = h.alloc(0x1000, "gtt")
  body = write_data(sig.va + 600, 0x1111) + write_data(sig.va + 604, 0x2222)
  ib.u32()[:len(body)] = body
  run = pm4(IB, ib.va, ib.va >> 32, len(body) | (1 << 23))
  for value, expect in ((1, [0x1111, 0x2222]), (2, [0x1111, 0x2222])):
    q.submit(run + h.release_signal(sig.va, value))
    settle(h, lambda: sig.u64()[0] == value)
    assert list(sig.u32()[150:152]) == expect
  ib.u32()[4] = 0x3333                                     # patch a value in place: same size, same address
  q.submit(run + h.release_signal(sig.va, 3))
  settle(h, lambda: sig.u64()[0] == 3)
  assert list(sig.u32()[150:152]) == [0x3333, 0x2222]
  ib.u32()[5:10] = write_data(sig.va + 608, 0x4444)        # a packet replaced by another one
  q.submit(run + h.release_signal(sig.va, 4))
  settle(h, lambda: sig.u64()[0] == 4)
  assert list(sig.u32()[150:153]) == [0x3333, 0x2222, 0x4444]
  other = h.alloc(0x1000, "gtt")                           # the same contents at another address
  other.u32()[:len(body)] = ib.u32()[:len(body)]
  sig.u32()[150:153] = [0, 0, 0]
  q.submit(pm4(IB, other.va, other.va >> 32, len(body) | (1 << 23)) + h.release_signal(sig.va, 5))
  settle(h, lambda: sig.u64()[0] == 5)
  assert list(sig.u32()[150:153]) == [0x3333, 0, 0x4444]
  if h.os.config.mock_threaded: return
  ib.u32()[5] = (3 << 30) | (3 << 16) | (0xEE << 8)        # the second packet's header: an unknown opcode
  ring_offset = 4 * (q.put % (q.ring.size // 4))          # where the INDIRECT_BUFFER packet lands in the ring
  sig.u32()[150:153] = [0, 0, 0]
  with pytest.raises(QueueError) as e: q.submit(run + h.release_signal(sig.va, 6))
  assert e.value.opcode == 0xEE and "IB1" in str(e.value) and "dword 5" in str(e.value)
  assert e.value.offset == ring_offset
  assert list(sig.u32()[150:153]) == [0x3333, 0, 0]       # the IB's first packet ran again, then the error
