"""USBPCIDevice is a drop-in for drivers/system/pci.py's PCIDevice where a driver (AM's AMPCI) uses it: the same
function (the mock endpoint) seen through sysfs on a MockOS and through the mock bridge answers the same calls the
same way: ids, BAR identification by flags, config registers, enable, BAR views (32-bit registers, one 64-bit
doorbell write, bytes), close."""
import pytest

from hcq.autogen import pci as regs
from hcq.config import Config
from hcq.drivers.system.interface import MMIOView
from hcq.drivers.system.mmio import MappedMMIO
from hcq.drivers.system.pci import PCIDevice
from hcq.drivers.system.usbpci import USBPCIDevice
from hcq.mockgpu import MockOS
from hcq.mockgpu.usb import MockUSBEndpoint, mock_usb_bridge


@pytest.fixture(params=["sysfs", "usb"])
def function(request):
  os = MockOS(Config())
  ep = MockUSBEndpoint(monotonic=os.monotonic)
  if request.param == "sysfs":
    os.add_pci_function(ep)
    dev = PCIDevice(os, ep.addr)
  else:
    mock_usb_bridge(os, endpoint=ep)
    dev = USBPCIDevice.open(os)
  yield dev, ep
  dev.close()
  os.close()


def _roles(dev):
  """What AMPCI._identify_bars does: the two largest 64-bit prefetchable BARs and a non-prefetchable one."""
  bars = [b for b in dev.bars() if b.is_memory and b.size]
  big = sorted((b for b in bars if b.is_64bit and b.prefetchable), key=lambda b: -b.size)
  return {"vram": big[0].index, "doorbell": big[1].index, "mmio": [b for b in bars if not b.prefetchable][0].index}


def test_the_same_function_answers_the_same_through_sysfs_and_through_the_bridge(function):
  dev, ep = function
  assert (dev.vendor, dev.device, dev.class_code) == (0x1002, 0x744C, 0x030000)
  assert _roles(dev) == {"vram": 0, "doorbell": 2, "mmio": 5}
  if not dev.enabled: dev.enable()
  assert dev.enabled
  cmd = dev.config_read(regs.PCI_COMMAND, 2)
  dev.config_write(regs.PCI_COMMAND, cmd | regs.PCI_COMMAND_MASTER, 2)
  assert dev.config_read(regs.PCI_COMMAND, 2) & regs.PCI_COMMAND_MASTER
  mmio, db, vram = dev.map_bar(5), dev.map_bar(2), dev.map_bar(0, size=1 << 20)
  assert all(isinstance(v, MMIOView) for v in (mmio, db, vram))
  mmio.write32(0x1000, 0xCAFE)
  assert ep.regs.regs[0x1000] == 0xCAFE and mmio.read32(0x1000) == 0xCAFE
  db.write64(0x8, 0xDEAD_0000_BEEF)
  assert ep.rings[-1] == (0x8, 0xDEAD_0000_BEEF)
  vram.write_bytes(0x40, b"abcdefgh")
  assert vram.read_bytes(0x40, 8) == b"abcdefgh" and ep.vram.read_block(0x40, 8) == b"abcdefgh"


def test_mapped_memory_bars_take_bytes_at_any_offset_like_tlp_views():
  os = MockOS(Config())
  addr = os.alloc_anon(0x2000)
  view = MappedMMIO(addr, 0x2000, "VRAM")
  view.write(3, b"xyz")
  assert view.read(2, 5) == b"\0xyz\0"
  with pytest.raises(Exception, match=r"VRAM: access of 2 bytes at 0x1fff is outside the 0x2000-byte window"): view.read(0x1FFF, 2)
  os.free_anon(addr, 0x2000)
  os.close()
