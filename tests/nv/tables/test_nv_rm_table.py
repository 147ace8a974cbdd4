"""RM escapes and version-specific struct layouts: the offsets read from nvos.h / alloc_channel.h, the request numbers
the size change gives, the choice by driver version, and agreement with the gcc-checked 535 bindings."""
from __future__ import annotations

import ctypes

import pytest

from hcq.autogen.nv.tables import rm
from hcq.errors import HCQError


def offsets(struct) -> dict:
  return {name: getattr(struct, name).offset for name, *_ in struct._fields_}


def test_escape_numbers_and_requests():
  assert (rm.NV_ESC_RM_ALLOC, rm.NV_ESC_RM_CONTROL, rm.NV_ESC_RM_FREE) == (0x2B, 0x2A, 0x29)
  assert (rm.NV_ESC_RM_MAP_MEMORY, rm.NV_ESC_RM_MAP_MEMORY_DMA, rm.NV_ESC_RM_ALLOC_MEMORY) == (0x4E, 0x57, 0x27)
  assert len(set(rm.ESCAPES.values())) == len(rm.ESCAPES)
  L = rm.for_version("580.159.03")
  assert L.request("NV_ESC_RM_ALLOC") == 0xC020462B and L.request("NV_ESC_RM_CONTROL") == 0xC020462A
  assert L.request("NV_ESC_RM_FREE") == 0xC0104629 and L.request("NV_ESC_RM_MAP_MEMORY") == 0xC038464E
  with pytest.raises(HCQError, match="does not fit"):
    rm.request(0x2B, 1 << 14)


@pytest.mark.parametrize("version,nvos46,vaspace,channel", [
  ("550.163.01", 56, 48, 360), ("560.28.03", 56, 48, 360), ("570.86.15", 56, 48, 368),
  ("580.159.03", 64, 56, 368), ("590.48.01", 64, 56, 368), ("610.43.03", 64, 56, 376)])
def test_layouts_follow_the_driver_version(version, nvos46, vaspace, channel):
  L = rm.for_version(version)
  assert ctypes.sizeof(L.NVOS46_PARAMETERS) == nvos46
  assert ctypes.sizeof(L.NV_VASPACE_ALLOCATION_PARAMETERS) == vaspace
  assert ctypes.sizeof(L.NV_CHANNEL_ALLOC_PARAMS) == channel
  # the size is part of the request number: a 570-layout MAP_MEMORY_DMA is another ioctl to a 580 driver
  assert L.request("NV_ESC_RM_MAP_MEMORY_DMA") == (0xC0404657 if nvos46 == 64 else 0xC0384657)


def test_offsets_read_from_the_headers():
  assert offsets(rm.NVOS46_PARAMETERS_V550) == {"hClient": 0, "hDevice": 4, "hDma": 8, "hMemory": 12, "offset": 16,
                                                "length": 24, "flags": 32, "dmaOffset": 40, "status": 48}
  o = offsets(rm.NVOS46_PARAMETERS_V580)
  assert (o["flags2"], o["kindOverride"], o["dmaOffset"], o["status"]) == (36, 40, 48, 56)
  assert offsets(rm.NVOS54_PARAMETERS) == {"hClient": 0, "hObject": 4, "cmd": 8, "flags": 12, "params": 16,
                                           "paramsSize": 24, "status": 28}
  assert offsets(rm.NVOS21_PARAMETERS)["pAllocParms"] == 16 and ctypes.sizeof(rm.NVOS21_PARAMETERS) == 32
  o = offsets(rm.NVOS33_PARAMETERS)
  assert (o["offset"], o["pLinearAddress"], o["status"], o["flags"]) == (16, 32, 40, 44)
  assert rm.NV_IOCTL_NVOS33_PARAMETERS_WITH_FD.fd.offset == 48 and rm.NV_IOCTL_NVOS02_PARAMETERS_WITH_FD.fd.offset == 48
  assert offsets(rm.NV_VASPACE_ALLOCATION_PARAMETERS_V580)["pasid"] == 48
  assert rm.NV_CHANNEL_ALLOC_PARAMS_V570.tpcConfigID.offset == 360
  o = offsets(rm.NV_CHANNEL_ALLOC_PARAMS_V610)
  assert (o["hHandleVASpace"], o["hUserdMemory"], o["userdOffset"], o["engineType"]) == (32, 36, 72, 136)


def test_the_550_layouts_equal_the_gcc_checked_535_bindings():
  """Where nouveau's 535.113.01 SDK copy has the struct, the table's pre-570 layout is the same, field by field."""
  from hcq.autogen.nv import alloc_channel, nvos
  assert offsets(rm.NV_VASPACE_ALLOCATION_PARAMETERS_V550) == offsets(nvos.NV_VASPACE_ALLOCATION_PARAMETERS)
  assert ctypes.sizeof(rm.NV_VASPACE_ALLOCATION_PARAMETERS_V550) == ctypes.sizeof(nvos.NV_VASPACE_ALLOCATION_PARAMETERS)
  assert offsets(rm.NV_CHANNEL_ALLOC_PARAMS_V550) == offsets(alloc_channel.NV_CHANNEL_ALLOC_PARAMS)
  assert ctypes.sizeof(rm.NV_CHANNEL_ALLOC_PARAMS_V550) == ctypes.sizeof(alloc_channel.NV_CHANNEL_ALLOC_PARAMS)
  assert ctypes.sizeof(rm.NVOS00_PARAMETERS) == ctypes.sizeof(nvos.NVOS00_PARAMETERS_v03_00)


def test_version_strings():
  assert rm.parse_version("580.159.03") == (580, 159, 3) and rm.parse_version("610.43") == (610, 43, 0)
  assert rm.parse_version("570.86.15\x00junk") == (570, 86, 15)
  for bad in ("", "rev580", None):
    with pytest.raises(HCQError, match="not of the form MAJOR.MINOR"):
      rm.parse_version(bad)
  with pytest.raises(HCQError, match="before 535"):
    rm.for_version("470.256.02")


def test_controls():
  assert rm.NV0080_CTRL_CMD_GPU_GET_CLASSLIST >> 8 == 0x8002 and rm.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE >> 16 == 0xA06F
  assert len(set(rm.CONTROLS.values())) == len(rm.CONTROLS)
  assert rm.control_name(0xC36F0108) == "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN"
  assert rm.control_name(0x1234) == "control 0x1234"
  assert ctypes.sizeof(rm.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS) == 16 and ctypes.sizeof(rm.NV2080_CTRL_GR_GET_INFO_PARAMS) == 32
  from hcq.autogen.nv import ctrla06f
  assert rm.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE == ctrla06f.NVA06F_CTRL_CMD_GPFIFO_SCHEDULE
  assert rm.NVA06F_CTRL_CMD_BIND == ctrla06f.NVA06F_CTRL_CMD_BIND
  assert (rm.GR_INFO_INDEX["SM_VERSION"], rm.GR_INFO_INDEX["LITTER_NUM_GPCS"], rm.GR_INFO_INDEX["LITTER_NUM_SM_PER_TPC"]) == \
    (0x0C, 0x14, 0x20)
  assert len(set(rm.GR_INFO_INDEX.values())) == len(rm.GR_INFO_INDEX)
  assert rm.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS is ctrla06f.NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS


def test_status_names_come_from_nvstatuscodes():
  assert rm.status_name(0) == "NV_OK" and rm.status_name(0x33) == "NV_ERR_INVALID_OBJECT_HANDLE"
  assert rm.status_name(0x51) == "NV_ERR_NO_MEMORY" and rm.status_name(0xFFFF) == "NV_ERR_GENERIC"
  assert rm.status_name(0x7FFF0001) == "NV status 0x7fff0001"


def test_a_driver_newer_than_the_tables_is_refused_by_version():
  assert rm.for_version(f"{rm.SUPPORTED_MAJORS[-1]}.1.2").version[0] == rm.SUPPORTED_MAJORS[-1]
  with pytest.raises(HCQError, match=r"NVIDIA driver 620\.13\.01: releases after 610 are not supported"):
    rm.for_version("620.13.01")


def test_the_driver_abi_holds_no_second_copy_of_the_rm_tables():
  from hcq.autogen.nv import rm_abi as abi
  assert abi.escape_request is rm.request
  assert all(getattr(abi, name) == nr for name, nr in rm.ESCAPES.items() if hasattr(abi, name))
  for dup in ("NVOS46_570", "NVOS46_580", "NVOS00", "NVOS21", "NVOS54", "NVOS02_FD", "NVOS33_FD",
              "NV_VASPACE_ALLOCATION_PARAMETERS", "NV_CHANNEL_ALLOC_PARAMS", "ESCAPE_NAMES"):
    assert not hasattr(abi, dup), dup
