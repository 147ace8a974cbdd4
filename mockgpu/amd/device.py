"""Assembling mock AMD GPUs into a MockOS: GPUs, the KFD model (/dev/kfd, render nodes) and their sysfs."""
from __future__ import annotations

from .gpu import GPUProperties, MockAMDGPU
from .kfd import KFDModel
from .topology import publish

GPU_ID_BASE = 0x4A5E        # KFD gpu_ids are 16-bit hashes (kfd_topology.c); the mock's are fixed per index


class MockAMDSystem:
  """The AMD side of a MockOS: `gpus` and the `kfd` model that serves them."""

  def __init__(self, os, count: int = 1, props: GPUProperties | None = None):
    if count < 1: raise ValueError("at least one mock GPU")
    self.os = os
    props = props or GPUProperties.for_target(os.config.mock_gpu)
    self.gpus = [MockAMDGPU(os, i, GPU_ID_BASE + 0x111 * i, props) for i in range(count)]
    self.kfd = KFDModel(os, self.gpus)

  def attach(self, os) -> None:
    self.kfd.attach(os)
    publish(os, self.gpus)
    os.vfs.add_symlink("/sys/class/kfd/kfd", "../../devices/virtual/kfd/kfd")

  def host_memory_freed(self, addr: int, size: int) -> bool: return self.kfd.host_memory_freed(addr, size)

  def close(self) -> None:
    for g in self.gpus: g.close()


def add_amd_gpus(os, count: int = 1, props: GPUProperties | None = None) -> MockAMDSystem:
  return os.add_device(MockAMDSystem(os, count, props))
