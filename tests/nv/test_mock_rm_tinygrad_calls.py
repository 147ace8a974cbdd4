"""What RM does with the calls tinygrad 0.14's NV driver makes and hcq's did not (issue 27's client): the 580 control
layouts, NV2080_CTRL_CMD_PERF_BOOST, the GT200_DEBUGGER object, and mappings at fixed addresses nobody reserved."""
import ctypes

import pytest

from hcq.autogen.nv import rm_580 as abi           # the mock claims 580 by default
from hcq.autogen.nv import rm_550, rm_570
from hcq.autogen.nv import series as nv_series
from hcq.config import Config
from hcq.drivers.nv.rm import RMError, RMSession
from hcq.mockgpu import mock_nv_os
from hcq.mockgpu.nv import abi as mock_abi


@pytest.fixture
def rm():
  os = mock_nv_os(Config(), gpu="AD102")
  session = RMSession(os, 0, os.config, label="MOCK+NV:0")
  yield session
  session.close()
  os.close()


def test_controls_take_the_580_sizes_only(rm):
  """RM refuses a paramsSize other than its struct's (resControlLookup): 580's BUILD_VERSION_V2 is 1032 bytes
  (driverBranch since 560), its GPFIFO_SCHEDULE 3 (bSkipEnable since 575)."""
  assert ctypes.sizeof(abi.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS) == 1032
  assert ctypes.sizeof(abi.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS) == 3
  v = rm.rm_control(rm.root, abi.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, abi.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
  assert v.driverVersionBuffer.decode().startswith("580.")
  with pytest.raises(RMError, match=r"0x13e.*NV_ERR_INVALID_PARAM_STRUCT"):      # 550's 776 bytes
    rm.rm_control(rm.root, abi.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, rm_550.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
  with pytest.raises(RMError, match=r"0xa06c0101.*NV_ERR_INVALID_PARAM_STRUCT"):
    rm.rm_control(rm.channel_group, abi.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, rm_570.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
  assert rm.driver_version.startswith("580.")     # hcq's driver found the version with the 1032-byte layout


def test_perf_boost_is_a_subdevice_control_with_checked_flags(rm):
  boost = abi.NV2080_CTRL_PERF_BOOST_PARAMS
  cuda_high_max = (1 << 4) | (1 << 6) | abi.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX    # what tinygrad sends
  rm.rm_control(rm.subdevice, abi.NV2080_CTRL_CMD_PERF_BOOST, boost(flags=cuda_high_max, duration=0xFFFFFFFF))
  gpu = rm.os.devices[0].gpus[0]
  assert gpu.perf_boosts == {rm.root: (2, 0xFFFFFFFF)}
  with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"):      # command 3 is none
    rm.rm_control(rm.subdevice, abi.NV2080_CTRL_CMD_PERF_BOOST, boost(flags=3, duration=1))
  with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"):      # past DURATION_MAX and not INFINITE
    rm.rm_control(rm.subdevice, abi.NV2080_CTRL_CMD_PERF_BOOST, boost(flags=2, duration=3601))
  with pytest.raises(RMError, match="NV_ERR_NOT_SUPPORTED"):         # a subdevice control, not a device one
    rm.rm_control(rm.device, abi.NV2080_CTRL_CMD_PERF_BOOST, boost(flags=2, duration=1))
  rm.rm_control(rm.subdevice, abi.NV2080_CTRL_CMD_PERF_BOOST, boost(flags=0, duration=0))    # CLEAR
  assert gpu.perf_boosts == {}


def test_debugger_session_on_a_compute_object(rm):
  ch = rm.create_channel(rm.compute_class, 64)
  P = mock_abi.NV83DE_ALLOC_PARAMETERS
  dbg = rm.rm_alloc(rm.device, mock_abi.GT200_DEBUGGER, P(hAppClient=rm.root, hClass3dObject=ch.engine_handle))
  assert rm.os.devices[0].rm.objects[(rm.root, dbg)].data["target"].handle == ch.engine_handle
  rm.rm_alloc(rm.device, mock_abi.GT200_DEBUGGER, P(hAppClient=0, hClass3dObject=ch.engine_handle))   # 0: the caller's client
  with pytest.raises(RMError, match="NV_ERR_INVALID_ARGUMENT"):
    rm.rm_alloc(rm.device, mock_abi.GT200_DEBUGGER, P(hDebuggerClient_Obsolete=rm.root, hClass3dObject=ch.engine_handle))
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT_PARENT"):
    rm.rm_alloc(rm.device, mock_abi.GT200_DEBUGGER, P(hAppClient=rm.root, hClass3dObject=0xBEEF))
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT \\("):        # a channel is no compute object
    rm.rm_alloc(rm.device, mock_abi.GT200_DEBUGGER, P(hAppClient=rm.root, hClass3dObject=ch.handle))
  with pytest.raises(RMError, match="NV_ERR_INVALID_OBJECT_PARENT"):     # its parent is a Device
    rm.rm_alloc(rm.subdevice, mock_abi.GT200_DEBUGGER, P(hAppClient=rm.root, hClass3dObject=ch.engine_handle))


def test_memory_maps_at_a_fixed_address_nobody_reserved(rm):
  """nvidia_mmap takes whatever vma MAP_FIXED names, and a fixed dmaOffset is the GPU VA space's business: a vidmem
  object mapped where the process has nothing gets memory there; one that would cover a mapping of the process's
  own (not its reservation) is refused, naming the address."""
  os = rm.os
  mem = rm.rm_alloc(rm.device, abi.NV1_MEMORY_USER, abi.NV_MEMORY_ALLOCATION_PARAMS(
    owner=rm.root, type=abi.NVOS32_TYPE_IMAGE, size=0x10000, flags=abi.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED))
  va = 0x20_0000_0000
  assert not os.memory.overlaps(va, 0x10000)
  dma = rm.rm.NVOS46_PARAMETERS(hClient=rm.root, hDevice=rm.device, hDma=rm.virtmem, hMemory=mem, length=0x10000,
                                     flags=nv_series.drf(abi, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE"), dmaOffset=va)
  rm._escape(rm.ctl, abi.NV_ESC_RM_MAP_MEMORY_DMA, dma, "fixed")
  assert os.memory.find(va) is not None and os.devices[0].gpus[0].ranges is not None
  ctypes.memmove(va + 0xFFF8, b"GPU VA!!", 8)      # host memory at the GPU VA: the mock's GPU VA == host VA
  mem2 = rm.rm_alloc(rm.device, abi.NV1_MEMORY_USER, abi.NV_MEMORY_ALLOCATION_PARAMS(
    owner=rm.root, type=abi.NVOS32_TYPE_IMAGE, size=0x2000, flags=abi.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED))
  other = os.alloc_anon(0x1000)          # the process's own memory where the second object's pages would go
  dma2 = rm.rm.NVOS46_PARAMETERS(hClient=rm.root, hDevice=rm.device, hDma=rm.virtmem, hMemory=mem2, length=0x2000,
                                      flags=nv_series.drf(abi, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE"), dmaOffset=other - 0x1000)
  with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"):
    rm._escape(rm.ctl, abi.NV_ESC_RM_MAP_MEMORY_DMA, dma2, "over the process's memory")


def test_a_fixed_mapping_over_memory_the_mock_does_not_know_is_refused(rm):
  stray = ctypes.create_string_buffer(0x4000)       # the process's own memory, never handed out by the OS interface
  va = (ctypes.addressof(stray) + 0xFFF) & ~0xFFF
  mem = rm.rm_alloc(rm.device, abi.NV1_MEMORY_USER, abi.NV_MEMORY_ALLOCATION_PARAMS(
    owner=rm.root, type=abi.NVOS32_TYPE_IMAGE, size=0x1000, flags=abi.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED))
  dma = rm.rm.NVOS46_PARAMETERS(hClient=rm.root, hDevice=rm.device, hDma=rm.virtmem, hMemory=mem, length=0x1000,
                                     flags=nv_series.drf(abi, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE"), dmaOffset=va)
  with pytest.raises(RMError, match="NV_ERR_INVALID_ADDRESS"):
    rm._escape(rm.ctl, abi.NV_ESC_RM_MAP_MEMORY_DMA, dma, "over unknown memory")
  assert stray.raw[:4] == b"\0\0\0\0"
