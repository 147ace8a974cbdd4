"""The limits of the multi-target AMD driver and its mock: an unsupported GPU closes what it opened
and names itself, an SDMA version below every known one is a DeviceError, the mock takes SDMA 5.x like the driver, and
AQL scratch past its 32-bit descriptor is refused by name."""
from __future__ import annotations

import pytest

from hcq.drivers.amd.device import AMDDevice
from hcq.errors import DeviceError
from hcq.mockgpu.amd.sdma import copy_count_mask


class _Iface:
  """An session whose GPU hcq has no tables for: opening must close it and name it."""
  label, arch, closed = "FAKE+AMD:0", "gfx1030", False
  props = {"num_xcc": 1}

  def __init__(self, gc_ip, sdma_ip): self.gc_ip, self.sdma_ip = gc_ip, sdma_ip
  def close(self): self.closed = True


@pytest.mark.parametrize("gc, sdma_ip, match", [((10, 3, 0), (5, 2, 0), "GC 10.3.0"), ((11, 0, 0), (2, 0, 0), "SDMA 2.0.0")])
def test_an_unsupported_gpu_closes_its_iface_and_names_itself(gc, sdma_ip, match):
  from hcq.mockgpu import MockOS
  from hcq.config import Config
  session = _Iface(gc, sdma_ip)
  with pytest.raises(DeviceError, match=f"gfx1030 on FAKE\\+AMD:0: .*{match}"):
    AMDDevice(session, MockOS(Config()), Config())
  assert session.closed


def test_the_mock_takes_an_sdma_version_as_the_driver_does():
  assert copy_count_mask((5, 2, 0)) == copy_count_mask((4, 4, 2)) == 0x003FFFFF
  assert copy_count_mask((7, 0, 0)) == 0x3FFFFFFF
  with pytest.raises(ValueError, match="mock SDMA 3.0.0"): copy_count_mask((3, 0, 0))


def test_aql_scratch_past_its_32_bit_descriptor_is_refused_by_name():
  """MI300X (8 XCCs, 304 CUs): about 52 KiB of private memory per lane already needs more than 4 GiB per XCC, which
  the AQL scratch resource's 32-bit NUM_RECORDS cannot hold (it was cut silently); below WAVESIZE's own limit."""
  import dataclasses
  import hcq
  from hcq.config import from_env
  with hcq.open("MOCK+AMD", dataclasses.replace(from_env(), mock_gpu="gfx942")) as dev:
    assert dev.aql
    dev.scratch_for(1024)                       # a small one is fine
    with pytest.raises(DeviceError, match=r"bytes per XCC, past the 4 GiB"): dev.scratch_for(60 * 1024)
