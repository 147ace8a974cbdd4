import pathlib
import shutil
import sys

import pytest

# the committed OpenCL corpus is imported as tests.fixtures.opencl.kernels: the folder above tests/ must be on the path
# whichever tests run (appended: the hcq package itself is imported from the installation)
_ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path: sys.path.append(_ROOT)


def pytest_collection_modifyitems(config, items):
  """Tests marked `tools("gcc", "llvm-mc-19", ...)` skip when a Debian tool they need is missing, naming it."""
  for item in items:
    for mark in item.iter_markers(name="tools"):
      missing = [t for t in mark.args if shutil.which(t) is None]
      if missing: item.add_marker(pytest.mark.skip(reason=f"missing tools: {', '.join(missing)} (run scripts/test.sh)"))
