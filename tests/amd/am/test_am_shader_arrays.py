"""The mock GC's shader arrays (mockgpu/amd/am/shader_arrays.py): GRBM_GFX_INDEX selects the array whose
CC_GC_SHADER_ARRAY_CONFIG (fuses, read-only) and GC_USER_SHADER_ARRAY_CONFIG (per array, broadcast writes reach
every array) answer; the Navi 31 has all its 96 CUs."""
import pytest

from hcq.config import Config
from hcq.drivers.amd.am.device import AMDev
from hcq.mockgpu import MockOS
from hcq.mockgpu.amd.am.discovery import GC_HWID
from hcq.mockgpu.amd.am.gpu import add_navi31

ADDR = "0000:03:00.0"


@pytest.fixture
def vf(tmp_path):
  (tmp_path / "none").mkdir()
  os = MockOS(Config(timeout_s=0.5, lock_dir=str(tmp_path), firmware_dir=str(tmp_path / "none")))
  yield os, add_navi31(os, ADDR, vf=True)
  os.close()


def _sel(rf, se=None, sa=None):
  reg = rf.module("gc_11_0_0").REGS["GRBM_GFX_INDEX"]
  fields = dict(INSTANCE_BROADCAST_WRITES=1)
  fields.update(SE_BROADCAST_WRITES=1) if se is None else fields.update(SE_INDEX=se)
  fields.update(SA_BROADCAST_WRITES=1) if sa is None else fields.update(SA_INDEX=sa)
  rf.write(rf.addr(GC_HWID, "gc_11_0_0", "GRBM_GFX_INDEX"), reg.encode(**fields))


def test_fuses_per_selected_array_and_read_only(vf):
  _, gpu = vf
  rf = gpu.regs
  cc = rf.addr(GC_HWID, "gc_11_0_0", "CC_GC_SHADER_ARRAY_CONFIG")
  got = {}
  for se in range(3):
    for sa in range(2):
      _sel(rf, se, sa)
      rf.write(cc, 0)                                        # fuses: the write changes nothing
      got[(se, sa)] = rf.read(cc) >> 16
  assert got == {(se, sa): 0b10000 if sa == 1 else 0 for se in range(3) for sa in range(2)}


def test_user_config_is_per_array_and_broadcast_writes_reach_all(vf):
  _, gpu = vf
  rf = gpu.regs
  user = rf.addr(GC_HWID, "gc_11_0_0", "GC_USER_SHADER_ARRAY_CONFIG")
  _sel(rf, 2, 1)
  rf.write(user, 0b1 << 16)
  _sel(rf, 0, 0)
  assert rf.read(user) == 0
  _sel(rf, 2, 1)
  assert rf.read(user) == 0b1 << 16
  _sel(rf, None, 0)                                          # every SE, SA 0
  rf.write(user, 0b110 << 16)
  assert gpu.shader_arrays.user_off == {(0, 0): 0b110, (1, 0): 0b110, (2, 0): 0b110, (2, 1): 0b1}


def test_the_navi31_has_all_96_cus(navi_fw):
  os, gpu = navi_fw
  assert gpu.shader_arrays.fused_off == {}
  with AMDev(os, ADDR, os.config) as d:
    assert d.gfx.active_cus == 96 and set(d.gfx.active_wgps.values()) == {0b1111} and len(d.gfx.active_wgps) == 12
