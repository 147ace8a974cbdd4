"""The driver registry: hcq.open, spec parsing, autodetection and the README's device list come from the drivers'
own declarations (drivers/<vendor>/__init__.py DRIVER)."""
import pathlib
import re
import subprocess
import sys
import tracemalloc

import pytest

import hcq
from hcq.config import Config

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_readme_lists_exactly_the_registered_devices():
  text = (ROOT / "README.md").read_text()
  listed = re.search(r"<!-- device-list -->\n(.*?)<!-- /device-list -->", text, re.S)
  assert listed, "README.md has no device list"
  assert listed.group(1).rstrip("\n") == hcq.device_list_markdown()


def test_the_device_list_is_data():
  records = hcq.device_list()
  specs = [r.spec for r in records]
  assert specs[:3] == ["KFD+AMD", "MOCK+AMD", "MOCKKFD+AMD"] and "CPU" in specs and "MOCK+BNXT" in specs
  kfd = records[0].as_json()
  assert kfd == {"spec": "KFD+AMD", "vendor": "AMD", "interface": "KFD", "alias": "AMD", "summary": kfd["summary"],
                 "mock_of": None, "autodetected": True, "probe": "/dev/kfd"}
  assert records[1].mock_of == "KFD+AMD" and not records[1].autodetected
  # every spec of the list opens through hcq.parse_spec, as the mock it says it is
  for r in records: assert hcq.parse_spec(r.spec).is_mock == (r.mock_of is not None), r.spec


def test_vendors_and_interfaces_without_a_working_driver_are_refused_by_name():
  with pytest.raises(hcq.DeviceError, match="unknown vendor 'FOO' \\(known: AMD, CPU, BNXT, NV, QCOM\\)"):
    hcq.parse_spec("FOO")
  assert hcq.parse_spec("NV") == ("RM", "NV", 0) and hcq.parse_spec("MOCK+NV").is_mock
  assert hcq.parse_spec("QCOM") == ("KGSL", "QCOM", 0) and hcq.parse_spec("MOCK+QCOM").is_mock
  with pytest.raises(hcq.DeviceError, match="vendor AMD has no interface 'SPI' \\(known: KFD, MOCK, MOCKKFD, PCI, MOCKPCI, USB, "
                                            "MOCKUSB\\)"):
    hcq.parse_spec("SPI+AMD")
  assert hcq.parse_spec("USB+AMD") == ("USB", "AMD", 0) and hcq.parse_spec("MOCKUSB+AMD").is_mock
  assert hcq.parse_spec("amd") == ("KFD", "AMD", 0) and hcq.parse_spec("MOCK+AMD:3").is_mock


def test_every_declared_mock_entry_resolves_and_builds_the_os_the_driver_opens():
  """The drivers' declarations are the one registry: each mocked interface names its mock's entry, which hcq.open
  resolves under the mock package (no table in mockgpu/ says which vendors are mocked)."""
  from hcq.drivers.hcq.registry import Interface
  from hcq.mockgpu import MockOS
  import hcq.mockgpu as mockgpu
  entries = {(d.vendor, i.name): i.mock for d in hcq.registered_drivers().values() for i in d.interfaces if i.mocks}
  assert entries == {("AMD", "KFD"): "amd.kfd_os", ("AMD", "PCI"): "amd.pci_os", ("AMD", "USB"): "amd.usb_os",
                     ("BNXT", "PCI"): "bnxt.pci_os", ("NV", "RM"): "nv.rm_os", ("QCOM", "KGSL"): "qcom.kgsl_os"}
  for d in hcq.registered_drivers().values():
    for i in d.interfaces:
      if i.mocks: assert callable(hcq._mock_entry(i)), (d.vendor, i.name)
  assert not [n for n, v in vars(mockgpu).items() if isinstance(v, dict) and any(isinstance(k, tuple) for k in v)]
  os = hcq._mock_os("AMD", "PCI", 0, Config(timeout_s=5))
  try: assert isinstance(os, MockOS) and list(os.pci_functions) == ["0000:03:00.0"]
  finally: os.close()
  with pytest.raises(ValueError, match="need a mock entry"): Interface("X", "x", mocks=("MOCK",))
  with pytest.raises(ValueError, match="needs spec names"): Interface("X", "x", mock="amd.kfd_os")
  with pytest.raises(hcq.DeviceError, match="'amd.no_such_os' does not resolve"):
    hcq._mock_entry(Interface("X", "x", mocks=("MOCK",), mock="amd.no_such_os"))


@pytest.mark.parametrize("index", ["9" * 20, "64", "1" * 7, "-1", "1.5", "0x3", "٣"])
def test_a_spec_cannot_make_hcq_build_many_devices(index):
  """An index is bounded before anything is built: a huge one is an error at once, with no memory to speak of."""
  tracemalloc.start()
  try:
    with pytest.raises(hcq.DeviceError, match="index"): hcq.open(f"MOCK+AMD:{index}")
    assert tracemalloc.get_traced_memory()[1] < 16 << 20
  finally: tracemalloc.stop()


def test_the_mock_builds_a_bounded_number_of_gpus():
  with pytest.raises(hcq.DeviceError, match="at most 16 GPUs"): hcq.open("MOCK+AMD:40", Config(timeout_s=2))


def test_the_mock_says_it_is_the_mock():
  with hcq.open("MOCK+AMD:1", Config(timeout_s=5)) as dev:
    assert "MOCK+AMD:1" in dev.name and "KFD+AMD" not in dev.name


def test_open_without_a_spec_on_a_machine_without_gpus_opens_the_mock_quietly(tmp_path):
  """No HCQ_DEV and no /dev/kfd (an empty device root): hcq.open() opens MOCK+AMD and prints nothing (how fast:
  bench/startup.py; no test asserts a duration)."""
  script = "import sys, hcq; dev = hcq.open(); sys.stderr.write(dev.name); dev.close()"
  env = {"PATH": "/usr/bin:/bin", "HCQ_DEV_ROOT": str(tmp_path), "HCQ_CACHE_DIR": str(tmp_path / "cache")}
  r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
  assert r.returncode == 0, r.stderr
  assert r.stdout == ""
  assert r.stderr == "gfx1100 on MOCK+AMD:0 (gpu_id " + r.stderr.split("gpu_id ")[1]   # nothing else on stderr either
