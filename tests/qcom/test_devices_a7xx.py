"""Adreno 7xx in the KGSL device info: the mock reports a730/a740 as KGSL does (chip id, gpu id), the driver names
them from Mesa's device table (hcq.autogen.qcom.devices) and refuses them for dispatch with a clear error (hcq's
dispatch is a6xx's)."""
from __future__ import annotations

import ctypes

import pytest

from hcq.autogen.qcom import msm_kgsl as K
from hcq.config import Config
from hcq.drivers.qcom.kgsl import KGSLSession, chip_info
from hcq.errors import DeviceError


def test_chip_ids_name_the_gpu():
  assert chip_info(0x06030001) == ("a630", 630, 6)
  assert chip_info(0x07030001) == ("a730", 730, 7)
  assert chip_info(0x43050A01) == ("a740", 740, 7)     # a740's core byte is 0x43: no digits to read
  assert chip_info(0x09090900) == ("a999", 999, 9)     # unknown to Mesa: the bytes as digits


@pytest.mark.parametrize("chip,gpu_id,name", [(0x07030001, 730, "a730"), (0x43050A01, 740, "a740")])
def test_a7xx_device_info(chip, gpu_id, name):
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.qcom import add_qcom_gpu
  with MockOS() as osi:
    add_qcom_gpu(osi, chip)
    f = osi.open("/dev/kgsl-3d0")
    info = K.struct_kgsl_devinfo()
    K.IOCTL_KGSL_DEVICE_GETPROPERTY(f, type=K.KGSL_PROP_DEVICE_INFO, value=ctypes.addressof(info),
                                    sizebytes=ctypes.sizeof(info))
    f.close()
    assert (info.chip_id, info.gpu_id) == (chip, gpu_id)
    with pytest.raises(DeviceError, match=rf"chip {chip:#010x} \({name}, Adreno 7xx\) is not an Adreno 6xx"):
      KGSLSession(osi, 0, Config())
