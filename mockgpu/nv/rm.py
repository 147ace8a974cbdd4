"""The nvidia.ko model: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm as one process sees them.

RM (resource manager) escapes (open-gpu-kernel-modules nv_escape.h, nvos.h; kernel-open/nvidia/nv.c nvidia_ioctl): ioctl requests _IOWR('F', nr, size)
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

The driver release it claims (config.nv_mock_driver, HCQ_NV_MOCK_DRIVER: a series of hcq.autogen.nv.series, reported
as that series' tag) sets every size it checks: the escapes' argument structs, each control's params (RM refuses any
other paramsSize: NV_ERR_INVALID_PARAM_STRUCT, resControlLookup in rs_resource.c), each class's alloc params, the UVM
params, all taken from the generated modules of NVIDIA's headers at that tag (never from the driver's modules).
What RM checks beyond sizes, as its source has it:
  - vaMode (nvos.h NV_DEVICE_ALLOCATION_VAMODE_*): a mapping through a virtual memory object without a VA space under a
    MULTIPLE_VASPACES device, or with one under a SINGLE_VASPACE device, is NV_ERR_INVALID_STATE
    (vaspace.c vaspaceGetByHandleOrDeviceDefault, reached from virtual_mem.c on MAP_MEMORY_DMA);
  - NVOS32 alloc flags: a physical allocation (NV01_MEMORY_LOCAL_USER, NV01_MEMORY_SYSTEM) with any of
    NVOS32_ALLOC_FLAGS_VIRTUAL_ONLY is NV_ERR_INVALID_ARGUMENT (video_mem.c, system_mem.c);
  - UVM_MM_INITIALIZE (uvm.c uvm_api_mm_initialize): uvmFd must be an initialized UVM fd (NV_ERR_INVALID_ARGUMENT),
    the fd it is sent on a fresh one (uvm_fd_type_init: NV_ERR_IN_USE), once per VA space (NV_ERR_INVALID_STATE).
Alloc params: RM copies the class's own params size whatever paramsSize says (param_copy.c rmapiParamsCopyInit); a
caller whose struct is of another size has RM read past it or leave part unread, which the mock refuses as
NV_ERR_INVALID_PARAM_STRUCT, marked as the mock's diagnosis.
"""
from __future__ import annotations

import ctypes
import errno
import itertools
import threading

from ...errors import DeviceError, GPUFault, OSCallError
from ...autogen.nv import series as nv_series
from ..files import MockFile
from ..intervals import Intervals
from ..userptr import readable as _readable
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
PARENTS[abi.GT200_DEBUGGER] = (abi.NV01_DEVICE_0,)
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
    self.kind = None                   # uvm_fd_type.h: None (uninitialized), "va_space" (UVM_INITIALIZE), "mm"
    self.mm_alive = False              # a va_space fd whose mm a UVM_MM_INITIALIZE fd holds

  def ioctl(self, request, arg):
    self._check_open("ioctl")
    return self.model.uvm_ioctl(self, request, arg)


class RMModel:
  def __init__(self, os, gpus: list, series: str = "580"):
    self.os, self.gpus = os, gpus
    # the claimed release's ABI, generated from NVIDIA's headers at its tag
    self.series, self.driver_version = series, nv_series.TAGS[series]
    self.m, self.u = m, u = nv_series.rm(series), nv_series.uvm(series)
    self.lock = threading.RLock()
    self.objects: dict[tuple[int, int], RMObject] = {}
    self._client_handles = itertools.count(0xC1D00000)
    self._rm_handles = itertools.count(0xCF000000)
    self.files: dict[int, NVFile] = {}
    self.uvm_files: dict[int, UVMFile] = {}
    self.uvm_gpus: set[bytes] = set()
    self.uvm_ranges: dict[int, list] = {}     # base -> [length, memory object or None]
    self.uvm_index = Intervals()               # the same ranges by address: an overlap check is O(log n)
    self.vidmem_used: dict[int, int] = {}      # id(gpu) -> bytes of NV1_MEMORY_USER objects (no walk per allocation)
    # whether an OS descriptor of I/O memory (a peer's BAR) is allowed: the process is root, or nvidia.ko was loaded
    # with NVreg_RegistryDwords="PeerMappingOverride=1" (osCreateOsDescriptorFromIoMemory); tests turn it off
    self.peer_mapping_override = True
    # the unix layer's *_with_fd wrappers (nv-unix-nvos-params-wrappers.h) are given to their handlers as is
    self.escapes = {m.NV_ESC_RM_ALLOC: (m.NVOS21_PARAMETERS, self._alloc), m.NV_ESC_RM_FREE: (m.NVOS00_PARAMETERS, self._free),
                    m.NV_ESC_RM_CONTROL: (m.NVOS54_PARAMETERS, self._control),
                    m.NV_ESC_RM_ALLOC_MEMORY: (m.nv_ioctl_nvos02_parameters_with_fd, self._alloc_memory),
                    m.NV_ESC_RM_MAP_MEMORY: (m.nv_ioctl_nvos33_parameters_with_fd, self._map_memory),
                    m.NV_ESC_RM_MAP_MEMORY_DMA: (m.NVOS46_PARAMETERS, self._map_memory_dma),
                    m.NV_ESC_CARD_INFO: (m.nv_ioctl_card_info_t * abi.MAX_CARDS, self._card_info),
                    m.NV_ESC_REGISTER_FD: (m.nv_ioctl_register_fd_t, self._register_fd),
                    m.NV_ESC_CHECK_VERSION_STR: (m.nv_ioctl_rm_api_version_t, self._check_version)}
    self.uvm = {u.UVM_INITIALIZE: (u.UVM_INITIALIZE_PARAMS, self._uvm_initialize),
                u.UVM_MM_INITIALIZE: (u.UVM_MM_INITIALIZE_PARAMS, self._uvm_mm_initialize),
                u.UVM_REGISTER_GPU: (u.UVM_REGISTER_GPU_PARAMS, self._uvm_register_gpu),
                u.UVM_REGISTER_GPU_VASPACE: (u.UVM_REGISTER_GPU_VASPACE_PARAMS, self._uvm_register_vaspace),
                u.UVM_REGISTER_CHANNEL: (u.UVM_REGISTER_CHANNEL_PARAMS, self._uvm_register_channel),
                u.UVM_CREATE_EXTERNAL_RANGE: (u.UVM_CREATE_EXTERNAL_RANGE_PARAMS, self._uvm_create_range),
                u.UVM_MAP_EXTERNAL_ALLOCATION: (u.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, self._uvm_map_external),
                u.UVM_FREE: (u.UVM_FREE_PARAMS, self._uvm_free)}

  # ---- nodes
  def attach(self, os) -> None:
    from ..vfs import DeviceNode
    os.vfs.add("/dev/nvidiactl", DeviceNode(lambda path, flags: self._open(path, flags, None)))
    os.vfs.add("/dev/nvidia-uvm", DeviceNode(lambda path, flags: self._open_uvm(path, flags)))
    for g in self.gpus:
      os.vfs.add(f"/dev/nvidia{g.index}", DeviceNode(lambda path, flags, g=g: self._open(path, flags, g)))

  def _open_uvm(self, path, flags):
    f = UVMFile(self, path, flags)
    self.uvm_files[f.fd] = f
    return f

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
    name = abi.ESCAPE_NAMES.get(nr, "NV_ESC_CHECK_VERSION_STR" if nr == self.m.NV_ESC_CHECK_VERSION_STR else hex(nr))
    if size != ctypes.sizeof(struct):
      raise OSCallError("ioctl", file.path, errno.EINVAL, f"{name}: argument of {size} bytes, the driver takes "
                        f"{ctypes.sizeof(struct)}")
    view = memoryview(arg).cast("B")
    if view.nbytes < size: raise OSCallError("ioctl", file.path, errno.EFAULT, f"{name}: argument of {view.nbytes} bytes")
    a = struct.from_buffer(arg)
    with self.lock:
      try: handler(file, a)
      except RMStatus as e:
        inner = a.params if isinstance(getattr(a, "params", None), ctypes.Structure) else a
        if hasattr(inner, "status"): inner.status = e.status
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
      if request not in (self.u.UVM_INITIALIZE, self.u.UVM_MM_INITIALIZE) and file.kind != "va_space":
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

  def _params(self, ptr: int, struct, cls: int, size: int | None = None):
    # param_copy.c rmapiParamsCopyInit: NULL params for a class whose params are RS_REQUIRED (resource_list.h: the
    # memory, VA space, channel group, context share, virtual memory and channel classes) is NV_ERR_INVALID_ARGUMENT
    if not ptr: raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"{abi.class_name(cls)} needs allocation parameters")
    # paramsSize is not checked: rmapiParamsCopyInit (param_copy.c) overwrites it with the class's own size from
    # rmapiGetClassAllocParamSize, so RM reads sizeof(the release's struct) whatever the caller says (tinygrad 0.14
    # sends 0); the struct is read at the release's size, as RM does.
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
    if cls == abi.NV01_DEVICE_0:   # resource_list.h: RS_OPTIONAL(NV0080_ALLOC_PARAMETERS): none is all zero
      p = (self._params(a.pAllocParms, self.m.NV0080_ALLOC_PARAMETERS, cls, a.paramsSize) if a.pAllocParms
           else self.m.NV0080_ALLOC_PARAMETERS())
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
    if cls == abi.NV01_DEVICE_0: o.data["vaMode"] = p.vaMode
    self._construct(o, a)
    self.objects[(client, handle)] = o
    parent.children.append(o)
    a.hObjectNew, a.status = handle, 0

  def _construct(self, o: RMObject, a) -> None:
    cls, gpu, m = o.cls, o.gpu, self.m
    if cls in (abi.NV1_MEMORY_USER, abi.NV01_MEMORY_SYSTEM):
      p = self._params(a.pAllocParms, m.NV_MEMORY_ALLOCATION_PARAMS, cls, a.paramsSize)
      if p.size == 0 or p.size % PAGE: raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"size {p.size:#x}")
      # video_mem.c / system_mem.c: "Virtual-only flag used with physical allocation"
      if p.flags & m.NVOS32_ALLOC_FLAGS_VIRTUAL_ONLY:
        names = [n for n in ("VIRTUAL", "LAZY", "EXTERNALLY_MANAGED", "SPARSE", "MAXIMIZE_ADDRESS_SPACE",
                             "PREFER_PTES_IN_SYSMEMORY") if p.flags & getattr(m, f"NVOS32_ALLOC_FLAGS_{n}")]
        raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"NVOS32 flags {p.flags:#x}: virtual-only "
                       f"{', '.join(f'NVOS32_ALLOC_FLAGS_{n}' for n in names)} on a physical {abi.class_name(cls)}")
      o.data["nvos32_flags"] = p.flags
      if cls == abi.NV1_MEMORY_USER:
        used = self.vidmem_used.get(id(gpu), 0)
        if used + p.size > gpu.props.vram_size: raise RMStatus("NV_ERR_NO_MEMORY", f"{p.size:#x} bytes of vidmem")
        self.vidmem_used[id(gpu)] = used + p.size
      o.size, o.kind = p.size, "vidmem" if cls == abi.NV1_MEMORY_USER else "sysmem"
    elif cls == abi.NV01_MEMORY_VIRTUAL:
      p = self._params(a.pAllocParms, m.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS, cls, a.paramsSize)
      if p.hVASpace and self._obj(o.client, p.hVASpace).cls != abi.FERMI_VASPACE_A:
        raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hVASpace {p.hVASpace:#x} is not a FERMI_VASPACE_A")
      o.data["hVASpace"] = p.hVASpace
    elif cls == abi.FERMI_VASPACE_A:
      self._params(a.pAllocParms, m.NV_VASPACE_ALLOCATION_PARAMETERS, cls, a.paramsSize)
    elif cls == abi.KEPLER_CHANNEL_GROUP_A:
      self._params(a.pAllocParms, m.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS, cls, a.paramsSize)
    elif cls == abi.FERMI_CONTEXT_SHARE_A:
      p = self._params(a.pAllocParms, m.NV_CTXSHARE_ALLOCATION_PARAMETERS, cls, a.paramsSize)
      vas = self._obj(o.client, p.hVASpace)
      if vas.cls != abi.FERMI_VASPACE_A: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hVASpace {p.hVASpace:#x}")
    elif cls in GPFIFO:
      self._construct_channel(o, self._params(a.pAllocParms, m.NV_CHANNEL_ALLOC_PARAMS, cls, a.paramsSize))
    elif cls == abi.GT200_DEBUGGER:
      self._construct_debugger(o, self._params(a.pAllocParms, abi.NV83DE_ALLOC_PARAMETERS, cls, a.paramsSize))
    elif cls in abi.COMPUTE_CLASSES + abi.COPY_CLASSES:
      ch = o.parent.channel
      if any(c.cls == cls for c in o.parent.children): raise RMStatus("NV_ERR_INVALID_ARGUMENT", "one object per class")
      ch.objects[cls] = o.handle

  def _construct_debugger(self, o: RMObject, p) -> None:
    """ksmdbgssnConstruct_IMPL (kernel_sm_debugger_session.c, 580.105.08): hDebuggerClient_Obsolete must be 0; a
    zero hAppClient means the caller's client; hClass3dObject must be an object of that client (else
    NV_ERR_INVALID_OBJECT_PARENT) that is a graphics/compute engine object (else NV_ERR_INVALID_OBJECT) on the
    debugger's GPU (else NV_ERR_INVALID_ARGUMENT)."""
    if p.hDebuggerClient_Obsolete: raise RMStatus("NV_ERR_INVALID_ARGUMENT", "NV83DE hDebuggerClient_Obsolete must be 0")
    app = p.hAppClient or o.client
    if (app, app) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"NV83DE hAppClient {app:#x}")
    target = self.objects.get((app, p.hClass3dObject))
    if target is None: raise RMStatus("NV_ERR_INVALID_OBJECT_PARENT", f"NV83DE hClass3dObject {p.hClass3dObject:#x} not found")
    if target.cls not in abi.COMPUTE_CLASSES:
      raise RMStatus("NV_ERR_INVALID_OBJECT", f"NV83DE hClass3dObject {p.hClass3dObject:#x} is {abi.class_name(target.cls)}, "
                                              f"not a compute object")
    if target.gpu is not o.gpu: raise RMStatus("NV_ERR_INVALID_ARGUMENT", "NV83DE: the compute object is on another GPU")
    o.data["target"] = target

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
    if o.data.get("gpu_mapped") == "peer":
      try: o.gpu.unmap_peer(o.va)
      except ValueError: pass
    elif o.data.get("gpu_mapped"):
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
    # the claimed release's params struct (rs_resource.c resControlLookup: any other paramsSize is refused)
    struct = handler.__annotations__.get("p")
    struct = getattr(self.m, struct.strip("\"'")) if isinstance(struct, str) else struct
    if a.paramsSize != ctypes.sizeof(struct):
      raise RMStatus("NV_ERR_INVALID_PARAM_STRUCT", f"control {a.cmd:#x}: paramsSize {a.paramsSize}, driver "
                     f"{self.driver_version}'s {struct.__name__} is {ctypes.sizeof(struct)} bytes")
    if not _readable(a.params, a.paramsSize): raise RMStatus("NV_ERR_INVALID_POINTER", f"params at {a.params:#x}")
    handler(o, struct.from_address(a.params))
    a.status = 0

  def _ctrl_13e(self, o, p: "NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS"):
    p.driverVersionBuffer = self.driver_version.encode()
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

  def _ctrl_2080200a(self, o, p: "NV2080_CTRL_PERF_BOOST_PARAMS"):
    """ctrl2080perf.h: flags 1:0 is the command (CLEAR, BOOST_1LEVEL, BOOST_TO_MAX; 3 is none), the duration is in
    seconds up to NV2080_CTRL_PERF_BOOST_DURATION_MAX, or _INFINITE (until cleared). Boosts are tracked per client."""
    cmd = p.flags & 3
    if cmd > self.m.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX:
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"PERF_BOOST flags {p.flags:#x}: command {cmd} is none of CLEAR/BOOST_1LEVEL/BOOST_TO_MAX")
    if p.duration > self.m.NV2080_CTRL_PERF_BOOST_DURATION_MAX and p.duration != self.m.NV2080_CTRL_PERF_BOOST_DURATION_INFINITE:
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"PERF_BOOST duration {p.duration} s exceeds {self.m.NV2080_CTRL_PERF_BOOST_DURATION_MAX}")
    boosts = o.gpu.__dict__.setdefault("perf_boosts", {})
    if cmd == 0: boosts.pop(o.client, None)
    else: boosts[o.client] = (cmd, p.duration)

  def _ctrl_c36f0108(self, o, p: "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS"):
    p.workSubmitToken = o.channel.token

  def _ctrl_a06c0101(self, o, p: "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS"):
    o.data["scheduled"] = bool(p.bEnable)

  # ---- memory
  def _alloc_memory(self, file, w) -> None:
    a = w.params
    if a.hClass != abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
      raise RMStatus("NV_ERR_INVALID_CLASS", f"RM_ALLOC_MEMORY of {abi.class_name(a.hClass)}")
    client = a.hRoot
    if (client, client) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {client:#x}")
    parent = self._obj(client, a.hObjectParent, "NV_ERR_INVALID_OBJECT_PARENT")
    if parent.cls not in PARENTS[a.hClass]:
      raise RMStatus("NV_ERR_INVALID_OBJECT_PARENT", f"OS descriptor under {abi.class_name(parent.cls)}")
    size = a.limit + 1
    m, flags = self.m, a.flags
    field = lambda name: nv_series.drf_get(m, f"NVOS02_FLAGS_{name}", flags)
    # escape.c RmAllocOsDescriptor: an OS descriptor is PCI memory that RM never maps to the CPU itself
    if field("LOCATION") != m.NVOS02_FLAGS_LOCATION_PCI or field("MAPPING") != m.NVOS02_FLAGS_MAPPING_NO_MAP:
      raise RMStatus("NV_ERR_INVALID_FLAGS", f"OS descriptor flags {flags:#x}: LOCATION must be PCI and MAPPING NO_MAP")
    if a.pMemory % PAGE: raise RMStatus("NV_ERR_NOT_SUPPORTED", f"pMemory {a.pMemory:#x} is not page aligned")
    host = self.os.memory.find(a.pMemory)
    io = None
    if host is None or a.pMemory + size > host[0] + host[1] or "(reserved)" in host[2]:
      # os_lock_user_pages failed: RmCreateOsDescriptor tries the range as I/O memory (os_lookup_user_io_memory: one
      # VM_IO|VM_PFNMAP VMA holding it all); osCreateOsDescriptorFromIoMemory wants it uncached and contiguous, and
      # os_desc_mem.c forces PEER_MAP_OVERRIDE_REQUIRED: root or the PeerMappingOverride registry key
      lookup = getattr(self.os, "io_mapping", None)
      io = lookup(a.pMemory, size) if lookup is not None else None
      if io is None:
        raise RMStatus("NV_ERR_INVALID_ADDRESS", f"pMemory {a.pMemory:#x}+{size:#x} is neither host memory of this "
                       f"process nor inside one I/O mapping")
      if field("COHERENCY") != m.NVOS02_FLAGS_COHERENCY_UNCACHED or \
         field("PHYSICALITY") != m.NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS:
        raise RMStatus("NV_ERR_INVALID_FLAGS", f"I/O memory at {a.pMemory:#x} ({io.name}): flags {flags:#x} must be "
                       f"COHERENCY UNCACHED and PHYSICALITY CONTIGUOUS (osCreateOsDescriptorFromIoMemory)")
      if not self.peer_mapping_override:
        raise RMStatus("NV_ERR_INSUFFICIENT_PERMISSIONS", f"I/O memory at {a.pMemory:#x} ({io.name}): peer mappings "
                       f"need root or PeerMappingOverride (osCreateOsDescriptorFromIoMemory)")
    handle = a.hObjectNew or next(self._rm_handles)
    if (client, handle) in self.objects: raise RMStatus("NV_ERR_INSERT_DUPLICATE_NAME", f"handle {handle:#x}")
    o = RMObject(client, handle, a.hClass, parent, parent.gpu)
    if io is None: o.size, o.va, o.kind = size, a.pMemory, "host"
    else:
      o.size, o.va, o.kind = size, None, "io"
      o.data["io"] = (io.mmio, a.pMemory - io.addr, io.name)
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
    if va % PAGE: raise RMStatus("NV_ERR_INVALID_ADDRESS", f"{what} at {va:#x}: not page aligned")
    host = self.os.memory.find(va)
    if host is None and not self._host_overlap(va, o.size):
      # nothing of the process at [va, va+size): a mapping there needs no reservation. mmap(MAP_FIXED) of the device
      # fd maps wherever the caller says (nvidia_mmap, kernel-open/nvidia/nv-mmap.c, takes the vma it is given), and
      # RM_MAP_MEMORY_DMA at a fixed dmaOffset places the object in the GPU VA space alone (the host is not involved).
      # The mock backs the object with host memory at va there (GPU VA == host VA).
      try: self.os.alloc_anon(o.size, addr=va, shared=True)
      except (OSCallError, DeviceError) as e:     # memory of this process the mock does not know of lives there
        raise RMStatus("NV_ERR_INVALID_ADDRESS", f"{what} at {va:#x}+{o.size:#x}: the mock cannot back it there ({e})") from None
      host = self.os.memory.find(va)
    if host is None or va + o.size > host[0] + host[1]:
      raise RMStatus("NV_ERR_INVALID_ADDRESS", f"{what} at {va:#x}+{o.size:#x}: runs past the process's mapping there "
                                               f"(the mock backs GPU memory with host memory at its VA)")
    self.os.memory.replace(va, o.size, f"{o.gpu.name} {o.kind} {o.handle:#x}")
    o.va = va

  def _host_overlap(self, va: int, size: int) -> bool:
    """Whether any mapping the MockOS knows of meets [va, va+size)."""
    return self.os.memory.overlaps(va, size)

  def _map_memory(self, file, w) -> None:
    a = w.params
    if (a.hClient, a.hClient) not in self.objects: raise RMStatus("NV_ERR_INVALID_CLIENT", f"client {a.hClient:#x}")
    o = self._obj(a.hClient, a.hMemory)
    target = self.files.get(w.fd)
    if target is None or target.closed or target.gpu is None or not target.registered:
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"fd {w.fd} is not a registered /dev/nvidiaN fd")
    if o.kind == "io":     # os_desc_mem.c sets MAPPING NEVER_MAP on I/O memory: RM never maps it to the CPU
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"memory {o.handle:#x} is I/O memory ({o.data['io'][2]}): never mapped")
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
    self._vaspace_of(dma)
    o = self._obj(a.hClient, a.hMemory)
    if o.cls not in MEMORY_CLASSES: raise RMStatus("NV_ERR_INVALID_OBJECT_HANDLE", f"hMemory {a.hMemory:#x} is not memory")
    if not nv_series.drf_get(self.m, "NVOS46_FLAGS_DMA_OFFSET_FIXED", a.flags) == self.m.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE:
      raise RMStatus("NV_ERR_INVALID_FLAGS", "the mock maps at a fixed dmaOffset only")
    if a.offset != 0 or a.length != o.size:
      raise RMStatus("NV_ERR_INVALID_LIMIT", f"offset {a.offset:#x} length {a.length:#x} (whole objects only)")
    if o.data.get("gpu_mapped"): raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"memory {o.handle:#x} is mapped already")
    if o.kind == "io":      # the function's BAR pages at dmaOffset: a peer window of the GPU (mockgpu/peer.py)
      if a.dmaOffset % PAGE: raise RMStatus("NV_ERR_INVALID_OFFSET", f"dmaOffset {a.dmaOffset:#x} is not page aligned")
      mmio, offset, name = o.data["io"]
      try: o.gpu.map_peer(a.dmaOffset, o.size, mmio, offset, name)
      except ValueError as e: raise RMStatus("NV_ERR_INVALID_ADDRESS", str(e)) from None
      o.va, o.data["gpu_mapped"] = a.dmaOffset, "peer"
      a.status = 0
      return
    self._back(o, a.dmaOffset, "GPU mapping")
    try: o.gpu.map_range(o.va, o.size)
    except ValueError as e: raise RMStatus("NV_ERR_INVALID_ADDRESS", str(e)) from None
    o.data["gpu_mapped"] = True
    a.status = 0

  def _vaspace_of(self, dma: RMObject) -> None:
    """vaspace.c vaspaceGetByHandleOrDeviceDefault for a virtual memory object's mapping: no hVASpace means the
    device's default VA space, which a MULTIPLE_VASPACES device does not have; an hVASpace under a SINGLE_VASPACE
    device is refused too. Both NV_ERR_INVALID_STATE."""
    m, device = self.m, dma.parent
    mode, hvas = device.data.get("vaMode", 0), dma.data.get("hVASpace", 0)
    if not hvas and mode == m.NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES:
      raise RMStatus("NV_ERR_INVALID_STATE", f"virtual memory {dma.handle:#x} has no VA space and device "
                     f"{device.handle:#x} is vaMode MULTIPLE_VASPACES (no implicit VA space: vaspace.c)")
    if hvas and mode == m.NV_DEVICE_ALLOCATION_VAMODE_SINGLE_VASPACE:
      raise RMStatus("NV_ERR_INVALID_STATE", f"virtual memory {dma.handle:#x} names VA space {hvas:#x} under device "
                     f"{device.handle:#x} of vaMode SINGLE_VASPACE (no private VA spaces: vaspace.c)")

  def _check_version(self, file, a) -> None:
    """NV_ESC_CHECK_VERSION_STR (osapi.c rm_perform_version_check): reply RECOGNIZED always; QUERY returns the
    version; STRICT compares the whole string, RELAXED up to the first '.'; a mismatch gets the RM's version back and
    fails the ioctl (EINVAL)."""
    m = self.m
    a.reply = m.NV_RM_API_VERSION_REPLY_RECOGNIZED
    if a.cmd == m.NV_RM_API_VERSION_CMD_QUERY:
      a.versionString = self.driver_version.encode()
      return
    mine, theirs = self.driver_version, a.versionString.decode(errors="replace")
    if a.cmd == m.NV_RM_API_VERSION_CMD_RELAXED: mine, theirs = mine.split(".")[0], theirs.split(".")[0]
    if mine != theirs:
      a.versionString = self.driver_version.encode()
      raise OSCallError("ioctl", file.path, errno.EINVAL, f"NV_ESC_CHECK_VERSION_STR: the client has version "
                        f"{theirs!r}, this kernel module {self.driver_version}")

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
  def _uvm_initialize(self, file, a) -> None:
    if file.kind is not None: raise RMStatus("NV_ERR_IN_USE", f"{file.path} fd {file.fd} is initialized already")
    file.kind = "va_space"

  def _uvm_mm_initialize(self, file, a) -> None:
    """uvm.c uvm_api_mm_initialize: sent on a fresh UVM fd, naming an initialized one (uvmFd) whose mm it holds."""
    target = self.uvm_files.get(a.uvmFd)
    if target is None or target.closed or target.kind != "va_space":
      raise RMStatus("NV_ERR_INVALID_ARGUMENT", f"uvmFd {a.uvmFd} is not a UVM fd with a VA space (UVM_INITIALIZE)")
    if file.kind is not None: raise RMStatus("NV_ERR_IN_USE", f"UVM_MM_INITIALIZE on fd {file.fd}, an initialized UVM fd")
    if target.mm_alive: raise RMStatus("NV_ERR_INVALID_STATE", f"the mm of uvmFd {a.uvmFd} is held already")
    file.kind, target.mm_alive = "mm", True

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
