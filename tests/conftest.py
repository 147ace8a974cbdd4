import gc
import pathlib
import shutil
import sys
import threading

import pytest
from hypothesis import settings

# Property tests of the default suite draw the same examples on every run (Hypothesis derives them from each test's
# name), so that CI passes or fails the same way for the same code, and a failure there reproduces here. The slow
# variants (`-m slow`) set derandomize=False and explore new examples on every run.
settings.register_profile("hcq-reproducible", derandomize=True)
settings.load_profile("hcq-reproducible")

# the committed OpenCL corpus is imported as tests.fixtures.opencl.kernels: the folder above tests/ must be on the path
# whichever tests run (appended: the hcq package itself is imported from the installation)
_ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path: sys.path.append(_ROOT)


def pytest_collection_finish(session):
  """The collected modules, fixtures and test items live for the whole session: move them out of the collector's
  reach (gc.freeze) so that each full collection does not walk them again, and collect the young generation less
  often (the mocks allocate many short-lived objects per launch). Cycles made by the tests are still collected, and
  tests that look for leaks call gc.collect() themselves. (CPython's gc module docs: gc.freeze, gc.set_threshold.)
  This cut the CPU time of tests/runtime + tests/emu + tests/qcom by ~12% and tests/backend + tests/compiler by ~5%."""
  gc.collect()
  gc.freeze()
  gc.set_threshold(50_000, 20, 20)


def pytest_collection_modifyitems(config, items):
  """Tests marked `tools("gcc", "llvm-mc-19", ...)` skip when a Debian tool they need is missing, naming it."""
  for item in items:
    for mark in item.iter_markers(name="tools"):
      missing = [t for t in mark.args if shutil.which(t) is None]
      if missing: item.add_marker(pytest.mark.skip(reason=f"missing tools: {', '.join(missing)} (run scripts/test.sh)"))


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test(request):
  """A test that leaves a thread running (a mock GPU's worker, a NIC's receive loop: a device or MockOS nobody
  closed) fails: such threads keep polling and slow down every later test."""
  before = set(threading.enumerate())
  yield
  left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
  if left:
    for t in left: t.join(timeout=1.0)   # one that is on its way out
    left = [t for t in left if t.is_alive()]
  assert not left, f"{request.node.nodeid} left threads running: {', '.join(sorted(t.name for t in left))}"
