import pytest

from .harness import Fabric


@pytest.fixture
def fabric():
  made = []
  def factory(**kw):
    f = Fabric(**kw)
    made.append(f)
    return f
  yield factory
  for f in made: f.close()
