"""A small fake of /dev/kfd behind the OS interface, for driver unit tests that need no emulator: KFD ioctls,
memory at fixed addresses, doorbells that run a PM4 and an SDMA interpreter of the packets the driver emits
(RELEASE_MEM, WAIT_REG_MEM, ACQUIRE_MEM, SET_SH_REG, EVENT_WRITE, INDIRECT_BUFFER; SDMA COPY_LINEAR, FENCE,
TRAP, POLL_REGMEM, TIMESTAMP). DISPATCH_DIRECT calls `on_dispatch(regs, grid)` so tests can see the register state
of each launch. The full mock (hcq.mockgpu) replaces this wherever a kernel must really run."""
from __future__ import annotations

import ctypes
import os as _os
import struct
import time

from hcq import config as config_mod
from hcq.autogen import kfd
from hcq.drivers.system import libc
from hcq.drivers.system.interface import MMIOView
from hcq.errors import OSCallError

PROPS = dict(gfx_target_version=110000, drm_render_minor=128, simd_count=192, simd_per_cu=2, array_count=12,
             simd_arrays_per_engine=2, cu_per_simd_array=8, max_waves_per_simd=16, lds_size_in_kb=64,
             max_slots_scratch_cu=32, num_xcc=1)
_BY_NR = {ioc.nr: ioc for name, ioc in vars(kfd).items() if name.startswith("AMDKFD_IOC_")}


class FakeFile:
  def __init__(self, os, path):
    self.os, self.path, self.fd = os, path, 3

  def ioctl(self, request, arg):
    nr = request & 0xFF
    ioc = _BY_NR.get(nr)
    if ioc is None or ioc.request != request: raise OSCallError("ioctl", self.path, 25, f"request {request:#x}")
    return getattr(self.os, "_" + ioc.name[len("AMDKFD_IOC_"):].lower())(arg)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None):
    # the render node: back the reserved VA with real memory
    return libc.mmap(addr, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED | libc.MAP_ANONYMOUS | libc.MAP_FIXED)

  def close(self): pass


class Doorbells(MMIOView):
  def __init__(self, os):
    self.os, self.size, self.name, self.mem = os, 0x2000, "fake doorbells", {}
  def read32(self, offset): return self.mem.get(offset, 0)
  def write32(self, offset, value):
    self.mem[offset] = value
    if offset % 8 == 4: self.os._ring(offset - 4)
  def write64(self, offset, value):
    self.mem[offset] = value
    self.os._ring(offset)


class FakeKFDOS:
  def __init__(self, config=None, on_dispatch=None):
    self.config = config or config_mod.Config()
    self.on_dispatch = on_dispatch
    self.handles, self.next_handle, self.queues, self.events, self.regs = {}, 1, {}, {}, {}
    self.pending_fault = None
    self.ioctl_log = []
    self.doorbells = Doorbells(self)
    self.dispatches = []
    self.ibs = []
    self.held = set()          # queue types whose doorbells do nothing (an engine that is busy)
    self.event_page = None

  # OS interface
  def open(self, path, flags=0, mode=0o666):
    if path not in ("/dev/kfd", "/dev/dri/renderD128"): raise OSCallError("open", path, 2)
    return FakeFile(self, path)
  def exists(self, path): return path in ("/dev/kfd", "/dev/dri/renderD128")
  def sysfs_list(self, path): return ["0", "1"]
  def sysfs_read(self, path):
    node = path.split("/")[-2]
    if path.endswith("gpu_id"): return "0\n" if node == "0" else "4242\n"
    return "".join(f"{k} {v}\n" for k, v in (PROPS if node == "1" else {"cpu_cores_count": 2}).items())
  def alloc_anon(self, size, addr=None, prot=None, shared=False, reserve_only=False):
    flags = libc.MAP_ANONYMOUS | (libc.MAP_SHARED if shared else libc.MAP_PRIVATE)
    return libc.mmap(addr, size, libc.PROT_NONE if reserve_only else libc.PROT_READ | libc.PROT_WRITE, flags)
  def free_anon(self, addr, size): libc.munmap(addr, size)
  def memview(self, addr, size): return libc.view(addr, size)
  def memory_barrier(self): pass
  def proc_readlink(self, path): raise OSCallError("readlink", f"/proc/{path}", 2)   # each fake is a process of its own
  def map_mmio(self, path, size, offset=0, name=""):
    assert path == "/dev/kfd" and offset == 0x10000 and size == 0x2000
    return self.doorbells
  def monotonic(self): return time.monotonic()
  def sleep(self, s): time.sleep(s)
  def delay(self, s): time.sleep(s)

  # ioctls
  def _get_version(self, a): a.major_version, a.minor_version = 1, 14
  def _acquire_vm(self, a): assert a.gpu_id == 4242
  def _runtime_enable(self, a): pass
  def _alloc_memory_of_gpu(self, a):
    if a.gpu_id != 4242: raise OSCallError("ioctl", "/dev/kfd", 22)
    h = self.next_handle
    self.next_handle += 1
    if a.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM and not a.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC:
      libc.mmap(a.va_addr, a.size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_FIXED)
    self.handles[h] = (a.va_addr, a.size, a.flags)
    a.handle, a.mmap_offset = h, h << 12
  def _free_memory_of_gpu(self, a): del self.handles[a.handle]
  def _map_memory_to_gpu(self, a):
    assert ctypes.c_uint32.from_address(a.device_ids_array_ptr).value == 4242 and a.handle in self.handles
    a.n_success = 1
  def _unmap_memory_from_gpu(self, a): a.n_success = 1
  def _create_event(self, a):
    if a.event_page_offset:
      assert self.event_page is None, "the event page is set once"
      self.event_page = self.handles[a.event_page_offset][0]
    eid = len(self.events) + 1
    self.events[eid] = a.event_type
    a.event_id, a.event_slot_index = eid, eid
  def _destroy_event(self, a): del self.events[a.event_id]
  def _wait_events(self, a):
    data = (kfd.struct_kfd_event_data * a.num_events).from_address(a.events_ptr)
    if self.pending_fault is not None:
      for d in data:
        if self.events.get(d.event_id) == kfd.KFD_IOC_EVENT_MEMORY:
          d.memory_exception_data.gpu_id, d.memory_exception_data.va = 4242, self.pending_fault
          d.memory_exception_data.failure.NotPresent = 1
    a.wait_result = 1
  def _create_queue(self, a):
    qid = len(self.queues)
    self.queues[qid] = dict(type=a.queue_type, ring=a.ring_base_address, size=a.ring_size, rptr=a.read_pointer_address,
                            wptr=a.write_pointer_address, pos=0, ctl_stack_size=a.ctl_stack_size,
                            cwsr_size=a.ctx_save_restore_size, eop_size=a.eop_buffer_size)
    a.queue_id, a.doorbell_offset = qid, 0x10000 + qid * 8
  def _destroy_queue(self, a): del self.queues[a.queue_id]

  # engines
  def run_all(self):
    """Let every queue run as far as it can (after a held queue is released)."""
    for _ in range(len(self.queues)):
      for qid in list(self.queues): self._ring(qid * 8)

  def _ring(self, off):
    q = self.queues[(off - 0) // 8]
    if q["type"] in self.held: return
    wptr = ctypes.c_uint64.from_address(q["wptr"]).value
    unit = 4 if q["type"] == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE else 1
    ring = (ctypes.c_uint32 * (q["size"] // 4)).from_address(q["ring"])
    n = q["size"] // 4
    while q["pos"] * unit // 4 < wptr * unit // 4 if unit == 4 else q["pos"] < wptr:
      pos_dw = (q["pos"] if unit == 4 else q["pos"] // 4) % n
      words = [ring[(pos_dw + i) % n] for i in range(min(n, 64))]
      used = self._pm4(words) if unit == 4 else self._sdma(words)
      if used == 0: break  # blocked on a wait
      q["pos"] += used if unit == 4 else used * 4
      ctypes.c_uint64.from_address(q["rptr"]).value = q["pos"]

  def _pm4(self, w):
    h = w[0]
    assert h >> 30 == 3, f"not a type-3 header: {h:#x}"
    op, n = (h >> 8) & 0xFF, ((h >> 16) & 0x3FFF) + 1
    b = w[1:1 + n]
    if op == 0x76:
      for i, v in enumerate(b[1:]): self.regs[b[0] + i] = v
    elif op == 0x49:
      sel = b[1] >> 29
      addr = b[2] | b[3] << 32
      if sel == 1: ctypes.c_uint32.from_address(addr).value = b[4]
      elif sel == 2: ctypes.c_uint64.from_address(addr).value = b[4] | b[5] << 32
      elif sel == 3: ctypes.c_uint64.from_address(addr).value = int(time.monotonic() * 1e8)
    elif op == 0x3C:
      if not ctypes.c_uint32.from_address(b[1] | b[2] << 32).value >= b[3]: return 0
    elif op == 0x15:
      self.dispatches.append((dict(self.regs), tuple(b[:3]), b[3]))
      if self.on_dispatch: self.on_dispatch(self, dict(self.regs), tuple(b[:3]))
    elif op == 0x3F:
      ib = (ctypes.c_uint32 * (b[2] & 0xFFFFF)).from_address(b[0] | b[1] << 32)
      words, i = list(ib), 0
      self.ibs.append(len(words))
      while i < len(words):
        used = self._pm4(words[i:])
        assert used, "fake PM4: a wait inside an indirect buffer"
        i += used
    elif op not in (0x58, 0x46): raise AssertionError(f"fake PM4: opcode {op:#x}")
    return 1 + n

  def _sdma(self, w):
    op = w[0] & 0xFF
    if op == 0: return 1
    if op == 1:
      n, src, dst = w[1] + 1, w[3] | w[4] << 32, w[5] | w[6] << 32
      ctypes.memmove(dst, src, n)
      return 7
    if op == 5:
      ctypes.c_uint32.from_address(w[1] | w[2] << 32).value = w[3]
      return 4
    if op == 6: return 2
    if op == 8: return 6 if ctypes.c_uint32.from_address(w[1] | w[2] << 32).value >= w[3] else 0
    if op == 13:
      ctypes.c_uint64.from_address(w[1] | w[2] << 32).value = int(time.monotonic() * 1e8)
      return 3
    raise AssertionError(f"fake SDMA: opcode {op}")
