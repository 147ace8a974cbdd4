"""MOCKUSB+AMD's copies take the path measured cheaper (drivers/amd/am/usbcopypath.py, issue 33): USB transfers
counted by the mock bridge, not times."""
import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.amd.am.usbcopypath import PROBE, CheaperPath
from hcq.errors import DeviceError
from test_am_usb import fw_dir  # noqa: F401  (the pinned firmware package, a module fixture)

MIB16 = 16 << 20


def _copied(bridge, fn) -> int:
  """Transfers the mock bridge saw while fn() ran."""
  bridge.arm_faults("")
  fn()
  return bridge.transfer_number


def test_a_16_mib_copy_in_costs_at_most_twice_the_bar_paths_transfers(fw_dir):  # noqa: F811
  data = np.random.default_rng(16).integers(0, 256, MIB16, dtype=np.uint8).tobytes()
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=10, firmware_dir=fw_dir)) as dev:
    bridge, buf = dev.os.devices[0].bridge, dev.alloc(MIB16)
    assert dev.copy_path == "auto"
    dev.copy_path = "bar"
    bar_in = _copied(bridge, lambda: dev.copyin(buf, data))
    dev.copy_path = "sram"
    sram_in = _copied(bridge, lambda: dev.copyin(buf, data))
    dev.copy_path = "auto"
    first = _copied(bridge, lambda: dev.copyin(buf, data[::-1]))      # the measurement is this copy's first 512 KiB
    assert dev.copy_paths.choice["in"] == "bar"
    costs = dev.copy_paths.costs["in"]
    assert costs["bar"] < costs["sram"]
    # the measurement costs its two probes once; the rest is a BAR copy (+ 2: its wait for the probes' GPU work
    # reads the timeline signal, an XDATA read and the one that confirms it)
    assert first <= sum(costs.values()) + bar_in + 2 and sum(costs.values()) <= 2 * bar_in < sram_in, (first, costs, bar_in, sram_in)
    assert dev.copyout(buf) == data[::-1]                            # the probe's pieces and the rest, in place
    assert dev.copy_paths.choice["out"] == "bar"
    later = _copied(bridge, lambda: dev.copyin(buf, data))
    # measured once: later copies go straight through the BAR (+ 2: the wait for the copy-out's probe work)
    assert later <= min(bar_in + 2, 2 * bar_in), (later, bar_in)
    assert dev.copyout(buf, size=PROBE * 3 + 5, offset=7) == data[7:7 + PROBE * 3 + 5]


def test_an_unknown_copy_path_is_refused_naming_it(fw_dir):  # noqa: F811
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=10, firmware_dir=fw_dir)) as dev:
    buf = dev.alloc(64)
    dev.copy_path = "dma"
    with pytest.raises(DeviceError, match="copy_path 'dma'"): dev.copyin(buf, bytes(64))


class _Bus:
  """A transfer counter and the copies made, for CheaperPath on its own: each path costs `per` transfers per call."""

  def __init__(self, per):
    self.n, self.per, self.calls = 0, per, []

  def copy(self, path, off, n):
    self.calls.append((path, off, n))
    self.n += self.per[path]
    return f"{path}:{off}+{n}"


@pytest.mark.parametrize("per,cheaper", [({"sram": 9, "bar": 2}, "bar"), ({"sram": 3, "bar": 7}, "sram"),
                                         ({"sram": 4, "bar": 4}, "sram")])
def test_the_cheaper_path_is_the_one_measured_with_fewer_transfers(per, cheaper):
  bus = _Bus(per)
  paths = CheaperPath(lambda: bus.n)
  assert paths.run("in", 2 * PROBE - 1, bus.copy) == [f"sram:0+{2 * PROBE - 1}"]   # too small to measure: the first
  assert "in" not in paths.choice
  size = 5 * PROBE + 3
  out = paths.run("in", size, bus.copy)
  assert paths.costs["in"] == per and paths.choice["in"] == cheaper
  # the whole range once, in order: each path's probe, then the rest by the cheaper one
  assert bus.calls[1:] == [("sram", 0, PROBE), ("bar", PROBE, PROBE), (cheaper, 2 * PROBE, size - 2 * PROBE)]
  assert out == [f"sram:0+{PROBE}", f"bar:{PROBE}+{PROBE}", f"{cheaper}:{2 * PROBE}+{size - 2 * PROBE}"]
  bus.calls.clear()
  paths.run("in", 64, bus.copy)
  assert bus.calls == [(cheaper, 0, 64)]                 # measured: small copies take it too
  assert "out" not in paths.choice                       # each direction is measured on its own
