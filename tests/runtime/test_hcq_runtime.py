"""The generic runtime with fakes: signals, rings, allocators, kernarg layouts."""
import ctypes
import struct
from array import array

import pytest

from hcq import DeviceError, Timeout
from hcq.drivers.hcq import LaunchRing, Ring, SignalPool, VARanges, check_launch


class FakeClock:
  def __init__(self): self.t = 0.0
  def __call__(self): return self.t
  def sleep(self, s): self.t += s


def page():
  buf = bytearray(4096)
  return id(buf), memoryview(buf), buf


def make_pool():
  keep = []
  def new_page():
    buf = (ctypes.c_uint8 * 4096)()
    keep.append(buf)
    return ctypes.addressof(buf), memoryview(buf).cast("B")
  return SignalPool(new_page, ticks_per_us=100.0), keep


def test_signal_slots_are_distinct_16_byte_slots():
  pool, keep = make_pool()
  sigs = [pool.alloc(i) for i in range(300)]  # more than one page
  vas = sorted(s.va for s in sigs)
  assert all(b - a >= 16 for a, b in zip(vas, vas[1:]))
  s = sigs[5]
  s.value, s.timestamp = 0x1122334455667788, 1234
  assert ctypes.c_uint64.from_address(s.va).value == 0x1122334455667788
  assert ctypes.c_uint64.from_address(s.va + 8).value == 1234
  assert s.timestamp_us == 12.34
  s.free()
  assert pool.alloc(7).va == s.va


def test_signal_wait_times_out_naming_signal_value_and_last_seen():
  pool, keep = make_pool()
  s = pool.alloc(3, name="timeline")
  clk = FakeClock()
  with pytest.raises(Timeout) as e:
    s.wait(5, timeout_s=0.5, clock=clk, sleep=clk.sleep)
  assert e.value.expected == 5 and e.value.last_seen == 3 and "timeline" in str(e.value)
  assert 0.5 < clk.t < 0.6


def test_signal_wait_progress_restarts_the_timeout_and_completes():
  pool, keep = make_pool()
  s = pool.alloc(0)
  clk = FakeClock()
  def sleep(dt):
    clk.sleep(dt)
    if clk.t > 0.3 * (s.value + 1): s.value += 1  # slow progress: a step every 0.3 s
  assert s.wait(4, timeout_s=0.5, clock=clk, sleep=sleep) == 4
  assert clk.t > 1.0  # longer than the timeout in total: progress restarted it


def test_va_ranges_first_fit_alignment_coalescing():
  va = VARanges(0x10000, 0x10000)
  a = va.alloc(0x1000)
  b = va.alloc(0x100, align=0x4000)
  assert a == 0x10000 and b == 0x14000
  c = va.alloc(0x2000)
  assert c == 0x11000  # first fit, before b
  va.free(a); va.free(c)
  assert va.alloc(0x3000) == 0x10000  # a and c merged back into one range
  with pytest.raises(DeviceError, match="out of address space"):
    va.alloc(0x20000)
  with pytest.raises(DeviceError, match="not allocated"):
    va.free(0x12345)
  va.free(b); va.free(0x10000)
  assert va.free_bytes == 0x10000 and va.alloc(0x10000) == 0x10000


def test_launch_ring_waits_before_reusing_regions_in_flight():
  waited = []
  ring = LaunchRing(0x1000, 1024, waited.append)
  addrs = [ring.alloc(300, done_value=v) for v in (1, 2, 3)]  # 0, 320, 640 (64-aligned)
  assert addrs == [0x1000, 0x1000 + 320, 0x1000 + 640] and waited == []
  assert ring.alloc(300, done_value=4) == 0x1000  # wraps: must wait for launch 1 (and the skipped tail, none)
  assert waited == [1]
  assert ring.alloc(300, done_value=5) == 0x1000 + 320 and waited == [1, 2]
  assert ring.alloc(100, done_value=6) == 0x1000 + 640 and waited == [1, 2, 3]
  assert ring.alloc(300, done_value=7) == 0x1000 and waited[-1] == 4  # skipped tail had nothing newer


class FakeEngine:
  """Consumes the ring when asked: a device whose read pointer lags."""
  def __init__(self, ring_dw, unit):
    self.mem = array("I", [0] * ring_dw)
    self.ptrs = array("Q", [0, 0])  # wptr, rptr
    self.unit, self.rang = unit, []
    self.stuck = False
  def doorbell(self, v): self.rang.append(v)
  def consume(self, _dt=None):
    if not self.stuck: self.ptrs[1] = self.ptrs[0]


def make_ring(ring_dw=16, unit=4, cross="split", timeout=1.0):
  eng = FakeEngine(ring_dw, unit)
  clk = FakeClock()
  def sleep(dt):
    clk.sleep(dt)
    eng.consume()
  mv = memoryview(eng.ptrs)
  r = Ring("test ring", memoryview(eng.mem), mv[0:1], mv[1:2], eng.doorbell, unit, cross, lambda: None, clk, sleep, timeout)
  return r, eng, clk


def test_ring_split_wraps_around_and_rings_the_doorbell_with_the_write_pointer():
  r, eng, clk = make_ring(unit=4)
  r.submit(array("I", range(1, 11)))
  assert eng.rang == [10] and eng.ptrs[0] == 10
  eng.consume()
  r.submit(array("I", range(100, 110)))  # 6 dwords to the end, 4 at the start
  assert list(eng.mem[10:16]) == list(range(100, 106)) and list(eng.mem[0:4]) == list(range(106, 110))
  assert eng.ptrs[0] == 20 and eng.rang == [10, 20]


def test_ring_pad_mode_fills_the_tail_with_zero_dwords_byte_pointers():
  r, eng, clk = make_ring(unit=1, cross="pad")
  r.submit(array("I", [7] * 12))
  assert eng.ptrs[0] == 48
  eng.consume()
  r.submit(array("I", [9] * 6))
  assert list(eng.mem[12:16]) == [0] * 4 and list(eng.mem[0:6]) == [9] * 6
  assert eng.ptrs[0] == (16 + 6) * 4 and eng.rang[-1] == 88


def test_ring_waits_for_space_instead_of_overwriting():
  r, eng, clk = make_ring()
  r.submit(array("I", [1] * 12))
  r.submit(array("I", [2] * 8))  # needs the engine to read first: sleeps (the fake consumes), then writes
  assert clk.t > 0 and eng.ptrs[1] == 12 and eng.ptrs[0] == 20


def test_ring_full_with_a_stuck_engine_times_out():
  r, eng, clk = make_ring(timeout=0.2)
  eng.stuck = True
  r.submit(array("I", [1] * 12))
  before = list(eng.mem)
  with pytest.raises(Timeout, match="ring space"):
    r.submit(array("I", [2] * 8))
  assert list(eng.mem) == before  # nothing overwritten


def test_launch_checks():
  assert check_launch("k", (4,), (64, 1), 256) == ((4, 1, 1), (64, 1, 1))
  for g, l, msg in [((0,), (1,), "zero"), ((1,), (512,), "maximum of 256"), ((1, 2, 3, 4), (1,), "1 to 3"),
                    ((1.5,), (1,), "integers")]:
    with pytest.raises(DeviceError, match=msg): check_launch("k", g, l, 256)


def test_launch_ring_cancel_gives_back_the_newest_allocation():
  waited = []
  ring = LaunchRing(0x1000, 1024, waited.append)
  a = ring.alloc(100, done_value=1)
  b = ring.alloc(100, done_value=2)
  ring.cancel(2)
  assert ring.alloc(100, done_value=2) == b   # the same place again
  ring.cancel(7)                              # not the newest: nothing happens
  assert ring.alloc(100, done_value=3) == b + 128 and waited == [] and a == 0x1000


class FakeDeviceMemory:
  """Memory the CPU reaches only through read/write (a GPU behind a USB bridge); `script` gives the values the
  device shows at successive reads of address 0 (a GPU writing it meanwhile)."""
  def __init__(self, script=()):
    self.mem, self.script, self.reads = bytearray(32), list(script), []
  def read(self, va, n):
    self.reads.append((va, n))
    if va == 0x1000 and self.script: struct.pack_into("<Q", self.mem, 0, self.script.pop(0))
    return bytes(self.mem[va - 0x1000:va - 0x1000 + n])
  def write(self, va, data): self.mem[va - 0x1000:va - 0x1000 + len(data)] = bytes(data)


def device_signal(dev, **kw):
  from hcq.drivers.hcq.signal import DeviceSignal
  return DeviceSignal(0x1000, memoryview(array("Q", [0, 0])), "dev signal", read=dev.read, write=dev.write, **kw)


def test_a_device_signal_reads_and_writes_through_the_device_not_its_shadow():
  dev = FakeDeviceMemory()
  sig = device_signal(dev)
  sig.value, sig.timestamp = 5, 7                    # stores go through at once
  assert struct.unpack_from("<QQ", dev.mem) == (5, 7)
  struct.pack_into("<Q", dev.mem, 0, 9)              # the device writes: the next read sees it
  assert sig.value == 9 and dev.reads[-1] == (0x1000, 8)


def test_a_device_signal_wait_polls_the_low_word_sleeping_poll_s_between_polls():
  dev = FakeDeviceMemory(script=[1, 2, 3, 4])
  clk = FakeClock()
  sig = device_signal(dev, poll_s=0.001, sleep=clk.sleep)
  assert sig.wait(4, 1.0, clk, clk.sleep) == 4
  assert sig.polls == 4 and set(dev.reads) == {(0x1000, 4)} and clk.t == pytest.approx(0.003)
  with pytest.raises(Timeout, match=r"dev signal at 0x1000 to reach 9 \(last seen 4\)"):
    sig.wait(9, 0.05, clk, clk.sleep)


def test_a_device_signal_wait_with_a_long_poll_pause_times_out_on_time():
  # AMD_USB_POLL_US far above the timeout: the last pause is cut to what is left of it, not taken whole
  clk = FakeClock()
  sig = device_signal(FakeDeviceMemory(), poll_s=1.0, sleep=clk.sleep)
  with pytest.raises(Timeout, match=r"dev signal at 0x1000 to reach 1 \(last seen 0\)"):
    sig.wait(1, 0.2, clk, clk.sleep)
  assert clk.t == pytest.approx(0.2)


def test_a_torn_read_of_a_device_signal_is_not_taken_for_done():
  # the device goes 0xff -> 0x100; a byte-by-byte read catches the new high byte with the old low one: 0x1ff
  dev = FakeDeviceMemory(script=[0xFF, 0x1FF, 0x100, 0x100, 0x100, 0x200, 0x200])
  clk = FakeClock()
  sig = device_signal(dev, poll_s=0.001, sleep=clk.sleep, torn=True)
  assert sig.wait(0x180, 1.0, clk, clk.sleep) == 0x200    # 0x1ff was read again (0x100): not done, so it waited on
  plain = device_signal(FakeDeviceMemory(script=[0xFF, 0x1FF, 0x100]))
  assert plain.wait(0x180, 1.0, clk, clk.sleep) == 0x1FF   # without torn=True the torn value would end the wait


def test_a_ring_whose_read_pointer_is_a_shadow_refreshes_it_only_while_waiting_for_space():
  eng = FakeEngine(16, 4)
  clk = FakeClock()
  shadow = array("Q", [0])
  refreshed = []
  def refresh():
    refreshed.append(eng.ptrs[1])
    shadow[0] = eng.ptrs[1]
  def sleep(dt):
    clk.sleep(dt)
    eng.consume()
  mv = memoryview(eng.ptrs)
  r = Ring("shadow ring", memoryview(eng.mem), mv[0:1], memoryview(shadow), eng.doorbell, 4, "split", lambda: None,
           clk, sleep, 1.0, refresh=refresh)
  r.submit(array("I", [1] * 12))
  eng.consume()
  assert refreshed == []                              # room by the shadow: no read of the device's pointer
  r.submit(array("I", [2] * 8))                       # the shadow says full: the device's pointer is read
  assert refreshed and refreshed[0] == 12 and eng.ptrs[0] == 20
