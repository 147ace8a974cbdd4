"""Several transfers in flight on the mock bridge: the engine of the OS interface's asynchronous USB API
(drivers/system/interface.py USBAsyncEngine) for a device of ASM24Backend, as libusb's asynchronous transfers are on
hardware. pyusb has no asynchronous calls: the backend hands this engine out (ASM24Backend.async_engine) and
PyUSBTransport.async_transfers takes it instead of libusb's.

What it models:
  - transfers in flight, each endpoint's in the order they were submitted (USB keeps the order of one endpoint's
    transfers; endpoint 0's control requests and the bulk endpoints' transfers run side by side);
  - a bulk transfer moves only once a request announced its burst (the firmware's queue, firmware.py): before that
    the bridge NAKs it, it stays in flight, and the control requests behind it on endpoint 0 still go through
    (the hardware-proven client arms a burst while the previous burst is still in flight: tinygrad 0.14
    runtime/ops_amd.py, the USB copy-in);
  - a bounded depth: at most firmware.QUEUE_DEPTH bulk transfers in flight per bulk endpoint; one more is refused
    at submission with an error naming the request, the endpoint and the depth;
  - time passes when the host waits: a wait carries out every transfer that can go (a round trip: on the bus the
    transfers in flight progress together). A synchronous transfer of the host is a wait too (the backend first lets
    what is in flight progress). When nothing can go, the NAKed transfer with the earliest deadline times out;
  - faults (backend.py: stall, timeout, late, unplug) count and strike the transfers as in the synchronous path; a
    STALLed bulk transfer halts its endpoint (its Halt feature, USB 2.0 §9.4.5): the transfers behind it on that
    endpoint wait until the host clears the halt (CLEAR_FEATURE(ENDPOINT_HALT), §9.4.1), or are cancelled.
"""
from __future__ import annotations

import array
import errno

import usb.core

from ...drivers.system.interface import USB_CANCELLED, USB_COMPLETED, USB_ERROR, USB_NO_DEVICE, USB_STALL, USB_TIMED_OUT


class MockAsyncEngine:
  """Transfers in flight on one MockBridgeDevice `h` of `backend` (an ASM24Backend)."""

  def __init__(self, backend, h):
    self.backend, self.h = backend, h
    self.depth = h.fw.queue_depth
    self.mode = f"mock ASM24 bridge: asynchronous transfers, at most {self.depth} bulk requests in flight per endpoint"
    self.pending: list = []          # submitted, not yet completed, in submission order
    self.max_bulk_in_flight = 0      # the most bulk transfers in flight on one endpoint (a test's view)
    self.abandoned: list = []

  @property
  def name(self) -> str: return f"mock ASM24 bridge usb:{self.h.bus}-{self.h.address}"

  def submit(self, req) -> None:
    if self.h.unplugged: raise usb.core.USBError(f"{self.name}: No such device ({req.what})", errno=errno.ENODEV)
    if req.kind == "bulk":
      n = sum(1 for r in self.pending if r.kind == "bulk" and r.endpoint == req.endpoint)
      if n >= self.depth:
        raise usb.core.USBError(f"{self.name}: {req.what} refused: endpoint {req.endpoint:#04x} already has {n} bulk "
                                f"requests in flight, the bridge's queue depth is {self.depth}", errno=errno.EBUSY)
      self.max_bulk_in_flight = max(self.max_bulk_in_flight, n + 1)
    self.pending.append(req)

  # ---- time passing
  def _ready(self, req) -> bool:
    """Whether the bridge would take this transfer now (a bulk one needs its burst announced, its endpoint not halted)."""
    if req.kind != "bulk" or self.h.unplugged: return True
    if req.endpoint in self.h.halted: return False
    return bool(self.h.fw.queued)

  def progress(self) -> int:
    """Carry out every transfer in flight that can go, each endpoint's in order; returns how many completed."""
    done = 0
    while True:
      blocked, ran = set(), 0
      for req in list(self.pending):
        if req.endpoint in blocked: continue
        if not self._ready(req):
          blocked.add(req.endpoint)
          continue
        self.pending.remove(req)
        self._run(req)
        ran += 1
      done += ran
      if not ran: return done

  def _run(self, req) -> None:
    be, h = self.backend, self.h
    try:
      if req.kind == "control":
        bm, r, value, index = req.setup
        buf = array.array("B", bytes(req.length)) if req.is_in else array.array("B", req.out or b"")
        n = be._ctrl_transfer(h, bm, r, value, index, buf, req.timeout_ms)
        if req.is_in: req.data = bytes(buf[:n])
        req.actual = n
      elif req.is_in:
        buf = array.array("B", bytes(req.length))
        req.actual = be._bulk_read(h, req.endpoint, 0, buf, req.timeout_ms)
        req.data = bytes(buf[:req.actual])
      else: req.actual = be._bulk_write(h, req.endpoint, 0, array.array("B", req.out), req.timeout_ms)
      req.status = USB_COMPLETED
    except usb.core.USBTimeoutError as e: req.status, req.detail = USB_TIMED_OUT, str(e)
    except usb.core.USBError as e:
      req.detail = str(e)
      req.status = {errno.EPIPE: USB_STALL, errno.ENODEV: USB_NO_DEVICE}.get(e.errno, USB_ERROR)
      if req.status == USB_STALL and req.kind == "bulk": h.halted.add(req.endpoint)

  def wait(self, timeout_s: float) -> None:
    if self.progress() or not self.pending: return
    # nothing can go: the host's wait lasts until the earliest deadline, and that transfer times out (NAKed)
    first = min(self.pending, key=lambda r: r.deadline)
    for req in [r for r in self.pending if r.deadline <= first.deadline]:
      self.pending.remove(req)
      h = self.h
      h.transfer_number += 1           # it was on the bus (NAKed until its timeout): a transfer, as the sync path counts
      h.timeouts_ms.append(req.timeout_ms)
      req.status, req.detail = USB_TIMED_OUT, "NAKed: the bridge had no burst announced for it"

  def cancel(self, req) -> None:
    if req in self.pending:
      self.pending.remove(req)
      req.status, req.detail = USB_CANCELLED, "cancelled before the bridge took it"

  def abandon(self, req) -> None: self.abandoned.append(req)
