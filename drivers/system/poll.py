"""A bounded poll of a value read over a slow bus (a signal behind a USB bridge, a link's state register)."""
from __future__ import annotations

from ...errors import Timeout


def poll(read, expected: int, what: str, timeout_s: float, poll_us: int, monotonic, sleep, counter=None,
         torn: bool = False) -> int:
  """Read a signal (read() -> int) until it reaches `expected` (>=); poll_us microseconds between reads (0: back to
  back). Returns the value. Raises hcq.Timeout with `what`, the expected and the last value after timeout_s.
  counter (a dict) gets counter['polls'] += 1 per read. torn: memory read byte by byte (XDATA), which a read may see
  halfway through the device's write (0x1ff -> 0x200 read as 0x2ff): a value that ends the wait is taken once two
  reads in a row agree."""
  def counted():
    if counter is not None: counter["polls"] = counter.get("polls", 0) + 1
    return read()
  deadline = monotonic() + timeout_s
  while True:
    value = counted()
    while torn and value >= expected:
      again = counted()
      if again == value: break
      value = again
    if value >= expected: return value
    if monotonic() >= deadline: raise Timeout(what, expected=expected, last_seen=value, timeout_s=timeout_s)
    if poll_us: sleep(poll_us / 1e6)

