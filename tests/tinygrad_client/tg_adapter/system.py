"""tinygrad's OS calls outside FileIOInterface (tinygrad/runtime/support/system.py, class _System), routed to the
MockOS: physical addresses (tinygrad reads /proc/self/pagemap), memory locking (mlock), device locks (flock on a
file in its temp dir) and the memory barrier (where the synchronous mock lets its engines run). And the one
replacement of tinygrad logic the adapter makes: its firmware download (helpers.fetch_fw, by URL and sha256) is
replaced by a reader of the pinned firmware package hcq uses (Config.firmware_dir)."""
from __future__ import annotations

import hashlib
import pathlib

from . import mock_os

_locks: list = []


def install() -> None:
  from tinygrad.runtime.support import system as tg_system
  S = tg_system._System

  def system_paddrs(self, vaddr: int, size: int) -> list[int]: return mock_os().phys_addrs(vaddr, size)

  def lock_memory(self, addr: int, size: int) -> None:
    found = mock_os().memory.find(addr)
    if found is None or addr + size > found[0] + found[1]:
      raise RuntimeError(f"Failed to lock memory at {addr:#x} with size {size:#x}: not memory of the mock's process")

  def flock_acquire(self, name: str) -> int:
    # tinygrad names its lock "<devpref>_<pcibus>.lock" (_System.flock_acquire callers): the MockOS's device lock
    kind, _, bus = name.removesuffix(".lock").partition("_")
    lock = mock_os().lock_device(kind, bus)
    _locks.append(lock)
    return lock.fd

  def memory_barrier(self) -> None: mock_os().memory_barrier()

  S.system_paddrs, S.lock_memory, S.flock_acquire, S.memory_barrier = system_paddrs, lock_memory, flock_acquire, memory_barrier

  # tinygrad runs host commands where it lacks a permission or a module (`sudo modprobe vfio-pci`, `sudo tee` of a
  # sysfs file: _System.write_sysfs, .vfio, KFDIface.require_profile_mode); against a mock none may reach the host
  def refuse(cmd):
    raise RuntimeError(f"tinygrad adapter: tinygrad wanted to run a host command against the mock, refused: {cmd!r}")
  tg_system.os.system = refuse


SUBSTITUTED: list[tuple[str, str, str]] = []     # (file, sha256 tinygrad pins, sha256 of the package's file)


def fetch_fw(path: str, name: str, sha256: str) -> bytes:
  """tinygrad's helpers.fetch_fw without the download: linux-firmware's <path>/<name> read from the firmware package
  hcq pins (Config.firmware_dir: firmware-amd-graphics 20230210-5), whose images the mock PSP verifies against that
  package's digests (mockgpu/amd/am/fwdigests.py). tinygrad pins another linux-firmware commit by sha256: where the
  package's file differs, the substitution is recorded (SUBSTITUTED) and the package's file is used."""
  base = pathlib.Path(mock_os().config.firmware_dir)
  f = base / name if path in ("amdgpu", "") else base.parent / path / name
  if not f.is_file(): raise FileNotFoundError(f"firmware {path}/{name}: not in the pinned package at {f}")
  data = f.read_bytes()
  have = hashlib.sha256(data).hexdigest()
  if have != sha256: SUBSTITUTED.append((f"{path}/{name}", sha256, have))
  return data


def install_fetch_fw() -> None:
  import tinygrad.helpers as helpers
  helpers.fetch_fw = fetch_fw
  try:
    import tinygrad.runtime.support.am.amdev as amdev
    amdev.fetch_fw = fetch_fw
  except ImportError: pass
