"""Fixtures of the AM tests: a MockOS with one mock Navi 31 PCI function, and the pinned firmware package."""
import pytest

from hcq.config import Config, from_env
from hcq.mockgpu import MockOS
from hcq.mockgpu.amd.am.gpu import add_navi31

ADDR = "0000:03:00.0"


@pytest.fixture
def navi(tmp_path):
  """(os, gpu): the lock dir is the test's own (MockOS keeps locks in memory, but the path names it)."""
  os = MockOS(Config(timeout_s=0.5, lock_dir=str(tmp_path)))
  gpu = add_navi31(os, ADDR)
  yield os, gpu
  os.close()


@pytest.fixture(scope="session")
def fw_dir():
  from hcq.autogen import fwpackage, sources
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e:
    pytest.skip(f"cannot fetch {fwpackage.PACKAGE['name']}={fwpackage.PACKAGE['version']}: {e}")


@pytest.fixture
def navi_fw(fw_dir, tmp_path):
  """(os, gpu) with the pinned firmware package as the machine's firmware folder."""
  os = MockOS(Config(timeout_s=0.3, lock_dir=str(tmp_path), firmware_dir=fw_dir))
  gpu = add_navi31(os, ADDR)
  yield os, gpu
  os.close()
