"""Ctrl-C held back over a span that must not stop halfway (a submission: its words, the write pointer, the doorbell;
a device model's step of its hardware).

SIGINT becomes KeyboardInterrupt at whatever line of Python the main thread is at. A submission stopped between its
timeline value and its doorbell leaves work the timeline counts on but no engine ever sees: every later wait times
out and the data in other buffers is out of reach. So such a span is entered with hold() and left with release().

Every submission and doorbell holds (three nested spans per launch), so holding costs no system call: the first
hold() of the main thread puts a deferring handler in front of the Python handler of SIGINT it finds (`Deferring`:
it calls that handler, unless a span is held, in which case it only records the signal) and leaves it installed.
hold() and release() then only count the depth (a device's close puts the wrapped handler back: restore()); release() of the outermost span calls the wrapped handler with a
recorded signal (the default one raises KeyboardInterrupt there, after the span). A handler set later by someone
else (signal.signal) is wrapped in its turn at the next hold(), and one of ours put back is used as it is: whatever
handler is in place runs for a Ctrl-C outside a span. An interrupt that lands before hold() took effect finds
nothing begun; one after release() finds it all done.

Only the main thread gets signals in Python (and only it may change a handler): in other threads these do nothing.
A handler that is not a Python callable (SIG_IGN, SIG_DFL, or one set from C) is left as it is, and nothing is
deferred then (SIG_IGN drops the signal anyway; SIG_DFL ends the process)."""
from __future__ import annotations

import contextlib
import os
import threading
from _thread import get_ident
from signal import SIGINT

import _signal      # signal's own C module: signal.getsignal/signal wrap handlers in an enum, whose lookups a SIGINT
                   # landing inside them turns into a KeyError; these calls are plain


class Deferring:
  """The SIGINT handler hold() installs in front of `old` (the Python handler that was in place): it calls old at
  once outside a held span, and records the signal for release() inside one."""
  __slots__ = ("old", "owner")

  def __init__(self, old, owner: "HeldInterrupt"):
    self.old, self.owner = old, owner

  def __call__(self, signum, frame) -> None:
    owner = self.owner
    if owner.depth:
      if owner.pending is None: owner.pending = (signum, frame, self.old)
    else: self.old(signum, frame)


class HeldInterrupt:
  __slots__ = ("depth", "pending", "main", "installed")

  def __init__(self):
    self.depth, self.pending = 0, None
    self.installed = None       # the Deferring handler this put in place last
    # the main thread's id, compared with one builtin call in hold/release (every submission and doorbell holds);
    # refreshed in a forked child, whose main thread is the one that forked (threading's own fork handler ran first)
    self.main = threading.main_thread().ident
    if hasattr(os, "register_at_fork"): os.register_at_fork(after_in_child=self._forked)

  def _forked(self) -> None:
    self.main = threading.main_thread().ident

  # hold() and release() are written so that a SIGINT between any two of their lines leaves them consistent: the
  # handler defers only while depth > 0 and never changes depth; the outermost release sets the depth to 0 before it
  # reads what was recorded (a signal after that is raised by the handler itself, and stands for a recorded one too)
  def hold(self) -> None:
    if get_ident() != self.main: return
    if not self.depth:
      self.pending = None     # one recorded as a span ended while a second Ctrl-C was raised: that one stands for both
      handler = _signal.getsignal(SIGINT)    # a read of the interpreter's table, no system call
      if handler is not self.installed: self._install(handler)
    self.depth += 1

  def _install(self, handler) -> None:
    """Put a deferring handler in front of `handler` (the one in place), unless it is one of ours already."""
    if handler.__class__ is Deferring and handler.owner is self:
      self.installed = handler
    elif callable(handler):
      installed = Deferring(handler, self)
      _signal.signal(SIGINT, installed)
      self.installed = installed
    else: self.installed = None       # SIG_IGN, SIG_DFL or a C handler: left alone

  def restore(self) -> None:
    """Put back the handler the deferring one wraps, when it is still in place and no span is held (a device's close:
    hcq leaves SIGINT as it found it once its devices are closed; the next hold() installs it again). A handler set by
    someone else since is theirs and stays."""
    if get_ident() != self.main or self.depth: return
    installed = self.installed
    self.installed = None
    if installed is not None and _signal.getsignal(SIGINT) is installed: _signal.signal(SIGINT, installed.old)

  def release(self) -> None:
    if get_ident() != self.main or not self.depth: return
    self.depth -= 1
    if self.depth: return
    pending = self.pending
    if pending is not None:
      self.pending = None
      pending[2](pending[0], pending[1])

  @contextlib.contextmanager
  def interruptible(self):
    """A span inside a held one where a device model does the GPU's own work (a kernel the synchronous mock runs from
    its doorbell write, after the store itself): the host is in the middle of nothing of its own there, so a Ctrl-C,
    one recorded before included, is raised at once (a GPU's kernel does not hold the host's Ctrl-C back)."""
    depth = self.depth
    if get_ident() != self.main or not depth:
      yield
      return
    self.depth = 0                  # the handler calls the wrapped one at once meanwhile
    try:
      pending = self.pending
      if pending is not None:
        self.pending = None
        pending[2](pending[0], pending[1])
      yield
    finally:
      self.depth = depth

  def __enter__(self) -> "HeldInterrupt":
    self.hold()
    return self

  def __exit__(self, *exc) -> None: self.release()


# one for the process: signals are the process's, and spans nest (a submission that makes a device model step)
held = HeldInterrupt()
