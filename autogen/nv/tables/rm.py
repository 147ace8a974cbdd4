"""The RM (resource manager) interface of nvidia.ko that no header Debian ships holds: the RM escape numbers, the
NVOS* call structs, the structs whose layout changed between driver releases, and the control commands a driver
issues. Layouts are chosen from the driver version the device reports (`for_version("580.159.03")`).

Sources, and what was read in them (NVIDIA/open-gpu-kernel-modules):
- src/nvidia/arch/nvalloc/unix/include/nv_escape.h (commit 1739a20e): every NV_ESC_RM_* number below.
- src/common/sdk/nvidia/inc/nvos.h at 560.28.03 (commit 448d5cc6) and at 590.48.01 (commit 877fd23c): NVOS46 (56 bytes
  at 560: flags @32, dmaOffset @40, status @48; 64 bytes at 590: flags2 @36, kindOverride @40, dmaOffset @48,
  status @56), NVOS54 (the same in both), NV_VASPACE_ALLOCATION_PARAMETERS at 590 (pasid @48, 56 bytes).
- src/common/sdk/nvidia/inc/alloc/alloc_channel.h at 590.48.01 (commit 877fd23c): NV_CHANNEL_ALLOC_PARAMS ends in
  tpcConfigID @360 (368 bytes); an earlier stored version (commit 337e28ef) ends at hmacNonce (360 bytes), as does
  nouveau's 535.113.01 copy in linux-source (hcq.autogen.nv.alloc_channel).
- NVOS00/02/21/33 and the fd wrappers: nvos.h / nv-unix-nvos-params-wrappers.h as restated, with offsets, in
  shared/reference/nv_qcom_usb_pci_smi.md §1.1 (not re-read here; the 535 copies in hcq.autogen.nv.nvos agree where
  nouveau has them).
Not verified against an NVIDIA file (no such tag is stored): which release first has the 580 layouts (the reference
digest, from tinygrad's 570/580 autogen, says NVOS46 and the VA space params grew in 580 and that 570 already has the
368-byte channel params), and the 610 NV_CHANNEL_ALLOC_PARAMS, which inserts hHandleVASpace @32 (376 bytes) per the
same digest.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import re

from hcq.errors import HCQError

# ---------------------------------------------------------------- escapes (nv_escape.h), issued as _IOWR('F', nr, size)
NV_IOCTL_MAGIC = ord("F")
ESCAPES = {
  "NV_ESC_RM_ALLOC_MEMORY": 0x27, "NV_ESC_RM_ALLOC_OBJECT": 0x28, "NV_ESC_RM_FREE": 0x29, "NV_ESC_RM_CONTROL": 0x2A,
  "NV_ESC_RM_ALLOC": 0x2B, "NV_ESC_RM_CONFIG_GET": 0x32, "NV_ESC_RM_CONFIG_SET": 0x33, "NV_ESC_RM_DUP_OBJECT": 0x34,
  "NV_ESC_RM_SHARE": 0x35, "NV_ESC_RM_CONFIG_GET_EX": 0x37, "NV_ESC_RM_CONFIG_SET_EX": 0x38,
  "NV_ESC_RM_I2C_ACCESS": 0x39, "NV_ESC_RM_IDLE_CHANNELS": 0x41, "NV_ESC_RM_VID_HEAP_CONTROL": 0x4A,
  "NV_ESC_RM_ACCESS_REGISTRY": 0x4D, "NV_ESC_RM_MAP_MEMORY": 0x4E, "NV_ESC_RM_UNMAP_MEMORY": 0x4F,
  "NV_ESC_RM_GET_EVENT_DATA": 0x52, "NV_ESC_RM_ALLOC_CONTEXT_DMA2": 0x54, "NV_ESC_RM_ADD_VBLANK_CALLBACK": 0x56,
  "NV_ESC_RM_MAP_MEMORY_DMA": 0x57, "NV_ESC_RM_UNMAP_MEMORY_DMA": 0x58, "NV_ESC_RM_BIND_CONTEXT_DMA": 0x59,
  "NV_ESC_RM_EXPORT_OBJECT_TO_FD": 0x5C, "NV_ESC_RM_IMPORT_OBJECT_FROM_FD": 0x5D,
  "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO": 0x5E,
}
globals().update(ESCAPES)


def request(nr: int, size: int) -> int:
  """The ioctl request number of escape `nr` with an argument of `size` bytes: _IOWR('F', nr, size), the size in the
  14-bit _IOC size field (the escapes of base 200 are in hcq.autogen.nv.ioctl)."""
  if not 0 <= size < (1 << 14): raise HCQError(f"NV escape {nr:#x}: argument of {size} bytes does not fit _IOC's size field")
  return (3 << 30) | (size << 16) | (NV_IOCTL_MAGIC << 8) | nr


# ---------------------------------------------------------------- structs
NvHandle = ctypes.c_uint32
U32, U64 = ctypes.c_uint32, ctypes.c_uint64


def _struct(name: str, fields: list) -> type:
  # x86-64 natural alignment is what NV_ALIGN_BYTES(8) asks of the 64-bit members: no _pack_
  return type(name, (ctypes.Structure,), {"_fields_": fields})


NVOS00_PARAMETERS = _struct("NVOS00_PARAMETERS", [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                                                 ("hObjectOld", NvHandle), ("status", U32)])
NVOS02_PARAMETERS = _struct("NVOS02_PARAMETERS", [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                                                 ("hObjectNew", NvHandle), ("hClass", U32), ("flags", U32),
                                                 ("pMemory", U64), ("limit", U64), ("status", U32)])
NVOS21_PARAMETERS = _struct("NVOS21_PARAMETERS", [("hRoot", NvHandle), ("hObjectParent", NvHandle),
                                                 ("hObjectNew", NvHandle), ("hClass", U32), ("pAllocParms", U64),
                                                 ("paramsSize", U32), ("status", U32)])
NVOS33_PARAMETERS = _struct("NVOS33_PARAMETERS", [("hClient", NvHandle), ("hDevice", NvHandle), ("hMemory", NvHandle),
                                                 ("offset", U64), ("length", U64), ("pLinearAddress", U64),
                                                 ("status", U32), ("flags", U32)])
NVOS54_PARAMETERS = _struct("NVOS54_PARAMETERS", [("hClient", NvHandle), ("hObject", NvHandle), ("cmd", U32),
                                                 ("flags", U32), ("params", U64), ("paramsSize", U32), ("status", U32)])
# nv-unix-nvos-params-wrappers.h: the calls that map or describe memory carry the fd the mapping belongs to
NV_IOCTL_NVOS02_PARAMETERS_WITH_FD = _struct("nv_ioctl_nvos02_parameters_with_fd",
                                             [("params", NVOS02_PARAMETERS), ("fd", ctypes.c_int)])
NV_IOCTL_NVOS33_PARAMETERS_WITH_FD = _struct("nv_ioctl_nvos33_parameters_with_fd",
                                             [("params", NVOS33_PARAMETERS), ("fd", ctypes.c_int)])

_NVOS46_HEAD = [("hClient", NvHandle), ("hDevice", NvHandle), ("hDma", NvHandle), ("hMemory", NvHandle),
                ("offset", U64), ("length", U64), ("flags", U32)]
NVOS46_PARAMETERS_V550 = _struct("NVOS46_PARAMETERS", _NVOS46_HEAD + [("dmaOffset", U64), ("status", U32)])
NVOS46_PARAMETERS_V580 = _struct("NVOS46_PARAMETERS", _NVOS46_HEAD + [("flags2", U32), ("kindOverride", U32),
                                                                      ("dmaOffset", U64), ("status", U32)])

_VASPACE = [("index", U32), ("flags", U32), ("vaSize", U64), ("vaStartInternal", U64), ("vaLimitInternal", U64),
            ("bigPageSize", U32), ("vaBase", U64)]
NV_VASPACE_ALLOCATION_PARAMETERS_V550 = _struct("NV_VASPACE_ALLOCATION_PARAMETERS", _VASPACE)
NV_VASPACE_ALLOCATION_PARAMETERS_V580 = _struct("NV_VASPACE_ALLOCATION_PARAMETERS", _VASPACE + [("pasid", U32)])

NV_MAX_SUBDEVICES = 8
NV_MEMORY_DESC_PARAMS = _struct("NV_MEMORY_DESC_PARAMS", [("base", U64), ("size", U64), ("addressSpace", U32),
                                                          ("cacheAttrib", U32)])


def _channel_fields(vaspace_handle: bool, tpc_config: bool) -> list:
  head = [("hObjectError", NvHandle), ("hObjectBuffer", NvHandle), ("gpFifoOffset", U64), ("gpFifoEntries", U32),
          ("flags", U32), ("hContextShare", NvHandle), ("hVASpace", NvHandle)]
  if vaspace_handle: head.append(("hHandleVASpace", NvHandle))
  body = [("hUserdMemory", NvHandle * NV_MAX_SUBDEVICES), ("userdOffset", U64 * NV_MAX_SUBDEVICES),
          ("engineType", U32), ("cid", U32), ("subDeviceId", U32), ("hObjectEccError", NvHandle),
          ("instanceMem", NV_MEMORY_DESC_PARAMS), ("userdMem", NV_MEMORY_DESC_PARAMS),
          ("ramfcMem", NV_MEMORY_DESC_PARAMS), ("mthdbufMem", NV_MEMORY_DESC_PARAMS),
          ("hPhysChannelGroup", NvHandle), ("internalFlags", U32), ("errorNotifierMem", NV_MEMORY_DESC_PARAMS),
          ("eccErrorNotifierMem", NV_MEMORY_DESC_PARAMS), ("ProcessID", U32), ("SubProcessID", U32),
          ("encryptIv", U32 * 3), ("decryptIv", U32 * 3), ("hmacNonce", U32 * 8)]
  if tpc_config: body.append(("tpcConfigID", U32))
  return head + body


NV_CHANNEL_ALLOC_PARAMS_V550 = _struct("NV_CHANNEL_ALLOC_PARAMS", _channel_fields(False, False))
NV_CHANNEL_ALLOC_PARAMS_V570 = _struct("NV_CHANNEL_ALLOC_PARAMS", _channel_fields(False, True))
NV_CHANNEL_ALLOC_PARAMS_V610 = _struct("NV_CHANNEL_ALLOC_PARAMS", _channel_fields(True, True))


@dataclasses.dataclass(frozen=True)
class Layouts:
  """The structs of one driver release; `version` is the (major, minor, patch) they were chosen for."""
  version: tuple
  NVOS46_PARAMETERS: type
  NV_VASPACE_ALLOCATION_PARAMETERS: type
  NV_CHANNEL_ALLOC_PARAMS: type
  NVOS00_PARAMETERS: type = NVOS00_PARAMETERS
  NVOS02_PARAMETERS: type = NVOS02_PARAMETERS
  NVOS21_PARAMETERS: type = NVOS21_PARAMETERS
  NVOS33_PARAMETERS: type = NVOS33_PARAMETERS
  NVOS54_PARAMETERS: type = NVOS54_PARAMETERS
  nv_ioctl_nvos02_parameters_with_fd: type = NV_IOCTL_NVOS02_PARAMETERS_WITH_FD
  nv_ioctl_nvos33_parameters_with_fd: type = NV_IOCTL_NVOS33_PARAMETERS_WITH_FD

  def request(self, escape: str) -> int:
    """The request number of an RM escape with this release's argument struct (MAP_MEMORY_DMA's changes in 580)."""
    arg = {"NV_ESC_RM_ALLOC_MEMORY": self.nv_ioctl_nvos02_parameters_with_fd, "NV_ESC_RM_FREE": self.NVOS00_PARAMETERS,
           "NV_ESC_RM_CONTROL": self.NVOS54_PARAMETERS, "NV_ESC_RM_ALLOC": self.NVOS21_PARAMETERS,
           "NV_ESC_RM_MAP_MEMORY": self.nv_ioctl_nvos33_parameters_with_fd,
           "NV_ESC_RM_MAP_MEMORY_DMA": self.NVOS46_PARAMETERS}.get(escape)
    if arg is None: raise HCQError(f"no argument struct known for {escape}")
    return request(ESCAPES[escape], ctypes.sizeof(arg))


# the releases these layouts were read for or derived for (see the module docstring); a major between two of them
# has the layouts of the one below (a struct changes only at one of them), one outside them is refused: a newer driver
# may have changed any of the structs, and a wrong layout is an EINVAL at best, a misread reply at worst
SUPPORTED_MAJORS = (535, 550, 560, 570, 575, 580, 590, 610)


def parse_version(version: str) -> tuple:
  """'580.159.03' -> (580, 159, 3); the driver's build version string as NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2
  returns it (a trailing NUL or text after the number is ignored)."""
  m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", version if isinstance(version, str) else "")
  if not m: raise HCQError(f"NVIDIA driver version {version!r} is not of the form MAJOR.MINOR[.PATCH]")
  return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


@functools.lru_cache(maxsize=None)
def for_version(version: str) -> Layouts:
  """The struct layouts of the driver release `version`. Releases before 535 and after the newest of
  SUPPORTED_MAJORS are refused (their layouts are not described here)."""
  v = parse_version(version)
  major = v[0]
  if major < SUPPORTED_MAJORS[0]:
    raise HCQError(f"NVIDIA driver {version}: releases before {SUPPORTED_MAJORS[0]} are not supported (layouts unknown)")
  if major > SUPPORTED_MAJORS[-1]:
    raise HCQError(f"NVIDIA driver {version}: releases after {SUPPORTED_MAJORS[-1]} are not supported yet (their RM "
                   f"struct layouts are unknown to hcq: autogen/nv/tables/rm.py)")
  return Layouts(version=v,
                 NVOS46_PARAMETERS=NVOS46_PARAMETERS_V580 if major >= 580 else NVOS46_PARAMETERS_V550,
                 NV_VASPACE_ALLOCATION_PARAMETERS=(NV_VASPACE_ALLOCATION_PARAMETERS_V580 if major >= 580
                                                   else NV_VASPACE_ALLOCATION_PARAMETERS_V550),
                 NV_CHANNEL_ALLOC_PARAMS=(NV_CHANNEL_ALLOC_PARAMS_V610 if major >= 610 else
                                          NV_CHANNEL_ALLOC_PARAMS_V570 if major >= 570 else NV_CHANNEL_ALLOC_PARAMS_V550))


# ---------------------------------------------------------------- classes the RM object tree uses (not compute/copy)
CLASSES = {
  "NV01_ROOT_CLIENT": 0x41, "NV01_DEVICE_0": 0x80, "NV20_SUBDEVICE_0": 0x2080, "NV01_MEMORY_SYSTEM": 0x3E,
  "NV01_MEMORY_LOCAL_USER": 0x40, "NV01_MEMORY_VIRTUAL": 0x70, "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR": 0x71,
  "FERMI_CONTEXT_SHARE_A": 0x9067, "FERMI_VASPACE_A": 0x90F1, "KEPLER_CHANNEL_GROUP_A": 0xA06C,
  "GT200_DEBUGGER": 0x83DE, "TURING_USERMODE_A": 0xC461, "AMPERE_USERMODE_A": 0xC561, "HOPPER_USERMODE_A": 0xC661,
  "BLACKWELL_USERMODE_A": 0xC761,
}

# ---------------------------------------------------------------- control commands: (interface << 8) | message id
# Read in NVIDIA's headers (found by text search, the finn-generated form): NV0080_CTRL_CMD_GPU_GET_CLASSLIST(_V2)
# (ctrl0080gpu.h), NV2080_CTRL_CMD_GR_GET_INFO and its params (ctrl2080gr.h), NVA06C_CTRL_CMD_GPFIFO_SCHEDULE
# (ctrla06c.h: its params are NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS); NVA06F_* are also in the gcc-checked
# hcq.autogen.nv.ctrla06f. The others' numbers are the reference digest's (§1.3), not re-read here.
CONTROLS = {
  "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2": 0x13E,
  "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2": 0x205,
  "NV0080_CTRL_CMD_GPU_GET_CLASSLIST": 0x800201,
  "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2": 0x800292,
  "NV2080_CTRL_CMD_GPU_GET_GID_INFO": 0x2080014A,
  "NV2080_CTRL_CMD_GR_GET_INFO": 0x20801201,
  "NV2080_CTRL_CMD_FB_FLUSH_GPU_CACHE": 0x2080130E,
  "NV2080_CTRL_CMD_PERF_BOOST": 0x2080200A,
  "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN": 0xC36F0108,
  "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE": 0xA06C0101,
  "NVA06F_CTRL_CMD_GPFIFO_SCHEDULE": 0xA06F0103,
  "NVA06F_CTRL_CMD_BIND": 0xA06F0104,
}
globals().update(CONTROLS)

# NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS (ctrl0080gpu.h): a pointer to a caller's array, the same size in every release;
# the _V2 form embeds NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE entries, and that size changed (100 in one stored release,
# 116 in another): prefer the pointer form.
NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS = _struct("NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS",
                                               [("numClasses", U32), ("classList", U64)])
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS = _struct("NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS",
                                                              [("workSubmitToken", U32)])
NV2080_CTRL_GR_ROUTE_INFO = _struct("NV2080_CTRL_GR_ROUTE_INFO", [("flags", U32), ("route", U64)])
NV2080_CTRL_GR_INFO = _struct("NV2080_CTRL_GR_INFO", [("index", U32), ("data", U32)])
NV2080_CTRL_GR_GET_INFO_PARAMS = _struct("NV2080_CTRL_GR_GET_INFO_PARAMS", [("grInfoListSize", U32),
                                                                           ("grInfoList", U64),
                                                                           ("grRouteInfo", NV2080_CTRL_GR_ROUTE_INFO)])
NV2080_CTRL_GPU_GET_GID_INFO_PARAMS = _struct("NV2080_CTRL_GPU_GET_GID_INFO_PARAMS", [("index", U32), ("flags", U32),
                                                                                     ("length", U32),
                                                                                     ("data", ctypes.c_uint8 * 256)])
# NV2080_CTRL_GR_INFO_INDEX_* are NV0080_CTRL_GR_INFO_INDEX_* (ctrl2080gr.h defines them so); the numbers are
# ctrl0080gr.h's (open-gpu-kernel-modules src/common/sdk/nvidia/inc/ctrl/ctrl0080/ctrl0080gr.h, found by text search)
GR_INFO_INDEX = {"SM_VERSION": 0x0C, "MAX_WARPS_PER_SM": 0x0D, "MAX_THREADS_PER_WARP": 0x0E, "MAX_SP_PER_SM": 0x13,
                 "LITTER_NUM_GPCS": 0x14, "LITTER_NUM_FBPS": 0x15, "LITTER_NUM_TPC_PER_GPC": 0x17,
                 "GPU_CORE_COUNT": 0x1D, "LITTER_NUM_SM_PER_TPC": 0x20}
NV2080_CTRL_GPU_GID_FLAGS_FORMAT_BINARY = 2


def __getattr__(name):
  # ctrla06c.h: typedef NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS (the gcc-checked binding)
  if name == "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS":
    from hcq.autogen.nv import ctrla06f
    return ctrla06f.NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")      # flags bit 1:1 FORMAT = BINARY (16 raw UUID bytes)


@functools.lru_cache(maxsize=1)
def _status_names() -> dict:
  from hcq.autogen.nv import nvstatus
  return {v: k for k, v in vars(nvstatus).items() if k.startswith(("NV_OK", "NV_ERR_", "NV_WARN_")) and type(v) is int}


def status_name(status: int) -> str:
  """The NV_STATUS name of an RM status (nvstatuscodes.h, generated: hcq.autogen.nv.nvstatus), e.g.
  0x33 -> 'NV_ERR_INVALID_OBJECT_HANDLE'; an unknown code as 'NV status 0x...'."""
  return _status_names().get(status, f"NV status {status:#x}")


def control_name(cmd: int) -> str:
  """The name of a control command number, or its hex value (for error messages)."""
  for name, value in CONTROLS.items():
    if value == cmd: return name
  return f"control {cmd:#x}"
