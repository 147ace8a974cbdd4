"""RMSession: an NVIDIA GPU through nvidia.ko's resource manager (RM) and UVM, reached only through the OS interface.

The sequence: the driver version, read before any call whose size depends on it (/proc/driver/nvidia/version, else the
NV_ESC_CHECK_VERSION_STR escape), picks the driver series and with it the ABI generated from NVIDIA's headers of that
release (hcq.autogen.nv.series: rm_<series>, uvm_<series>; a series hcq has no checked layouts for is refused, naming
the version); /dev/nvidiactl; a root client (NV01_ROOT_CLIENT); NV0000 GET_BUILD_VERSION_V2 (its params grew at 570)
must agree with that version; UVM_INITIALIZE on /dev/nvidia-uvm and UVM_MM_INITIALIZE on a second UVM fd (uvm.c
uvm_api_mm_initialize: it keeps the process's mm for the VA space); NV_ESC_CARD_INFO lists the GPUs; /dev/nvidiaN
registered to the ctl fd; the GPU's device instance (NV0000 GET_ID_INFO_V2); device (NV01_DEVICE_0, vaMode OPTIONAL_MULTIPLE_VASPACES: vaspace.c
vaspaceGetByHandleOrDeviceDefault refuses an implicit VA space under MULTIPLE_VASPACES, and the virtual memory object
has none), subdevice (NV20_SUBDEVICE_0), virtual memory
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
from ...autogen.nv import rm_abi as abi, series as nv_series

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
  kind: str                      # "vram", "sysmem" (uncached system memory), "host" (an OS descriptor) or "io"
  cpu: memoryview | None
  fd: object = None              # the device fd of the CPU mapping; for "io" the process's I/O mapping of the BAR


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


def arch_of(sm_version: int) -> str:
  """The compiler target of an RM SM version (ctrl2080gr.h NV2080_CTRL_GR_INFO_SM_VERSION_<major>_<minor>: the major
  in bits 15:8, the minor's digits in 7:0, 0x809 = 8_09 -> sm_89, 0xA00 -> sm_100). 0xA04, SM_VERSION_10_04, is what
  RM reports for GB20x, sm_120 (ctrl2080gr.h's comment on it: 12_* versions replace it; tinygrad 0.14 ops_nv.py maps it
  so)."""
  if sm_version == 0xA04: return "sm_120"
  minor = sm_version & 0xFF
  return f"sm_{sm_version >> 8}{minor >> 4 if minor > 0xF else minor}"


class RMSession:
  def __init__(self, osi, index: int, config, label: str | None = None):
    self.os, self.config = osi, config
    self.label = label or f"NV:{index}"
    self.ctl = self.uvm = self.uvm_mm = self.dev = None
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

  def rm_alloc(self, parent: int, cls: int, params=None, handle: int = 0) -> int:
    a = self.rm.NVOS21_PARAMETERS(hRoot=self.root, hObjectParent=parent, hObjectNew=handle, hClass=cls,
                   pAllocParms=ctypes.addressof(params) if params is not None else 0,
                   paramsSize=ctypes.sizeof(params) if params is not None else 0)
    self._escape(self.ctl, abi.NV_ESC_RM_ALLOC, a, f"of {abi.class_name(cls)} under {parent:#x}")
    return a.hObjectNew

  def rm_control(self, obj: int, cmd: int, params) -> object:
    a = self.rm.NVOS54_PARAMETERS(hClient=self.root, hObject=obj, cmd=cmd, params=ctypes.addressof(params),
                   paramsSize=ctypes.sizeof(params))
    self._escape(self.ctl, abi.NV_ESC_RM_CONTROL, a, f"of {cmd:#x} on {obj:#x}")
    return params

  def rm_free(self, obj: int, parent: int = 0) -> None:
    a = self.rm.NVOS00_PARAMETERS(hRoot=self.root, hObjectParent=parent, hObjectOld=obj)
    self._escape(self.ctl, abi.NV_ESC_RM_FREE, a, f"of {obj:#x}")

  def uvm_call(self, request: int, params, fd=None, ok: tuple = ()) -> object:
    name = abi.UVM_NAMES[request]
    try: (fd or self.uvm).ioctl(request, params)
    except OSCallError as e: raise DeviceError(f"{self.label}: {name}: {e}") from None
    if params.rmStatus and params.rmStatus not in ok: raise RMError(self.label, name, "", params.rmStatus)
    return params

  # ---- the driver's version, before any call whose size depends on it
  def _driver_version(self) -> str:
    """The running nvidia.ko's version: /proc/driver/nvidia/version's NVRM line, else the NV_ESC_CHECK_VERSION_STR
    escape on the ctl fd (nv-ioctl.h nv_ioctl_rm_api_version_t, cmd NV_RM_API_VERSION_CMD_QUERY: the same struct in
    every series, so it may be sent before the series is known)."""
    try: return nv_series.proc_version(self.os.proc_read("driver/nvidia/version"))
    except (OSCallError, nv_series.UnsupportedDriver) as e: why = str(e)
    m = nv_series.rm(nv_series.SERIES[-1])     # any series: the struct and the escape number are the same in all
    q = m.nv_ioctl_rm_api_version_t(cmd=m.NV_RM_API_VERSION_CMD_QUERY)
    try: self.ctl.ioctl(abi.escape_request(m.NV_ESC_CHECK_VERSION_STR, ctypes.sizeof(q)), q)
    except OSCallError as e:
      raise DeviceError(f"{self.label}: cannot learn the driver version: /proc/driver/nvidia/version: {why}; "
                        f"NV_ESC_CHECK_VERSION_STR: {e}") from None
    return q.versionString.decode(errors="replace")

  # ---- opening
  def _open(self, index: int) -> None:
    osi = self.os
    try: self.ctl = osi.open("/dev/nvidiactl", _os.O_RDWR | _os.O_CLOEXEC)
    except OSCallError as e: raise DeviceError(f"{self.label}: cannot open /dev/nvidiactl ({e})") from None
    self.driver_version = self._driver_version()
    try: self.series = nv_series.series_of(self.driver_version)
    except nv_series.UnsupportedDriver as e: raise DeviceError(f"{self.label}: {e}") from None
    # the ABI of this release, generated from NVIDIA's headers at its tag: every call struct, flag and number below
    self.rm, self.uvmabi = m, u = nv_series.rm(self.series), nv_series.uvm(self.series)
    self.root = self.rm_alloc(0, m.NV01_ROOT_CLIENT)
    ver = self.rm_control(self.root, m.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                          m.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
    reported = ver.driverVersionBuffer.decode(errors="replace")
    if nv_series.parse_version(reported) != nv_series.parse_version(self.driver_version):
      raise DeviceError(f"{self.label}: RM reports driver {reported!r} (NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2), "
                        f"the kernel module {self.driver_version!r}: a mismatched user/kernel pair")
    self.uvm = osi.open("/dev/nvidia-uvm", _os.O_RDWR | _os.O_CLOEXEC)
    self.uvm_call(u.UVM_INITIALIZE, u.UVM_INITIALIZE_PARAMS())
    # the VA space's mm is held by a second UVM fd (uvm.c uvm_api_mm_initialize); NV_WARN_NOTHING_TO_DO: this
    # driver's VA spaces need none, the fd may go
    self.uvm_mm = osi.open("/dev/nvidia-uvm", _os.O_RDWR | _os.O_CLOEXEC)
    mm = self.uvm_call(u.UVM_MM_INITIALIZE, u.UVM_MM_INITIALIZE_PARAMS(uvmFd=self.uvm.fd), fd=self.uvm_mm,
                       ok=(abi.nvstatus.NV_WARN_NOTHING_TO_DO,))
    if mm.rmStatus == abi.nvstatus.NV_WARN_NOTHING_TO_DO:
      self.uvm_mm.close()
      self.uvm_mm = None
    cards = (m.nv_ioctl_card_info_t * abi.MAX_CARDS)()
    self._escape(self.ctl, m.NV_ESC_CARD_INFO, cards, "")
    valid = [c for c in cards if c.valid]
    if index >= len(valid): raise DeviceError(f"{self.label}: nvidia.ko lists {len(valid)} GPU(s)")
    card = valid[index]
    self.minor, self.gpu_id, self.pci_device = card.minor_number, card.gpu_id, card.pci_info.device_id
    self.pci_bus = f"{card.pci_info.domain:04x}:{card.pci_info.bus:02x}:{card.pci_info.slot:02x}.{card.pci_info.function}"
    self.dev_path = f"/dev/nvidia{self.minor}"
    self.dev = self._device_fd()
    info = self.rm_control(self.root, m.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                           m.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=self.gpu_id))
    # vaMode OPTIONAL_MULTIPLE_VASPACES (nvos.h; tinygrad's choice): the virtual memory object below (the hDma of every
    # MAP_MEMORY_DMA) has no VA space of its own and maps in the device's default one, which MULTIPLE_VASPACES
    # refuses (NV_ERR_INVALID_STATE, vaspace.c vaspaceGetByHandleOrDeviceDefault); the channels still run in the
    # FERMI_VASPACE_A allocated below
    self.device = self.rm_alloc(self.root, m.NV01_DEVICE_0, m.NV0080_ALLOC_PARAMETERS(
      deviceId=info.deviceInstance, hClientShare=self.root, vaMode=m.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES))
    self.subdevice = self.rm_alloc(self.device, m.NV20_SUBDEVICE_0, m.NV2080_ALLOC_PARAMETERS())
    self.virtmem = self.rm_alloc(self.device, m.NV01_MEMORY_VIRTUAL,
                                 m.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0x1FFFFFFFFFFFF))
    n = self.rm_control(self.device, m.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, m.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS()).numClasses
    buf = (ctypes.c_uint32 * max(n, 1))()
    self.rm_control(self.device, m.NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
                    m.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(numClasses=n, classList=ctypes.addressof(buf)))
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
    self.arch = arch_of(self.sm_version)
    self.vaspace = self.rm_alloc(self.device, m.FERMI_VASPACE_A, m.NV_VASPACE_ALLOCATION_PARAMETERS(
      vaBase=0x1000, vaSize=0x1FFFFFB000000,
      flags=m.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING | m.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
    gid = self.rm_control(self.subdevice, m.NV2080_CTRL_CMD_GPU_GET_GID_INFO, m.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
      flags=m.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
    self.uuid = bytes(gid.data[:16])
    self.uvm_call(u.UVM_REGISTER_GPU, abi.with_uuid(u.UVM_REGISTER_GPU_PARAMS(rmCtrlFd=-1), "gpu_uuid", self.uuid))
    self.uvm_call(u.UVM_REGISTER_GPU_VASPACE, abi.with_uuid(u.UVM_REGISTER_GPU_VASPACE_PARAMS(
      rmCtrlFd=self.ctl.fd, hClient=self.root, hVaSpace=self.vaspace), "gpuUuid", self.uuid))
    self.channel_group = self.rm_alloc(self.device, m.KEPLER_CHANNEL_GROUP_A,
                                       m.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(engineType=1))   # GRAPHICS
    self.ctxshare = self.rm_alloc(self.channel_group, abi.FERMI_CONTEXT_SHARE_A, m.NV_CTXSHARE_ALLOCATION_PARAMETERS(
      hVASpace=self.vaspace, flags=nv_series.drf(m, "NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT", "ASYNC")))
    self._channel_va = osi.alloc_anon(CHANNEL_VA_SIZE, reserve_only=True)

  def _pick(self, what: str, prefs: tuple) -> int:
    for c in prefs:
      if c in self.classes: return c
    raise DeviceError(f"{self.label}: the GPU lists no {what} class hcq knows ({', '.join(abi.class_name(c) for c in prefs)}); "
                      f"its classes: {', '.join(f'{c:#x}' for c in sorted(self.classes))}")

  def _device_fd(self):
    """A fresh /dev/nvidiaN fd registered with the ctl fd (RM's mmap contexts are per fd)."""
    fd = self.os.open(self.dev_path, _os.O_RDWR | _os.O_CLOEXEC)
    try: self._escape(fd, self.rm.NV_ESC_REGISTER_FD, self.rm.nv_ioctl_register_fd_t(ctl_fd=self.ctl.fd), "")
    except BaseException:
      fd.close()
      raise
    return fd

  def _gr_info(self) -> dict:
    m = self.rm
    keys = {"gpcs": m.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, "tpc_per_gpc": m.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
            "sm_per_tpc": m.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
            "max_warps_per_sm": m.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM, "sm_version": m.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION}
    entries = (m.NV2080_CTRL_GR_INFO * len(keys))(*[m.NV2080_CTRL_GR_INFO(index=i) for i in keys.values()])
    self.rm_control(self.subdevice, m.NV2080_CTRL_CMD_GR_GET_INFO, m.NV2080_CTRL_GR_GET_INFO_PARAMS(
      grInfoListSize=len(keys), grInfoList=ctypes.addressof(entries)))
    return {k: e.data for k, e in zip(keys, entries)}

  def _map_to_cpu(self, handle: int, size: int, fd) -> None:
    m = self.rm
    a = m.nv_ioctl_nvos33_parameters_with_fd(
      params=m.NVOS33_PARAMETERS(hClient=self.root, hDevice=self.device, hMemory=handle, length=size), fd=fd.fd)
    self._escape(self.ctl, m.NV_ESC_RM_MAP_MEMORY, a, f"of {handle:#x}")

  # ---- memory
  def alloc(self, size: int, kind: str = "vram", cpu_access: bool = False) -> Mem:
    """kind "vram", "sysmem" (uncached system memory RM allocates) or "host" (this process's memory, registered)."""
    size = round_up(max(size, 1), PAGE)
    osi, m = self.os, self.rm
    mapped = kind == "host" or cpu_access
    if kind == "host":
      va = self._reserve(size, shared=True)
      handle = self._handles = self._handles + 1
      a = m.nv_ioctl_nvos02_parameters_with_fd(params=m.NVOS02_PARAMETERS(
        hRoot=self.root, hObjectParent=self.device, hObjectNew=handle, hClass=m.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
        pMemory=va, limit=size - 1, flags=nv_series.drf(m, "NVOS02_FLAGS_PHYSICALITY", "NONCONTIGUOUS") |
        nv_series.drf(m, "NVOS02_FLAGS_COHERENCY", "CACHED") | nv_series.drf(m, "NVOS02_FLAGS_MAPPING", "NO_MAP")),
        fd=-1)      # escape.c RmAllocOsDescriptor refuses an OS descriptor whose MAPPING is not NO_MAP
      try: self._escape(self.dev, m.NV_ESC_RM_ALLOC_MEMORY, a, f"of {size:#x} bytes of host memory at {va:#x}")
      except BaseException:
        osi.free_anon(va, size)
        self._unreserve(va)
        raise
    else:
      if kind not in ("vram", "sysmem"): raise ValueError(f"unknown memory kind {kind!r}")
      va = self._reserve(size, reserve_only=True)
      vram = kind == "vram"
      # NVOS32 flags and attrs as nvos.h defines them (MAP_NOT_REQUIRED is 0x8000; 0x800 would be FORCE_REVERSE_ALLOC)
      p = m.NV_MEMORY_ALLOCATION_PARAMS(
        owner=self.root, type=m.NVOS32_TYPE_IMAGE, size=size, alignment=PAGE, format=6,
        flags=m.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED | m.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT |
        (m.NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM if vram else 0),
        attr=nv_series.drf(m, "NVOS32_ATTR_PHYSICALITY", "ALLOW_NONCONTIGUOUS") |
        (0 if vram else nv_series.drf(m, "NVOS32_ATTR_LOCATION", "PCI")),
        attr2=0 if vram else nv_series.drf(m, "NVOS32_ATTR2_GPU_CACHEABLE", "NO"))
      try: handle = self.rm_alloc(self.device, m.NV01_MEMORY_LOCAL_USER if vram else m.NV01_MEMORY_SYSTEM, p)
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

  def map_io(self, path: str, size: int, offset: int, what: str) -> Mem:
    """size bytes from offset of another PCI function's memory BAR (its sysfs resource file) in the GPU's address
    space: the BAR mapped into the process as I/O memory (os.map_bar_io), registered as an OS descriptor
    (RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: os_lock_user_pages fails on a VM_IO|VM_PFNMAP VMA and
    RmCreateOsDescriptor (escape.c) takes it as NVOS32_DESCRIPTOR_TYPE_OS_IO_MEMORY through os_lookup_user_io_memory
    (os-mlock.c); osCreateOsDescriptorFromIoMemory (osmemdesc.c) wants it UNCACHED and CONTIGUOUS, and, since
    os_desc_mem.c forces PEER_MAP_OVERRIDE_REQUIRED, a root process or nvidia.ko's PeerMappingOverride=1), then
    mapped at a GPU VA of hcq's range (RM_MAP_MEMORY_DMA, UVM external range) like any memory. The GPU's stores there
    are peer writes to the function. The process's I/O mapping is kept until free()."""
    size = round_up(size, PAGE)
    osi, m = self.os, self.rm
    try: io = osi.map_bar_io(path, size, offset, what)
    except OSCallError as e: raise DeviceError(f"{self.label}: cannot map {what} into the process: {e}") from None
    va = handle = None
    try:
      va = self._reserve(size, reserve_only=True)
      handle = self._handles = self._handles + 1
      a = m.nv_ioctl_nvos02_parameters_with_fd(params=m.NVOS02_PARAMETERS(
        hRoot=self.root, hObjectParent=self.device, hObjectNew=handle, hClass=m.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
        pMemory=io.addr, limit=size - 1, flags=nv_series.drf(m, "NVOS02_FLAGS_PHYSICALITY", "CONTIGUOUS") |
        nv_series.drf(m, "NVOS02_FLAGS_COHERENCY", "UNCACHED") | nv_series.drf(m, "NVOS02_FLAGS_MAPPING", "NO_MAP")),
        fd=-1)
      try: self._escape(self.dev, m.NV_ESC_RM_ALLOC_MEMORY, a, f"of {what} (I/O memory at {io.addr:#x}+{size:#x})")
      except RMError as e:
        if e.status_name == "NV_ERR_INSUFFICIENT_PERMISSIONS":
          raise DeviceError(f"{e}: nvidia.ko maps another device's BAR into a GPU only for root or with "
                            f"NVreg_RegistryDwords=\"PeerMappingOverride=1\" (osCreateOsDescriptorFromIoMemory)") from None
        raise
    except BaseException:
      if va is not None:
        osi.free_anon(va, size)
        self._unreserve(va)
      io.close()
      raise
    mem = Mem(va, size, handle, "io", None, fd=io)
    try: self._map_to_gpu(mem)
    except BaseException as e:
      try: self._release(mem)
      except (DeviceError, OSError) as cleanup: e.add_note(f"{self.label}: freeing it failed too: {cleanup}")
      raise
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
    m, u = self.rm, self.uvmabi
    self.uvm_call(u.UVM_CREATE_EXTERNAL_RANGE, u.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=mem.va, length=mem.size))
    a = m.NVOS46_PARAMETERS(hClient=self.root, hDevice=self.device, hDma=self.virtmem, hMemory=mem.handle, length=mem.size,
                            flags=nv_series.drf(m, "NVOS46_FLAGS_PAGE_SIZE", "4KB") |
                            nv_series.drf(m, "NVOS46_FLAGS_CACHE_SNOOP", "ENABLE") |
                            nv_series.drf(m, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE"), dmaOffset=mem.va)
    self._escape(self.ctl, m.NV_ESC_RM_MAP_MEMORY_DMA, a, f"of {mem.handle:#x} at {mem.va:#x}")
    if a.dmaOffset != mem.va:
      raise DeviceError(f"{self.label}: RM mapped memory {mem.handle:#x} at {a.dmaOffset:#x}, not at {mem.va:#x}")
    p = u.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=mem.va, length=mem.size, rmCtrlFd=self.ctl.fd, hClient=self.root,
                                               hMemory=mem.handle, gpuAttributesCount=1)
    abi.with_uuid(p.perGpuAttributes[0], "gpuUuid", self.uuid)
    p.perGpuAttributes[0].gpuMappingType = abi.UvmGpuMappingTypeReadWriteAtomic
    self.uvm_call(u.UVM_MAP_EXTERNAL_ALLOCATION, p)

  def free(self, mem: Mem) -> None:
    if self._mems.pop(mem.va, None) is None: raise DeviceError(f"{self.label}: free of unknown memory at {mem.va:#x}")
    self._release(mem)

  def _release(self, mem: Mem) -> None:
    mem.cpu = None
    errors = []
    u = self.uvmabi
    # UVM_FREE_PARAMS: base and length to 580, base alone at 590 (uvm_ioctl.h of each series)
    free = {"base": mem.va, **({"length": mem.size} if "length" in dict(u.UVM_FREE_PARAMS._fields_) else {})}
    for step in (lambda: self.uvm_call(u.UVM_FREE, u.UVM_FREE_PARAMS(**free)),
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
    m = self.rm
    p = m.NV_CHANNEL_ALLOC_PARAMS(hObjectError=notifier.handle, hObjectBuffer=area.handle, gpFifoOffset=area.va,
                                    gpFifoEntries=entries, hContextShare=self.ctxshare)
    p.hUserdMemory[0], p.userdOffset[0] = area.handle, entries * 8
    handle = self.rm_alloc(self.channel_group, self.gpfifo_class, p)
    engine = self.rm_alloc(handle, engine_class)
    token = self.rm_control(handle, m.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                            m.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()).workSubmitToken
    self.uvm_call(self.uvmabi.UVM_REGISTER_CHANNEL, abi.with_uuid(self.uvmabi.UVM_REGISTER_CHANNEL_PARAMS(
      rmCtrlFd=self.ctl.fd, hClient=self.root, hChannel=handle, base=self._channel_va, length=CHANNEL_VA_SIZE),
      "gpuUuid", self.uuid))
    ch = Channel(handle, engine_class, engine, token, entries, area, notifier, area.cpu[:entries * 8],
                 area.cpu[entries * 8:entries * 8 + PAGE], self.doorbell)
    self._channels.append(ch)
    return ch

  def schedule(self) -> None:
    # 2 bytes to 570, 3 from 575 (bSkipEnable): the series' own struct (ctrla06fgpfifo.h)
    self.rm_control(self.channel_group, self.rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
                    self.rm.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))

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
    for name in ("_usermode_fd", "dev", "uvm_mm", "uvm", "ctl"):
      f = getattr(self, name, None)
      if f is not None:
        try: f.close()
        except OSError as e: errors.append(e)
        setattr(self, name, None)
    if errors: raise DeviceError(f"{self.label}: closing failed: {errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
