"""The RM (resource manager) numbers of nvidia.ko that every release shares: the RM escape numbers, the classes of the
RM object tree and the control commands a driver issues, with names for error messages.

Every struct and flag whose layout a release may change (NVOS46 grew at 580, GET_BUILD_VERSION_V2 at 570,
GPFIFO_SCHEDULE at 575, the VA space params at 580, UVM_FREE at 590) is no longer here: the driver and the mock take
them from the modules generated from NVIDIA's own headers at each release tag (hcq.autogen.nv.series: rm_<series>,
uvm_<series>, gcc-checked). tests/nv/tables/test_nv_rm_table.py holds the numbers below equal to those modules' in
every series.

Sources: src/nvidia/arch/nvalloc/unix/include/nv_escape.h (NV_ESC_RM_*); ctrl0080gpu.h, ctrl2080gr.h, ctrla06c.h,
ctrla06fgpfifo.h, ctrlc36f.h, ctrl0000system.h, ctrl0000gpu.h, ctrl2080gpu.h, ctrl2080fb.h, ctrl2080perf.h (controls);
g_allclasses.h / class/cl*.h (classes), NVIDIA/open-gpu-kernel-modules.
"""
from __future__ import annotations

import ctypes
import functools

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


NvHandle = ctypes.c_uint32
U32, U64 = ctypes.c_uint32, ctypes.c_uint64


def _struct(name: str, fields: list) -> type:
  # x86-64 natural alignment is what NV_ALIGN_BYTES(8) asks of the 64-bit members: no _pack_
  return type(name, (ctypes.Structure,), {"_fields_": fields})


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
