"""The KFD event page, shared by every GPU of one process.

KFD keeps one context per process (opening /dev/kfd again returns the same one) and takes one event page per process:
kfd_chardev.c kfd_ioctl_create_event refuses a second event_page_offset with -EINVAL ("Event page is already set").
The page must be GPU memory that every GPU whose queues signal events can write (their end-of-work packets write the
event id into the event's slot before interrupting; kfd_events.c only signals an event whose slot was written).

So the first device of a process allocates the page (GTT) and hands it to KFD with its first signal event; each
later device maps the same allocation into its GPU's VM (MAP_MEMORY_TO_GPU) and creates its events without it. The
page is freed when the last device of the process lets go of it.

The process is named by the OS interface's /proc/self link (its pid): every LinuxOS of one process shares the page.
An OS interface without that link (a MockOS: each one is a process of its own) is named by its identity."""
from __future__ import annotations

import ctypes
import threading

from ...autogen import kfd
from ...errors import DeviceError, OSCallError

_PAGES: dict[tuple, "EventPage"] = {}
# devices may be opened and closed from several threads; a device holds LOCK from acquiring the page until its first
# signal event exists, so that no other device of the process creates an event before the page is handed to KFD
LOCK = threading.RLock()


def process_key(osi) -> tuple:
  try: return ("pid", osi.proc_readlink("self"))
  except OSCallError: return ("os", id(osi))


class EventPage:
  def __init__(self, key, osi, mem):
    self.key, self.os, self.mem = key, osi, mem   # os kept: its identity names the process while the page lives
    self.gpus: list[int] = []                      # gpu_ids the page is mapped to
    self.users = 0

  @classmethod
  def acquire(cls, session) -> tuple["EventPage", bool]:
    """(the process's event page, whether session created it and must hand it to KFD with its first signal event).
    session: a KFDSession whose VM is acquired; a new page is allocated through it, then owned by the EventPage."""
    key = process_key(session.os)
    with LOCK: return cls._acquire(key, session)

  @classmethod
  def _acquire(cls, key, session) -> tuple["EventPage", bool]:
    page = _PAGES.get(key)
    fresh = page is None
    if fresh:
      mem = session.alloc(EVENT_PAGE_SIZE, kind="gtt")
      session.disown(mem)                         # outlives session when another device of the process still uses it
      page = _PAGES[key] = cls(key, session.os, mem)
      page.gpus.append(session.gpu_id)
    elif session.gpu_id not in page.gpus:
      ids = (ctypes.c_uint32 * 1)(session.gpu_id)
      kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(session.kfd, handle=page.mem.handle, device_ids_array_ptr=ctypes.addressof(ids),
                                       n_devices=1)
      page.gpus.append(session.gpu_id)
    page.users += 1
    return page, fresh

  def release(self, kfd_file) -> None:
    """One device is done with the page; the last one unmaps it from every GPU and frees it (through kfd_file, the
    closing device's /dev/kfd, still open)."""
    with LOCK:
      self.users -= 1
      if self.users > 0: return
      del _PAGES[self.key]
    mem = self.mem
    ids = (ctypes.c_uint32 * len(self.gpus))(*self.gpus)
    errors = []
    try: kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(kfd_file, handle=mem.handle, device_ids_array_ptr=ctypes.addressof(ids),
                                              n_devices=len(self.gpus))
    except OSCallError as e: errors.append(e)
    mem.cpu = None
    self.os.free_anon(mem.va, mem.size)
    try: kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(kfd_file, handle=mem.handle)
    except OSCallError as e: errors.append(e)
    if errors: raise DeviceError(f"KFD event page at {mem.va:#x}: freeing it failed: {errors[0]}")


EVENT_PAGE_SIZE = 0x8000   # KFD_SIGNAL_EVENT_LIMIT (4096) slots of 8 bytes (kfd_events.h)
