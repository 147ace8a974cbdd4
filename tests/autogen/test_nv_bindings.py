"""The nv package holds the RM interface names an NVIDIA driver needs, from nouveau's 535.113.01 SDK excerpt.

test_gcc_truth checks every value and layout against gcc; this checks that the headers that hold them are
the ones the modules are generated from (a header dropped from the manifest would leave gcc nothing to compare).
"""
from __future__ import annotations

import ctypes
import importlib

import pytest

NEEDED = {
  "nv.nvos": ["NVOS00_PARAMETERS_v03_00", "NVOS02_FLAGS_PHYSICALITY_CONTIGUOUS", "NVOS02_FLAGS_LOCATION_VIDMEM",
              "NVOS02_FLAGS_COHERENCY_CACHED", "NV_VASPACE_ALLOCATION_PARAMETERS", "NV_PROC_NAME_MAX_LENGTH"],
  "nv.cl0000": ["NV01_ROOT", "NV0000_ALLOC_PARAMETERS"],
  "nv.cl0080": ["NV01_DEVICE_0", "NV0080_ALLOC_PARAMETERS"],
  "nv.cl2080": ["NV20_SUBDEVICE_0", "NV2080_ALLOC_PARAMETERS"],
  "nv.cl90f1": ["FERMI_VASPACE_A"],
  "nv.alloc_channel": ["NV_CHANNEL_ALLOC_PARAMS", "NV_MEMORY_DESC_PARAMS", "NVOS04_FLAGS_CHANNEL_TYPE_PHYSICAL"],
  "nv.ctrl0080": ["NV0080_CTRL_GPU_GET_SRIOV_CAPS_PARAMS", "NV0080_CTRL_GR_CAPS_TBL_SIZE"],
  "nv.ctrl2080": ["NV2080_CTRL_CMD_FIFO_GET_DEVICE_INFO_TABLE", "NV2080_CTRL_FIFO_GET_DEVICE_INFO_TABLE_PARAMS"],
  "nv.ctrla06f": ["NVA06F_CTRL_CMD_GPFIFO_SCHEDULE", "NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS", "NVA06F_CTRL_CMD_BIND"],
  # from nvidia-open-kernel-source 550.163.01 (trixie contrib)
  "nv.uvm": ["UVM_INITIALIZE", "UVM_MM_INITIALIZE", "UVM_REGISTER_GPU", "UVM_REGISTER_GPU_VASPACE", "UVM_REGISTER_CHANNEL",
             "UVM_CREATE_EXTERNAL_RANGE", "UVM_MAP_EXTERNAL_ALLOCATION", "UVM_FREE", "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS",
             "UVM_INITIALIZE_PARAMS", "UVM_REGISTER_GPU_PARAMS"],
  "nv.ioctl": ["NV_IOCTL_MAGIC", "NV_ESC_CARD_INFO", "NV_ESC_REGISTER_FD", "nv_ioctl_card_info_t"],
  "nv.nvstatus": ["NV_OK", "NV_ERR_GENERIC", "NV_ERR_INVALID_OBJECT_HANDLE", "NV_ERR_NO_MEMORY", "NV_ERR_INVALID_CLASS"],
  "nv.clc56f": ["AMPERE_CHANNEL_GPFIFO_A", "NVC56F_SEM_ADDR_LO", "NVC56F_SEM_EXECUTE", "NVC56F_NON_STALL_INTERRUPT",
                "Nvc56fControl", "NVC56F_DMA_SEC_OP_INC_METHOD"],
  "nv.clc86f": ["HOPPER_CHANNEL_GPFIFO_A", "NVC86F_SEM_EXECUTE", "Nvc86fControl"],
  "nv.clc6b5": ["AMPERE_DMA_COPY_A", "NVC6B5_LAUNCH_DMA", "NVC6B5_OFFSET_IN_UPPER", "NVC6B5_SET_SEMAPHORE_A"],
  "nv.clc7b5": ["AMPERE_DMA_COPY_B", "NVC7B5_LAUNCH_DMA"],
  "nv.clc8b5": ["HOPPER_DMA_COPY_A", "NVC8B5_LAUNCH_DMA", "NVC8B5_LINE_LENGTH_IN"],
}


@pytest.mark.parametrize("name", sorted(NEEDED))
def test_the_rm_names_are_in_their_module(name):
  module = importlib.import_module(f"hcq.autogen.{name}")
  missing = [n for n in NEEDED[name] if not hasattr(module, n)]
  assert not missing, f"hcq.autogen.{name} lacks {missing}"


def test_rm_handles_and_control_numbers():
  """Alloc params start with the handles the RM reads first; a control number is (interface << 8) | message."""
  from hcq.autogen.nv import cl0000, ctrla06f, nvos
  assert cl0000.NV0000_ALLOC_PARAMETERS.hClient.offset == 0
  assert ctypes.sizeof(nvos.NVOS00_PARAMETERS_v03_00) == 16
  assert ctrla06f.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE >> 16 == 0xa06f


def test_uvm_and_card_info_layouts():
  """The structs the driver hands to nvidia-uvm.ko and nvidia.ko keep the sizes 550..610 drivers read: the UVM ioctl
  numbers are plain integers (UVM_INITIALIZE is 0x30000001), every UVM param struct ends in rmStatus."""
  from hcq.autogen.nv import ioctl, nvstatus, uvm
  assert ctypes.sizeof(uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS) == 9264
  assert uvm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS.rmStatus.offset == 9260
  assert ctypes.sizeof(uvm.UVM_REGISTER_GPU_PARAMS) == 40 and uvm.UVM_INITIALIZE == 0x30000001
  assert (uvm.UVM_REGISTER_GPU, uvm.UVM_REGISTER_CHANNEL, uvm.UVM_MM_INITIALIZE) == (37, 27, 75)
  assert ctypes.sizeof(ioctl.nv_ioctl_card_info_t) == 72 and ioctl.NV_ESC_CARD_INFO == 200
  assert nvstatus.NV_ERR_INVALID_OBJECT_HANDLE == 0x33 and nvstatus.NV_ERR_GENERIC == 0xFFFF
