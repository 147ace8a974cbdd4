"""MockOS: the OS interface (drivers/system/interface.py) implemented in memory, hosting device models.

What a driver sees is what LinuxOS gives it: device nodes under /dev whose ioctl/mmap reach a device model, sysfs
and procfs files, anonymous memory at fixed addresses (real host memory: GPU VA == host VA, so an emulator reads
and writes the driver's buffers directly), fake physical addresses for DMA, MMIO views whose writes call the model
(doorbells, BAR registers), flock-style device locks and eventfds, all in memory.

Device models (mock GPUs, a mock NIC) attach themselves with add_device(model): model.attach(os) creates their
nodes and files. A model that runs command queues registers an engine (register_engine) with a poll() -> bool
method; in the default synchronous mode the MockOS polls engines whenever the driver gives it a chance (a doorbell
write, sleep(), memory_barrier(), monotonic() while a queue is blocked), so a wait on memory the host writes later
completes without threads. With config.mock_threaded the models run their own threads instead. An engine may
have a `may_progress` attribute: while it is False for every engine, a tick returns at once.

Differences from Linux a driver can rely on: /dev/kfd doorbell pages (and every register BAR) must be mapped with
map_mmio(), not file.mmap(): plain memory cannot call the model.

Processes: everything a driver does runs as the current process `pid` (at first this Python process's own pid).
new_process() starts another one (the current pid changes; the previous process lives on, holding its locks), and
exit_process(pid) or kill(pid) ends one as the kernel ends a process killed with SIGKILL: its device locks are
released and its anonymous memory unmapped, and no driver close() runs. Device models (their VRAM, registers,
firmware state, queues that may still run) stay as they are; a model learns first (process_exiting(pid, ranges))
which host memory goes, so that its engines fault on it instead of touching unmapped memory. The driver objects of
an ended process must not be used again (nothing stops it: the test that ended it drops them).

hcq-smi's host queries work on a MockOS too (listdir/stat/realpath of the lock dir, the holders' procfs entries:
<pid>/fd, <pid>/fdinfo with the flock line, <pid>/comm, locks; open_process), so that `hcq-smi amd pids` and
`kill_pids` (smi/commands.py, with this OS as the Context's host) find a mock process holding a device's lock and
end it (its SIGKILL: exit_process).
"""
from __future__ import annotations

import errno
import os as _os
import posixpath
import stat as stat_mod
import threading
import time
from _thread import get_ident

from ..drivers.system import libc
from ..drivers.system.interrupts import held as held_interrupt
from ..drivers.system.locks import STATE_MAX_BYTES, checked_state_path, in_use_error, lock_path, owner_error
from ..drivers.system.mmio import MappedMMIO
from ..errors import DeviceError, OSCallError
from .files import DataFileHandle, EventFD
from .memory import HostMemory
from .pci import PCIFunction
from .vfs import DataFile, DeviceNode, Dir, Symlink, VFS

PAGE = libc.PAGE_SIZE
PCI_MEM_WINDOW = 0x80_0000_0000   # fake bus addresses given to 64-bit BARs
PCI_MEM32_WINDOW = 0xC000_0000    # and to 32-bit ones (below 4 GiB)
FAKE_PID_BASE = 1 << 21           # the pids new_process() hands out (below Linux's PID_MAX_LIMIT, 1 << 22)


class FixedViewMMIO(MappedMMIO):
  """A BAR window MockOS.map_pci_resource mapped at a fixed address: close() lets go of the view (HostMemory keeps
  the pages while a mock GPU's MMU still holds them for its engines)."""

  def __init__(self, memory, addr: int, size: int, name: str):
    super().__init__(addr, size, name)
    self.memory = memory

  def close(self) -> None:
    if self.memory is None: return
    self._u32 = None
    self.memory.unmap_view(self.addr, self.size, self, kind="cpu")
    self.memory, self.size = None, 0      # every later access fails the bounds check instead of faulting


MOCK_LOCK_DEV = (0, 0x2A)   # the (major, minor) of the file system the mock's lock files are on, as procfs prints it


class MockLock:
  """A device lock held in memory (flock semantics: one holder per lock file until release). It shows as Linux shows
  an flock, so that hcq-smi finds the holder through the mock as through the kernel: the lock file in the lock dir,
  a line of /proc/locks, an fd of the holder in /proc/<pid>/fd whose fdinfo has the "lock:" line."""

  def __init__(self, os, path: str, ino: int, fd: int):
    self.os, self.path, self.ino, self.fd = os, path, ino, fd
    self.pid = os.pid         # the holder (the mock's current process), as <proc>/locks would name it

  def line(self, n: int) -> str:
    return f"{n}: FLOCK  ADVISORY  WRITE {self.pid} {MOCK_LOCK_DEV[0]:02x}:{MOCK_LOCK_DEV[1]:02x}:{self.ino} 0 EOF"

  def release(self) -> None:
    with self.os._lock:
      if self.os._held_locks.get(self.path) is self:
        del self.os._held_locks[self.path]
        for d in ("fd", "fdinfo"): self.os.vfs.remove(f"/proc/{self.pid}/{d}/{self.fd}")

  def __enter__(self): return self
  def __exit__(self, *exc): self.release()


class MockProcess:
  """A handle on a mock process (LinuxOS.open_process's ProcessHandle): signalling it ends it (any signal is taken
  as SIGKILL, the one kill_pids sends)."""

  def __init__(self, os, pid: int):
    self.os, self.pid = os, pid

  def signal_lock_holder(self, lock_file: str, sig: int) -> bool:
    """Like ProcessHandle's: signalled only when it holds the lock on lock_file (then it ends)."""
    if posixpath.normpath(lock_file) not in map(posixpath.normpath, self.os._proc_fds(self.pid)): return False
    self.os.kill(self.pid)
    return True

  def close(self) -> None: pass


class IOMapping:
  """A BAR window mapped as I/O memory (MockOS.map_bar_io): .addr, .size, .mmio (the function's window, stores keep
  their width), .name; close() unmaps it."""

  def __init__(self, os, addr: int, size: int, mmio, name: str):
    self.os, self.addr, self.size, self.mmio, self.name = os, addr, size, mmio, name

  def close(self) -> None:
    if self.os is not None: self.os._unmap_io(self)
    self.os = None


class MockOS:
  """The OS interface in memory. `config` is an hcq Config (its sysfs/proc/dev roots are replaced by the mock's
  canonical /sys, /proc and /dev; its mock_* fields drive the models)."""

  def __init__(self, config=None):
    from ..config import Config
    config = config if config is not None else Config()
    self.config = config.replace(sysfs_root="/sys", proc_root="/proc", dev_root="/dev")
    self.threaded = bool(self.config.mock_threaded)     # the engines run their own threads (no ticks)
    self.vfs = VFS()
    self.memory = HostMemory()
    self.devices: list = []
    self.pci_functions: dict[str, PCIFunction] = {}
    self.engines: list = []      # registered engines (register_engine/unregister_engine only)
    self._sole = None            # the registered engine when there is exactly one (others_idle)
    self._held_locks: dict[str, MockLock] = {}
    self._inodes: dict[str, int] = {}     # lock file path -> its inode number (for stat and the procfs lock lines)
    self._next_fd = 100
    self.dmabufs: dict = {}     # fd -> DmaBufFile (export_bar_dmabuf)
    self.io_maps: dict = {}     # address -> IOMapping (map_bar_io)
    self.memory.bus_to_host = self.bar_to_host
    self._usb: dict[tuple[int, int], list] = {}
    self.usb_backend = None     # a pyusb backend (usb.backend.IBackend) presenting mock USB devices
    self._lock = threading.RLock()
    self._delayed = 0.0         # seconds delay() let pass on the models' clock (clock(), monotonic())
    # the threads ticking (their get_ident()): a tick of this thread, or an engine whose doorbell rang polling itself
    # alone (as a tick would, when its thread is not ticking and every other engine is idle: MockAMDGPU.ring_doorbell,
    # which holds Ctrl-C back meanwhile). Re-entrant ticks of such a thread return at once. (A set of thread ids:
    # cheaper to test and update than a threading.local's attribute, on every launch's doorbell.)
    self.ticking: set[int] = set()
    # Ctrl-C waits for a step of the synchronous engines to end: hardware goes on with its work whatever the host's
    # process is told, so an interrupt lands between two steps of it, never inside one (a queue stopped halfway through
    # a packet would be a fault no GPU has)
    self._hw_step = held_interrupt
    self._next_bus_address = {True: PCI_MEM_WINDOW, False: PCI_MEM32_WINDOW}
    self.closed = False
    self._kmsg: list[str] = []  # the kernel log: what mock drivers (the mock nvidia.ko) report of faults
    self.pid = _os.getpid()     # the current process (see the module docstring)
    self._next_pid = FAKE_PID_BASE
    self._process_memory: dict[int, dict[int, int]] = {}    # pid -> {address: size} of its anonymous memory
    for d in ("/dev", "/sys/bus/pci/devices", "/sys/bus/pci/drivers", "/sys/devices", "/sys/class", "/proc/self"):
      self.vfs.mkdir(d)
    self.vfs.add_file("/proc/sys/vm/compact_unevictable_allowed", "1\n", write=lambda data: None)
    self.vfs.add_file("/proc/self/status", read=lambda: f"Name:\tpython\nPid:\t{self.pid}\n")
    self.vfs.add_file("/proc/locks", read=self._proc_locks)

  # ---- errors: the VFS names the lookup; re-raise naming the call the driver made
  def _node(self, call: str, path: str, follow: bool = True):
    try: return self.vfs.lookup(path, follow)
    except OSCallError as e: raise OSCallError(call, path, e.errno) from None

  # ---- files and device nodes
  def open(self, path: str, flags: int = _os.O_RDWR, mode: int = 0o666):
    node = self._node("open", path)
    if isinstance(node, DeviceNode): return node.opener(path, flags)
    if isinstance(node, DataFile): return node.opener(path, flags) if node.opener else DataFileHandle(path, node, flags)
    raise OSCallError("open", path, errno.EISDIR)

  def exists(self, path: str) -> bool: return self.vfs.exists(path)

  # ---- sysfs and procfs
  @staticmethod
  def _sys(path: str) -> str: return "/sys/" + path.lstrip("/")

  @staticmethod
  def _proc(path: str) -> str: return "/proc/" + path.lstrip("/")

  def _read(self, path: str, size: int = -1, offset: int = 0) -> bytes:
    node = self._node("read", path)
    if isinstance(node, Dir): raise OSCallError("read", path, errno.EISDIR)
    if not isinstance(node, DataFile): raise OSCallError("read", path, errno.EINVAL, "not a regular file")
    if node.read_at is not None: return node.read_at(size if size >= 0 else 1 << 20, offset)
    data = node.content()[offset:]
    return data if size < 0 else data[:size]

  def _list(self, path: str) -> list[str]:
    try: return self.vfs.listdir(path)
    except OSCallError as e: raise OSCallError("listdir", path, e.errno) from None

  def _readlink(self, path: str) -> str:
    try: return self.vfs.readlink(path)
    except OSCallError as e: raise OSCallError("readlink", path, e.errno) from None

  def sysfs_list(self, path: str) -> list[str]: return self._list(self._sys(path))
  def sysfs_read(self, path: str) -> str: return self._read(self._sys(path)).decode(errors="replace")
  def sysfs_read_bytes(self, path: str, size: int = -1, offset: int = 0) -> bytes: return self._read(self._sys(path), size, offset)

  def sysfs_write(self, path: str, data) -> None:
    full = self._sys(path)
    node = self._node("write", full)
    if not isinstance(node, DataFile): raise OSCallError("write", full, errno.EISDIR if isinstance(node, Dir) else errno.EINVAL)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if node.write_at is not None: node.write_at(raw, 0)
    else: node.write(full, raw)

  def sysfs_exists(self, path: str) -> bool: return self.vfs.exists(self._sys(path), follow=False)
  def sysfs_readlink(self, path: str) -> str: return self._readlink(self._sys(path))

  # ---- memory
  def alloc_anon(self, size: int, addr: int | None = None, prot: int | None = None, shared: bool = False,
                 reserve_only: bool = False) -> int:
    va = self.memory.alloc(size, addr, prot, shared, reserve_only)
    with self._lock: self._process_memory.setdefault(self.pid, {})[va] = size
    return va

  def free_anon(self, addr: int, size: int) -> None:
    """munmap. A device model whose memory lives in that range may keep it alive (host_memory_freed() -> True: it
    frees it itself later, e.g. VRAM whose CPU mapping goes before the KFD allocation), so that its engines never
    touch unmapped host memory."""
    with self._lock:
      for mine in self._process_memory.values():
        if mine.get(addr) == size: del mine[addr]     # (a part of a mapping: still found, and skipped, at exit)
    keep = [dev.host_memory_freed(addr, size) for dev in self.devices if hasattr(dev, "host_memory_freed")]
    if not any(keep): self.memory.free(addr, size)

  # ---- processes
  def new_process(self) -> int:
    """Start another process and make it the current one (the previous one lives on); returns its pid."""
    with self._lock:
      self.pid, self._next_pid = self._next_pid, self._next_pid + 1
      return self.pid

  def exit_process(self, pid: int | None = None) -> None:
    """End process pid (default the current one) as the kernel ends a process killed with SIGKILL: its device locks
    are released and its anonymous memory unmapped; no driver close() runs, device models keep their state. Ending
    the current process starts a new current one (new_process()), as the next program run would be."""
    pid = self.pid if pid is None else pid
    with self._lock:
      for lock in [lk for lk in self._held_locks.values() if lk.pid == pid]: lock.release()
      mine = self._process_memory.pop(pid, {})
    ranges = [(a, n) for a, n in sorted(mine.items()) if self.memory.find(a) is not None]
    for dev in self.devices:       # first: engines stop using the memory (they fault on it from now on)
      if hasattr(dev, "process_exiting"): dev.process_exiting(pid, ranges)
    for addr, size in ranges: self.free_anon(addr, size)
    if pid == self.pid: self.new_process()

  def kill(self, pid: int) -> None:
    """SIGKILL (what `hcq-smi ... kill_pids` does to a lock holder): the process ends (exit_process)."""
    with self._lock:      # the locks and memory tables change under engine threads and tools in this process
      known = pid == self.pid or pid in self._process_memory or any(lk.pid == pid for lk in self._held_locks.values())
    if not known: raise DeviceError(f"mock kill: no process {pid}")
    self.exit_process(pid)

  def _proc_fds(self, pid: int) -> list[str]:
    """The lock files process pid holds."""
    with self._lock: return sorted(path for path, lock in self._held_locks.items() if lock.pid == pid)

  def _pids(self) -> list[int]:
    with self._lock: return sorted({self.pid, *(lk.pid for lk in self._held_locks.values()), *self._process_memory})

  def proc_list(self, path: str = "") -> list[str]: return self._list(self._proc(path))
  def proc_read(self, path: str) -> str: return self._read(self._proc(path)).decode(errors="replace")
  def proc_readlink(self, path: str) -> str: return self._readlink(self._proc(path))

  def open_process(self, pid: int) -> "MockProcess":
    if pid not in self._pids(): raise OSCallError("pidfd_open", f"pid {pid}", errno.ESRCH)
    return MockProcess(self, pid)

  def lock_holders(self) -> dict[str, int]:
    """lock path -> the pid holding it (what `hcq-smi ... pids` reports)."""
    with self._lock: return {path: lock.pid for path, lock in self._held_locks.items()}

  def phys_addrs(self, addr: int, size: int) -> list[int]: return self.memory.phys_addrs(addr, size)

  def memview(self, addr: int, size: int) -> memoryview: return libc.view(addr, size)

  def memory_barrier(self) -> None:
    """The fence before a doorbell (drivers/system/linux.py: an mfence). The mock's device models are Python in this
    process: in synchronous mode they run in this very thread, and the threaded worker reads memory only while it
    holds the interpreter lock, whose hand-over from this thread orders memory as a fence would; so no hardware fence
    (a foreign call) is needed here. What the barrier still does: run the engines that may progress."""
    for e in self.engines:     # tick()'s idle check inlined: the barrier before every doorbell finds them idle
      if getattr(e, "may_progress", True):
        self._rounds(1000)
        return

  # ---- MMIO
  def map_mmio(self, path: str, size: int, offset: int = 0, name: str = ""):
    node = self._node("mmap", path)
    mmio = getattr(node, "mmio", None)
    if mmio is None: raise OSCallError("mmap", path, errno.ENODEV, "no register window behind this file")
    return mmio(size, offset, name or path)

  def map_bar_io(self, path: str, size: int, offset: int = 0, name: str = ""):
    """A BAR window "mapped" as I/O memory: the mock reserves the addresses (PROT_NONE: a CPU access there is not
    modelled; map_mmio's view is the CPU's way in) and remembers the window (an MMIOView of the function, stores keep
    their width) for a mock kernel module that looks the mapping up by address (io_mapping: the mock RM's OS
    descriptor of I/O memory, as os_lookup_user_io_memory follows the VMA's PFNs on Linux)."""
    what = name or path
    if offset % PAGE or size <= 0 or size % PAGE or offset < 0:
      raise OSCallError("mmap", what, errno.EINVAL, f"{size:#x} bytes at {offset:#x}: offset and size must be positive "
                        f"multiples of the page size ({PAGE:#x})")
    node = self._node("mmap", path)
    if getattr(node, "mmio", None) is None: raise OSCallError("mmap", path, errno.ENODEV, "not a BAR resource file")
    view = node.mmio(size, offset, what)
    addr = self.memory.alloc(size, reserve_only=True, what=f"I/O mapping of {what}")
    mapping = IOMapping(self, addr, size, view, what)
    with self._lock: self.io_maps[addr] = mapping
    return mapping

  def io_mapping(self, addr: int, size: int):
    """The I/O mapping (map_bar_io) holding [addr, addr + size) whole, or None."""
    with self._lock:
      for m in self.io_maps.values():
        if m.addr <= addr and addr + size <= m.addr + m.size: return m
    return None

  def _unmap_io(self, mapping) -> None:
    with self._lock:
      if self.io_maps.pop(mapping.addr, None) is None: return
    self.memory.free(mapping.addr, mapping.size)

  def export_bar_dmabuf(self, path: str, size: int, offset: int = 0, name: str = ""):
    """A dma-buf of a BAR window (the mock models a BAR exporter explicitly; Linux 6.12 has none for a function
    driven from userspace: drivers/system/linux.py). Its file carries the window (an MMIOView of the BAR: stores keep
    their width and reach the function's model) for an importer of this MockOS (the mock KFD)."""
    from .files import DmaBufFile
    what = name or path
    if offset % PAGE or size <= 0 or size % PAGE or offset < 0:
      raise OSCallError("export_bar_dmabuf", what, errno.EINVAL, f"{size:#x} bytes at {offset:#x}: offset and size must "
                        f"be positive multiples of the page size ({PAGE:#x})")
    node = self._node("export_bar_dmabuf", path)
    if getattr(node, "mmio", None) is None:
      raise OSCallError("export_bar_dmabuf", path, errno.ENODEV, "not a BAR resource file")
    view = node.mmio(size, offset, what)
    buf = DmaBufFile(f"dmabuf:{what}+{offset:#x}", view, size)
    with self._lock: self.dmabufs[buf.fd] = buf
    return buf

  def dmabuf(self, fd: int):
    """The open dma-buf file with descriptor fd (an importer's lookup), or None."""
    buf = self.dmabufs.get(fd)
    return None if buf is None or buf.closed else buf

  def map_pci_resource(self, path: str, addr: int, size: int, offset: int = 0, name: str = ""):
    """A BAR window mapped at addr as a view of the model's memory (a memfd-backed VRAM BAR, FileMemoryMMIO): loads
    and stores there reach the same bytes the model and its engines see. Register windows cannot be mapped."""
    what = name or path
    if addr <= 0 or addr % PAGE or offset % PAGE or size <= 0 or size % PAGE or offset < 0:
      raise DeviceError(f"{what}: mapping {size:#x} bytes at BAR offset {offset:#x} to address {addr:#x}: address, "
                        f"offset and size must be positive multiples of the page size ({PAGE:#x})")
    node = self._node("mmap", path)
    if getattr(node, "mmio", None) is None: raise OSCallError("mmap", path, errno.ENODEV, "not a BAR resource file")
    return self._fixed_view(node.mmio(size, offset, what), path, addr, size, offset, what)

  def map_file_mmio(self, file, size: int, offset: int = 0, name: str = "", addr: int | None = None):
    """A window of an open device file whose regions are device models (mockgpu/vfio.py's device file): the
    model's MMIO view, or, at a fixed addr, a view of its memory as map_pci_resource makes one."""
    what = name or file.path
    if size <= 0 or size % PAGE or offset < 0 or offset % PAGE or addr is not None and (addr <= 0 or addr % PAGE):
      raise DeviceError(f"{what}: mapping {size:#x} bytes at file offset {offset:#x}" + ("" if addr is None else f" to address {addr:#x}")
                        + f": address, offset and size must be positive multiples of the page size ({PAGE:#x})")
    mmio = getattr(file, "mmio", None)
    if mmio is None: raise OSCallError("mmap", file.path, errno.ENODEV, "no register window behind this file")
    window = mmio(size, offset, what)
    return window if addr is None else self._fixed_view(window, file.path, addr, size, offset, what)

  def _fixed_view(self, window, path: str, addr: int, size: int, offset: int, what: str):
    if not hasattr(window, "map_view"):
      raise OSCallError("mmap", path, errno.ENODEV, f"{window.name} is not memory that can be mapped at an address")
    view = FixedViewMMIO(self.memory, addr, size, f"{what}+{offset:#x}@{addr:#x}")
    window.map_view(self.memory, addr, 0, size, view, what, kind="cpu")
    return view

  # ---- locks and events
  def lock_device(self, kind: str, pcibus: str, wait_s: float = 0.0) -> MockLock:
    try: path = lock_path(self.config.lock_dir, kind, pcibus)
    except ValueError as e: raise DeviceError(str(e)) from None
    deadline = time.monotonic() + wait_s
    while True:
      with self._lock:
        held = self._held_locks.get(path)
        if held is None: return self._take_lock(path)
        if time.monotonic() >= deadline: raise DeviceError(in_use_error(kind, pcibus, path, [held.pid]))
      time.sleep(0.0005)      # another thread holds it (the threaded mock, or a tool in this process)

  def _take_lock(self, path: str) -> MockLock:
    if not self.vfs.exists(path): self.vfs.add_file(path, b"", mode=0o666)    # lock files stay, as on Linux
    ino = self._inodes.setdefault(path, len(self._inodes) + 1000)
    self._next_fd += 1
    lock = self._held_locks[path] = MockLock(self, path, ino, self._next_fd)
    self.vfs.add_symlink(f"/proc/{lock.pid}/fd/{lock.fd}", path, replace=True)
    self.vfs.add_file(f"/proc/{lock.pid}/fdinfo/{lock.fd}", f"pos:\t0\nflags:\t02100002\nino:\t{ino}\nlock:\t{lock.line(1)}\n",
                      replace=True)
    if not self.vfs.exists(f"/proc/{lock.pid}/comm"): self.vfs.add_file(f"/proc/{lock.pid}/comm", "python\n")
    return lock

  def _proc_locks(self) -> str:
    with self._lock: return "".join(lock.line(n) + "\n" for n, lock in enumerate(self._held_locks.values(), 1))

  # ---- device state files (in the VFS, at the path LinuxOS uses)
  def _state_path(self, kind: str, pcibus: str, data: bytes | None = None) -> str:
    return checked_state_path(self.config.lock_dir, kind, pcibus, data)

  def write_device_state(self, kind: str, pcibus: str, data: bytes) -> None:
    path = self._state_path(kind, pcibus, data)
    self.vfs.add_file(path, bytes(data), replace=True)

  def read_device_state(self, kind: str, pcibus: str, owners=None) -> bytes | None:
    path = self._state_path(kind, pcibus)
    try: node = self.vfs.lookup(path, follow=False)
    except OSCallError: return None
    if not isinstance(node, DataFile): raise DeviceError(f"{path}: not a regular file")
    uid = getattr(node, "uid", _os.getuid())     # a test may give a file another owner (node.uid)
    if owners is not None and uid not in owners: raise DeviceError(owner_error(path, uid, owners))
    data = node.content()
    if len(data) > STATE_MAX_BYTES: raise DeviceError(f"{path}: more than {STATE_MAX_BYTES} bytes: not a state file")
    return data

  def remove_device_state(self, kind: str, pcibus: str) -> None:
    path = self._state_path(kind, pcibus)
    if self.vfs.exists(path, follow=False): self.vfs.remove(path)

  # ---- what tools (hcq-smi) ask beyond the driver interface, as LinuxOS answers it: the lock dir's files
  def listdir(self, path: str) -> list[str]: return self._list(path)

  def stat(self, path: str, follow_symlinks: bool = True) -> _os.stat_result:
    node = self._node("stat", path, follow_symlinks)
    if isinstance(node, Dir): mode = stat_mod.S_IFDIR | getattr(node, "mode", 0o755)
    elif isinstance(node, Symlink): mode = stat_mod.S_IFLNK | 0o777
    elif isinstance(node, DeviceNode): mode = getattr(node, "file_type", stat_mod.S_IFCHR) | 0o666
    else: mode = stat_mod.S_IFREG | getattr(node, "mode", 0o644)
    ino = self._inodes.get(self.vfs.realpath(path) if follow_symlinks else path, id(node) & 0xFFFFFFFF)
    uid = getattr(node, "uid", _os.getuid())
    return _os.stat_result((mode, ino, _os.makedev(*MOCK_LOCK_DEV), 1, uid, _os.getgid(), 0, 0, 0, 0))

  def realpath(self, path: str) -> str:
    try: return self.vfs.realpath(path)
    except OSCallError: return path

  def held_locks(self) -> list[str]:
    with self._lock: return sorted(self._held_locks)

  def printk(self, line: str) -> None:
    """A mock kernel driver's log line (the newest 1024 are kept)."""
    with self._lock:
      self._kmsg.append(line)
      if len(self._kmsg) > 2048: del self._kmsg[:-1024]

  def kernel_log(self, limit: int = 256) -> list[str]:
    with self._lock: return self._kmsg[-limit:]

  def eventfd(self, initval: int = 0) -> EventFD: return EventFD(initval, timeout_s=self.config.timeout_s)

  # ---- USB
  def add_usb_device(self, vendor_id: int, product_id: int, opener) -> None:
    """opener() -> USBTransport for a mock USB device (a bridge model)."""
    self._usb.setdefault((vendor_id, product_id), []).append(opener)

  def set_usb_backend(self, backend) -> None:
    """Mock USB devices behind pyusb: usb_open() then goes through pyusb (drivers/system/usb.py) exactly as on
    LinuxOS, with this backend (usb.backend.IBackend, e.g. mockgpu.usb.ASM24Backend) instead of libusb's."""
    self.usb_backend = backend

  def usb_open(self, vendor_id: int, product_id: int, index: int = 0, product_prefixes: tuple[str, ...] = ()):
    if self.usb_backend is not None and (vendor_id, product_id) not in self._usb:
      from ..drivers.system.usb import PyUSBTransport
      return PyUSBTransport.open(vendor_id, product_id, index, backend=self.usb_backend, product_prefixes=product_prefixes)
    found = self._usb.get((vendor_id, product_id), [])
    if index >= len(found):
      raise DeviceError(f"mock USB: no device {vendor_id:04x}:{product_id:04x} #{index} ({len(found)} present)")
    return found[index]()

  # ---- time
  # The device models' clock (clock()) is the host's monotonic clock plus the time delay() let pass: a driver's fixed
  # bring-up delay (psp_v13_0's 20 ms handshakes) moves the clock the models read instead of blocking, so that a model
  # that answers late (mockgpu/amd/am/psp.py) still sees a poll made without the delay as early, and the suites do
  # not sleep through every boot's delays. sleep() blocks as before (polls, another thread's progress).
  def clock(self) -> float:
    """The device models' monotonic time (no engine runs: callable from a register hook)."""
    return time.monotonic() + self._delayed

  def monotonic(self) -> float:
    if self.engines and not self.config.mock_threaded and any(e.blocked for e in self.engines): self.tick()
    return self.clock()

  def delay(self, seconds: float) -> None:
    self.tick()
    with self._lock: self._delayed += max(0.0, seconds)

  def sleep(self, seconds: float) -> None:
    self.tick()
    time.sleep(seconds)

  # ---- device models
  def add_device(self, model):
    """Attach a device model: model.attach(self) builds its device nodes and sysfs files."""
    model.attach(self)
    self.devices.append(model)
    return model

  def register_engine(self, engine) -> None:
    """An engine has poll() -> bool (made progress) and a `blocked` property (waiting on memory)."""
    self.engines.append(engine)
    self._sole = self.engines[0] if len(self.engines) == 1 else None

  def unregister_engine(self, engine) -> None:
    if engine in self.engines: self.engines.remove(engine)
    self._sole = self.engines[0] if len(self.engines) == 1 else None

  def tick_kicked(self, engine, max_rounds: int = 1000) -> None:
    """tick() right after `engine` was kicked (a doorbell write). While every other engine is idle (may_progress
    False), each round of tick() would find the others' polls returning False at once: `engine` is polled alone,
    until it makes no progress (the same rounds, without the others). As soon as another engine may progress (it is
    blocked on memory, or another thread rang it meanwhile), the full rounds of tick() take over."""
    me = get_ident()
    if self.threaded or me in self.ticking: return
    if not hasattr(engine, "may_progress"): return self.tick(max_rounds)
    engines = self.engines
    if len(engines) > 1 and not self.others_idle(engine): return self.tick(max_rounds)
    self._hw_step.hold()           # first: from here on a Ctrl-C waits, so the flag below cannot be left set
    self.ticking.add(me)
    try:
      for _ in range(max_rounds):
        progress = engine.poll()
        if len(engines) > 1 and not self.others_idle(engine): break
        # an engine whose may_progress is False would return False from poll() (see the module docstring)
        if not progress or not engine.may_progress: return
      else: return
    finally:
      self.ticking.discard(me)
      self._hw_step.release()
    self.tick(max_rounds)

  def others_idle(self, engine) -> bool:
    """Whether every engine but `engine` is idle (may_progress False)."""
    if self._sole is engine: return True        # the only engine (every doorbell of a one-GPU process asks)
    for e in self.engines:
      if e is not engine and getattr(e, "may_progress", True): return False
    return True

  def tick(self, max_rounds: int = 1000) -> None:
    """Synchronous mode: poll every engine until none makes progress (re-entrant calls return at once)."""
    for e in self.engines:     # nothing to do unless an engine may progress (engines without may_progress: always)
      if getattr(e, "may_progress", True): break
    else: return
    self._rounds(max_rounds)

  def _rounds(self, max_rounds: int) -> None:
    """tick() once an engine may progress: rounds that poll every engine (each one, whatever the others returned),
    until a round in which none made progress."""
    me = get_ident()
    if self.threaded or me in self.ticking: return
    self._hw_step.hold()
    self.ticking.add(me)
    try:
      for _ in range(max_rounds):
        progress = False
        for e in tuple(self.engines):     # a copy: a poll may add or drop an engine
          if e.poll(): progress = True
        if not progress: break
    finally:
      self.ticking.discard(me)
      self._hw_step.release()

  def add_pci_driver(self, name: str) -> None:
    """/sys/bus/pci/drivers/<name>/{bind,unbind}."""
    base = f"/sys/bus/pci/drivers/{name}"
    if self.vfs.exists(base): return
    self.vfs.mkdir(base)
    self.vfs.add_file(base + "/bind", write=lambda data: self._bind(name, data.decode(errors="replace").strip()), mode=0o200)
    self.vfs.add_file(base + "/unbind", write=lambda data: self._unbind(name, data.decode(errors="replace").strip()), mode=0o200)

  def _bind(self, driver: str, addr: str) -> None:
    fn = self.pci_functions.get(addr)
    if fn is None: raise OSCallError("write", f"/sys/bus/pci/drivers/{driver}/bind", errno.ENODEV, addr)
    if fn.driver is not None: raise OSCallError("write", f"/sys/bus/pci/drivers/{driver}/bind", errno.EBUSY, addr)
    fn.driver = driver
    self._link_driver(fn)
    fn.on_bind(driver)

  def _unbind(self, driver: str, addr: str) -> None:
    fn = self.pci_functions.get(addr)
    if fn is None or fn.driver != driver:
      raise OSCallError("write", f"/sys/bus/pci/drivers/{driver}/unbind", errno.ENODEV, addr)
    fn.driver = None
    self.vfs.remove(f"{fn.sysfs_dir}/driver")
    self.vfs.remove(f"/sys/bus/pci/drivers/{driver}/{addr}")
    fn.on_unbind(driver)

  def _link_driver(self, fn: PCIFunction) -> None:
    self.add_pci_driver(fn.driver)
    self.vfs.add_symlink(f"{fn.sysfs_dir}/driver", f"../../../bus/pci/drivers/{fn.driver}", replace=True)
    self.vfs.add_symlink(f"/sys/bus/pci/drivers/{fn.driver}/{fn.addr}", f"../../../../devices/pci{fn.domain_bus}/{fn.addr}",
                         replace=True)

  def bar_to_host(self, bus: int, size: int) -> int | None:
    """The host address behind bus address `bus` when it lies in a memory-backed BAR of a function (a GPU's VRAM
    aperture, MemoryMMIO): the mock fabric routes a peer's DMA there, as a PCIe switch routes a TLP by address to the
    BAR that claims it. None for register BARs (their stores are model calls, not DMA) and for unclaimed addresses."""
    from .mmio import MemoryMMIO
    for fn in list(self.pci_functions.values()):
      for bar in fn.bars.values():
        if bar.bus_address <= bus and bus + size <= bar.bus_address + bar.size and isinstance(bar.view, MemoryMMIO):
          return bar.view.addr + bus - bar.bus_address
    return None

  def allocate_bus_address(self, size: int, is_64: bool = True) -> int:
    with self._lock:
      addr = (self._next_bus_address[is_64] + size - 1) & ~(size - 1)
      if not is_64 and addr + size > 1 << 32: raise DeviceError(f"mock PCI: no room below 4 GiB for a {size:#x}-byte BAR")
      self._next_bus_address[is_64] = addr + size
      return addr

  def add_pci_function(self, fn: PCIFunction) -> PCIFunction:
    """Publish a PCI function in sysfs (and bind it to fn.driver when set)."""
    if fn.addr in self.pci_functions: raise DeviceError(f"mock PCI: {fn.addr} already exists")
    fn.os = self
    fn.assign_bus_addresses(self.allocate_bus_address)
    self.vfs.mkdir(fn.sysfs_dir)
    for name, kw in fn.sysfs_files().items(): self.vfs.add_file(f"{fn.sysfs_dir}/{name}", **kw)

    def remove(data: bytes):
      if data.decode(errors="replace").strip() == "1": self.remove_pci_function(fn.addr)
    self.vfs.add_file(f"{fn.sysfs_dir}/remove", write=remove, mode=0o200)
    self.vfs.add_symlink(f"/sys/bus/pci/devices/{fn.addr}", f"../../../devices/pci{fn.domain_bus}/{fn.addr}")
    self.pci_functions[fn.addr] = fn
    if fn.driver: self._link_driver(fn)
    return fn

  def remove_pci_function(self, addr: str) -> None:
    fn = self.pci_functions.pop(addr)
    if fn.driver:
      self.vfs.remove(f"/sys/bus/pci/drivers/{fn.driver}/{addr}")
      fn.on_unbind(fn.driver)
    self.vfs.remove(f"/sys/bus/pci/devices/{addr}")
    self.vfs.remove(fn.sysfs_dir)

  def close(self) -> None:
    if self.closed: return
    self.closed = True
    for dev in reversed(self.devices):
      if hasattr(dev, "close"): dev.close()
    self.engines.clear()
    self._sole = None
    self.memory.close()

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()
  def __repr__(self): return f"MockOS({len(self.devices)} devices, {len(self.pci_functions)} PCI functions)"


__all__ = ["MockOS", "MockLock", "MockProcess"]
