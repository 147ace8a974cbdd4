"""The mock PSP takes Linux's load order on MP0 13.0.0: LOAD_TOC, the SMU firmware, then SETUP_TMR, then the rest
(psp_hw_start with pmfw_centralized_cstate_management, which psp_check_pmfw_centralized_cstate_management sets for
13.0.0; tinygrad's AM driver loads in that order too), and still hcq's (SETUP_TMR right after LOAD_TOC). Any other
image before SETUP_TMR stays refused."""
import pytest

from hcq.autogen.amd import psp_gfx_if as PG
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


def test_the_smu_firmware_before_setup_tmr_as_linux_loads_it(navi_fw):
  os, gpu = navi_fw
  dev = AMDev(os, ADDR, os.config)          # the driver's own order is Linux's (issue 26 item 7)
  try:
    assert gpu.psp.refused == [] and gpu.psp.tmr is not None and gpu.psp.autoloaded
    assert [c for c, _ in gpu.psp.commands[:3]] == [PG.GFX_CMD_ID_LOAD_TOC, PG.GFX_CMD_ID_LOAD_IP_FW, PG.GFX_CMD_ID_SETUP_TMR]
  finally: dev.close()


def test_setup_tmr_right_after_load_toc_is_accepted_too(navi_fw, monkeypatch):
  os, gpu = navi_fw
  def tmr_first(self):
    self.tmr = self.dev.vram.alloc(self.load_toc(), "PSP TMR", align=1 << 20)
    self.setup_tmr()
    for load in self.loads: self.load_ip_fw(*load)
    self.submit(PG.struct_psp_gfx_cmd_resp(cmd_id=PG.GFX_CMD_ID_AUTOLOAD_RLC), "AUTOLOAD_RLC")
  monkeypatch.setattr(PSP, "_load_firmware", tmr_first)
  dev = AMDev(os, ADDR, os.config)
  try: assert gpu.psp.refused == [] and gpu.psp.autoloaded and gpu.psp.commands[1][0] == PG.GFX_CMD_ID_SETUP_TMR
  finally: dev.close()


def test_another_image_before_setup_tmr_is_refused(navi_fw, monkeypatch):
  os, gpu = navi_fw
  _defer_setup_tmr(monkeypatch, after_loads=2)
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW IMU_I .*status 0xffff0006"): AMDev(os, ADDR, os.config)
  assert gpu.psp.refused[0].endswith("before SETUP_TMR")
