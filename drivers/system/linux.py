"""LinuxOS: the OS interface on a real Linux machine."""
from __future__ import annotations

import ctypes
import errno as errno_mod
import fcntl
import os
import select
import signal as signal_mod
import stat as stat_mod
import struct
import time

from ...errors import DeviceError, OSCallError, Timeout
from . import libc
from .mmio import MappedMMIO
from .locks import (STATE_MAX_BYTES, FileKey, checked_state_path, held_flocks, in_use_error, lock_file_problem, lock_path,
                    owner_error)

# The running kernel's procfs. Config.proc_root (a fake tree in tests) may decide what is LISTED; whether a process
# is SIGNALLED is decided here, by the kernel itself, whatever the configuration says.
KERNEL_PROC = "/proc"
# include/linux/threads.h: PID_MAX_LIMIT on 64-bit kernels (4M); /proc/sys/kernel/pid_max is at most this
PID_MAX_LIMIT = 1 << 22


def parse_pid(text: str) -> int | None:
  """The pid a procfs entry name or a field stands for: ASCII digits without a leading zero, 1..PID_MAX_LIMIT;
  None for anything else ("self", "-1", "0", "007", other scripts' digits such as "\u0663", a number too large)."""
  if not isinstance(text, str) or not text.isascii() or not text.isdigit() or text.startswith("0") or len(text) > 7: return None
  pid = int(text)
  return pid if pid <= PID_MAX_LIMIT else None


def _kernel_holds_flock(pid: int, path: str) -> bool | None:
  """Whether process pid holds an flock on the regular file path, as the running kernel shows it (KERNEL_PROC): one
  of its fds is that file (same device and inode) and that fd's fdinfo has a granted FLOCK line (fdinfo lists only
  the locks owned through that open file description). None when this user may not read its fds."""
  try: want = os.stat(path, follow_symlinks=False)
  except (OSError, ValueError): return False  # the lock file is gone
  if not stat_mod.S_ISREG(want.st_mode): return False
  base = f"{KERNEL_PROC}/{pid}"
  try: fds = os.listdir(f"{base}/fd")
  except PermissionError: return None
  except OSError: return False  # exited
  for fd in fds:
    try:
      st = os.stat(f"{base}/fd/{fd}")
      if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino): continue
      with open(f"{base}/fdinfo/{fd}", "rb") as f: info = f.read().decode(errors="replace")
    except OSError: continue  # closed meanwhile
    if held_flocks(info, fdinfo=True): return True
  return False


class _OwnedFD:
  """A file descriptor this object owns: closed by close() (idempotent) or at the end of a `with` block."""
  fd: int

  def close(self) -> None:
    if self.fd >= 0:
      os.close(self.fd)
      self.fd = -1

  def __enter__(self): return self
  def __exit__(self, *exc): self.close()


class LinuxFile(_OwnedFD):
  """An open file descriptor with ioctl/mmap/read/write. Closing it unmaps nothing: mappings outlive the fd."""

  def __init__(self, path: str, fd: int):
    self.path, self.fd = path, fd

  def ioctl(self, request: int, arg) -> int:
    try:
      if isinstance(arg, ctypes.Structure) or isinstance(arg, ctypes.Union) or isinstance(arg, ctypes.Array):
        return _ioctl_ptr(self.fd, request, ctypes.addressof(arg))
      if isinstance(arg, bytearray): return fcntl.ioctl(self.fd, request, arg, True)
      return fcntl.ioctl(self.fd, request, arg)
    except OSError as e:
      raise OSCallError("ioctl", self.path, e.errno, f"request {request:#x}") from None

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None) -> int:
    prot = libc.PROT_READ | libc.PROT_WRITE if prot is None else prot
    flags = libc.MAP_SHARED if flags is None else flags
    if addr is not None: flags |= libc.MAP_FIXED
    return libc.mmap(addr, size, prot, flags, self.fd, offset, what=self.path)

  def ioctl_fd(self, request: int, arg, path: str) -> "LinuxFile":
    """An ioctl whose result is a new file descriptor (VFIO_GROUP_GET_DEVICE_FD), owned by the returned file."""
    fd = self.ioctl(request, arg)
    if not isinstance(fd, int) or fd < 0: raise OSCallError("ioctl", self.path, None, f"request {request:#x}: no descriptor ({fd!r})")
    return LinuxFile(path, fd)

  def read(self, size=-1, offset=None) -> bytes:
    try:
      if size < 0: size = os.fstat(self.fd).st_size or (1 << 20)
      return os.pread(self.fd, size, offset) if offset is not None else os.read(self.fd, size)
    except OSError as e: raise OSCallError("read", self.path, e.errno) from None

  def write(self, data, offset=None) -> int:
    try: return os.pwrite(self.fd, data, offset) if offset is not None else os.write(self.fd, data)
    except OSError as e: raise OSCallError("write", self.path, e.errno) from None

  def __repr__(self): return f"LinuxFile({self.path!r}, fd={self.fd})"


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
_libc.ioctl.restype = ctypes.c_int


def _ioctl_ptr(fd: int, request: int, ptr: int) -> int:
  # fcntl.ioctl copies buffers of at most 1024 bytes and cannot pass a pointer to caller-owned memory; ctypes can.
  res = _libc.ioctl(fd, request, ptr)
  if res < 0:
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))
  return res


class MemoryMMIO(MappedMMIO):
  """An MMIO window over mapped memory (a BAR resource file mmapped into this process)."""

  def __init__(self, addr: int, size: int, name: str, mapped_size: int = 0):
    super().__init__(addr, size, name)
    self._mapped_size = mapped_size  # > 0: this view owns an mmap of that size at addr, unmapped by close()

  def close(self) -> None:
    if self._mapped_size:
      self._u32 = None
      libc.munmap(self.addr, self._mapped_size)
      self._mapped_size, self.size = 0, 0  # every later access fails the bounds check instead of faulting


class FlockLock:
  def __init__(self, path: str, fd: int):
    self.path, self.fd = path, fd
    self.pid = os.getpid()     # the holder, as <proc>/locks names it

  def release(self) -> None:
    if self.fd >= 0:
      fcntl.flock(self.fd, fcntl.LOCK_UN)
      os.close(self.fd)
      self.fd = -1

  def __enter__(self): return self
  def __exit__(self, *exc): self.release()


class ProcessHandle(_OwnedFD):
  """A pidfd (pidfd_open(2), Linux 5.3): it names one process for as long as it is open, so a signal sent through
  it can never reach another process that was given the same pid after this one exited.

  The only way to signal it is signal_lock_holder: the running kernel must show that the process holds the lock."""

  def __init__(self, pid: int, fd: int):
    self.pid, self.fd = pid, fd

  def _send(self, sig: int) -> None:
    try: signal_mod.pidfd_send_signal(self.fd, sig)
    except OSError as e: raise OSCallError("pidfd_send_signal", f"pid {self.pid}", e.errno, f"signal {sig}") from None

  def signal_lock_holder(self, lock_file: str, sig: int) -> bool | None:
    """Send sig if the running kernel (its /proc, never Config.proc_root) shows this process holding an flock on
    lock_file: True when sent; False when it does not hold it (or exited); None when this user may not read its
    fds (nothing sent). Raises OSCallError when the signal itself fails (EPERM: another user's process)."""
    verdict = _kernel_holds_flock(self.pid, lock_file)
    if verdict is not True: return verdict
    # The check read /proc/<pid>, which describes the pinned process only if that pid was not freed and reused
    # meanwhile; a pid is freed only once its process is reaped, so the pinned process still being there (signal 0
    # through the pidfd) shows that it was. Left: the holder unlocking between here and the signal, itself.
    try: self._send(0)
    except OSCallError as e:
      if e.errno == errno_mod.ESRCH: return False
      raise
    self._send(sig)
    return True


class EventFD(LinuxFile):
  """eventfd(2): an 8-byte counter the kernel (or a device model) signals."""

  def signal(self, value: int = 1) -> None: self.write(struct.pack("<Q", value))

  def wait_value(self, timeout_s: float = 10.0) -> int:
    """Wait until the counter is non-zero (at most timeout_s), then read and reset it."""
    with select.epoll() as ep:
      ep.register(self.fd, select.EPOLLIN)
      if not ep.poll(timeout_s): raise Timeout(f"{self.path} (fd {self.fd}) to be signalled", timeout_s=timeout_s)
    return struct.unpack("<Q", self.read(8))[0]


def _executable(path: str) -> bool:
  try: st = os.stat(path)
  except (OSError, ValueError): return False  # missing, in an unreadable folder, or a name with a NUL
  return stat_mod.S_ISREG(st.st_mode) and os.access(path, os.X_OK)


class LinuxOS:
  """The OS interface on Linux. Roots of sysfs/proc/dev and the lock dir come from the Config."""

  def __init__(self, config):
    """config: an hcq Config (its roots and lock dir); given explicitly: only config.py reads the environment."""
    if config is None: raise TypeError("LinuxOS needs a Config (hcq.config.from_env() reads the environment)")
    self.config = config

  # ---- files
  def _dev_path(self, path: str) -> str:
    # "/dev/..." follows config.dev_root so that tests can point device nodes at a fake tree
    if path.startswith("/dev/") and self.config.dev_root != "/dev": return os.path.join(self.config.dev_root, path[5:])
    return path

  def open(self, path: str, flags: int = os.O_RDWR, mode: int = 0o666) -> LinuxFile:
    real = self._dev_path(path)
    try: fd = os.open(real, flags | os.O_CLOEXEC, mode)
    except OSError as e: raise OSCallError("open", real, e.errno) from None
    return LinuxFile(real, fd)

  def exists(self, path: str) -> bool: return os.path.exists(self._dev_path(path))

  # Host file-system queries beyond the OSInterface protocol, for tools (hcq-smi lists the lock dir and matches
  # lock files by inode). Drivers do not need them.
  def listdir(self, path: str) -> list[str]:
    real = self._dev_path(path)
    try: return sorted(os.listdir(real))
    except OSError as e: raise OSCallError("listdir", real, e.errno) from None

  def stat(self, path: str, follow_symlinks: bool = True) -> os.stat_result:
    real = self._dev_path(path)
    try: return os.stat(real, follow_symlinks=follow_symlinks)
    except OSError as e: raise OSCallError("stat", real, e.errno) from None

  def realpath(self, path: str) -> str: return os.path.realpath(self._dev_path(path))

  def open_process(self, pid: int) -> ProcessHandle:
    """A handle on process pid through which it can be signalled (hcq-smi kill_pids)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= PID_MAX_LIMIT:
      raise DeviceError(f"{pid!r} is not a process id (1-{PID_MAX_LIMIT})")
    try: fd = os.pidfd_open(pid)
    except OSError as e: raise OSCallError("pidfd_open", f"pid {pid}", e.errno) from None
    return ProcessHandle(pid, fd)

  def find_program(self, name: str) -> str | None:
    """The file running `name` would execute: name itself when it is an absolute path, else the first executable
    regular file `name` in a folder of config.exec_path (PATH). Nothing depends on the current folder: relative
    paths and relative PATH folders are not used. Folders that are missing, unreadable or no folders are skipped,
    as are files that cannot be executed; None if none is found."""
    if "/" in name: return name if os.path.isabs(name) and _executable(name) else None
    if not name: return None
    for folder in self.config.exec_path.split(os.pathsep):
      if not os.path.isabs(folder): continue
      path = os.path.join(folder, name)
      if _executable(path): return path
    return None

  # ---- sysfs / procfs
  def _sys(self, path: str) -> str: return os.path.join(self.config.sysfs_root, path.lstrip("/"))
  def _proc(self, path: str) -> str: return os.path.join(self.config.proc_root, path.lstrip("/"))

  def sysfs_list(self, path: str) -> list[str]:
    try: return sorted(os.listdir(self._sys(path)))
    except OSError as e: raise OSCallError("listdir", self._sys(path), e.errno) from None

  def sysfs_read(self, path: str) -> str:
    return self.sysfs_read_bytes(path).decode(errors="replace")

  def sysfs_read_bytes(self, path: str, size: int = -1, offset: int = 0) -> bytes:
    full = self._sys(path)
    try:
      with open(full, "rb", buffering=0) as f:
        if offset: f.seek(offset)
        return f.read() if size < 0 else f.read(size)
    except OSError as e: raise OSCallError("read", full, e.errno) from None

  def sysfs_write(self, path: str, data) -> None:
    """Write an attribute in one write(2) call. Never creates a file: a missing attribute is an error
    (O_TRUNC keeps fake trees honest; sysfs ignores it)."""
    full = self._sys(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    try:
      fd = os.open(full, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
      try: written = os.write(fd, raw)
      finally: os.close(fd)
    except OSError as e: raise OSCallError("write", full, e.errno, f"value {raw[:64]!r}") from None
    if written != len(raw): raise OSCallError("write", full, None, f"short write: {written} of {len(raw)} bytes")

  def sysfs_exists(self, path: str) -> bool: return os.path.lexists(self._sys(path))

  def sysfs_readlink(self, path: str) -> str:
    try: return os.readlink(self._sys(path))
    except OSError as e: raise OSCallError("readlink", self._sys(path), e.errno) from None

  def proc_list(self, path: str = "") -> list[str]:
    try: return os.listdir(self._proc(path))
    except OSError as e: raise OSCallError("listdir", self._proc(path), e.errno) from None

  def proc_read(self, path: str) -> str:
    try:
      with open(self._proc(path), "rb") as f: return f.read().decode(errors="replace")
    except OSError as e: raise OSCallError("read", self._proc(path), e.errno) from None

  def proc_readlink(self, path: str) -> str:
    try: return os.readlink(self._proc(path))
    except OSError as e: raise OSCallError("readlink", self._proc(path), e.errno) from None

  # ---- memory
  def alloc_anon(self, size: int, addr: int | None = None, prot: int | None = None, shared: bool = False,
                 reserve_only: bool = False) -> int:
    if reserve_only: prot = libc.PROT_NONE
    elif prot is None: prot = libc.PROT_READ | libc.PROT_WRITE
    flags = libc.MAP_ANONYMOUS | (libc.MAP_SHARED if shared else libc.MAP_PRIVATE)
    if reserve_only: flags |= libc.MAP_NORESERVE
    if addr is not None: flags |= libc.MAP_FIXED_NOREPLACE
    return libc.mmap(addr, size, prot, flags, what=f"anonymous memory of {size:#x} bytes")

  def free_anon(self, addr: int, size: int) -> None: libc.munmap(addr, size)

  def phys_addrs(self, addr: int, size: int) -> list[int]:
    """Physical address of each page of [addr, addr+size): the pages are locked (mlock) and touched first, then
    read from <proc>/self/pagemap (bit 63 = present, bits 0-54 = PFN; Documentation/admin-guide/mm/pagemap.rst)."""
    page = libc.PAGE_SIZE
    start, end = addr & ~(page - 1), (addr + size + page - 1) & ~(page - 1)
    # mlock faults every page in (write-faults private writable mappings, so no shared zero page) and keeps
    # it resident; touching the pages by hand would crash on a read-only mapping.
    libc.mlock(start, end - start)
    path = self._proc("self/pagemap")
    try:
      with open(path, "rb", buffering=0) as f:
        f.seek((start // page) * 8)
        raw = f.read(((end - start) // page) * 8)
    except OSError as e: raise OSCallError("read", path, e.errno) from None
    out = []
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", raw)):
      pfn = entry & ((1 << 55) - 1)
      if not entry >> 63 or pfn == 0:
        raise DeviceError(f"{path}: page {start + i * page:#x} has no physical address (not present, or no "
                          f"CAP_SYS_ADMIN to read PFNs)")
      out.append(pfn * page)
    if len(set(out)) != len(out):
      raise DeviceError(f"{path}: pages of {addr:#x}+{size:#x} share physical pages (a read-only private mapping maps "
                        f"the shared zero page): DMA memory must be writable")
    return out

  def memview(self, addr: int, size: int) -> memoryview: return libc.view(addr, size)

  def memory_barrier(self) -> None: libc.memory_barrier()

  # ---- MMIO
  def map_mmio(self, path: str, size: int, offset: int = 0, name: str = "") -> MemoryMMIO:
    f = self.open(path, os.O_RDWR | os.O_SYNC)
    try: addr = f.mmap(size, offset)
    finally: f.close()
    return MemoryMMIO(addr, size, name or path, mapped_size=size)

  def map_bar_io(self, path: str, size: int, offset: int = 0, name: str = "") -> MemoryMMIO:
    """An mmap of the sysfs resource file: pci_mmap_resource_range (drivers/pci/mmap.c) maps it with
    io_remap_pfn_range, so the VMA is VM_IO|VM_PFNMAP, which nvidia.ko's os_lookup_user_io_memory accepts."""
    return self.map_mmio(path, size, offset, name)

  def export_bar_dmabuf(self, path: str, size: int, offset: int = 0, name: str = ""):
    """Linux 6.12 has no way for a process to export a PCI BAR it drives from userspace as a dma-buf: sysfs resource
    files are only mmapped, and VFIO's only dma-buf ioctl is VFIO_DEVICE_GET_GFX_DMABUF for a mediated device's
    display plane (include/uapi/linux/vfio.h). The importing side exists (KFD: AMDKFD_IOC_IMPORT_DMABUF, amdgpu's
    importer checks pci_p2pdma_distance: drivers/gpu/drm/amd/amdgpu/amdgpu_dma_buf.c), so a kernel with a BAR exporter
    for the function would serve here; without one, an error that says so."""
    raise OSCallError("export_bar_dmabuf", name or path, errno_mod.EOPNOTSUPP,
                      f"{size:#x} bytes at BAR offset {offset:#x}: Linux has no dma-buf exporter for a PCI BAR driven "
                      f"from userspace (sysfs resource files and VFIO regions are only mmapped), so a GPU queue cannot "
                      f"map this BAR page through KFD; drive the peer with the CPU, or use an AM GPU (its page tables "
                      f"map the BAR's bus address)")

  def map_pci_resource(self, path: str, addr: int, size: int, offset: int = 0, name: str = "") -> MemoryMMIO:
    what = name or path
    if addr <= 0 or addr % libc.PAGE_SIZE or offset % libc.PAGE_SIZE or size <= 0 or size % libc.PAGE_SIZE or offset < 0:
      raise DeviceError(f"{what}: mapping {size:#x} bytes at BAR offset {offset:#x} to address {addr:#x}: address, "
                        f"offset and size must be positive multiples of the page size ({libc.PAGE_SIZE:#x})")
    f = self.open(path, os.O_RDWR | os.O_SYNC)
    try:
      bar_size = os.fstat(f.fd).st_size        # a sysfs resource file's size is its BAR's
      if bar_size and offset + size > bar_size:
        raise DeviceError(f"{what}: {offset:#x}+{size:#x} is outside the BAR's {bar_size:#x} bytes")
      libc.mmap(addr, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED | libc.MAP_FIXED_NOREPLACE, f.fd, offset,
                what=path)
    finally: f.close()
    return MemoryMMIO(addr, size, f"{what}+{offset:#x}@{addr:#x}", mapped_size=size)

  def map_file_mmio(self, file, size: int, offset: int = 0, name: str = "", addr: int | None = None) -> MemoryMMIO:
    what = name or file.path
    if size <= 0 or size % libc.PAGE_SIZE or offset < 0 or offset % libc.PAGE_SIZE or \
       addr is not None and (addr <= 0 or addr % libc.PAGE_SIZE):
      raise DeviceError(f"{what}: mapping {size:#x} bytes at file offset {offset:#x}" + ("" if addr is None else f" to address {addr:#x}")
                        + f": address, offset and size must be positive multiples of the page size ({libc.PAGE_SIZE:#x})")
    flags = libc.MAP_SHARED | (0 if addr is None else libc.MAP_FIXED_NOREPLACE)
    at = libc.mmap(addr, size, libc.PROT_READ | libc.PROT_WRITE, flags, file.fd, offset, what=f"{file.path} ({what})")
    return MemoryMMIO(at, size, what if addr is None else f"{what}+{offset:#x}@{addr:#x}", mapped_size=size)

  # ---- locks and events
  def lock_device(self, kind: str, pcibus: str, wait_s: float = 0.0) -> FlockLock:
    try: path = lock_path(self.config.lock_dir, kind, pcibus)
    except ValueError as e: raise DeviceError(f"cannot lock device: {e}") from None
    # only contention is waited out (a lock file that cannot be opened or flocked fails at once), and the holders
    # are looked up in <proc>/locks once, for the error, not on every try
    deadline = time.monotonic() + wait_s
    while True:
      last = time.monotonic() >= deadline
      lock = self._lock_file(kind, pcibus, path, name_holders=last)
      if lock is not None: return lock
      time.sleep(0.0005)

  def _open_lock_file(self, path: str) -> int:
    """The lock file's fd. The lock dir is world-writable, so (drivers/system/locks.py lock_file_problem) a symbolic
    link (O_NOFOLLOW), a FIFO or other non-regular file (O_NONBLOCK: never waited on) and a hard link (st_nlink != 1:
    someone else's file under the lock's name) are refused, and only a file this open created (O_EXCL) is made mode
    0666, so that other users can take the lock after us whatever our umask: a file that was there already keeps its
    mode (chmod-ing it would chmod whatever someone linked there)."""
    for _ in range(100):      # created and removed by others in turn: give up after that many rounds
      try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        created = True
      except FileExistsError:
        try:
          # what is there is looked at before it is opened (a device node or FIFO is never opened) and again after
          why = lock_file_problem(os.lstat(path))
          if why: raise OSCallError("open", path, None, f"{why}: not a lock file hcq made; remove it")
          fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError: continue      # removed between the two opens: create it again
        except OSError as e: raise OSCallError("open", path, e.errno) from None
        created = False
      except OSError as e: raise OSCallError("open", path, e.errno) from None
      try:
        why = lock_file_problem(os.fstat(fd))
        if why: raise OSCallError("open", path, None, f"{why}: not a lock file hcq made; remove it")
        if created: os.fchmod(fd, 0o666)
      except OSError as e:
        os.close(fd)
        raise OSCallError("fchmod", path, e.errno) from None
      except BaseException:
        os.close(fd)
        raise
      return fd
    raise OSCallError("open", path, None, "created and removed by others 100 times in a row")

  def _lock_file(self, kind: str, pcibus: str, path: str, name_holders: bool = True) -> FlockLock | None:
    """The lock, or (held by another) None when not name_holders, else the DeviceError naming the holders."""
    fd = self._open_lock_file(path)
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno in (errno_mod.EWOULDBLOCK, errno_mod.EAGAIN):
        pids = self._flock_holders(fd) if name_holders else None
        os.close(fd)
        if pids is None: return None
        raise DeviceError(in_use_error(kind, pcibus, path, pids)) from None
      os.close(fd)
      raise OSCallError("flock", path, e.errno) from None
    return FlockLock(path, fd)

  # ---- device state files (written whole: a temporary file renamed over the name, so a reader sees all or nothing)
  def _state_path(self, kind: str, pcibus: str, data: bytes | None = None) -> str:
    return checked_state_path(self.config.lock_dir, kind, pcibus, data)

  def write_device_state(self, kind: str, pcibus: str, data: bytes) -> None:
    path = self._state_path(kind, pcibus, data)
    # an unguessable name: one planted (or left by a crashed process of the same pid) cannot block the publish
    tmp = f"{path}.{os.getpid()}.{os.urandom(8).hex()}.tmp"
    try:
      # O_EXCL | O_NOFOLLOW: the lock dir is world-writable; nothing planted there is opened or followed
      fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e: raise OSCallError("open", tmp, e.errno) from None
    try:
      try:
        os.fchmod(fd, 0o644)
        written = os.write(fd, data)
      finally: os.close(fd)
      if written != len(data): raise OSCallError("write", tmp, None, f"short write: {written} of {len(data)} bytes")
      try: os.rename(tmp, path)      # replaces a link itself, never what it points to
      except OSError as e: raise OSCallError("rename", path, e.errno) from None
    except BaseException:
      try: os.unlink(tmp)
      except OSError: pass
      raise

  def read_device_state(self, kind: str, pcibus: str, owners=None) -> bytes | None:
    path = self._state_path(kind, pcibus)
    try: fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
      if e.errno == errno_mod.ENOENT: return None
      if e.errno == errno_mod.ELOOP: raise DeviceError(f"{path}: a symbolic link, not a state file") from None
      raise OSCallError("open", path, e.errno) from None
    try:
      st = os.fstat(fd)
      if not stat_mod.S_ISREG(st.st_mode): raise DeviceError(f"{path}: not a regular file")
      if owners is not None and st.st_uid not in owners: raise DeviceError(owner_error(path, st.st_uid, owners))
      data = os.read(fd, STATE_MAX_BYTES + 1)
    except OSError as e: raise OSCallError("read", path, e.errno) from None
    finally: os.close(fd)
    if len(data) > STATE_MAX_BYTES: raise DeviceError(f"{path}: more than {STATE_MAX_BYTES} bytes: not a state file")
    return data

  def remove_device_state(self, kind: str, pcibus: str) -> None:
    path = self._state_path(kind, pcibus)
    try: os.unlink(path)
    except FileNotFoundError: pass
    except OSError as e: raise OSCallError("unlink", path, e.errno) from None

  def _flock_holders(self, fd: int) -> list[int]:
    """The pids holding an flock on the file open at fd, from <proc>/locks (empty when procfs cannot tell)."""
    st = os.fstat(fd)
    key = FileKey(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    try: text = self.proc_read("locks")
    except OSCallError: return []
    return [e.pid for e in held_flocks(text) if e.key == key and e.pid > 0]

  def eventfd(self, initval: int = 0) -> EventFD:
    try: fd = os.eventfd(initval, os.EFD_CLOEXEC)
    except OSError as e: raise OSCallError("eventfd", "eventfd", e.errno) from None
    return EventFD("eventfd", fd)

  # ---- USB
  def usb_open(self, vendor_id: int, product_id: int, index: int = 0, product_prefixes: tuple[str, ...] = ()):
    from .usb import PyUSBTransport
    return PyUSBTransport.open(vendor_id, product_id, index, product_prefixes=product_prefixes)

  # ---- time
  def monotonic(self) -> float: return time.monotonic()
  def sleep(self, seconds: float) -> None: time.sleep(seconds)
  def delay(self, seconds: float) -> None: time.sleep(seconds)

  # ---- the kernel log (drivers' own reports of faults, e.g. nvidia.ko's "NVRM: Xid" lines)
  def kernel_log(self, limit: int = 256) -> list[str]:
    """The text of the newest `limit` kernel log records (/dev/kmsg, one record a read: "prio,seq,usec,flags;text"
    per the kernel's Documentation/ABI/testing/dev-kmsg); [] when the log cannot be read (dmesg_restrict)."""
    try: fd = os.open(self._dev_path("/dev/kmsg"), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError: return []
    lines: list[str] = []
    try:
      for _ in range(1 << 16):            # the log ring holds far fewer records; bounded either way
        try: rec = os.read(fd, 8192)
        except BlockingIOError: break
        except OSError as e:
          if e.errno == errno_mod.EPIPE: continue      # a record was overwritten while reading: go on
          break
        if not rec: break
        lines.append(rec.split(b";", 1)[-1].split(b"\n", 1)[0].decode(errors="replace"))
        if len(lines) > 2 * limit: del lines[:-limit]
    finally: os.close(fd)
    return lines[-limit:]
