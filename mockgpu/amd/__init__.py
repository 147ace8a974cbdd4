"""Mock AMD GPU: KFD model, PM4/SDMA engines, wave emulator (emu/); am/: Navi 31 PCI functions for the AM driver.

The entries drivers/amd's declaration names (Interface.mock), each (index, config, label) -> MockOS with index + 1
GPUs: kfd_os (MOCK+AMD, MOCKKFD+AMD), pci_os (MOCKPCI+AMD), usb_os (MOCKUSB+AMD)."""
from __future__ import annotations


def kfd_os(index: int, config, label: str):
  """Mock gfx1100/gfx1200/gfx942 GPUs (config.mock_gpu) behind /dev/kfd."""
  from .. import gpu_count, mock_amd_os
  return mock_amd_os(config, gpus=gpu_count(index, label))


def pci_os(index: int, config, label: str):
  """Mock Navi 31 PCI functions (amd/am: registers, PSP, SMU, discovery in VRAM) at 0000:03:00.0, 0000:04:00.0, ..."""
  from .. import gpu_count, mock_navi31_os
  return mock_navi31_os(config, gpus=gpu_count(index, label))


def usb_os(index: int, config, label: str):
  """Mock Navi 31s behind mock ASM24xx USB bridges (usb/: a pyusb backend; config.usb_mock_faults)."""
  from .. import gpu_count, mock_navi31_usb_os
  return mock_navi31_usb_os(config, gpus=gpu_count(index, label))
