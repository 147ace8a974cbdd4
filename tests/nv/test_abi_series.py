"""The nvidia.ko ABI per driver series (hcq.autogen.nv.series, generated from NVIDIA's headers at each release tag) and
what the mock's RM checks with it: the sizes that differ between releases, the driver learning its series before the
first sized call, vaMode, the NVOS32 flags, UVM_MM_INITIALIZE. Runs once per series the mock can claim (conftest)."""
import ctypes

import pytest

import hcq
from hcq.autogen.nv import nvstatus, rm_550, rm_580, rm_abi, series, uvm_580, uvm_590
from hcq.config import Config
from hcq.drivers.nv.rm import RMError, RMSession, arch_of
from hcq.mockgpu import mock_nv_os


def _iface():
  os = mock_nv_os(Config())
  return os, RMSession(os, 0, os.config, label="MOCK+NV:0")


@pytest.fixture
def session():
  os, rm = _iface()
  yield rm
  rm.close()
  os.close()


# ---- the headers' facts, per series (the generated modules; gcc agrees with them: tests/autogen/test_gcc_truth.py)
SIZES = {  # struct -> {series: sizeof}, read in each tag's header (series.py's table)
  "NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS": {"550": 776, "570": 1032, "575": 1032, "580": 1032, "590": 1032},
  "NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS": {"550": 2, "570": 2, "575": 3, "580": 3, "590": 3},
  "NVOS46_PARAMETERS": {"550": 56, "570": 56, "575": 56, "580": 64, "590": 64},
  "NV_VASPACE_ALLOCATION_PARAMETERS": {"550": 48, "570": 48, "575": 48, "580": 56, "590": 56},
  "NV_CHANNEL_ALLOC_PARAMS": {"550": 360, "570": 368, "575": 368, "580": 368, "590": 368},
}


@pytest.mark.parametrize("struct", sorted(SIZES))
def test_the_structs_that_change_between_series(struct, nv_mock_driver):
  s = nv_mock_driver
  assert ctypes.sizeof(getattr(series.rm(s), struct)) == SIZES[struct][s]


def test_uvm_free_lost_length_at_590_and_the_nvos32_flags_are_nvos_h(nv_mock_driver):
  u, m = series.uvm(nv_mock_driver), series.rm(nv_mock_driver)
  assert [f[0] for f in u.UVM_FREE_PARAMS._fields_] == (["base", "rmStatus"] if nv_mock_driver == "590"
                                                         else ["base", "length", "rmStatus"])
  assert (m.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED, m.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED) == (0x8000, 0x4000)
  assert m.NVOS32_ALLOC_FLAGS_VIRTUAL_ONLY & m.NVOS32_ALLOC_FLAGS_MAXIMIZE_ADDRESS_SPACE == 1 << 25
  assert series.drf(m, "NVOS46_FLAGS_PAGE_SIZE", "4KB") == 1 << 8
  assert series.drf_get(m, "NVOS46_FLAGS_DMA_OFFSET_FIXED", series.drf(m, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE")) == 1


def test_versions_and_the_series_they_pick():
  assert series.proc_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build  "
                             "(dvs-builder@U16-I3-B03-4-3)  Thu Oct 30 2025\nGCC version:  gcc 12\n") == "580.105.08"
  assert series.series_of("575.64.05") == "575" and series.series_of("590.48.01\x00") == "590"
  for bad, why in (("595.45.04", "newer than"), ("535.247.01", "older than"), ("565.57.01", "between")):
    with pytest.raises(series.UnsupportedDriver, match=rf"NVIDIA driver {bad}: series {bad[:3]} is {why}"):
      series.series_of(bad)
  with pytest.raises(series.UnsupportedDriver, match="no driver version"):
    series.proc_version("GCC version: 12\n")


def test_sm_versions_name_their_targets():
  assert [arch_of(v) for v in (0x800, 0x806, 0x809, 0x900, 0xA00, 0xA03, 0xA04, 0xC00)] == \
    ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103", "sm_120", "sm_120"]


# ---- the driver speaks the series it finds
def test_the_driver_opens_with_the_series_of_the_running_driver(session, nv_mock_driver):
  assert session.series == nv_mock_driver and session.driver_version == series.TAGS[nv_mock_driver]
  assert session.rm is series.rm(nv_mock_driver) and session.uvmabi is series.uvm(nv_mock_driver)
  session.schedule()            # the series' GPFIFO_SCHEDULE params, accepted by the mock's size check
  mem = session.alloc(0x2000, kind="vram", cpu_access=True)
  session.free(mem)             # the series' UVM_FREE_PARAMS


def test_the_version_comes_from_the_escape_when_proc_has_none(nv_mock_driver):
  os = mock_nv_os(Config())
  try:
    os.vfs.remove("/proc/driver/nvidia/version")
    rm = RMSession(os, 0, os.config, label="MOCK+NV:0")
    assert rm.driver_version == series.TAGS[nv_mock_driver] and rm.series == nv_mock_driver
    rm.close()
  finally: os.close()


# ---- what the mock's RM refuses, as RM does
def test_the_550_build_version_params_are_refused_from_570_on(session, nv_mock_driver):
  """Blocking item 1: 776 bytes to a 1032-byte control is NV_ERR_INVALID_PARAM_STRUCT (rs_resource.c)."""
  other = rm_580 if nv_mock_driver == "550" else rm_550
  with pytest.raises(RMError, match=rf"of 0x13e .*NV_ERR_INVALID_PARAM_STRUCT") as e:
    session.rm_control(session.root, other.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                     other.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
  assert e.value.status == nvstatus.NV_ERR_INVALID_PARAM_STRUCT


def test_a_two_byte_gpfifo_schedule_is_refused_from_575_on(session, nv_mock_driver):
  """Blocking item 3: NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS grew bSkipEnable at 575."""
  class Two(ctypes.Structure): _fields_ = [("bEnable", ctypes.c_uint8), ("bSkipSubmit", ctypes.c_uint8)]
  if int(nv_mock_driver) >= 575:
    with pytest.raises(RMError, match="NV_ERR_INVALID_PARAM_STRUCT"):
      session.rm_control(session.channel_group, session.rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, Two(bEnable=1))
  else: session.rm_control(session.channel_group, session.rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, Two(bEnable=1))


def test_vamode_multiple_vaspaces_has_no_implicit_vaspace_to_map_into(session):
  """Blocking item 2 (vaspace.c vaspaceGetByHandleOrDeviceDefault): a device of vaMode MULTIPLE_VASPACES and a
  virtual memory object without a VA space: MAP_MEMORY_DMA is NV_ERR_INVALID_STATE. The driver's vaMode 0 maps."""
  m = session.rm
  info = session.rm_control(session.root, m.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                          m.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=session.gpu_id))
  dev2 = session.rm_alloc(session.root, m.NV01_DEVICE_0, m.NV0080_ALLOC_PARAMETERS(
    deviceId=info.deviceInstance, hClientShare=session.root, vaMode=m.NV_DEVICE_ALLOCATION_VAMODE_MULTIPLE_VASPACES))
  virt2 = session.rm_alloc(dev2, m.NV01_MEMORY_VIRTUAL, m.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0x1FFFFFFFFFFFF))
  mem = session.alloc(0x1000, kind="host")                       # mapped through the driver's own vaMode 0 device
  a = m.NVOS46_PARAMETERS(hClient=session.root, hDevice=dev2, hDma=virt2, hMemory=mem.handle, length=0x1000,
                          flags=series.drf(m, "NVOS46_FLAGS_DMA_OFFSET_FIXED", "TRUE"), dmaOffset=mem.va)
  with pytest.raises(RMError, match=r"NV_ESC_RM_MAP_MEMORY_DMA .*NV_ERR_INVALID_STATE"):
    session._escape(session.ctl, m.NV_ESC_RM_MAP_MEMORY_DMA, a, "through a MULTIPLE_VASPACES device")


def test_a_virtual_only_nvos32_flag_on_physical_memory_is_refused(session):
  """video_mem.c / system_mem.c: NVOS32_ALLOC_FLAGS_VIRTUAL_ONLY bits on a physical allocation; 1 << 25 (the old
  hcq's MEMORY_HANDLE_PROVIDED) is MAXIMIZE_ADDRESS_SPACE, one of them."""
  m = session.rm
  p = m.NV_MEMORY_ALLOCATION_PARAMS(owner=session.root, type=m.NVOS32_TYPE_IMAGE, size=0x1000, alignment=0x1000,
                                    flags=1 << 25)
  with pytest.raises(RMError, match=r"NV_ERR_INVALID_ARGUMENT") as e:
    session.rm_alloc(session.device, m.NV01_MEMORY_LOCAL_USER, p)
  assert e.value.status == nvstatus.NV_ERR_INVALID_ARGUMENT
  p.flags = m.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED | m.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED
  session.rm_free(session.rm_alloc(session.device, m.NV01_MEMORY_LOCAL_USER, p), session.device)


def test_an_alloc_reads_the_release_s_struct_whatever_params_size_says(session):
  """RM does not check an allocation's paramsSize: rmapiParamsCopyInit (param_copy.c) replaces it with the class's own
  size (rmapiGetClassAllocParamSize), so tinygrad 0.14's paramsSize 0 is accepted and the struct is read at the
  release's layout (here its vaBase, which a wrong layout would misplace)."""
  m = session.rm
  p = m.NV_VASPACE_ALLOCATION_PARAMETERS(vaBase=0x1000)
  a = m.NVOS21_PARAMETERS(hRoot=session.root, hObjectParent=session.device, hClass=m.FERMI_VASPACE_A,
                          pAllocParms=ctypes.addressof(p), paramsSize=0)
  session._escape(session.ctl, m.NV_ESC_RM_ALLOC, a, "with paramsSize 0")
  assert a.status == 0 and a.hObjectNew
  session.rm_free(a.hObjectNew, session.device)


def test_uvm_mm_initialize_takes_a_fresh_fd_naming_an_initialized_one(session):
  u, os = session.uvmabi, session.os
  assert session.uvm_mm is not None                 # the driver holds its VA space's mm
  fresh = os.open("/dev/nvidia-uvm", 2)
  try:
    for fd, uvm_fd, status in ((fresh, 9999, "NV_ERR_INVALID_ARGUMENT"), (session.uvm, session.uvm.fd, "NV_ERR_IN_USE"),
                               (fresh, session.uvm.fd, "NV_ERR_INVALID_STATE")):
      with pytest.raises(RMError, match=rf"UVM_MM_INITIALIZE.*{status}"):
        session.uvm_call(u.UVM_MM_INITIALIZE, u.UVM_MM_INITIALIZE_PARAMS(uvmFd=uvm_fd), fd=fd)
  finally: fresh.close()


def test_uvm_calls_on_an_uninitialized_fd_are_refused(session):
  fresh = session.os.open("/dev/nvidia-uvm", 2)
  try:
    with pytest.raises(RMError, match="UVM_CREATE_EXTERNAL_RANGE.*NV_ERR_ILLEGAL_ACTION"):
      session.uvm_call(session.uvmabi.UVM_CREATE_EXTERNAL_RANGE,
                     session.uvmabi.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=0x10000, length=0x1000), fd=fresh)
  finally: fresh.close()


def test_the_mock_claims_the_configured_driver():
  os = mock_nv_os(Config(nv_mock_driver="575"))
  try:
    assert "575.64.05" in os.proc_read("driver/nvidia/version")
    rm = RMSession(os, 0, os.config, label="MOCK+NV:0")
    assert rm.series == "575"
    rm.close()
  finally: os.close()
  from hcq.errors import ConfigError
  with pytest.raises(ConfigError, match="HCQ_NV_MOCK_DRIVER.*'560'"):
    from hcq.config import from_env
    from_env({"HCQ_NV_MOCK_DRIVER": "560"})
  assert uvm_580.UVM_FREE == uvm_590.UVM_FREE     # the request numbers stay; the params changed


def test_check_version_str_compares_as_osapi_does(session, nv_mock_driver):
  m, tag = session.rm, series.TAGS[nv_mock_driver]
  def check(cmd, text):
    q = m.nv_ioctl_rm_api_version_t(cmd=cmd, versionString=text.encode())
    session.ctl.ioctl(rm_abi.escape_request(m.NV_ESC_CHECK_VERSION_STR, ctypes.sizeof(q)), q)
    return q
  assert check(m.NV_RM_API_VERSION_CMD_QUERY, "").versionString.decode() == tag
  assert check(m.NV_RM_API_VERSION_CMD_STRICT, tag).reply == m.NV_RM_API_VERSION_REPLY_RECOGNIZED
  assert check(m.NV_RM_API_VERSION_CMD_RELAXED, tag.split(".")[0] + ".1.2").reply == m.NV_RM_API_VERSION_REPLY_RECOGNIZED
  with pytest.raises(hcq.errors.OSCallError, match="client has version"):
    check(m.NV_RM_API_VERSION_CMD_STRICT, tag + "9")


def test_null_alloc_params_of_a_class_that_takes_some_are_invalid_argument(session):
  with pytest.raises(RMError, match=r"KEPLER_CHANNEL_GROUP_A.*NV_ERR_INVALID_ARGUMENT"):
    session.rm_alloc(session.device, session.rm.KEPLER_CHANNEL_GROUP_A)


def test_a_pre_590_uvm_free_on_590_loses_its_status(session, nv_mock_driver):
  """UVM_FREE_PARAMS is 16 bytes at 590 (base, rmStatus): the kernel writes rmStatus where the 580 layout has `length`,
  so a caller with the old layout reads a status nobody wrote. The driver frees with its series' layout."""
  if nv_mock_driver != "590": pytest.skip("the layout changed at 590")
  old = uvm_580.UVM_FREE_PARAMS(base=0x7000_0000, length=0x1000)           # no such range: an error, written at 8
  session.uvm.ioctl(uvm_580.UVM_FREE, old)
  assert old.rmStatus == 0 and old.length & 0xFFFFFFFF == nvstatus.NV_ERR_INVALID_ADDRESS
  new = uvm_590.UVM_FREE_PARAMS(base=0x7000_0000)
  session.uvm.ioctl(uvm_590.UVM_FREE, new)
  assert new.rmStatus == nvstatus.NV_ERR_INVALID_ADDRESS
  assert session.uvmabi.UVM_FREE_PARAMS is uvm_590.UVM_FREE_PARAMS
