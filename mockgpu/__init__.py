"""Device models behind the OS interface: the embedded default device of hcq.

A driver's declaration (drivers/<vendor>/__init__.py DRIVER, drivers/hcq/registry.py Interface.mock) names the entry
that builds the mock of each interface it serves: amd.kfd_os, amd.pci_os, amd.usb_os, nv.rm_os, qcom.kgsl_os,
bnxt.pci_os, each (index, config, label) -> MockOS. hcq.open() resolves and calls it (the only import of mockgpu
outside tests); there is no registry here. MockOS (mockos.py) is generic and hosts any number of device models:
  vfs.py     /dev, /sys, /proc in memory (files computed on read, writes reaching the model, device nodes, symlinks)
  files.py   open-file objects (ioctl/mmap/read/write), in-memory eventfd
  memory.py  anonymous host memory at fixed addresses (GPU VA == host VA), fake physical addresses and DMA
  mmio.py    MMIO views: register windows and doorbell pages whose writes call the model, windows over memory
  pci.py     PCI functions: config space (BAR sizing, capabilities), BARs, the sysfs files Linux shows
  amd/       the mock AMD GPU (gfx1100, gfx1200 or gfx942: config.mock_gpu): KFD model (kfd.py), topology
             (topology.py), GPU + queues (gpu.py, queues.py, pm4.py, sdma.py) and the wave emulator (emu/)
  bnxt/      the mock Thor2 NIC

In tests: `mock_amd_os(config, gpus=2)` gives a MockOS with two GPUs behind /dev/kfd; tests/mockgpu/mock_kfd_harness.py
drives it with KFD ioctls, `hcq.open("MOCK+AMD")` with hcq's own driver. config.mock_threaded runs the GPUs in
worker threads; config.mock_instruction_budget bounds each dispatch.
"""
from __future__ import annotations

from .mockos import MockOS

__all__ = ["MockOS", "mock_amd_os", "mock_amd_bnxt_os", "mock_nv_os", "gpu_count"]

# the most GPUs one MockOS builds for a spec (MOCK+AMD:15 is the 16th)
MAX_MOCK_GPUS = 16


def mock_amd_os(config=None, gpus: int = 1, props=None) -> MockOS:
  """A MockOS with `gpus` mock AMD GPUs (config.mock_gpu: gfx1100 by default) behind /dev/kfd."""
  from .amd.device import add_amd_gpus
  os = MockOS(config)
  add_amd_gpus(os, gpus, props)
  return os


def mock_amd_bnxt_os(config=None, gpus: int = 1, props=None, iface: str = "KFD") -> MockOS:
  """A MockOS with `gpus` mock AMD GPUs (behind /dev/kfd, or iface "PCI": mock Navi 31 functions for AM; or iface
  "RM": mock NV GPUs behind nvidia.ko, config.nv_mock_gpu) and one mock Thor2 (config's bnxt_mock_* options) on the
  same mock PCI fabric: a GPU queue's stores to the NIC's BAR reach it (mockgpu/peer.py), the NIC's DMA reaches the
  GPUs' host-visible memory and VRAM BARs (MockOS.bar_to_host)."""
  from .amd.device import add_amd_gpus
  from .bnxt import _add_nics
  os = MockOS(config)
  try:
    if iface == "RM":
      from .nv.device import add_nv_gpus
      add_nv_gpus(os, gpus, os.config.nv_mock_gpu)
    elif iface == "PCI":
      from .amd.am.gpu import add_navi31
      for i in range(gpus): add_navi31(os, f"0000:{3 + i:02x}:00.0", vf=os.config.mock_am_vf,
                                       iommu=os.config.mock_am_iommu or None)
    else: add_amd_gpus(os, gpus, props)
    # the NIC after the GPUs' buses (mock NV GPUs sit at 0x40 + index, mock AMD ones below)
    _add_nics(os, os.config, 0, bus=0x41 if iface != "RM" else 0x40 + max(gpus, 1))
  except BaseException:
    os.close()
    raise
  return os


def mock_nv_os(config=None, gpus: int = 1, gpu: str | None = None) -> MockOS:
  """A MockOS with `gpus` mock NV GPUs behind nvidia.ko (gpu: "H200" or "AD102"; default config.nv_mock_gpu)."""
  from .nv.device import add_nv_gpus
  os = MockOS(config)
  add_nv_gpus(os, gpus, gpu or os.config.nv_mock_gpu)
  return os


def mock_navi31_os(config=None, gpus: int = 1) -> MockOS:
  """A MockOS with `gpus` mock Navi 31 PCI functions at 0000:03:00.0, 0000:04:00.0, ... (for the AM driver)."""
  from .amd.am.gpu import add_navi31
  os = MockOS(config)
  for i in range(gpus): add_navi31(os, f"0000:{3 + i:02x}:00.0", vf=os.config.mock_am_vf, iommu=os.config.mock_am_iommu or None)
  return os


def mock_navi31_usb_os(config=None, gpus: int = 1) -> MockOS:
  """A MockOS with `gpus` mock USB bridges, each with a mock Navi 31 behind it (config.usb_mock_faults injected)."""
  from .amd.am.gpu import add_navi31_usb
  os = MockOS(config)
  for _ in range(gpus): add_navi31_usb(os)
  return os


def gpu_count(index: int, label: str) -> int:
  """The GPUs a mock builds for device `index` (index + 1: device N is the last of them), bounded."""
  if not 0 <= index < MAX_MOCK_GPUS:
    from ..errors import DeviceError
    raise DeviceError(f"{label}: the mock builds at most {MAX_MOCK_GPUS} GPUs (indices 0..{MAX_MOCK_GPUS - 1})")
  return index + 1
