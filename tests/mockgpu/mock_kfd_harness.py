"""A small driver over the mock's KFD ioctls, for the mock's own tests (hcq's real driver lives in drivers/amd).

It does what a KFD client does (ROCt libhsakmt's calls on Linux's kfd_ioctl.h) with nothing but the
OS interface and the generated bindings: topology, GET_VERSION, ACQUIRE_VM, RUNTIME_ENABLE, an event page and
events, memory (reserve VA, ALLOC at that VA, mmap on the render node, MAP), queues with doorbells, and kernel
launches from clang-built code objects through PM4 (DISPATCH_DIRECT) or AQL (kernel dispatch packets).
"""
from __future__ import annotations

import ctypes
import os as _os
import struct
from dataclasses import dataclass

import msgpack
import numpy as np

from hcq.autogen import kfd
from hcq.mockgpu import mock_amd_os
from hcq.mockgpu.amd import kfd as mock_kfd

TOPOLOGY = "devices/virtual/kfd/kfd/topology/nodes"
PAGE = 0x1000


def pm4(op: int, *body: int) -> list[int]:
  """A PM4 type-3 packet (nvd.h PACKET3): header then body."""
  return [(3 << 30) | ((len(body) - 1) << 16) | (op << 8), *[b & 0xFFFFFFFF for b in body]]


@dataclass
class Mem:
  va: int
  size: int
  handle: int
  kind: str

  def u32(self) -> np.ndarray: return np.frombuffer((ctypes.c_char * self.size).from_address(self.va), np.uint32)
  def u64(self) -> np.ndarray: return np.frombuffer((ctypes.c_char * self.size).from_address(self.va), np.uint64)
  def write(self, data: bytes, offset: int = 0) -> None: ctypes.memmove(self.va + offset, bytes(data), len(data))
  def read(self, size: int | None = None, offset: int = 0) -> bytes: return ctypes.string_at(self.va + offset, size or self.size)


class HQueue:
  """A hardware queue: ring, read pointer at gart+128, write pointer at gart+56 (amd_queue_t offsets)."""

  def __init__(self, h, kind: str, ring: Mem, gart: Mem, queue_id: int, doorbell_offset: int, unit: int):
    self.h, self.kind, self.ring, self.gart, self.queue_id, self.unit = h, kind, ring, gart, queue_id, unit
    self.doorbell_offset = doorbell_offset
    self.put = 0     # dwords written

  @property
  def rptr(self) -> int: return int(self.gart.u64()[128 // 8])

  def write(self, words: list[int], pad: bool = False) -> None:
    ring = self.ring.u32()
    n = len(ring)
    end = self.h.os.monotonic() + 5
    tail = n - self.put % n
    need = len(words) + (tail if pad and len(words) > tail else 0)
    while self.put + need - self.rptr * self.unit // 4 > n:   # wait for ring space
      assert self.h.os.monotonic() < end, f"{self.kind} ring full: the device does not consume"
      self.h.os.sleep(0.0002)
    pos = self.put % n
    if pad and pos + len(words) > n:           # SDMA: packets never straddle the end; pad with NOPs (zeros)
      ring[pos:] = 0
      self.put += n - pos
      pos = 0
    for i, w in enumerate(words): ring[(pos + i) % n] = w & 0xFFFFFFFF
    self.put += len(words)

  def commit(self) -> None:
    value = self.put * 4 // self.unit
    self.gart.u64()[56 // 8] = value
    self.h.doorbells.write64(self.doorbell_offset, value - (1 if self.kind == "aql" else 0))
    self.raise_new_error()

  def raise_new_error(self) -> None:
    """The error the mock queue stopped on since the last call, raised here. A driver learns of it through KFD
    events at its next wait (the mock never raises from a doorbell write); this harness tests the model, so it also
    reads the model's queue: in synchronous mode the error is there once the doorbell write returns."""
    q = self.h.gpu.queues.get(self.queue_id)
    if q is not None and q.error is not None and q.error is not getattr(self, "_raised", None):
      self._raised = q.error
      raise q.error

  def submit(self, words: list[int]) -> None:
    self.write(words, pad=self.kind == "sdma")
    self.commit()


class Harness:
  def __init__(self, config=None, gpus: int = 1, gpu_index: int = 0, os=None, parent: "Harness | None" = None):
    """parent: another Harness of the same MockOS (the same KFD process), whose event page this one shares: KFD
    takes one event page per process (kfd_kmap_event_page: "Event page is already set" -> EINVAL)."""
    self.os = os if os is not None else mock_amd_os(config, gpus=gpus)
    self.kfd = self.os.open("/dev/kfd", _os.O_RDWR)
    nodes = sorted((n for n in self.os.sysfs_list(TOPOLOGY)), key=int)
    gpu_nodes = [n for n in nodes if int(self.os.sysfs_read(f"{TOPOLOGY}/{n}/gpu_id"))]
    node = gpu_nodes[gpu_index]
    self.gpu_id = int(self.os.sysfs_read(f"{TOPOLOGY}/{node}/gpu_id"))
    self.props = dict((k, int(v)) for k, v in (l.split() for l in self.os.sysfs_read(f"{TOPOLOGY}/{node}/properties").splitlines()))
    self.drm = self.os.open(f"/dev/dri/renderD{self.props['drm_render_minor']}", _os.O_RDWR)
    self.version = kfd.AMDKFD_IOC_GET_VERSION(self.kfd)
    kfd.AMDKFD_IOC_ACQUIRE_VM(self.kfd, drm_fd=self.drm.fd, gpu_id=self.gpu_id)
    kfd.AMDKFD_IOC_RUNTIME_ENABLE(self.kfd, mode_mask=0)
    self.ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    self.doorbells = None
    if parent is None:
      self.event_page = self.alloc(0x8000, "gtt")
      kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_page_offset=self.event_page.handle)
    else:      # the process's event page: map it to this GPU too, so that its RELEASE_MEMs reach the mailboxes
      self.event_page = parent.event_page
      kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(self.kfd, handle=self.event_page.handle, device_ids_array_ptr=ctypes.addressof(self.ids),
                                       n_devices=1)
    ev = kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_type=kfd.KFD_IOC_EVENT_SIGNAL, auto_reset=1)
    self.event_id, self.mailbox = ev.event_id, self.event_page.va + 8 * ev.event_slot_index
    self.mem_event = kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_type=kfd.KFD_IOC_EVENT_MEMORY).event_id
    self.hw_event = kfd.AMDKFD_IOC_CREATE_EVENT(self.kfd, event_type=kfd.KFD_IOC_EVENT_HW_EXCEPTION).event_id
    self.events = (kfd.struct_kfd_event_data * 3)()
    for slot, eid in zip(self.events, (self.event_id, self.mem_event, self.hw_event)): slot.event_id = eid
    self.signals = self.alloc(PAGE, "gtt")
    self.kernargs = self.alloc(1 << 20, "gtt")
    self.kernarg_put = 0

  @property
  def gpu(self):
    return next(g for d in self.os.devices for g in getattr(d, "gpus", []) if g.gpu_id == self.gpu_id)

  # ---- memory
  def alloc(self, size: int, kind: str = "vram") -> Mem:
    size = (size + PAGE - 1) & ~(PAGE - 1)
    flags = kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
    flags |= {"vram": kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM, "gtt": kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT,
              "userptr": kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR}[kind]
    va = self.os.alloc_anon(size, shared=True) if kind == "userptr" else self.os.alloc_anon(size, reserve_only=True)
    a = kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU(self.kfd, va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags & 0xFFFFFFFF,
                                           mmap_offset=va if kind == "userptr" else 0)
    if kind != "userptr": assert self.drm.mmap(size, a.mmap_offset, addr=va) == va
    m = kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU(self.kfd, handle=a.handle, device_ids_array_ptr=ctypes.addressof(self.ids), n_devices=1)
    assert m.n_success == 1
    return Mem(va, size, a.handle, kind)

  def free(self, mem: Mem) -> None:
    kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU(self.kfd, handle=mem.handle, device_ids_array_ptr=ctypes.addressof(self.ids), n_devices=1)
    self.os.free_anon(mem.va, mem.size)
    kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU(self.kfd, handle=mem.handle)

  # ---- queues
  def queue(self, kind: str = "compute", ring_size: int = 1 << 16) -> HQueue:
    ring, gart = self.alloc(ring_size, "gtt"), self.alloc(PAGE, "gtt")
    qtype = {"compute": kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, "sdma": kfd.KFD_IOC_QUEUE_TYPE_SDMA,
             "aql": kfd.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL}[kind]
    extra = {}
    if kind != "sdma":       # the EOP buffer and the context-save area with the sizes the topology reports
      eop = self.alloc(PAGE, "vram")
      ctl, save = self.props["ctl_stack_size"], self.props["cwsr_size"]
      # one save area and debugger area per XCC (kfd_queue.c); the debugger area as the mock sizes it
      debug = mock_kfd.cwsr_sizes(self.gpu.props)["debug_memory_size"]
      cwsr = self.alloc((save + debug) * max(self.props.get("num_xcc", 1), 1), "vram")
      extra = dict(eop_buffer_address=eop.va, eop_buffer_size=eop.size, ctx_save_restore_address=cwsr.va,
                   ctx_save_restore_size=save, ctl_stack_size=ctl)
    q = kfd.AMDKFD_IOC_CREATE_QUEUE(self.kfd, ring_base_address=ring.va, ring_size=ring.size, gpu_id=self.gpu_id,
                                    queue_type=qtype, queue_percentage=100, queue_priority=7,
                                    read_pointer_address=gart.va + 128, write_pointer_address=gart.va + 56, **extra)
    if self.doorbells is None:
      self.doorbell_base = q.doorbell_offset & ~0x1FFF
      self.doorbells = self.os.map_mmio("/dev/kfd", 0x2000, self.doorbell_base, name="doorbells")
    return HQueue(self, kind, ring, gart, q.queue_id, q.doorbell_offset - self.doorbell_base,
                  {"compute": 4, "sdma": 1, "aql": 64}[kind])

  # ---- events
  def wait(self, timeout_ms: int = 2000):
    for slot in self.events:
      slot.memory_exception_data.gpu_id = 0
    r = kfd.AMDKFD_IOC_WAIT_EVENTS(self.kfd, events_ptr=ctypes.addressof(self.events), num_events=3, wait_for_all=0,
                                   timeout=timeout_ms)
    return r.wait_result, self.events

  # ---- packets a kernel launch needs
  def release_signal(self, addr: int, value: int, interrupt: bool = True) -> list[int]:
    """RELEASE_MEM: write a 64-bit value (data_sel 2); then the event id to the mailbox with an interrupt."""
    words = pm4(0x49, 0x514, (2 << 29), addr, addr >> 32, value, value >> 32, 0)
    if interrupt: words += pm4(0x49, 0x514, (1 << 29) | (2 << 24), self.mailbox, self.mailbox >> 32, self.event_id, 0, self.event_id)
    return words

  # ---- code objects
  def load(self, code: bytes) -> "Program":
    return Program(self, code)


class Program:
  """A clang-built gfx1100 code object (ET_DYN, one kernel): PT_LOAD segments copied to GPU memory; the kernel
  descriptor found by its `<name>.kd` symbol; kernarg layout from the NT_AMDGPU_METADATA note (msgpack)."""

  def __init__(self, h: Harness, code: bytes):
    self.h = h
    assert code[:4] == b"\x7fELF" and code[4] == 2
    (e_phoff, e_shoff) = struct.unpack_from("<QQ", code, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHHHH", code, 0x36)
    phdrs = [struct.unpack_from("<IIQQQQQQ", code, e_phoff + i * e_phentsize) for i in range(e_phnum)]
    loads = [p for p in phdrs if p[0] == 1]
    span = max(p[3] + p[6] for p in loads)
    self.image = h.alloc(span, "vram")
    for p in loads: self.image.write(code[p[2]:p[2] + p[5]], p[3])
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", code, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    symtab = next(s for s in shdrs if s[1] in (2, 11))           # SHT_SYMTAB or SHT_DYNSYM
    strtab = shdrs[symtab[6]]
    syms = {}
    for off in range(symtab[4], symtab[4] + symtab[5], 24):
      name_off, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", code, off)
      name = code[strtab[4] + name_off:code.index(b"\0", strtab[4] + name_off)].decode()
      syms[name] = value
    kd_name = next(n for n in syms if n.endswith(".kd"))
    self.name = kd_name[:-3]
    self.kd_addr = self.image.va + syms[kd_name]
    kd = self.image.read(64, syms[kd_name])
    self.group_fixed, self.private_fixed, self.kernarg_size = struct.unpack_from("<III", kd, 0)
    (entry,) = struct.unpack_from("<q", kd, 16)
    self.entry = self.kd_addr + entry
    self.rsrc3, self.rsrc1, self.rsrc2 = struct.unpack_from("<III", kd, 44)
    (self.props,) = struct.unpack_from("<H", kd, 56)
    self.meta = self._metadata(code, shdrs)

  @staticmethod
  def _metadata(code: bytes, shdrs) -> dict:
    note = next(s for s in shdrs if s[1] == 7)                    # SHT_NOTE
    pos, end = note[4], note[4] + note[5]
    while pos < end:
      namesz, descsz, ntype = struct.unpack_from("<III", code, pos)
      name_end = pos + 12 + ((namesz + 3) & ~3)
      desc = code[name_end:name_end + descsz]
      if ntype == 32: return msgpack.unpackb(desc)["amdhsa.kernels"][0]   # NT_AMDGPU_METADATA
      pos = name_end + ((descsz + 3) & ~3)
    raise ValueError("no NT_AMDGPU_METADATA note")

  def kernargs(self, values: list, groups, local) -> int:
    """Fill a kernarg segment: explicit args in order (buffers as addresses), hidden args (COV5) from the launch."""
    h = self.h
    size = max(self.meta[".kernarg_segment_size"], 16)
    addr = h.kernargs.va + h.kernarg_put
    h.kernarg_put = (h.kernarg_put + size + 255) & ~255
    buf = bytearray(size)
    explicit = iter(values)
    dims = 3 if groups[2] * local[2] > 1 else 2 if groups[1] * local[1] > 1 else 1
    hidden = {"hidden_block_count_x": groups[0], "hidden_block_count_y": groups[1], "hidden_block_count_z": groups[2],
              "hidden_group_size_x": local[0], "hidden_group_size_y": local[1], "hidden_group_size_z": local[2],
              "hidden_grid_dims": dims}
    for arg in self.meta.get(".args", []):
      kind, off, n = arg[".value_kind"], arg[".offset"], arg[".size"]
      if kind == "global_buffer": value = next(explicit)
      elif kind == "by_value":
        v = next(explicit)
        buf[off:off + n] = np.asarray(v).tobytes()[:n]
        continue
      else: value = hidden.get(kind, 0)
      buf[off:off + n] = int(value).to_bytes(n, "little")
    ctypes.memmove(addr, bytes(buf), size)
    return addr

  def user_sgprs(self, kernarg: int, dispatch_ptr: int = 0) -> list[int]:
    out = []
    for bit, n in ((0, 4), (1, 2), (2, 2), (3, 2), (4, 2), (5, 2), (6, 1)):
      if not self.props >> bit & 1: continue
      if bit == 3: out += [kernarg & 0xFFFFFFFF, kernarg >> 32]
      elif bit == 1: out += [dispatch_ptr & 0xFFFFFFFF, dispatch_ptr >> 32]
      else: out += [0] * n
    return out

  def pm4_dispatch(self, args: list, groups, local, lds_bytes: int | None = None) -> list[int]:
    """The PM4 of one launch (the dwords Linux's nvd.h packets give): program, resources, user data, sizes, dispatch."""
    kernarg = self.kernargs(args, groups, local)
    lds = self.group_fixed if lds_bytes is None else lds_bytes
    rsrc2 = self.rsrc2 | (((lds + 511) // 512) << 15)
    scratch_wavesize = (self.private_fixed * 32 + 255) // 256
    user = self.user_sgprs(kernarg)
    return (pm4(0x76, 0x20C, self.entry >> 8, self.entry >> 40) + pm4(0x76, 0x212, self.rsrc1, rsrc2) +
            pm4(0x76, 0x228, self.rsrc3) + pm4(0x76, 0x218, scratch_wavesize << 12) +
            (pm4(0x76, 0x240, *user) if user else []) + pm4(0x76, 0x204, 0, 0, 0, *local) +
            pm4(0x15, *groups, 0x8001) + pm4(0x46, 0x407))
