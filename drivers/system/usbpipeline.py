"""Bursts through the ASM24xx bridge with several bulk transfers in flight (issue 33: "several bulk requests in
flight, armed and drained asynchronously"): each burst is a vendor request that announces it (0xF0 mode 1: a
streaming MWr; 0xF2: an SRAM DMA write) and its bulk OUT transfer; the requests and transfers are submitted without
waiting (usbasync.AsyncTransfers) and reaped in order, at most `depth` bulk transfers in flight. The host waits (a
round trip) only when it needs a completion: a reply it reads, or room for the next burst.

The announce of burst i+1 may go out while burst i's data is still in flight (the firmware queues announced bursts
in order; the hardware-proven client does the same: tinygrad 0.14 runtime/ops_amd.py, USB copy-in, with two bursts
in flight).

On an error (a transfer failed or timed out, ^C): the requests behind it are cancelled (AsyncTransfers), then every
burst that may have been announced and whose data did not go is moved now, synchronously, with its data (a write
lands where it was meant): otherwise the firmware's queued burst would take the next request's bulk transfer (that
data at this burst's address). A burst whose announce never reached the bridge has nothing queued: its move times
out, which is what was hoped for. The error, reworded, says which bursts were moved so.
"""
from __future__ import annotations

import collections
import copy

from ...errors import DeviceError, Timeout
from . import usbasync
from .usb import USBGone


class BurstPipeline:
  """Use as a context manager: `with BurstPipeline(bridge, depth) as p: p.burst(...); ...` (reaps all at the end)."""

  def __init__(self, bridge, depth: int, ep_out: int, vendor_out: int, vendor_in: int):
    """bridge: an asm24.ASM24Bridge; ep_out, vendor_out, vendor_in: its bulk OUT endpoint and vendor request types."""
    if depth < 1: raise DeviceError(f"{bridge.name}: bulk requests in flight must be 1 or more, not {depth}")
    self.bridge, self.depth = bridge, depth
    self.ep_out, self.vendor_out, self.vendor_in = ep_out, vendor_out, vendor_in
    self.q = bridge.transfers_queue()
    # [announce, bulk or None, data] of the bursts not yet reaped (those reaped moved their data: they are dropped,
    # with their data, so that a long copy holds no more than `depth` bursts)
    self.bursts: collections.deque = collections.deque()
    self.bulk_max = 0                                         # the most bulk transfers in flight at once

  # ---- requests
  def _count(self, kind: str, req):
    self.bridge.counts[kind] += 1
    return req

  def control_out(self, request: int, value: int, index: int, data: bytes | None = None):
    return self._count("control_out", self.q.control(self.vendor_out, request, value, index, data, self.bridge.timeout_ms))

  def control_in(self, request: int, value: int, index: int, length: int):
    """A vendor IN request in flight (an XDATA read: 0xE4); its reply is `.data` once waited for."""
    return self._count("control_in", self.q.control(self.vendor_in, request, value, index, length, self.bridge.timeout_ms))

  def burst(self, request: int, value: int, index: int, control_data: bytes | None, data) -> list:
    """Announce a bulk OUT burst with vendor request (request, value, index, control_data) and send `data` on it."""
    entry = self.announce(request, value, index, control_data, data)
    self.send(entry)
    return entry

  def announce(self, request: int, value: int, index: int, control_data: bytes | None, data) -> list:
    """The announcing request of a burst of `data`, once fewer than `depth` bursts are in flight (so that the
    firmware never holds more than `depth` announced); send(entry) sends the data. Returns the burst's entry
    [announce, bulk (None until sent), data]."""
    while len(self.bursts) >= self.depth:
      if self.bursts[0][1] is None:
        raise DeviceError(f"{self.bridge.name}: {self.bursts[0][0].what} announced a burst that was never sent")
      self.wait_for(self.bursts[0][1])
    entry = [self.control_out(request, value, index, control_data), None, data]
    self.bursts.append(entry)
    return entry

  def send(self, entry: list) -> None:
    entry[1] = self._count("bulk_out", self.q.bulk_write(self.ep_out, entry[2], self.bridge.timeout_ms))
    self.bulk_max = max(self.bulk_max, sum(1 for b in self.bursts if b[1] is not None))

  def wait_for(self, req):
    """Reap in order up to and including `req` (a request of this pipeline); returns it."""
    while req in self.q.pending:
      if self.q.reap() is req: break
    while self.bursts and self.bursts[0][1] is not None and self.bursts[0][1] not in self.q.pending:
      self.bursts.popleft()
    return req

  def finish(self) -> None:
    self.q.drain()
    self.bursts.clear()

  # ---- the context: everything reaped at the end, recovery on an error
  def __enter__(self) -> "BurstPipeline":
    if self.bridge.gone: raise USBGone(f"{self.bridge.name}: the bridge is gone ({self.bridge.gone}); reopen it")
    if self.q.in_flight: raise DeviceError(f"{self.bridge.name}: {self.q.in_flight} USB requests of another sequence "
                                           f"are still in flight")
    return self

  def __exit__(self, kind, e, tb):
    if kind is None:
      try: self.finish()
      except BaseException as err:
        self._recover(err)
        raise self._reworded(err) from None
      return False
    self._recover(e)
    if isinstance(e, (DeviceError, Timeout)): raise self._reworded(e) from None
    return False

  def _recover(self, e) -> None:
    self.moved, self.lost = [], []
    self.q.cancel_all()
    if isinstance(e, USBGone):
      self.bridge.gone = str(e)
      return
    owed = [b for b in self.bursts if b[1] is None or b[1].status != usbasync.COMPLETED]
    if not owed: return
    if any(b[1] is not None and b[1].status == usbasync.STALL for b in owed):
      try: self.bridge.usb.clear_halt(self.ep_out)
      except (DeviceError, Timeout): pass
    for announce, bulk, data in owed:
      try:
        self.bridge.bulk_out(data)
        self.moved.append(announce.number)
      except Timeout: pass           # nothing was queued for it: the announce never reached the firmware
      except DeviceError: self.lost.append(announce.number)

  def _reworded(self, e):
    moved, lost = getattr(self, "moved", []), getattr(self, "lost", [])
    if not moved and not lost: return e
    err = copy.copy(e)
    msg = str(e)
    if moved: msg += f"; moved afterwards (their data went where it was meant): the bursts of {_numbers(moved)}"
    if lost: msg += f"; could not move the bursts of {_numbers(lost)}: reopen the bridge"
    err.args = (msg,)
    return err


def _numbers(ns) -> str: return ("requests " if len(ns) > 1 else "request ") + ", ".join(f"#{n}" for n in ns)
