"""The nvidia.ko user ABI hcq's NV driver uses and the mock NV GPU models (hand-written, cited; shared by both, which
may each import autogen but not each other): escape numbers, RM parameter structs, UVM requests, class numbers,
NV status names.

Partly hand-written (the layouts of shared/reference/nv_qcom_usb_pci_smi.md sections 1.1-1.4: card info, the
channel group / context share / memory alloc params), partly taken from the bindings: the nouveau RM SDK structs of
autogen/nv (NV0080/NV2080 alloc params), the NV status names (autogen/nv/nvstatus), the UVM params, and, where
NVIDIA's headers were read by the nvbind helper, autogen/nv/tables: the escape numbers and the NVOS call structs,
including the release-specific NVOS46 / VA space / channel params, are tables/rm.py's only (rm.py uses
tables.rm.for_version's Layouts for every call struct). The mock imports this module (mockgpu/nv/abi.py adds what only the model needs). Still to replace by generated bindings: the UVM params (autogen/nv/uvm) and NV_MEMORY_ALLOCATION_PARAMS."""
from __future__ import annotations

import ctypes
from ctypes import c_char, c_int32, c_uint8, c_uint16, c_uint32, c_uint64

from . import cl0080, cl2080, ioctl, nvstatus, uvm

# ---- escapes: the RM escape numbers, their request numbers and the NVOS call structs are autogen/nv/tables/rm.py's
# (the structs per driver release: RMIface.layouts = tables.rm.for_version(...)); the escapes of base 200 are
# nv-ioctl-numbers.h's (hcq.autogen.nv.ioctl)
from .tables.rm import (ESCAPES as _RM_ESCAPES, NV_ESC_RM_ALLOC, NV_ESC_RM_ALLOC_MEMORY,  # noqa: F401
                        NV_ESC_RM_CONTROL, NV_ESC_RM_FREE, NV_ESC_RM_MAP_MEMORY, NV_ESC_RM_MAP_MEMORY_DMA, NV_ESC_RM_UNMAP_MEMORY,
                        NV_ESC_RM_UNMAP_MEMORY_DMA, NV_IOCTL_MAGIC, request as escape_request)
NV_ESC_CARD_INFO, NV_ESC_REGISTER_FD = ioctl.NV_ESC_CARD_INFO, ioctl.NV_ESC_REGISTER_FD
_ESCAPE_NAMES = {**{nr: name for name, nr in _RM_ESCAPES.items()}, NV_ESC_CARD_INFO: "NV_ESC_CARD_INFO",
                 NV_ESC_REGISTER_FD: "NV_ESC_REGISTER_FD"}


def escape_name(nr: int) -> str: return _ESCAPE_NAMES.get(nr, f"escape {nr:#x}")


class _S(ctypes.Structure):
  _pack_ = 8


def _struct(name: str, fields: list) -> type:
  return type(name, (_S,), {"_fields_": fields})


PCI_INFO = _struct("nv_pci_info", [("domain", c_uint32), ("bus", c_uint8), ("slot", c_uint8), ("function", c_uint8),
                                   ("vendor_id", c_uint16), ("device_id", c_uint16)])
CARD_INFO = _struct("nv_ioctl_card_info", [("valid", c_uint8), ("pci_info", PCI_INFO), ("gpu_id", c_uint32),
                                           ("interrupt_line", c_uint16), ("reg_address", c_uint64),
                                           ("reg_size", c_uint64), ("fb_address", c_uint64), ("fb_size", c_uint64),
                                           ("minor_number", c_uint32), ("dev_name", c_char * 10)])
MAX_CARDS = 64
CARD_INFO_ARRAY = CARD_INFO * MAX_CARDS
REGISTER_FD = _struct("nv_ioctl_register_fd", [("ctl_fd", c_int32)])

# ---- classes (g_allclasses.h)
NV01_ROOT_CLIENT, NV01_DEVICE_0, NV20_SUBDEVICE_0 = 0x41, 0x80, 0x2080
NV01_MEMORY_SYSTEM, NV1_MEMORY_USER, NV01_MEMORY_VIRTUAL, NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x3E, 0x40, 0x70, 0x71
FERMI_VASPACE_A, KEPLER_CHANNEL_GROUP_A, FERMI_CONTEXT_SHARE_A = 0x90F1, 0xA06C, 0x9067
TURING_USERMODE_A, AMPERE_USERMODE_A, HOPPER_USERMODE_A, BLACKWELL_USERMODE_A = 0xC461, 0xC561, 0xC661, 0xC761
AMPERE_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A, BLACKWELL_CHANNEL_GPFIFO_A = 0xC56F, 0xC86F, 0xC96F
AMPERE_COMPUTE_B, ADA_COMPUTE_A, HOPPER_COMPUTE_A, BLACKWELL_COMPUTE_A = 0xC7C0, 0xC9C0, 0xCBC0, 0xCDC0
AMPERE_DMA_COPY_B, HOPPER_DMA_COPY_A, BLACKWELL_DMA_COPY_A = 0xC7B5, 0xC8B5, 0xC9B5
# preference order: the newest family the GPU lists first
USERMODE_CLASSES = (BLACKWELL_USERMODE_A, HOPPER_USERMODE_A, AMPERE_USERMODE_A, TURING_USERMODE_A)
GPFIFO_CLASSES = (BLACKWELL_CHANNEL_GPFIFO_A, HOPPER_CHANNEL_GPFIFO_A, AMPERE_CHANNEL_GPFIFO_A)
COMPUTE_CLASSES = (BLACKWELL_COMPUTE_A, HOPPER_COMPUTE_A, ADA_COMPUTE_A, AMPERE_COMPUTE_B)
COPY_CLASSES = (BLACKWELL_DMA_COPY_A, HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_B)
CLASS_NAMES = {NV01_ROOT_CLIENT: "NV01_ROOT_CLIENT", NV01_DEVICE_0: "NV01_DEVICE_0", NV20_SUBDEVICE_0: "NV20_SUBDEVICE_0",
               NV01_MEMORY_SYSTEM: "NV01_MEMORY_SYSTEM", NV1_MEMORY_USER: "NV1_MEMORY_USER",
               NV01_MEMORY_VIRTUAL: "NV01_MEMORY_VIRTUAL", NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR",
               FERMI_VASPACE_A: "FERMI_VASPACE_A", KEPLER_CHANNEL_GROUP_A: "KEPLER_CHANNEL_GROUP_A",
               FERMI_CONTEXT_SHARE_A: "FERMI_CONTEXT_SHARE_A", TURING_USERMODE_A: "TURING_USERMODE_A",
               AMPERE_USERMODE_A: "AMPERE_USERMODE_A", HOPPER_USERMODE_A: "HOPPER_USERMODE_A",
               BLACKWELL_USERMODE_A: "BLACKWELL_USERMODE_A", BLACKWELL_CHANNEL_GPFIFO_A: "BLACKWELL_CHANNEL_GPFIFO_A",
               AMPERE_CHANNEL_GPFIFO_A: "AMPERE_CHANNEL_GPFIFO_A", HOPPER_CHANNEL_GPFIFO_A: "HOPPER_CHANNEL_GPFIFO_A",
               AMPERE_COMPUTE_B: "AMPERE_COMPUTE_B", ADA_COMPUTE_A: "ADA_COMPUTE_A", HOPPER_COMPUTE_A: "HOPPER_COMPUTE_A",
               BLACKWELL_COMPUTE_A: "BLACKWELL_COMPUTE_A", AMPERE_DMA_COPY_B: "AMPERE_DMA_COPY_B",
               HOPPER_DMA_COPY_A: "HOPPER_DMA_COPY_A", BLACKWELL_DMA_COPY_A: "BLACKWELL_DMA_COPY_A"}


def class_name(cls: int) -> str: return f"{CLASS_NAMES.get(cls, 'class')} ({cls:#x})"


# ---- alloc parameters
NV0080_ALLOC_PARAMETERS = cl0080.NV0080_ALLOC_PARAMETERS
NV2080_ALLOC_PARAMETERS = cl2080.NV2080_ALLOC_PARAMETERS
# NV_CHANNEL_ALLOC_PARAMS, NV_VASPACE_ALLOCATION_PARAMETERS: per driver release (tables.rm.for_version)
NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING, NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1 << 6, 1 << 3
NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS = _struct("NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS", [
  ("hObjectError", c_uint32), ("hObjectEccError", c_uint32), ("hVASpace", c_uint32), ("engineType", c_uint32),
  ("bIsCallingContextVgpuPlugin", c_uint8)])
NV_CTXSHARE_ALLOCATION_PARAMETERS = _struct("NV_CTXSHARE_ALLOCATION_PARAMETERS", [
  ("hVASpace", c_uint32), ("flags", c_uint32), ("subctxId", c_uint32)])
NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC = 1
NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS = _struct("NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS", [
  ("offset", c_uint64), ("limit", c_uint64), ("hVASpace", c_uint32)])
NV_MEMORY_ALLOCATION_PARAMS = _struct("NV_MEMORY_ALLOCATION_PARAMS", [
  ("owner", c_uint32), ("type", c_uint32), ("flags", c_uint32), ("width", c_uint32), ("height", c_uint32),
  ("pitch", c_int32), ("attr", c_uint32), ("attr2", c_uint32), ("format", c_uint32), ("comprCovg", c_uint32),
  ("zcullCovg", c_uint32), ("rangeLo", c_uint64), ("rangeHi", c_uint64), ("size", c_uint64), ("alignment", c_uint64),
  ("offset", c_uint64), ("limit", c_uint64), ("address", c_uint64), ("ctagOffset", c_uint32), ("hVASpace", c_uint32),
  ("internalflags", c_uint32), ("tag", c_uint32), ("numaNode", c_int32)])
NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED, NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED = 1 << 11, 1 << 25   # nvos.h NVOS32_ALLOC_FLAGS_*
NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS = 3 << 27
NVOS32_ATTR_LOCATION_PCI = 1 << 25
NVOS32_ATTR2_GPU_CACHEABLE_NO = 2 << 2
NVOS32_TYPE_IMAGE = 0
NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS, NVOS02_FLAGS_COHERENCY_CACHED = 1 << 4, 1 << 12   # bits 7:4, 15:12
# NVOS46 flags: page size 4 KB (bits 9:8 = 1), cache snoop (bits 5:4 = 1), DMA_OFFSET_FIXED (bit 15)
NVOS46_FLAGS_PAGE_SIZE_4KB, NVOS46_FLAGS_CACHE_SNOOP_ENABLE, NVOS46_FLAGS_DMA_OFFSET_FIXED = 1 << 8, 1 << 4, 1 << 15

# ---- controls (ctrl*.h)
NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 = 0x13E
NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 = 0x205
NV0080_CTRL_CMD_GPU_GET_CLASSLIST = 0x800201      # the pointer form: _V2's embedded array size changed by release
NV2080_CTRL_CMD_GPU_GET_GID_INFO = 0x2080014A
NV2080_CTRL_CMD_GR_GET_INFO = 0x20801201
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108
NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101
NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS = _struct("NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS", [
  ("driverVersionBuffer", c_char * 256), ("versionBuffer", c_char * 256), ("titleBuffer", c_char * 256),
  ("changelistNumber", c_uint32), ("officialChangelistNumber", c_uint32)])
# ctrl0000system.h grew driverBranch[256] after versionBuffer in 560 (550.163.01: 776 bytes; 570.211.01 and later:
# 1032); RM refuses the other size (resControlLookup, rs_resource.c: NV_ERR_INVALID_PARAM_STRUCT)
NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS_560 = _struct("NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS_560", [
  ("driverVersionBuffer", c_char * 256), ("versionBuffer", c_char * 256), ("driverBranch", c_char * 256),
  ("titleBuffer", c_char * 256), ("changelistNumber", c_uint32), ("officialChangelistNumber", c_uint32)])
NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS = _struct("NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS", [
  ("gpuId", c_uint32), ("gpuFlags", c_uint32), ("deviceInstance", c_uint32), ("subDeviceInstance", c_uint32),
  ("sliStatus", c_uint32), ("boardId", c_uint32), ("gpuInstance", c_uint32), ("numaId", c_int32)])
NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS = _struct("NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS", [
  ("numClasses", c_uint32), ("classList", c_uint64)])
NV2080_CTRL_GPU_GET_GID_INFO_PARAMS = _struct("NV2080_CTRL_GPU_GET_GID_INFO_PARAMS", [
  ("index", c_uint32), ("flags", c_uint32), ("length", c_uint32), ("data", c_uint8 * 256)])
NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY = 2
NV2080_CTRL_GR_INFO = _struct("NV2080_CTRL_GR_INFO", [("index", c_uint32), ("data", c_uint32)])
NV2080_CTRL_GR_ROUTE_INFO = _struct("NV2080_CTRL_GR_ROUTE_INFO", [("flags", c_uint32), ("route", c_uint64)])
NV2080_CTRL_GR_GET_INFO_PARAMS = _struct("NV2080_CTRL_GR_GET_INFO_PARAMS", [
  ("grInfoListSize", c_uint32), ("grInfoList", c_uint64), ("grRouteInfo", NV2080_CTRL_GR_ROUTE_INFO)])
# ctrl0080gr.h NV0080_CTRL_GR_INFO_INDEX_* (the numbers autogen/nv/tables/rm.py GR_INFO_INDEX read there)
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC = 0x14, 0x17
NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC, NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM = 0x20, 0x0D
NV2080_CTRL_GR_INFO_INDEX_SM_VERSION = 0x0C
NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS = _struct("NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS",
                                                              [("workSubmitToken", c_uint32)])
NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS = _struct("NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS", [("bEnable", c_uint8),
                                                                                   ("bSkipSubmit", c_uint8)])
# ctrla06f/ctrla06fgpfifo.h: bSkipEnable since 575 (570.211.01: 2 bytes; 575.64.05 and later: 3)
NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS_575 = _struct("NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS_575", [
  ("bEnable", c_uint8), ("bSkipSubmit", c_uint8), ("bSkipEnable", c_uint8)])

# ---- UVM (uvm_ioctl.h, uvm_linux_ioctl.h): the request is the plain number
UVM_INITIALIZE, UVM_DEINITIALIZE = 0x30000001, 0x30000002
UVM_REGISTER_GPU_VASPACE, UVM_REGISTER_CHANNEL, UVM_MAP_EXTERNAL_ALLOCATION, UVM_FREE = 25, 27, 33, 34
UVM_REGISTER_GPU, UVM_CREATE_EXTERNAL_RANGE, UVM_MM_INITIALIZE = 37, 73, 75
UVM_NAMES = {UVM_INITIALIZE: "UVM_INITIALIZE", UVM_DEINITIALIZE: "UVM_DEINITIALIZE",
             UVM_REGISTER_GPU_VASPACE: "UVM_REGISTER_GPU_VASPACE", UVM_REGISTER_CHANNEL: "UVM_REGISTER_CHANNEL",
             UVM_MAP_EXTERNAL_ALLOCATION: "UVM_MAP_EXTERNAL_ALLOCATION", UVM_FREE: "UVM_FREE",
             UVM_REGISTER_GPU: "UVM_REGISTER_GPU", UVM_CREATE_EXTERNAL_RANGE: "UVM_CREATE_EXTERNAL_RANGE",
             UVM_MM_INITIALIZE: "UVM_MM_INITIALIZE"}
UUID = c_uint8 * 16
# the UVM params: generated from uvm_ioctl.h (nvidia-open-kernel-source 550, hcq.autogen.nv.uvm)
UVM_INITIALIZE_PARAMS, UVM_REGISTER_GPU_PARAMS = uvm.UVM_INITIALIZE_PARAMS, uvm.UVM_REGISTER_GPU_PARAMS
UVM_REGISTER_GPU_VASPACE_PARAMS, UVM_REGISTER_CHANNEL_PARAMS = uvm.UVM_REGISTER_GPU_VASPACE_PARAMS, uvm.UVM_REGISTER_CHANNEL_PARAMS
UVM_CREATE_EXTERNAL_RANGE_PARAMS, UVM_FREE_PARAMS = uvm.UVM_CREATE_EXTERNAL_RANGE_PARAMS, uvm.UVM_FREE_PARAMS
UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, UVM_MM_INITIALIZE_PARAMS = uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, uvm.UVM_MM_INITIALIZE_PARAMS
UVM_GPU_MAPPING_ATTRIBUTES = uvm.UvmGpuMappingAttributes
UVM_MAX_GPUS = len(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS().perGpuAttributes)
UvmGpuMappingTypeReadWriteAtomic = 1

# ---- status codes (nvstatus.h, generated: hcq.autogen.nv.nvstatus)
NV_OK = 0
NV_STATUS_NAMES = {v: k for k, v in vars(nvstatus).items() if k.startswith("NV_ERR_") and isinstance(v, int)}
NV_STATUS_NAMES[NV_OK] = "NV_OK"
NV_ERR_NO_MEMORY = nvstatus.NV_ERR_NO_MEMORY


def with_uuid(params, field: str, uuid: bytes):
  """params with its NvProcessorUuid field set to the 16 bytes of uuid; returns params."""
  ctypes.memmove(ctypes.addressof(params) + getattr(type(params), field).offset, uuid, 16)
  return params


def status_name(status: int) -> str:
  return NV_STATUS_NAMES.get(status, f"NV status {status:#x}")
