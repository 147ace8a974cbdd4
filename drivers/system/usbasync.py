"""Several USB transfers in flight on one device: submit N requests (control or bulk), reap their completions in the
order they were submitted, each bounded by its own timeout; on an error the requests after the failed one are
cancelled and the error lists each of them with its fate (cancelled, completed before the cancel arrived, still in
flight), so that nothing is lost or dropped without a word.

The queue (AsyncTransfers) runs on an engine, which moves the transfers:
  - libusbasync.LibusbEngine: libusb-1.0's asynchronous transfer API on the device handle pyusb's libusb1 backend
    opened (the real thing on Linux);
  - the mock bridge's engine (mockgpu/usb/asyncengine.py), through the pyusb backend's `async_engine(handle)`;
  - SyncEngine: where neither exists (pyusb on libusb 0.1 or OpenUSB, a transport without pyusb), each request is
    carried out when it is submitted, one synchronous transfer after the other; its `mode` says so.

An engine is an interface.USBAsyncEngine: mode, submit, wait (one round trip of the host), cancel, abandon; it sets
each request's status (interface.USB_*), actual (bytes moved) and, for IN transfers, data.

Round trips: the waits of the host for a completion (wait() calls, plus one per transfer a SyncEngine carries out).
With K requests in flight a copy waits about K times less often than with one (bench/usb.py prints both).
"""
from __future__ import annotations

import collections
import dataclasses
import errno as _errno
import time

from ...errors import DeviceError, Timeout
from .usberrors import USBGone, USBStall
from .interface import (USB_CANCELLED as CANCELLED, USB_COMPLETED as COMPLETED, USB_ERROR as ERROR,
                        USB_NO_DEVICE as NO_DEVICE, USB_OVERFLOW as OVERFLOW, USB_STALL as STALL, USB_TIMED_OUT as TIMED_OUT)
STATUSES = (COMPLETED, ERROR, TIMED_OUT, CANCELLED, STALL, NO_DEVICE, OVERFLOW)

# how long past a request's own timeout the host waits for the engine to report it (libusb completes a timed-out
# transfer itself, from its event handling; this bounds a wait on an engine that never does)
GRACE_S = 1.0


@dataclasses.dataclass(eq=False)
class Request:
  """One transfer. kind "control" (endpoint 0: setup = (bmRequestType, bRequest, wValue, wIndex)) or "bulk"; an OUT
  transfer carries `out` (bytes), an IN transfer asks for `length` bytes."""
  kind: str
  endpoint: int
  length: int
  timeout_ms: int
  out: bytes | None = None
  setup: tuple[int, int, int, int] | None = None
  number: int = 0
  deadline: float = 0.0
  status: str | None = None          # None while in flight
  actual: int = 0
  data: bytes = b""
  detail: str = ""                   # what the engine knows more about a failure
  handle: object = None              # the engine's own record (a libusb transfer)

  @property
  def is_in(self) -> bool:
    return bool((self.setup[0] if self.kind == "control" else self.endpoint) & 0x80)

  @property
  def what(self) -> str:
    if self.kind == "control":
      bm, req, value, index = self.setup
      return (f"request #{self.number}: control request {req:#04x} (type {bm:#04x}, value {value:#x}, index {index:#x}) "
              f"on endpoint 0x00")
    way = f"bulk IN of {self.length} bytes from" if self.is_in else f"bulk OUT of {self.length} bytes to"
    return f"request #{self.number}: {way} endpoint {self.endpoint:#04x}"


class AsyncTransfers:
  """Requests in flight on one device, reaped in submission order. `counts`: submitted, completed, waits;
  `max_in_flight`: the most requests submitted and not yet reaped at once; round_trips: the host's waits."""

  def __init__(self, engine, name: str, monotonic=time.monotonic):
    self.engine, self.name, self.monotonic = engine, name, monotonic
    self.pending: collections.deque[Request] = collections.deque()
    self.number = 0
    self.counts: collections.Counter = collections.Counter()
    self.max_in_flight = 0

  @property
  def mode(self) -> str: return self.engine.mode
  @property
  def in_flight(self) -> int: return len(self.pending)
  @property
  def round_trips(self) -> int: return self.counts["waits"] + getattr(self.engine, "blocking", 0)

  # ---- submitting
  def control(self, bm_request_type: int, b_request: int, w_value: int, w_index: int, data_or_length, timeout_ms: int) -> Request:
    """A control transfer on endpoint 0. IN (bit 7 set): data_or_length is the length; OUT: the payload (or None)."""
    if bm_request_type & 0x80: out, length = None, int(data_or_length)
    else: out = bytes(data_or_length or b""); length = len(out)
    return self._submit(Request("control", 0, length, timeout_ms, out=out,
                                setup=(bm_request_type, b_request, w_value, w_index)))

  def bulk_write(self, endpoint: int, data, timeout_ms: int) -> Request:
    data = bytes(data)
    return self._submit(Request("bulk", endpoint, len(data), timeout_ms, out=data))

  def bulk_read(self, endpoint: int, size: int, timeout_ms: int) -> Request:
    return self._submit(Request("bulk", endpoint, size, timeout_ms))

  def _submit(self, req: Request) -> Request:
    self.number += 1
    req.number = self.number
    req.deadline = self.monotonic() + req.timeout_ms / 1000
    try: self.engine.submit(req)
    except Exception as e:      # refused: nothing of it was started; what is in flight before it is stopped
      req.status, req.detail = (NO_DEVICE if getattr(e, "errno", None) == _errno.ENODEV else ERROR), str(e)
      fates = self._cancel_rest()
      raise self._error(req, "could not be submitted", fates) from None
    self.pending.append(req)
    self.counts["submitted"] += 1
    self.max_in_flight = max(self.max_in_flight, len(self.pending))
    return req

  # ---- reaping
  def reap(self) -> Request:
    """The oldest request in flight, once complete (its `data` for an IN transfer). Its failure (or its timeout)
    raises, after the requests behind it are cancelled: a Timeout, USBStall, USBGone or DeviceError naming it and
    the endpoint, with the fate of each request behind it."""
    if not self.pending: raise DeviceError(f"{self.name}: no USB request in flight to reap")
    req = self.pending[0]
    while req.status is None:
      left = req.deadline + GRACE_S - self.monotonic()
      if left <= 0:               # the engine never reported it: stop it ourselves
        self.engine.cancel(req)
        self.pending.popleft()
        req.status, req.detail = TIMED_OUT, "the engine did not report it in time"
        raise self._error(req, "timed out", self._cancel_rest(), abandon=req)
      self.counts["waits"] += 1
      self.engine.wait(left)
    self.pending.popleft()
    self.counts["completed"] += 1
    if req.status == COMPLETED and req.actual == req.length:
      req.out = None            # moved: its copy of the data is not kept (a long stream holds only what is in flight)
      return req
    fates = self._cancel_rest()
    if req.status == COMPLETED:
      req.detail = f"moved {req.actual} of {req.length} bytes"
      raise self._error(req, "came back short", fates)
    raise self._error(req, req.status, fates)

  def drain(self) -> list[Request]:
    """Reap every request in flight (in order)."""
    return [self.reap() for _ in range(len(self.pending))]

  def cancel_all(self) -> list[tuple[Request, str]]:
    """Stop everything in flight (an interrupted caller); returns each request with its fate."""
    return self._cancel_rest()

  def _cancel_rest(self) -> list[tuple[Request, str]]:
    rest = list(self.pending)
    self.pending.clear()
    for r in rest:
      if r.status is None: self.engine.cancel(r)
    if rest:
      until = max(r.deadline for r in rest) + GRACE_S
      while any(r.status is None for r in rest) and self.monotonic() < until:
        self.counts["waits"] += 1
        self.engine.wait(until - self.monotonic())
    fates = []
    for r in rest:
      if r.status is None:
        self.engine.abandon(r)
        fates.append((r, "still in flight after its cancel (abandoned; its buffer is kept)"))
      elif r.status == COMPLETED: fates.append((r, "completed before the cancel"))
      else: fates.append((r, r.status))
    getattr(self.engine, "reset", lambda: None)()
    return fates

  def _error(self, req: Request, how: str, fates, abandon: Request | None = None) -> Exception:
    if abandon is not None: self.engine.abandon(abandon)
    more = f" ({req.detail})" if req.detail else ""
    if fates: more += f"; {len(fates)} request{'s' if len(fates) != 1 else ''} after it: " + \
      ", ".join(f"#{r.number} {r.what.split(': ', 1)[1]} ({fate})" for r, fate in fates)
    if req.status == TIMED_OUT:
      return Timeout(f"{req.what} on {self.name}{more}", timeout_s=req.timeout_ms / 1000)
    msg = f"{self.name}: {req.what} {how}{more}"
    if req.status == STALL: return USBStall(msg)
    if req.status == NO_DEVICE: return USBGone(msg)
    return DeviceError(msg)


class SyncEngine:
  """No asynchronous API underneath: each request is one synchronous transfer of `transport` (a USBTransport),
  carried out when it is submitted; after a failure the requests behind it are not carried out (cancelled)."""

  def __init__(self, transport, reason: str):
    self.transport = transport
    self.mode = f"synchronous pipeline, one transfer at a time ({reason})"
    self.blocking = 0
    self.failed = False

  def submit(self, req: Request) -> None:
    if self.failed:
      req.status, req.detail = CANCELLED, "not carried out: an earlier request failed"
      return
    self.blocking += 1
    try:
      if req.kind == "control":
        bm, r, value, index = req.setup
        res = self.transport.control(bm, r, value, index, req.length if req.is_in else req.out, req.timeout_ms)
      elif req.is_in: res = self.transport.bulk_read(req.endpoint, req.length, req.timeout_ms)
      else: res = self.transport.bulk_write(req.endpoint, req.out, req.timeout_ms)
    except Timeout as e: req.status, req.detail = TIMED_OUT, str(e)
    except USBStall as e: req.status, req.detail = STALL, str(e)
    except USBGone as e: req.status, req.detail = NO_DEVICE, str(e)
    except DeviceError as e: req.status, req.detail = ERROR, str(e)
    else:
      if req.is_in: req.data = bytes(res); req.actual = len(req.data)
      else: req.actual = req.length if res is None else int(res)
      req.status = COMPLETED
    if req.status != COMPLETED: self.failed = True

  def wait(self, timeout_s: float) -> None: pass          # everything completed when it was submitted
  def cancel(self, req: Request) -> None: pass
  def abandon(self, req: Request) -> None: pass
  def reset(self) -> None: self.failed = False


def async_transfers(transport, monotonic=time.monotonic) -> AsyncTransfers:
  """The asynchronous queue of a USB transport: its own (PyUSBTransport.async_transfers: libusb or a mock's engine)
  or, for a transport without one, a synchronous pipeline over its transfers."""
  own = getattr(transport, "async_transfers", None)
  if own is not None: return own(monotonic)
  return AsyncTransfers(SyncEngine(transport, f"{type(transport).__name__} has no asynchronous API"),
                        getattr(transport, "name", repr(transport)), monotonic)
