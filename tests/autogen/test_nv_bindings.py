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
