"""A pyusb backend (usb.backend.IBackend, pyusb's one documented backend interface) presenting mock ASM24xx bridges:
the driver calls pyusb exactly as on hardware (usb.core.find, set_configuration, claim_interface, ctrl_transfer,
read/write); only the backend underneath differs.

Each device shows the descriptors of USB 3.2 §9.6 as the custom firmware does (one configuration, interface 0 of
vendor class 0xFF with bulk OUT 0x02 and bulk IN 0x81, product string "custom mock ASM2464PD"), answers the standard
GET_DESCRIPTOR for strings, and passes vendor requests to its ASM24Firmware. The firmware queues the bulk transfers
its requests announce (ASM24Firmware.queued, in order); a bulk transfer with nothing queued is NAKed until the host's
timeout, one of another direction or size is STALLed.

Fault injection (Config.usb_mock_faults, HCQ_USB_MOCK_FAULTS; grammar in config.parse_usb_faults), counted from the
moment faults are armed (at open, or ASM24Backend.arm_faults):
  stall=N     transfer N is answered with STALL (errno EPIPE), nothing is done
  timeout=N   transfer N never completes: USBTimeoutError after its timeout, nothing is done (a bulk transfer's
              queued burst is abandoned by the firmware too)
  late=N      transfer N is carried out, but its status never reaches the host: USBTimeoutError all the same (a
              request that queues a bulk transfer has queued it)
  unplug=N    the device disappears at transfer N (errno ENODEV for it and every later one; a pending bulk is lost)
  transport=N / ur=N / crs=N / ca=N   the N-th non-posted TLP (a completion read follows it) is not executed and its
              completion carries a transport error / that PCIe completion status
"""
from __future__ import annotations

import array
import collections
import errno
import types

import usb.backend
import usb.core

from ...config import parse_usb_faults
from .asyncengine import MockAsyncEngine
from .firmware import ASM24Firmware

VID, PID = 0xADD1, 0x0001
PRODUCT = "custom mock ASM2464PD"
MANUFACTURER = "hcq mock"
EP_OUT, EP_IN = 0x02, 0x81
GET_DESCRIPTOR, DESC_STRING = 0x06, 0x03
LANG_EN_US = 0x0409


def _desc(**kw): return types.SimpleNamespace(**kw)


class MockBridgeDevice:
  """One plugged-in bridge: its firmware, its bus position and its fault schedule."""

  def __init__(self, firmware: ASM24Firmware, bus: int = 1, address: int = 2, vid: int = VID, pid: int = PID,
               product: str = PRODUCT, faults: str = ""):
    self.fw, self.bus, self.address, self.vid, self.pid, self.product = firmware, bus, address, vid, pid, product
    self.kernel_driver = True          # uas/usb-storage bound to interface 0 until detached
    self.claimed = False
    self.timeouts_ms: collections.deque = collections.deque(maxlen=64)   # of the latest transfers, as the host asked
    self.halted: set[int] = set()      # bulk endpoints a STALL halted (asyncengine.py) until the host clears the halt
    self.engine = None                 # the asynchronous engine (asyncengine.MockAsyncEngine), once the host asks
    self.arm_faults(faults)

  def arm_faults(self, spec: str) -> None:
    """Start counting transfers and TLPs from here, with these faults (config.parse_usb_faults)."""
    self.faults = parse_usb_faults(spec)
    self.transfer_number = 0
    self.unplugged = False
    self.fw.tlp_faults, self.fw.tlp_number = self.faults, 0

  def _transfer(self, what: str) -> None:
    """Count a transfer and raise the fault it was given, as libusb reports it through pyusb."""
    self.transfer_number += 1
    n = self.transfer_number
    if self.unplugged or n in self.faults.get("unplug", ()):
      self.unplugged = True
      self.fw.queued.clear()
      raise usb.core.USBError(f"No such device (it may have been disconnected) during {what}", errno=errno.ENODEV)
    if n in self.faults.get("stall", ()): raise usb.core.USBError(f"Pipe error during {what}", errno=errno.EPIPE)
    if n in self.faults.get("timeout", ()):
      if what.startswith("bulk") and self.fw.queued: self.fw.queued.popleft()
      raise _timeout(what)

  def _done(self, what: str) -> None:
    """After a transfer was carried out: a `late` one still times out on the host."""
    if self.transfer_number in self.faults.get("late", ()): raise _timeout(what)


def _timeout(what: str): return usb.core.USBTimeoutError(f"Operation timed out during {what}", errno=errno.ETIMEDOUT)


class ASM24Backend(usb.backend.IBackend):
  """pyusb backend over MockBridgeDevice objects (usb.core.find(backend=ASM24Backend([...])))."""

  def __init__(self, devices):
    self.devices = list(devices)
    self.log_kernel_detach: list = []

  # ---- enumeration and descriptors
  def enumerate_devices(self): return iter(self.devices)

  def get_device_descriptor(self, dev):
    return _desc(bLength=18, bDescriptorType=1, bcdUSB=0x0320, bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0,
                 bMaxPacketSize0=9, idVendor=dev.vid, idProduct=dev.pid, bcdDevice=0x0100, iManufacturer=1,
                 iProduct=2, iSerialNumber=0, bNumConfigurations=1, address=dev.address, bus=dev.bus,
                 port_number=1, port_numbers=(1,), speed=5)

  def get_configuration_descriptor(self, dev, config):
    return _desc(bLength=9, bDescriptorType=2, wTotalLength=9 + 9 + 7 * 2, bNumInterfaces=1, bConfigurationValue=1,
                 iConfiguration=0, bmAttributes=0x80, bMaxPower=112, extra_descriptors=[])

  def get_interface_descriptor(self, dev, intf, alt, config):
    return _desc(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=2,
                 bInterfaceClass=0xFF, bInterfaceSubClass=0, bInterfaceProtocol=0, iInterface=0, extra_descriptors=[])

  def get_endpoint_descriptor(self, dev, ep, intf, alt, config):
    return _desc(bLength=7, bDescriptorType=5, bEndpointAddress=(EP_OUT, EP_IN)[ep], bmAttributes=2,
                 wMaxPacketSize=1024, bInterval=0, bRefresh=0, bSynchAddress=0, extra_descriptors=[])

  # ---- handles
  def open_device(self, dev):
    if dev.unplugged: raise usb.core.USBError("No such device", errno=errno.ENODEV)
    return dev

  def close_device(self, h): h.claimed = False
  def set_configuration(self, h, value): pass
  def get_configuration(self, h): return 1
  def set_interface_altsetting(self, h, intf, alt): pass

  def claim_interface(self, h, intf):
    if h.kernel_driver: raise usb.core.USBError("Resource busy (a kernel driver holds interface 0)", errno=errno.EBUSY)
    h.claimed = True

  def release_interface(self, h, intf):
    if h.unplugged: raise usb.core.USBError("No such device", errno=errno.ENODEV)
    h.claimed = False

  def is_kernel_driver_active(self, h, intf): return h.kernel_driver

  def detach_kernel_driver(self, h, intf):
    self.log_kernel_detach.append((h.bus, h.address, intf))
    h.kernel_driver = False

  def clear_halt(self, h, ep):
    self._in_flight_progress(h)
    h._transfer(f"clear halt of endpoint {ep:#04x}")     # a control transfer (CLEAR_FEATURE): counted, faultable
    h.halted.discard(ep)

  # ---- several transfers in flight (the OS interface's asynchronous API; pyusb has none)
  def async_engine(self, h):
    """The engine of h's transfers in flight (asyncengine.py), one per device."""
    if h.engine is None: h.engine = MockAsyncEngine(self, h)
    return h.engine

  @staticmethod
  def _in_flight_progress(h) -> None:
    """A synchronous transfer is a round trip: what the host has in flight progresses meanwhile (and goes first)."""
    if h.engine is not None and h.engine.pending: h.engine.progress()

  # ---- transfers
  def ctrl_transfer(self, h, bm, req, value, index, data, timeout):
    self._in_flight_progress(h)
    return self._ctrl_transfer(h, bm, req, value, index, data, timeout)

  def bulk_write(self, h, ep, intf, data, timeout):
    self._in_flight_progress(h)
    return self._bulk_write(h, ep, intf, data, timeout)

  def bulk_read(self, h, ep, intf, buff, timeout):
    self._in_flight_progress(h)
    return self._bulk_read(h, ep, intf, buff, timeout)

  def _ctrl_transfer(self, h, bm, req, value, index, data, timeout):
    h.timeouts_ms.append(timeout)     # what the host asked for (a test's view; libusb: 0 = none)
    if bm == 0x80 and req == GET_DESCRIPTOR and value >> 8 == DESC_STRING: return self._string(h, value & 0xFF, data)
    if bm & 0x60 != 0x40: raise usb.core.USBError(f"Pipe error (request {req:#x} type {bm:#x})", errno=errno.EPIPE)
    h._transfer(f"control request {req:#04x}")
    n = self._vendor(h, bm, req, value, index, data)
    h._done(f"control request {req:#04x}")
    return n

  def _vendor(self, h, bm, req, value, index, data):
    fw = h.fw
    if bm & 0x80:
      if req == 0xE4: out = fw.xdata_read(value, len(data))
      elif req == 0xF0: out = fw.completion[:len(data)]
      else: raise usb.core.USBError(f"Pipe error (unknown IN request {req:#x})", errno=errno.EPIPE)
      data[:len(out)] = array.array("B", out)
      return len(out)
    payload = bytes(data)
    if req == 0xE5: fw.xdata_write(value, index)
    elif req == 0xF3: fw.power(bool(value))
    elif req == 0xF2:
      self._room(fw, req)
      fw.arm_sram(value, index)
    elif req == 0xF0:
      if len(payload) != 12: raise usb.core.USBError("Pipe error (TLP request needs 12 bytes)", errno=errno.EPIPE)
      lo, hi, v = (int.from_bytes(payload[i:i + 4], "little") for i in (0, 4, 8))
      if index == 0: fw.tlp(value & 0xFF, value >> 8 & 0xF, lo, hi, v)
      elif index in (1, 2):
        self._room(fw, req)
        fw.stream(index, value & 0xFF, lo, hi, v)
      else: raise usb.core.USBError(f"Pipe error (TLP mode {index})", errno=errno.EPIPE)
    else: raise usb.core.USBError(f"Pipe error (unknown OUT request {req:#x})", errno=errno.EPIPE)
    return len(payload)

  @staticmethod
  def _room(fw, req: int) -> None:
    """The firmware holds at most fw.queue_depth announced bursts: one more request that announces one is refused."""
    if len(fw.queued) >= fw.queue_depth:
      raise usb.core.USBError(f"Pipe error (request {req:#04x} refused: {len(fw.queued)} bursts announced and not yet "
                              f"moved, the firmware's queue depth)", errno=errno.EPIPE)

  def _string(self, h, index, data):
    if index == 0: raw = bytes([4, DESC_STRING]) + LANG_EN_US.to_bytes(2, "little")
    else:
      text = {1: MANUFACTURER, 2: h.product}.get(index, "").encode("utf-16-le")
      raw = bytes([2 + len(text), DESC_STRING]) + text
    n = min(len(data), len(raw))
    data[:n] = array.array("B", raw[:n])
    return n

  @staticmethod
  def _halted(h, ep: int, what: str) -> None:
    if ep in h.halted: raise usb.core.USBError(f"Pipe error ({what}: endpoint {ep:#04x} is halted)", errno=errno.EPIPE)

  @staticmethod
  def _next_queued(h, what: str, ep: int, want_ep: int, kinds: tuple, size: int):
    fw = h.fw
    if not fw.queued: raise _timeout(f"{what} (nothing queued: NAKed)")
    head = fw.queued[0]
    if ep != want_ep or head[0] not in kinds or head[2] != size:
      raise usb.core.USBError(f"Pipe error ({what}, firmware expects {head})", errno=errno.EPIPE)
    return fw.queued.popleft()

  def _bulk_write(self, h, ep, intf, data, timeout):
    h.timeouts_ms.append(timeout)     # what the host asked for (a test's view; libusb: 0 = none)
    what = f"bulk OUT of {len(data)} bytes"
    h._transfer(what)
    self._halted(h, ep, what)
    kind, where, size = self._next_queued(h, what, ep, EP_OUT, ("stream_write", "sram_write"), len(data))
    if kind == "stream_write": h.fw.stream_write(where, bytes(data))
    else: h.fw.sram()[where:where + size] = bytes(data)
    h._done(what)
    return len(data)

  def _bulk_read(self, h, ep, intf, buff, timeout):
    h.timeouts_ms.append(timeout)     # what the host asked for (a test's view; libusb: 0 = none)
    what = f"bulk IN of {len(buff)} bytes"
    h._transfer(what)
    self._halted(h, ep, what)
    fw = h.fw
    kind, where, size = self._next_queued(h, what, ep, EP_IN, ("stream_read", "sram_read"), len(buff))
    out = fw.stream_read(where, size) if kind == "stream_read" else bytes(fw.sram()[where:where + size])
    buff[:size] = array.array("B", out)
    h._done(what)
    return size
