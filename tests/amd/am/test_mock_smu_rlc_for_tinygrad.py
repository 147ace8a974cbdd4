"""What the mock Navi 31's firmware answers that Linux and tinygrad's AM driver ask after the boot: the SOCCLK and FCLK
DPM tables (smu_v13_0_0_set_default_dpm_table reads them with GetDpmFreqByIndex), and the RLC safe-mode handshake
(gfx_v11_0_set_safe_mode: CMD=1, wait for the RLC firmware to clear it), which no RLC answers before its autoload."""
from hcq.autogen.amd import smu_v13_0_0 as SMU
from hcq.drivers.amd.am.device import AMDev
from hcq.mockgpu.amd.am.discovery import GC_HWID, MP1_HWID

ADDR = "0000:03:00.0"


def _smu(gpu, msg: int, arg: int) -> tuple[int, int]:
  rf = gpu.regs
  c2p = {n: rf.addr(MP1_HWID, "mp_13_0_0", f"MP1_SMN_C2PMSG_{n}") for n in (66, 82, 90)}
  rf.write(c2p[82], arg)
  rf.write(c2p[66], msg)
  return rf.read(c2p[90]), rf.read(c2p[82])


def test_the_smu_answers_every_clock_tinygrad_and_linux_read(navi_fw):
  os, gpu = navi_fw
  dev = AMDev(os, ADDR, os.config)
  try:
    for clk in (SMU.PPCLK_GFXCLK, SMU.PPCLK_UCLK, SMU.PPCLK_SOCCLK, SMU.PPCLK_FCLK):
      status, count = _smu(gpu, SMU.PPSMC_MSG_GetDpmFreqByIndex, clk << 16 | 0xFF)
      assert status == SMU.PPSMC_Result_OK and (count & 0x7FFFFFFF) >= 1, clk
      status, mhz = _smu(gpu, SMU.PPSMC_MSG_GetDpmFreqByIndex, clk << 16 | ((count & 0x7FFFFFFF) - 1))
      assert status == SMU.PPSMC_Result_OK and 0 < (mhz & 0x7FFFFFFF) < 5000, clk
    status, _ = _smu(gpu, SMU.PPSMC_MSG_GetDpmFreqByIndex, SMU.PPCLK_SOCCLK << 16 | 7)    # past the last level
    assert status == SMU.PPSMC_Result_Failed
  finally: dev.close()


def test_rlc_safe_mode_is_acknowledged_only_by_running_rlc_firmware(navi_fw):
  os, gpu = navi_fw
  rf = gpu.regs
  reg = rf.addr(GC_HWID, "gc_11_0_0", "RLC_SAFE_MODE")
  rf.write(reg, 0x1 | 1 << 1)               # before the autoload: nobody answers, CMD stays set
  assert rf.read(reg) & 1 and not gpu.rlc.safe_mode
  dev = AMDev(os, ADDR, os.config)
  try:
    rf.write(reg, 0x1 | 1 << 1)             # enter
    assert rf.read(reg) & 1 == 0 and gpu.rlc.safe_mode
    rf.write(reg, 0x1)                      # exit (MESSAGE 0)
    assert rf.read(reg) & 1 == 0 and not gpu.rlc.safe_mode
  finally: dev.close()
