"""Injected transport faults (mock bridge, config.parse_usb_faults): each gives a bounded retry that ends with the
right data, or a clear error naming the request and the address; never a hang, never wrong data."""
import os as _os

import pytest

from hcq.config import Config, parse_usb_faults
from hcq.drivers.system import asm24
from hcq.drivers.system.usb import USBGone, USBStall
from hcq.drivers.amd.am.usbstaging import SRAMStaging
from hcq.errors import ConfigError, DeviceError, Timeout
from usb_fixtures import endpoint_gpu_copy, open_mock


@pytest.fixture
def mock():
  os, plug, dev = open_mock()
  yield os, plug, dev
  dev.close()
  os.close()


def test_a_stalled_request_is_retried_and_done_once(mock):
  os, plug, dev = mock
  plug.arm_faults("stall=1")
  dev.map_bar(5).write32(0x200, 0xABCD)
  assert plug.fw.endpoint.regs.regs[0x200] == 0xABCD and dev.bridge.retries["stall"] == 1


def test_a_stall_that_persists_is_an_error_after_bounded_retries(mock):
  os, plug, dev = mock
  plug.arm_faults("stall=1-50")
  with pytest.raises(USBStall, match=r"control request 0xf0 .* failed: the device stalled it"):
    dev.map_bar(5).write32(0x200, 1)
  assert plug.transfer_number == asm24.STALL_RETRIES + 1


def test_a_stalled_bulk_transfer_clears_the_halt_and_goes_on(mock):
  os, plug, dev = mock
  data = _os.urandom(4096 + 12)
  plug.arm_faults("stall=2")          # transfer 1 arms the stream, 2 is its bulk OUT
  dev.map_bar(0).write(16, data)
  assert plug.fw.endpoint.vram.read_block(16, len(data)) == data and dev.bridge.retries["stall"] == 1



def test_an_unplug_while_clearing_a_stall_leaves_the_bridge_gone(mock):
  os, plug, dev = mock
  plug.arm_faults("stall=2,unplug=3")  # transfer 1 arms the stream, 2 is its bulk OUT, 3 the clear halt after it
  with pytest.raises(USBGone, match="clear halt of endpoint 0x02"): dev.map_bar(0).write(16, bytes(64))
  assert dev.bridge.gone and plug.transfer_number == 3
  with pytest.raises(USBGone, match="the bridge is gone .*reopen it"): dev.vendor
  assert plug.transfer_number == 3       # nothing more was tried on the bus

def test_a_timed_out_read_is_retried(mock):
  os, plug, dev = mock
  dev.map_bar(5).write32(0x10, 0x5555)
  plug.arm_faults("timeout=1+4")      # the read request, then (after its retry and the completion) nothing else
  assert dev.map_bar(5).read32(0x10) == 0x5555 and dev.bridge.retries["timeout"] == 1
  plug.arm_faults("timeout=2")        # the completion read
  assert dev.map_bar(5).read32(0x10) == 0x5555


def test_a_timed_out_write_is_not_repeated_but_reported(mock):
  os, plug, dev = mock
  plug.arm_faults("timeout=1")
  with pytest.raises(Timeout, match=rf"control request 0xf0 .*value 0x\w+60.* after {os.config.timeout_s:g} s"):
    dev.map_bar(5).write32(0x20, 7)
  assert 0x20 not in plug.fw.endpoint.regs.regs and dev.bridge.retries["timeout"] == 0


def test_a_timed_out_stream_read_is_an_error_not_stale_data(mock):
  os, plug, dev = mock
  plug.arm_faults("timeout=2")
  with pytest.raises(Timeout, match="bulk read of 64 bytes from endpoint 0x81"): dev.map_bar(0).read(0, 64)
  dev.map_bar(0).write(0, b"z" * 64)
  assert dev.map_bar(0).read(0, 64) == b"z" * 64      # the next request is served normally


def test_transport_errors_are_retried_then_reported(mock):
  os, plug, dev = mock
  dev.map_bar(5).write32(0x30, 0x77)
  plug.arm_faults("transport=1-3")
  assert dev.map_bar(5).read32(0x30) == 0x77 and dev.bridge.retries["transport"] == 3
  plug.arm_faults("transport=1-100")
  with pytest.raises(DeviceError, match=r"MRd64 at 0x\w+030: transport error 0x1 11 times in a row"):
    dev.map_bar(5).read32(0x30)


@pytest.mark.parametrize("kind,name", [("ur", "unsupported request"), ("ca", "completer abort")])
def test_completion_errors_name_the_request_and_address(mock, kind, name):
  os, plug, dev = mock
  base = dev.bar(5).start
  plug.arm_faults(f"{kind}=1")
  with pytest.raises(asm24.CompletionError, match=rf"MRd64 at {base + 0x44:#x}: {name}") as e:
    dev.map_bar(5).read32(0x44)
  assert e.value.address == base + 0x44
  plug.arm_faults(f"{kind}=1")
  with pytest.raises(asm24.CompletionError, match=rf"CfgRd1 04:00.0 register 0x008: {name}"): dev.config_read(8, 1)
  plug.arm_faults(f"{kind}=1")
  with pytest.raises(asm24.CompletionError, match=rf"MRd64 at {dev.bar(0).start + 0x100:#x}: {name}"):
    dev.map_bar(0).read(0x100, 4096)


def test_config_retry_status_is_retried_until_the_function_is_ready(mock):
  os, plug, dev = mock
  plug.arm_faults("crs=1-4")
  assert dev.vendor == 0x1002 and dev.bridge.retries["crs"] == 4
  plug.arm_faults("crs=1-100000")
  dev.timeout_s = 0.05
  with pytest.raises(asm24.CompletionError, match="CfgRd1 04:00.0 register 0x000: configuration request retry status"):
    dev.config_read(0, 2)


@pytest.mark.parametrize("direction", ["in", "out"])
def test_unplug_in_the_middle_of_a_copy_says_how_far_it_got_and_later_calls_fail(mock, direction):
  os, plug, dev = mock
  staging = SRAMStaging(dev, endpoint_gpu_copy(dev), chunk=64 << 10)
  data = _os.urandom(1 << 20)
  if direction == "out": staging.copyin(dev.bar(0).start, data)
  plug.arm_faults("unplug=60")
  with pytest.raises(USBGone, match=rf"copy-{direction} of 1048576 bytes (to|from) {dev.bar(0).start:#x} failed "
                                    rf"after \d+ bytes: .*the device is gone"):
    if direction == "in": staging.copyin(dev.bar(0).start, data)
    else: staging.copyout(dev.bar(0).start, len(data))
  with pytest.raises(USBGone, match="the bridge is gone"): dev.vendor


def test_faults_from_the_config_apply_from_the_open():
  os, plug, dev = open_mock(faults=None, usb_mock_faults="stall=1+5,transport=2")
  try: assert dev.vendor == 0x1002 and dev.bridge.retries["stall"] == 2 and dev.bridge.retries["transport"] == 1
  finally:
    dev.close()
    os.close()


@pytest.mark.parametrize("spec,message", [("stall", "is not key=value"), ("jam=1", "unknown fault 'jam'"),
                                          ("ur=0", "is not numbers from 1"), ("ca=5-2", "is not numbers from 1"),
                                          ("ur=1,ur=2", "ur is given twice")])
def test_fault_specs_are_checked(spec, message):
  with pytest.raises(ValueError, match=message): parse_usb_faults(spec)
  with pytest.raises(ConfigError, match=rf"Config.usb_mock_faults: .*{message}"): Config(usb_mock_faults=spec)


@pytest.mark.parametrize("fault", ["late=1", "timeout=1"])      # the request arrived / did not, the host timed out
@pytest.mark.parametrize("direction", ["read", "write"])
def test_a_streaming_request_that_arrived_but_timed_out_never_moves_wrong_data(mock, direction, fault):
  """The request reaches the firmware (its burst is queued) but the host sees a timeout: asking again would queue a
  second burst whose data (or expectation) answers the next bulk transfer, that of another request."""
  os, plug, dev = mock
  bar = dev.map_bar(0)
  a, b = _os.urandom(64), _os.urandom(64)
  bar.write(0, a)
  bar.write(4096, b)
  plug.arm_faults(fault)               # transfer 1: the streaming request at offset 0
  try: got = bar.read(0, 64) if direction == "read" else bar.write(0, a[::-1])
  except Timeout: got = None
  if direction == "read": assert got in (a, None)
  assert bar.read(4096, 64) == b        # not the leftover of a second read burst
  c = _os.urandom(64)
  bar.write(8192, c)                     # not into the leftover of a second write burst
  assert bar.read(8192, 64) == c and bar.read(4096, 64) == b
  assert bar.read(0, 64) == (a if direction == "read" else a[::-1]) or direction == "write" and got is None
  assert not plug.fw.queued


@pytest.mark.parametrize("direction", ["read", "write"])
def test_an_sram_arm_that_arrived_but_timed_out_never_moves_wrong_data(mock, direction):
  os, plug, dev = mock
  br = dev.bridge
  a, b = _os.urandom(512), _os.urandom(512)
  br.sram_write(0, a)
  br.sram_write(1, b)
  plug.arm_faults("late=1")            # transfer 1: the 0xF2 arm of slot 0
  try: got = br.sram_read(0, 512) if direction == "read" else br.sram_write(0, a[::-1])
  except Timeout: got = None
  if direction == "read": assert got in (a, None)
  assert br.sram_read(1, 512) == b       # not the leftover of a second armed read
  c = _os.urandom(512)
  br.sram_write(2, c)                    # not into a second armed write of slot 0
  assert br.sram_read(2, 512) == c and br.sram_read(0, 512) in (a, a[::-1]) and not plug.fw.queued


@pytest.mark.parametrize("timeout_s,want_ms", [(0.25, 250), (30, 30000), (1e-6, 1), (1e9, 0xFFFFFFFF)])
def test_usb_transfers_take_the_device_timeout(timeout_s, want_ms):
  """issue 29 item 15: every transfer was given a fixed 1000 ms whatever HCQ_TIMEOUT said. Each now gets the device
  timeout, in libusb's unsigned milliseconds (never 0, which libusb reads as no timeout at all)."""
  os, plug, dev = open_mock(timeout_s=timeout_s)
  try:
    assert dev.bridge.timeout_ms == want_ms and dev.vendor == 0x1002
    assert plug.timeouts_ms and set(plug.timeouts_ms) == {want_ms}
  finally:
    dev.close()
    os.close()


def test_a_transfer_timeout_names_the_device_timeout():
  os, plug, dev = open_mock(timeout_s=0.25)
  try:
    plug.arm_faults("timeout=1-100")
    with pytest.raises(Timeout, match=r"after 0\.25 s"): dev.vendor
  finally:
    dev.close()
    os.close()
