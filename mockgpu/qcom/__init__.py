"""The mock Adreno (a630 by default) behind /dev/kgsl-3d0: the KGSL ioctls as a model (kgsl.py), its command
processor (cp.py) and an ir3 emulator for the compute shaders it dispatches (ir3/: split along its sections)."""
from __future__ import annotations


def kgsl_os(index: int, config, label: str):
  """The entry drivers/qcom's declaration names (Interface.mock): a MockOS with a mock Adreno 630 behind
  /dev/kgsl-3d0 (the driver declares one device: index 0)."""
  from ..mockos import MockOS
  os = MockOS(config)
  try: add_qcom_gpu(os)
  except BaseException:
    os.close()
    raise
  return os


def add_qcom_gpu(os, chip_id: int | None = None):
  """Attach a mock Adreno to a MockOS; returns the KGSL model."""
  from .kgsl import CHIP_A630, KGSLModel
  return os.add_device(KGSLModel(os, CHIP_A630 if chip_id is None else chip_id))
