"""Signal waits over USB: AMD_USB_POLL_US microseconds between polls (counted by the mock bridge), bounded by the
timeout, which names the signal, the expected and the last value."""
import itertools

import pytest

from hcq.config import from_env
from hcq.errors import ConfigError, Timeout
from usb_fixtures import open_mock, start_timer

SIGNAL = 0x40


def _polls_for_a_20ms_signal(poll_us: int) -> tuple[int, int]:
  os, plug, dev = open_mock(amd_usb_poll_us=poll_us)
  try:
    start_timer(dev, SIGNAL, 7, delay_us=20_000)
    assert dev.wait_signal("a000", SIGNAL, 7) == 7
    return dev.stats["polls"], plug.fw.xdata_reads[0xA000 + SIGNAL]
  finally:
    dev.close()
    os.close()


def test_poll_interval_changes_the_number_of_polls_not_the_result():
  spin, spin_seen = _polls_for_a_20ms_signal(0)
  paced, paced_seen = _polls_for_a_20ms_signal(5000)
  assert (spin, paced) == (spin_seen, paced_seen)        # the driver's count is what the bridge saw
  assert 2 <= paced <= 6                                 # 20 ms / 5 ms, plus the first and the last
  assert spin > 5 * paced


def test_a_wait_times_out_naming_the_signal_the_expected_and_the_last_value():
  os, plug, dev = open_mock(amd_usb_poll_us=1000)
  try:
    dev.write_window("a000", SIGNAL, (3).to_bytes(4, "little"))
    with pytest.raises(Timeout, match=r"signal at a000 window \+0x40 \(GPU address 0x820040\) to reach 9 "
                                      r"\(last seen 3\) after 0.05 s") as e:
      dev.wait_signal("a000", SIGNAL, 9, timeout_s=0.05)
    assert (e.value.expected, e.value.last_seen) == (9, 3)
    assert 10 <= dev.stats["polls"] <= 60
  finally:
    dev.close()
    os.close()


def test_the_poll_interval_comes_from_AMD_USB_POLL_US():
  assert from_env({}).amd_usb_poll_us == 100
  assert from_env({"AMD_USB_POLL_US": "0"}).amd_usb_poll_us == 0
  with pytest.raises(ConfigError, match=r"AMD_USB_POLL_US='-1' is out of range"): from_env({"AMD_USB_POLL_US": "-1"})
  with pytest.raises(ConfigError, match=r"AMD_USB_POLL_US='fast' is not an integer"): from_env({"AMD_USB_POLL_US": "fast"})


def test_a_torn_read_of_a_window_signal_does_not_end_the_wait():
  """The controller reads XDATA byte by byte: a read during the GPU's store of 0x200 over 0x1ff can see 0x2ff (the old
  low byte, the new high one). That value must not release a wait for 0x201: it is read again first."""
  os, plug, dev = open_mock(amd_usb_poll_us=0)
  try:
    reads = itertools.chain([0x1FF, 0x2FF], itertools.repeat(0x200))
    real = dev.read_window
    dev.read_window = lambda w, off, n: next(reads).to_bytes(4, "little") if off == SIGNAL else real(w, off, n)
    with pytest.raises(Timeout, match=r"to reach 513 \(last seen 512\)"):
      dev.wait_signal("a000", SIGNAL, 0x201, timeout_s=0.02)
    reads = iter([0x2FF, 0x200, 0x201, 0x201])
    assert dev.wait_signal("a000", SIGNAL, 0x201) == 0x201
  finally:
    dev.close()
    os.close()
