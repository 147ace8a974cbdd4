"""`hcq devices [--json]`: every spec of the registry, present or not, with what was detected (fake sysfs and /dev)."""
import json
import pathlib
import sys

import pytest

import hcq
from hcq.cli import main as hcq_main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "system"))
from fake_sysfs import add_pci_function  # noqa: E402


@pytest.fixture
def machine(tmp_path, monkeypatch):
  sysfs, dev, locks = tmp_path / "sys", tmp_path / "dev", tmp_path / "locks"
  for d in (sysfs / "bus/pci/devices", dev, locks): d.mkdir(parents=True)
  monkeypatch.setenv("HCQ_SYSFS_ROOT", str(sysfs))
  monkeypatch.setenv("HCQ_DEV_ROOT", str(dev))
  monkeypatch.setenv("HCQ_LOCK_DIR", str(locks))
  return sysfs, dev


def devices_json(capsys) -> dict:
  assert hcq_main(["devices", "--json"]) == 0
  return {r["spec"]: r for r in json.loads(capsys.readouterr().out)}


def test_every_spec_is_listed_and_an_empty_machine_has_only_the_mocks_and_the_cpu(machine, capsys):
  rows = devices_json(capsys)
  assert list(rows) == [r.spec for r in hcq.device_list()]
  assert {s for s, r in rows.items() if r["present"]} == {r.spec for r in hcq.device_list() if r.mock_of} | {"CPU"}
  assert rows["PCI+AMD"]["detected"] == [] and rows["MOCK+NV"]["detected"] == [{"embedded": "mock"}]


def test_pci_functions_are_matched_to_their_specs_with_ids_and_driver(machine, capsys):
  sysfs, dev = machine
  add_pci_function(sysfs, "0000:03:00.0", 0x1002, 0x744C, 0x030000, driver="amdgpu")      # Navi 31, amdgpu bound
  add_pci_function(sysfs, "0000:04:00.0", 0x1002, 0x744C, 0x030000)                       # Navi 31, no driver
  add_pci_function(sysfs, "0000:03:00.1", 0x1002, 0xAB30, 0x040300, driver="snd_hda_intel")   # its audio: no GPU
  add_pci_function(sysfs, "0000:41:00.0", 0x14E4, 0x1760, 0x020000, driver="bnxt_en")
  (dev / "kfd").write_text("")
  rows = devices_json(capsys)
  assert rows["KFD+AMD"]["present"]
  assert [d.get("node") or d["pci"] for d in rows["KFD+AMD"]["detected"]] == ["/dev/kfd", "0000:03:00.0"]
  pci = rows["PCI+AMD"]["detected"]
  assert [(d["pci"], d["id"], d["driver"], d["holders"]) for d in pci] == [
    ("0000:03:00.0", "1002:744c", "amdgpu", []), ("0000:04:00.0", "1002:744c", None, [])]
  assert [d["pci"] for d in rows["PCI+BNXT"]["detected"]] == ["0000:41:00.0"] and rows["PCI+BNXT"]["present"]
  assert not rows["RM+NV"]["present"] and not rows["USB+AMD"]["present"]
  # the table says the same
  assert hcq_main(["devices"]) == 0
  lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
  assert "present" in lines["PCI+AMD"] and "0000:04:00.0 [1002:744c] driver: - holder: -" in lines["PCI+AMD"]
  assert lines["RM+NV"].split()[1:] == ["absent", "not", "found"]


def test_an_asm24_bridge_on_the_usb_bus_is_usb_amd(machine, capsys):
  sysfs, _ = machine
  d = sysfs / "bus/usb/devices/2-1"
  d.mkdir(parents=True)
  (d / "idVendor").write_text("add1\n")
  (d / "idProduct").write_text("0001\n")
  other = sysfs / "bus/usb/devices/1-1"
  other.mkdir()
  (other / "idVendor").write_text("046d\n")
  (other / "idProduct").write_text("c52b\n")
  rows = devices_json(capsys)
  assert rows["USB+AMD"]["present"] and rows["USB+AMD"]["detected"] == [{"usb": "2-1", "id": "add1:0001"}]


def test_the_process_holding_a_function_is_named(machine, capsys, tmp_path):
  import os
  import subprocess
  sysfs, _ = machine
  add_pci_function(sysfs, "0000:04:00.0", 0x1002, 0x744C, 0x030000)
  lock = pathlib.Path(os.environ["HCQ_LOCK_DIR"]) / "am_0000:04:00.0.lock"
  holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                             "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
                             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('ready', flush=True)\ntime.sleep(60)", str(lock)],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "ready"
    (found,) = devices_json(capsys)["PCI+AMD"]["detected"]
    assert found["pci"] == "0000:04:00.0" and [h["pid"] for h in found["holders"]] == [holder.pid]
  finally:
    holder.kill()
    holder.wait(10)
