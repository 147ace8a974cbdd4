"""MockOS core: virtual file system, PCI functions in sysfs, host memory with fake physical addresses, MMIO views
that call the model, locks, eventfds and engine polling."""
import ctypes
import errno
import os
import struct
import threading

import pytest

from hcq.config import Config
from hcq.drivers.system.interface import OSInterface
from hcq.errors import DeviceError, GPUFault, OSCallError, Timeout
from hcq.mockgpu import MockOS
from hcq.mockgpu.mmio import DoorbellMMIO, MemoryMMIO, RegisterMMIO
from hcq.mockgpu.pci import PCIFunction


@pytest.fixture
def mos():
  with MockOS(Config(timeout_s=0.2)) as m: yield m


def test_is_an_os_interface(mos):
  assert isinstance(mos, OSInterface)


def test_files_symlinks_and_errors(mos):
  mos.vfs.add_file("/sys/class/thing/a/value", "42\n")
  mos.vfs.add_symlink("/sys/class/thing/b", "a")
  mos.vfs.add_symlink("/sys/class/loop", "loop")
  assert mos.sysfs_read("class/thing/b/value") == "42\n"
  assert mos.sysfs_list("class/thing") == ["a", "b"]
  assert mos.sysfs_readlink("class/thing/b") == "a"
  assert mos.sysfs_exists("class/thing/b") and not mos.sysfs_exists("class/thing/c")
  with pytest.raises(OSCallError, match=r"read on /sys/class/thing/c failed: \[Errno 2\]") as e:
    mos.sysfs_read("class/thing/c")
  assert e.value.errno == errno.ENOENT
  with pytest.raises(OSCallError) as e: mos.sysfs_read("class/loop/x")
  assert e.value.errno == errno.ELOOP
  with pytest.raises(OSCallError, match="Errno 13"): mos.sysfs_write("class/thing/a/value", "1")
  with pytest.raises(OSCallError) as e: mos.open("/dev/nothing")
  assert e.value.errno == errno.ENOENT and "/dev/nothing" in str(e.value)


def test_written_attributes_reach_the_model(mos):
  seen = []
  mos.vfs.add_file("/sys/class/thing/knob", read=lambda: f"{len(seen)}\n", write=seen.append)
  mos.sysfs_write("class/thing/knob", "7")
  with mos.open("/sys/class/thing/knob") as f:
    assert f.read() == b"1\n"
    f.write(b"8")
  assert seen == [b"7", b"8"]


class Regs(PCIFunction):
  def __init__(self):
    super().__init__("0000:03:00.0", vendor=0x1002, device=0x744C, class_code=0x030000, revision=0xC8,
                     subsystem_vendor=0x1002, subsystem_device=0x0E3B, driver="amdgpu")
    self.writes, self.events = [], []
    self.add_bar(5, RegisterMMIO("BAR5", 0x80000, read_hook=lambda off: 0xABCD if off == 0x10 else None,
                                 write_hook=lambda off, v: self.writes.append((off, v))), is_64=False)
    self.add_bar(2, DoorbellMMIO("doorbells", 0x2000, lambda off, v: self.writes.append(("db", off, v))), is_64=True)
    self.add_capability(0x10, bytes(58))    # PCI Express
    self.add_capability(0x05, bytes(12))    # MSI

  def on_enable(self, enabled): self.events.append(("enable", enabled))
  def on_reset(self): self.events.append("reset")


def test_pci_function_sysfs(mos):
  fn = mos.add_pci_function(Regs())
  base = "bus/pci/devices/0000:03:00.0"
  assert mos.sysfs_read(base + "/vendor") == "0x1002\n"
  assert mos.sysfs_read(base + "/device") == "0x744c\n"
  assert mos.sysfs_read(base + "/class") == "0x030000\n"
  assert mos.sysfs_readlink("bus/pci/devices/0000:03:00.0") == "../../../devices/pci0000:03/0000:03:00.0"
  assert os.path.basename(mos.sysfs_readlink(base + "/driver")) == "amdgpu"
  lines = mos.sysfs_read(base + "/resource").splitlines()
  assert len(lines) == 13
  start, end, flags = (int(x, 16) for x in lines[2].split())
  assert end - start + 1 == 0x2000 and flags & 0x200 and flags & 0x00100000
  start5, end5, _ = (int(x, 16) for x in lines[5].split())
  assert end5 - start5 + 1 == 0x80000
  cfg = mos.sysfs_read_bytes(base + "/config", 64)
  assert struct.unpack_from("<HH", cfg) == (0x1002, 0x744C)
  assert struct.unpack_from("<I", cfg, 0x10 + 4 * 5)[0] == start5        # BAR5 register holds its bus address
  assert struct.unpack_from("<II", cfg, 0x18) == (start & 0xFFFFFFFF | 0x4, start >> 32)   # 64-bit BAR2
  # the capability list is walkable
  caps, ptr = [], cfg[0x34]
  full = mos.sysfs_read_bytes(base + "/config", 256)
  while ptr:
    caps.append(full[ptr])
    ptr = full[ptr + 1]
  assert caps == [0x10, 0x05]
  # BAR sizing: all-ones reads back the size mask with the flag bits
  with mos.open(f"/sys/{base}/config") as f:
    f.write(struct.pack("<I", 0xFFFFFFFF), 0x10 + 4 * 5)
    assert struct.unpack("<I", f.read(4, 0x10 + 4 * 5))[0] == (~(0x80000 - 1)) & 0xFFFFFFFF
    f.write(b"\xff\xff", 0)   # ids are read-only
    assert f.read(2, 0) == b"\x02\x10"
  mos.sysfs_write(base + "/enable", "1")
  mos.sysfs_write(base + "/reset", "1")
  assert fn.events == [("enable", True), "reset"] and mos.sysfs_read(base + "/enable") == "1\n"


def test_bar_windows_call_the_model(mos):
  fn = mos.add_pci_function(Regs())
  regs = mos.map_mmio("/sys/bus/pci/devices/0000:03:00.0/resource5", 0x80000, name="mmio")
  regs.write32(0x100, 5)
  assert regs.read32(0x100) == 5 and regs.read32(0x10) == 0xABCD
  db = mos.map_mmio("/sys/bus/pci/devices/0000:03:00.0/resource2", 0x1000, offset=0x1000)
  db.write64(0x18, 0x1_0000_0007)
  assert fn.writes == [(0x100, 5), ("db", 0x1018, 0x1_0000_0007)]
  with pytest.raises(DeviceError, match="outside"): regs.read32(0x80000)
  with pytest.raises(OSCallError, match="map_mmio"):
    mos.open("/sys/bus/pci/devices/0000:03:00.0/resource2").mmap(0x1000)


def test_unbind_bind_and_remove(mos):
  fn = mos.add_pci_function(Regs())
  mos.sysfs_write("bus/pci/devices/0000:03:00.0/driver/unbind", "0000:03:00.0")
  assert fn.driver is None and not mos.sysfs_exists("bus/pci/devices/0000:03:00.0/driver")
  mos.add_pci_driver("vfio-pci")
  mos.sysfs_write("bus/pci/drivers/vfio-pci/bind", "0000:03:00.0")
  assert mos.sysfs_readlink("bus/pci/devices/0000:03:00.0/driver").endswith("/vfio-pci")
  assert mos.sysfs_read("bus/pci/drivers/vfio-pci/0000:03:00.0/vendor") == "0x1002\n"
  mos.sysfs_write("bus/pci/devices/0000:03:00.0/remove", "1")
  assert mos.sysfs_list("bus/pci/devices") == []


def test_memory_at_fixed_address_and_dma(mos):
  reserve = mos.alloc_anon(0x10000, reserve_only=True)
  mos.free_anon(reserve, 0x10000)
  va = mos.alloc_anon(0x3000, addr=reserve, shared=True)
  assert va == reserve
  mv = mos.memview(va, 0x3000)
  mv[0x1FFC:0x2004] = bytes(range(8))
  phys = mos.phys_addrs(va, 0x3000)
  assert len(phys) == 3 and phys == mos.phys_addrs(va, 0x3000)
  assert all(b - a > 0x1000 for a, b in zip(phys, phys[1:])), "pages must not look contiguous"
  assert mos.memory.dma_read(phys[1] + 0xFFC, 4) == bytes(range(4))
  assert mos.memory.dma_read(phys[2], 4) == bytes(range(4, 8))
  with pytest.raises(GPUFault): mos.memory.dma_read(phys[1] + 0xFFC, 8)   # the next physical page is a hole
  mos.memory.dma_write(phys[2] + 8, b"hi")
  assert bytes(mv[0x2008:0x200A]) == b"hi"
  with pytest.raises(GPUFault) as e: mos.memory.dma_read(phys[0] + 0x1000, 4)
  assert e.value.address == phys[0] + 0x1000
  with pytest.raises(DeviceError, match="no physical address"): mos.phys_addrs(va + 0x3000, 4)
  mos.free_anon(va, 0x3000)
  with pytest.raises(GPUFault): mos.memory.dma_read(phys[0], 4)


def test_memory_window_bar(mos):
  va = mos.alloc_anon(0x4000)
  fn = PCIFunction("0000:05:00.0", 0x14E4, 0x1750, 0x020000)
  fn.add_bar(0, MemoryMMIO("BAR0", va, 0x4000))
  mos.add_pci_function(fn)
  bar = mos.map_mmio("/sys/bus/pci/devices/0000:05:00.0/resource0", 0x4000)
  bar.write64(8, 0x1122334455667788)
  assert ctypes.c_uint64.from_address(va + 8).value == 0x1122334455667788
  assert mos.open("/sys/bus/pci/devices/0000:05:00.0/resource0").mmap(0x4000) == va


def test_locks(mos):
  lock = mos.lock_device("am", "0000:03:00.0")
  with pytest.raises(DeviceError, match="in use"): mos.lock_device("am", "0000:03:00.0")
  assert mos.held_locks() == [lock.path] and lock.path.endswith("am_0000:03:00.0.lock")
  lock.release()
  mos.lock_device("am", "0000:03:00.0").release()
  with pytest.raises(DeviceError): mos.lock_device("am", "../../etc")


def test_eventfd(mos):
  efd = mos.eventfd()
  efd.write(struct.pack("<Q", 3))
  efd.signal(2)
  assert efd.wait_value() == 5
  with pytest.raises(Timeout, match="eventfd"): efd.read(8)
  threading.Timer(0.02, efd.signal).start()
  assert efd.wait_value() == 1


class Engine:
  def __init__(self): self.pending, self.polls = 2, 0
  @property
  def blocked(self): return self.pending > 0
  def poll(self):
    self.polls += 1
    if self.pending:
      self.pending -= 1
      return True
    return False


def test_engines_run_when_the_driver_waits(mos):
  e = Engine()
  mos.register_engine(e)
  mos.monotonic()
  assert e.pending == 0 and e.polls == 3
  mos.monotonic()     # nothing blocked: no polling on every clock read
  assert e.polls == 3
  mos.sleep(0)
  assert e.polls == 4


def export_pci_sysfs(mos, root):
  """Copy the MockOS's PCI sysfs files into a real directory laid out like /sys/bus/pci (for lspci -A linux-sysfs)."""
  for addr in mos.sysfs_list("bus/pci/devices"):
    d = root / "devices" / addr
    d.mkdir(parents=True)
    for f in ("vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device", "resource", "irq"):
      (d / f).write_text(mos.sysfs_read(f"bus/pci/devices/{addr}/{f}"))
    (d / "config").write_bytes(mos.sysfs_read_bytes(f"bus/pci/devices/{addr}/config", 4096))


@pytest.mark.tools("lspci")
def test_lspci_reads_the_mock_pci_functions(tmp_path):
  """lspci (pciutils), pointed at a copy of the mock's sysfs, decodes ids, class, BARs and capabilities as we meant."""
  import subprocess
  from hcq.mockgpu import mock_amd_os
  mos = mock_amd_os(gpus=2)
  export_pci_sysfs(mos, tmp_path)
  mos.close()
  def lspci(*args):
    return subprocess.run(["lspci", *args, "-A", "linux-sysfs", "-O", f"sysfs.path={tmp_path}"], capture_output=True,
                          text=True, check=True).stdout
  lines = lspci("-nn").splitlines()
  assert [l.split()[0] for l in lines] == ["03:00.0", "04:00.0"]
  assert all("[0300]" in l and "[1002:744c]" in l and "(rev c8)" in l for l in lines)
  verbose = lspci("-vv", "-s", "03:00.0")
  assert "Region 0: Memory at 8000000000 (64-bit, prefetchable)" in verbose and "[size=256M]" in verbose
  assert "Region 5: Memory at c0000000 (32-bit, non-prefetchable)" in verbose and "[size=1M]" in verbose
  assert "Express (v2) Endpoint" in verbose and "LnkSta:\tSpeed 16GT/s, Width x16" in verbose
  assert "MSI: Enable- Count=1/1" in verbose


def test_a_delay_moves_the_models_clock_instead_of_blocking(mos):
  """MockOS.delay (a driver's fixed bring-up delay: psp_v13_0's 20 ms handshakes) lets the time pass on the clock the
  device models read (clock(), and the driver's monotonic()) without waiting: an hour of delays ends (the guard fails
  the test if it blocks) and the clocks show it; the engines run first, as on sleep()."""
  from tests.hangguard import ends
  e = Engine()
  mos.register_engine(e)
  polls, c0, m0 = e.polls, mos.clock(), mos.monotonic()
  ends(mos.delay, 3600.0, limit_s=60)
  assert mos.clock() - c0 >= 3600.0 and mos.monotonic() - m0 >= 3600.0
  assert e.polls > polls
  c1 = mos.clock()
  mos.delay(0)
  mos.delay(-1)                     # nothing passes backwards
  assert mos.clock() >= c1
