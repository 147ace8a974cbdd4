"""The AM driver over the USB bridge (issue 18): AMPCI on an injected USBPCIDevice (the GPU behind the mock bridge),
its lock named apart from the host's PCI functions, VRAM reached through the BAR view's TLPs."""
import struct

import pytest

from hcq.autogen import pci as regs
from hcq.config import Config
from hcq.drivers.amd.am.pci import AMPCI
from hcq.drivers.system.usbpci import USBPCIDevice
from hcq.errors import DeviceError
from hcq.mockgpu import MockOS
from hcq.mockgpu.usb import MockUSBEndpoint, mock_usb_bridge


@pytest.fixture
def usb(tmp_path):
  os = MockOS(Config(lock_dir=str(tmp_path)))
  ep = MockUSBEndpoint(monotonic=os.monotonic)
  mock_usb_bridge(os, endpoint=ep)
  yield os, ep
  os.close()


def test_ampci_takes_an_injected_usb_device(usb, tmp_path):
  os, ep = usb
  dev = USBPCIDevice.open(os)
  with AMPCI(os, device=dev, label="USB+AMD") as am:
    assert am.pci is dev and am.addr == "0000:04:00.0"
    assert am.bar_index == {"vram": 0, "doorbell": 2, "mmio": 5}
    assert ep.command & regs.PCI_COMMAND_MASTER
    # the lock is not the host's am_0000:04:00.0: the function's address is the bridge's private tree's
    assert os.held_locks() == [str(tmp_path / "am_fb00:04:00.0.lock")]
    am.vram.write(0x41, b"through TLPs")
    assert ep.vram.read_block(0x41, 12) == b"through TLPs" and am.vram.read(0x41, 12) == b"through TLPs"
    am.mmio.write32(0x1000, 7)
    assert ep.regs.regs[0x1000] == 7
  assert os.held_locks() == [] and not ep.command & regs.PCI_COMMAND_MASTER and dev.bridge is None


def test_ampci_refuses_an_injected_device_it_does_not_boot_and_leaves_it_open(usb):
  os, ep = usb
  struct.pack_into("<H", ep.config, regs.PCI_DEVICE_ID, 0x1234)
  dev = USBPCIDevice.open(os)
  with pytest.raises(DeviceError, match="device 0x1234 is not one AM boots"): AMPCI(os, device=dev)
  assert dev.bridge is not None and os.held_locks() == []
  dev.close()


def test_ampci_wants_an_address_or_a_device(usb):
  os, _ = usb
  with pytest.raises(DeviceError, match="one of them"): AMPCI(os)
