"""KFDSession: an AMD GPU through the amdgpu kernel driver's /dev/kfd, reached only through the OS interface.

What it offers AMDDevice (the same surface a future PCI/USB session offers): topology properties, memory
(alloc/free with CPU VA == GPU VA), queues with doorbells, a signal event with its mailbox, and a wait that turns
KFD memory/HW-exception events into hcq.GPUFault.

Sources: include/uapi/linux/kfd_ioctl.h (through hcq.autogen.kfd), Documentation of the KFD topology in sysfs
(/sys/devices/virtual/kfd/kfd/topology/nodes/N/{gpu_id,properties}), drivers/gpu/drm/amd/amdkfd/kfd_queue.c for
the context-save area sizes a compute queue must provide."""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import os as _os

from ...autogen import kfd
from ...errors import DeviceError, GPUFault, OSCallError
from ..hcq.alloc import round_up
from . import kfd_events
from .kfd_events import EventPage

TOPOLOGY = "devices/virtual/kfd/kfd/topology/nodes"
PAGE = 0x1000
DOORBELL_PAGE = 0x2000
# amd_queue_t (ROCR amd_hsa_queue.h): read_dispatch_id at +128, write_dispatch_id at +56; hcq keeps its ring read
# and write pointers at the same places of a small "gart" page, as ROCR does for PM4 queues.
RPTR_OFFSET, WPTR_OFFSET = 128, 56
GC_HWID, SDMA0_HWID = 11, 42   # soc15_hw_ip.h: hardware ids, the folders of amdgpu's ip_discovery sysfs


@dataclasses.dataclass
class Mem:
  """A KFD memory allocation: its GPU virtual address, size, handle and flags."""
  va: int
  size: int
  handle: int
  flags: int
  cpu: memoryview | None       # a byte view when the CPU can access it
  foreign: bool = False        # host memory another owner allocated (register_host): free() leaves it mapped
  dmabuf: object = None        # the imported dma-buf's file (import_bar): closed by free()


@dataclasses.dataclass
class HWQueue:
  """A KFD user-mode queue: its ring, the GART block of its read/write pointers, and its doorbell's offset."""
  kind: str
  queue_id: int
  ring: Mem
  gart: Mem                    # holds the read and write pointers at rptr_offset / wptr_offset
  extra: list
  doorbell_offset: int
  rptr_offset: int = RPTR_OFFSET
  wptr_offset: int = WPTR_OFFSET


def cwsr_sizes(p: dict) -> tuple[int, int, int]:
  """(context save area size, control stack size, debug memory size) per XCC for a compute queue of a node with the
  topology properties p. KFD checks them (drivers/gpu/drm/amd/amdkfd/kfd_queue.c, kfd_queue_acquire_buffers:
  ctl_stack_size equal to the node's, the save area at least the node's cwsr_size); newer kernels (6.12) publish both
  in the topology properties, older ones do not and they are computed the way kfd_queue_ctx_save_restore_size()
  does; the debug memory size (the debugger's area after each save area) is published by none and always computed.
  The mock holds the same formula to publish the numbers (mockgpu/amd/cwsr.cwsr_sizes: neither may import the other);
  tests/mockgpu/test_hardware_facts.py holds the two equal."""
  gfxv = p["gfx_target_version"]
  xccs = max(p.get("num_xcc", 1), 1)
  cu_num = p.get("simd_count", 0) // max(p.get("simd_per_cu", 1), 1) // xccs
  if gfxv < 100100:  # before GFX_VERSION_NAVI10
    wave_num = min(cu_num * 40, p.get("array_count", 0) // max(p.get("simd_arrays_per_engine", 1), 1) * 512)
  else: wave_num = cu_num * 32
  debug = round_up(wave_num * 32, 64)                 # DEBUGGER_BYTES_PER_WAVE, DEBUGGER_BYTES_ALIGN
  if "ctl_stack_size" in p and "cwsr_size" in p: return p["cwsr_size"], p["ctl_stack_size"], debug
  if gfxv // 100 * 100 == 90400 or gfxv in (90010, 90008): vgpr_per_cu = 0x80000
  elif gfxv in (110000, 110001, 110501, 120000, 120001): vgpr_per_cu = 0x60000
  else: vgpr_per_cu = 0x40000
  wg_data = round_up(cu_num * (vgpr_per_cu + 0x4000 + 0x10000 + 0x1000), PAGE)   # + SGPR, LDS, HWREG per CU
  ctl_stack = round_up(40 + wave_num * (12 if gfxv >= 100100 else 8) + 8, PAGE)
  if gfxv // 10000 * 10000 == 100000: ctl_stack = min(ctl_stack, 0x7000)
  return ctl_stack + wg_data, ctl_stack, debug


class KFDSession:
  name = "KFD"

  def __init__(self, osi, index: int, config, label: str | None = None):
    """label: how errors name the device (the spec it was opened with; default "KFD+AMD:<index>")."""
    self.os, self.config = osi, config
    self.spec = label or f"KFD+AMD:{index}"
    try: self.kfd = osi.open("/dev/kfd", _os.O_RDWR)
    except OSCallError as e: raise DeviceError(f"{self.spec}: cannot open /dev/kfd ({e})") from None
    self.drm, self.label = None, self.spec
    self._mems: dict[int, Mem] = {}
    self._queues: list[HWQueue] = []
    self._event_ids: list[int] = []
    self.event_page: EventPage | None = None
    try: self._open(index)
    except BaseException as e:
      try: self.close()
      except (DeviceError, OSError) as cleanup:   # the error that stopped the opening is the one raised
        e.add_note(f"{self.label}: cleaning up after the failed open failed too: {cleanup}")
      raise

  def _open(self, index: int) -> None:
    osi = self.os
    self.gpu_node, self.gpu_id, self.props = self._discover(index)
    self.label = f"{self.spec} (gpu_id {self.gpu_id})"
    ver = self.props["gfx_target_version"]
    self.arch = f"gfx{ver // 10000}{(ver // 100) % 100:x}{ver % 100:x}"
    self.drm = osi.open(f"/dev/dri/renderD{self.props['drm_render_minor']}", _os.O_RDWR)
    self.gc_ip = self._ip_version(GC_HWID, self._gc_from_gfx(ver))
    # SDMA's major follows GC's on the parts hcq knows (soc15 gfx9: SDMA 4, gfx10: 5, gfx11: 6, gfx12: 7)
    self.sdma_ip = self._ip_version(SDMA0_HWID, ({9: 4, 10: 5, 11: 6, 12: 7}.get(self.gc_ip[0], 6), 0, 0))
    v = kfd.AMDKFD_IOC_GET_VERSION(self.kfd)
    self.kfd_version = (v.major_version, v.minor_version)
    kfd.AMDKFD_IOC_ACQUIRE_VM(self.kfd, drm_fd=self.drm.fd, gpu_id=self.gpu_id)
    if self.kfd_version >= (1, 14): kfd.AMDKFD_IOC_RUNTIME_ENABLE(self.kfd, mode_mask=0)
    self._gpu_ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    self._doorbells = None
    self._doorbell_base = None
    # events: the process's event page (shared with the other GPUs of this process), a signal event of this device
    # for its queues' interrupts, and this device's memory and HW-exception fault events. Auto-reset: KFD signals
    # every fault event of the process, each device reads the one it created and keeps the faults of its GPU.
    with kfd_events.LOCK:
      self.event_page, fresh = EventPage.acquire(self)
      ev = kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_page_offset=self.event_page.mem.handle if fresh else 0,
                                       event_type=kfd.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
    self._event_ids = [ev.event_id]
    self.event_id, self.mailbox_va = ev.event_id, self.event_page.mem.va + ev.event_slot_index * 8
    for etype in (kfd.KFD_IOC_EVENT_MEMORY, kfd.KFD_IOC_EVENT_HW_EXCEPTION):
      self._event_ids.append(kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_type=etype, auto_reset=1).event_id)
    self._events = (kfd.struct_kfd_event_data * 3)()
    for slot, eid in zip(self._events, self._event_ids): slot.event_id = eid

  # ---- discovery
  def _discover(self, index: int) -> tuple[int, int, dict[str, int]]:
    try: nodes = sorted((n for n in self.os.sysfs_list(TOPOLOGY) if n.isdigit()), key=int)
    except OSCallError as e: raise DeviceError(f"{self.spec}: no KFD topology ({e})") from None
    gpus = []
    for n in nodes:
      gpu_id = int(self.os.sysfs_read(f"{TOPOLOGY}/{n}/gpu_id").strip() or 0)
      if gpu_id: gpus.append((int(n), gpu_id))
    if index >= len(gpus):
      raise DeviceError(f"{self.spec}: the KFD topology lists {len(gpus)} GPU(s)")
    node, gpu_id = gpus[index]
    props = {}
    for line in self.os.sysfs_read(f"{TOPOLOGY}/{node}/properties").splitlines():
      key, _, val = line.strip().partition(" ")
      if key and val.strip().lstrip("-").isdigit(): props[key] = int(val)
    for need in ("gfx_target_version", "drm_render_minor"):
      if need not in props: raise DeviceError(f"{self.spec}: topology node {node} has no {need} property")
    return node, gpu_id, props

  def _ip_version(self, hwid: int, fallback: tuple[int, int, int]) -> tuple[int, int, int]:
    """An IP block's version (major, minor, revision) as amdgpu's IP discovery shows it for the render node
    (ip_discovery/die/0/<hardware id>/0/{major,minor,revision}); fallback for a kernel without that sysfs (before
    5.19)."""
    d = f"class/drm/renderD{self.props['drm_render_minor']}/device/ip_discovery/die/0/{hwid}/0"
    try: return tuple(int(self.os.sysfs_read(f"{d}/{f}").strip()) for f in ("major", "minor", "revision"))
    except (OSCallError, ValueError): return fallback

  @staticmethod
  def _gc_from_gfx(gfx_target_version: int) -> tuple[int, int, int]:
    """The GC version a gfx target implies: its major is the GC major (gfx942 is GC 9.4.3, taken for every gfx94x)."""
    major, minor = gfx_target_version // 10000, (gfx_target_version // 100) % 100
    return (9, 4, 3) if (major, minor) == (9, 4) else (major, minor, 0)

  # ---- memory
  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    """kind: "vram" (device memory; CPU-visible only with cpu_access, which needs a large BAR), "gtt" (host memory
    the GPU reaches uncached; always CPU-visible), "userptr" (anonymous host memory registered with the GPU)."""
    size = round_up(max(size, 1), PAGE)
    flags = kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | \
      kfd.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
    if kind == "gtt": flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | \
      kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
    elif kind == "userptr": flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
    elif kind == "vram":
      flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM
      if cpu_access: flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    else: raise ValueError(f"unknown memory kind {kind!r}")
    mapped = kind != "vram" or cpu_access
    if kind == "userptr": va = self.os.alloc_anon(size, shared=True)
    else: va = self.os.alloc_anon(size, reserve_only=True)
    try:
      args = kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(self.kfd, va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags,
                                                mmap_offset=va if kind == "userptr" else 0)
    except OSCallError as e:
      self.os.free_anon(va, size)
      hint = " (CPU-visible VRAM needs a large/resizable BAR)" if cpu_access and e.errno == 22 else ""
      raise DeviceError(f"{self.label}: allocating {size:#x} bytes of {kind} failed: {e}{hint}") from None
    try:
      if mapped and kind != "userptr": self.drm.mmap(size, args.mmap_offset, addr=va)
      kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(self.kfd, handle=args.handle, device_ids_array_ptr=ctypes.addressof(self._gpu_ids),
                                       n_devices=1)
    except OSCallError as e:        # give the allocation back: nothing refers to it yet
      self.os.free_anon(va, size)
      try: kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(self.kfd, handle=args.handle)
      except OSCallError as free_error: e.add_note(f"{self.label}: freeing handle {args.handle:#x} failed too: {free_error}")
      raise DeviceError(f"{self.label}: mapping {size:#x} bytes of {kind} at {va:#x} failed: {e}") from e
    mem = Mem(va, size, args.handle, flags, self.os.memview(va, size) if mapped else None)
    self._mems[va] = mem
    return mem

  def disown(self, mem: Mem) -> None:
    """Forget mem without freeing it: its new owner frees it (the process's event page)."""
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: disown of unknown memory at {mem.va:#x}")

  def free(self, mem: Mem) -> None:
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: free of unknown memory at {mem.va:#x}")
    mem.cpu = None
    kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(self.kfd, handle=mem.handle, device_ids_array_ptr=ctypes.addressof(self._gpu_ids),
                                         n_devices=1)
    if not mem.foreign: self.os.free_anon(mem.va, mem.size)
    kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(self.kfd, handle=mem.handle)
    if mem.dmabuf is not None: mem.dmabuf.close()

  # ---- another device's memory in this GPU's address space (peer-to-peer)
  def register_host(self, va: int, size: int, what: str) -> Mem:
    """Host memory someone else allocated (a NIC's queues) mapped to this GPU at its own address, as USERPTR
    (kfd_ioctl.h KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: mmap_offset carries the CPU address). free() unregisters it and
    leaves the memory to its owner."""
    if va % PAGE or size <= 0: raise DeviceError(f"{self.label}: {what} at {va:#x}+{size:#x} is not whole pages")
    size = round_up(size, PAGE)
    flags = kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | \
      kfd.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
    try:
      args = kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(self.kfd, va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags,
                                                mmap_offset=va)
    except OSCallError as e: raise DeviceError(f"{self.label}: registering {what} ({va:#x}+{size:#x}) failed: {e}") from None
    mem = Mem(va, size, args.handle, flags, None, foreign=True)
    self._map_new(mem, what)
    return mem

  def import_bar(self, path: str, size: int, offset: int, what: str) -> Mem:
    """A window of another PCI function's BAR (its sysfs resource file) in this GPU's address space: the OS exports
    it as a dma-buf (os.export_bar_dmabuf), KFD imports it at a VA reserved here (kfd_ioctl.h
    AMDKFD_IOC_IMPORT_DMABUF) and maps it. Where Linux has no exporter for the function, the DeviceError says so."""
    size = round_up(size, PAGE)
    try: buf = self.os.export_bar_dmabuf(path, size, offset, what)
    except OSCallError as e: raise DeviceError(f"{self.label}: cannot map {what} into the GPU: {e}") from None
    va = self.os.alloc_anon(size, reserve_only=True)
    try: args = kfd.AMDKFD_IOC_IMPORT_DMABUF(self.kfd, va_addr=va, gpu_id=self.gpu_id, dmabuf_fd=buf.fd)
    except OSCallError as e:
      self.os.free_anon(va, size)
      buf.close()
      raise DeviceError(f"{self.label}: importing the dma-buf of {what} failed: {e}") from None
    mem = Mem(va, size, args.handle, 0, None, dmabuf=buf)
    self._map_new(mem, what)
    return mem

  def _map_new(self, mem: Mem, what: str) -> None:
    try:
      kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(self.kfd, handle=mem.handle, device_ids_array_ptr=ctypes.addressof(self._gpu_ids),
                                       n_devices=1)
    except OSCallError as e:
      try: kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(self.kfd, handle=mem.handle)
      finally:
        if not mem.foreign: self.os.free_anon(mem.va, mem.size)
        if mem.dmabuf is not None: mem.dmabuf.close()
      raise DeviceError(f"{self.label}: mapping {what} at {mem.va:#x} to the GPU failed: {e}") from None
    self._mems[mem.va] = mem

  # ---- queues
  def _cwsr_sizes(self) -> tuple[int, int, int]:
    return cwsr_sizes(self.props)

  def create_queue(self, kind: str, ring_size: int) -> HWQueue:
    """A PM4 compute ("compute"), AQL compute ("aql") or SDMA ("sdma") queue with its ring (GTT), read/write pointers
    and doorbell. An AQL queue's gart page is its amd_queue_t (ROCR amd_hsa_queue.h): the pointers are its
    write_dispatch_id and read_dispatch_id."""
    ring = self.alloc(ring_size, kind="gtt")
    gart = self.alloc(PAGE, kind="gtt")
    extra = []
    kw = {}
    if kind in ("compute", "aql"):
      eop = self.alloc(PAGE, kind="vram")
      save, ctl, debug = self._cwsr_sizes()
      cwsr = self.alloc(round_up((save + debug) * max(self.props.get("num_xcc", 1), 1), PAGE), kind="vram")
      extra += [eop, cwsr]
      qtype = kfd.KFD_IOC_QUEUE_TYPE_COMPUTE if kind == "compute" else kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
      kw = dict(queue_type=qtype, eop_buffer_address=eop.va, eop_buffer_size=eop.size,
                ctx_save_restore_address=cwsr.va, ctx_save_restore_size=save, ctl_stack_size=ctl)
    elif kind == "sdma": kw = dict(queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA)
    else: raise ValueError(f"unknown queue kind {kind!r}")
    q = kfd.AMDKFD_IOC_CREATE_QUEUE(self.kfd, ring_base_address=ring.va, ring_size=ring.size, gpu_id=self.gpu_id,
                                    read_pointer_address=gart.va + RPTR_OFFSET,
                                    write_pointer_address=gart.va + WPTR_OFFSET,
                                    queue_percentage=100, queue_priority=7, **kw)
    if self._doorbells is None:
      self._doorbell_base = q.doorbell_offset & ~(DOORBELL_PAGE - 1)
      self._doorbells = self.os.map_mmio("/dev/kfd", DOORBELL_PAGE, self._doorbell_base, name=f"{self.label} doorbells")
    elif q.doorbell_offset & ~(DOORBELL_PAGE - 1) != self._doorbell_base:
      raise DeviceError(f"{self.label}: queue {q.queue_id}'s doorbell {q.doorbell_offset:#x} is outside the doorbell page "
                        f"{self._doorbell_base:#x} of the first queue")
    hwq = HWQueue(kind, q.queue_id, ring, gart, extra, q.doorbell_offset - self._doorbell_base)
    self._queues.append(hwq)
    return hwq

  def doorbell(self, q: HWQueue):
    """A function that rings q's doorbell with a 64-bit write pointer."""
    # a partial, not a lambda: one Python call less on every doorbell
    return functools.partial(self._doorbells.write64, q.doorbell_offset)

  # ---- events and faults
  def wait_events(self, timeout_ms: int) -> bool:
    """Block in KFD until the queue event fires or timeout_ms pass; raise GPUFault for a memory or HW exception
    event of this GPU. Returns True when an event fired."""
    for slot in self._events:        # the two records share a union, their gpu_id fields are at different offsets
      slot.memory_exception_data.gpu_id = slot.hw_exception_data.gpu_id = 0
    args = kfd.AMDKFD_IOC_WAIT_EVENTS(self.kfd, events_ptr=ctypes.addressof(self._events), num_events=3,
                                      wait_for_all=0, timeout=timeout_ms)
    mem, hw = self._events[1].memory_exception_data, self._events[2].hw_exception_data
    if mem.gpu_id == self.gpu_id:      # a fault of another GPU of this process is that device's to report
      f = mem.failure
      kind = "page not present" if f.NotPresent else "write to read-only page" if f.ReadOnly else \
        "execute of no-execute page" if f.NoExecute else "memory fault"
      raise GPUFault(f"{self.label}: memory exception{' (imprecise)' if f.imprecise else ''}", address=mem.va, kind=kind)
    if hw.gpu_id == self.gpu_id:
      raise GPUFault(f"{self.label}: hardware exception (reset type {hw.reset_type}, cause {hw.reset_cause}, "
                     f"memory lost {hw.memory_lost})", kind="hardware exception")
    return args.wait_result == 0  # KFD_IOC_WAIT_RESULT_COMPLETE

  def close(self) -> None:
    """Destroy the queues and events, free all memory and let go of the event page; every step is tried, the first
    failure is raised at the end."""
    errors = []
    for q in self._queues:
      try: kfd.AMDKFD_IOC_DESTROY_QUEUE(self.kfd, queue_id=q.queue_id)
      except (OSCallError, OSError) as e: errors.append(e)
    self._queues.clear()
    for eid in self._event_ids:
      try: kfd.AMDKFD_IOC_DESTROY_EVENT(self.kfd, event_id=eid)
      except (OSCallError, OSError) as e: errors.append(e)
    self._event_ids.clear()
    for mem in list(self._mems.values()):
      try: self.free(mem)
      except (OSCallError, OSError) as e: errors.append(e)
    if self.event_page is not None:
      try: self.event_page.release(self.kfd)
      except (DeviceError, OSError) as e: errors.append(e)
      self.event_page = None
    if self.drm is not None: self.drm.close()
    self.kfd.close()
    if errors: raise DeviceError(f"{self.label}: closing failed: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
