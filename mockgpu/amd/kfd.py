"""The KFD model: /dev/kfd and the DRM render nodes of the mock GPUs, as one process sees them.

ioctls are dispatched by request number from the generated bindings (hcq.autogen.kfd, hcq.autogen.amdgpu_drm):
every AMDKFD_IOC_* / DRM_IOCTL_AMDGPU_* object there names its request and struct, and a handler method
`_<NAME>` (e.g. _AMDKFD_IOC_CREATE_QUEUE) implements it. An unknown request fails with ENOTTY and a known but
unmodelled one with EINVAL, both naming the ioctl. Behaviour follows drivers/gpu/drm/amd/amdkfd/kfd_chardev.c and
kfd_events.c (linux 6.12):
  - memory: VRAM/GTT allocations live at the caller's va_addr, which must lie in memory it reserved through the OS
    interface (the mock maps read/write host memory there: GPU VA == host VA); USERPTR registers the caller's host
    memory. Overlapping or unknown ranges are EINVAL/EFAULT; freeing memory still mapped to a GPU is EBUSY.
  - doorbell_offset = KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(gpu_id) | 8 * doorbell index (kfd_priv.h); a page of
    0x2000 bytes per GPU, mapped with os.map_mmio("/dev/kfd", 0x2000, offset & ~0x1fff).
  - events: signal events own an 8-byte slot in the event page (UNSIGNALED_EVENT_SLOT = ~0 until the GPU writes
    it); an interrupt (RELEASE_MEM int_sel, SDMA TRAP) with context id N signals event N when its slot was written,
    else every signal event whose slot was written. Memory faults signal MEMORY events with the faulting address
    (and the GPU evicts the process's queues on it: MockAMDGPU.queue_failed), queue errors HW_EXCEPTION events.
"""
from __future__ import annotations

import ctypes
import errno
import os as _os
import threading
import time

from ...errors import GPUFault, OSCallError
from ..files import MockFile
from ..intervals import Intervals
from ..mmio import DoorbellMMIO
from ..userptr import readable as _readable
from . import regs as R
from .cwsr import cwsr_sizes
from .queues import COMPUTE, COMPUTE_AQL, SDMA

# kfd_priv.h
KFD_MMAP_TYPE_SHIFT = 62
KFD_MMAP_TYPE_DOORBELL, KFD_MMAP_TYPE_EVENTS = 0x3 << 62, 0x2 << 62
KFD_MMAP_GPU_ID_SHIFT = 46
KFD_GPU_ID_MASK = (1 << 16) - 1
DOORBELL_PAGE = 0x2000
EVENT_PAGE_SIZE = 0x8000
UNSIGNALED_EVENT_SLOT = 0xFFFFFFFFFFFFFFFF      # kfd_events.c
KFD_SIGNAL_EVENT_LIMIT = 4096                   # kfd_ioctl.h
KFD_EVENT_TIMEOUT_INFINITE = 0xFFFFFFFF         # kfd_events.h
PAGE = 0x1000


def _requests(mod, prefix: str) -> dict:
  """request number -> ioctl descriptor of every ioctl a generated bindings module declares under prefix."""
  out = {}
  for name in dir(mod):
    obj = getattr(mod, name)
    if name.startswith(prefix) and hasattr(obj, "request") and hasattr(obj, "struct"): out[obj.request] = obj
  return out


class Allocation:
  def __init__(self, handle: int, gpu, va: int, size: int, flags: int, kind: str, mmap_offset: int):
    self.handle, self.gpu, self.va, self.size, self.flags, self.kind = handle, gpu, va, size, flags, kind
    self.mmap_offset = mmap_offset
    self.mapped_to: set[int] = set()      # gpu ids
    self.peer = None                      # an imported dma-buf of a peer's BAR (kind "dmabuf")
    self.invalidated = False              # USERPTR memory the process unmapped: GPU mappings dropped


class Event:
  def __init__(self, event_id: int, event_type: int, auto_reset: bool):
    self.id, self.type, self.auto_reset = event_id, event_type, auto_reset
    self.signaled = False
    self.memory_fault = None              # (gpu_id, va) of the last memory fault
    self.hw_exception = None              # gpu_id


class KFDFile(MockFile):
  def __init__(self, kfd, path, flags):
    super().__init__(path, flags)
    self.kfd = kfd

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.kfd.ioctl(self, request, arg)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None):
    self._check_open("mmap")
    return self.kfd.mmap_kfd(self.path, size, offset, addr)


class RenderFile(MockFile):
  def __init__(self, kfd, gpu, path, flags):
    super().__init__(path, flags)
    self.kfd, self.gpu = kfd, gpu

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.kfd.ioctl(self, request, arg)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None):
    self._check_open("mmap")
    return self.kfd.mmap_render(self, size, offset, addr)


class KFDModel:
  VERSION = None   # (major, minor) from the bindings' KFD_IOCTL_MAJOR/MINOR_VERSION

  def __init__(self, os, gpus: list):
    self.os, self.gpus = os, gpus
    self.by_id = {g.gpu_id: g for g in gpus}
    from ...autogen import kfd
    self.kfd_h = kfd
    self.VERSION = (kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION)
    self.ioctls = _requests(kfd, "AMDKFD_IOC_")   # the DRM ones join at the first request not among them (drm_h)
    self._drm_h = None
    self.lock = threading.RLock()                  # ioctls
    self.cond = threading.Condition(threading.Lock())   # event state; taken by interrupts (from a GPU worker thread)
    self.waiters = 0                               # threads inside WAIT_EVENTS (interrupts notify only when any)
    self.render_files: dict[int, RenderFile] = {}
    self.vm_acquired: set[int] = set()
    self.runtime_enabled = False
    self.allocs: dict[int, Allocation] = {}
    # the same allocations by address and by mmap offset, and each GPU's VRAM in use: every lookup is O(log n) or
    # O(1), never a walk over all allocations (a process may hold thousands)
    self.alloc_ranges = Intervals()
    self.alloc_by_offset: dict[int, Allocation] = {}
    self.vram_in_use: dict[int, int] = {}
    self.next_handle = 1
    self.queues: dict[int, tuple] = {}         # queue id -> (gpu, queue, doorbell index)
    self.doorbell_queues: dict[tuple[int, int], object] = {}   # (gpu_id, doorbell index) -> queue: the doorbell path
    self.next_qid = 0
    self.events: dict[int, Event] = {}
    self.event_page: int | None = None         # host address of the signal slots
    self.event_page_own = False
    self.doorbell_views: dict[int, DoorbellMMIO] = {}
    self.deferred_frees: list[tuple[int, int]] = []   # munmaps of VRAM/GTT CPU mappings done at FREE_MEMORY_OF_GPU
    self._signal_type = kfd.KFD_IOC_EVENT_SIGNAL
    self._slots: tuple = (None, {})            # (event page, event id -> ctypes cell of its slot) for interrupts
    for g in gpus: g.listener = self

  # ---- nodes
  def attach(self, os) -> None:
    from ..vfs import DeviceNode
    from .topology import RENDER_MINOR_BASE
    os.vfs.add("/dev/kfd", DeviceNode(lambda path, flags: KFDFile(self, path, flags), mmio=self.kfd_mmio))
    for g in self.gpus:
      os.vfs.add(f"/dev/dri/renderD{RENDER_MINOR_BASE + g.index}",
                 DeviceNode(lambda path, flags, g=g: self._open_render(g, path, flags)))

  def _open_render(self, gpu, path, flags):
    f = RenderFile(self, gpu, path, flags)
    self.render_files[f.fd] = f
    return f

  # ---- dispatch
  @property
  def drm_h(self):
    """hcq.autogen.amdgpu_drm, imported at the first DRM request (a KFD-only process never loads it: ~3 ms of a new
    process's first launch, issue 33 P3), its ioctls then added to self.ioctls."""
    if self._drm_h is None:
      with self.lock:              # (two threads' first DRM requests: one loads, the other finds it loaded)
        if self._drm_h is None:
          from ...autogen import amdgpu_drm
          self.ioctls = {**_requests(amdgpu_drm, "DRM_IOCTL_"), **self.ioctls}
          self._drm_h = amdgpu_drm
    return self._drm_h

  def ioctl(self, file, request: int, arg) -> int:
    desc = self.ioctls.get(request)
    if desc is None and self._drm_h is None:      # not a KFD request: the DRM ones are loaded now (drm_h)
      self.drm_h
      desc = self.ioctls.get(request)
    if desc is None:
      raise OSCallError("ioctl", file.path, errno.ENOTTY, f"request {request:#x} is not a KFD or DRM ioctl")
    handler = getattr(self, "_" + desc.name, None)
    if handler is None:
      raise OSCallError("ioctl", file.path, errno.EINVAL, f"{desc.name} is not supported by the mock")
    try: view = memoryview(arg).cast("B")
    except TypeError: raise OSCallError("ioctl", file.path, errno.EFAULT, f"{desc.name}: argument is not a buffer") from None
    if view.nbytes < ctypes.sizeof(desc.struct) or view.readonly:
      raise OSCallError("ioctl", file.path, errno.EFAULT, f"{desc.name}: argument of {view.nbytes} bytes, "
                        f"{ctypes.sizeof(desc.struct)} needed")
    args = desc.struct.from_buffer(arg)

    def fail(err: int, detail: str):
      return OSCallError("ioctl", file.path, err, f"{desc.name}: {detail}")
    with self.lock: return handler(file, args, fail) or 0

  def _gpu(self, gpu_id: int, fail):
    gpu = self.by_id.get(gpu_id)
    if gpu is None: raise fail(errno.EINVAL, f"no GPU with gpu_id {gpu_id}")
    return gpu

  # ---- version and VM
  def _AMDKFD_IOC_GET_VERSION(self, file, a, fail):
    a.major_version, a.minor_version = self.VERSION

  def _AMDKFD_IOC_ACQUIRE_VM(self, file, a, fail):
    gpu = self._gpu(a.gpu_id, fail)
    drm = self.render_files.get(a.drm_fd)
    if drm is None or drm.closed: raise fail(errno.EINVAL, f"drm_fd {a.drm_fd} is not an open render node")
    if drm.gpu is not gpu: raise fail(errno.EINVAL, f"drm_fd {a.drm_fd} is the render node of another GPU")
    self.vm_acquired.add(gpu.gpu_id)

  def _AMDKFD_IOC_RUNTIME_ENABLE(self, file, a, fail):
    """kfd_ioctl_runtime_enable: mode_mask with ENABLE enables (EBUSY when enabled already), without disables."""
    if a.mode_mask & self.kfd_h.KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK:
      if self.runtime_enabled: raise fail(errno.EBUSY, "runtime already enabled")
      self.runtime_enabled = True
    else: self.runtime_enabled = False
    a.capabilities_mask = 0

  def _AMDKFD_IOC_GET_CLOCK_COUNTERS(self, file, a, fail):
    gpu = self._gpu(a.gpu_id, fail)
    a.gpu_clock_counter = gpu.clock()
    a.cpu_clock_counter = time.monotonic_ns()
    a.system_clock_counter = time.monotonic_ns()
    a.system_clock_freq = 1_000_000_000

  def vram_used(self, gpu) -> int:
    return self.vram_in_use.get(gpu.gpu_id, 0)

  def _AMDKFD_IOC_AVAILABLE_MEMORY(self, file, a, fail):
    gpu = self._gpu(a.gpu_id, fail)
    a.available = max(gpu.props.vram_size - self.vram_used(gpu), 0)

  def _AMDKFD_IOC_GET_PROCESS_APERTURES_NEW(self, file, a, fail):
    """kfd_ioctl_get_process_apertures_new with the gfx9+ apertures of kfd_flat_memory.c (kfd_init_apertures_v9):
    LDS at 1 << 48, scratch at 2 << 48 (limits: base | 0xffffffff), GPUVM from AMDGPU_VA_RESERVED_BOTTOM (64 KiB,
    amdgpu_vm.h) to the 47-bit user address space."""
    if a.num_of_nodes == 0:
      a.num_of_nodes = len(self.gpus)
      return
    n = min(a.num_of_nodes, len(self.gpus))
    entry = self.kfd_h.struct_kfd_process_device_apertures
    if not _readable(a.kfd_process_device_apertures_ptr, n * ctypes.sizeof(entry)):
      raise fail(errno.EFAULT, f"kfd_process_device_apertures_ptr {a.kfd_process_device_apertures_ptr:#x}")
    out = (entry * n).from_address(a.kfd_process_device_apertures_ptr)
    for e, gpu in zip(out, self.gpus):
      e.lds_base, e.scratch_base = 1 << 48, 2 << 48
      e.lds_limit, e.scratch_limit = e.lds_base | 0xFFFFFFFF, e.scratch_base | 0xFFFFFFFF
      e.gpuvm_base, e.gpuvm_limit = 1 << 16, (1 << 47) - 1
      e.gpu_id = gpu.gpu_id
    a.num_of_nodes = n

  def _AMDKFD_IOC_SET_MEMORY_POLICY(self, file, a, fail): self._gpu(a.gpu_id, fail)   # caches are not modelled

  def _AMDKFD_IOC_SET_SCRATCH_BACKING_VA(self, file, a, fail): self._gpu(a.gpu_id, fail)

  def _AMDKFD_IOC_SET_XNACK_MODE(self, file, a, fail):
    """gfx1100 has no XNACK (retry on page fault): querying (< 0) answers 0, enabling is EPERM, like kfd_chardev.c."""
    if a.xnack_enabled > 0: raise fail(errno.EPERM, "XNACK is not supported by gfx1100")
    a.xnack_enabled = 0

  # ---- memory
  def _AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(self, file, a, fail):
    kfd = self.kfd_h
    gpu = self._gpu(a.gpu_id, fail)
    if gpu.gpu_id not in self.vm_acquired: raise fail(errno.EINVAL, f"gpu_id {gpu.gpu_id}: ACQUIRE_VM first")
    flags, va, size = a.flags & 0xFFFFFFFF, a.va_addr, a.size
    kinds = [k for k, bit in (("vram", kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM), ("gtt", kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT),
                              ("userptr", kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)) if flags & bit]
    if len(kinds) != 1: raise fail(errno.EINVAL, f"flags {flags:#x} name {len(kinds)} of VRAM/GTT/USERPTR")
    kind = kinds[0]
    # kfd_ioctl_alloc_memory_of_gpu (amdkfd/kfd_chardev.c) refuses size 0; amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu
    # (amdgpu/amdgpu_amdkfd_gpuvm.c) creates the BO with aligned_size = PAGE_ALIGN(size), and the GPU mapping covers
    # the whole BO (bo->tbo.base.size): a sub-page size (tinygrad's 256-byte queue pointers) is one page. The VA must
    # be page aligned (amdgpu_vm_bo_map, amdgpu/amdgpu_vm.c: saddr & AMDGPU_GPU_PAGE_MASK is -EINVAL).
    if size == 0: raise fail(errno.EINVAL, "size 0")
    if va % PAGE: raise fail(errno.EINVAL, f"va {va:#x} is not page aligned")
    size = (size + PAGE - 1) & ~(PAGE - 1)
    for other in self.alloc_ranges.overlapping(va, va + size)[:1]:
      raise fail(errno.EINVAL, f"range {va:#x}+{size:#x} overlaps the allocation at {other.va:#x}+{other.size:#x}")
    host = self.os.memory.find(va)
    if kind == "userptr":
      if a.mmap_offset != va: raise fail(errno.EINVAL, f"USERPTR: mmap_offset {a.mmap_offset:#x} != va_addr {va:#x}")
      if host is None or va + size > host[0] + host[1] or "(reserved)" in host[2]:
        raise fail(errno.EFAULT, f"USERPTR {va:#x}+{size:#x} is not host memory of this process")
    else:
      if host is None or va + size > host[0] + host[1]:
        raise fail(errno.EINVAL, f"va {va:#x}+{size:#x} is not inside memory reserved through the OS interface")
      if kind == "vram":
        if self.vram_used(gpu) + size > gpu.props.vram_size: raise fail(errno.ENOMEM, f"{size:#x} bytes exceed free VRAM")
      self.os.memory.replace(va, size, f"{gpu.name} {kind} allocation")
    handle = (gpu.gpu_id << 32) | self.next_handle
    self.next_handle += 1
    alloc = self.allocs[handle] = Allocation(handle, gpu, va, size, flags, kind, (handle & 0xFFFFFFFF) << 32)
    self.alloc_ranges.add(va, va + size, alloc)
    self.alloc_by_offset[alloc.mmap_offset] = alloc
    if kind == "vram": self.vram_in_use[gpu.gpu_id] = self.vram_used(gpu) + size
    a.handle = handle
    a.mmap_offset = va if kind == "userptr" else alloc.mmap_offset

  def _AMDKFD_IOC_IMPORT_DMABUF(self, file, a, fail):
    """A dma-buf of another PCI function's BAR (MockOS.export_bar_dmabuf) at va_addr: mapped to a GPU, its pages
    are a peer window of that GPU (mockgpu/peer.py), which amdgpu allows when the two functions can reach each other
    (amdgpu_dma_buf.c amdgpu_dma_buf_attach: pci_p2pdma_distance; the mock's fabric connects every function). The VA
    must be page aligned and inside memory the process reserved (as for VRAM allocations)."""
    gpu = self._gpu(a.gpu_id, fail)
    if gpu.gpu_id not in self.vm_acquired: raise fail(errno.EINVAL, f"gpu_id {gpu.gpu_id}: ACQUIRE_VM first")
    buf = self.os.dmabuf(a.dmabuf_fd)
    if buf is None: raise fail(errno.EINVAL, f"dmabuf_fd {a.dmabuf_fd} is not an open dma-buf")
    va, size = a.va_addr, buf.size
    if va % PAGE: raise fail(errno.EINVAL, f"va {va:#x} is not page aligned")
    for other in self.alloc_ranges.overlapping(va, va + size)[:1]:
      raise fail(errno.EINVAL, f"range {va:#x}+{size:#x} overlaps the allocation at {other.va:#x}+{other.size:#x}")
    host = self.os.memory.find(va)
    if host is None or va + size > host[0] + host[1]:
      raise fail(errno.EINVAL, f"va {va:#x}+{size:#x} is not inside memory reserved through the OS interface")
    handle = (gpu.gpu_id << 32) | self.next_handle
    self.next_handle += 1
    alloc = self.allocs[handle] = Allocation(handle, gpu, va, size, 0, "dmabuf", 0)
    self.alloc_ranges.add(va, va + size, alloc)
    alloc.peer = buf
    a.handle = handle

  def _alloc(self, handle: int, fail) -> Allocation:
    alloc = self.allocs.get(handle)
    if alloc is None: raise fail(errno.EINVAL, f"unknown memory handle {handle:#x}")
    return alloc

  def _device_ids(self, a, fail) -> list[int]:
    if a.n_devices == 0 or a.n_devices > len(self.gpus) * 4: raise fail(errno.EINVAL, f"n_devices {a.n_devices}")
    if not _readable(a.device_ids_array_ptr, 4 * a.n_devices):
      raise fail(errno.EFAULT, f"device_ids_array_ptr {a.device_ids_array_ptr:#x} is not readable")
    return list((ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr))

  def _AMDKFD_IOC_MAP_MEMORY_TO_GPU(self, file, a, fail):
    alloc = self._alloc(a.handle, fail)
    ids = self._device_ids(a, fail)
    for i, gid in enumerate(ids[a.n_success:], start=a.n_success):
      gpu = self._gpu(gid, fail)
      if gid not in self.vm_acquired: raise fail(errno.EINVAL, f"gpu_id {gid}: ACQUIRE_VM first")
      if gid not in alloc.mapped_to:
        try:
          if alloc.kind == "dmabuf": gpu.map_peer(alloc.va, alloc.size, alloc.peer.mmio, alloc.peer.path)
          else: gpu.map_range(alloc.va, alloc.size)
        except ValueError as e: raise fail(errno.EINVAL, str(e)) from None
        alloc.mapped_to.add(gid)
      a.n_success = i + 1

  def _AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(self, file, a, fail):
    alloc = self._alloc(a.handle, fail)
    ids = self._device_ids(a, fail)
    for i, gid in enumerate(ids[a.n_success:], start=a.n_success):
      gpu = self._gpu(gid, fail)
      if gid not in alloc.mapped_to and not alloc.invalidated:
        raise fail(errno.EINVAL, f"handle {a.handle:#x} is not mapped to gpu_id {gid}")
      if gid in alloc.mapped_to:
        if alloc.kind == "dmabuf": gpu.unmap_peer(alloc.va)
        else: gpu.unmap_range(alloc.va)
      alloc.mapped_to.discard(gid)
      a.n_success = i + 1

  def _AMDKFD_IOC_FREE_MEMORY_OF_GPU(self, file, a, fail):
    alloc = self._alloc(a.handle, fail)
    if alloc.mapped_to: raise fail(errno.EBUSY, f"handle {a.handle:#x} is still mapped to gpu_id(s) {sorted(alloc.mapped_to)}")
    if self.event_page is not None and not self.event_page_own and alloc.va == self.event_page:
      self.event_page = None
    del self.allocs[a.handle]
    self.alloc_ranges.remove(alloc.va)
    self.alloc_by_offset.pop(alloc.mmap_offset, None)     # an imported dma-buf has no mmap offset
    if alloc.kind == "vram": self.vram_in_use[alloc.gpu.gpu_id] -= alloc.size
    self._release_deferred()

  def host_memory_freed(self, addr: int, size: int) -> bool:
    """The process munmaps [addr, addr+size). VRAM/GTT allocations there keep their memory until FREE (the GPU may
    still use it: munmap removes only the CPU view); USERPTR memory goes, so it stops being GPU memory at once (an
    MMU-notifier invalidation) and later GPU accesses fault instead of touching unmapped host memory."""
    with self.lock:
      keep = False
      for alloc in self.alloc_ranges.overlapping(addr, addr + size):
        if alloc.kind == "userptr":
          alloc.invalidated = True
          for gid in list(alloc.mapped_to):
            self.by_id[gid].unmap_range(alloc.va)
            alloc.mapped_to.discard(gid)
        else: keep = True
      if keep: self.deferred_frees.append((addr, size))
      return keep

  def _release_deferred(self) -> None:
    for addr, size in list(self.deferred_frees):
      if not any(x.kind != "userptr" for x in self.alloc_ranges.overlapping(addr, addr + size)):
        self.deferred_frees.remove((addr, size))
        self.os.memory.free(addr, size)

  def mmap_render(self, file, size, offset, addr):
    alloc = self.alloc_by_offset.get(offset)
    if alloc is not None and alloc.kind != "userptr" and alloc.gpu is file.gpu:
      if size > alloc.size: raise OSCallError("mmap", file.path, errno.EINVAL, f"{size:#x} bytes of a {alloc.size:#x}-byte allocation")
      if addr is not None and addr != alloc.va:
        raise OSCallError("mmap", file.path, errno.EINVAL, f"the mock maps allocations only at their GPU VA {alloc.va:#x}, "
                                                            f"not at {addr:#x}")
      return alloc.va
    raise OSCallError("mmap", file.path, errno.EINVAL, f"offset {offset:#x} is no allocation of this GPU")

  # ---- queues and doorbells
  def _AMDKFD_IOC_CREATE_QUEUE(self, file, a, fail):
    gpu = self._gpu(a.gpu_id, fail)
    if gpu.gpu_id not in self.vm_acquired: raise fail(errno.EINVAL, f"gpu_id {gpu.gpu_id}: ACQUIRE_VM first")
    kinds = {self.kfd_h.KFD_IOC_QUEUE_TYPE_COMPUTE: COMPUTE, self.kfd_h.KFD_IOC_QUEUE_TYPE_SDMA: SDMA,
             self.kfd_h.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: COMPUTE_AQL}
    kind = kinds.get(a.queue_type)
    if kind is None: raise fail(errno.EINVAL, f"queue_type {a.queue_type} is not modelled (compute, sdma, compute AQL)")
    size = a.ring_size
    if size < 1024 or size & (size - 1): raise fail(errno.EINVAL, f"ring_size {size:#x} is not a power of two >= 1 KiB")
    if a.queue_percentage & 0xFF > 100 or a.queue_priority > 15:
      raise fail(errno.EINVAL, f"queue_percentage {a.queue_percentage} / queue_priority {a.queue_priority}")
    # kfd_queue_acquire_buffers (kfd_queue.c): every queue buffer is a whole allocation mapped to this GPU
    self._queue_buffer(gpu, a.write_pointer_address, PAGE, "write pointer", fail)
    self._queue_buffer(gpu, a.read_pointer_address, PAGE, "read pointer", fail)
    self._queue_buffer(gpu, a.ring_base_address, size, "ring", fail)
    if kind != SDMA:            # compute queues (PM4 and AQL) also need the EOP buffer and the CWSR area
      sizes = cwsr_sizes(gpu.props)
      if a.eop_buffer_address:
        if a.eop_buffer_size < sizes["eop_buffer_size"]:
          raise fail(errno.EINVAL, f"eop_buffer_size {a.eop_buffer_size:#x} < the node's {sizes['eop_buffer_size']:#x}")
        self._queue_buffer(gpu, a.eop_buffer_address, (a.eop_buffer_size + PAGE - 1) & ~(PAGE - 1), "EOP buffer", fail)
      if a.ctl_stack_size != sizes["ctl_stack_size"]:
        raise fail(errno.EINVAL, f"ctl_stack_size {a.ctl_stack_size:#x} != the node's {sizes['ctl_stack_size']:#x}")
      if a.ctx_save_restore_size < sizes["cwsr_size"]:
        raise fail(errno.EINVAL, f"ctx_save_restore_size {a.ctx_save_restore_size:#x} < the node's {sizes['cwsr_size']:#x}")
      total = (a.ctx_save_restore_size + sizes["debug_memory_size"]) * gpu.props.num_xcc
      self._queue_buffer(gpu, a.ctx_save_restore_address, (total + PAGE - 1) & ~(PAGE - 1), "CWSR area", fail)
    used = {idx for g, _, idx in self.queues.values() if g is gpu}
    index = next(i for i in range(DOORBELL_PAGE // 8 + 1) if i not in used)
    if index >= DOORBELL_PAGE // 8: raise fail(errno.ENOSPC, "no free doorbell")
    qid = self.next_qid
    self.next_qid += 1
    doorbell = KFD_MMAP_TYPE_DOORBELL | ((gpu.gpu_id & KFD_GPU_ID_MASK) << KFD_MMAP_GPU_ID_SHIFT) | (8 * index)
    queue = gpu.create_queue(kind, qid, a.ring_base_address, size, a.read_pointer_address, a.write_pointer_address, doorbell)
    self.queues[qid] = (gpu, queue, index)
    self.doorbell_queues[(gpu.gpu_id, index)] = queue
    view = self.doorbell_views.get(gpu.gpu_id)
    if view is not None: view.route(8 * index, gpu.doorbell_of(queue))
    a.queue_id, a.doorbell_offset = qid, doorbell

  def _queue_buffer(self, gpu, addr: int, size: int, what: str, fail) -> None:
    """kfd_queue_buffer_get: addr's page must start an allocation mapped to gpu whose size is exactly `size`."""
    page = addr & ~(PAGE - 1)
    alloc = self.alloc_ranges.containing(addr)
    if alloc is not None and gpu.gpu_id in alloc.mapped_to:
      if alloc.va != page or alloc.size != size:
        raise fail(errno.EINVAL, f"{what} at {addr:#x}: the allocation {alloc.va:#x}+{alloc.size:#x} does not start at "
                                 f"its page or is not {size:#x} bytes")
      return
    raise fail(errno.EINVAL, f"{what} at {addr:#x} is in no allocation mapped to gpu_id {gpu.gpu_id}")

  def _AMDKFD_IOC_DESTROY_QUEUE(self, file, a, fail):
    entry = self.queues.pop(a.queue_id, None)
    if entry is None: raise fail(errno.EINVAL, f"no queue {a.queue_id}")
    self.doorbell_queues.pop((entry[0].gpu_id, entry[2]), None)
    view = self.doorbell_views.get(entry[0].gpu_id)
    if view is not None: view.route(8 * entry[2], None)
    entry[0].destroy_queue(a.queue_id)

  def kfd_mmio(self, size, offset, name):
    """map_mmio("/dev/kfd", 0x2000, doorbell page offset): the GPU's doorbell page."""
    if offset & ((1 << KFD_MMAP_TYPE_SHIFT) - 1) & (DOORBELL_PAGE - 1) or (offset >> KFD_MMAP_TYPE_SHIFT) != 3:
      raise OSCallError("mmap", "/dev/kfd", errno.EINVAL, f"offset {offset:#x} is not a doorbell page")
    gpu_id = (offset >> KFD_MMAP_GPU_ID_SHIFT) & KFD_GPU_ID_MASK
    gpu = self.by_id.get(gpu_id)
    if gpu is None: raise OSCallError("mmap", "/dev/kfd", errno.EINVAL, f"doorbell page of unknown gpu_id {gpu_id}")
    if size != DOORBELL_PAGE: raise OSCallError("mmap", "/dev/kfd", errno.EINVAL, f"doorbell mapping of {size:#x} bytes, not {DOORBELL_PAGE:#x}")
    view = self.doorbell_views.get(gpu_id)
    if view is None:
      view = self.doorbell_views[gpu_id] = DoorbellMMIO(name, DOORBELL_PAGE, lambda off, v, gpu=gpu: self._ring(gpu, off, v))
      # the 64-bit doorbell store of each queue goes straight to its queue (the write of every launch)
      for (gid, index), queue in self.doorbell_queues.items():
        if gid == gpu_id: view.route(8 * index, gpu.doorbell_of(queue))
    return view

  def _ring(self, gpu, off: int, value: int) -> None:
    """A doorbell store without a route (a 32-bit store, an offset without a queue)."""
    queue = self.doorbell_queues.get((gpu.gpu_id, off >> 3))
    if queue is not None: gpu.ring_doorbell(queue, value)

  def mmap_kfd(self, path, size, offset, addr):
    if offset >> KFD_MMAP_TYPE_SHIFT == 3:
      raise OSCallError("mmap", path, errno.ENODEV, "mock doorbells are not memory: map them with os.map_mmio()")
    if offset >> KFD_MMAP_TYPE_SHIFT == 2 and self.event_page is not None and self.event_page_own:
      if addr is not None and addr != self.event_page:
        raise OSCallError("mmap", path, errno.EINVAL, f"the event page lives at {self.event_page:#x}")
      return self.event_page
    raise OSCallError("mmap", path, errno.EINVAL, f"offset {offset:#x}")

  # ---- events
  def _AMDKFD_IOC_CREATE_EVENT(self, file, a, fail):
    kfd = self.kfd_h
    if a.event_page_offset and self.event_page is None:
      alloc = self._alloc(a.event_page_offset, fail)
      if alloc.size < EVENT_PAGE_SIZE: raise fail(errno.EINVAL, f"event page of {alloc.size:#x} bytes < {EVENT_PAGE_SIZE:#x}")
      self.event_page = alloc.va
      ctypes.memset(self.event_page, 0xFF, EVENT_PAGE_SIZE)
    elif a.event_page_offset: raise fail(errno.EINVAL, "the event page is already set")
    etype = a.event_type
    if etype not in (kfd.KFD_IOC_EVENT_SIGNAL, kfd.KFD_IOC_EVENT_MEMORY, kfd.KFD_IOC_EVENT_HW_EXCEPTION,
                     kfd.KFD_IOC_EVENT_NODECHANGE, kfd.KFD_IOC_EVENT_DEVICESTATECHANGE, kfd.KFD_IOC_EVENT_SYSTEM_EVENT,
                     kfd.KFD_IOC_EVENT_DEBUG_EVENT, kfd.KFD_IOC_EVENT_PROFILE_EVENT, kfd.KFD_IOC_EVENT_QUEUE_EVENT):
      raise fail(errno.EINVAL, f"event_type {etype}")
    if etype == kfd.KFD_IOC_EVENT_SIGNAL or etype == kfd.KFD_IOC_EVENT_DEBUG_EVENT:
      if self.event_page is None:          # the kernel allocates the page and the caller mmaps it (KFD_MMAP_TYPE_EVENTS)
        self.event_page = self.os.memory.alloc(EVENT_PAGE_SIZE, what="KFD event page")
        self.event_page_own = True
        ctypes.memset(self.event_page, 0xFF, EVENT_PAGE_SIZE)
      eid = next((i for i in range(KFD_SIGNAL_EVENT_LIMIT) if i not in self.events), None)
      if eid is None: raise fail(errno.ENOSPC, "no free signal slot")
      ctypes.c_uint64.from_address(self.event_page + 8 * eid).value = UNSIGNALED_EVENT_SLOT
      a.event_slot_index, a.event_trigger_data = eid, eid
      a.event_page_offset = KFD_MMAP_TYPE_EVENTS if self.event_page_own else a.event_page_offset
    else:
      eid = next(i for i in range(KFD_SIGNAL_EVENT_LIMIT, 1 << 31) if i not in self.events)
      a.event_slot_index = 0
    with self.cond: self.events[eid] = Event(eid, etype, bool(a.auto_reset))
    a.event_id = eid

  def _AMDKFD_IOC_DESTROY_EVENT(self, file, a, fail):
    with self.cond:
      if self.events.pop(a.event_id, None) is None: raise fail(errno.EINVAL, f"no event {a.event_id}")

  def _AMDKFD_IOC_SET_EVENT(self, file, a, fail):
    with self.cond:
      ev = self.events.get(a.event_id)
      if ev is None: raise fail(errno.EINVAL, f"no event {a.event_id}")
      ev.signaled = True
      self.cond.notify_all()

  def _AMDKFD_IOC_RESET_EVENT(self, file, a, fail):
    with self.cond:
      ev = self.events.get(a.event_id)
      if ev is None: raise fail(errno.EINVAL, f"no event {a.event_id}")
      ev.signaled = False

  def _slot(self, eid: int) -> int: return ctypes.c_uint64.from_address(self.event_page + 8 * eid).value

  def interrupt(self, gpu, queue, ctxid: int) -> None:
    """An end-of-pipe or SDMA trap interrupt carrying context id `ctxid` (kfd_signal_event_interrupt)."""
    with self.cond:
      page = self.event_page
      if page is None: return
      sig = self._signal_type
      ev = self.events.get(ctxid)
      if ev is not None and ev.type == sig:
        # the event named by the context id (every launch): its slot's ctypes cell is kept per event page
        slots = self._slots if self._slots[0] == page else self._new_slots(page)
        slot = slots[1].get(ctxid)
        if slot is None: slot = slots[1][ctxid] = ctypes.c_uint64.from_address(page + 8 * ctxid)
        if slot.value != UNSIGNALED_EVENT_SLOT:
          slot.value = UNSIGNALED_EVENT_SLOT
          ev.signaled = True
          if self.waiters: self.cond.notify_all()
          return
      hits = [e for e in self.events.values() if e.type == sig and e.id < KFD_SIGNAL_EVENT_LIMIT and self._slot(e.id) != UNSIGNALED_EVENT_SLOT]
      for e in hits:
        ctypes.c_uint64.from_address(page + 8 * e.id).value = UNSIGNALED_EVENT_SLOT
        e.signaled = True
      if hits and self.waiters: self.cond.notify_all()

  def _new_slots(self, page: int) -> tuple:
    self._slots = (page, {})
    return self._slots

  def queue_failed(self, gpu, queue, error) -> None:
    """A queue stopped on an error: a GPU fault signals MEMORY events with the address, anything else HW_EXCEPTION."""
    kfd = self.kfd_h
    with self.cond:
      for e in self.events.values():
        if isinstance(error, GPUFault) and error.address is not None and e.type == kfd.KFD_IOC_EVENT_MEMORY:
          e.memory_fault, e.signaled = (gpu.gpu_id, error.address), True
        elif (not isinstance(error, GPUFault) or error.address is None) and e.type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
          e.hw_exception, e.signaled = gpu.gpu_id, True
      self.cond.notify_all()

  def _AMDKFD_IOC_WAIT_EVENTS(self, file, a, fail):
    kfd = self.kfd_h
    n = a.num_events
    size = ctypes.sizeof(kfd.struct_kfd_event_data)
    if n == 0 or n > KFD_SIGNAL_EVENT_LIMIT: raise fail(errno.EINVAL, f"num_events {n}")
    if not _readable(a.events_ptr, n * size): raise fail(errno.EFAULT, f"events_ptr {a.events_ptr:#x} is not readable")
    data = (kfd.struct_kfd_event_data * n).from_address(a.events_ptr)
    events = []
    for d in data:
      ev = self.events.get(d.event_id)
      if ev is None: raise fail(errno.EINVAL, f"no event {d.event_id}")
      events.append(ev)
    deadline = None if a.timeout == KFD_EVENT_TIMEOUT_INFINITE else time.monotonic() + a.timeout / 1000

    def ready():
      states = [e.signaled for e in events]
      return all(states) if a.wait_for_all else any(states)
    while True:
      if not self.os.config.mock_threaded: self.os.tick()     # synchronous engines run while the caller waits
      with self.cond:
        if ready(): break
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0: break
        self.waiters += 1
        try:
          self.cond.wait(timeout=min(left, 0.5) if left is not None else 0.5) if self.os.config.mock_threaded else \
            self.cond.wait(timeout=min(left, 0.0005) if left is not None else 0.0005)
        finally: self.waiters -= 1
    with self.cond:
      a.wait_result = kfd.KFD_IOC_WAIT_RESULT_COMPLETE if ready() else kfd.KFD_IOC_WAIT_RESULT_TIMEOUT
      for d, ev in zip(data, events):
        if not ev.signaled: continue
        if ev.memory_fault is not None:
          m = d.memory_exception_data
          m.gpu_id, m.va = ev.memory_fault
          m.failure.NotPresent, m.failure.ReadOnly, m.failure.NoExecute, m.failure.imprecise = 1, 0, 0, 0
          m.ErrorType = 0
        if ev.hw_exception is not None:
          h = d.hw_exception_data
          h.gpu_id, h.reset_type, h.reset_cause, h.memory_lost = ev.hw_exception, 0, 1, 0
        if ev.auto_reset:
          ev.signaled = False
          ev.memory_fault = ev.hw_exception = None

  # ---- DRM
  def _DRM_IOCTL_AMDGPU_INFO(self, file, a, fail):
    drm = self.drm_h
    if not isinstance(file, RenderFile): raise fail(errno.ENOTTY, "AMDGPU_INFO is a render-node ioctl")
    if a.query != drm.AMDGPU_INFO_DEV_INFO: raise fail(errno.EINVAL, f"query {a.query:#x} is not modelled (DEV_INFO only)")
    info = self.dev_info(file.gpu)
    n = min(a.return_size, ctypes.sizeof(info))
    if not _readable(a.return_pointer, n): raise fail(errno.EFAULT, f"return_pointer {a.return_pointer:#x}")
    ctypes.memmove(a.return_pointer, ctypes.addressof(info), n)

  def dev_info(self, gpu):
    """struct drm_amdgpu_info_device as amdgpu_info_ioctl(AMDGPU_INFO_DEV_INFO) fills it for a Navi 31."""
    drm, p = self.drm_h, gpu.props
    info = drm.struct_drm_amdgpu_info_device()
    info.device_id, info.chip_rev, info.external_rev, info.pci_rev = p.device_id, 0, 0x1, p.revision
    info.family = drm.AMDGPU_FAMILY_GC_11_0_0
    info.num_shader_engines, info.num_shader_arrays_per_engine = p.num_shader_engines, p.simd_arrays_per_engine
    info.gpu_counter_freq = R.GPU_CLOCK_HZ // 1000       # kHz: the GPU clock counter's frequency
    info.max_engine_clock, info.max_memory_clock = p.max_engine_clk_fcompute * 1000, 1_250_000
    info.cu_active_number = p.cu_count
    info.cu_ao_mask = 0xFFFFFFFF
    per_sa = (1 << p.cu_per_simd_array) - 1
    for se in range(p.num_shader_engines):     # gfx_v11_0_get_cu_info: bitmap[se % 4][sa + (se / 4) * 2]
      for sa in range(p.simd_arrays_per_engine):
        info.cu_bitmap[se % 4][sa + (se // 4) * 2] = per_sa
    info.wave_front_size, info.num_cu_per_sh = p.wave_front_size, p.cu_per_simd_array
    info.virtual_address_offset, info.virtual_address_max = 0x200000, 1 << 47
    info.virtual_address_alignment, info.pte_fragment_size, info.gart_page_size = PAGE, 0x200000, PAGE
    info.num_shader_visible_vgprs = 1536
    info.vram_type, info.vram_bit_width = drm.AMDGPU_VRAM_TYPE_GDDR6, 384
    info.num_tcc_blocks, info.num_rb_pipes = 96, 32
    return info
