"""The KGSL model: /dev/kgsl-3d0 of a mock Adreno (an a630 by default), as one process sees it.

ioctls are dispatched by request number from the generated bindings (hcq.autogen.qcom.msm_kgsl): a handler method
`_<NAME>` implements IOCTL_KGSL_<NAME>; an unknown request fails with ENOTTY and a known but unmodelled one with
EINVAL, both naming the ioctl. Behaviour (errors as KGSL returns them, from the uapi's documented contract):
  - GETPROPERTY: DEVICE_INFO (chip id, gmem), GPU_RESET_STAT (the value holds a context id on input; the context's
    reset status comes back and is cleared), CONTEXT_PROPERTY with KGSL_CONTEXT_PROP_FAULTS (fault count and the
    timestamp of the last fault); a size that does not match the property's struct is EINVAL, an unknown context
    EINVAL (as for every ioctl naming one: kgsl.c's kgsl_context_get_owner() returning NULL is -EINVAL);
  - GPUMEM_ALLOC_ID: a memory object (size 0 or over 4 GiB: EINVAL), mapped by mmap at offset id << 12 (its GPU
    address becomes the CPU address: USE_CPU_MAP) for `mmapsize` bytes, which KGSL sets to the object's footprint
    (kgsl_memdesc_footprint: the size plus a guard page when the object has one, guard_page here);
    GPUMEM_FREE_ID of an unknown id: EINVAL (kgsl_ioctl_gpumem_free_id);
  - DRAWCTXT_CREATE / DESTROY; GPU_COMMAND: one or more command objects (indirect buffers) inside memory objects
    (else EINVAL), numcmds 0 or a wrong cmdsize: EINVAL; the context's next timestamp comes back; a context that
    faulted (KGSL_CONTEXT_INVALIDATE_ON_FAULT) answers EDEADLK;
  - DEVICE_WAITTIMESTAMP_CTXTID: returns once the timestamp retired, ETIMEDOUT after `timeout` ms (a timestamp
    not issued yet is waited for too, as KGSL's adreno_drawctxt_wait does), EDEADLK for a faulted context.
Submissions run on the command processor model (cp.py) in order, when the MockOS ticks its engines (synchronous mock)
or inside a wait; a fault (the shader or the CP touching memory outside every object, a bad packet) marks the
context guilty and drops its later work."""
from __future__ import annotations

import bisect
import ctypes
import dataclasses
import errno
import time

from ...errors import GPUFault, OSCallError, QueueError
from ..files import MockFile

PATH = "/dev/kgsl-3d0"
CHIP_A630 = 0x06030001
# Adreno 7xx chip ids as KGSL reports them (Mesa 25's freedreno_devices.py: "FD730", "FD740", "# KGSL, no speedbin data")
CHIP_A730, CHIP_A740 = 0x07030001, 0x43050A01
GMEM_A630 = 1 << 20
MAX_OBJECT = 1 << 32
HANG_TIMEOUT_S = 2.0             # KGSL's dispatcher declares a submission hung after 2 s (adreno_drawobj_timeout)


@dataclasses.dataclass
class MemObject:
  id: int
  size: int
  flags: int
  va: int = 0                      # 0 until mapped
  mmapsize: int = 0                # what mmap must map (the size, plus the guard page when there is one)


@dataclasses.dataclass
class Context:
  id: int
  flags: int
  timestamp: int = 0               # the last timestamp handed out
  retired: int = 0
  reset_status: int = 0
  faults: int = 0
  fault_timestamp: int = 0
  fault_reason: str = ""
  invalid: bool = False


class KGSLFile(MockFile):
  def __init__(self, model, path, flags):
    super().__init__(path, flags)
    self.model = model

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.model.ioctl(self, request, arg)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None):
    self._check_open("mmap")
    return self.model.mmap(self.path, size, offset, addr)


class KGSLModel:
  """The kernel side: memory objects, contexts and their timestamps, and the GPU's command processor."""

  def __init__(self, os, chip_id: int = CHIP_A630):
    from ...autogen.qcom import msm_kgsl
    self.os, self.chip_id, self.K = os, chip_id, msm_kgsl
    self.ioctls = {getattr(msm_kgsl, n).request: getattr(msm_kgsl, n) for n in dir(msm_kgsl)
                   if n.startswith("IOCTL_KGSL_") and getattr(getattr(msm_kgsl, n), "struct", None) is not None}
    # request -> (the ioctl, its handler or None when it is not modelled), looked up once per request
    self._handlers = {r: (d, getattr(self, "_" + d.name.removeprefix("IOCTL_KGSL_"), None))
                      for r, d in self.ioctls.items()}
    self._cmd_object = msm_kgsl.struct_kgsl_command_object
    self._cmd_size = ctypes.sizeof(self._cmd_object)
    self.objects: dict[int, MemObject] = {}
    self._ranges: list[tuple[int, int, int]] = []      # sorted (va, end, id) of mapped objects
    self._pages: dict[int, tuple] = {}                 # page (va >> 12) -> (va, end, object) found there (see find)
    self.contexts: dict[int, Context] = {}
    self._next_obj, self._next_ctx = 1, 1
    self.queue: list = []                              # (context, timestamp, [(ib va, bytes)]) in submission order
    self.blocked = False                               # the CP waits on memory (CP_WAIT_REG_MEM)
    self.guard_page = False                            # objects get a guard page after them (mmapsize = size + 4 KiB)
    self.hang_timeout_s = HANG_TIMEOUT_S               # a dispatch running longer is a GPU hang (the context faults)
    self.sync_check = "strict"                         # ir3 sync flags and delay slots: "strict", "poison", "off"
    from .cp import CommandProcessor
    self.cp = CommandProcessor(self, chip_id)

  # ---- MockOS hooks
  def attach(self, os) -> None:
    from ..vfs import DeviceNode
    os.vfs.add(PATH, DeviceNode(lambda path, flags: KGSLFile(self, path, flags)))
    os.vfs.mkdir("/sys/class/kgsl/kgsl-3d0")
    os.vfs.add_file("/sys/class/kgsl/kgsl-3d0/gpu_model", f"Adreno{self.gpu_id}v{self.chip_id & 0xFF}\n")
    os.register_engine(self)

  @property
  def gpu_id(self) -> int:
    """What KGSL reports as the gpu id (its gpurev: 630, 730, 740): from Mesa's device table (hcq.autogen.qcom.devices;
    an entry known by chip id only is named "FD<gpu id>", freedreno_devices.py GPUId), else the chip id's core,
    major and minor bytes as digits."""
    from ...autogen.qcom.devices import DEVICES
    d = DEVICES.lookup(self.chip_id)
    if d is not None and d.gpu_id: return d.gpu_id
    if d is not None and d.name[:2] == "FD" and d.name[2:].isdigit(): return int(d.name[2:])
    return (self.chip_id >> 24 & 0xFF) * 100 + (self.chip_id >> 16 & 0xFF) * 10 + (self.chip_id >> 8 & 0xFF)

  @property
  def may_progress(self) -> bool: return bool(self.queue)

  def close(self) -> None:
    self.queue.clear()
    self.os.unregister_engine(self)

  # ---- memory the GPU may touch
  def find(self, va: int, size: int = 1) -> MemObject | None:
    """The mapped object holding [va, va + size), None when no object does (the GPU faults there). The object found
    for an address is kept by the address's page (a launch touches a few objects, each at a few places); the pages
    are forgotten when an object is mapped or freed, and only objects are kept, never a miss."""
    hit = self._pages.get(va >> 12)
    if hit is not None and hit[0] <= va and va + size <= hit[1]: return hit[2]
    i = bisect.bisect_right(self._ranges, (va, 1 << 64, 0)) - 1
    if i < 0: return None
    start, end, oid = self._ranges[i]
    if va + size > end: return None
    obj = self.objects[oid]
    if len(self._pages) >= 4096: self._pages.clear()
    self._pages[va >> 12] = (start, end, obj)      # (a lookup tests the range again: a page may hold two objects)
    return obj

  def check(self, va: int, size: int, what: str) -> None:
    hit = self._pages.get(va >> 12)       # find()'s object for this page, tested here first (no call)
    if hit is not None and hit[0] <= va and va + size <= hit[1]: return
    if self.find(va, size) is None:
      raise GPUFault(f"{what}: {size} bytes at {va:#x} are outside every memory object", address=va, kind="page fault")

  # ---- dispatch
  def ioctl(self, file, request: int, arg) -> int:
    desc, handler = self._handlers.get(request) or (None, None)
    if desc is None: raise OSCallError("ioctl", file.path, errno.ENOTTY, f"request {request:#x} is not a KGSL ioctl")
    if handler is None: raise OSCallError("ioctl", file.path, errno.EINVAL, f"{desc.name} is not modelled")
    if not isinstance(arg, desc.struct):
      raise OSCallError("ioctl", file.path, errno.EFAULT, f"{desc.name} takes {desc.struct.__name__}")
    handler(file, arg)
    return 0

  def _fail(self, file, name: str, err: int, why: str):
    raise OSCallError("ioctl", file.path, err, f"IOCTL_KGSL_{name}: {why}")

  def _context(self, file, name: str, cid: int) -> Context:
    ctx = self.contexts.get(cid)
    if ctx is None: self._fail(file, name, errno.EINVAL, f"no context {cid}")
    return ctx

  # ---- properties
  def _DEVICE_GETPROPERTY(self, file, a) -> None:
    K = self.K
    if a.type == K.KGSL_PROP_DEVICE_INFO:
      info = self._prop_struct(file, a, K.struct_kgsl_devinfo)
      info.device_id, info.chip_id, info.mmu_enabled = 1, self.chip_id, 1
      info.gpu_id, info.gmem_sizebytes = self.gpu_id, GMEM_A630
    elif a.type == K.KGSL_PROP_GPU_RESET_STAT:
      v = self._prop_struct(file, a, ctypes.c_uint32)
      ctx = self._context(file, "DEVICE_GETPROPERTY", v.value)
      v.value, ctx.reset_status = ctx.reset_status, 0
    elif a.type == K.KGSL_PROP_CONTEXT_PROPERTY:
      p = self._prop_struct(file, a, K.struct_kgsl_context_property)
      ctx = self._context(file, "DEVICE_GETPROPERTY", p.contextid)
      if p.type != K.KGSL_CONTEXT_PROP_FAULTS or p.size != ctypes.sizeof(K.struct_kgsl_context_property_fault):
        self._fail(file, "DEVICE_GETPROPERTY", errno.EINVAL, f"context property {p.type} of {p.size} bytes")
      f = K.struct_kgsl_context_property_fault.from_address(p.data)
      f.faults, f.timestamp = ctx.faults, ctx.fault_timestamp
    else: self._fail(file, "DEVICE_GETPROPERTY", errno.EINVAL, f"property {a.type} is not modelled")

  def _prop_struct(self, file, a, cls):
    if a.sizebytes != ctypes.sizeof(cls) or not a.value:
      self._fail(file, "DEVICE_GETPROPERTY", errno.EINVAL, f"property {a.type} needs {ctypes.sizeof(cls)} bytes, "
                                                           f"got {a.sizebytes} at {a.value or 0:#x}")
    return cls.from_address(a.value)

  # ---- memory
  def _GPUMEM_ALLOC_ID(self, file, a) -> None:
    if a.size == 0 or a.size > MAX_OBJECT:
      self._fail(file, "GPUMEM_ALLOC_ID", errno.EINVAL, f"size {a.size:#x}")
    size = (a.size + 0xFFF) & ~0xFFF
    obj = MemObject(self._next_obj, size, a.flags, mmapsize=size + (0x1000 if self.guard_page else 0))
    self._next_obj += 1
    self.objects[obj.id] = obj
    a.id, a.size, a.mmapsize, a.gpuaddr = obj.id, size, obj.mmapsize, 0

  def _GPUMEM_FREE_ID(self, file, a) -> None:
    obj = self.objects.pop(a.id, None)
    if obj is None: self._fail(file, "GPUMEM_FREE_ID", errno.EINVAL, f"no memory object {a.id}")
    self._pages.clear()
    if obj.va:     # its one entry, found by address (a walk over every range made freeing n objects quadratic)
      i = bisect.bisect_left(self._ranges, (obj.va, obj.va + obj.size, obj.id))
      if i < len(self._ranges) and self._ranges[i][2] == obj.id: del self._ranges[i]

  def mmap(self, path: str, size: int, offset: int, addr) -> int:
    obj = self.objects.get(offset >> 12)
    if obj is None or offset & 0xFFF: raise OSCallError("mmap", path, errno.EINVAL, f"offset {offset:#x} names no memory object")
    if obj.va: raise OSCallError("mmap", path, errno.EBUSY, f"memory object {obj.id} is mapped already")
    if size != obj.mmapsize:
      raise OSCallError("mmap", path, errno.EINVAL, f"memory object {obj.id} maps {obj.mmapsize:#x} bytes (mmapsize), not {size:#x}")
    obj.va = self.os.memory.alloc(size, addr, shared=True, what=f"kgsl memory object {obj.id}")
    bisect.insort(self._ranges, (obj.va, obj.va + size, obj.id))
    self._pages.clear()
    return obj.va

  # ---- contexts and submissions
  def _DRAWCTXT_CREATE(self, file, a) -> None:
    ctx = Context(self._next_ctx, a.flags)
    self._next_ctx += 1
    self.contexts[ctx.id] = ctx
    a.drawctxt_id = ctx.id

  def _DRAWCTXT_DESTROY(self, file, a) -> None:
    ctx = self._context(file, "DRAWCTXT_DESTROY", a.drawctxt_id)
    self.queue = [q for q in self.queue if q[0] is not ctx]
    del self.contexts[ctx.id]

  def _GPU_COMMAND(self, file, a) -> None:
    ctx = self.contexts.get(a.context_id) or self._context(file, "GPU_COMMAND", a.context_id)
    if ctx.invalid: self._fail(file, "GPU_COMMAND", errno.EDEADLK, f"context {ctx.id} faulted ({ctx.fault_reason})")
    numcmds, cmdsize, cmdlist = a.numcmds, a.cmdsize, a.cmdlist
    if numcmds == 0 or cmdsize != self._cmd_size or not cmdlist:
      self._fail(file, "GPU_COMMAND", errno.EINVAL, f"{numcmds} command object(s) of {cmdsize} bytes")
    ibs, IB = [], self.K.KGSL_CMDLIST_IB
    for i in range(numcmds):
      c = self._cmd_object.from_address(cmdlist + i * cmdsize)
      if c.flags & IB:
        va, size = c.gpuaddr, c.size
        if size == 0 or size % 4 or self.find(va, size) is None:
          self._fail(file, "GPU_COMMAND", errno.EINVAL, f"command object {i}: {size} bytes at {va:#x} are not "
                                                        f"dwords inside a memory object")
        ibs.append((va, size))
    ctx.timestamp += 1
    a.timestamp = ctx.timestamp
    self.queue.append((ctx, ctx.timestamp, ibs))
    self.os.tick_kicked(self)          # the submission is the doorbell: polled alone while the other engines idle

  def _DEVICE_WAITTIMESTAMP_CTXTID(self, file, a) -> None:
    ctx = self._context(file, "DEVICE_WAITTIMESTAMP_CTXTID", a.context_id)
    end = time.monotonic() + a.timeout / 1000
    while True:
      if ctx.invalid:
        self._fail(file, "DEVICE_WAITTIMESTAMP_CTXTID", errno.EDEADLK, f"context {ctx.id} faulted ({ctx.fault_reason})")
      if ctx.retired >= a.timestamp: return
      if time.monotonic() >= end:
        never = f" (not issued yet: the last is {ctx.timestamp})" if a.timestamp > ctx.timestamp else ""
        self._fail(file, "DEVICE_WAITTIMESTAMP_CTXTID", errno.ETIMEDOUT,
                   f"timestamp {a.timestamp} on context {ctx.id}{never}")
      if not self.poll(): time.sleep(min(1e-3, max(end - time.monotonic(), 0)))

  # ---- the GPU: runs submissions in order
  def poll(self) -> bool:
    """Run queued submissions until they are done or the CP waits on memory; True when anything progressed."""
    progress = False
    while self.queue:
      ctx, ts, ibs = self.queue[0]
      try: done = self.cp.run(ctx, ibs)
      except (GPUFault, QueueError) as e:
        self._fault(ctx, ts, str(e))
        progress = True
        continue
      self.blocked = not done
      if not done: return progress or self.cp.moved
      self.queue.pop(0)
      ctx.retired = ts
      progress = True
    return progress

  def _fault(self, ctx: Context, ts: int, reason: str) -> None:
    """The context's work faulted: KGSL resets the GPU and invalidates the guilty context (its queued work is
    dropped); the fault count and timestamp are kept for CONTEXT_PROPERTY."""
    ctx.invalid, ctx.faults, ctx.fault_timestamp = True, ctx.faults + 1, ts
    ctx.reset_status, ctx.fault_reason = self.K.KGSL_CTX_STAT_GUILTY_CONTEXT_RESET_EXT, reason
    self.queue = [q for q in self.queue if q[0] is not ctx]
    self.cp.reset()
