"""AM's system memory through VFIO where the IOMMU translates DMA (drivers/system/vfio.py), on the mock's VFIO and
IOMMU model (mockgpu/vfio.py): detection from the IOMMU group, the VFIO set-up and its refusals, IOVA mappings,
a boot that runs corpus kernels through VFIO, and the same mock failing when the driver uses physical addresses."""
import errno

import pytest

import hcq
from hcq.autogen import vfio as v
from hcq.config import Config, from_env
from hcq.drivers.amd.am.pci import AMPCI
from hcq.drivers.system import vfio
from hcq.errors import ConfigError, DeviceError, GPUFault, OSCallError
from hcq.mockgpu import MockOS
from hcq.mockgpu import vfio as mvfio
from hcq.mockgpu.amd.am.gpu import add_navi31
from hcq.mockgpu.pci import PCIFunction

ADDR = "0000:03:00.0"


def make(tmp_path, iommu, **cfg):
  os = MockOS(Config(timeout_s=0.5, lock_dir=str(tmp_path), **cfg))
  return os, add_navi31(os, ADDR, iommu=iommu)


# ---- detection (Documentation/ABI/testing/sysfs-kernel-iommu_groups)
@pytest.mark.parametrize("iommu, type_text, option, want", [
  (None, None, "auto", "pagemap"),                 # no iommu_group link: no IOMMU
  ("identity", None, "auto", "pagemap"),           # passthrough
  ("dma", None, "auto", "vfio"),                   # type "DMA"
  ("dma", "DMA-FQ", "auto", "vfio"),               # lazy-flush translation
  ("dma", "blocked", "auto", "vfio"),
  ("dma", None, "pagemap", "pagemap"),             # forced
  ("identity", None, "vfio", "vfio"),
])
def test_detection_table(tmp_path, iommu, type_text, option, want):
  os, gpu = make(tmp_path, iommu)
  if type_text is not None: os.vfs.add_file("/sys/kernel/iommu_groups/1/type", type_text + "\n", replace=True)
  mode, group, why = vfio.dma_mode(os, ADDR, option)
  assert mode == want and group == (None if iommu is None else "1") and why
  os.close()


def test_detection_refusals(tmp_path):
  os, gpu = make(tmp_path, None)
  with pytest.raises(DeviceError, match=f"{ADDR}.*am_dma=vfio.*no IOMMU group"): vfio.dma_mode(os, ADDR, "vfio")
  with pytest.raises(DeviceError, match="'sometimes'"): vfio.dma_mode(os, ADDR, "sometimes")
  os.close()
  os, gpu = make(tmp_path, "dma")
  os.vfs.add_file("/sys/kernel/iommu_groups/1/type", "weird\n", replace=True)
  with pytest.raises(DeviceError, match="IOMMU group 1 has type 'weird'.*am_dma"): vfio.dma_mode(os, ADDR)
  os.vfs.add_symlink(f"{gpu.function.sysfs_dir}/iommu_group", "../../../kernel/iommu_groups/x1", replace=True)
  with pytest.raises(DeviceError, match="not an IOMMU group number"): vfio.dma_mode(os, ADDR)
  os.close()


def test_config_option():
  assert Config().am_dma == "auto" and from_env({"HCQ_AM_DMA": "vfio"}).am_dma == "vfio"
  assert from_env({"HCQ_MOCK_AM_IOMMU": "dma"}).mock_am_iommu == "dma"
  with pytest.raises(ConfigError, match="HCQ_AM_DMA"): from_env({"HCQ_AM_DMA": "iommu"})
  with pytest.raises(ConfigError, match="HCQ_MOCK_AM_IOMMU"): from_env({"HCQ_MOCK_AM_IOMMU": "on"})


# ---- the VFIO set-up
def test_ampci_opens_through_vfio_and_maps_iovas(tmp_path):
  os, gpu = make(tmp_path, "dma")
  pci = AMPCI(os, ADDR)
  assert pci.dma == "vfio" and isinstance(pci.pci, vfio.VFIOPCIDevice)
  assert pci.bus_master and gpu.function.command & 0x6 == 0x6     # the command register written through VFIO
  assert pci.mmio.read32(0) == gpu.regs.mmio.read32(0)            # the register BAR through the device file
  mem = pci.alloc_sysmem(0x3000)
  assert mem.paddrs == [mem.iova, mem.iova + 0x1000, mem.iova + 0x2000] and mem.iova >= vfio.IOVA_BASE
  pages = gpu.iommu_group.bus_pages()
  assert [pages.get(p) for p in mem.paddrs] == [mem.addr, mem.addr + 0x1000, mem.addr + 0x2000]
  phys = os.phys_addrs(mem.addr, 0x1000)[0]
  assert phys not in pages        # a physical address reaches nothing behind the translating IOMMU
  pci.free_sysmem(mem)
  assert not gpu.iommu_group.bus_pages()            # unmapped before the pages went
  pci.close()
  assert gpu.iommu_group.container is None and not os.held_locks()
  os.close()


def test_identity_group_keeps_pagemap(tmp_path):
  os, gpu = make(tmp_path, "identity")
  pci = AMPCI(os, ADDR)
  mem = pci.alloc_sysmem(0x1000)
  assert pci.dma == "pagemap" and mem.iova is None and mem.paddrs == os.phys_addrs(mem.addr, 0x1000)
  assert gpu.iommu_group.bus_pages()[mem.paddrs[0]] == mem.addr
  pci.close()
  os.close()


def test_not_bound_to_vfio_pci_is_refused_with_instructions(tmp_path):
  os, gpu = make(tmp_path, "dma")
  os.sysfs_write("bus/pci/drivers/vfio-pci/unbind", ADDR)
  with pytest.raises(DeviceError, match=f"{ADDR}.*bound to no driver.*driver_override.*drivers/vfio-pci/bind"):
    AMPCI(os, ADDR)
  assert not os.held_locks()      # the lock taken before the refusal is given back
  os.close()


def test_group_not_viable_names_the_group_and_the_device(tmp_path):
  os, gpu = make(tmp_path, "dma")
  audio = os.add_pci_function(PCIFunction("0000:03:00.1", 0x1002, 0xAB30, 0x040300, driver="snd_hda_intel"))
  gpu.iommu_group.join(audio)
  with pytest.raises(DeviceError, match=r"VFIO group 1.*IOMMU group 1 is not viable.*0000:03:00\.1 \(snd_hda_intel\)"):
    AMPCI(os, ADDR)
  assert not os.held_locks()
  os.close()


HOSTILE = [
  ("container", "VFIO_GET_API_VERSION", lambda arg: 1, "VFIO_GET_API_VERSION.*returned 1"),
  ("container", "VFIO_CHECK_EXTENSION", lambda arg: 0, "VFIO_CHECK_EXTENSION.*type 1 v2"),
  ("container", "VFIO_SET_IOMMU", lambda arg: 7, "VFIO_SET_IOMMU.*returned 7"),
  ("device", "VFIO_DEVICE_GET_INFO", lambda arg: setattr(arg, "num_regions", 3) or 0, "VFIO_DEVICE_GET_INFO.*3 regions"),
  ("device", "VFIO_DEVICE_GET_REGION_INFO", lambda arg: setattr(arg, "offset", 0x123) or 0, "region 0 .*offset 0x123"),
  ("device", "VFIO_DEVICE_GET_REGION_INFO", lambda arg: setattr(arg, "flags", 3) or 0, "BAR \\d's region cannot be mmapped"),
  ("device", "VFIO_DEVICE_GET_REGION_INFO", lambda arg: setattr(arg, "index", 9) or 0, "region 0 gave index 9"),
]


@pytest.mark.parametrize("which, name, answer, match", HOSTILE, ids=[f"{h[1]}-{i}" for i, h in enumerate(HOSTILE)])
def test_hostile_ioctl_results(tmp_path, monkeypatch, which, name, answer, match):
  cls = {"container": mvfio.ContainerFile, "device": mvfio.DeviceFile}[which]
  real = cls.ioctl
  def ioctl(self, request, arg):
    res = real(self, request, arg)
    return answer(arg) if request == getattr(v, name).request else res
  monkeypatch.setattr(cls, "ioctl", ioctl)
  os, gpu = make(tmp_path, "dma")
  with pytest.raises(DeviceError, match=match): AMPCI(os, ADDR)
  assert not os.held_locks()
  os.close()


def test_failed_vfio_calls_name_device_group_and_ioctl(tmp_path, monkeypatch):
  """A group another process holds (EBUSY on VFIO_GROUP_SET_CONTAINER), a group node missing: the error names the
  device, the group, the ioctl or file."""
  real = mvfio.GroupFile.ioctl
  def busy(self, request, arg):
    if request == v.VFIO_GROUP_SET_CONTAINER.request: raise OSCallError("ioctl", self.path, errno.EBUSY)
    return real(self, request, arg)
  monkeypatch.setattr(mvfio.GroupFile, "ioctl", busy)
  os, gpu = make(tmp_path, "dma")
  with pytest.raises(DeviceError, match=rf"PCI {ADDR} \(VFIO group 1\): .*VFIO_GROUP_SET_CONTAINER.*/dev/vfio/1.*Errno 16"):
    AMPCI(os, ADDR)
  monkeypatch.setattr(mvfio.GroupFile, "ioctl", real)
  os.vfs.remove("/dev/vfio/1")
  with pytest.raises(DeviceError, match=rf"PCI {ADDR} \(VFIO group 1\): open on /dev/vfio/1 failed"): AMPCI(os, ADDR)
  assert not os.held_locks()
  os.close()


def test_failed_dma_map_names_ioctl_group_device_and_address(tmp_path, monkeypatch):
  os, gpu = make(tmp_path, "dma")
  pci = AMPCI(os, ADDR)
  monkeypatch.setattr(mvfio.ContainerFile, "_map", lambda self, m: (_ for _ in ()).throw(
    OSCallError("ioctl", self.path, errno.ENOMEM, "pinning")))
  with pytest.raises(DeviceError, match=rf"PCI {ADDR} \(VFIO group 1\): VFIO_IOMMU_MAP_DMA of host 0x[0-9a-f]+\+0x2000 "
                                        rf"at IOVA {vfio.IOVA_BASE:#x}"):
    pci.alloc_sysmem(0x2000)
  assert not pci._sysmem
  pci.close()
  os.close()


def test_mock_iommu_refuses_unmapped_host_memory(tmp_path):
  """MAP_DMA of memory the process does not have: EFAULT, as the kernel's pinning fails."""
  os, gpu = make(tmp_path, "dma")
  pci = AMPCI(os, ADDR)
  with pytest.raises(DeviceError, match="VFIO_IOMMU_MAP_DMA of host 0x7000000000.*not mapped"):
    pci.pci.dma_map(0x70_0000_0000, 0x1000)
  pci.close()
  os.close()


# ---- booted through VFIO: corpus kernels, and the IOMMU modelled (physical addresses fault)
from tests.amd.am.test_am_corpus import NAMES, run  # noqa: E402
from tests.fixtures.opencl.kernels import KERNELS  # noqa: E402


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "threaded"])
def vfio_dev(request, fw_dir):
  d = hcq.open("MOCKPCI+AMD", Config(mock_threaded=request.param, timeout_s=30, firmware_dir=fw_dir, mock_am_iommu="dma"))
  yield d
  d.close()


def test_booted_through_vfio(vfio_dev):
  import gc
  pcis = [o for o in gc.get_objects() if isinstance(o, AMPCI) and o.lock is not None and o.dma == "vfio"]
  assert pcis and all(m.iova is not None for p in pcis for m in p._sysmem)


@pytest.mark.parametrize("name", NAMES)
def test_corpus_through_vfio(vfio_dev, name):
  k = KERNELS[name]
  data = k.inputs(seed=5)
  k.check(run(vfio_dev, k, data), data)


def test_physical_addresses_fault_behind_the_iommu(fw_dir):
  """The same mock with the pagemap path forced: the GPU's accesses to system memory fault (the IOMMU has no
  mapping for a physical address), never reach host memory."""
  d = hcq.open("MOCKPCI+AMD", Config(timeout_s=5, firmware_dir=fw_dir, mock_am_iommu="dma", am_dma="pagemap"))
  try:
    k = KERNELS["vadd"]
    data = k.inputs(seed=5)
    with pytest.raises(GPUFault, match="page fault"): run(d, k, data)
  finally: d.close()
