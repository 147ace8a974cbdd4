"""Fixtures of the bnxt tests."""
import pytest

from .harness import make_nic


@pytest.fixture
def mock():
  """factory(**kw) -> (MockOS, mock NIC); every MockOS it made is closed after the test."""
  made = []
  def factory(**kw):
    os, nic = make_nic(**kw)
    made.append((os, nic))
    return os, nic
  yield factory
  for os, _ in made: os.close()
