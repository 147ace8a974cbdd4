"""tinygrad's AM driver (its own bring-up of a Navi 31 from userspace) on MOCKPCI+AMD, through the adapter's PCI side:
sysfs scan and resource files, BAR mappings (registers routed to the model, VRAM as memory), pagemap physical
addresses, the device lock, and its firmware read from the pinned package instead of downloaded.

It runs to the end: the boot completes, the page tables are walked as physical addresses (issue 26 item 2), the MQD
is reached through the system aperture and the doorbells through the RSMU window and S2A routes, its copies and a
kernel give numpy's results. Two mock limits it found on the way (mockgpu/amd/am/cp.py, blocks.py): VRAM at a VA the
process had only reserved (tinygrad keeps its whole GPU VA range PROT_NONE) was out of the engines' reach, and a huge
(PDE_PTE) entry at a VRAM address that is not 2 MiB-aligned was masked down to the alignment."""
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


@requires_tinygrad
def test_tinygrad_am_opens_copies_and_runs_vadd(am_run):
  out = am_run.stdout + am_run.stderr
  assert am_run.returncode == 0 and steps(am_run) == ["open", "copies", "program", "kernel"], out[-4000:]
  assert "UTCL2_FAULT" not in out, out[-4000:]
