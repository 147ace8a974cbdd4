"""The OS-interface contract: one suite, run against every implementation in OS_IMPLEMENTATIONS.

To run it against another implementation (mockgpu's MockOS), append an OSImpl to OS_IMPLEMENTATIONS (e.g. from a
conftest or from the bottom of this file):

    OS_IMPLEMENTATIONS.append(OSImpl("mock", lambda config: MockOS(config), kernel=False, own_sysfs=True))

Two groups of tests:
  * the pure contract (class TestContract): what every implementation must do, with sysfs pointed at a fake tree and
    memory handed out as host memory (GPU VA == host VA, so memview works everywhere);
  * real kernel features (class TestKernel): regular files, ioctl, file mmap, cross-process flock, pagemap PFNs.
    They run only for implementations built with kernel=True (LinuxOS), and skip what this machine cannot do.
"""
from __future__ import annotations

import ctypes
import dataclasses
import errno
import multiprocessing
import os
import stat
import struct
import time
from typing import Callable

import pytest

from fake_sysfs import add_pci_function
from hcq.config import Config
from hcq.drivers.system import LinuxOS, MMIOView, OSInterface
from hcq.drivers.system.linux import MemoryMMIO
from hcq.errors import DeviceError, OSCallError


@dataclasses.dataclass
class OSImpl:
  name: str
  make: Callable[[Config], object]  # build the OS object for this config
  kernel: bool = False              # a real kernel behind it: run TestKernel too
  pagemap_needs_root: bool = False  # physical addresses readable only with CAP_SYS_ADMIN
  own_sysfs: bool = False           # serves its own sysfs (a device model) instead of the tree at config.sysfs_root:
                                    # the fake-tree tests skip, the consistency tests still run


OS_IMPLEMENTATIONS: list[OSImpl] = [OSImpl("linux", LinuxOS, kernel=True, pagemap_needs_root=True)]
# mockgpu's MockOS with one mock AMD GPU (it serves its own sysfs: the GPU's PCI function, KFD topology, ...)
from hcq.mockgpu import mock_amd_os  # noqa: E402  (tests may import mockgpu)
OS_IMPLEMENTATIONS.append(OSImpl("mock", mock_amd_os, own_sysfs=True))

PAGE = 4096
# asm-generic/ioctls.h: FIONREAD 0x541B (x86-64 and arm64 use the generic numbers)
FIONREAD = 0x541B


@dataclasses.dataclass
class Ctx:
  impl: OSImpl
  os: object
  sysfs: object  # pathlib.Path of the fake sysfs root
  tmp: object


@pytest.fixture(params=OS_IMPLEMENTATIONS, ids=lambda impl: impl.name)
def os_impl(request, tmp_path) -> Ctx:
  sysfs = tmp_path / "sys"
  add_pci_function(sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, driver="amdgpu")
  (sysfs / "module/amdgpu/parameters").mkdir(parents=True)
  (sysfs / "module/amdgpu/parameters/vm_size").write_text("256\n")
  locks = tmp_path / "locks"
  locks.mkdir()
  config = Config(sysfs_root=str(sysfs), lock_dir=str(locks))
  return Ctx(request.param, request.param.make(config), sysfs, tmp_path)


@pytest.fixture
def kernel_os(os_impl) -> Ctx:
  if not os_impl.impl.kernel: pytest.skip(f"{os_impl.impl.name}: no real kernel behind it")
  return os_impl


class TestContract:
  def test_satisfies_the_protocol(self, os_impl):
    assert isinstance(os_impl.os, OSInterface)

  def test_stat_says_what_kind_of_file_a_path_is(self, os_impl):
    """What firmware.read asks before it opens a file: a folder, a character device, nothing (ENOENT)."""
    o = os_impl.os
    assert stat.S_ISDIR(o.stat("/proc").st_mode)
    dev = "/dev/kfd" if o.exists("/dev/kfd") else "/dev/null"
    assert stat.S_ISCHR(o.stat(dev).st_mode), dev
    with pytest.raises(OSCallError) as e: o.stat("/nonexistent-hcq-path")
    assert e.value.errno == errno.ENOENT

  # ---- sysfs (against the fake root)
  def test_sysfs_reads(self, os_impl):
    if os_impl.impl.own_sysfs: pytest.skip(f"{os_impl.impl.name} serves its own sysfs")
    o = os_impl.os
    assert "0000:03:00.0" in o.sysfs_list("bus/pci/devices")
    assert o.sysfs_read("bus/pci/devices/0000:03:00.0/vendor").strip() == "0x1002"
    assert o.sysfs_read("/bus/pci/devices/0000:03:00.0/device").strip() == "0x744c"  # leading / stays under the root
    assert o.sysfs_read_bytes("bus/pci/devices/0000:03:00.0/config", 2, 2) == b"\x4c\x74"
    assert o.sysfs_read("module/amdgpu/parameters/vm_size") == "256\n"
    assert o.sysfs_exists("module/amdgpu") and not o.sysfs_exists("module/nvidia")
    assert o.sysfs_readlink("bus/pci/devices/0000:03:00.0/driver").endswith("drivers/amdgpu")

  def test_pci_functions_agree_with_their_config_space(self, os_impl):
    """Whatever sysfs serves: every PCI function's vendor/device/class files match its config space header
    (include/uapi/linux/pci_regs.h: vendor 0x00, device 0x02, revision 0x08, class 0x09-0x0b)."""
    from hcq.drivers.system.pci import PCIDevice
    devs = PCIDevice.enumerate(os_impl.os)
    assert devs, "no PCI function in sysfs"
    for d in devs:
      assert d.config_read(0x00, 2) == d.vendor and d.config_read(0x02, 2) == d.device, d
      assert int.from_bytes(d.config_read_bytes(0x09, 3), "little") == d.class_code, d

  def test_sysfs_write(self, os_impl):
    if os_impl.impl.own_sysfs: pytest.skip(f"{os_impl.impl.name} serves its own sysfs")
    os_impl.os.sysfs_write("bus/pci/devices/0000:03:00.0/enable", "1")
    assert os_impl.os.sysfs_read("bus/pci/devices/0000:03:00.0/enable") == "1"

  def test_sysfs_errors_name_the_path(self, os_impl):
    if os_impl.impl.own_sysfs: pytest.skip(f"{os_impl.impl.name} serves its own sysfs")
    with pytest.raises(DeviceError, match="module/nvidia/refcnt"): os_impl.os.sysfs_read("module/nvidia/refcnt")
    with pytest.raises(DeviceError, match="bus/pci/devices/0000:03:00.0/nope"):
      os_impl.os.sysfs_write("bus/pci/devices/0000:03:00.0/nope", "1")
    with pytest.raises(DeviceError, match="module/nvidia"): os_impl.os.sysfs_list("module/nvidia")

  # ---- anonymous memory
  def test_anon_memory_is_zeroed_readable_writable(self, os_impl):
    o = os_impl.os
    addr = o.alloc_anon(3 * PAGE)
    assert addr % PAGE == 0
    view = o.memview(addr, 3 * PAGE)
    assert bytes(view[:16]) == bytes(16) and bytes(view[-16:]) == bytes(16)
    view[PAGE:PAGE + 4] = b"hcq!"
    assert ctypes.string_at(addr + PAGE, 4) == b"hcq!"  # GPU VA == host VA: the view is the memory itself
    o.free_anon(addr, 3 * PAGE)

  def test_anon_memory_at_a_fixed_address(self, os_impl):
    o = os_impl.os
    probe = o.alloc_anon(16 * PAGE, reserve_only=True)  # find a free range, then place memory inside it
    o.free_anon(probe, 16 * PAGE)
    want = probe + 4 * PAGE
    addr = o.alloc_anon(2 * PAGE, addr=want)
    assert addr == want
    o.memview(addr, 2 * PAGE)[0] = 7
    with pytest.raises(DeviceError, match=f"{want:#x}"): o.alloc_anon(PAGE, addr=want)  # never clobbers a mapping
    o.free_anon(addr, 2 * PAGE)

  def test_reserve_only_then_map_inside(self, os_impl):
    o = os_impl.os
    base = o.alloc_anon(64 * PAGE, reserve_only=True)
    assert base % PAGE == 0
    # a reservation is not usable memory: placing real memory inside it must go through a fixed mapping after freeing
    o.free_anon(base + 8 * PAGE, PAGE)
    inner = o.alloc_anon(PAGE, addr=base + 8 * PAGE)
    o.memview(inner, PAGE)[:3] = b"abc"
    assert ctypes.string_at(inner, 3) == b"abc"
    o.free_anon(base, 64 * PAGE)

  def test_physical_addresses(self, os_impl):
    if os_impl.impl.pagemap_needs_root and os.geteuid() != 0: pytest.skip("pagemap PFNs need CAP_SYS_ADMIN")
    o = os_impl.os
    addr = o.alloc_anon(4 * PAGE)
    phys = o.phys_addrs(addr, 4 * PAGE)
    assert len(phys) == 4
    assert all(p != 0 and p % PAGE == 0 for p in phys), [hex(p) for p in phys]
    assert len(set(phys)) == 4
    assert o.phys_addrs(addr + PAGE + 100, 8) == [phys[1]]  # per page, unaligned start and size included
    o.free_anon(addr, 4 * PAGE)

  def test_memory_barrier(self, os_impl):
    for _ in range(3): os_impl.os.memory_barrier()

  # ---- MMIO views over memory
  def test_mmio_view_over_memory_bounds(self, os_impl):
    o = os_impl.os
    addr = o.alloc_anon(PAGE)
    mmio = MemoryMMIO(addr, 0x100, "test BAR5")
    assert isinstance(mmio, MMIOView)
    mmio.write32(0xfc, 0xa5a5a5a5)
    mmio.write64(0x10, 0x0123456789abcdef)
    assert mmio.read32(0xfc) == 0xa5a5a5a5 and mmio.read64(0x10) == 0x0123456789abcdef
    assert mmio.read32(0x10) == 0x89abcdef and mmio.read32(0x14) == 0x01234567  # little-endian halves
    assert bytes(o.memview(addr + 0x10, 8)) == struct.pack("<Q", 0x0123456789abcdef)
    for call in (lambda: mmio.read32(0x100), lambda: mmio.write32(0x100, 0), lambda: mmio.read64(0xfc),
                 lambda: mmio.write64(0xf8 + 8, 0), lambda: mmio.read32(-4), lambda: mmio.read32(2)):
      with pytest.raises(DeviceError, match="test BAR5"): call()
    o.free_anon(addr, PAGE)

  # ---- locks
  def test_lock_is_exclusive_and_names_the_lock(self, os_impl):
    o = os_impl.os
    lock = o.lock_device("am", "0000:03:00.0")
    assert lock.path.endswith("am_0000:03:00.0.lock")
    with pytest.raises(DeviceError, match=r"am_0000:03:00\.0\.lock"): o.lock_device("am", "0000:03:00.0")
    other = o.lock_device("am", "0000:04:00.0")  # another device: independent
    nv = o.lock_device("nv", "0000:03:00.0")     # another kind: another lock file
    lock.release()
    again = o.lock_device("am", "0000:03:00.0")
    for held in (again, other, nv): held.release()

  @pytest.mark.parametrize("bus", ["0000:03:00.0;id", "../0000:03:00.0", "0000:03:00.0 ", "3:0.0", "$(id)"])
  def test_lock_refuses_bad_addresses(self, os_impl, bus):
    with pytest.raises(DeviceError, match="PCI address"): os_impl.os.lock_device("am", bus)
    assert os.listdir(os_impl.tmp / "locks") == []

  # ---- eventfd
  def test_lock_waits_for_a_shared_lock_then_names_it(self, os_impl, monkeypatch):
    o = os_impl.os
    lock = o.lock_device("am-smu", "0000:03:00.0")
    assert lock.path.endswith("am-smu_0000:03:00.0.lock")
    pauses, sleep = [], time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: pauses.append(s) or sleep(s))
    with pytest.raises(DeviceError, match=r"am-smu_0000:03:00\.0\.lock"): o.lock_device("am-smu", "0000:03:00.0", wait_s=0.05)
    monkeypatch.undo()
    assert len(pauses) >= 2            # it waited and tried again before it named the holder (counted, not timed)
    lock.release()
    o.lock_device("am-smu", "0000:03:00.0", wait_s=0.05).release()

  def test_device_state_files(self, os_impl):
    o = os_impl.os
    assert o.read_device_state("am", "0000:03:00.0") is None
    o.write_device_state("am", "0000:03:00.0", b'{"a": 1}')
    o.write_device_state("am", "0000:03:00.0", b'{"a": 2}')      # replaced whole
    assert o.read_device_state("am", "0000:03:00.0") == b'{"a": 2}'
    with pytest.raises(DeviceError, match="at most 4096"): o.write_device_state("am", "0000:03:00.0", b"x" * 5000)
    with pytest.raises(DeviceError, match="PCI address"): o.write_device_state("am", "../x", b"")
    o.remove_device_state("am", "0000:03:00.0")
    o.remove_device_state("am", "0000:03:00.0")                   # idempotent
    assert o.read_device_state("am", "0000:03:00.0") is None

  def test_eventfd_counts(self, os_impl):
    ev = os_impl.os.eventfd(2)
    ev.write(struct.pack("<Q", 3))
    ev.write(struct.pack("<Q", 4))
    assert struct.unpack("<Q", ev.read(8))[0] == 9
    ev.close()

  def test_eventfd_wait_has_a_timeout(self, kernel_os):
    from hcq.errors import Timeout
    ev = kernel_os.os.eventfd(0)
    with pytest.raises(Timeout, match=r"eventfd .* to be signalled after 0.2 s"): ev.wait_value(timeout_s=0.2)
    ev.signal(3)
    assert ev.wait_value(timeout_s=0.2) == 3
    ev.close()

  # ---- time
  def test_monotonic_and_sleep(self, os_impl):
    t0 = os_impl.os.monotonic()
    os_impl.os.sleep(0.01)
    assert os_impl.os.monotonic() - t0 >= 0.01

  def test_a_delay_passes_on_monotonic(self, os_impl):
    """delay() (a device's fixed bring-up wait): the time has passed on monotonic() when it returns (LinuxOS waits;
    MockOS moves its models' clock)."""
    t0 = os_impl.os.monotonic()
    os_impl.os.delay(0.02)
    assert os_impl.os.monotonic() - t0 >= 0.02


def _try_lock_in_child(os_factory, config, q):
  try:
    os_factory(config).lock_device("am", "0000:03:00.0")
    q.put("locked")
  except DeviceError as e:
    q.put(f"DeviceError: {e}")


class TestKernel:
  def test_file_open_read_write_close(self, kernel_os):
    o, path = kernel_os.os, str(kernel_os.tmp / "data.bin")
    f = o.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    assert f.write(b"0123456789") == 10
    assert f.read(4, offset=2) == b"2345"
    assert f.write(b"AB", offset=8) == 2
    f.close()
    assert open(path, "rb").read() == b"01234567AB"
    with pytest.raises(OSCallError, match="no-such-file"): o.open(str(kernel_os.tmp / "no-such-file"), os.O_RDONLY)

  def test_ioctl_on_a_regular_file(self, kernel_os):
    # FIONREAD on a regular file returns the bytes left from the file position (fs/ioctl.c, file_ioctl)
    o, path = kernel_os.os, kernel_os.tmp / "data.bin"
    path.write_bytes(b"x" * 1234)
    f = o.open(str(path), os.O_RDONLY)
    n = ctypes.c_int(-1)
    assert f.ioctl(FIONREAD, n) == 0 and n.value == 1234
    f.read(34)
    buf = bytearray(4)
    f.ioctl(FIONREAD, buf)
    assert int.from_bytes(buf, "little") == 1200
    with pytest.raises(OSCallError, match=r"data\.bin.*request 0x5401"): f.ioctl(0x5401, ctypes.c_int())  # TCGETS: ENOTTY
    f.close()

  def test_mmap_of_a_file(self, kernel_os):
    o, path = kernel_os.os, kernel_os.tmp / "map.bin"
    path.write_bytes(bytes(range(256)) * 32)
    f = o.open(str(path))
    addr = f.mmap(2 * PAGE, offset=PAGE)
    f.close()  # the mapping outlives the fd
    assert ctypes.string_at(addr, 4) == bytes([0, 1, 2, 3])  # offset 4096 = 16 * 256
    ctypes.memmove(addr + 5, b"ZZ", 2)
    o.free_anon(addr, 2 * PAGE)
    assert path.read_bytes()[PAGE + 5:PAGE + 7] == b"ZZ"  # MAP_SHARED by default

  def test_map_mmio_of_a_file(self, kernel_os):
    o, path = kernel_os.os, kernel_os.tmp / "bar.bin"
    path.write_bytes(bytes(PAGE))
    mmio = o.map_mmio(str(path), PAGE, name="fake BAR0")
    mmio.write32(0x20, 0xcafef00d)
    assert path.read_bytes()[0x20:0x24] == struct.pack("<I", 0xcafef00d)
    with pytest.raises(DeviceError, match="fake BAR0.*0x1000"): mmio.write32(PAGE, 1)
    mmio.close()
    mmio.close()
    with pytest.raises(DeviceError, match="fake BAR0"): mmio.read32(0x20)  # unmapped: refused, not a segfault

  def test_map_file_mmio_of_an_open_file(self, kernel_os):
    """map_file_mmio (a VFIO device's BAR region): a window at a file offset, and one at a fixed address that must
    be free (MAP_FIXED_NOREPLACE: never replaced)."""
    o, path = kernel_os.os, kernel_os.tmp / "region.bin"
    path.write_bytes(bytes(3 * PAGE))
    f = o.open(str(path))
    mmio = o.map_file_mmio(f, PAGE, offset=2 * PAGE, name="fake region")
    mmio.write32(8, 0x12345678)
    assert path.read_bytes()[2 * PAGE + 8:2 * PAGE + 12] == struct.pack("<I", 0x12345678)
    mmio.close()
    at = o.alloc_anon(PAGE, reserve_only=True)
    with pytest.raises(OSCallError, match="region.bin.*fixed"): o.map_file_mmio(f, PAGE, name="fixed", addr=at)   # in use
    o.free_anon(at, PAGE)
    fixed = o.map_file_mmio(f, PAGE, offset=PAGE, name="fixed", addr=at)
    assert fixed.addr == at
    fixed.write32(0, 0xAB)
    assert path.read_bytes()[PAGE] == 0xAB
    fixed.close()
    with pytest.raises(DeviceError, match="fake region.*page size"): o.map_file_mmio(f, 100, name="fake region")
    f.close()

  def test_vfio_calls_reach_the_kernel_named(self, kernel_os):
    """The VFIO set-up's ioctls leave LinuxOS as requests the kernel answers: on a regular file standing for
    /dev/vfio/vfio (dev_root) the first one fails naming the ioctl and the file; ioctl_fd's failure names both too."""
    import ctypes as ct
    from hcq.autogen import vfio as v
    from hcq.drivers.system.vfio import VFIOContainer
    (kernel_os.tmp / "dev" / "vfio").mkdir(parents=True)
    (kernel_os.tmp / "dev" / "vfio" / "vfio").write_bytes(b"")
    (kernel_os.tmp / "dev" / "vfio" / "7").write_bytes(b"")
    o = LinuxOS(Config(dev_root=str(kernel_os.tmp / "dev")))
    with pytest.raises(OSCallError, match=r"VFIO_GET_API_VERSION.*dev/vfio/vfio.*Errno 25"): VFIOContainer(o, "PCI x")
    g = o.open("/dev/vfio/7")
    with pytest.raises(OSCallError, match=rf"dev/vfio/7.*Errno 25.*request {v.VFIO_GROUP_GET_DEVICE_FD.request:#x}"):
      g.ioctl_fd(v.VFIO_GROUP_GET_DEVICE_FD.request, ct.create_string_buffer(b"0000:03:00.0"), "dev")
    g.close()

  def test_vfio_container_of_this_kernel(self, kernel_os):
    """On a machine with VFIO (and access to /dev/vfio/vfio): API version 0 and the type 1 v2 IOMMU."""
    from hcq.drivers.system.vfio import VFIOContainer
    if not os.access("/dev/vfio/vfio", os.R_OK | os.W_OK): pytest.skip("no accessible /dev/vfio/vfio here")
    VFIOContainer(LinuxOS(Config()), "this machine").close()

  def test_lock_file_mode_0666_whatever_the_umask(self, kernel_os):
    old = os.umask(0o077)
    try: lock = kernel_os.os.lock_device("bnxt", "0000:c1:00.0")
    finally: os.umask(old)
    assert stat.S_IMODE(os.stat(lock.path).st_mode) == 0o666
    lock.release()

  def test_lock_file_symlink_is_refused(self, kernel_os):
    target = kernel_os.tmp / "victim"
    target.write_text("keep")
    os.symlink(target, kernel_os.tmp / "locks" / "am_0000:05:00.0.lock")
    with pytest.raises(OSCallError, match="am_0000:05:00.0.lock"): kernel_os.os.lock_device("am", "0000:05:00.0")
    assert target.read_text() == "keep"

  def test_a_hard_link_at_a_lock_name_is_refused_and_its_target_keeps_its_mode(self, kernel_os):
    """issue 29 item 1: a local user's hard link to another file (root's /etc/shadow with fs.protected_hardlinks=0)
    must not be flocked, nor chmod-ed 0666 by the driver."""
    target = kernel_os.tmp / "victim"
    target.write_text("keep")
    os.chmod(target, 0o600)
    os.link(target, kernel_os.tmp / "locks" / "am_0000:05:00.0.lock")
    with pytest.raises(OSCallError, match=r"am_0000:05:00.0.lock.*hard link \(2 names"):
      kernel_os.os.lock_device("am", "0000:05:00.0")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and target.read_text() == "keep"

  @pytest.mark.parametrize("what", ["fifo", "folder"])
  def test_a_lock_name_that_is_no_regular_file_is_refused_at_once(self, kernel_os, what):
    path = kernel_os.tmp / "locks" / "bnxt_0000:05:00.0.lock"
    if what == "fifo": os.mkfifo(path, 0o600)
    else: path.mkdir(mode=0o700)
    with pytest.raises(OSCallError, match=r"bnxt_0000:05:00.0.lock.*not a regular file"):
      kernel_os.os.lock_device("bnxt", "0000:05:00.0", wait_s=5)
    assert stat.S_IMODE(os.stat(path).st_mode) == (0o600 if what == "fifo" else 0o700)

  def test_an_existing_lock_file_keeps_its_mode(self, kernel_os):
    """Only a lock file this process created (O_EXCL) is made 0666; one already there is used as it is."""
    path = kernel_os.tmp / "locks" / "am_0000:06:00.0.lock"
    path.write_text("")
    os.chmod(path, 0o640)
    kernel_os.os.lock_device("am", "0000:06:00.0").release()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640

  def test_a_lock_wait_waits_out_only_contention(self, kernel_os, monkeypatch):
    """lock_device(wait_s): a lock file that cannot be opened fails at once, not after wait_s of retries; a held one
    is retried, and its holders are read from <proc>/locks once, for the error, not on every try."""
    o = kernel_os.os
    os.symlink(kernel_os.tmp / "victim", kernel_os.tmp / "locks" / "am-smu_0000:05:00.0.lock")
    tries, opener = [], o._open_lock_file
    monkeypatch.setattr(o, "_open_lock_file", lambda path: tries.append(path) or opener(path))
    with pytest.raises(OSCallError, match="am-smu_0000:05:00.0.lock"): o.lock_device("am-smu", "0000:05:00.0", wait_s=3)
    assert len(tries) == 1                     # refused at the first try, not retried for wait_s (counted, not timed)
    monkeypatch.undo()
    lock = o.lock_device("am-smu", "0000:03:00.0")
    calls, orig = [], o._flock_holders
    monkeypatch.setattr(o, "_flock_holders", lambda fd: calls.append(fd) or orig(fd))
    with pytest.raises(DeviceError, match="in use"): o.lock_device("am-smu", "0000:03:00.0", wait_s=0.05)
    assert len(calls) == 1
    lock.release()

  def test_a_state_file_of_another_owner_is_refused(self, kernel_os):
    o = kernel_os.os
    o.write_device_state("am", "0000:03:00.0", b"{}")
    assert o.read_device_state("am", "0000:03:00.0", owners={0, os.geteuid()}) == b"{}"
    with pytest.raises(DeviceError, match=rf"am-state_0000:03:00.0.json: owned by uid {os.geteuid()}, not by the device "
                                          rf"holder's user or root \(uid 99998, 99999\)"):
      o.read_device_state("am", "0000:03:00.0", owners={99998, 99999})

  def test_a_planted_temporary_file_does_not_block_the_state_write(self, kernel_os):
    planted = kernel_os.tmp / "locks" / f"am-state_0000:03:00.0.json.{os.getpid()}.tmp"
    planted.write_text("planted")
    kernel_os.os.write_device_state("am", "0000:03:00.0", b'{"a": 1}')
    assert kernel_os.os.read_device_state("am", "0000:03:00.0") == b'{"a": 1}' and planted.read_text() == "planted"
    assert sorted(p.name for p in (kernel_os.tmp / "locks").iterdir()) == sorted([planted.name, "am-state_0000:03:00.0.json"])

  def test_a_planted_state_file_link_is_refused(self, kernel_os):
    os.symlink("/etc/passwd", kernel_os.tmp / "locks" / "am-state_0000:03:00.0.json")
    with pytest.raises(DeviceError, match="symbolic link"): kernel_os.os.read_device_state("am", "0000:03:00.0")
    kernel_os.os.write_device_state("am", "0000:03:00.0", b"{}")    # renamed over the link, not written through it
    assert kernel_os.os.read_device_state("am", "0000:03:00.0") == b"{}"

  def test_lock_excludes_another_process(self, kernel_os):
    lock = kernel_os.os.lock_device("am", "0000:03:00.0")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_try_lock_in_child, args=(kernel_os.impl.make, kernel_os.os.config, q))
    p.start()
    res = q.get(timeout=30)
    p.join(30)
    assert res.startswith("DeviceError") and "am_0000:03:00.0.lock" in res and "0000:03:00.0 is in use" in res
    if kernel_os.os.config.proc_root == "/proc": assert f"held by pid {os.getpid()}" in res
    lock.release()
    p = ctx.Process(target=_try_lock_in_child, args=(kernel_os.impl.make, kernel_os.os.config, q))
    p.start()
    assert q.get(timeout=30) == "locked"
    p.join(30)

  def test_pagemap_refuses_the_zero_page(self, kernel_os):
    if os.geteuid() != 0: pytest.skip("pagemap PFNs need CAP_SYS_ADMIN")
    addr = kernel_os.os.alloc_anon(2 * PAGE, prot=1)  # PROT_READ, private: both pages are the kernel's zero page
    with pytest.raises(DeviceError, match="zero page"): kernel_os.os.phys_addrs(addr, 2 * PAGE)
    kernel_os.os.free_anon(addr, 2 * PAGE)

  def test_pagemap_without_root_is_a_clear_error(self, kernel_os):
    """Unprivileged readers get PFN 0 from pagemap: phys_addrs must fail naming pagemap, not return 0. As root,
    the check runs in a forked child that drops to uid nobody (65534)."""
    def check():
      addr = kernel_os.os.alloc_anon(PAGE)
      try: kernel_os.os.phys_addrs(addr, PAGE)
      except DeviceError as e: return f"DeviceError: {e}"
      return "no error"
    if os.geteuid() != 0:
      assert "pagemap" in check()
      return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
      try:
        os.close(r)
        os.setgid(65534)
        os.setuid(65534)
        # setuid makes the process non-dumpable, which hands /proc/self to root; a normal user process is dumpable
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE = 4 (include/uapi/linux/prctl.h)
        os.write(w, check().encode())
      finally: os._exit(0)
    os.close(w)
    with os.fdopen(r) as f: res = f.read()
    os.waitpid(pid, 0)
    assert res.startswith("DeviceError") and "pagemap" in res and "CAP_SYS_ADMIN" in res, res
