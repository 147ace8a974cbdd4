"""tinygrad's AM driver (its own bring-up of a Navi 31 from userspace) on MOCKPCI+AMD, through the adapter's PCI side:
sysfs scan and resource files, BAR mappings (registers routed to the model, VRAM as memory), pagemap physical
addresses, the device lock, and its firmware read from the pinned package instead of downloaded.

Where it stops today (see README.md): the boot completes, the page tables are walked as physical addresses (issue 26
item 2), the MQD is reached through the system aperture and the doorbells through the RSMU window and S2A routes; the
first copy then faults (UTCL2) at a GPU VA where tinygrad mapped host pages whose host address is another: the mock
engines reach system memory only at its own host address (mockgpu/amd/am/cp.py), a limit of the mock, not of
tinygrad. The kernel test below is an expected failure naming that stop."""
import pytest

from client_harness import requires_tinygrad, run_client, steps


@pytest.fixture(scope="module")
def fw_dir():
  from hcq.autogen import fwpackage, sources
  from hcq.config import from_env
  try: return fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e: pytest.skip(f"cannot fetch {fwpackage.PACKAGE['name']}={fwpackage.PACKAGE['version']}: {e}")


@pytest.fixture(scope="module")
def am_run(fw_dir):
  return run_client("am", "MOCKPCI+AMD", HCQ_FIRMWARE_DIR=fw_dir, DEBUG=2)


@requires_tinygrad
def test_tinygrad_am_boots_the_mock_navi31(am_run):
  out = am_run.stdout
  for ip in ("AM_SOC", "AM_GMC", "AM_IH", "AM_PSP", "AM_SMU", "AM_GFX", "AM_SDMA"):
    assert f"am 0000:03:00.0: {ip} initialized" in out, out[-4000:]
  assert "am 0000:03:00.0: boot done" in out, out[-4000:]
  assert "MOCK PSP refused" not in out, out[-4000:]     # every image and command the PSP was given, accepted


STOP = "client=SOC21_IH_CLIENTID_GFX src=UTCL2_FAULT(0)"      # the first SDMA copy's system pages, out of reach


@requires_tinygrad
def test_tinygrad_am_opens_copies_and_runs_vadd(am_run):
  out = am_run.stdout + am_run.stderr
  if am_run.returncode != 0 and STOP in out and "Device hang detected" in out:
    pytest.xfail("the mock engines reach host pages only at their own host address; tinygrad maps them at other GPU "
                 "VAs (its first copy faults in UTCL2)")
  assert am_run.returncode == 0 and steps(am_run) == ["open", "copies", "program", "kernel"], out[-4000:]
