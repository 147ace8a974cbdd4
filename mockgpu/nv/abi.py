"""The nvidia.ko user ABI as the mock NV GPU models it: escape numbers and names, classes, NV status codes.

Every size the mock checks (the escapes' call structs, control and alloc params, UVM params) is the claimed release's,
from the modules generated from NVIDIA's headers at that release's tag (hcq.autogen.nv.series: rm.py's RMModel.m and
.u); what is the same in every release is the ABI both sides share, autogen/nv/rm_abi.py (the mock may not import the
driver, and the driver never knows the mock)."""


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


from ...autogen.nv.rm_abi import CARD_INFO, CARD_INFO_ARRAY, MAX_CARDS, PCI_INFO, REGISTER_FD  # noqa: E402,F401

# ---- classes (g_allclasses.h): the shared table
from ...autogen.nv.rm_abi import (  # noqa: E402,F401
  NV01_ROOT_CLIENT, NV01_DEVICE_0, NV20_SUBDEVICE_0, NV01_MEMORY_SYSTEM, NV1_MEMORY_USER, NV01_MEMORY_VIRTUAL,
  NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, FERMI_VASPACE_A, KEPLER_CHANNEL_GROUP_A, FERMI_CONTEXT_SHARE_A, TURING_USERMODE_A,
  AMPERE_USERMODE_A, HOPPER_USERMODE_A, BLACKWELL_USERMODE_A, AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A,
  BLACKWELL_CHANNEL_GPFIFO_A, AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A, BLACKWELL_COMPUTE_A, AMPERE_DMA_COPY_B,
  HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A, USERMODE_CLASSES, GPFIFO_CLASSES, COMPUTE_CLASSES, COPY_CLASSES, CLASS_NAMES,
  class_name)


# ---- flags, control numbers, UVM request numbers and status codes: the ABI the driver uses too (autogen/nv/rm_abi.py);
# the structs of the claimed release are rm.py's RMModel.m / .u (generated per series)
from ...autogen.nv.rm_abi import (  # noqa: E402,F401
  NV0080_ALLOC_PARAMETERS, NV2080_ALLOC_PARAMETERS, NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING,
  NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED, NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS,
  NV_CTXSHARE_ALLOCATION_PARAMETERS, NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC, NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS,
  NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
  NV2080_CTRL_CMD_GPU_GET_GID_INFO, NV2080_CTRL_CMD_GR_GET_INFO, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
  NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS,
  NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS, NV2080_CTRL_GPU_GET_GID_INFO_PARAMS, NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY,
  NV2080_CTRL_GR_INFO, NV2080_CTRL_GR_ROUTE_INFO, NV2080_CTRL_GR_GET_INFO_PARAMS,
  NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
  NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC, NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
  NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS,
  UVM_INITIALIZE, UVM_DEINITIALIZE, UVM_REGISTER_GPU_VASPACE, UVM_REGISTER_CHANNEL, UVM_MAP_EXTERNAL_ALLOCATION, UVM_FREE,
  UVM_REGISTER_GPU, UVM_CREATE_EXTERNAL_RANGE, UVM_MM_INITIALIZE, UVM_NAMES, UUID, UVM_MAX_GPUS,
  UvmGpuMappingTypeReadWriteAtomic, NV_OK, NV_STATUS_NAMES, NV_ERR_NO_MEMORY, with_uuid, status_name)

from ctypes import c_uint32  # noqa: E402
from ...autogen.nv.rm_abi import _struct  # noqa: E402

# ---- GT200_DEBUGGER (cl83de.h, open-gpu-kernel-modules 580.105.08): an SM debugger session on a compute object, under a
# Device (resource_list.h: Parents RS_LIST(classId(Device)), RS_REQUIRED(NV83DE_ALLOC_PARAMETERS)); every GPU's class
# list has it (g_gpu_class_list.c: gpuGetNoEngClassList_AD102 / _GH100). cl83de.h is not among the generated headers.
GT200_DEBUGGER = 0x83DE
NV83DE_ALLOC_PARAMETERS = _struct("NV83DE_ALLOC_PARAMETERS", [("hDebuggerClient_Obsolete", c_uint32),
                                                              ("hAppClient", c_uint32), ("hClass3dObject", c_uint32)])
