"""The mock AMD GPU poses as gfx1100, gfx1200 or gfx942 (config.mock_gpu, HCQ_MOCK_GPU): its KFD topology, node name
and IP discovery say which, and the driver takes its target, wave size and geometry from them."""
import pytest

import hcq
from hcq.config import MOCK_GPUS, Config, from_env
from hcq.errors import ConfigError, DeviceError
from hcq.mockgpu import mock_amd_os

TOPOLOGY = "devices/virtual/kfd/kfd/topology/nodes/1"
# target -> (gfx_target_version, wave_front_size, CUs, lds_size_in_kb, num_xcc, max_waves_per_simd, GC IP version)
EXPECTED = {
  "gfx1100": (110000, 32, 96, 64, 1, 16, (11, 0, 0)),
  "gfx1200": (120000, 32, 32, 64, 1, 16, (12, 0, 0)),
  "gfx942": (90402, 64, 304, 64, 8, 8, (9, 4, 3)),
}


def test_the_variable_selects_the_target_and_defaults_to_gfx1100():
  assert from_env({}).mock_gpu == "gfx1100"
  assert from_env({"HCQ_MOCK_GPU": "gfx942"}).mock_gpu == "gfx942"
  assert from_env({"HCQ_MOCK_GPU": " gfx1200 "}).mock_gpu == "gfx1200"
  assert sorted(MOCK_GPUS) == sorted(EXPECTED)


@pytest.mark.parametrize("value", ["gfx90a", "GFX942", "942", "gfx1100,gfx942"])
def test_an_unknown_target_is_a_config_error_naming_the_variable(value):
  with pytest.raises(ConfigError, match=f"HCQ_MOCK_GPU.*{value!r}.*gfx1100, gfx1200, gfx942"):
    from_env({"HCQ_MOCK_GPU": value})
  with pytest.raises(ConfigError, match="Config.mock_gpu"): Config(mock_gpu=value)


def _props(os) -> dict:
  return {k: int(v) for k, v in (l.split() for l in os.sysfs_read(f"{TOPOLOGY}/properties").splitlines())}


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_topology_and_ip_discovery_report_the_target(target):
  version, wave, cus, lds, xcc, waves, gc = EXPECTED[target]
  os = mock_amd_os(Config(mock_gpu=target))
  try:
    p = _props(os)
    assert os.sysfs_read(f"{TOPOLOGY}/name").strip() == target
    assert (p["gfx_target_version"], p["wave_front_size"], p["simd_count"] // p["simd_per_cu"], p["lds_size_in_kb"],
            p["num_xcc"], p["max_waves_per_simd"]) == (version, wave, cus, lds, xcc, waves)
    # the shader-array geometry covers the active CUs (KFD reports the physical CU slots per array)
    assert p["array_count"] * p["cu_per_simd_array"] >= cus
    minor = p["drm_render_minor"]
    ip = f"class/drm/renderD{minor}/device/ip_discovery/die/0/11/0"
    assert tuple(int(os.sysfs_read(f"{ip}/{f}")) for f in ("major", "minor", "revision")) == gc
    seg0 = int(os.sysfs_read(f"{ip}/base_addr").split()[0], 16)
    assert seg0 == (0x2000 if gc[0] == 9 else 0x1260)
  finally: os.close()


@pytest.mark.parametrize("target", sorted(EXPECTED))
def test_the_driver_takes_the_target_from_the_topology(target):
  version, wave, cus, lds, xcc, *_ = EXPECTED[target]
  with hcq.open("MOCK+AMD", Config(mock_gpu=target, timeout_s=2)) as d:
    assert d.arch == target and target in d.name
    assert (d.props["wave_front_size"], d.props["num_xcc"], d.props["lds_size_in_kb"]) == (wave, xcc, lds)


def test_a_code_object_for_another_target_is_refused_naming_both():
  from tests.fixtures.opencl.kernels import KERNELS
  with hcq.open("MOCK+AMD", Config(mock_gpu="gfx942", timeout_s=2)) as d:
    with pytest.raises(DeviceError, match="the code object is for gfx1100, this device is gfx942"):
      d.load(KERNELS["vadd"].code_object())
