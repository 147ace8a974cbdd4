"""Ctrl-C held back over a span that must not stop halfway (a submission: its words, the write pointer, the doorbell;
a device model's step of its hardware).

SIGINT becomes KeyboardInterrupt at whatever line of Python the main thread is at. A submission stopped between its
timeline value and its doorbell leaves work the timeline counts on but no engine ever sees: every later wait times
out and the data in other buffers is out of reach. So such a span is entered with hold() and left with release():
meanwhile the Python handler of SIGINT is one that only records the signal, and release() of the outermost span puts
the old handler back and calls it with the signal (the default one raises KeyboardInterrupt there, after the span).
An interrupt that lands before hold() took effect finds nothing begun; one after release() finds it all done.

Only the main thread gets signals in Python (and only it may change a handler): in other threads these do nothing.
A handler that is not a Python callable (SIG_IGN, SIG_DFL, or one set from C) is left as it is."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from _thread import get_ident

import _signal      # signal's own C module: signal.getsignal/signal wrap handlers in an enum, whose lookups a SIGINT
                   # landing inside them turns into a KeyError; these calls are plain


class HeldInterrupt:
  __slots__ = ("depth", "old", "pending", "main")

  def __init__(self):
    self.depth, self.old, self.pending = 0, None, None
    # the main thread's id, compared with one builtin call in hold/release (every submission and doorbell holds);
    # refreshed in a forked child, whose main thread is the one that forked (threading's own fork handler ran first)
    self.main = threading.main_thread().ident
    if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=self._forked)

  def _forked(self) -> None:
    self.main = threading.main_thread().ident

  def _record(self, signum, frame) -> None:
    if self.pending is None: self.pending = (signum, frame)

  # hold() and release() are themselves written so that a SIGINT between any two of their lines leaves them
  # consistent: the depth counts a span only once the recording handler is in place, and the outermost release sets
  # the depth to 0 while that handler is still in place (nothing can be raised in between), and reads what was
  # recorded only after the old handler is back (nothing recorded is left behind)
  def hold(self) -> None:
    if get_ident() != self.main: return
    if not self.depth:
      self.pending = None     # one recorded as a span ended while a second Ctrl-C was raised: that one stands for both
      old = _signal.getsignal(signal.SIGINT)
      if old == self._record: old = signal.default_int_handler     # left behind by a span cut short: not ours to keep
      if callable(old):
        self.old = old
        _signal.signal(signal.SIGINT, self._record)
      else: self.old = None
    self.depth += 1

  def release(self) -> None:
    if get_ident() != self.main or not self.depth: return
    if self.depth > 1:
      self.depth -= 1
      return
    self.depth = 0
    old = self.old
    if old is None: return
    _signal.signal(signal.SIGINT, old)      # from here on a SIGINT raises at once
    pending, self.pending = self.pending, None
    if pending is not None: old(*pending)

  @contextlib.contextmanager
  def interruptible(self):
    """A span inside a held one where a device model does the GPU's own work (a kernel the synchronous mock runs from
    its doorbell write, after the store itself): the host is in the middle of nothing of its own there, so a Ctrl-C,
    one recorded before included, is raised at once (a GPU's kernel does not hold the host's Ctrl-C back)."""
    if get_ident() != self.main or not self.depth or self.old is None:
      yield
      return
    _signal.signal(signal.SIGINT, self.old)
    try:
      pending, self.pending = self.pending, None
      if pending is not None: self.old(*pending)
      yield
    finally:
      _signal.signal(signal.SIGINT, self._record)

  def __enter__(self) -> "HeldInterrupt":
    self.hold()
    return self

  def __exit__(self, *exc) -> None: self.release()


# one for the process: signals are the process's, and spans nest (a submission that makes a device model step)
held = HeldInterrupt()
