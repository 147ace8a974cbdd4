"""The mock USB path: an ASM24xx bridge with the custom firmware (firmware.py) behind a pyusb backend (backend.py),
with a PCIe endpoint at bus 4 (endpoint.py until the AM mock GPU takes its place).

  os = MockOS(config); bridge = mock_usb_bridge(os)        # os.usb_open() now reaches it through pyusb
  dev = USBPCIDevice.open(os)                              # drivers/system/usbpci.py, as on hardware
"""
from __future__ import annotations

from .backend import ASM24Backend, MockBridgeDevice, PRODUCT, VID, PID
from .endpoint import MockUSBEndpoint
from .firmware import ASM24Firmware

__all__ = ["ASM24Backend", "ASM24Firmware", "MockBridgeDevice", "MockUSBEndpoint", "mock_usb_bridge", "VID", "PID", "PRODUCT"]


def mock_usb_bridge(os, endpoint=None, faults: str | None = None, product: str = PRODUCT) -> MockBridgeDevice:
  """Plug a mock bridge (with `endpoint`, default a MockUSBEndpoint, at bus 4) into MockOS `os`: its usb_open then
  goes through pyusb with an ASM24Backend. faults: a fault spec (config.parse_usb_faults), default the config's
  usb_mock_faults (HCQ_USB_MOCK_FAULTS). Returns the device (its .fw is the firmware model)."""
  endpoint = endpoint if endpoint is not None else MockUSBEndpoint(monotonic=os.monotonic)
  fw = ASM24Firmware(endpoint, memory=os.memory)
  dev = MockBridgeDevice(fw, product=product, faults=os.config.usb_mock_faults if faults is None else faults)
  backend = os.usb_backend if isinstance(os.usb_backend, ASM24Backend) else ASM24Backend([])
  backend.devices.append(dev)
  os.set_usb_backend(backend)
  return dev
