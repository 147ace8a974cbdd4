import glob
import os

import pytest

CORPUS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "opencl", "hsaco")


def corpus_files() -> list[str]:
  return sorted(glob.glob(os.path.join(CORPUS, "*.hsaco")))


@pytest.fixture(scope="session")
def hsaco_files():
  files = corpus_files()
  if len(files) < 20: pytest.skip(f"OpenCL corpus has {len(files)} code objects (< 20): run tests/fixtures/opencl/build.py")
  return files
