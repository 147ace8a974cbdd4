"""The mock PSP bootloader takes LOAD_TOS_SPL_TABLE with the key database image, as Linux 6.12 sends it on MP0 13.x
(psp_v13_0_bootloader_load_spl loads psp->kdb) and tinygrad's AM driver does; any other image stays refused."""
import pytest

from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.psp import PSP, PSPError

ADDR = "0000:03:00.0"


def _spl_gets(monkeypatch, component: str) -> None:
  monkeypatch.setattr(PSP, "_bootloader_image", lambda self, name: self._component(component if name == "PSP_FW_TYPE_PSP_SPL" else name))


def test_the_spl_command_with_the_key_database_image_boots(navi_fw, monkeypatch):
  os, gpu = navi_fw
  _spl_gets(monkeypatch, "PSP_FW_TYPE_PSP_KDB")
  dev = AMDev(os, ADDR, os.config)
  try:
    assert gpu.psp.refused == [] and gpu.psp.sos_alive
    assert [hex(c) for c in gpu.psp.bl_loaded[:2]] == ["0x80000", "0x10000000"]      # KDB, then SPL
  finally: dev.close()


def test_the_spl_command_with_another_components_image_is_refused(navi_fw, monkeypatch):
  os, gpu = navi_fw
  _spl_gets(monkeypatch, "PSP_FW_TYPE_PSP_SYS_DRV")
  with pytest.raises(PSPError, match="bootloader refused the SPL component"): AMDev(os, ADDR, os.config)
  assert gpu.psp.refused and gpu.psp.refused[0].startswith("bootloader SPL: signature check failed")
