"""Assembling mock NV GPUs into a MockOS: the GPUs (gpu.py), the nvidia.ko model (rm.py: /dev/nvidiactl,
/dev/nvidiaN, /dev/nvidia-uvm), and what Linux shows of them: a PCI function each (vendor 0x10de, class 0x0302,
bound to the nvidia driver; BAR0 registers, BAR1 the VRAM aperture), /proc/driver/nvidia/{version,gpus/<bus>/
information} and the loaded modules in /sys/module/<name> (what hcq-smi nv reads).

Which GPU: config.nv_mock_gpu (HCQ_NV_MOCK_GPU), "H200" (GH100, driver 580; the default), "AD102" (an RTX 4090)
or "B200" (GB100, QMD V05). Which driver: config.nv_mock_driver (HCQ_NV_MOCK_DRIVER), a series of
hcq.autogen.nv.series ("580" the default), reported everywhere as that series' tag (580.105.08): the RM model
(rm.py) checks every size against that release's headers."""
from __future__ import annotations

import dataclasses

from ...autogen.nv import series as nv_series
from ..mmio import RegisterMMIO
from ..pci import PCIFunction
from .gpu import GPUS, MockNVGPU
from .rm import RMModel, gpu_id

PCI_CLASS_3D = 0x030200


class NVPCIFunction(PCIFunction):
  def __init__(self, gpu):
    super().__init__(f"0000:{0x40 + gpu.index:02x}:00.0", 0x10DE, gpu.props.device_id, PCI_CLASS_3D, revision=0xA1,
                     subsystem_vendor=0x10DE, subsystem_device=0x18B0, driver="nvidia")
    self.add_bar(0, RegisterMMIO(f"{gpu.name} BAR0", 16 << 20), is_64=False)
    self.add_bar(1, RegisterMMIO(f"{gpu.name} BAR1", 1 << 28), prefetchable=True)


class MockNVSystem:
  def __init__(self, os, count: int = 1, gpu: str = "H200", driver: str | None = None):
    if gpu not in GPUS: raise ValueError(f"mock NV GPU {gpu!r}: known {', '.join(GPUS)}")
    driver = driver or os.config.nv_mock_driver
    if driver not in nv_series.SERIES:
      raise ValueError(f"mock NV driver {driver!r}: known series {', '.join(nv_series.SERIES)}")
    self.os, self.driver = os, driver
    props = dataclasses.replace(GPUS[gpu], driver_version=nv_series.TAGS[driver])
    self.gpus = [MockNVGPU(os, i, props) for i in range(count)]
    self.rm = RMModel(os, self.gpus, driver)

  def attach(self, os) -> None:
    self.rm.attach(os)
    vfs = os.vfs
    props = self.gpus[0].props
    vfs.add_file("/proc/driver/nvidia/version",
                 f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {props.driver_version}  (mock)\n")
    for m in ("nvidia", "nvidia_uvm", "nvidia_modeset"):
      if not vfs.exists(f"/sys/module/{m}"): vfs.add_file(f"/sys/module/{m}/version", f"{props.driver_version}\n")
    for g in self.gpus:
      fn = os.add_pci_function(NVPCIFunction(g))
      vfs.add_file(f"/proc/driver/nvidia/gpus/{fn.addr}/information",
                   f"Model: \t\t {g.props.name}\nIRQ:   \t\t 0\nGPU UUID: \t GPU-{g.uuid.hex()}\n"
                   f"Video BIOS: \t 96.00.00.00.00\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                   f"Device Minor: \t {g.index}\nGPU Excluded:\t No\n")
      vfs.add_file(f"{fn.sysfs_dir}/gpu_id", f"{gpu_id(g)}\n")

  def host_memory_freed(self, addr: int, size: int) -> bool:
    for g in self.gpus: g.host_memory_freed(addr, size)
    return False                 # nothing of the GPUs' is kept alive: the munmap goes ahead

  def close(self) -> None:
    for g in self.gpus: g.close()


def add_nv_gpus(os, count: int = 1, gpu: str = "H200", driver: str | None = None) -> MockNVSystem:
  """driver: the series the mock's nvidia.ko claims (None: config.nv_mock_driver)."""
  return os.add_device(MockNVSystem(os, count, gpu, driver))
