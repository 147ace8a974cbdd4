"""The mock NV GPU: nvidia.ko's RM and UVM ioctls as a model (rm.py), GPUs with GPFIFO channels, a pushbuffer method
interpreter and QMD launches (gpu.py, qmd.py), run by the PTX interpreter (ptx/, the nvptx helper's); device.py puts
them into a MockOS."""
from __future__ import annotations


def rm_os(index: int, config, label: str):
  """The entry drivers/nv's declaration names (Interface.mock): a MockOS with index + 1 mock NV GPUs behind nvidia.ko
  (H200, AD102 or B200: config.nv_mock_gpu)."""
  from .. import gpu_count, mock_nv_os
  return mock_nv_os(config, gpus=gpu_count(index, label))
