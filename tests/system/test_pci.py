"""PCIDevice against a fake sysfs tree, and against this machine's real sysfs compared with lspci."""
import re
import subprocess

import pytest

from fake_sysfs import add_driver, add_pci_function
from hcq.config import Config
from hcq.drivers.system import LinuxOS
from hcq.drivers.system.pci import PCIDevice
from hcq.errors import DeviceError

MEM, MEM64, PREFETCH, IO = 0x200, 0x100000, 0x2000, 0x100


@pytest.fixture
def sysfs(tmp_path):
  root = tmp_path / "sys"
  add_pci_function(root, "0000:00:00.0", 0x8086, 0x0d57, 0x060000)
  add_pci_function(root, "0000:03:00.0", 0x1002, 0x744c, 0x030000, revision=0xc8, driver="amdgpu",
                   bars={0: (0x7000000000, 0x10000, MEM | MEM64 | PREFETCH), 2: (0x7010000000, 0x2000, MEM | MEM64),
                         4: (0xe000, 0x100, IO), 5: (0xfc900000, 0x4000, MEM)})
  add_pci_function(root, "0000:03:00.1", 0x1002, 0xab30, 0x040300)
  add_pci_function(root, "0000:41:00.0", 0x10de, 0x2684, 0x030200, with_reset=False)
  add_pci_function(root, "0001:c1:00.0", 0x14e4, 0x1750, 0x020000, driver="bnxt_en")
  return root


@pytest.fixture
def linux(sysfs, tmp_path):
  return LinuxOS(Config(sysfs_root=str(sysfs), lock_dir=str(tmp_path)))


def addrs(devs): return [d.addr for d in devs]


def test_enumerate_all_sorted(linux):
  assert addrs(PCIDevice.enumerate(linux)) == ["0000:00:00.0", "0000:03:00.0", "0000:03:00.1", "0000:41:00.0", "0001:c1:00.0"]


def test_enumerate_filters(linux):
  assert addrs(PCIDevice.enumerate(linux, vendor=0x1002)) == ["0000:03:00.0", "0000:03:00.1"]
  assert addrs(PCIDevice.enumerate(linux, vendor=0x1002, device=0xab30)) == ["0000:03:00.1"]
  assert addrs(PCIDevice.enumerate(linux, device=[0x744c, 0x2684])) == ["0000:03:00.0", "0000:41:00.0"]
  assert addrs(PCIDevice.enumerate(linux, cls=0x03)) == ["0000:03:00.0", "0000:41:00.0"]        # base class: display
  assert addrs(PCIDevice.enumerate(linux, cls=0x0302)) == ["0000:41:00.0"]                      # 3D controller
  assert addrs(PCIDevice.enumerate(linux, cls=0x020000)) == ["0001:c1:00.0"]                    # full code
  assert PCIDevice.enumerate(linux, vendor=0x1234) == []


def test_enumerate_skips_names_that_are_not_addresses(linux, sysfs):
  add_pci_function(sysfs, "0000:03:00.0;reboot", 0x1002, 0x744c, 0x030000)
  with pytest.warns(UserWarning, match="not a PCI address"):
    assert "0000:03:00.0;reboot" not in addrs(PCIDevice.enumerate(linux))


def test_identity(linux):
  d = PCIDevice(linux, "0000:03:00.0")
  assert (d.vendor, d.device, d.class_code, d.revision) == (0x1002, 0x744c, 0x030000, 0xc8)
  assert d.driver == "amdgpu"
  assert PCIDevice(linux, "0000:03:00.1").driver is None


@pytest.mark.parametrize("bad", ["0000:03:00.8", "3:00.0", "0000:03:00.0/../..", "0000:03:00.0 ", "0000:03:20.0",
                                 "../../etc", "0000:03:00.0;id", "0000:0G:00.0", "0000:03:00.0\n"])
def test_addresses_are_validated(linux, bad):
  with pytest.raises(DeviceError, match="not a PCI address"): PCIDevice(linux, bad)


@pytest.mark.parametrize("good", ["0000:03:00.0", "0001:c1:1f.7", "10000:e0:00.0", "ffffffff:00:00.0"])
def test_addresses_of_every_domain_are_accepted(linux, good):
  """Intel VMD puts NVMe and sometimes GPUs behind synthetic domains 10000+ (5 digits in sysfs and lspci -D)."""
  from hcq.drivers.system.locks import lock_name, parse_lock_name
  assert PCIDevice(linux, good).addr == good
  assert parse_lock_name(lock_name("am", good)) == ("am", good)


@pytest.mark.parametrize("bad", ["100000000:00:00.0", "000:03:00.0", "0000:3:00.0", "0000:03:00.0:0"])
def test_domain_width_is_bounded(linux, bad):
  with pytest.raises(DeviceError, match="not a PCI address"): PCIDevice(linux, bad)


def test_config_space_read_write(linux, sysfs):
  d = PCIDevice(linux, "0000:03:00.0")
  assert d.config_read(0, 2) == 0x1002 and d.config_read(2, 2) == 0x744c and d.config_read(0) == 0x744c1002
  assert d.config_read(8, 1) == 0xc8
  d.config_write(0x04, 0x0406, 2)
  d.config_write(0x40, 0xdeadbeef, 4)
  raw = (sysfs / "bus/pci/devices/0000:03:00.0/config").read_bytes()
  assert raw[4:6] == b"\x06\x04" and raw[0x40:0x44] == bytes.fromhex("efbeadde") and len(raw) == 256
  assert d.config_read(0x40) == 0xdeadbeef
  with pytest.raises(DeviceError, match="0000:03:00.0.*returned 0"): d.config_read(0x100)
  with pytest.raises(DeviceError, match="misaligned"): d.config_write(0x41, 1, 4)
  with pytest.raises(DeviceError, match="does not fit"): d.config_write(0x40, 0x1ff, 1)
  d.close()


def test_enable_reset(linux, sysfs):
  d = PCIDevice(linux, "0000:03:00.0")
  assert not d.enabled
  d.enable()
  assert (sysfs / "bus/pci/devices/0000:03:00.0/enable").read_text() == "1" and d.enabled
  d.reset()
  assert (sysfs / "bus/pci/devices/0000:03:00.0/reset").read_text() == "1"
  with pytest.raises(DeviceError, match="0000:41:00.0: no reset file"): PCIDevice(linux, "0000:41:00.0").reset()


def test_bars_and_mapping(linux, sysfs):
  d = PCIDevice(linux, "0000:03:00.0")
  bars = d.bars()
  assert [(b.start, b.size) for b in bars] == [(0x7000000000, 0x10000), (0, 0), (0x7010000000, 0x2000), (0, 0),
                                              (0xe000, 0x100), (0xfc900000, 0x4000)]
  assert bars[0].is_64bit and bars[0].prefetchable and bars[4].is_io and not bars[5].is_64bit
  mmio = d.map_bar(5)
  assert mmio.size == 0x4000 and "0000:03:00.0 BAR5" in mmio.name
  mmio.write32(0x10, 0x12345678)
  mmio.write64(0x3ff8, 0x1122334455667788)
  raw = (sysfs / "bus/pci/devices/0000:03:00.0/resource5").read_bytes()
  assert raw[0x10:0x14] == bytes.fromhex("78563412") and raw[0x3ff8:] == bytes.fromhex("8877665544332211")
  with pytest.raises(DeviceError, match="BAR5.*0x4000"): mmio.read32(0x4000)
  assert d.map_bar(2, 0x1000, 0x1000).size == 0x1000
  with pytest.raises(DeviceError, match="BAR 4 is not a memory BAR"): d.map_bar(4)
  with pytest.raises(DeviceError, match="BAR 1 is not a memory BAR"): d.map_bar(1)
  with pytest.raises(DeviceError, match="outside BAR 2"): d.map_bar(2, 0x2000, 0x1000)
  with pytest.raises(DeviceError, match="no BAR 6"): d.map_bar(6)
  with pytest.raises(DeviceError, match="0000:03:00.0: BAR 2 window offset 0x10 is not a multiple of the page size"):
    d.map_bar(2, 0x100, 0x10)


def test_unbind_bind(linux, sysfs):
  d = PCIDevice(linux, "0000:03:00.0")
  d.unbind()
  assert (sysfs / "bus/pci/drivers/amdgpu/unbind").read_text() == "0000:03:00.0"
  add_driver(sysfs, "vfio-pci")
  d.bind("vfio-pci")
  assert (sysfs / "bus/pci/drivers/vfio-pci/bind").read_text() == "0000:03:00.0"
  with pytest.raises(DeviceError, match="no PCI driver 'nvidia'"): d.bind("nvidia")
  with pytest.raises(DeviceError, match="not a driver name"): d.bind("../../module")
  PCIDevice(linux, "0000:03:00.1").unbind()  # unbound: nothing to do, nothing written
  assert (sysfs / "bus/pci/drivers/amdgpu/unbind").read_text() == "0000:03:00.0"


def test_sysfs_write_never_creates_attributes(linux, sysfs):
  with pytest.raises(DeviceError, match="write.*0000:41:00.0/reset"):
    linux.sysfs_write("bus/pci/devices/0000:41:00.0/reset", "1")
  assert not (sysfs / "bus/pci/devices/0000:41:00.0/reset").exists()


# ---- this machine, compared with lspci

def lspci_functions():
  """{address: (vendor, device, class24)} from `lspci -Dnmm` ("slot" "class" "vendor" "device" -rRR -pPP ...)."""
  out = subprocess.run(["lspci", "-Dnmm"], capture_output=True, text=True, check=True).stdout
  funcs = {}
  for line in out.splitlines():
    m = re.match(r'^(\S+) "([0-9a-f]{4})" "([0-9a-f]{4})" "([0-9a-f]{4})"(.*)$', line)
    assert m, f"unexpected lspci -Dnmm line {line!r}"
    progif = re.search(r"-p([0-9a-f]{2})", m.group(5))
    funcs[m.group(1)] = (int(m.group(3), 16), int(m.group(4), 16), int(m.group(2), 16) << 8 | int(progif.group(1) if progif else "0", 16))
  return funcs


def lspci_nn_functions():
  """{address: (vendor, device, class16)} from the human format `lspci -Dnn`: 'ADDR Class name [cccc]: ... [vvvv:dddd]'."""
  out = subprocess.run(["lspci", "-Dnn"], capture_output=True, text=True, check=True).stdout
  funcs = {}
  for line in out.splitlines():
    m = re.match(r"^(\S+) .*?\[([0-9a-f]{4})\]: .*\[([0-9a-f]{4}):([0-9a-f]{4})\]", line)
    assert m, f"unexpected lspci -Dnn line {line!r}"
    funcs[m.group(1)] = (int(m.group(3), 16), int(m.group(4), 16), int(m.group(2), 16))
  return funcs


@pytest.mark.tools("lspci")
def test_enumerate_on_this_machine_matches_lspci():
  ours = {d.addr: (d.vendor, d.device, d.class_code) for d in PCIDevice.enumerate(LinuxOS(Config()))}
  assert ours == lspci_functions()
  assert {a: (v, dv, c >> 8) for a, (v, dv, c) in ours.items()} == lspci_nn_functions()
  for vendor in {v for v, _, _ in ours.values()}:
    assert {d.addr for d in PCIDevice.enumerate(LinuxOS(Config()), vendor=vendor)} == {a for a, (v, _, _) in ours.items() if v == vendor}
