"""The nvidia.ko user ABI as the mock NV GPU models it: escape numbers, RM parameter structs, UVM requests, classes,
NV status codes.

The RM call structs and escapes the model decodes (flattened fd wrappers, the 570 and 580 NVOS46) are the mock's own
(tests/nv/test_mock_facts.py holds them equal to autogen/nv/tables/rm.py, the driver's); the rest is the ABI both
share, autogen/nv/rm_abi.py (the mock may not import the driver, and the driver never knows the mock)."""

import ctypes
from ctypes import c_char, c_int32, c_uint8, c_uint16, c_uint32, c_uint64

from ...autogen.nv import alloc_channel, cl0080, cl2080, nvstatus, uvm

# ---- escapes (nv_escape.h, nv-ioctl-numbers.h): _IOC(READ|WRITE, 'F', nr, sizeof(arg))
NV_IOCTL_MAGIC = ord("F")
NV_ESC_RM_ALLOC_MEMORY, NV_ESC_RM_FREE, NV_ESC_RM_CONTROL, NV_ESC_RM_ALLOC = 0x27, 0x29, 0x2A, 0x2B
NV_ESC_RM_MAP_MEMORY, NV_ESC_RM_UNMAP_MEMORY, NV_ESC_RM_MAP_MEMORY_DMA, NV_ESC_RM_UNMAP_MEMORY_DMA = 0x4E, 0x4F, 0x57, 0x58
NV_ESC_CARD_INFO, NV_ESC_REGISTER_FD = 200, 201
ESCAPE_NAMES = {NV_ESC_RM_ALLOC_MEMORY: "NV_ESC_RM_ALLOC_MEMORY", NV_ESC_RM_FREE: "NV_ESC_RM_FREE",
                NV_ESC_RM_CONTROL: "NV_ESC_RM_CONTROL", NV_ESC_RM_ALLOC: "NV_ESC_RM_ALLOC",
                NV_ESC_RM_MAP_MEMORY: "NV_ESC_RM_MAP_MEMORY", NV_ESC_RM_UNMAP_MEMORY: "NV_ESC_RM_UNMAP_MEMORY",
                NV_ESC_RM_MAP_MEMORY_DMA: "NV_ESC_RM_MAP_MEMORY_DMA",
                NV_ESC_RM_UNMAP_MEMORY_DMA: "NV_ESC_RM_UNMAP_MEMORY_DMA", NV_ESC_CARD_INFO: "NV_ESC_CARD_INFO",
                NV_ESC_REGISTER_FD: "NV_ESC_REGISTER_FD"}


from ...autogen.nv.tables.rm import request as escape_request  # noqa: E402,F401  (_IOWR('F', nr, size))


class _S(ctypes.Structure):
  _pack_ = 8


def _struct(name: str, fields: list) -> type:
  return type(name, (_S,), {"_fields_": fields})


NVOS00 = _struct("NVOS00_PARAMETERS", [("hRoot", c_uint32), ("hObjectParent", c_uint32), ("hObjectOld", c_uint32),
                                       ("status", c_uint32)])
NVOS21 = _struct("NVOS21_PARAMETERS", [("hRoot", c_uint32), ("hObjectParent", c_uint32), ("hObjectNew", c_uint32),
                                       ("hClass", c_uint32), ("pAllocParms", c_uint64), ("paramsSize", c_uint32),
                                       ("status", c_uint32)])
NVOS54 = _struct("NVOS54_PARAMETERS", [("hClient", c_uint32), ("hObject", c_uint32), ("cmd", c_uint32),
                                       ("flags", c_uint32), ("params", c_uint64), ("paramsSize", c_uint32),
                                       ("status", c_uint32)])
# NVOS02 with the unix layer's fd wrapper (nv_ioctl_nvos02_parameters_with_fd)
NVOS02_FD = _struct("NVOS02_PARAMETERS_WITH_FD", [("hRoot", c_uint32), ("hObjectParent", c_uint32),
                                                  ("hObjectNew", c_uint32), ("hClass", c_uint32), ("flags", c_uint32),
                                                  ("pMemory", c_uint64), ("limit", c_uint64), ("status", c_uint32),
                                                  ("_pad", c_uint32), ("fd", c_int32)])
NVOS33_FD = _struct("NVOS33_PARAMETERS_WITH_FD", [("hClient", c_uint32), ("hDevice", c_uint32), ("hMemory", c_uint32),
                                                  ("offset", c_uint64), ("length", c_uint64),
                                                  ("pLinearAddress", c_uint64), ("status", c_uint32),
                                                  ("flags", c_uint32), ("fd", c_int32)])
# NVOS46 grew flags2/kindOverride in 580 (section 1.7): dmaOffset 40 -> 48, status 48 -> 56
NVOS46_570 = _struct("NVOS46_PARAMETERS_570", [("hClient", c_uint32), ("hDevice", c_uint32), ("hDma", c_uint32),
                                               ("hMemory", c_uint32), ("offset", c_uint64), ("length", c_uint64),
                                               ("flags", c_uint32), ("dmaOffset", c_uint64), ("status", c_uint32)])
NVOS46_580 = _struct("NVOS46_PARAMETERS_580", [("hClient", c_uint32), ("hDevice", c_uint32), ("hDma", c_uint32),
                                               ("hMemory", c_uint32), ("offset", c_uint64), ("length", c_uint64),
                                               ("flags", c_uint32), ("flags2", c_uint32), ("kindOverride", c_uint32),
                                               ("dmaOffset", c_uint64), ("status", c_uint32)])
from ...autogen.nv.rm_abi import CARD_INFO, CARD_INFO_ARRAY, MAX_CARDS, PCI_INFO, REGISTER_FD  # noqa: E402,F401

# ---- classes (g_allclasses.h): the shared table
from ...autogen.nv.rm_abi import (  # noqa: E402,F401
  NV01_ROOT_CLIENT, NV01_DEVICE_0, NV20_SUBDEVICE_0, NV01_MEMORY_SYSTEM, NV1_MEMORY_USER, NV01_MEMORY_VIRTUAL,
  NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, FERMI_VASPACE_A, KEPLER_CHANNEL_GROUP_A, FERMI_CONTEXT_SHARE_A, TURING_USERMODE_A,
  AMPERE_USERMODE_A, HOPPER_USERMODE_A, BLACKWELL_USERMODE_A, AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A,
  BLACKWELL_CHANNEL_GPFIFO_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A, BLACKWELL_COMPUTE_A, AMPERE_DMA_COPY_B,
  HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A, USERMODE_CLASSES, GPFIFO_CLASSES, COMPUTE_CLASSES, COPY_CLASSES, CLASS_NAMES,
  class_name)


# ---- alloc parameters, controls, UVM and status codes: the ABI the driver uses too (autogen/nv/rm_abi.py); the mock
# keeps only the release-specific layouts it models (an H200 with driver 580): NV_CHANNEL_ALLOC_PARAMS 570/580
# (610 inserts hHandleVASpace) and NV_VASPACE_ALLOCATION_PARAMETERS with 580's pasid at 48 (reference section 1.7)
from ...autogen.nv.rm_abi import (  # noqa: E402,F401
  NV0080_ALLOC_PARAMETERS, NV2080_ALLOC_PARAMETERS, NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING,
  NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED, NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS,
  NV_CTXSHARE_ALLOCATION_PARAMETERS, NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC, NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS,
  NV_MEMORY_ALLOCATION_PARAMS, NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED, NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED,
  NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS, NVOS32_ATTR_LOCATION_PCI, NVOS32_ATTR2_GPU_CACHEABLE_NO, NVOS32_TYPE_IMAGE,
  NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS, NVOS02_FLAGS_COHERENCY_CACHED, NVOS46_FLAGS_PAGE_SIZE_4KB,
  NVOS46_FLAGS_CACHE_SNOOP_ENABLE, NVOS46_FLAGS_DMA_OFFSET_FIXED,
  NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
  NV2080_CTRL_CMD_GPU_GET_GID_INFO, NV2080_CTRL_CMD_GR_GET_INFO, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
  NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS, NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS,
  NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS, NV2080_CTRL_GPU_GET_GID_INFO_PARAMS, NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY,
  NV2080_CTRL_GR_INFO, NV2080_CTRL_GR_ROUTE_INFO, NV2080_CTRL_GR_GET_INFO_PARAMS,
  NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
  NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC, NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
  NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS,
  NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS,
  UVM_INITIALIZE, UVM_DEINITIALIZE, UVM_REGISTER_GPU_VASPACE, UVM_REGISTER_CHANNEL, UVM_MAP_EXTERNAL_ALLOCATION, UVM_FREE,
  UVM_REGISTER_GPU, UVM_CREATE_EXTERNAL_RANGE, UVM_MM_INITIALIZE, UVM_NAMES, UUID, UVM_INITIALIZE_PARAMS,
  UVM_REGISTER_GPU_PARAMS, UVM_REGISTER_GPU_VASPACE_PARAMS, UVM_REGISTER_CHANNEL_PARAMS, UVM_CREATE_EXTERNAL_RANGE_PARAMS,
  UVM_FREE_PARAMS, UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, UVM_MM_INITIALIZE_PARAMS, UVM_GPU_MAPPING_ATTRIBUTES, UVM_MAX_GPUS,
  UvmGpuMappingTypeReadWriteAtomic, NV_OK, NV_STATUS_NAMES, NV_ERR_NO_MEMORY, with_uuid, status_name)
NV_CHANNEL_ALLOC_PARAMS = alloc_channel.NV_CHANNEL_ALLOC_PARAMS
NV_VASPACE_ALLOCATION_PARAMETERS = _struct("NV_VASPACE_ALLOCATION_PARAMETERS", [
  ("index", c_uint32), ("flags", c_uint32), ("vaSize", c_uint64), ("vaStartInternal", c_uint64),
  ("vaLimitInternal", c_uint64), ("bigPageSize", c_uint32), ("vaBase", c_uint64), ("pasid", c_uint32)])

# ---- NV2080_CTRL_CMD_PERF_BOOST (ctrl2080perf.h, open-gpu-kernel-modules 580.105.08): the P-state boost CUDA and
# tinygrad ask for at open; RM forwards flags/duration to GSP (kern_perf_boost.c, subdeviceCtrlCmdKPerfBoost_IMPL)
NV2080_CTRL_CMD_PERF_BOOST = 0x2080200A
NV2080_CTRL_PERF_BOOST_PARAMS = _struct("NV2080_CTRL_PERF_BOOST_PARAMS", [("flags", c_uint32), ("duration", c_uint32)])
NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX = 2        # flags 1:0: CLEAR 0, BOOST_1LEVEL 1, BOOST_TO_MAX 2
NV2080_CTRL_PERF_BOOST_DURATION_MAX = 3600               # seconds
NV2080_CTRL_PERF_BOOST_DURATION_INFINITE = 0xFFFFFFFF    # until cleared

# ---- GT200_DEBUGGER (cl83de.h, 580.105.08): an SM debugger session on a compute object, under a Device
# (resource_list.h: Parents RS_LIST(classId(Device)), RS_REQUIRED(NV83DE_ALLOC_PARAMETERS)); every GPU's class list
# has it (g_gpu_class_list.c: gpuGetNoEngClassList_AD102 / _GH100)
GT200_DEBUGGER = 0x83DE
NV83DE_ALLOC_PARAMETERS = _struct("NV83DE_ALLOC_PARAMETERS", [("hDebuggerClient_Obsolete", c_uint32),
                                                              ("hAppClient", c_uint32), ("hClass3dObject", c_uint32)])

# ---- control layouts that changed between releases: the mock claims 580 (props.driver_version), whose structs are
# the shared ABI's _560 / _575 ones (ctrl0000system.h driverBranch since 560, ctrla06fgpfifo.h bSkipEnable since 575;
# RM refuses any other paramsSize: resControlLookup, rs_resource.c)
from ...autogen.nv.rm_abi import (NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS_560,  # noqa: E402,F401
                                  NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS_575)
