"""The one wait loop of the BNXT driver: poll a condition in memory the NIC writes until it holds or a deadline passes.

Every wait (HWRM response, RCFW response on the CREQ, a completion on a CQ) goes through poll_until, so every one is
bounded by a timeout and, when it expires, raises hcq.errors.Timeout naming what it waited for, the value it wanted
and the last value it saw.
"""
from __future__ import annotations

from typing import Callable

from ...errors import Timeout

BUSY_SPINS = 100      # polls without sleeping first: a response usually comes within microseconds
IDLE_SLEEP_S = 1e-4   # then sleep between polls so a long wait does not take a core


def poll_until(os, poll: Callable[[], tuple[bool, object]], timeout_s: float, what: str, expected: str):
  """Call poll() until it returns (True, result) and return result. poll returns (False, last) while the condition
  does not hold, last describing what it saw (for the Timeout message). The condition is checked once more after the
  deadline has passed, so a thread that slept through the deadline does not time out on an answer already there."""
  deadline = os.monotonic() + timeout_s
  spins = 0
  while True:
    expired = os.monotonic() > deadline
    done, value = poll()
    if done: return value
    if expired: raise Timeout(what, expected, value, timeout_s)
    spins += 1
    os.sleep(0 if spins < BUSY_SPINS else IDLE_SLEEP_S)
