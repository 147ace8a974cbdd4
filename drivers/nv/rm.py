"""RMIface: an NVIDIA GPU through nvidia.ko's resource manager (RM) and UVM, reached only through the OS interface.

The sequence (shared/reference/nv_qcom_usb_pci_smi.md 1.1-1.5): /dev/nvidiactl; a root client (NV01_ROOT_CLIENT);
the driver version (NV0000 GET_BUILD_VERSION_V2) picks the version-specific layouts (NVOS46 grew in 580); UVM_INITIALIZE
on /dev/nvidia-uvm; NV_ESC_CARD_INFO lists the GPUs; /dev/nvidiaN registered to the ctl fd; the GPU's device
instance (NV0000 GET_ID_INFO_V2); device (NV01_DEVICE_0), subdevice (NV20_SUBDEVICE_0), virtual memory
(NV01_MEMORY_VIRTUAL: the hDma of GPU mappings); the class list (NV0080 GET_CLASSLIST: count, then the list) picks usermode, GPFIFO,
compute and copy classes, newest family first (Hopper: HOPPER_COMPUTE_A cbc0 + HOPPER_DMA_COPY_A c8b5; Ada:
ADA_COMPUTE_A c9c0 + AMPERE_DMA_COPY_B c7b5); the usermode object mapped to the CPU (its page holds the doorbell);
GR info (SM version, GPC/TPC/SM counts); a VA space (FERMI_VASPACE_A) registered with UVM (REGISTER_GPU,
REGISTER_GPU_VASPACE); a channel group (KEPLER_CHANNEL_GROUP_A) with a context share (FERMI_CONTEXT_SHARE_A); then
channels on demand (GPFIFO class, its engine object, the work-submit token, UVM REGISTER_CHANNEL) and the group
scheduled (NVA06C GPFIFO_SCHEDULE).

Memory: hcq picks GPU addresses (GPU VA == CPU VA): a range reserved through the OS interface; vidmem (NV1_MEMORY_USER)
or uncached sysmem (NV01_MEMORY_SYSTEM) allocated by RM, host memory registered as an OS descriptor
(NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, RM_ALLOC_MEMORY on the device fd); CPU mappings by RM_MAP_MEMORY with a freshly
opened, registered device fd and an mmap of that fd at the address; GPU mappings by UVM CREATE_EXTERNAL_RANGE,
RM_MAP_MEMORY_DMA at the fixed address and UVM MAP_EXTERNAL_ALLOCATION.

Every failure names the call, the class or control and the NV status (RMError)."""
from __future__ import annotations

import ctypes
import dataclasses
import os as _os
import threading

from ...errors import DeviceError, HCQError, OSCallError
from ..hcq.alloc import VARanges, round_up
from ...autogen.nv import rm_abi as abi
from ...autogen.nv.tables import rm as rm_tables

PAGE = 0x1000
USERMODE_SIZE = 0x10000
CHANNEL_VA_SIZE = 64 << 20          # the VA range UVM REGISTER_CHANNEL is given per channel
# GPU addresses hcq picks (== CPU addresses): below 1 TiB, because a GPFIFO entry holds a 40-bit pushbuffer address
# and SEND_PCAS_A a 40-bit QMD address (>> 8 in 32 bits)
LOW_VA_BASE, LOW_VA_SIZE = 0x10_0000_0000, 0xF0_0000_0000
VA_TRIES = 64                       # addresses another mapping of the process holds already are skipped
_LOW_VA: list = []                  # the process's one allocator of that range (every device maps into one process)
_LOW_VA_LOCK = threading.Lock()


def low_va() -> VARanges:
  with _LOW_VA_LOCK:
    if not _LOW_VA: _LOW_VA.append(VARanges(LOW_VA_BASE, LOW_VA_SIZE, "hcq NV GPU address space"))
    return _LOW_VA[0]


class RMError(DeviceError):
  """An RM or UVM call returned an NV status other than NV_OK: names the call, what it was about and the status."""

  def __init__(self, label: str, call: str, what: str, status: int):
    self.call, self.what, self.status, self.status_name = call, what, status, abi.status_name(status)
    super().__init__(f"{label}: {call} {what}: {self.status_name} ({status:#x})")


@dataclasses.dataclass
class Mem:
  va: int
  size: int
  handle: int
  kind: str                      # "vram", "sysmem" (uncached system memory) or "host" (an OS descriptor)
  cpu: memoryview | None
  fd: object = None              # the device fd of the CPU mapping


@dataclasses.dataclass
class Channel:
  handle: int
  engine_class: int
  engine_handle: int
  token: int
  entries: int
  area: Mem                      # GPFIFO ring, then USERD
  notifier: Mem                  # the error notifier (NvNotification records)
  ring_cpu: memoryview
  userd_cpu: memoryview
  doorbell: memoryview           # u32 view of the usermode doorbell word


def _u32s(view: memoryview, offset: int, n: int) -> memoryview: return view[offset:offset + 4 * n].cast("I")


class RMIface:
  def __init__(self, osi, index: int, config, label: str | None = None):
    self.os, self.config = osi, config
    self.label = label or f"NV:{index}"
    self.ctl = self.uvm = self.dev = None
    self.usermode_va = self._channel_va = self.doorbell = None    # what close() unmaps (a failed open closes too)
    self._mems: dict[int, Mem] = {}
    self._channels: list[Channel] = []
    self._handles = 0xCF100000           # handles this client chooses (OS descriptors)
    self.root = 0
    self.va = low_va()
    try: self._open(index)
    except BaseException as e:
      try: self.close()
      except (DeviceError, OSError) as cleanup: e.add_note(f"{self.label}: cleaning up after the failed open failed too: {cleanup}")
      raise

  # ---- calls
  def _escape(self, fd, nr: int, arg, what: str) -> None:
    try:
      req = abi.escape_request(nr, ctypes.sizeof(arg))
      fd.ioctl(req, arg)
    except (HCQError, OSCallError) as e: raise DeviceError(f"{self.label}: {abi.escape_name(nr)} {what}: {e}") from None
    # the unix layer's *_WITH_FD wrappers hold the NVOS struct (and its status) as their first member, `params`
    inner = arg.params if isinstance(getattr(arg, "params", None), ctypes.Structure) else arg
    status = getattr(inner, "status", 0)
    if status: raise RMError(self.label, abi.escape_name(nr), what, status)

  def _driver_major(self) -> int:
    try: return int(self.driver_version.split(".")[0])
    except ValueError: raise DeviceError(f"{self.label}: driver version {self.driver_version!r} has no major number") from None

  def rm_alloc(self, parent: int, cls: int, params=None, handle: int = 0) -> int:
    a = self.layouts.NVOS21_PARAMETERS(hRoot=self.root, hObjectParent=parent, hObjectNew=handle, hClass=cls,
                   pAllocParms=ctypes.addressof(params) if params is not None else 0,
                   paramsSize=ctypes.sizeof(params) if params is not None else 0)
    self._escape(self.ctl, abi.NV_ESC_RM_ALLOC, a, f"of {abi.class_name(cls)} under {parent:#x}")
    return a.hObjectNew

  def rm_control(self, obj: int, cmd: int, params) -> object:
    a = self.layouts.NVOS54_PARAMETERS(hClient=self.root, hObject=obj, cmd=cmd, params=ctypes.addressof(params),
                   paramsSize=ctypes.sizeof(params))
    self._escape(self.ctl, abi.NV_ESC_RM_CONTROL, a, f"of {cmd:#x} on {obj:#x}")
    return params

  def rm_free(self, obj: int, parent: int = 0) -> None:
    a = self.layouts.NVOS00_PARAMETERS(hRoot=self.root, hObjectParent=parent, hObjectOld=obj)
    self._escape(self.ctl, abi.NV_ESC_RM_FREE, a, f"of {obj:#x}")

  def uvm_call(self, request: int, params, fd=None) -> object:
    name = abi.UVM_NAMES[request]
    try: (fd or self.uvm).ioctl(request, params)
    except OSCallError as e: raise DeviceError(f"{self.label}: {name}: {e}") from None
    if params.rmStatus: raise RMError(self.label, name, "", params.rmStatus)
    return params

  # ---- opening
  def _open(self, index: int) -> None:
    osi = self.os
    try: self.ctl = osi.open("/dev/nvidiactl", _os.O_RDWR | _os.O_CLOEXEC)
    except OSCallError as e: raise DeviceError(f"{self.label}: cannot open /dev/nvidiactl ({e})") from None
    # the calls before the driver version is known use the structs every release has (tables.rm: NVOS00/21/54)
    self.layouts = rm_tables.for_version(f"{rm_tables.SUPPORTED_MAJORS[0]}.0")
    self.root = self.rm_alloc(0, abi.NV01_ROOT_CLIENT)
    # the version is what this control tells, and its struct changed at 560: the newer layout first, the older one
    # when RM refuses its size (NV_ERR_INVALID_PARAM_STRUCT)
    try: ver = self.rm_control(self.root, abi.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                               abi.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS_560())
    except RMError as e:
      if e.status_name != "NV_ERR_INVALID_PARAM_STRUCT": raise
      ver = self.rm_control(self.root, abi.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                            abi.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
    self.driver_version = ver.driverVersionBuffer.decode(errors="replace")
    try: self.layouts = rm_tables.for_version(self.driver_version)   # the structs that changed between releases
    except HCQError as e: raise DeviceError(f"{self.label}: {e}") from None
    self.uvm = osi.open("/dev/nvidia-uvm", _os.O_RDWR | _os.O_CLOEXEC)
    self.uvm_call(abi.UVM_INITIALIZE, abi.UVM_INITIALIZE_PARAMS())
    cards = abi.CARD_INFO_ARRAY()
    self._escape(self.ctl, abi.NV_ESC_CARD_INFO, cards, "")
    valid = [c for c in cards if c.valid]
    if index >= len(valid): raise DeviceError(f"{self.label}: nvidia.ko lists {len(valid)} GPU(s)")
    card = valid[index]
    self.minor, self.gpu_id, self.pci_device = card.minor_number, card.gpu_id, card.pci_info.device_id
    self.pci_bus = f"{card.pci_info.domain:04x}:{card.pci_info.bus:02x}:{card.pci_info.slot:02x}.{card.pci_info.function}"
    self.dev_path = f"/dev/nvidia{self.minor}"
    self.dev = self._device_fd()
    info = self.rm_control(self.root, abi.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                           abi.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=self.gpu_id))
    # vaMode 2: NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES (the process's VA space is a FERMI_VASPACE_A of ours)
    self.device = self.rm_alloc(self.root, abi.NV01_DEVICE_0, abi.NV0080_ALLOC_PARAMETERS(
      deviceId=info.deviceInstance, hClientShare=self.root, vaMode=2))
    self.subdevice = self.rm_alloc(self.device, abi.NV20_SUBDEVICE_0, abi.NV2080_ALLOC_PARAMETERS())
    self.virtmem = self.rm_alloc(self.device, abi.NV01_MEMORY_VIRTUAL,
                                 abi.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0x1FFFFFFFFFFFF))
    n = self.rm_control(self.device, abi.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, abi.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS()).numClasses
    buf = (ctypes.c_uint32 * max(n, 1))()
    self.rm_control(self.device, abi.NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
                    abi.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(numClasses=n, classList=ctypes.addressof(buf)))
    self.classes = set(buf[:n])
    self.usermode_class = self._pick("usermode", abi.USERMODE_CLASSES)
    self.gpfifo_class = self._pick("GPFIFO channel", abi.GPFIFO_CLASSES)
    self.compute_class = self._pick("compute", abi.COMPUTE_CLASSES)
    self.copy_class = self._pick("copy", abi.COPY_CLASSES)
    self.usermode = self.rm_alloc(self.subdevice, self.usermode_class)
    fd = self._device_fd()
    self._map_to_cpu(self.usermode, USERMODE_SIZE, fd)
    self.usermode_va = fd.mmap(USERMODE_SIZE, 0)
    self._usermode_fd = fd
    self.doorbell = osi.memview(self.usermode_va + 0x90, 4).cast("I")
    self.gr = self._gr_info()
    self.sm_version = self.gr["sm_version"]
    self.arch = f"sm_{self.sm_version >> 8}{self.sm_version & 0xFF}"     # 0x900 -> sm_90, 0x809 -> sm_89
    self.vaspace = self.rm_alloc(self.device, abi.FERMI_VASPACE_A, self.layouts.NV_VASPACE_ALLOCATION_PARAMETERS(
      vaBase=0x1000, vaSize=0x1FFFFFB000000,
      flags=abi.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | abi.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
    gid = self.rm_control(self.subdevice, abi.NV2080_CTRL_CMD_GPU_GET_GID_INFO, abi.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
      flags=abi.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
    self.uuid = bytes(gid.data[:16])
    self.uvm_call(abi.UVM_REGISTER_GPU, abi.with_uuid(abi.UVM_REGISTER_GPU_PARAMS(rmCtrlFd=-1), "gpu_uuid", self.uuid))
    self.uvm_call(abi.UVM_REGISTER_GPU_VASPACE, abi.with_uuid(abi.UVM_REGISTER_GPU_VASPACE_PARAMS(
      rmCtrlFd=self.ctl.fd, hClient=self.root, hVaSpace=self.vaspace), "gpuUuid", self.uuid))
    self.channel_group = self.rm_alloc(self.device, abi.KEPLER_CHANNEL_GROUP_A,
                                       abi.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=1))   # GRAPHICS
    self.ctxshare = self.rm_alloc(self.channel_group, abi.FERMI_CONTEXT_SHARE_A, abi.NV_CTXSHARE_ALLOCATION_PARAMETERS(
      hVASpace=self.vaspace, flags=abi.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
    self._channel_va = osi.alloc_anon(CHANNEL_VA_SIZE, reserve_only=True)

  def _pick(self, what: str, prefs: tuple) -> int:
    for c in prefs:
      if c in self.classes: return c
    raise DeviceError(f"{self.label}: the GPU lists no {what} class hcq knows ({', '.join(abi.class_name(c) for c in prefs)}); "
                      f"its classes: {', '.join(f'{c:#x}' for c in sorted(self.classes))}")

  def _device_fd(self):
    """A fresh /dev/nvidiaN fd registered with the ctl fd (RM's mmap contexts are per fd)."""
    fd = self.os.open(self.dev_path, _os.O_RDWR | _os.O_CLOEXEC)
    try: self._escape(fd, abi.NV_ESC_REGISTER_FD, abi.REGISTER_FD(ctl_fd=self.ctl.fd), "")
    except BaseException:
      fd.close()
      raise
    return fd

  def _gr_info(self) -> dict:
    keys = {"gpcs": abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, "tpc_per_gpc": abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
            "sm_per_tpc": abi.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
            "max_warps_per_sm": abi.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM, "sm_version": abi.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION}
    entries = (abi.NV2080_CTRL_GR_INFO * len(keys))(*[abi.NV2080_CTRL_GR_INFO(index=i) for i in keys.values()])
    self.rm_control(self.subdevice, abi.NV2080_CTRL_CMD_GR_GET_INFO, abi.NV2080_CTRL_GR_GET_INFO_PARAMS(
      grInfoListSize=len(keys), grInfoList=ctypes.addressof(entries)))
    return {k: e.data for k, e in zip(keys, entries)}

  def _map_to_cpu(self, handle: int, size: int, fd) -> None:
    L = self.layouts
    a = L.nv_ioctl_nvos33_parameters_with_fd(
      params=L.NVOS33_PARAMETERS(hClient=self.root, hDevice=self.device, hMemory=handle, length=size), fd=fd.fd)
    self._escape(self.ctl, abi.NV_ESC_RM_MAP_MEMORY, a, f"of {handle:#x}")

  # ---- memory
  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    """kind "vram", "sysmem" (uncached system memory RM allocates) or "host" (this process's memory, registered)."""
    size = round_up(max(size, 1), PAGE)
    osi = self.os
    mapped = kind == "host" or cpu_access
    if kind == "host":
      va = self._reserve(size, shared=True)
      handle = self._handles = self._handles + 1
      L = self.layouts
      a = L.nv_ioctl_nvos02_parameters_with_fd(params=L.NVOS02_PARAMETERS(
        hRoot=self.root, hObjectParent=self.device, hObjectNew=handle, hClass=abi.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
        pMemory=va, limit=size - 1,
        flags=abi.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS | abi.NVOS02_FLAGS_COHERENCY_CACHED), fd=-1)
      try: self._escape(self.dev, abi.NV_ESC_RM_ALLOC_MEMORY, a, f"of {size:#x} bytes of host memory at {va:#x}")
      except BaseException:
        osi.free_anon(va, size)
        self._unreserve(va)
        raise
    else:
      if kind not in ("vram", "sysmem"): raise ValueError(f"unknown memory kind {kind!r}")
      va = self._reserve(size, reserve_only=True)
      vram = kind == "vram"
      p = abi.NV_MEMORY_ALLOCATION_PARAMS(
        owner=self.root, type=abi.NVOS32_TYPE_IMAGE, size=size, alignment=PAGE, format=6,
        flags=abi.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED,
        attr=abi.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS | (0 if vram else abi.NVOS32_ATTR_LOCATION_PCI),
        attr2=0 if vram else abi.NVOS32_ATTR2_GPU_CACHEABLE_NO)
      try: handle = self.rm_alloc(self.device, abi.NV1_MEMORY_USER if vram else abi.NV01_MEMORY_SYSTEM, p)
      except BaseException:
        osi.free_anon(va, size)
        self._unreserve(va)
        raise
    mem = Mem(va, size, handle, kind, None)
    try:
      if kind != "host" and cpu_access:
        mem.fd = self._device_fd()
        self._map_to_cpu(handle, size, mem.fd)
        mem.fd.mmap(size, 0, addr=va)
      self._map_to_gpu(mem)
    except BaseException as e:
      try: self._release(mem)
      except (DeviceError, OSError) as cleanup: e.add_note(f"{self.label}: freeing it failed too: {cleanup}")
      raise
    if mapped: mem.cpu = osi.memview(va, size)
    self._mems[va] = mem
    return mem

  def _reserve(self, size: int, **kw) -> int:
    """CPU memory (or a reservation) at an address of hcq's GPU address space."""
    for _ in range(VA_TRIES):
      with _LOW_VA_LOCK: va = self.va.alloc(size, PAGE)
      try: return self.os.alloc_anon(size, addr=va, **kw)
      except OSCallError: continue          # taken by a mapping hcq did not make: skip it for good
    raise DeviceError(f"{self.label}: no free address for {size:#x} bytes below {LOW_VA_BASE + LOW_VA_SIZE:#x}")

  def _unreserve(self, va: int) -> None:
    with _LOW_VA_LOCK: self.va.free(va)

  def _map_to_gpu(self, mem: Mem) -> None:
    self.uvm_call(abi.UVM_CREATE_EXTERNAL_RANGE, abi.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=mem.va, length=mem.size))
    a = self.layouts.NVOS46_PARAMETERS(hClient=self.root, hDevice=self.device, hDma=self.virtmem, hMemory=mem.handle, length=mem.size,
                                       flags=abi.NVOS46_FLAGS_PAGE_SIZE_4KB | abi.NVOS46_FLAGS_CACHE_SNOOP_ENABLE |
                                       abi.NVOS46_FLAGS_DMA_OFFSET_FIXED, dmaOffset=mem.va)
    self._escape(self.ctl, abi.NV_ESC_RM_MAP_MEMORY_DMA, a, f"of {mem.handle:#x} at {mem.va:#x}")
    if a.dmaOffset != mem.va:
      raise DeviceError(f"{self.label}: RM mapped memory {mem.handle:#x} at {a.dmaOffset:#x}, not at {mem.va:#x}")
    p = abi.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=mem.va, length=mem.size, rmCtrlFd=self.ctl.fd, hClient=self.root,
                                               hMemory=mem.handle, gpuAttributesCount=1)
    abi.with_uuid(p.perGpuAttributes[0], "gpuUuid", self.uuid)
    p.perGpuAttributes[0].gpuMappingType = abi.UvmGpuMappingTypeReadWriteAtomic
    self.uvm_call(abi.UVM_MAP_EXTERNAL_ALLOCATION, p)

  def free(self, mem: Mem) -> None:
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: free of unknown memory at {mem.va:#x}")
    self._release(mem)

  def _release(self, mem: Mem) -> None:
    mem.cpu = None
    errors = []
    for step in (lambda: self.uvm_call(abi.UVM_FREE, abi.UVM_FREE_PARAMS(base=mem.va, length=mem.size)),
                 lambda: self.rm_free(mem.handle, self.device),
                 lambda: self.os.free_anon(mem.va, mem.size),
                 lambda: self._unreserve(mem.va),
                 lambda: mem.fd.close() if mem.fd is not None else None):
      try: step()
      except (DeviceError, OSError) as e: errors.append(e)
    if errors: raise errors[0]

  # ---- channels
  def create_channel(self, engine_class: int, entries: int) -> Channel:
    area = self.alloc(entries * 8 + PAGE, kind="vram", cpu_access=True)
    notifier = self.alloc(PAGE, kind="sysmem", cpu_access=True)
    p = self.layouts.NV_CHANNEL_ALLOC_PARAMS(hObjectError=notifier.handle, hObjectBuffer=area.handle, gpFifoOffset=area.va,
                                    gpFifoEntries=entries, hContextShare=self.ctxshare)
    p.hUserdMemory[0], p.userdOffset[0] = area.handle, entries * 8
    handle = self.rm_alloc(self.channel_group, self.gpfifo_class, p)
    engine = self.rm_alloc(handle, engine_class)
    token = self.rm_control(handle, abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                            abi.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()).workSubmitToken
    self.uvm_call(abi.UVM_REGISTER_CHANNEL, abi.with_uuid(abi.UVM_REGISTER_CHANNEL_PARAMS(
      rmCtrlFd=self.ctl.fd, hClient=self.root, hChannel=handle, base=self._channel_va, length=CHANNEL_VA_SIZE),
      "gpuUuid", self.uuid))
    ch = Channel(handle, engine_class, engine, token, entries, area, notifier, area.cpu[:entries * 8],
                 area.cpu[entries * 8:entries * 8 + PAGE], self.doorbell)
    self._channels.append(ch)
    return ch

  def schedule(self) -> None:
    sched = abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS_575 if self._driver_major() >= 575 else abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS
    self.rm_control(self.channel_group, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, sched(bEnable=1))

  def channel_error(self, ch: Channel) -> tuple[int, int] | None:
    """(robust-channel error code, fault address or 0) from the channel's error notifier, None while it is clean."""
    n = ch.notifier.cpu
    status = int.from_bytes(n[14:16], "little")
    if not status: return None
    return int.from_bytes(n[8:12], "little"), int.from_bytes(n[16:24], "little")

  def close(self) -> None:
    """Free the channels and memory, then the client (which frees every object under it); every step is tried,
    the first failure is raised at the end."""
    errors = []
    for ch in self._channels:
      try: self.rm_free(ch.handle, self.channel_group)
      except (DeviceError, OSError) as e: errors.append(e)
    self._channels.clear()
    for mem in list(self._mems.values()):
      try: self.free(mem)
      except (DeviceError, OSError) as e: errors.append(e)
    # the usermode page's CPU mapping (the doorbell) and the VA range reserved for UVM's channel registrations
    self.doorbell = None
    for name, size in (("usermode_va", USERMODE_SIZE), ("_channel_va", CHANNEL_VA_SIZE)):
      va = getattr(self, name)
      if va is None: continue
      try: self.os.free_anon(va, size)
      except (DeviceError, OSError) as e: errors.append(e)
      setattr(self, name, None)
    if self.root and self.ctl is not None:
      try: self.rm_free(self.root)
      except (DeviceError, OSError) as e: errors.append(e)
      self.root = 0
    for name in ("_usermode_fd", "dev", "uvm", "ctl"):
      f = getattr(self, name, None)
      if f is not None:
        try: f.close()
        except OSError as e: errors.append(e)
        setattr(self, name, None)
    if errors: raise DeviceError(f"{self.label}: closing failed: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
