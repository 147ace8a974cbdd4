"""The OS interface: everything a driver may ask of the operating system, and nothing else.

Drivers receive an OSInterface object (LinuxOS for real hardware, mockgpu.MockOS for the embedded mock) and never
call open/ioctl/mmap/sysfs/flock/usb themselves. The contract tests in tests/system/test_os_contract.py run against
every implementation.

Paths given to sysfs_* and proc_* methods are relative to the configured roots (Config.sysfs_root, .proc_root),
e.g. os.sysfs_read("bus/pci/devices/0000:03:00.0/vendor").
"""
from __future__ import annotations

import abc
import struct
from typing import Collection, Protocol, runtime_checkable


@runtime_checkable
class FileHandle(Protocol):
  """An open file: a device node (/dev/kfd, renderD128, a BAR resource file), a regular file or an eventfd."""
  path: str
  fd: int

  def ioctl(self, request: int, arg) -> int:
    """Issue ioctl(request) with arg (a ctypes structure, modified in place, or a bytearray). Returns the result;
    raises OSCallError naming the path and the request on failure."""

  def mmap(self, size: int, offset: int = 0, prot: int | None = None, flags: int | None = None,
           addr: int | None = None) -> int:
    """Map size bytes of the file at offset; returns the address. addr places it there (MAP_FIXED)."""

  def read(self, size: int = -1, offset: int | None = None) -> bytes: ...
  def write(self, data: bytes, offset: int | None = None) -> int: ...
  def close(self) -> None: ...
  # Files whose ioctls hand out descriptors (a VFIO group: VFIO_GROUP_GET_DEVICE_FD) also have
  #   ioctl_fd(request, arg, path) -> FileHandle: the ioctl's result is a new descriptor, owned by the returned
  #   handle (named path in errors).


class MMIOView(abc.ABC):
  """A register window (a PCI BAR, a doorbell page): 32- and 64-bit little-endian accesses by byte offset.

  On real hardware it is an mmap of the BAR; in the mock, writes reach the device model."""
  size: int
  name: str

  @abc.abstractmethod
  def read32(self, offset: int) -> int: ...
  @abc.abstractmethod
  def write32(self, offset: int, value: int) -> None: ...

  def read64(self, offset: int) -> int:
    return self.read32(offset) | (self.read32(offset + 4) << 32)

  def write64(self, offset: int, value: int) -> None:
    self.write32(offset, value & 0xFFFFFFFF)
    self.write32(offset + 4, (value >> 32) & 0xFFFFFFFF)

  def write_bytes(self, offset: int, data: bytes) -> None:
    """Copy data (a multiple of 4 bytes) into the window as 32-bit stores, in order."""
    if len(data) % 4: raise ValueError(f"{self.name}: write of {len(data)} bytes is not a multiple of 4")
    for i, (v,) in enumerate(struct.iter_unpack("<I", data)): self.write32(offset + 4 * i, v)

  def read_bytes(self, offset: int, size: int) -> bytes:
    return b"".join(struct.pack("<I", self.read32(offset + i)) for i in range(0, size, 4))[:size]

  def close(self) -> None:
    """Give the window back (unmap it); no access is allowed afterwards. Idempotent."""

  def _check(self, offset: int, width: int) -> None:
    if offset < 0 or offset + width > self.size or offset % width:
      from ...errors import DeviceError
      raise DeviceError(f"{self.name}: {width * 8}-bit access at offset {offset:#x} is outside the {self.size:#x}-byte "
                        f"window or misaligned")


class DeviceLock(Protocol):
  """An exclusive flock on <lock dir>/<kind>_<pcibus>.lock, held for as long as the driver owns the device."""
  path: str
  pid: int       # the holding process, as procfs names it
  def release(self) -> None: ...


# The status of a USB transfer once it completed (an asynchronous engine sets it on each request: drivers/system/
# usbasync.py); the names are libusb's enum libusb_transfer_status (libusb/libusb.h: LIBUSB_TRANSFER_COMPLETED, _ERROR,
# _TIMED_OUT, _CANCELLED, _STALL, _NO_DEVICE, _OVERFLOW), which libusbasync.py maps from its numbers.
USB_COMPLETED, USB_ERROR, USB_TIMED_OUT, USB_CANCELLED, USB_STALL, USB_NO_DEVICE, USB_OVERFLOW = \
  "completed", "error", "timed out", "cancelled", "stall", "no device", "overflow"


class USBAsyncEngine(Protocol):
  """What moves several USB transfers at once for usbasync.AsyncTransfers (libusb's asynchronous API, a mock
  bridge's model, a synchronous fallback). A request (usbasync.Request) has kind ("control"/"bulk"), endpoint,
  length, timeout_ms, out (an OUT transfer's bytes), setup ((bmRequestType, bRequest, wValue, wIndex) of a control
  transfer), is_in, number and what (words naming it); the engine sets its status (USB_*), actual (bytes moved),
  data (an IN transfer's bytes) and detail (words on a failure)."""
  mode: str
  def submit(self, req) -> None:
    """Start it; raises (an exception with errno ENODEV for a gone device) when it is refused: nothing started."""
  def wait(self, timeout_s: float) -> None:
    """Block until a completion arrives or timeout_s pass (one round trip of the host)."""
  def cancel(self, req) -> None:
    """Ask for it to stop; its completion (CANCELLED, or what it got to first) still arrives through wait()."""
  def abandon(self, req) -> None:
    """It never completed, even cancelled: keep its buffer for as long as the engine lives."""


class USBTransport(Protocol):
  """Bulk and control transfers to one USB device (implemented with pyusb by LinuxOS)."""
  def control(self, bm_request_type: int, b_request: int, w_value: int, w_index: int, data_or_length, timeout_ms: int): ...
  def bulk_write(self, endpoint: int, data: bytes, timeout_ms: int) -> int: ...
  def bulk_read(self, endpoint: int, size: int, timeout_ms: int) -> bytes: ...
  def clear_halt(self, endpoint: int) -> None: ...
  def async_transfers(self, monotonic):
    """Several transfers in flight: a usbasync.AsyncTransfers (submit, reap in order). Optional: for a transport
    without it, usbasync.async_transfers makes a synchronous pipeline over the calls above."""
  def close(self) -> None: ...


@runtime_checkable
class OSInterface(Protocol):
  """What a driver may ask of the OS. See LinuxOS (drivers/system/linux.py) and mockgpu.MockOS."""
  config: object  # hcq.config.Config

  # files and device nodes (absolute paths; a path under /dev/ is looked up under config.dev_root instead)
  def open(self, path: str, flags: int = ..., mode: int = 0o666) -> FileHandle: ...
  def exists(self, path: str) -> bool: ...
  def stat(self, path: str, follow_symlinks: bool = True):
    """os.stat_result of path (what kind of file it is, before a driver reads it: firmware.read); OSCallError with
    the errno when it cannot be had."""

  # sysfs and procfs, relative to the configured roots
  def sysfs_list(self, path: str) -> list[str]: ...
  def sysfs_read(self, path: str) -> str: ...
  def sysfs_read_bytes(self, path: str, size: int = -1, offset: int = 0) -> bytes: ...
  def sysfs_write(self, path: str, data: str | bytes) -> None: ...
  def sysfs_exists(self, path: str) -> bool: ...
  def sysfs_readlink(self, path: str) -> str: ...
  def proc_list(self, path: str = "") -> list[str]: ...
  def proc_read(self, path: str) -> str: ...
  def proc_readlink(self, path: str) -> str: ...

  # memory: anonymous mappings (optionally at a fixed address), physical addresses, raw views
  def alloc_anon(self, size: int, addr: int | None = None, prot: int | None = None, shared: bool = False,
                 reserve_only: bool = False) -> int: ...
  def free_anon(self, addr: int, size: int) -> None: ...
  def phys_addrs(self, addr: int, size: int) -> list[int]: ...
  def memview(self, addr: int, size: int) -> memoryview: ...
  def memory_barrier(self) -> None: ...

  # PCI register windows
  def map_mmio(self, path: str, size: int, offset: int = 0, name: str = "") -> MMIOView: ...
  def map_pci_resource(self, path: str, addr: int, size: int, offset: int = 0, name: str = "") -> MMIOView:
    """Map size bytes of a memory BAR (its sysfs resourceN file, absolute path) from byte offset `offset` at the fixed
    process address addr, shared (MAP_SHARED|MAP_FIXED_NOREPLACE: an address already in use is an error, never
    replaced). AM maps CPU-visible VRAM this way at the buffer's GPU VA (GPU VA == CPU VA). addr, offset and size
    must be page-aligned and the range inside the BAR; errors name them. The view's close() unmaps it; memview(addr,
    size) gives its bytes."""

  def map_file_mmio(self, file: FileHandle, size: int, offset: int = 0, name: str = "",
                    addr: int | None = None) -> MMIOView:
    """A register or memory window mapped from an open device file (a VFIO device's BAR region: offset is the
    region's offset plus the window's), shared; at the fixed process address addr when given
    (MAP_FIXED_NOREPLACE: an address in use is an error). The view's close() unmaps it."""

  def map_bar_io(self, path: str, size: int, offset: int = 0, name: str = "") -> MMIOView:
    """size bytes of a memory BAR (its sysfs resourceN file) from `offset` mapped into this process as I/O memory
    (Linux: an mmap of the resource file, a VM_IO|VM_PFNMAP mapping), for a driver that hands the mapping's address
    (the view's .addr) to its kernel module: nvidia.ko's OS descriptor of I/O memory (escape.c RmCreateOsDescriptor
    falls back to os_lookup_user_io_memory, os-mlock.c). The view's close() unmaps it."""

  def export_bar_dmabuf(self, path: str, size: int, offset: int = 0, name: str = "") -> FileHandle:
    """A dma-buf (its file) exporting size bytes of a memory BAR (its sysfs resourceN file) from `offset`, for another
    device to import (peer-to-peer: a GPU queue ringing a NIC doorbell; KFD imports it with AMDKFD_IOC_IMPORT_DMABUF).
    OSCallError where the kernel has no exporter for the function (see LinuxOS.export_bar_dmabuf)."""

  # synchronisation with other processes and the kernel
  def lock_device(self, kind: str, pcibus: str, wait_s: float = 0.0) -> DeviceLock:
    """<lock dir>/<kind>_<pcibus>.lock held exclusively (drivers/system/locks.py). Held by another: DeviceError naming
    the holder at once, or (wait_s > 0: a lock held only for moments, such as am-smu) after waiting that long."""
  # what a device's holder publishes for tools (hcq-smi) next to its lock: <lock dir>/<kind>-state_<bus>.json, at
  # most locks.STATE_MAX_BYTES. Readers must validate it: any process may have written it.
  def write_device_state(self, kind: str, pcibus: str, data: bytes) -> None: ...
  def read_device_state(self, kind: str, pcibus: str, owners: Collection[int] | None = None) -> bytes | None:
    """The state file's bytes; None when there is none. Not a regular file, too big, or (owners given) owned by a
    user not among owners: DeviceError naming it."""
  def remove_device_state(self, kind: str, pcibus: str) -> None: ...
  def eventfd(self, initval: int = 0) -> FileHandle: ...

  # USB
  def usb_open(self, vendor_id: int, product_id: int, index: int = 0,
               product_prefixes: tuple[str, ...] = ()) -> USBTransport:
    """The index-th USB device with these ids, interface 0 claimed (a kernel driver on it detached); with
    product_prefixes its product string must start with one of them. Raises DeviceError naming the ids."""

  # time (mockable so that timeouts can be tested without sleeping)
  def monotonic(self) -> float: ...
  def sleep(self, seconds: float) -> None: ...
  def delay(self, seconds: float) -> None:
    """A fixed wait a device's bring-up prescribes between a command and its first poll (Linux's mdelay/msleep there:
    the time the device needs, not a poll's pause); the time passes on monotonic()."""
