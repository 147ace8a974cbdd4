"""The mock Adreno (a630 by default) behind /dev/kgsl-3d0: the KGSL ioctls as a model (kgsl.py), its command
processor (cp.py) and an ir3 emulator for the compute shaders it dispatches (ir3.py)."""
from __future__ import annotations


def add_qcom_gpu(os, chip_id: int | None = None):
  """Attach a mock Adreno to a MockOS; returns the KGSL model."""
  from .kgsl import CHIP_A630, KGSLModel
  return os.add_device(KGSLModel(os, CHIP_A630 if chip_id is None else chip_id))
