"""The mock PSP takes Linux's load order on MP0 13.0.0: LOAD_TOC, the SMU firmware, then SETUP_TMR, then the rest
(psp_hw_start with pmfw_centralized_cstate_management, which psp_check_pmfw_centralized_cstate_management sets for
13.0.0; tinygrad's AM driver loads in that order too), and still hcq's (SETUP_TMR right after LOAD_TOC). Any other
image before SETUP_TMR stays refused."""
import pytest

from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.psp import PSP, PSPError

ADDR = "0000:03:00.0"


def _defer_setup_tmr(monkeypatch, after_loads: int) -> None:
  """The driver's SETUP_TMR is sent after its first `after_loads` LOAD_IP_FW commands instead of before them."""
  real = PSP.submit
  state = {"tmr": None, "loads": 0}

  def submit(self, cmd, what):
    if what == "SETUP_TMR":
      state["tmr"] = (cmd, what)
      return None
    resp = real(self, cmd, what)
    if what.startswith("LOAD_IP_FW"):
      state["loads"] += 1
      if state["loads"] == after_loads: real(self, *state["tmr"])
    return resp
  monkeypatch.setattr(PSP, "submit", submit)


def test_the_smu_firmware_before_setup_tmr_as_linux_loads_it(navi_fw, monkeypatch):
  os, gpu = navi_fw
  _defer_setup_tmr(monkeypatch, after_loads=1)
  dev = AMDev(os, ADDR, os.config)
  try:
    assert gpu.psp.refused == [] and gpu.psp.tmr is not None and gpu.psp.autoloaded
  finally: dev.close()


def test_another_image_before_setup_tmr_is_refused(navi_fw, monkeypatch):
  os, gpu = navi_fw
  _defer_setup_tmr(monkeypatch, after_loads=2)
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW IMU_I .*status 0xffff0006"): AMDev(os, ADDR, os.config)
  assert gpu.psp.refused[0].endswith("before SETUP_TMR")
