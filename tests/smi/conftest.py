import pathlib
import sys

import pytest

# the fake sysfs builder is shared with tests/system
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "system"))


@pytest.fixture
def locks(tmp_path):
  """An empty lock folder for the test (HCQ_LOCK_DIR of the hcq-smi runs)."""
  d = tmp_path / "locks"
  d.mkdir()
  return d


@pytest.fixture
def procs():
  """A list the test appends the processes it starts to: every one still running is killed afterwards."""
  started = []
  yield started
  for p in started:
    if p.poll() is None: p.kill()
    p.wait(10)
