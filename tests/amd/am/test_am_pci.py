"""drivers/amd/am/pci.py on the mock Navi 31: ids, the device lock, bus mastering, BAR roles, system memory."""
import os as _os

import pytest

from hcq.autogen import pci as pci_regs
from hcq.config import Config
from hcq.drivers.amd.am.pci import AMPCI
from hcq.errors import DeviceError
from hcq.mockgpu import MockOS
from hcq.mockgpu.amd.am.gpu import MockNavi31
from hcq.mockgpu.mmio import MemoryMMIO
from hcq.mockgpu.pci import PCIFunction

ADDR = "0000:03:00.0"


def test_open_identifies_bars_and_enables_bus_mastering(navi):
  os, gpu = navi
  assert not gpu.function.command & pci_regs.PCI_COMMAND_MASTER
  with AMPCI(os, ADDR) as dev:
    assert dev.bar_index == {"vram": 0, "doorbell": 2, "mmio": 5}
    assert dev.bar_size("vram") == gpu.vram_size and dev.vram_bus_address() == gpu.function.bars[0].bus_address
    assert gpu.function.command & pci_regs.PCI_COMMAND_MASTER and gpu.function.command & pci_regs.PCI_COMMAND_MEMORY
    assert dev.bus_master and gpu.function.enabled
    assert dev.mmio.read32(0xDE3 * 4) == gpu.vram_size >> 20      # RCC_CONFIG_MEMSIZE through the MMIO BAR
    dev.disable_bus_master()
    assert not dev.bus_master


def test_second_open_names_the_holder_and_close_frees_it(navi, tmp_path):
  os, _ = navi
  dev = AMPCI(os, ADDR)
  with pytest.raises(DeviceError, match=rf"0000:03:00.0 is in use: held by pid {_os.getpid()} .*am_0000:03:00.0.lock.*hcq-smi amd kill_pids"):
    AMPCI(os, ADDR)
  assert os.held_locks() == [str(tmp_path / "am_0000:03:00.0.lock")]
  dev.close()
  dev.close()
  assert os.held_locks() == []
  AMPCI(os, ADDR).close()


def test_address_and_ids_are_checked_before_the_lock(navi):
  os, _ = navi
  with pytest.raises(DeviceError, match="'0000:3:00.0' is not a PCI address"): AMPCI(os, "0000:3:00.0")
  fn = PCIFunction("0000:04:00.0", 0x1002, 0x1234, 0x030000)
  fn.add_bar(0, MemoryMMIO("x", os.alloc_anon(0x1000), 0x1000))
  os.add_pci_function(fn)
  with pytest.raises(DeviceError, match="device 0x1234 is not one AM boots"): AMPCI(os, "0000:04:00.0")
  assert os.held_locks() == []


def test_bar_layout_not_navi_is_refused_and_unlocks(tmp_path):
  os = MockOS(Config(lock_dir=str(tmp_path)))
  fn = PCIFunction(ADDR, 0x1002, 0x744C, 0x030000)
  fn.add_bar(0, MemoryMMIO("vram", os.alloc_anon(0x10000), 0x10000), prefetchable=True)
  os.add_pci_function(fn)
  with pytest.raises(DeviceError, match=r"expected two 64-bit prefetchable BARs.*BAR0\(mem"): AMPCI(os, ADDR)
  assert os.held_locks() == []
  os.close()


def test_sysmem_pages_have_physical_addresses(navi):
  os, _ = navi
  with AMPCI(os, ADDR) as dev:
    mem = dev.alloc_sysmem(3 * 4096 + 1)
    assert mem.size == 4 * 4096 and len(mem.paddrs) == 4
    assert mem.paddrs == os.phys_addrs(mem.addr, mem.size)
    mem.view[0:4] = b"\x01\x02\x03\x04"
    assert bytes(os.memview(mem.addr, 4)) == b"\x01\x02\x03\x04"
