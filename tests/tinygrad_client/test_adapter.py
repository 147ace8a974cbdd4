"""The adapter's OS boundary on its own (in this process, on a MockOS the test builds): tinygrad's FileIOInterface
calls reach the mock's files and memory, MMIOInterface accesses inside a register/doorbell window reach the model,
MAP_FIXED replaces part of a reservation, and an ioctl that hands out a descriptor (VFIO) gives a file tinygrad can
wrap again."""
import ctypes
import errno
import os

import pytest

from client_harness import requires_tinygrad

pytestmark = requires_tinygrad


@pytest.fixture
def adapter():
  import tg_adapter
  from tg_adapter import fileio, mmio
  from tinygrad.runtime.support import hcq as tg_hcq
  from hcq.mockgpu import mock_amd_os
  mos = mock_amd_os()
  tg_adapter._os = mos
  yield fileio.make_class(tg_hcq.FileIOInterface), mmio.routed_mmio_class(tg_hcq.MMIOInterface), mos
  tg_adapter._os = None
  mos.close()


TOPO = "/sys/devices/virtual/kfd/kfd/topology/nodes"


def test_files_directories_and_errors_reach_the_mock(adapter):
  FIO, _, mos = adapter
  nodes = FIO(TOPO).listdir()
  assert sorted(nodes) == ["0", "1"]
  gpu_id = int(FIO(f"{TOPO}/1/gpu_id").read())
  assert gpu_id == int(mos.sysfs_read("devices/virtual/kfd/kfd/topology/nodes/1/gpu_id"))
  assert FIO.exists("/dev/kfd") and not FIO.exists("/dev/nvidiactl")
  with pytest.raises(OSError) as e: FIO("/dev/nvidiactl", os.O_RDWR)
  assert e.value.errno == errno.ENOENT and "/dev/nvidiactl" in str(e.value)
  kfd = FIO("/dev/kfd", os.O_RDWR)
  with pytest.raises(OSError) as e: kfd.ioctl(0xDEAD, bytearray(8))
  assert e.value.errno == errno.ENOTTY and "/dev/kfd" in str(e.value)


def test_a_doorbell_store_through_mmiointerface_reaches_the_model(adapter):
  FIO, MMIO, mos = adapter
  kfd = FIO("/dev/kfd", os.O_RDWR)
  gpu = mos.devices[0].gpus[0]
  offset = (3 << 62) | ((gpu.gpu_id & 0xFFFF) << 46)        # KFD_MMAP_TYPE_DOORBELL | gpu id (kfd_ioctl.h)
  va = kfd.mmap(0, 0x2000, 3, 1, offset)
  assert mos.memory.find(va) is not None                     # a PROT_NONE reservation holds the range
  view = mos.devices[0].kfd.doorbell_views[gpu.gpu_id]
  MMIO(va + 8, 8, fmt="Q")[0] = 0x1234_5678_9ABC
  assert view.values[8] == 0x1234_5678_9ABC and MMIO(va, 0x2000, fmt="Q")[1] == 0x1234_5678_9ABC
  with pytest.raises(RuntimeError, match="32- and 64-bit stores only"): MMIO(va, 16, fmt="B")[0] = 1
  plain = ctypes.create_string_buffer(16)                    # ordinary memory stays tinygrad's own view
  MMIO(ctypes.addressof(plain), 16, fmt="I")[1] = 7
  assert plain.raw[4:8] == b"\x07\0\0\0"
  FIO.munmap(va, 0x2000)
  assert mos.memory.find(va) is None


def test_map_fixed_replaces_part_of_a_reservation_with_memory_that_has_physical_pages(adapter):
  FIO, _, mos = adapter
  base = FIO.anon_mmap(0, 0x10_0000, 0, 0x22 | 0x4000, 0)    # PROT_NONE, MAP_PRIVATE|ANONYMOUS|NORESERVE
  va = FIO.anon_mmap(base + 0x4000, 0x2000, 3, 0x21 | 0x10, 0)   # MAP_SHARED|ANONYMOUS|FIXED inside it
  assert va == base + 0x4000
  ctypes.memmove(va, b"tinygrad", 8)
  assert len(mos.phys_addrs(va, 0x2000)) == 2
  with pytest.raises(Exception, match="no physical address"): mos.phys_addrs(base, 0x1000)   # still reserved


def test_an_ioctl_that_returns_a_descriptor_gives_a_file_fileiointerface_wraps(adapter):
  FIO, _, _ = adapter
  from hcq.config import Config
  from hcq.mockgpu import mock_navi31_os
  import tg_adapter
  from hcq.autogen import vfio as v
  mos = mock_navi31_os(Config(mock_am_iommu="identity"))
  tg_adapter._os = mos
  try:
    addr = "0000:03:00.0"
    mos.add_pci_driver("vfio-pci")           # the module loaded (tinygrad would modprobe it)
    FIO(f"/sys/bus/pci/devices/{addr}/driver_override", os.O_WRONLY).write("vfio-pci")
    FIO("/sys/bus/pci/drivers/vfio-pci/bind", os.O_WRONLY).write(addr)
    group = FIO.readlink(f"/sys/bus/pci/devices/{addr}/iommu_group").split("/")[-1]
    container, grp = FIO("/dev/vfio/vfio", os.O_RDWR), FIO(f"/dev/vfio/{group}", os.O_RDWR)
    grp.ioctl(v.VFIO_GROUP_SET_CONTAINER.request, (ctypes.c_int * 1)(container.fd))
    container.ioctl(v.VFIO_SET_IOMMU.request, v.VFIO_TYPE1v2_IOMMU)
    fd = grp.ioctl(v.VFIO_GROUP_GET_DEVICE_FD.request, ctypes.create_string_buffer(addr.encode()))
    dev = FIO(fd=fd)
    info = v.struct_vfio_device_info(argsz=ctypes.sizeof(v.struct_vfio_device_info))
    dev.ioctl(v.VFIO_DEVICE_GET_INFO.request, info)
    assert info.num_regions == v.VFIO_PCI_NUM_REGIONS
    assert dev.read(2, binary=True, offset=v.VFIO_PCI_CONFIG_REGION_INDEX << 40) == b"\x02\x10"    # AMD's vendor id
  finally:
    mos.close()
