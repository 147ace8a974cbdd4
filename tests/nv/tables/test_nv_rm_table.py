"""The RM numbers every release shares (tables/rm.py): equal to the generated modules of NVIDIA's headers at each
supported release tag; the request numbers their struct sizes give."""
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
  from hcq.autogen.nv import rm_580
  assert rm.request(rm.NV_ESC_RM_ALLOC, ctypes.sizeof(rm_580.NVOS21_PARAMETERS)) == 0xC020462B
  assert rm.request(rm.NV_ESC_RM_FREE, ctypes.sizeof(rm_580.NVOS00_PARAMETERS)) == 0xC0104629
  assert rm.request(rm.NV_ESC_RM_MAP_MEMORY, ctypes.sizeof(rm_580.nv_ioctl_nvos33_parameters_with_fd)) == 0xC038464E
  with pytest.raises(HCQError, match="does not fit"):
    rm.request(0x2B, 1 << 14)


@pytest.mark.parametrize("series", ["550", "570", "575", "580", "590"])
def test_the_shared_numbers_are_each_series_headers(series):
  """Escapes, controls and classes: the same numbers in the generated module of every supported release."""
  from hcq.autogen.nv.series import rm as rm_of
  m = rm_of(series)
  for name, nr in rm.ESCAPES.items(): assert getattr(m, name) == nr, (series, name)
  for name, cmd in rm.CONTROLS.items():
    if hasattr(m, name): assert getattr(m, name) == cmd, (series, name)
  assert sum(hasattr(m, name) for name in rm.CONTROLS) >= 9
  for name, cls in rm.CLASSES.items():
    if hasattr(m, name): assert getattr(m, name) == cls, (series, name)
  for key, index in rm.GR_INFO_INDEX.items(): assert getattr(m, f"NV2080_CTRL_GR_INFO_INDEX_{key}") == index, key


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
  assert not hasattr(rm, "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS")     # 2 bytes to 570, 3 from 575: the series modules'


def test_status_names_come_from_nvstatuscodes():
  assert rm.status_name(0) == "NV_OK" and rm.status_name(0x33) == "NV_ERR_INVALID_OBJECT_HANDLE"
  assert rm.status_name(0x51) == "NV_ERR_NO_MEMORY" and rm.status_name(0xFFFF) == "NV_ERR_GENERIC"
  assert rm.status_name(0x7FFF0001) == "NV status 0x7fff0001"


def test_the_driver_abi_holds_no_second_copy_of_the_rm_tables():
  from hcq.autogen.nv import rm_abi as abi
  assert abi.escape_request is rm.request
  assert all(getattr(abi, name) == nr for name, nr in rm.ESCAPES.items() if hasattr(abi, name))
  for dup in ("NVOS46_570", "NVOS46_580", "NVOS00", "NVOS21", "NVOS54", "NVOS02_FD", "NVOS33_FD",
              "NV_VASPACE_ALLOCATION_PARAMETERS", "NV_CHANNEL_ALLOC_PARAMS", "ESCAPE_NAMES",
              # the structs and flags a release may change: the series modules' only
              "NV_MEMORY_ALLOCATION_PARAMS", "NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED", "UVM_FREE_PARAMS",
              "NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS", "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS"):
    assert not hasattr(abi, dup), dup
