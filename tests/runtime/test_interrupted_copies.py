"""issue 29 item 2: one Ctrl-C inside a copy lost the device: on MOCK+AMD the interrupt landed inside the mock's
queue (which stopped it: a false "GPU hardware exception" at every later copy), or between a submission's timeline
value and its doorbell (work the timeline counted on that no engine ever saw: every later wait timed out, as on
MOCKPCI+AMD). Now a submission holds Ctrl-C back until its doorbell rang (drivers/system/interrupts.py), a device
model's step and a doorbell store run whole (hardware is not interrupted), and an interrupted copy leaves the device
usable and every other buffer readable.

The interrupt is a real SIGINT, raised at the k-th Python line a copy executes (anywhere: the runtime, the vendor
driver, the OS interface, the device model), for k across the whole copy."""
import signal
import sys

import numpy as np
import pytest

import hcq
from hcq.config import Config, from_env
from hcq.drivers.system.interrupts import HeldInterrupt

SIZE = 5 << 20       # three staging chunks: submissions, waits and staging reuse all happen inside one copy


class _SigintAtLine:
  def __init__(self, k: int): self.k, self.n, self.fired = k, 0, False

  def local(self, frame, event, arg):
    if event == "line" and not self.fired:
      self.n += 1
      if self.n == self.k:
        self.fired = True
        signal.raise_signal(signal.SIGINT)
    return self.local

  def start(self, frame, event, arg): return self.local


def _config(spec):
  cfg = from_env().replace(timeout_s=3)
  if spec.startswith("MOCKPCI"):
    from hcq.autogen import fwpackage, sources
    try: cfg = cfg.replace(firmware_dir=fwpackage.firmware_dir(cfg.autogen_cache, log=lambda *a: None))
    except sources.SourceError as e: pytest.skip(f"no AMD firmware package: {e}")
  return cfg


def _sweep(spec: str, op: str, stride: int) -> int:
  """Interrupt the copy at lines 1, 1+stride, ... until one ends before its interrupt; after each, the other buffer
  reads back whole and the victim buffer takes a full copy in and out. Returns how many copies were interrupted."""
  with hcq.open(spec, config=_config(spec)) as dev:
    keep_data = np.arange(SIZE // 4, dtype=np.uint32).tobytes()
    keep, victim = dev.alloc(SIZE), dev.alloc(SIZE)
    dev.copyin(keep, keep_data)
    fresh = np.full(SIZE // 4, 7, np.uint32).tobytes()
    interrupted = 0
    for k in range(1, 10 ** 6, stride):
      inject = _SigintAtLine(k)
      sys.settrace(inject.start)
      try:
        if op == "copyin": dev.copyin(victim, fresh)
        else: dev.copyout(victim)
      except KeyboardInterrupt: interrupted += 1
      finally: sys.settrace(None)
      if not inject.fired: return interrupted
      assert dev.copyout(keep) == keep_data, f"{spec}: after a Ctrl-C at line {k} of a {op}, another buffer reads wrong"
      dev.copyin(victim, fresh)
      assert dev.copyout(victim) == fresh, f"{spec}: after a Ctrl-C at line {k} of a {op}, a new copy is wrong"
    return interrupted


@pytest.mark.parametrize("op", ["copyin", "copyout"])
@pytest.mark.parametrize("spec", ["MOCK+AMD", "MOCKPCI+AMD"])
def test_a_ctrl_c_anywhere_in_a_copy_leaves_the_device_usable(spec, op):
  assert _sweep(spec, op, stride=97) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("op", ["copyin", "copyout"])
@pytest.mark.parametrize("spec", ["MOCK+AMD", "MOCKPCI+AMD", "MOCK+QCOM"])   # MOCK+NV: a GPFIFO entry cut short after some, open
def test_a_ctrl_c_at_every_line_of_a_copy_leaves_the_device_usable(spec, op):
  assert _sweep(spec, op, stride=1) >= 1


@pytest.fixture
def sigint_handler():
  """The SIGINT handler before the test, put back after it (the tests below install their own spans' handlers)."""
  before = signal.getsignal(signal.SIGINT)
  yield before
  signal.signal(signal.SIGINT, before)


def test_a_held_interrupt_is_raised_when_the_outermost_span_ends(sigint_handler):
  h = HeldInterrupt()
  h.hold()
  h.hold()
  signal.raise_signal(signal.SIGINT)      # recorded, not raised
  h.release()
  with pytest.raises(KeyboardInterrupt): h.release()
  assert h.depth == 0 and h.pending is None
  with h: pass                            # nothing recorded: nothing raised
  with pytest.raises(KeyboardInterrupt): signal.raise_signal(signal.SIGINT)   # outside a span: at once


def test_holding_costs_no_system_call_after_the_first(sigint_handler, monkeypatch):
  """issue 33 P1: every launch holds Ctrl-C over its submission and its doorbell; the deferring handler is installed
  once (one sigaction) and left in place, later spans only count their depth."""
  import _signal
  from hcq.drivers.system import interrupts
  sets = []
  real = _signal.signal
  monkeypatch.setattr(interrupts._signal, "signal", lambda *a: sets.append(a) or real(*a))
  h = HeldInterrupt()
  for _ in range(5):
    with h:
      with h: pass
  assert len(sets) == 1 and signal.getsignal(signal.SIGINT) is h.installed
  assert h.installed.old is sigint_handler      # in front of the handler that was in place


def test_restore_puts_back_the_wrapped_handler_and_leaves_a_later_one(sigint_handler):
  h = HeldInterrupt()
  with h: pass
  assert signal.getsignal(signal.SIGINT) is h.installed
  h.restore()
  assert signal.getsignal(signal.SIGINT) is sigint_handler and h.installed is None
  with h: pass                                  # installed again by the next span
  assert signal.getsignal(signal.SIGINT) is h.installed
  def mine(signum, frame): pass
  signal.signal(signal.SIGINT, mine)            # the application's own, set since: restore leaves it
  h.restore()
  assert signal.getsignal(signal.SIGINT) is mine


def test_closing_a_device_leaves_sigint_as_the_application_had_it(sigint_handler):
  """Launches leave the deferring handler installed (no system call per launch); a device's close puts back the
  handler the application had (asyncio.run, for one, looks for the default handler)."""
  from hcq.drivers.system.interrupts import held
  with hcq.open("MOCK+AMD") as d:
    buf = d.alloc(64)
    d.copyin(buf, bytes(range(64)))            # a submission: held spans
    assert d.copyout(buf) == bytes(range(64))
    assert signal.getsignal(signal.SIGINT) is held.installed and held.installed.old is sigint_handler
  assert signal.getsignal(signal.SIGINT) is sigint_handler


def test_a_handler_set_later_is_wrapped_and_one_put_back_is_used(sigint_handler):
  """A handler set after the first span (an application's own) runs for a Ctrl-C outside a span and is deferred
  inside one; putting back a handler saved earlier (ours) brings back what it wrapped, not the later one."""
  h = HeldInterrupt()
  with h: pass
  saved = signal.getsignal(signal.SIGINT)
  seen = []
  signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
  signal.raise_signal(signal.SIGINT)
  assert seen == [signal.SIGINT]
  h.hold()
  signal.raise_signal(signal.SIGINT)
  assert seen == [signal.SIGINT], "a Ctrl-C inside a span reached the application's handler before the span ended"
  h.release()
  assert seen == [signal.SIGINT, signal.SIGINT]
  signal.signal(signal.SIGINT, saved)
  with h: pass
  with pytest.raises(KeyboardInterrupt): signal.raise_signal(signal.SIGINT)
  assert seen == [signal.SIGINT, signal.SIGINT]


def test_an_interruptible_span_raises_at_once_and_holds_again_after(sigint_handler):
  h = HeldInterrupt()
  h.hold()
  signal.raise_signal(signal.SIGINT)      # recorded
  with pytest.raises(KeyboardInterrupt):
    with h.interruptible(): pass          # the recorded one is raised on entry
  assert h.depth == 1
  with h.interruptible():
    with pytest.raises(KeyboardInterrupt): signal.raise_signal(signal.SIGINT)   # at once inside
  signal.raise_signal(signal.SIGINT)      # held again after it
  with pytest.raises(KeyboardInterrupt): h.release()
  assert h.depth == 0


def test_an_ignored_sigint_is_left_alone(sigint_handler):
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  h = HeldInterrupt()
  with h: signal.raise_signal(signal.SIGINT)
  assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and h.pending is None
