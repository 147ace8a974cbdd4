"""PyUSBTransport through pyusb, with a recording backend passed in (pyusb's documented backend interface,
usb.backend.IBackend) so that real pyusb code (descriptor walk, endpoint lookup, claim) runs without a device."""
import array
import types

import pytest
import usb.backend
import usb.core

from hcq.drivers.system.usb import PyUSBTransport
from hcq.errors import DeviceError, Timeout

VID, PID = 0xADD1, 0x0001


def desc(**kw): return types.SimpleNamespace(**kw)


class RecordingBackend(usb.backend.IBackend):
  """Devices with one configuration, interface 0, bulk OUT 0x02 and bulk IN 0x81 (USB 2.0 spec §9.6)."""

  def __init__(self, ids, fail_bulk=None):
    self.ids, self.log, self.fail_bulk = ids, [], fail_bulk
    self.to_read = b""

  def enumerate_devices(self): return list(range(len(self.ids)))

  def get_device_descriptor(self, dev):
    vid, pid = self.ids[dev]
    return desc(bLength=18, bDescriptorType=1, bcdUSB=0x0320, bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0,
                bMaxPacketSize0=64, idVendor=vid, idProduct=pid, bcdDevice=1, iManufacturer=0, iProduct=0,
                iSerialNumber=0, bNumConfigurations=1, address=dev + 5, bus=2, port_number=1, port_numbers=(1,), speed=4)

  def get_configuration_descriptor(self, dev, config):
    return desc(bLength=9, bDescriptorType=2, wTotalLength=32, bNumInterfaces=1, bConfigurationValue=1,
                iConfiguration=0, bmAttributes=0x80, bMaxPower=50, extra_descriptors=[])

  def get_interface_descriptor(self, dev, intf, alt, config):
    return desc(bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=2,
                bInterfaceClass=0xff, bInterfaceSubClass=0, bInterfaceProtocol=0, iInterface=0, extra_descriptors=[])

  def get_endpoint_descriptor(self, dev, ep, intf, alt, config):
    return desc(bLength=7, bDescriptorType=5, bEndpointAddress=(0x02, 0x81)[ep], bmAttributes=2, wMaxPacketSize=1024,
                bInterval=0, bRefresh=0, bSynchAddress=0, extra_descriptors=[])

  def open_device(self, dev):
    self.log.append(("open", dev))
    return dev

  def close_device(self, h): self.log.append(("close", h))
  def set_configuration(self, h, value): self.log.append(("set_configuration", value))
  def get_configuration(self, h): return 1
  def claim_interface(self, h, intf): self.log.append(("claim", intf))
  def release_interface(self, h, intf): self.log.append(("release", intf))

  def bulk_write(self, h, ep, intf, data, timeout):
    if self.fail_bulk: raise self.fail_bulk
    self.log.append(("bulk_write", ep, bytes(data), timeout))
    return len(data)

  def bulk_read(self, h, ep, intf, buff, timeout):
    self.log.append(("bulk_read", ep, len(buff), timeout))
    n = min(len(buff), len(self.to_read))
    buff[:n] = array.array("B", self.to_read[:n])
    return n

  def ctrl_transfer(self, h, bm, req, value, index, data, timeout):
    self.log.append(("ctrl", bm, req, value, index, bytes(data) if bm & 0x80 == 0 else len(data), timeout))
    if bm & 0x80:
      data[:4] = array.array("B", b"\x78\x56\x34\x12")
      return 4
    return len(data)


def test_open_selects_by_ids_and_index_and_claims():
  be = RecordingBackend([(0x1234, 0x5678), (VID, PID), (VID, PID)])
  t = PyUSBTransport.open(VID, PID, 1, backend=be)
  assert "add1:0001" in t.name and "usb:2-7" in t.name  # the second matching device (enumeration index 2)
  assert ("set_configuration", 1) in be.log and ("claim", 0) in be.log
  t.close()
  assert ("release", 0) in be.log


def test_transfers_go_through_pyusb():
  be = RecordingBackend([(VID, PID)])
  with PyUSBTransport.open(VID, PID, backend=be) as t:
    assert t.control(0x40, 0xF3, 1, 0, b"", 500) == 0
    assert t.control(0xC0, 0xF0, 0, 0, 8, 500) == b"\x78\x56\x34\x12"
    assert t.bulk_write(0x02, b"abcd", 250) == 4
    be.to_read = b"xyz"
    assert t.bulk_read(0x81, 16, 250) == b"xyz"
  assert ("ctrl", 0x40, 0xF3, 1, 0, b"", 500) in be.log and ("ctrl", 0xC0, 0xF0, 0, 0, 8, 500) in be.log
  assert ("bulk_write", 0x02, b"abcd", 250) in be.log and ("bulk_read", 0x81, 16, 250) in be.log


def test_missing_device_names_the_ids():
  with pytest.raises(DeviceError, match=r"add1:0001 index 0: not found \(0 such devices"):
    PyUSBTransport.open(VID, PID, backend=RecordingBackend([(0x1234, 0x5678)]))
  with pytest.raises(DeviceError, match=r"index 1: not found \(1 such device present"):
    PyUSBTransport.open(VID, PID, 1, backend=RecordingBackend([(VID, PID)]))


def test_errors_name_the_device_and_endpoint():
  be = RecordingBackend([(VID, PID)], fail_bulk=usb.core.USBError("pipe error", errno=32))
  t = PyUSBTransport.open(VID, PID, backend=be)
  with pytest.raises(DeviceError, match=r"add1:0001.*bulk write of 4 bytes to endpoint 0x02 failed"): t.bulk_write(2, b"abcd", 10)
  be.fail_bulk = usb.core.USBTimeoutError("timed out", errno=110)
  with pytest.raises(Timeout, match=r"bulk write .* after 0.01 s"): t.bulk_write(2, b"abcd", 10)


def test_no_backend_is_a_clear_error(monkeypatch):
  # pyusb raises NoBackendError when no libusb is installed: on this machine that is the real situation
  # unless libusb-1.0 is present, so force it only when a backend exists.
  def no_backend(*a, **kw): raise usb.core.NoBackendError("No backend available")
  monkeypatch.setattr(usb.core, "find", no_backend)
  with pytest.raises(DeviceError, match="add1:0001: no libusb backend"): PyUSBTransport.open(VID, PID)


def test_linux_os_usb_open_reports_missing_device_or_backend():
  from hcq.config import Config
  from hcq.drivers.system import LinuxOS
  with pytest.raises(DeviceError, match="add1:0001"): LinuxOS(Config()).usb_open(VID, PID)
