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


@pytest.fixture(scope="module")
def fw_dir():
  from hcq.autogen import fwpackage, sources
  from hcq.config import from_env
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e: pytest.skip(f"cannot fetch {fwpackage.PACKAGE['name']}: {e}")


@pytest.fixture
def navi_usb(fw_dir, tmp_path):
  """(os, gpu): the mock Navi 31 is the mock bridge's endpoint, not a sysfs function."""
  from hcq.mockgpu.amd.am.gpu import add_navi31_usb
  os = MockOS(Config(timeout_s=0.5, lock_dir=str(tmp_path), firmware_dir=fw_dir))
  gpu = add_navi31_usb(os)
  yield os, gpu
  os.close()


def test_the_mock_navi31_sits_behind_the_bridge_not_in_sysfs(navi_usb):
  from hcq.drivers.amd.am.device import find_functions
  os, gpu = navi_usb
  assert find_functions(os) == []
  with USBPCIDevice.open(os) as dev:
    assert (dev.vendor, dev.device) == (0x1002, 0x744C)
    assert [b.index for b in dev.bars() if b.size] == [0, 2, 5] and dev.bar(0).size == gpu.vram_size
  assert gpu.bridge.fw.endpoint is gpu.function


def test_am_boots_the_navi31_behind_the_bridge_with_the_real_firmware(navi_usb):
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_usb
  with AMDev(os, None, os.config, device=USBPCIDevice.open(os)) as am:
    assert am.stage == "gfx" and am.label.startswith("USB+AMD ASM24 bridge")
    assert "RLC autoload complete: GFX firmware running" in [s for b, s, _ in am.steps if b == "gfx"]
    # every register and VRAM access was a TLP through the bridge
    assert gpu.bridge.fw.counts["tlps"] > 100
    buf = am.vram.alloc(0x1000, "test")
    am.vram.write(buf.offset + 3, b"usb")
    assert bytes(gpu.vram[buf.offset + 3:buf.offset + 6]) == b"usb" and am.vram.read(buf.offset + 2, 5) == b"\0usb\0"
  assert os.held_locks() == []


def test_system_memory_behind_the_bridge_is_its_sram_mapped_by_the_gpu_page_tables(navi_usb):
  from hcq.drivers.amd.am import gmc as G
  from hcq.drivers.amd.am.device import AMDev
  os, gpu = navi_usb
  with AMDev(os, None, os.config, device=USBPCIDevice.open(os)) as am:
    mem = am.pci.alloc_sysmem(0x2001)
    assert mem.addr is None and mem.view is None and mem.size == 0x3000
    assert mem.paddrs == [0x200000, 0x201000, 0x202000]          # the SRAM window's GPU bus addresses
    mem.write(0x1FFE, b"sram")
    assert bytes(gpu.bridge.fw.sram()[0x1FFE:0x2002]) == b"sram" and mem.read(0x1FFD, 6) == b"\0sram\0"
    va = G.VM_BASE + 0x4000_0000
    am.gmc.map(va, mem.paddrs, system=True)
    assert gpu.gchub.translate(va + 0x2001) == ("system", 0x202001)
    with pytest.raises(DeviceError, match=r"has no CPU address; it cannot be placed at 0x1000000"):
      am.pci.alloc_sysmem(0x1000, addr=0x100_0000)
    with pytest.raises(DeviceError, match=r"bus address 0x200000: 2 bytes at 0x2fff are outside"): mem.read(0x2FFF, 2)
    am.pci.free_sysmem(mem)


def test_the_bench_counts_the_usb_transfers_of_the_am_boot(fw_dir, capsys):
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "usb.py"
  spec = importlib.util.spec_from_file_location("bench_usb", path)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  r = bench.am_boot_transfers(fw_dir)
  # every TLP is at least one transfer, and the boot (hundreds of register accesses, MiBs of firmware) takes hundreds
  assert r["stage"] == "gfx" and r["transfers"] == sum(r["by_kind"].values()) >= r["tlps"] > 100 and r["setup"] > 0
  assert bench.main(["--am-boot", "--firmware-dir", fw_dir]) == 0
  assert f"AM boot through the bridge to gfx: {r['transfers']} USB transfers" in capsys.readouterr().out
