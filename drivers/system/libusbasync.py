"""libusb-1.0's asynchronous transfer API through ctypes, on the device handle pyusb's libusb1 backend opened: the
engine of usbasync.AsyncTransfers on Linux (libusb_alloc_transfer, libusb_submit_transfer, libusb_cancel_transfer,
libusb_handle_events_timeout_completed, libusb_free_transfer).

Facts, from libusb's public header libusb/libusb.h (libusb 1.0.27+, LIBUSB_API_VERSION 0x0100010A; the layout of
struct libusb_transfer has not changed since 1.0.0) and its io.c / sync.c:
  - struct libusb_transfer: dev_handle (pointer), flags (uint8_t), endpoint (unsigned char), type (unsigned char),
    timeout (unsigned int, ms, 0 = none), status (enum libusb_transfer_status), length (int), actual_length (int),
    callback (libusb_transfer_cb_fn: void (*)(struct libusb_transfer *)), user_data (void *), buffer (unsigned char
    *), num_iso_packets (int), then the isochronous packet descriptors (none here: libusb_alloc_transfer(0));
  - enum libusb_transfer_type: CONTROL 0, BULK 2; enum libusb_transfer_status: COMPLETED 0, ERROR 1, TIMED_OUT 2,
    CANCELLED 3, STALL 4, NO_DEVICE 5, OVERFLOW 6;
  - a control transfer's buffer starts with the 8-byte setup packet (struct libusb_control_setup, packed:
    bmRequestType, bRequest, then wValue, wIndex, wLength little-endian: libusb_fill_control_setup), its length is
    8 + wLength, and actual_length counts the data stage only (sync.c libusb_control_transfer copies actual_length
    bytes from after the setup);
  - enum libusb_error: NO_DEVICE -4, NOT_FOUND -5, BUSY -6, PIPE -9, INTERRUPTED -10, NO_MEM -11;
  - libusb_handle_events_timeout_completed(ctx, struct timeval *tv, int *completed) blocks up to tv for events and
    returns early when one arrives (io.c); the callbacks run inside it, on this thread.
The engine does not use libusb's synchronous wrappers; pyusb keeps doing the synchronous transfers on the same
handle (libusb allows both at once: sync.c builds its synchronous calls on these same asynchronous transfers).
"""
from __future__ import annotations

import ctypes
import errno
import struct

from ...errors import DeviceError
from . import usbasync

TRANSFER_TYPE_CONTROL, TRANSFER_TYPE_BULK = 0, 2
STATUS = {0: usbasync.COMPLETED, 1: usbasync.ERROR, 2: usbasync.TIMED_OUT, 3: usbasync.CANCELLED, 4: usbasync.STALL,
          5: usbasync.NO_DEVICE, 6: usbasync.OVERFLOW}
ERROR_NO_DEVICE, ERROR_NOT_FOUND, ERROR_BUSY, ERROR_PIPE, ERROR_INTERRUPTED, ERROR_NO_MEM = -4, -5, -6, -9, -10, -11
CONTROL_SETUP_SIZE = 8


class Transfer(ctypes.Structure):
  pass


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(Transfer))
Transfer._fields_ = [("dev_handle", ctypes.c_void_p), ("flags", ctypes.c_uint8), ("endpoint", ctypes.c_ubyte),
                     ("type", ctypes.c_ubyte), ("timeout", ctypes.c_uint), ("status", ctypes.c_int),
                     ("length", ctypes.c_int), ("actual_length", ctypes.c_int), ("callback", CALLBACK),
                     ("user_data", ctypes.c_void_p), ("buffer", ctypes.POINTER(ctypes.c_ubyte)),
                     ("num_iso_packets", ctypes.c_int)]


class Timeval(ctypes.Structure):
  _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


def load(path: str):
  """libusb-1.0 at `path` with the prototypes this engine calls (its own CDLL object: pyusb's keeps its own)."""
  lib = ctypes.CDLL(path)
  lib.libusb_alloc_transfer.argtypes, lib.libusb_alloc_transfer.restype = [ctypes.c_int], ctypes.POINTER(Transfer)
  lib.libusb_submit_transfer.argtypes, lib.libusb_submit_transfer.restype = [ctypes.POINTER(Transfer)], ctypes.c_int
  lib.libusb_cancel_transfer.argtypes, lib.libusb_cancel_transfer.restype = [ctypes.POINTER(Transfer)], ctypes.c_int
  lib.libusb_free_transfer.argtypes, lib.libusb_free_transfer.restype = [ctypes.POINTER(Transfer)], None
  lib.libusb_handle_events_timeout_completed.argtypes = [ctypes.c_void_p, ctypes.POINTER(Timeval), ctypes.POINTER(ctypes.c_int)]
  lib.libusb_handle_events_timeout_completed.restype = ctypes.c_int
  lib.libusb_error_name.argtypes, lib.libusb_error_name.restype = [ctypes.c_int], ctypes.c_char_p
  return lib


class SubmitError(DeviceError):
  def __init__(self, message: str, errno: int | None = None):
    super().__init__(message)
    self.errno = errno


class LibusbEngine:
  """Transfers on one opened device (`handle`: its libusb_device_handle *, `ctx`: the libusb_context * it was opened
  in). Each request's transfer and buffer live until its callback ran (or, abandoned, as long as the engine)."""
  mode = "libusb-1.0 asynchronous transfers"

  def __init__(self, lib, ctx, handle, name: str):
    self.lib, self.ctx, self.handle, self.name = lib, ctx, handle, name
    self._callback = CALLBACK(self._done)       # kept: libusb calls it for as long as transfers are out
    self._live: dict[int, tuple[usbasync.Request, object, object]] = {}
    self._abandoned: list = []

  def _name(self, rc: int) -> str: return (self.lib.libusb_error_name(rc) or b"?").decode()

  def submit(self, req: usbasync.Request) -> None:
    t = self.lib.libusb_alloc_transfer(0)
    if not t: raise SubmitError(f"libusb_alloc_transfer failed for {req.what}")
    if req.kind == "control":
      bm, r, value, index = req.setup
      setup = struct.pack("<BBHHH", bm, r, value, index, req.length)
      payload = setup + (bytes(req.length) if req.is_in else req.out)
      ttype = TRANSFER_TYPE_CONTROL
    else:
      payload, ttype = (bytes(req.length) if req.is_in else req.out), TRANSFER_TYPE_BULK
    buf = (ctypes.c_ubyte * max(1, len(payload))).from_buffer_copy(payload.ljust(1, b"\0"))
    tr = t.contents
    tr.dev_handle, tr.flags, tr.endpoint, tr.type = ctypes.cast(self.handle, ctypes.c_void_p).value, 0, req.endpoint, ttype
    tr.timeout, tr.length, tr.callback, tr.user_data = req.timeout_ms, len(payload), self._callback, req.number
    tr.buffer = ctypes.cast(buf, ctypes.POINTER(ctypes.c_ubyte))
    self._live[req.number] = (req, t, buf)
    rc = self.lib.libusb_submit_transfer(t)
    if rc < 0:
      del self._live[req.number]
      self.lib.libusb_free_transfer(t)
      raise SubmitError(f"libusb_submit_transfer: {self._name(rc)}", errno=errno.ENODEV if rc == ERROR_NO_DEVICE else None)
    req.handle = t

  def _done(self, tp) -> None:
    """libusb's callback (inside handle_events, this thread): record the completion; never raises into C."""
    try:
      tr = tp.contents
      req, t, buf = self._live.pop(int(tr.user_data or 0))
      req.status = STATUS.get(tr.status, usbasync.ERROR)
      req.actual = tr.actual_length
      if req.is_in:
        start = CONTROL_SETUP_SIZE if req.kind == "control" else 0
        req.data = bytes(buf)[start:start + req.actual]
      self.lib.libusb_free_transfer(t)
    except Exception as e:     # a callback must not raise through libusb; the request then times out on reap
      self._abandoned.append(e)

  def wait(self, timeout_s: float) -> None:
    timeout_s = max(0.0, min(timeout_s, 3600.0))
    tv = Timeval(int(timeout_s), int(timeout_s % 1 * 1e6))
    completed = ctypes.c_int(0)
    rc = self.lib.libusb_handle_events_timeout_completed(self.ctx, ctypes.byref(tv), ctypes.byref(completed))
    if rc < 0 and rc != ERROR_INTERRUPTED:
      raise DeviceError(f"{self.name}: libusb_handle_events_timeout_completed failed: {self._name(rc)}")

  def cancel(self, req: usbasync.Request) -> None:
    entry = self._live.get(req.number)
    if entry is None: return
    rc = self.lib.libusb_cancel_transfer(entry[1])
    if rc < 0 and rc != ERROR_NOT_FOUND and rc != ERROR_NO_DEVICE:
      req.detail = f"libusb_cancel_transfer: {self._name(rc)}"

  def abandon(self, req: usbasync.Request) -> None:
    entry = self._live.pop(req.number, None)
    if entry is not None: self._abandoned.append(entry)    # libusb may still write its buffer: never freed


def engine_for(device, name: str):
  """A LibusbEngine for a pyusb device opened by pyusb's libusb1 backend, or None (another backend)."""
  ctx_obj = getattr(device, "_ctx", None)
  backend = getattr(ctx_obj, "backend", None)
  lib, ctx = getattr(backend, "lib", None), getattr(backend, "ctx", None)
  if lib is None or ctx is None or type(backend).__module__ != "usb.backend.libusb1": return None
  handle = ctx_obj.managed_open()            # pyusb's _DeviceHandle; .handle is the libusb_device_handle *
  path = getattr(lib, "_name", None)
  if not path: return None
  return LibusbEngine(load(path), ctx, getattr(handle, "handle", handle), name)
