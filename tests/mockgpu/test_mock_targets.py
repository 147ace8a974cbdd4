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


# ---- the mock's dispatch per target, driven with raw KFD ioctls and packets (mock_kfd_harness)
@pytest.fixture(scope="module")
def gfx942():
  from mock_kfd_harness import Harness
  h = Harness(Config(mock_gpu="gfx942"))
  h.pm4q, h.aqlq = h.queue("compute"), h.queue("aql")
  yield h
  h.os.close()


def _vadd_pm4(h, prog, a, b, c, n, rsrc3_reg, initiator):
  from mock_kfd_harness import pm4
  words = prog.pm4_dispatch([a.va, b.va, c.va], (n // 64, 1, 1), (64, 1, 1))
  # the harness writes gfx11's offsets: RSRC3 at 0x228, DISPATCH_DIRECT with CS_W32_EN; move them to the target's
  i = words.index(0x228)
  words[i] = rsrc3_reg
  words[-3] = initiator           # DISPATCH_DIRECT's initiator, before the 2-dword EVENT_WRITE
  # gfx11's RSRC3 offset holds something else: gfx9 must not read it
  return pm4(0x76, 0x228, 0xDEAD) + words + h.release_signal(h.signals.va, 1)


def test_gfx942_pm4_dispatch_is_wave64_and_reads_its_rsrc3_register(gfx942):
  import numpy as np
  from tests.fixtures.opencl.kernels import KERNELS
  h = gfx942
  prog = h.load(KERNELS["vadd"].code_object("gfx942"))
  n = 256
  a, b, c = (h.alloc(4 * n, "gtt") for _ in range(3))
  a.write(np.arange(n, dtype=np.float32).tobytes())
  b.write(np.full(n, 2, np.float32).tobytes())
  seen = []
  h.gpu.dispatch_observers.append(lambda q, launch: seen.append(launch))
  try:
    h.signals.u64()[0] = 0
    h.pm4q.submit(_vadd_pm4(h, prog, a, b, c, n, 0x22D, 0x1))   # gfx9: COMPUTE_SHADER_EN alone (no CS_W32_EN)
    assert h.signals.u64()[0] == 1
  finally: h.gpu.dispatch_observers.clear()
  assert np.array_equal(np.frombuffer(c.read(4 * n), np.float32), np.arange(n, dtype=np.float32) + 2)
  (launch,) = seen
  assert launch["wave_size"] == 64 and launch["rsrc3"] == prog.rsrc3 != 0xDEAD


def test_wave_sizes_a_target_cannot_run_are_queue_errors_naming_it(gfx942):
  import struct
  from tests.fixtures.opencl.kernels import KERNELS
  from hcq.errors import QueueError
  from mock_kfd_harness import Harness
  # a wave32 kernel descriptor in an AQL dispatch packet on gfx942
  h = gfx942
  prog = h.load(KERNELS["empty"].code_object("gfx1200"))
  pkt = struct.pack("<HHHHHHIIIIIQQQQ", 2 | (1 << 8), 3, 64, 1, 1, 0, 64, 1, 1, 0, 0, prog.kd_addr, 0, 0, 0)
  ring = h.aqlq.ring
  slot = (h.aqlq.put // 16) % (ring.size // 64)
  ring.write(pkt, 64 * slot)
  h.aqlq.put += 16
  with pytest.raises(QueueError, match="a wave32 dispatch, which gfx942 cannot run"): h.aqlq.commit()
  # a wave64 kernel on gfx1100 (the PM4 DISPATCH_DIRECT without CS_W32_EN)
  g = Harness(Config(mock_gpu="gfx1100"))
  try:
    q = g.queue("compute")
    prog = g.load(KERNELS["empty"].code_object("gfx942"))
    words = prog.pm4_dispatch([], (1, 1, 1), (64, 1, 1))
    words[-3] = 0x1
    with pytest.raises(QueueError, match="wave64 dispatch is not modelled"): q.submit(words)
  finally: g.os.close()


def test_the_loader_checks_the_elf_mach_against_the_metadata():
  import struct
  from tests.fixtures.opencl.kernels import KERNELS
  code = bytearray(KERNELS["vadd"].code_object("gfx942"))
  flags = struct.unpack_from("<I", code, 0x30)[0]
  assert flags & 0xFF == 0x4C                                 # EF_AMDGPU_MACH_AMDGCN_GFX942 (with feature bits)
  with hcq.open("MOCK+AMD", Config(mock_gpu="gfx942", timeout_s=2)) as d:
    d.load(bytes(code))
    struct.pack_into("<I", code, 0x30, (flags & ~0xFF) | 0x41)  # now gfx1100 in the header, gfx942 in the metadata
    with pytest.raises(DeviceError, match="metadata says gfx942 but its ELF e_flags say gfx1100"): d.load(bytes(code))
    code[8] = 1                                                 # EI_ABIVERSION 1: code object v3
    struct.pack_into("<I", code, 0x30, flags)
    with pytest.raises(DeviceError, match="code object version 3"): d.load(bytes(code))
