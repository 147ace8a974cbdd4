import os

import pytest

from hcq.config import Config

KERNELS = os.path.join(os.path.dirname(__file__), "..", "..", "drivers", "amd", "kernels", "demo.hsaco")


@pytest.fixture
def demo_code():
  with open(KERNELS, "rb") as f: return f.read()


@pytest.fixture
def fake_dev():
  from hcq.drivers.amd import open_device
  from fakekfd import FakeKFDOS
  osi = FakeKFDOS(Config(timeout_s=0.5))
  dev = open_device("KFD", 0, osi, osi.config)
  yield dev, osi
  dev.close()
