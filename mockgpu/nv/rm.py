"""The nvidia.ko model: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm as one process sees them.

RM (resource manager) escapes (shared/reference/nv_qcom_usb_pci_smi.md 1.1-1.4): ioctl requests _IOWR('F', nr, size)
whose argument carries an NV status the caller checks; the ioctl itself fails (EINVAL, ENOTTY) only for a malformed
request, as the unix layer of nvidia.ko does. Objects live in clients: (client, handle) -> RMObject with its class
and parent. An allocation names its client (hRoot), parent and class:
  - an unknown client is NV_ERR_INVALID_CLIENT, an unknown parent NV_ERR_INVALID_OBJECT_PARENT, a class the GPU does
    not list (NV0080_CTRL_CMD_GPU_GET_CLASSLIST) NV_ERR_INVALID_CLASS, a parent of the wrong class
    NV_ERR_INVALID_OBJECT_PARENT, a handle in use NV_ERR_INSERT_DUPLICATE_NAME;
  - a control on an unknown object is NV_ERR_INVALID_OBJECT_HANDLE, an unknown command (or one for another class)
    NV_ERR_NOT_SUPPORTED, a wrong paramsSize NV_ERR_INVALID_PARAM_STRUCT; a free of an unknown object
    NV_ERR_OBJECT_NOT_FOUND. Freeing an object frees its children.
Memory: vidmem (NV1_MEMORY_USER) and uncached sysmem (NV01_MEMORY_SYSTEM) objects get host memory when first mapped,
at the address the caller reserved through the OS interface: CPU mappings (RM_MAP_MEMORY on the ctl fd with a
registered device fd, then mmap of that fd) and GPU mappings (RM_MAP_MEMORY_DMA at a fixed dmaOffset) must use the
same address (GPU VA == host VA in the mock). OS descriptors (RM_ALLOC_MEMORY, class 0x71) register host memory, and
are mapped to the GPU at their CPU address. The usermode object's CPU mapping is the doorbell page (gpu.py).
UVM: the request is the plain number, the status is rmStatus; REGISTER_GPU checks the UUID, REGISTER_GPU_VASPACE and
REGISTER_CHANNEL the handles, MAP_EXTERNAL_ALLOCATION needs a range made by CREATE_EXTERNAL_RANGE.
"""
from __future__ import annotations

import ctypes
import errno
import itertools
import threading

from ...errors import GPUFault, OSCallError
from ..files import MockFile
from ..intervals import Intervals
from . import abi
from .gpu import Channel

PAGE = 0x1000
NV_ERR = {name: code for code, name in abi.NV_STATUS_NAMES.items()}
# the classes an object's parent may have
GPFIFO = abi.GPFIFO_CLASSES
PARENTS = {abi.NV01_DEVICE_0: (abi.NV01_ROOT_CLIENT,), abi.NV20_SUBDEVICE_0: (abi.NV01_DEVICE_0,),
           abi.NV01_MEMORY_VIRTUAL: (abi.NV01_DEVICE_0,), abi.FERMI_VASPACE_A: (abi.NV01_DEVICE_0,),
           abi.KEPLER_CHANNEL_GROUP_A: (abi.NV01_DEVICE_0,), abi.FERMI_CONTEXT_SHARE_A: (abi.KEPLER_CHANNEL_GROUP_A,),
           abi.NV1_MEMORY_USER: (abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0),
           abi.NV01_MEMORY_SYSTEM: (abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0),
           abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: (abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0)}
for _c in abi.USERMODE_CLASSES: PARENTS[_c] = (abi.NV20_SUBDEVICE_0,)
for _c in GPFIFO: PARENTS[_c] = (abi.KEPLER_CHANNEL_GROUP_A, abi.NV01_DEVICE_0)
for _c in abi.COMPUTE_CLASSES + abi.COPY_CLASSES: PARENTS[_c] = GPFIFO
MEMORY_CLASSES = (abi.NV1_MEMORY_USER, abi.NV01_MEMORY_SYSTEM, abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
# controls: command -> (class family the object must have: cmd >> 16 names it, params struct)
CONTROL_FAMILIES = {0x0000: (abi.NV01_ROOT_CLIENT,), 0x0080: (abi.NV01_DEVICE_0,), 0x2080: (abi.NV20_SUBDEVICE_0,),
                    0xC36F: GPFIFO, 0xA06C: (abi.KEPLER_CHANNEL_GROUP_A,)}


class RMStatus(Exception):
  def __init__(self, name: str, detail: str = ""):
    self.status, self.detail = NV_ERR[name], detail


class RMObject:
  __slots__ = ("client", "handle", "cls", "parent", "gpu", "size", "va", "kind", "channel", "children", "data")

  def __init__(self, client: int, handle: int, cls: int, parent: "RMObject | None", gpu):
    self.client, self.handle, self.cls, self.parent, self.gpu = client, handle, cls, parent, gpu
    self.size, self.va, self.kind, self.channel, self.data = 0, None, None, None, {}
    self.children: list[RMObject] = []


def _readable(addr: int, size: int) -> bool:
  from ..amd.kfd import _readable as check   # the kernel's copy_from_user check (a pipe write), shared with KFD
  return check(addr, size)


class NVFile(MockFile):
  def __init__(self, model, path, flags, gpu=None):
    super().__init__(path, flags)
    self.model, self.gpu = model, gpu
    self.registered = False            # REGISTER_FD made it a mapping fd of the ctl fd
    self.pending_map: tuple | None = None

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.model.ioctl(self, request, arg)

  def mmap(self, size, offset=0, prot=None, flags=None, addr=None):
    self._check_open("mmap")
    return self.model.mmap(self, size, offset, addr)


class UVMFile(MockFile):
  def __init__(self, model, path, flags):
    super().__init__(path, flags)
    self.model = model

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.model.uvm_ioctl(self, request, arg)


class RMModel:
  def __init__(self, os, gpus: list):
    self.os, self.gpus = os, gpus
    self.lock = threading.RLock()
    self.objects: dict[tuple[int, int], RMObject] = {}
    self._client_handles = itertools.count(0xC1D00000)
    self._rm_handles = itertools.count(0xCF000000)
    self.files: dict[int, NVFile] = {}
    self.uvm_initialized = False
    self.uvm_gpus: set[bytes] = set()
    self.uvm_ranges: dict[int, list] = {}     # base -> [length, memory object or None]
    self.uvm_index = Intervals()               # the same ranges by address: an overlap check is O(log n)
    self.vidmem_used: dict[int, int] = {}      # id(gpu) -> bytes of NV1_MEMORY_USER objects (no walk per allocation)
    self.escapes = {abi.NV_ESC_RM_ALLOC: (abi.NVOS21, self._alloc), abi.NV_ESC_RM_FREE: (abi.NVOS00, self._free),
                    abi.NV_ESC_RM_CONTROL: (abi.NVOS54, self._control),
                    abi.NV_ESC_RM_ALLOC_MEMORY: (abi.NVOS02_FD, self._alloc_memory),
                    abi.NV_ESC_RM_MAP_MEMORY: (abi.NVOS33_FD, self._map_memory),
                    abi.NV_ESC_RM_MAP_MEMORY_DMA: (abi.NVOS46_580, self._map_memory_dma),
                    abi.NV_ESC_CARD_INFO: (abi.CARD_INFO_ARRAY, self._card_info),
                    abi.NV_ESC_REGISTER_FD: (abi.REGISTER_FD, self._register_fd)}
    self.uvm = {abi.UVM_INITIALIZE: (abi.UVM_INITIALIZE_PARAMS, self._uvm_initialize),
                abi.UVM_MM_INITIALIZE: (abi.UVM_MM_INITIALIZE_PARAMS, lambda f, a: None),
                abi.UVM_REGISTER_GPU: (abi.UVM_REGISTER_GPU_PARAMS, self._uvm_register_gpu),
                abi.UVM_REGISTER_GPU_VASPACE: (abi.UVM_REGISTER_GPU_VASPACE_PARAMS, self._uvm_register_vaspace),
                abi.UVM_REGISTER_CHANNEL: (abi.UVM_REGISTER_CHANNEL_PARAMS, self._uvm_register_channel),
                abi.UVM_CREATE_EXTERNAL_RANGE: (abi.UVM_CREATE_EXTERNAL_RANGE_PARAMS, self._uvm_create_range),
                abi.UVM_MAP_EXTERNAL_ALLOCATION: (abi.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, self._uvm_map_external),
                abi.UVM_FREE: (abi.UVM_FREE_PARAMS, self._uvm_free)}

  # ---- nodes
  def attach(self, os) -> None:
    from ..vfs import DeviceNode
    os.vfs.add("/dev/nvidiactl", DeviceNode(lambda path, flags: self._open(path, flags, None)))
    os.vfs.add("/dev/nvidia-uvm", DeviceNode(lambda path, flags: UVMFile(self, path, flags)))
    for g in self.gpus:
      os.vfs.add(f"/dev/nvidia{g.index}", DeviceNode(lambda path, flags, g=g: self._open(path, flags, g)))

  def _open(self, path, flags, gpu):
    f = NVFile(self, path, flags, gpu)
    self.files[f.fd] = f
    return f

  # ---- dispatch
  def ioctl(self, file: NVFile, request: int, arg) -> int:
    nr, magic, size = request & 0xFF, (request >> 8) & 0xFF, (request >> 16) & 0x3FFF
    if magic != abi.NV_IOCTL_MAGIC or (request >> 30) != 3 or nr not in self.escapes:
      raise OSCallError("ioctl", file.path, errno.ENOTTY, f"request {request:#x} is not an nvidia.ko escape")
    struct, handler = self.escapes[nr]
    name = abi.ESCAPE_NAMES.get(nr, hex(nr))
    if size != ctypes.sizeof(struct):
      raise OSCallError("ioctl", file.path, errno.EINVAL, f"{name}: argument of {size} bytes, the driver takes "
                        f"{ctypes.sizeof(struct)}")
    view = memoryview(arg).cast("B")
    if view.nbytes < size: raise OSCallError("ioctl", file.path, errno.EFAULT, f"{name}: argument of {view.nbytes} bytes")
    a = struct.from_buffer(arg)
    with self.lock:
      try: handler(file, a)
      except RMStatus as e:
        if hasattr(a, "status"): a.status = e.status
        else: raise OSCallError("ioctl", file.path, errno.EINVAL, f"{name}: {e.detail}") from None
    return 0

  def uvm_ioctl(self, file, request: int, arg) -> int:
    if request not in self.uvm:
      raise OSCallError("ioctl", file.path, errno.ENOTTY, f"request {request:#x} is not a UVM ioctl the mock models")
    struct, handler = self.uvm[request]
    if memoryview(arg).nbytes < ctypes.sizeof(struct):
      raise OSCallError("ioctl", file.path, errno.EFAULT, f"{abi.UVM_NAMES[request]}: argument too small")
    a = struct.from_buffer(arg)
    with self.lock:
      if request not in (abi.UVM_INITIALIZE, abi.UVM_MM_INITIALIZE) and not self.uvm_initialized:
        a.rmStatus = NV_ERR["NV_ERR_ILLEGAL_ACTION"]
        return 0
      try:
        handler(file, a)
        a.rmStatus = 0
      except RMStatus as e: a.rmStatus = e.status
    return 0

  # ---- objects
  def _obj(self, client: int, handle: int, err: str = "NV_ERR_INVALID_OBJECT_HANDLE") -> RMObject:
    o = self.objects.get((client, handle))
    if o is None: raise RMStatus(err, f"no object {handle:#x} in client {client:#x}")
    return o

  def _params(self, ptr: int, struct, cls: int):
    if not ptr: raise RMStatus("NV_ERR_INVALID_POINTER", f"{abi.class_name(cls)} needs allocation parameters")
    if not _readable(ptr, ctypes.sizeof(struct)): raise RMStatus("NV_ERR_INVALID_POINTER", f"parameters at {ptr:#x}")
    return struct.from_address(ptr)

  def _alloc(self, file, a) -> None:
    cls = a.hClass
    if cls == abi.NV01_ROOT_CLIENT:
      handle = a.hObjectNew or next(self._client_handles)
      if (handle, handle) in self.objects: raise RMStatus("NV_ERR_INSERT_DUPLICATE_NAME", f"client {handle:#x}")
      self.objects[(handle, handle)] = RMObject(handle, handle, cls, None, None)
      a.hObjectNew, a.status = handle, 0
      return
    client = a.hRoot
    if (client, client) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {client:#x}")
    parent = self._obj(client, a.hObjectParent, "NV_ERR_INVALID_OBJECT_PARENT")
    gpu = parent.gpu
    if cls == abi.NV01_DEVICE_0:
      p = self._params(a.pAllocParms, abi.NV0080_ALLOC_PARAMETERS, cls)
      if p.deviceId >= len(self.gpus): raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"deviceId {p.deviceId}")
      gpu = self.gpus[p.deviceId]
    if gpu is not None and cls not in gpu.props.classes:
      raise RMStatus("NV_ERR_INVALID_CLASS", f"{abi.class_name(cls)} is not in {gpu.props.chip}'s class list")
    if cls not in PARENTS: raise RMStatus("NV_ERR_INVALID_CLASS", f"{abi.class_name(cls)} is not modelled")
    if parent.cls not in PARENTS[cls]:
      raise RMStatus("NV_ERR_INVALID_OBJECT_PARENT", f"{abi.class_name(cls)} under {abi.class_name(parent.cls)}")
    handle = a.hObjectNew or next(self._rm_handles)
    if (client, handle) in self.objects: raise RMStatus("NV_ERR_INSERT_DUPLICATE_NAME", f"handle {handle:#x}")
    o = RMObject(client, handle, cls, parent, gpu)
    self._construct(o, a)
    self.objects[(client, handle)] = o
    parent.children.append(o)
    a.hObjectNew, a.status = handle, 0

  def _construct(self, o: RMObject, a) -> None:
    cls, gpu = o.cls, o.gpu
    if cls in (abi.NV1_MEMORY_USER, abi.NV01_MEMORY_SYSTEM):
      p = self._params(a.pAllocParms, abi.NV_MEMORY_ALLOCATION_PARAMS, cls)
      if p.size == 0 or p.size % PAGE: raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"size {p.size:#x}")
      if cls == abi.NV1_MEMORY_USER:
        used = self.vidmem_used.get(id(gpu), 0)
        if used + p.size > gpu.props.vram_size: raise RMStatus("NV_ERR_NO_MEMORY", f"{p.size:#x} bytes of vidmem")
        self.vidmem_used[id(gpu)] = used + p.size
      o.size, o.kind = p.size, "vidmem" if cls == abi.NV1_MEMORY_USER else "sysmem"
    elif cls == abi.FERMI_CONTEXT_SHARE_A:
      p = self._params(a.pAllocParms, abi.NV_CTXSHARE_ALLOCATION_PARAMETERS, cls)
      vas = self._obj(o.client, p.hVASpace)
      if vas.cls != abi.FERMI_VASPACE_A: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hVASpace {p.hVASpace:#x}")
    elif cls in GPFIFO:
      self._construct_channel(o, self._params(a.pAllocParms, abi.NV_CHANNEL_ALLOC_PARAMS, cls))
    elif cls in abi.COMPUTE_CLASSES + abi.COPY_CLASSES:
      ch = o.parent.channel
      if any(c.cls == cls for c in o.parent.children): raise RMStatus("NV_ERR_INVALID_ARGUMENT", "one object per class")
      ch.objects[cls] = o.handle

  def _memory_va(self, client: int, handle: int, offset: int, size: int, what: str) -> int:
    mem = self._obj(client, handle)
    if mem.cls not in MEMORY_CLASSES: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"{what} {handle:#x} is not memory")
    if mem.va is None: raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"{what} {handle:#x} is not mapped to the GPU")
    if offset + size > mem.size: raise RMStatus("NV_ERR_INVALID_OFFSET", f"{what}: {offset:#x}+{size:#x} past its end")
    return mem.va + offset

  def _construct_channel(self, o: RMObject, p) -> None:
    if p.gpFifoEntries < 2 or p.gpFifoEntries & (p.gpFifoEntries - 1):
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"gpFifoEntries {p.gpFifoEntries} is not a power of two")
    if p.hContextShare:
      ctx = self._obj(o.client, p.hContextShare)
      if ctx.cls != abi.FERMI_CONTEXT_SHARE_A: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", "hContextShare")
    if p.hObjectBuffer: self._memory_va(o.client, p.hObjectBuffer, 0, 0, "hObjectBuffer")   # must be mapped memory
    userd = self._memory_va(o.client, p.hUserdMemory[0], p.userdOffset[0], 0x200, "hUserdMemory[0]")
    notifier = self._memory_va(o.client, p.hObjectError, 0, 32, "hObjectError")
    gpu = o.gpu
    try: gpu.check(p.gpFifoOffset, 8 * p.gpFifoEntries, "GPFIFO ring")
    except GPUFault: raise RMStatus("NV_ERR_INVALID_ADDRESS", f"gpFifoOffset {p.gpFifoOffset:#x} is not mapped") from None
    token = len([x for x in self.objects.values() if x.cls in GPFIFO and x.gpu is gpu])
    o.channel = Channel(gpu, o.handle, token, p.gpFifoOffset, p.gpFifoEntries, userd, notifier, {})
    gpu.add_channel(o.channel)

  def _free(self, file, a) -> None:
    client = a.hRoot
    if (client, client) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {client:#x}")
    o = self._obj(client, a.hObjectOld, "NV_ERR_OBJECT_NOT_FOUND")
    self._destroy(o)
    if o.parent is not None and o in o.parent.children: o.parent.children.remove(o)
    a.status = 0

  def _destroy(self, o: RMObject) -> None:
    for c in list(o.children): self._destroy(c)
    o.children.clear()
    if o.channel is not None: o.gpu.remove_channel(o.channel)
    if o.data.get("gpu_mapped"):
      try: o.gpu.unmap_range(o.va)
      except KeyError: pass
    if self.objects.pop((o.client, o.handle), None) is not None and o.cls == abi.NV1_MEMORY_USER:
      self.vidmem_used[id(o.gpu)] -= o.size

  # ---- controls
  def _control(self, file, a) -> None:
    if (a.hClient, a.hClient) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {a.hClient:#x}")
    o = self._obj(a.hClient, a.hObject)
    family = a.cmd >> 16
    handler = getattr(self, f"_ctrl_{a.cmd:x}", None)
    if handler is None or family not in CONTROL_FAMILIES:
      raise RMStatus("NV_ERR_NOT_SUPPORTED", f"control {a.cmd:#x}")
    if o.cls not in CONTROL_FAMILIES[family]:
      raise RMStatus("NV_ERR_NOT_SUPPORTED", f"control {a.cmd:#x} on {abi.class_name(o.cls)}")
    struct = handler.__annotations__.get("p")
    struct = getattr(abi, struct.strip("\"'")) if isinstance(struct, str) else struct
    if a.paramsSize != ctypes.sizeof(struct):
      raise RMStatus("NV_ERR_INVALID_PARAM_STRUCT", f"paramsSize {a.paramsSize}, {ctypes.sizeof(struct)} expected")
    if not _readable(a.params, a.paramsSize): raise RMStatus("NV_ERR_INVALID_POINTER", f"params at {a.params:#x}")
    handler(o, struct.from_address(a.params))
    a.status = 0

  def _ctrl_13e(self, o, p: "NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS"):
    p.driverVersionBuffer = self.gpus[0].props.driver_version.encode()
    p.versionBuffer = p.driverVersionBuffer

  def _ctrl_205(self, o, p: "NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS"):
    for g in self.gpus:
      if gpu_id(g) == p.gpuId:
        p.deviceInstance, p.subDeviceInstance = g.index, 0
        return
    raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"gpuId {p.gpuId:#x}")

  def _ctrl_800201(self, o, p: "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS"):
    """classList 0: the count; else the list (numClasses entries at the pointer)."""
    classes = o.gpu.props.classes
    if p.classList:
      if p.numClasses < len(classes): raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"numClasses {p.numClasses}")
      if not _readable(p.classList, 4 * len(classes)): raise RMStatus("NV_ERR_INVALID_POINTER", "classList")
      (ctypes.c_uint32 * len(classes)).from_address(p.classList)[:] = list(classes)
    p.numClasses = len(classes)

  def _ctrl_2080014a(self, o, p: "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS"):
    p.length = 16
    for i, b in enumerate(o.gpu.uuid): p.data[i] = b

  def _ctrl_20801201(self, o, p: "NV2080_CTRL_GR_GET_INFO_PARAMS"):
    n = p.grInfoListSize
    if n > 64 or not _readable(p.grInfoList, 8 * n): raise RMStatus("NV_ERR_INVALID_POINTER", "grInfoList")
    props = o.gpu.props
    values = {abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: props.gpcs,
              abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: props.tpc_per_gpc,
              abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: props.sm_per_tpc,
              abi.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: props.max_warps_per_sm,
              abi.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: props.sm_version}
    for e in (abi.NV2080_CTRL_GR_INFO * n).from_address(p.grInfoList):
      if e.index not in values: raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"GR info index {e.index:#x}")
      e.data = values[e.index]

  def _ctrl_c36f0108(self, o, p: "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS"):
    p.workSubmitToken = o.channel.token

  def _ctrl_a06c0101(self, o, p: "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS"):
    o.data["scheduled"] = bool(p.bEnable)

  # ---- memory
  def _alloc_memory(self, file, a) -> None:
    if a.hClass != abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
      raise RMStatus("NV_ERR_INVALID_CLASS", f"RM_ALLOC_MEMORY of {abi.class_name(a.hClass)}")
    client = a.hRoot
    if (client, client) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {client:#x}")
    parent = self._obj(client, a.hObjectParent, "NV_ERR_INVALID_OBJECT_PARENT")
    if parent.cls not in PARENTS[a.hClass]:
      raise RMStatus("NV_ERR_INVALID_OBJECT_PARENT", f"OS descriptor under {abi.class_name(parent.cls)}")
    size = a.limit + 1
    host = self.os.memory.find(a.pMemory)
    if a.pMemory % PAGE or host is None or a.pMemory + size > host[0] + host[1] or "(reserved)" in host[2]:
      raise RMStatus("NV_ERR_INVALID_ADDRESS", f"pMemory {a.pMemory:#x}+{size:#x} is not host memory of this process")
    handle = a.hObjectNew or next(self._rm_handles)
    if (client, handle) in self.objects: raise RMStatus("NV_ERR_INSERT_DUPLICATE_NAME", f"handle {handle:#x}")
    o = RMObject(client, handle, a.hClass, parent, parent.gpu)
    o.size, o.va, o.kind = size, a.pMemory, "host"
    self.objects[(client, handle)] = o
    parent.children.append(o)
    a.hObjectNew, a.status = handle, 0

  def _back(self, o: RMObject, va: int, what: str) -> None:
    """Give a vidmem/sysmem object its memory at va (its first mapping), or check va is where it lives."""
    if o.va is not None:
      if o.va != va:
        raise RMStatus("NV_ERR_INVALID_OFFSET", f"{what} at {va:#x}: the mock maps memory {o.handle:#x} only at "
                                                f"{o.va:#x} (GPU VA == CPU VA)")
      return
    host = self.os.memory.find(va)
    if va % PAGE or host is None or va + o.size > host[0] + host[1]:
      raise RMStatus("NV_ERR_INVALID_ADDRESS", f"{what} at {va:#x}+{o.size:#x}: not inside memory reserved through "
                                               f"the OS interface")
    self.os.memory.replace(va, o.size, f"{o.gpu.name} {o.kind} {o.handle:#x}")
    o.va = va

  def _map_memory(self, file, a) -> None:
    if (a.hClient, a.hClient) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {a.hClient:#x}")
    o = self._obj(a.hClient, a.hMemory)
    target = self.files.get(a.fd)
    if target is None or target.closed or target.gpu is None or not target.registered:
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"fd {a.fd} is not a registered /dev/nvidiaN fd")
    if o.cls in abi.USERMODE_CLASSES: size = 0x10000
    elif o.cls in MEMORY_CLASSES: size = o.size
    else: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"{abi.class_name(o.cls)} cannot be mapped")
    if a.offset + a.length > size: raise RMStatus("NV_ERR_INVALID_LIMIT", f"{a.offset:#x}+{a.length:#x} > {size:#x}")
    target.pending_map = (o, a.offset, a.length)
    a.pLinearAddress, a.status = 0, 0

  def mmap(self, file: NVFile, size: int, offset: int, addr: int | None) -> int:
    if file.pending_map is None:
      raise OSCallError("mmap", file.path, errno.EINVAL, "no RM_MAP_MEMORY was made for this fd")
    o, off, length = file.pending_map
    file.pending_map = None
    if size != length: raise OSCallError("mmap", file.path, errno.EINVAL, f"size {size:#x} != mapped length {length:#x}")
    with self.lock:
      if o.cls in abi.USERMODE_CLASSES:
        va = self.os.memory.alloc(size, addr, shared=True, what=f"{o.gpu.name} usermode page")
        o.gpu.set_usermode(va)
        o.va = va
        return va
      if addr is None: raise OSCallError("mmap", file.path, errno.EINVAL, "the mock maps memory objects at a fixed address")
      try: self._back(o, addr - off, "CPU mapping")
      except RMStatus as e: raise OSCallError("mmap", file.path, errno.EINVAL, e.detail) from None
      return addr

  def _map_memory_dma(self, file, a) -> None:
    if (a.hClient, a.hClient) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {a.hClient:#x}")
    dma = self._obj(a.hClient, a.hDma)
    if dma.cls != abi.NV01_MEMORY_VIRTUAL: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hDma {a.hDma:#x} is not virtual memory")
    o = self._obj(a.hClient, a.hMemory)
    if o.cls not in MEMORY_CLASSES: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hMemory {a.hMemory:#x} is not memory")
    if not a.flags & abi.NVOS46_FLAGS_DMA_OFFSET_FIXED:
      raise RMStatus("NV_ERR_INVALID_FLAGS", "the mock maps at a fixed dmaOffset only")
    if a.offset != 0 or a.length != o.size:
      raise RMStatus("NV_ERR_INVALID_LIMIT", f"offset {a.offset:#x} length {a.length:#x} (whole objects only)")
    if o.data.get("gpu_mapped"): raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"memory {o.handle:#x} is mapped already")
    self._back(o, a.dmaOffset, "GPU mapping")
    try: o.gpu.map_range(o.va, o.size)
    except ValueError as e: raise RMStatus("NV_ERR_INVALID_ADDRESS", str(e)) from None
    o.data["gpu_mapped"] = True
    a.status = 0

  def _card_info(self, file, a) -> None:
    for i, g in enumerate(self.gpus):
      c = a[i]
      c.valid, c.gpu_id, c.minor_number = 1, gpu_id(g), g.index
      c.pci_info.domain, c.pci_info.bus, c.pci_info.vendor_id, c.pci_info.device_id = 0, 0x40 + g.index, 0x10DE, g.props.device_id
      c.fb_size = g.props.vram_size

  def _register_fd(self, file, a) -> None:
    ctl = self.files.get(a.ctl_fd)
    if ctl is None or ctl.gpu is not None: raise OSCallError("ioctl", file.path, errno.EINVAL, f"fd {a.ctl_fd} is not /dev/nvidiactl")
    file.registered = True

  # ---- UVM
  def _uvm_initialize(self, file, a) -> None: self.uvm_initialized = True

  def _gpu_by_uuid(self, uuid) -> object:
    for g in self.gpus:
      if bytes(uuid) == g.uuid: return g
    raise RMStatus("NV_ERR_INVALID_DEVICE", f"no GPU with UUID {bytes(uuid).hex()}")

  def _uvm_register_gpu(self, file, a) -> None:
    self.uvm_gpus.add(self._gpu_by_uuid(a.gpu_uuid).uuid)

  def _uvm_register_vaspace(self, file, a) -> None:
    g = self._gpu_by_uuid(a.gpuUuid)
    if g.uuid not in self.uvm_gpus: raise RMStatus("NV_ERR_INVALID_DEVICE", "REGISTER_GPU first")
    vas = self._obj(a.hClient, a.hVaSpace)
    if vas.cls != abi.FERMI_VASPACE_A: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hVaSpace {a.hVaSpace:#x}")

  def _uvm_register_channel(self, file, a) -> None:
    self._gpu_by_uuid(a.gpuUuid)
    ch = self._obj(a.hClient, a.hChannel)
    if ch.cls not in GPFIFO: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hChannel {a.hChannel:#x}")

  def _uvm_create_range(self, file, a) -> None:
    if a.base % PAGE or a.length % PAGE or not a.length: raise RMStatus("NV_ERR_INVALID_ADDRESS", "not page aligned")
    if self.uvm_index.overlapping(a.base, a.base + a.length): raise RMStatus("NV_ERR_INVALID_ADDRESS", "overlaps a range")
    self.uvm_ranges[a.base] = [a.length, None]
    self.uvm_index.add(a.base, a.base + a.length, a.base)

  def _uvm_map_external(self, file, a) -> None:
    rng = self.uvm_ranges.get(a.base)
    if rng is None or rng[0] != a.length: raise RMStatus("NV_ERR_INVALID_ADDRESS", f"no external range at {a.base:#x}")
    mem = self._obj(a.hClient, a.hMemory)
    if mem.cls not in MEMORY_CLASSES: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hMemory {a.hMemory:#x}")
    if not 1 <= a.gpuAttributesCount <= abi.UVM_MAX_GPUS: raise RMStatus("NV_ERR_INVALID_ARGUMENT", "gpuAttributesCount")
    rng[1] = mem

  def _uvm_free(self, file, a) -> None:
    if self.uvm_ranges.pop(a.base, None) is None: raise RMStatus("NV_ERR_INVALID_ADDRESS", f"no range at {a.base:#x}")
    self.uvm_index.remove(a.base)


def gpu_id(gpu) -> int:
  """The RM's gpuId of a GPU (its PCI bus in bits 15:8, as nvidia.ko derives it)."""
  return (0x40 + gpu.index) << 8
