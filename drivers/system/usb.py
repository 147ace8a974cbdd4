"""PyUSBTransport: control and bulk transfers to one USB device through pyusb (no bridge protocol here: the
ASM24xx PCIe-over-USB protocol belongs to the driver that speaks it).

pyusb picks a backend (libusb 1.0, libusb 0.1, OpenUSB) unless the caller passes one (`backend=`), as its
documentation recommends for tests: usb.backend.IBackend is the one interface every backend implements.
"""
from __future__ import annotations

import errno as _errno
import time

from ...errors import DeviceError, Timeout
from .usberrors import USBGone, USBStall  # noqa: F401  (re-exported: drivers name them from here)


def _pyusb():
  try:
    import usb.core
    import usb.util
  except ImportError as e:  # pyusb is an install dependency; say so if it is missing anyway
    raise DeviceError(f"USB needs the pyusb package ({e})") from None
  return usb


class PyUSBTransport:
  """One opened USB device: interface `interface` claimed, configuration set. Errors name the device."""

  def __init__(self, device, name: str, interface: int = 0, product: str | None = None):
    self.device, self.name, self.interface, self.product = device, name, interface, product
    self._async = None

  @classmethod
  def open(cls, vendor_id: int, product_id: int, index: int = 0, backend=None, interface: int = 0,
           product_prefixes: tuple[str, ...] = ()) -> "PyUSBTransport":
    """Open the index-th device with this vendor:product id (in the backend's enumeration order). With
    product_prefixes, its product string (iProduct) must start with one of them (a bridge running other firmware
    shares the ids): refused with the string it has otherwise. A kernel driver bound to the interface (uas,
    usb-storage) is detached first."""
    usb = _pyusb()
    ident = f"USB device {vendor_id:04x}:{product_id:04x}"
    try: found = list(usb.core.find(find_all=True, idVendor=vendor_id, idProduct=product_id, backend=backend))
    except usb.core.NoBackendError:
      raise DeviceError(f"{ident}: no libusb backend available (install libusb-1.0-0)") from None
    except usb.core.USBError as e:
      raise DeviceError(f"{ident}: enumeration failed: {e}") from None
    if index < 0 or index >= len(found):
      raise DeviceError(f"{ident} index {index}: not found ({len(found)} such device{'s' if len(found) != 1 else ''} present)")
    dev = found[index]
    name = f"{ident} at usb:{getattr(dev, 'bus', '?')}-{getattr(dev, 'address', '?')}"
    product = cls._product(dev, name, product_prefixes) if product_prefixes else None
    try:
      try:
        if dev.is_kernel_driver_active(interface): dev.detach_kernel_driver(interface)
      except NotImplementedError: pass  # backends without kernel-driver control (macOS, Windows, test backends)
      dev.set_configuration()
      usb.util.claim_interface(dev, interface)
    except usb.core.USBError as e:
      usb.util.dispose_resources(dev)
      raise DeviceError(f"{name}: cannot claim interface {interface}: {e}") from None
    return cls(dev, name, interface, product)

  @staticmethod
  def _product(dev, name: str, prefixes: tuple[str, ...]) -> str:
    usb = _pyusb()
    try: product = usb.util.get_string(dev, dev.iProduct) or ""
    except (usb.core.USBError, ValueError) as e:
      usb.util.dispose_resources(dev)
      raise DeviceError(f"{name}: cannot read the product string: {e}") from None
    if not product.startswith(tuple(prefixes)):
      usb.util.dispose_resources(dev)
      raise DeviceError(f"{name}: product {product!r} does not start with {' or '.join(map(repr, prefixes))} "
                        f"(not the expected firmware)")
    return product

  def _fail(self, what: str, e, timeout_ms: int):
    usb = _pyusb()
    if isinstance(e, getattr(usb.core, "USBTimeoutError", ())) or getattr(e, "errno", None) == 110:
      raise Timeout(f"{self.name}: {what}", timeout_s=timeout_ms / 1000) from None
    if getattr(e, "errno", None) == _errno.EPIPE: raise USBStall(f"{self.name}: {what} failed: the device stalled it ({e})") from None
    if getattr(e, "errno", None) == _errno.ENODEV:
      raise USBGone(f"{self.name}: {what} failed: the device is gone (unplugged?): {e}") from None
    raise DeviceError(f"{self.name}: {what} failed: {e}") from None

  def control(self, bm_request_type: int, b_request: int, w_value: int, w_index: int, data_or_length, timeout_ms: int = 1000):
    """A control transfer on endpoint 0. IN (bit 7 set): data_or_length is the length, returns bytes.
    OUT: data_or_length is the payload (or None), returns the number of bytes sent."""
    usb = _pyusb()
    what = f"control request {b_request:#04x} (type {bm_request_type:#04x}, value {w_value:#x}, index {w_index:#x})"
    try: res = self.device.ctrl_transfer(bm_request_type, b_request, w_value, w_index, data_or_length, timeout_ms)
    except usb.core.USBError as e: self._fail(what, e, timeout_ms)
    return bytes(res) if bm_request_type & 0x80 else res

  def bulk_write(self, endpoint: int, data: bytes, timeout_ms: int = 1000) -> int:
    usb = _pyusb()
    try: n = self.device.write(endpoint, data, timeout_ms)
    except usb.core.USBError as e: self._fail(f"bulk write of {len(data)} bytes to endpoint {endpoint:#04x}", e, timeout_ms)
    if n != len(data): raise DeviceError(f"{self.name}: bulk write to endpoint {endpoint:#04x} sent {n} of {len(data)} bytes")
    return n

  def bulk_read(self, endpoint: int, size: int, timeout_ms: int = 1000) -> bytes:
    usb = _pyusb()
    try: return bytes(self.device.read(endpoint, size, timeout_ms))
    except usb.core.USBError as e: self._fail(f"bulk read of {size} bytes from endpoint {endpoint:#04x}", e, timeout_ms)

  def clear_halt(self, endpoint: int) -> None:
    """Clear a stalled bulk endpoint (CLEAR_FEATURE(ENDPOINT_HALT)) so the next transfer can go through."""
    usb = _pyusb()
    try: self.device.clear_halt(endpoint)
    except usb.core.USBError as e: self._fail(f"clear halt of endpoint {endpoint:#04x}", e, 1000)

  def async_transfers(self, monotonic=time.monotonic):
    """This device's queue of transfers in flight (usbasync.AsyncTransfers), made on first use: libusb-1.0's
    asynchronous API on pyusb's handle (libusbasync.py), a pyusb backend's own engine (`async_engine(handle)`: the
    mock bridge's), or else a synchronous pipeline (its `mode` says which)."""
    if self._async is None:
      from . import libusbasync, usbasync
      if self.device is None: raise DeviceError(f"{self.name}: closed")
      backend = self.device._ctx.backend
      own = getattr(backend, "async_engine", None)
      engine = own(self.device._ctx.managed_open()) if own is not None else libusbasync.engine_for(self.device, self.name)
      if engine is None:
        engine = usbasync.SyncEngine(self, f"pyusb backend {type(backend).__module__} offers no asynchronous transfers")
      self._async = usbasync.AsyncTransfers(engine, self.name, monotonic)
    return self._async

  def close(self) -> None:
    if self.device is None: return
    if self._async is not None and self._async.in_flight:   # nothing left in flight on a closed handle
      self._async.cancel_all()
    usb = _pyusb()
    try: usb.util.release_interface(self.device, self.interface)
    except usb.core.USBError as e:
      if getattr(e, "errno", None) != _errno.ENODEV: self._fail(f"release of interface {self.interface}", e, 1000)
      # an unplugged device has no interface left to release: closing it only frees our side
    finally:
      usb.util.dispose_resources(self.device)
      self.device = None

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
  def __repr__(self): return f"PyUSBTransport({self.name})"
