"""The NV suite on each nvidia.ko series the mock can claim (hcq.autogen.nv.series.SERIES): the mock's RM checks every
control, alloc and UVM size against that release's generated headers, so the driver must speak each one.

`nv_mock_driver` is autouse: the open/copy/launch modules (EACH_DRIVER) run once per series, the rest on the default
(580, the H200's). A test opens its mock with whatever Config it likes; the mock's nvidia.ko then claims the series of
this parameter unless the test names one itself (add_nv_gpus(driver=...) or a Config with nv_mock_driver)."""
import pytest

from hcq.autogen.nv.series import SERIES
from hcq.config import Config

EACH_DRIVER = ("test_rm.py", "test_launch.py", "test_abi_series.py")


def pytest_generate_tests(metafunc):
  if "nv_mock_driver" in metafunc.fixturenames:
    each = metafunc.definition.path.name in EACH_DRIVER
    metafunc.parametrize("nv_mock_driver", SERIES if each else (Config.nv_mock_driver,), indirect=True,
                         ids=lambda s: f"r{s}")


# test_launch.py's corpus on the series other than the default: these kernels, each a launch path the series' RM
# takes part in (a plain launch, a scalar struct in constant buffer 0, dynamic shared memory, per-thread local memory
# set up through RM, a 3-D grid); every kernel runs on the default series on every GPU, and the whole matrix of
# series x GPU x kernel under -m slow
CORPUS_ON_EVERY_SERIES = ("vadd", "struct_param", "dyn_shared", "local_array", "grid3d")


@pytest.hookimpl(tryfirst=True)      # before -m "not slow" deselects
def pytest_collection_modifyitems(config, items):
  for item in items:
    if item.originalname != "test_the_corpus_gives_numpys_results" or item.path.name != "test_launch.py": continue
    params = item.callspec.params
    if params["nv_mock_driver"] != Config.nv_mock_driver and params["name"] not in CORPUS_ON_EVERY_SERIES:
      item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def nv_mock_driver(request, monkeypatch):
  from hcq.mockgpu.nv import device
  series, init = request.param, device.MockNVSystem.__init__

  def claim(self, os, count=1, gpu="H200", driver=None):
    default = os.config.nv_mock_driver == Config.nv_mock_driver       # the test did not ask for a series
    init(self, os, count, gpu, driver or (series if default else None))
  monkeypatch.setattr(device.MockNVSystem, "__init__", claim)
  return series
