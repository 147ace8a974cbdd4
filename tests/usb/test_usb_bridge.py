"""The ASM24xx bridge driver (drivers/system/asm24.py, usbpci.py) over pyusb on the mock bridge (mockgpu/usb):
discovery, bring-up of the PCIe tree, config and memory access byte-exact at odd offsets and sizes, the SRAM and
copies bounced through it, and the USB transfers each access costs."""
import os as _os

import pytest

from hcq.autogen import pci as regs
from hcq.config import Config
from hcq.drivers.system import asm24
from hcq.drivers.amd.am.usbstaging import SRAMStaging
from hcq.drivers.system.usbpci import USBPCIDevice, WINDOWS
from hcq.drivers.system.usbpcisetup import MEM_BASE, PREF_BASE
from hcq.errors import DeviceError
from hcq.mockgpu import MockOS
from hcq.mockgpu.usb import mock_usb_bridge
from hcq.mockgpu.usb.endpoint import VRAM_MAX
from usb_fixtures import endpoint_gpu_copy, open_mock, u32


@pytest.fixture
def mock():
  os, plug, dev = open_mock()
  yield os, plug, dev
  dev.close()
  os.close()


def test_discovery_checks_the_product_string_and_detaches_the_kernel_driver():
  os = MockOS(Config())
  plug = mock_usb_bridge(os, product="USB3.2 storage")     # the stock firmware's ids but not the custom firmware
  with pytest.raises(DeviceError, match=r"add1:0001.*product 'USB3.2 storage' does not start with 'custom' or 'AS2462'"):
    USBPCIDevice.open(os)
  plug.product = "custom mock ASM2464PD"
  assert plug.kernel_driver
  with USBPCIDevice.open(os) as dev:
    assert not plug.kernel_driver and os.usb_backend.log_kernel_detach == [(1, 2, 0)]
    assert "add1:0001" in dev.name
  os.close()


def test_no_bridge_is_a_clear_error():
  os = MockOS(Config())
  with pytest.raises(DeviceError, match="no ASM24xx bridge with the custom firmware #0: .*add1:0001"): USBPCIDevice.open(os)
  os.close()


def test_setup_numbers_buses_opens_windows_and_assigns_bars(mock):
  os, plug, dev = mock
  for b in range(4):
    cfg = plug.fw.bridges[b].config
    assert (cfg[regs.PCI_PRIMARY_BUS], cfg[regs.PCI_SECONDARY_BUS], cfg[regs.PCI_SUBORDINATE_BUS]) == (b, b + 1, 4)
    assert plug.fw.bridges[b].routes_memory(PREF_BASE, 4) and plug.fw.bridges[b].routes_memory(MEM_BASE, 4)
  assert (dev.vendor, dev.device, dev.class_code) == (0x1002, 0x744C, 0x030000)
  bars = {b.index: b for b in dev.bars() if b.size}
  assert sorted(bars) == [0, 2, 5]
  assert bars[0].size == VRAM_MAX and bars[0].prefetchable and bars[0].is_64bit     # Resizable BAR: the largest size
  for b in bars.values(): assert b.start % b.size == 0                                # naturally aligned
  assert bars[0].start >= PREF_BASE and bars[2].start >= PREF_BASE and MEM_BASE <= bars[5].start < 1 << 32
  assert dev.config_read(regs.PCI_COMMAND, 2) & (regs.PCI_COMMAND_MEMORY | regs.PCI_COMMAND_MASTER) == 6
  assert plug.fw.endpoint.bars[0].size == VRAM_MAX


def test_config_access_at_every_width_and_offset(mock):
  os, plug, dev = mock
  cfg = plug.fw.endpoint.config
  assert dev.config_read(regs.PCI_VENDOR_ID, 2) == 0x1002 and dev.config_read(regs.PCI_DEVICE_ID, 2) == 0x744C
  assert dev.config_read(regs.PCI_CLASS_REVISION + 3, 1) == 0x03
  assert dev.config_read_bytes(1, 6) == bytes(cfg[1:7])
  dev.config_write(0x41, 0xAB, 1)        # an odd byte: byte enable 0b0010, neighbours kept
  dev.config_write(0x46, 0xCDEF, 2)
  assert cfg[0x40:0x48] == bytes([0, 0xAB, 0, 0, 0, 0, 0xEF, 0xCD])
  assert dev.config_read(0x41, 1) == 0xAB and dev.config_read(0x46, 2) == 0xCDEF
  with pytest.raises(DeviceError, match=r"config access of 2 bytes at 0x41 on bus 4 is outside .* or misaligned"):
    dev.config_read(0x41, 2)


@pytest.mark.parametrize("offset,size", [(0, 1), (3, 1), (5, 2), (7, 9), (1, 1 << 20 | 1), ((1 << 30) - 3, 5 << 20 | 3)])
def test_memory_through_a_bar_is_byte_exact(mock, offset, size):
  os, plug, dev = mock
  vram = dev.map_bar(0)
  data = _os.urandom(size)
  before = plug.fw.endpoint.vram.read_block(offset - 1, 1) if offset else b""
  after = plug.fw.endpoint.vram.read_block(offset + size, 1)
  vram.write(offset, data)
  assert plug.fw.endpoint.vram.read_block(offset, size) == data                # what the device holds
  assert vram.read(offset, size) == data                                        # and what comes back
  assert (plug.fw.endpoint.vram.read_block(offset - 1, 1) if offset else b"") == before
  assert plug.fw.endpoint.vram.read_block(offset + size, 1) == after            # no byte around it touched


def test_mmio_costs_in_usb_transfers(mock):
  os, plug, dev = mock
  regs5, db = dev.map_bar(5), dev.map_bar(2)
  n = dev.bridge.transfers
  regs5.write32(0x100, 0x1234)
  assert dev.bridge.transfers - n == 1                  # a posted MWr: one control OUT, no completion read
  assert regs5.read32(0x100) == 0x1234
  assert dev.bridge.transfers - n == 3                  # a read: request + completion
  db.write64(0x10, 0x1122334455667788)
  assert dev.bridge.transfers - n == 5 and plug.fw.endpoint.rings[-1] == (0x10, 0x1122334455667788)   # one 64-bit write
  m = dev.bridge.transfers
  dev.map_bar(0).write(0, bytes(4 << 20))
  assert dev.bridge.transfers - m == 2                  # 4 MiB stream: request + one bulk OUT


def test_a_request_outside_every_bar_is_an_unsupported_request_naming_the_address(mock):
  os, plug, dev = mock
  with pytest.raises(asm24.CompletionError, match=r"MRd64 at 0x10100000: unsupported request") as e:
    dev.bridge.tlp(0x20, 0x1010_0000)
  assert e.value.address == 0x1010_0000


@pytest.mark.parametrize("delta,size", [(0, 5), (0, 67), (2, 64)])
def test_a_streaming_access_of_partial_dwords_is_refused_not_truncated(mock, delta, size):
  os, plug, dev = mock
  addr = dev.bar(0).start + 64 + delta
  before = plug.transfer_number
  with pytest.raises(DeviceError, match=rf"streaming write of {size} bytes at {addr:#x}: not whole dwords"):
    dev.bridge.stream_write(addr, bytes(range(size)))
  with pytest.raises(DeviceError, match=rf"streaming read of {size} bytes at {addr:#x}: not whole dwords"):
    dev.bridge.stream_read(addr, size)
  assert plug.transfer_number == before      # refused before anything went on the bus

@pytest.mark.parametrize("offset,size", [(0, 1), (511, 2), (16 << 10, 16 << 10), (3, (512 << 10) - 3), (100_001, 77)])
def test_sram_reads_and_writes_are_byte_exact(mock, offset, size):
  os, plug, dev = mock
  sram = plug.fw.sram()
  sram[:] = _os.urandom(len(sram))
  old = bytes(sram)
  data = _os.urandom(size)
  dev.sram.write(offset, data)
  assert bytes(sram) == old[:offset] + data + old[offset + size:]      # only those bytes changed
  assert dev.sram.read(offset, size) == data


@pytest.mark.parametrize("offset,size", [(1, 1), (4093, (1 << 20) + 1), (7, (16 << 20) - 5)])
def test_copies_bounced_through_the_sram_are_byte_exact_both_ways(mock, offset, size):
  os, plug, dev = mock
  staging = SRAMStaging(dev, endpoint_gpu_copy(dev))
  vram_bus = dev.bar(0).start
  data = _os.urandom(size)
  staging.copyin(vram_bus + offset, data)
  assert plug.fw.endpoint.vram.read_block(offset, size) == data
  assert staging.copyout(vram_bus + offset, size) == data
  assert u32(dev.read_window("a000", 0, 4)) == staging.seq


def test_copy_in_waits_for_the_fence_before_reusing_a_buffer(mock):
  os, plug, dev = mock
  staging = SRAMStaging(dev, endpoint_gpu_copy(dev), chunk=16 << 10)
  polls = []
  wait = dev.wait_signal
  dev.wait_signal = lambda w, off, value, **kw: (polls.append(value), wait(w, off, value, **kw))[1]
  staging.copyin(dev.bar(0).start, bytes(5 * (16 << 10)))
  assert polls == [1, 2, 3, 5]          # chunk i waits for chunk i-2's copy; the end waits for the last


def test_xdata_windows_and_link_state(mock):
  os, plug, dev = mock
  assert dev.bridge.link_up and dev.bridge.ltssm() == 0x78
  dev.write_window("b800", 5, b"abc")
  assert plug.fw.windows["b800"][2][5:8] == b"abc" and dev.read_window("b800", 4, 5) == b"\0abc\0"
  with pytest.raises(DeviceError, match="a000 window read of 8 at 0xffc is outside 0x1000"): dev.read_window("a000", 0xFFC, 8)


def test_xdata_reads_are_split_in_255_byte_requests_and_bounded(mock):
  os, plug, dev = mock
  plug.fw.xdata[0x1000:0x1200] = bytes(range(256)) * 2
  n = dev.bridge.counts["control_in"]
  assert dev.bridge.xdata_read(0x1000, 0x200) == bytes(range(256)) * 2
  assert dev.bridge.counts["control_in"] - n == 3      # 255 + 255 + 2
  with pytest.raises(DeviceError, match=r"XDATA read at 0xfff0\+32 is outside 64 KiB"): dev.bridge.xdata_read(0xFFF0, 32)
  with pytest.raises(DeviceError, match=r"XDATA write at 0xffff\+2 is outside 64 KiB"): dev.bridge.xdata_write(0xFFFF, b"ab")


def test_system_memory_in_the_sram_is_what_the_gpu_reads_at_its_bus_address(mock):
  os, plug, dev = mock
  a, b = dev.alloc_sysmem(100), dev.alloc_sysmem(0x2000, align=0x2000)
  assert (a.bus, b.bus) == (WINDOWS["sram"].bus, WINDOWS["sram"].bus + 0x2000)
  b.write(7, b"ring")
  assert plug.fw.dma_read(b.bus + 7, 4) == b"ring"              # the GPU's view of it
  plug.fw.dma_write(a.bus + 1, b"wb")
  assert a.read(0, 4) == b"\0wb\0"
  with pytest.raises(DeviceError, match="no room for 0x40000 bytes of system memory"): dev.alloc_sysmem(256 << 10)
  with pytest.raises(DeviceError, match=r"GPU address 0x200000: 2 bytes at 0x63 is outside its 0x64"): a.read(99, 2)


def test_threads_sharing_the_bridge_get_their_own_completions_and_bursts(mock):
  """A request and the transfers that answer it (a TLP's completion read, a burst's bulk transfer) are one sequence:
  another thread's request between them took its completion or its burst (a register read returned another
  register's value). libusb releases the GIL for each transfer; the mock's transfers do so here too."""
  import threading
  import time
  os, plug, dev = mock
  bar = dev.map_bar(0)
  bar.write(0, bytes(range(256)) * 16)
  t = dev.bridge.usb
  for name in ("control", "bulk_write", "bulk_read"):
    inner = getattr(t, name)
    def released(*a, _inner=inner, **k):
      time.sleep(0)
      return _inner(*a, **k)
    setattr(t, name, released)
  wrong = []
  def reader(offset, size):
    want = (bytes(range(256)) * 16)[offset:offset + size]
    for _ in range(200):
      got = bar.read(offset, size)
      if got != want: wrong.append((offset, got))
  threads = [threading.Thread(target=reader, args=a) for a in ((0, 4), (64, 4), (128, 64), (1024, 8))]
  for th in threads: th.start()
  for th in threads: th.join()
  assert wrong == []


def test_ctrl_c_between_a_request_and_its_burst_does_not_shift_the_next_burst(mock):
  """Ctrl-C right after a streaming write's request reached the firmware, before its bulk transfer: the firmware's
  queued burst must not answer the next request's bulk transfer (the next write's data landed at the interrupted
  write's address, its own address never written, its burst left for the transfer after)."""
  os, plug, dev = mock
  bar = dev.map_bar(0)
  bar.write(0x1000, bytes(16))
  bar.write(0x2000, bytes(16))
  bridge = dev.bridge
  def interrupted(*a, **k):
    type(bridge)._stream(bridge, *a, **k)
    raise KeyboardInterrupt
  bridge._stream = interrupted
  with pytest.raises(KeyboardInterrupt): bar.write(0x1000, b"A" * 16)
  del bridge._stream
  assert not plug.fw.queued                       # nothing left for the next request's transfer
  bar.write(0x2000, b"B" * 16)
  assert bar.read(0x2000, 16) == b"B" * 16 and bar.read(0x1000, 16) == b"A" * 16
