"""Several USB requests in flight (issue 33: "several bulk requests in flight, armed and drained asynchronously"):
the OS interface's asynchronous API (drivers/system/usbasync.py) on the mock bridge's engine (mockgpu/usb/
asyncengine.py), the synchronous fallback, libusb's engine against a stand-in for the library, and the copies that
use it (usbpipeline.py: streaming BAR writes, the SRAM copy-in). Counts are the mock bridge's and the driver's
tallies, never times."""
import ctypes
import struct

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.system import asm24, libusbasync, usbasync
from hcq.drivers.system.usb import USBStall
from hcq.errors import DeviceError, Timeout
from test_am_usb import fw_dir  # noqa: F401  (the pinned firmware package, a module fixture)
from usb_fixtures import open_mock

MIB = 1 << 20


@pytest.fixture
def mock():
  os, plug, dev = open_mock()
  yield os, plug, dev
  dev.close()
  os.close()


def _data(n: int, seed: int) -> np.ndarray:
  return np.random.default_rng(seed).integers(0, 2**32, n // 4, dtype=np.uint32)


def _tlp(address: int, dwords: int) -> bytes: return struct.pack("<III", address & 0xFFFFFFFF, address >> 32, dwords)


# ---- the queue on the mock bridge's engine
def test_the_mock_bridge_hands_out_its_asynchronous_engine(mock):
  os, plug, dev = mock
  plug.arm_faults("")                                              # the mock bridge counts transfers from here
  q = dev.bridge.transfers_queue()
  assert q.mode.startswith("mock ASM24 bridge: asynchronous transfers, at most 4 bulk requests in flight")
  assert q is dev.bridge.usb.async_transfers()                  # one queue per device


def test_requests_complete_in_submission_order_and_one_wait_moves_all_in_flight(mock):
  os, plug, dev = mock
  plug.arm_faults("")                                              # the mock bridge counts transfers from here
  q = dev.bridge.transfers_queue()
  xd = 0xA000 + 0x40                                              # a byte of the a000 window
  reqs = [q.control(asm24.VENDOR_OUT, asm24.REQ_XDATA_WRITE, xd, 0x5A, None, 1000),
          q.control(asm24.VENDOR_IN, asm24.REQ_XDATA_READ, xd, 0, 1, 1000),
          q.control(asm24.VENDOR_OUT, asm24.REQ_XDATA_WRITE, xd, 0xA5, None, 1000),
          q.control(asm24.VENDOR_IN, asm24.REQ_XDATA_READ, xd, 0, 1, 1000)]
  assert plug.transfer_number == 0 and q.in_flight == 4           # nothing moved before the host waits
  assert [q.reap() for _ in range(4)] == reqs                     # in order
  assert (reqs[1].data, reqs[3].data) == (b"\x5a", b"\xa5")       # each read saw the write before it, not after
  assert q.round_trips == 1 and q.max_in_flight == 4 and plug.transfer_number == 4


def test_a_bulk_transfer_waits_for_the_request_that_announces_it(mock):
  """Submitted before its announce: NAKed, it stays in flight while the announce on endpoint 0 goes through."""
  os, plug, dev = mock
  q, vram = dev.bridge.transfers_queue(), dev.bar(0).start
  data = _data(4096, 1)
  bulk = q.bulk_write(asm24.EP_OUT, data.tobytes(), 1000)
  q.control(asm24.VENDOR_OUT, asm24.REQ_TLP, asm24.pcie.MWR64 | 0xF << 8, asm24.MODE_STREAM_WRITE, _tlp(vram, 1024), 1000)
  assert q.reap() is bulk and bulk.status == usbasync.COMPLETED
  q.drain()
  assert np.array_equal(np.frombuffer(dev.map_bar(0).read(0, 4096), np.uint32), data)


def test_a_timeout_names_the_endpoint_and_the_request_and_cancels_the_rest(mock):
  os, plug, dev = mock
  plug.arm_faults("")                                              # the mock bridge counts transfers from here
  q = dev.bridge.transfers_queue()
  q.bulk_read(asm24.EP_IN, 512, 50)                     # nothing announced: the bridge NAKs it until its timeout
  q.control(asm24.VENDOR_IN, asm24.REQ_XDATA_READ, 0xB450, 0, 1, 1000)
  with pytest.raises(Timeout, match=r"request #1: bulk IN of 512 bytes from endpoint 0x81 on .*NAKed.*"
                                    r"1 request after it: #2 control request 0xe4 .*\((completed before the cancel|cancelled)\)") as e:
    q.reap()
  assert e.value.timeout_s == 0.05 and q.in_flight == 0


def test_more_bulk_requests_than_the_bridge_holds_are_refused_by_name(mock):
  os, plug, dev = mock
  plug.arm_faults("")                                              # the mock bridge counts transfers from here
  q = dev.bridge.transfers_queue()
  depth = plug.fw.queue_depth
  for _ in range(depth): q.bulk_write(asm24.EP_OUT, bytes(512), 50)
  with pytest.raises(DeviceError, match=rf"request #{depth + 1}: bulk OUT of 512 bytes to endpoint 0x02 could not be "
                                        rf"submitted .*already has {depth} bulk requests in flight, the bridge's queue "
                                        rf"depth is {depth}.*{depth} requests after it: #1 .*\(cancelled\)"):
    q.bulk_write(asm24.EP_OUT, bytes(512), 50)
  assert q.in_flight == 0 and plug.transfer_number == 0           # the refused one and the cancelled ones never moved


def test_the_firmware_refuses_an_announce_beyond_its_queue_depth(mock):
  os, plug, dev = mock
  for slot in range(plug.fw.queue_depth):                         # announced, none moved
    dev.bridge.usb.control(asm24.VENDOR_OUT, asm24.REQ_SRAM_DMA, 1, slot | 1 << 8, None, 1000)
  with pytest.raises(USBStall, match=r"request 0xf2 refused: 4 bursts announced and not yet moved"):
    dev.bridge.usb.control(asm24.VENDOR_OUT, asm24.REQ_SRAM_DMA, 1, 5 | 1 << 8, None, 1000)


# ---- pipelined bursts: counts and data
@pytest.mark.parametrize("k", [1, 2, 4])
def test_a_16_mib_bar_write_with_k_bulk_requests_in_flight(mock, k):
  """Transfers stay 8 (4 requests of 4 MiB, each announce + bulk); the host's waits fall by about K."""
  os, plug, dev = mock
  br, vram = dev.bridge, dev.map_bar(0)
  br.in_flight = k
  data = _data(16 * MIB, k)
  plug.arm_faults("")
  trips = br.round_trips
  vram.write(0, data.tobytes())
  assert plug.transfer_number == 8
  assert br.round_trips - trips == {1: 8, 2: 2, 4: 1}[k]
  assert br.bulk_max_in_flight == (0 if k == 1 else k)            # K == 1: the synchronous path
  assert np.array_equal(np.frombuffer(vram.read(0, 16 * MIB), np.uint32), data)


def test_an_error_mid_stream_cancels_the_rest_names_the_request_and_loses_nothing(mock):
  """The second burst's bulk OUT stalls (transfer 4: announce 1, bulk 1, announce 2, bulk 2): its endpoint halts, the
  bulk transfers behind it are cancelled, the error names it and the fate of each request after it; the bursts that
  were announced are then moved (the halt cleared first), so that the data lands and the next request is answered
  by its own burst."""
  os, plug, dev = mock
  br, vram = dev.bridge, dev.map_bar(0)
  br.in_flight = 4
  data = _data(16 * MIB, 7)
  plug.arm_faults("stall=4")
  with pytest.raises(USBStall, match=r"request #\d+: bulk OUT of 4194304 bytes to endpoint 0x02 stall .*; 4 requests "
                                     r"after it: #\d+ control request 0xf0 .*\(completed before the cancel\), #\d+ bulk "
                                     r"OUT .*\(cancelled\), .*; moved afterwards .*the bursts of requests") as e:
    vram.write(0, data.tobytes())
  assert str(e.value).count("(cancelled)") == 2 and not plug.fw.queued and not plug.halted
  assert np.array_equal(np.frombuffer(vram.read(0, 16 * MIB), np.uint32), data)      # nothing lost
  more = _data(8 * MIB, 8)
  vram.write(4 * MIB, more.tobytes())                                                 # the bridge goes on
  assert np.array_equal(np.frombuffer(vram.read(4 * MIB, 8 * MIB), np.uint32), more)


def test_the_sram_copy_in_with_bulk_requests_in_flight_waits_less_for_the_same_transfers(fw_dir):  # noqa: F811
  data = _data(2 * MIB, 3)
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=10, firmware_dir=fw_dir)) as d:
    d.copy_path = "sram"
    br, buf = d.session.usb.bridge, d.alloc(2 * MIB)
    seen = {}
    for k in (1, 2):
      br.in_flight, br.bulk_max_in_flight = k, 0
      n, trips = br.transfers, br.round_trips
      d.copyin(buf, data.tobytes())
      seen[k] = (br.transfers - n, br.round_trips - trips, br.bulk_max_in_flight)
      assert np.array_equal(np.frombuffer(d.copyout(buf), np.uint32), data)
    (n1, t1, m1), (n2, t2, m2) = seen[1], seen[2]
    assert t1 == n1 and m1 == 0 and m2 == 2                     # synchronous: one wait per transfer
    assert n2 <= n1 * 1.1 and t2 * 2 < t1, seen                 # ~ the same transfers, far fewer waits


# ---- the synchronous fallback
class _PlainTransport:
  """A transport without an asynchronous API: the mock bridge's synchronous calls only."""
  def __init__(self, usb): self.inner, self.name = usb, "plain transport"
  def control(self, *a): return self.inner.control(*a)
  def bulk_write(self, *a): return self.inner.bulk_write(*a)
  def bulk_read(self, *a): return self.inner.bulk_read(*a)


def test_without_an_asynchronous_api_requests_go_one_at_a_time_and_an_error_stops_the_rest(mock):
  os, plug, dev = mock
  plug.arm_faults("")                                              # the mock bridge counts transfers from here
  q = usbasync.async_transfers(_PlainTransport(dev.bridge.usb))
  assert q.mode.startswith("synchronous pipeline, one transfer at a time (_PlainTransport has no asynchronous API")
  q.control(asm24.VENDOR_IN, asm24.REQ_XDATA_READ, 0xB450, 0, 1, 1000)
  q.bulk_read(asm24.EP_IN, 512, 20)                                # nothing announced: times out
  q.control(asm24.VENDOR_IN, asm24.REQ_XDATA_READ, 0xB450, 0, 1, 1000)
  assert plug.transfer_number == 2                                 # the third was not carried out
  assert q.reap().data == bytes([asm24.LTSSM_L0])
  with pytest.raises(Timeout, match=r"request #2: bulk IN of 512 bytes from endpoint 0x81 on plain transport .*"
                                    r"#3 control request 0xe4 .*\(cancelled\)"):
    q.reap()
  assert q.round_trips == 2


# ---- libusb's engine, against a stand-in for the library (no libusb and no device here)
class _FakeLibusb:
  """libusb_* calls as libusb.h declares them, on Transfer structures: a submitted transfer completes in the next
  handle_events with `status` and, for IN transfers, bytes 0x11.. after the setup."""
  def __init__(self):
    self.out, self.submitted, self.cancelled, self.freed = [], [], [], 0
  def libusb_alloc_transfer(self, iso): return ctypes.pointer(libusbasync.Transfer())
  def libusb_free_transfer(self, t): self.freed += 1
  def libusb_submit_transfer(self, t):
    tr = t.contents
    self.out.append(bytes(tr.buffer[:tr.length]))
    self.submitted.append(t)
    return 0
  def libusb_cancel_transfer(self, t):
    self.cancelled.append(t)
    return 0
  def libusb_error_name(self, rc): return b"LIBUSB_ERROR_X"
  def libusb_handle_events_timeout_completed(self, ctx, tv, completed):
    for t in self.submitted:
      tr = t.contents
      setup = libusbasync.CONTROL_SETUP_SIZE if tr.type == libusbasync.TRANSFER_TYPE_CONTROL else 0
      tr.status = 3 if t in self.cancelled else 0
      tr.actual_length = tr.length - setup
      if (tr.endpoint | (tr.buffer[0] if setup else 0)) & 0x80:
        for i in range(setup, tr.length): tr.buffer[i] = 0x11 + i - setup
      tr.callback(t)
    self.submitted = []
    return 0


def test_the_libusb_engine_fills_transfers_as_libusb_h_lays_them_out_and_reads_completions():
  lib = _FakeLibusb()
  q = usbasync.AsyncTransfers(libusbasync.LibusbEngine(lib, ctypes.c_void_p(1), ctypes.c_void_p(2), "dev"), "dev")
  assert q.mode == "libusb-1.0 asynchronous transfers"
  c = q.control(0xC0, 0xE4, 0xB450, 0, 3, 500)
  w = q.bulk_write(0x02, b"abcd", 500)
  r = q.bulk_read(0x81, 4, 500)
  assert lib.out[0] == struct.pack("<BBHHH", 0xC0, 0xE4, 0xB450, 0, 3) + bytes(3)     # setup packet, then the data stage
  assert lib.out[1] == b"abcd"
  assert [q.reap() for _ in range(3)] == [c, w, r] and q.round_trips == 1
  assert (c.data, w.actual, r.data) == (b"\x11\x12\x13", 4, b"\x11\x12\x13\x14") and lib.freed == 3
  assert ctypes.sizeof(libusbasync.Transfer) == 64 and libusbasync.Transfer.buffer.offset == 48   # x86-64 layout


def test_the_libusb_engine_names_a_cancelled_request():
  lib = _FakeLibusb()
  q = usbasync.AsyncTransfers(libusbasync.LibusbEngine(lib, ctypes.c_void_p(1), ctypes.c_void_p(2), "dev"), "dev")
  q.bulk_write(0x02, b"abcd", 500)
  lib.cancelled.append(lib.submitted[0])            # cancelled underneath (as on a device reset)
  with pytest.raises(DeviceError, match=r"dev: request #1: bulk OUT of 4 bytes to endpoint 0x02 cancelled"):
    q.reap()


def test_a_bulk_transfer_that_times_out_mid_stream_names_its_endpoint_and_the_bridge_goes_on(mock):
  """The first burst's bulk OUT never completes (transfer 2; the firmware drops its burst, backend.py): hcq.Timeout
  names the request and endpoint 0x02 and the fate of the requests after it (the second burst, in flight with it,
  completed); no third burst is started, and the bridge goes on."""
  os, plug, dev = mock
  br, vram = dev.bridge, dev.map_bar(0)
  br.in_flight = 2
  data = _data(16 * MIB, 9)
  plug.arm_faults("timeout=2")
  with pytest.raises(Timeout, match=r"request #\d+: bulk OUT of 4194304 bytes to endpoint 0x02 on USB device add1:0001 "
                                    r".*2 requests after it: #\d+ control request 0xf0 .*\(completed before the cancel\), "
                                    r"#\d+ bulk OUT of 4194304 bytes to endpoint 0x02 \(completed before the cancel\)") as e:
    vram.write(0, data.tobytes())
  # 4 transfers, + 1: the lost burst tried once more after the error (NAKed: nothing queued for it, nothing moved)
  assert e.value.timeout_s == br.timeout_ms / 1000 and not plug.fw.queued and plug.transfer_number == 5
  got = np.frombuffer(vram.read(0, 16 * MIB), np.uint32)
  assert np.array_equal(got[MIB:2 * MIB], data[MIB:2 * MIB]) and not got[2 * MIB:].any()   # the second burst only
  vram.write(0, data.tobytes())
  assert np.array_equal(np.frombuffer(vram.read(0, 16 * MIB), np.uint32), data)


def test_a_pyusb_backend_without_an_asynchronous_engine_gets_the_synchronous_pipeline_saying_so():
  """pyusb on a backend with neither libusb-1.0 nor an engine of its own: PyUSBTransport.async_transfers says it
  goes one transfer at a time, and the pipelined copy still lands (round trips = transfers: nothing in flight)."""
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.usb import ASM24Backend, mock_usb_bridge
  from hcq.drivers.system.usbpci import USBPCIDevice

  class NoAsync(ASM24Backend):
    async_engine = None

  os = MockOS(Config())
  plug = mock_usb_bridge(os)
  os.set_usb_backend(NoAsync(os.usb_backend.devices))
  dev = USBPCIDevice.open(os)
  try:
    assert dev.bridge.transfers_queue().mode == ("synchronous pipeline, one transfer at a time (pyusb backend "
                                                 "test_usb_async offers no asynchronous transfers)")
    data = _data(8 * MIB, 11)
    plug.arm_faults("")
    trips = dev.bridge.round_trips
    dev.map_bar(0).write(0, data.tobytes())
    assert plug.transfer_number == 4 and dev.bridge.round_trips - trips == 4
    assert np.array_equal(np.frombuffer(dev.map_bar(0).read(0, 8 * MIB), np.uint32), data)
  finally:
    dev.close()
    os.close()
