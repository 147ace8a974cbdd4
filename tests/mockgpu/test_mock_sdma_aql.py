"""The SDMA engine and AQL queues of the mock GPU, through mock KFD queues."""
import ctypes
import struct

import numpy as np
import pytest

from hcq.config import Config
from hcq.errors import GPUFault, QueueError
from mock_kfd_harness import Harness, pm4


@pytest.fixture(params=[False, True], ids=["sync", "threaded"])
def h(request):
  har = Harness(Config(mock_threaded=request.param, timeout_s=2))
  yield har
  har.os.close()


def settle(h, cond, timeout=2.0):
  end = h.os.monotonic() + timeout
  while not cond():
    assert h.os.monotonic() < end, "the mock made no progress"
    h.os.sleep(0.0005)


# ---- SDMA packets (sdma_v6_0_0_pkt_open.h)
def dws(*v): return [x & 0xFFFFFFFF for x in v]
def copy_linear(dst, src, n): return dws(0x1, n - 1, 0, src, src >> 32, dst, dst >> 32)
def fence(addr, value): return dws(0x5 | (3 << 16), addr, addr >> 32, value)
def trap(ctx): return dws(0x6, ctx)
def poll_mem_ge(addr, value): return dws(0x8 | (5 << 28) | (1 << 31), addr, addr >> 32, value, 0xFFFFFFFF, 0x0FFF0004)
def const_fill(dst, value, n): return dws(0xB | (2 << 30), dst, dst >> 32, value, n - 1)
def timestamp(addr): return dws(0xD | (2 << 8), addr, addr >> 32)
def write(addr, *values): return dws(0x2, addr, addr >> 32, len(values) - 1, *values)
def nop(n): return [(n << 16)] + [0] * n


def test_sdma_copy_fill_write_fence_trap(h):
  q = h.queue("sdma")
  src, dst = h.alloc(1 << 20, "gtt"), h.alloc(1 << 20, "vram")
  data = np.random.default_rng(1).integers(0, 1 << 32, (1 << 20) // 4, dtype=np.uint32)
  src.u32()[:] = data
  sig = h.signals
  q.submit(copy_linear(dst.va, src.va, 1 << 20) + const_fill(dst.va + 4096, 0xA5A5A5A5, 64) + nop(3) +
           write(dst.va + 8192, 7, 8, 9) + timestamp(sig.va + 16) + fence(sig.va, 5) + fence(h.mailbox, h.event_id) +
           trap(h.event_id))
  assert h.wait()[0] == 0
  settle(h, lambda: sig.u32()[0] == 5)
  out = dst.u32()
  want = data.copy()
  want[1024:1040] = 0xA5A5A5A5
  want[2048:2051] = [7, 8, 9]
  assert np.array_equal(out, want)
  assert sig.u64()[2] > 0 and q.rptr == 4 * q.put


def test_sdma_poll_regmem_blocks_until_memory_changes(h):
  q = h.queue("sdma")
  sig = h.signals
  q.submit(poll_mem_ge(sig.va + 64, 3) + fence(sig.va, 1))
  h.os.sleep(0.01)
  assert sig.u32()[0] == 0
  sig.u32()[16] = 3
  settle(h, lambda: sig.u32()[0] == 1)


def test_sdma_indirect_buffer(h):
  q = h.queue("sdma")
  sig = h.signals
  ib = h.alloc(0x1000, "gtt")
  body = fence(sig.va + 8, 11) + fence(sig.va + 12, 12)
  ib.u32()[:len(body)] = body
  q.submit(dws(0x4, ib.va, ib.va >> 32, len(body), 0, 0) + fence(sig.va, 1))
  settle(h, lambda: sig.u32()[0] == 1)
  assert list(sig.u32()[2:4]) == [11, 12]


def test_sdma_unknown_opcode_and_bad_copy():
  h = Harness()
  q = h.queue("sdma")
  with pytest.raises(QueueError, match="SDMA opcode 0x3f") as e: q.submit(fence(h.signals.va, 1) + [0x3F, 0, 0])
  assert e.value.opcode == 0x3F and e.value.offset == 16
  q2 = h.queue("sdma")
  with pytest.raises(GPUFault) as e: q2.submit(copy_linear(h.signals.va, 0x7E0000000000, 64))
  assert e.value.address == 0x7E0000000000


# ---- AQL (hsa.h packet layouts)
def barrier_and(deps, completion=0, header_extra=0):
  return struct.pack("<HHI5QQQ", 3 | header_extra, 0, 0, *(list(deps) + [0] * (5 - len(deps))), 0, completion)


def vendor_pm4(words, completion=0):
  assert len(words) == 4
  return struct.pack("<I4II8IQ", (1 << 16) | 0, *words, 10, *([0] * 8), completion)


def aql_submit(q, packet: bytes):
  ring = q.ring
  slot = (q.put // 16) % (ring.size // 64)
  ctypes.memmove(ring.va + 64 * slot + 4, packet[4:], 60)
  ctypes.c_uint32.from_address(ring.va + 64 * slot).value = struct.unpack_from("<I", packet)[0]  # header last
  q.put += 16
  q.commit()


def amd_signal(mem, offset, value, mailbox=0, event_id=0):
  mem.write(struct.pack("<qqQI", 0, value, mailbox, event_id), offset)
  return mem.va + offset


def test_aql_vendor_pm4_ib_barrier_and_completion_signals(h):
  q = h.queue("aql")
  sig = h.signals
  ib = h.alloc(0x1000, "gtt")
  body = pm4(0x37, 5 << 8, sig.va + 64, (sig.va + 64) >> 32, 42)
  ib.u32()[:len(body)] = body
  sigmem = h.alloc(0x1000, "gtt")
  dep = amd_signal(sigmem, 0, 1)
  done = amd_signal(sigmem, 64, 2, mailbox=h.mailbox, event_id=h.event_id)
  aql_submit(q, barrier_and([dep]))
  aql_submit(q, vendor_pm4(pm4(0x3F, ib.va, ib.va >> 32, len(body) | (1 << 23)), completion=done))
  h.os.sleep(0.01)
  assert sig.u32()[16] == 0 and q.rptr == 0           # the barrier waits for dep to reach 0
  ctypes.c_int64.from_address(dep + 8).value = 0
  assert h.wait()[0] == 0                              # completion signal's mailbox + interrupt
  settle(h, lambda: q.rptr == 2)
  assert sig.u32()[16] == 42
  assert ctypes.c_int64.from_address(done + 8).value == 1     # decremented once


def test_aql_unknown_packet_type_is_a_queue_error():
  h = Harness()
  q = h.queue("aql")
  aql_submit(q, barrier_and([]))
  with pytest.raises(QueueError, match="AQL packet type 4") as e: aql_submit(q, struct.pack("<I60x", 4))
  assert e.value.offset == 64 and e.value.opcode == 4
