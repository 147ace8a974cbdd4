"""The errors of a USB transfer that a caller treats apart (drivers/system/usb.py raises them, usbasync.py too)."""
from __future__ import annotations

from ...errors import DeviceError


class USBStall(DeviceError):
  """The device answered a transfer with STALL (libusb's LIBUSB_ERROR_PIPE, errno EPIPE): it refused the request;
  nothing was done, so a caller may clear the halt and try again."""


class USBGone(DeviceError):
  """The device is no longer there (unplugged: LIBUSB_ERROR_NO_DEVICE, errno ENODEV); every later call fails too."""
