"""A MockOS with a mock ASM24xx bridge plugged in behind pyusb (mockgpu.usb), opened with USBPCIDevice as on hardware."""
import struct

from hcq.config import Config
from hcq.drivers.system.usbpci import USBPCIDevice, WINDOWS
from hcq.mockgpu import MockOS
from hcq.mockgpu.usb import mock_usb_bridge
from hcq.mockgpu.usb import endpoint as ep


def open_mock(faults: str | None = "", **config):
  os = MockOS(Config(**config))
  plug = mock_usb_bridge(os, faults=faults)
  return os, plug, USBPCIDevice.open(os)


def endpoint_gpu_copy(dev):
  """The mock endpoint's copy engine as the `gpu_copy` of SRAMStaging: its BAR5 registers, one posted write each."""
  return ep.copy_engine(dev.map_bar(5))


def start_timer(dev, offset: int, value: int, delay_us: int) -> None:
  """Make the mock endpoint write `value` at a000 window + offset delay_us from now (a signal to wait for)."""
  regs = dev.map_bar(5)
  addr = WINDOWS["a000"].bus + offset
  regs.write32(ep.TIMER_ADDR, addr & 0xFFFFFFFF)
  regs.write32(ep.TIMER_ADDR + 4, addr >> 32)
  regs.write32(ep.TIMER_VALUE, value)
  regs.write32(ep.TIMER_DELAY_US, delay_us)
  regs.write32(ep.TIMER_GO, 1)


def u32(b: bytes) -> int: return struct.unpack("<I", b)[0]
