"""The NV driver over the mock nvidia.ko: the RM object tree, class selection per GPU, memory, copies, and RM errors
named by call, class and NV status."""
import ctypes

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.autogen.nv import rm_abi as abi
from hcq.drivers.nv import open_device
from hcq.drivers.nv.rm import RMError, RMSession
from hcq.autogen.nv import rm_550
from hcq.mockgpu import mock_nv_os


@pytest.fixture(params=["H200", "AD102"])
def gpu(request): return request.param


def _open(gpu="H200", **kw):
  os = mock_nv_os(Config(**kw), gpu=gpu)
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  return dev


@pytest.mark.parametrize("gpu,compute,copy,qmd,arch", [
  ("H200", abi.HOPPER_COMPUTE_A, abi.HOPPER_DMA_COPY_A, 4, "sm_90"),
  ("AD102", abi.ADA_COMPUTE_A, abi.AMPERE_DMA_COPY_B, 3, "sm_89"),
  ("B200", abi.BLACKWELL_COMPUTE_A, abi.BLACKWELL_DMA_COPY_A, 5, "sm_100")])
def test_the_driver_picks_the_classes_and_qmd_of_the_gpu(gpu, compute, copy, qmd, arch):
  with _open(gpu) as dev:
    assert (dev.compute_class, dev.copy_class, dev.qmd_major, dev.arch) == (compute, copy, qmd, arch)
    rm = dev.owned_os.devices[0].rm
    tree = {o.cls for o in rm.objects.values()}
    # the object tree: client, device, subdevice, VA space, channel group, context share, channels, engine objects
    for cls in (abi.NV01_ROOT_CLIENT, abi.NV01_DEVICE_0, abi.NV20_SUBDEVICE_0, abi.FERMI_VASPACE_A,
                abi.KEPLER_CHANNEL_GROUP_A, abi.FERMI_CONTEXT_SHARE_A, abi.NV01_MEMORY_VIRTUAL, compute, copy):
      assert cls in tree, abi.class_name(cls)
    gpfifo = {"H200": abi.HOPPER_CHANNEL_GPFIFO_A, "AD102": abi.AMPERE_CHANNEL_GPFIFO_A,
              "B200": abi.BLACKWELL_CHANNEL_GPFIFO_A}[gpu]
    assert sum(o.cls == gpfifo for o in rm.objects.values()) == 2


def test_the_default_mock_is_an_h200():
  with hcq.open("MOCK+NV") as dev:
    assert dev.compute_class == abi.HOPPER_COMPUTE_A and dev.arch == "sm_90"


def test_close_frees_the_client_and_everything_under_it():
  dev = _open()
  rm, os = dev.owned_os.devices[0].rm, dev.owned_os
  dev.owned_os = None
  dev.close()
  assert rm.objects == {} and all(not g.channels for g in os.devices[0].gpus)
  os.close()


def test_copies_round_trip_on_both_gpus(gpu):
  with _open(gpu) as dev:
    data = np.random.default_rng(1).integers(0, 2**32, 3 << 20, dtype=np.uint32)   # 12 MiB: several staging chunks
    buf = dev.alloc(data.nbytes)
    dev.copyin(buf, data)
    assert np.array_equal(np.frombuffer(dev.copyout(buf), np.uint32), data)
    host = dev.alloc(4096, host=True)
    dev.copyin(host, b"x" * 4096)
    assert dev.copyout(host, 4) == b"xxxx"
    dev.free(buf)
    dev.free(host)


def _iface():
  os = mock_nv_os(Config())
  return os, RMSession(os, 0, os.config, label="MOCK+NV:0")


def test_rm_errors_name_the_call_the_class_and_the_status():
  os, rm = _iface()
  try:
    with pytest.raises(RMError, match=r"NV_ESC_RM_ALLOC of ADA_COMPUTE_A \(0xc9c0\).*NV_ERR_INVALID_CLASS \(0x22\)") as e:
      rm.rm_alloc(rm.device, abi.ADA_COMPUTE_A)   # not in GH100's class list
    assert e.value.status_name == "NV_ERR_INVALID_CLASS"
    with pytest.raises(RMError, match=r"under 0xdead.*NV_ERR_INVALID_OBJECT_PARENT"):
      rm.rm_alloc(0xDEAD, abi.NV20_SUBDEVICE_0, abi.NV2080_ALLOC_PARAMETERS())
    with pytest.raises(RMError, match=r"of 0x800201 on 0xbad.*NV_ERR_INVALID_OBJECT_HANDLE \(0x33\)"):
      rm.rm_control(0xBAD, abi.NV0080_CTRL_CMD_GPU_GET_CLASSLIST, abi.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS())
    with pytest.raises(RMError, match=r"NV_ESC_RM_FREE of 0x1234.*NV_ERR_OBJECT_NOT_FOUND \(0x57\)"):
      rm.rm_free(0x1234, rm.device)
    with pytest.raises(RMError, match=r"NV_ERR_INVALID_OBJECT_PARENT"):   # a subdevice belongs under a device
      rm.rm_alloc(rm.subdevice, abi.NV20_SUBDEVICE_0, abi.NV2080_ALLOC_PARAMETERS())
    with pytest.raises(RMError, match=r"UVM_MAP_EXTERNAL_ALLOCATION.*NV_ERR_INVALID_ADDRESS"):
      rm.uvm_call(abi.UVM_MAP_EXTERNAL_ALLOCATION, rm.uvmabi.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=0x1000, length=0x1000))
  finally:
    rm.close()
    os.close()


def test_another_series_map_call_fails_with_einval(nv_mock_driver):
  """NVOS46 is 56 bytes to 575 and 64 from 580 (nvos.h): the size is part of the request, so another series' layout
  is another ioctl, refused by the unix layer before RM sees it."""
  from hcq.autogen.nv import rm_580
  os, rm = _iface()
  try:
    assert rm.series == nv_mock_driver      # picked by the version the mock's /proc/driver/nvidia/version shows
    mine = ctypes.sizeof(rm.rm.NVOS46_PARAMETERS)
    other = rm_550 if mine == 64 else rm_580
    mem = rm.alloc(0x1000, kind="host")
    a = other.NVOS46_PARAMETERS(hClient=rm.root, hDevice=rm.device, hDma=rm.virtmem, hMemory=mem.handle, length=0x1000)
    with pytest.raises(hcq.DeviceError, match=f"NV_ESC_RM_MAP_MEMORY_DMA.*Errno 22.*{ctypes.sizeof(a)} bytes, the driver "
                                              f"takes {mine}"):
      rm._escape(rm.ctl, abi.NV_ESC_RM_MAP_MEMORY_DMA, a, "test")
    assert mine == (64 if int(nv_mock_driver) >= 580 else 56)
  finally:
    rm.close()
    os.close()


def _mappings(os, what: str) -> list[int]:
  """Starts of the mock OS's mappings whose description holds `what`."""
  return [s for s, (_, w) in os.memory._ranges.items() if what in w]


def test_close_unmaps_the_usermode_page_and_the_channel_va_reservation():
  os, rm = _iface()
  try:
    usermode, channel_va = rm.usermode_va, rm._channel_va
    assert os.memory.find(usermode) is not None and os.memory.find(channel_va) is not None
    rm.close()
    assert os.memory.find(usermode) is None and os.memory.find(channel_va) is None
    assert os.devices[0].gpus[0].doorbell_cell is None      # the mock no longer polls the unmapped page
  finally: os.close()


def test_a_failed_open_unmaps_what_it_mapped(monkeypatch):
  os = mock_nv_os(Config())
  try:
    before = {s for s in os.memory._ranges}
    monkeypatch.setattr(RMSession, "_gr_info", lambda self: (_ for _ in ()).throw(hcq.DeviceError("GR info failed")))
    with pytest.raises(hcq.DeviceError, match="GR info failed"):
      RMSession(os, 0, os.config, label="MOCK+NV:0")
    assert not _mappings(os, "usermode") and set(os.memory._ranges) == before
    monkeypatch.undo()
    # a failure before the usermode page is mapped: the clean-up finds nothing to unmap (and no missing attribute)
    monkeypatch.setattr(RMSession, "_pick", lambda self, what, prefs: prefs[-1] if what != "copy" else
                        (_ for _ in ()).throw(hcq.DeviceError("no copy class")))
    with pytest.raises(hcq.DeviceError, match="no copy class"):
      RMSession(os, 0, os.config, label="MOCK+NV:0")
    assert set(os.memory._ranges) == before
  finally: os.close()


@pytest.mark.parametrize("version,why", [("595.45.04", "newer than"), ("620.13.01", "newer than"),
                                         ("535.247.01", "older than"), ("560.35.03", "between")])
def test_a_driver_of_a_series_without_checked_layouts_is_refused_naming_its_version(version, why):
  os = mock_nv_os(Config())
  try:
    os.vfs.add_file("/proc/driver/nvidia/version", f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}"
                    f"  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Oct 30 2025\n", replace=True)
    with pytest.raises(hcq.DeviceError, match=rf"MOCK\+NV:0: NVIDIA driver {version.replace('.', '[.]')}: series "
                                              rf"{version[:3]} is {why} .*550, 570, 575, 580, 590"):
      RMSession(os, 0, os.config, label="MOCK+NV:0")
    assert not [k for k in os.devices[0].rm.objects]      # refused before the first RM call
  finally: os.close()
