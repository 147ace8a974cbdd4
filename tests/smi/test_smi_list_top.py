"""hcq-smi list (compared with lspci, on this machine and on a fake sysfs tree lspci reads too) and top."""
import json

import pytest

from fake_sysfs import add_pci_function
from smi_helpers import lspci_records, run_smi, run_smi_json, smi_env, spawn_holder

VENDORS = {"1002", "10de", "14e4"}


def assert_agrees_with_lspci(devices, numeric, named):
  """Every function hcq-smi shows is one lspci shows, with the same ids, class, names and driver."""
  for d in devices:
    n, m = numeric.get(d["address"]), named.get(d["address"])
    assert n is not None, f"{d['address']} not listed by lspci"
    assert (d["vendor"], d["device"]) == (n["Vendor"], n["Device"]), d
    assert d["class"] == n["Class"] + n.get("ProgIf", "00"), d
    assert d["driver"] == n.get("Driver"), d
    assert (d["vendor_name"] or f"Vendor {d['vendor']}") == m["Vendor"]
    assert (d["device_name"] or f"Device {d['device']}") == m["Device"]


@pytest.mark.tools("lspci")
def test_list_on_this_machine_agrees_with_lspci():
  numeric, named = lspci_records(), lspci_records(numeric=False)
  res, doc = run_smi_json("amd", "list", env=smi_env())
  assert res.returncode == 0, res
  assert_agrees_with_lspci(doc["devices"], numeric, named)
  assert {d["address"] for d in doc["devices"]} == {a for a, r in numeric.items() if r["Vendor"] in VENDORS}
  # every vendor (this machine may have no AMD, NVIDIA or Broadcom function): the same, for all functions
  res, doc = run_smi_json("amd", "list", "--all-vendors", env=smi_env())
  assert res.returncode == 0, res
  assert {d["address"] for d in doc["devices"]} == set(numeric)
  assert_agrees_with_lspci(doc["devices"], numeric, named)


@pytest.fixture
def fake(tmp_path):
  sysfs, locks = tmp_path / "sys", tmp_path / "locks"
  locks.mkdir()
  add_pci_function(sysfs, "0000:00:00.0", 0x8086, 0x0d57, 0x060000)
  add_pci_function(sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, revision=0xc8, driver="amdgpu", extra={
    "gpu_busy_percent": "37\n", "mem_info_vram_used": str(3 * 2**30) + "\n", "mem_info_vram_total": str(24 * 2**30) + "\n",
    "hwmon/hwmon4/temp1_input": "54000\n", "hwmon/hwmon4/power1_average": "215000000\n", "hwmon/hwmon4/name": "amdgpu\n"})
  add_pci_function(sysfs, "0000:03:00.1", 0x1002, 0xab30, 0x040300, driver="snd_hda_intel")
  add_pci_function(sysfs, "0000:04:00.0", 0x1002, 0x7550, 0x030000)  # unbound: hcq's AM driver holds it
  add_pci_function(sysfs, "0000:41:00.0", 0x10de, 0x2684, 0x030000, revision=0xa1, driver="nvidia")
  add_pci_function(sysfs, "0001:c1:00.0", 0x14e4, 0x1750, 0x020000, revision=0x11, driver="bnxt_en")
  add_pci_function(sysfs, "0001:c1:00.1", 0x14e4, 0xfeed, 0x020000)  # not in pci.ids
  return type("Fake", (), dict(sysfs=sysfs, locks=locks, env=smi_env(sysfs=sysfs, lock_dir=locks)))


@pytest.mark.tools("lspci")
def test_list_on_a_fake_tree_agrees_with_lspci_on_the_same_tree(fake, procs):
  holder = spawn_holder(fake.locks / "am_0000:04:00.0.lock")
  procs.append(holder)
  res, doc = run_smi_json("nv", "list", env=fake.env)
  assert res.returncode == 0, res
  shown = {d["address"]: d for d in doc["devices"]}
  assert sorted(shown) == ["0000:03:00.0", "0000:03:00.1", "0000:04:00.0", "0000:41:00.0", "0001:c1:00.0", "0001:c1:00.1"]
  assert_agrees_with_lspci(doc["devices"], lspci_records(fake.sysfs), lspci_records(fake.sysfs, numeric=False))
  assert shown["0000:03:00.0"]["id"] == "1002:744c" and shown["0000:03:00.0"]["driver"] == "amdgpu"
  assert shown["0001:c1:00.1"]["device_name"] is None
  assert [h["pid"] for h in shown["0000:04:00.0"]["holders"]] == [holder.pid]
  assert all(not d["holders"] for a, d in shown.items() if a != "0000:04:00.0")
  text = run_smi("nv", "list", env=fake.env).stdout
  assert f"0000:04:00.0  [1002:7550]" in text and f"holder: {holder.pid} (python" in text
  assert "0000:00:00.0" not in text


def test_top_once_reads_sysfs_of_kfd_devices(fake, procs):
  holder = spawn_holder(fake.locks / "am_0000:04:00.0.lock")
  procs.append(holder)
  res, doc = run_smi_json("amd", "top", env=fake.env)
  assert res.returncode == 0, res
  rows = {r["address"]: r for r in doc["devices"]}
  assert sorted(rows) == ["0000:03:00.0", "0000:03:00.1", "0000:04:00.0"]
  kfd = rows["0000:03:00.0"]
  assert (kfd["busy_percent"], kfd["vram_used"], kfd["vram_total"], kfd["temperature_c"], kfd["power_w"]) == \
         (37, 3 * 2**30, 24 * 2**30, 54.0, 215.0)
  am = rows["0000:04:00.0"]
  assert am["source"] == "hcq" and [h["pid"] for h in am["holders"]] == [holder.pid]
  assert all(am[k] is None for k in ("busy_percent", "vram_used", "vram_total", "temperature_c", "power_w"))
  text = run_smi("amd", "top", "--once", env=fake.env).stdout.splitlines()
  line = next(l for l in text if l.startswith("0000:03:00.0"))
  assert "37%" in line and "3072/24576 MiB" in line and "54.0 C" in line and "215.0 W" in line
  line = next(l for l in text if l.startswith("0000:04:00.0"))
  assert line.count("n/a") == 4 and str(holder.pid) in line
  only = run_smi("amd", "top", "--once", "--dev", "0000:04", env=fake.env).stdout
  assert "0000:04:00.0" in only and "0000:03:00.0" not in only


def test_top_refreshes(fake):
  import io
  from hcq.config import Config
  from hcq.drivers.system import LinuxOS
  from hcq.smi import commands, listing
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  class Tty(io.StringIO):
    def isatty(self): return True
  out = Tty()
  ctx = commands.Context(backend("amd"), LinuxOS(Config(sysfs_root=str(fake.sysfs), lock_dir=str(fake.locks))), Report(False, out))
  slept = []
  assert listing.top(ctx, rounds=3, sleep=slept.append, interval=0.5) == 0
  assert slept == [0.5, 0.5] and out.getvalue().count("\x1b[H\x1b[2J") == 3 and out.getvalue().count("37%") == 3
  # not a terminal (a pipe, a file): each round is appended, never a screen clear
  piped = io.StringIO()
  ctx = commands.Context(backend("amd"), LinuxOS(Config(sysfs_root=str(fake.sysfs), lock_dir=str(fake.locks))), Report(False, piped))
  assert listing.top(ctx, rounds=3, sleep=lambda s: None, interval=0.5) == 0
  assert "\x1b" not in piped.getvalue() and piped.getvalue().count("37%") == 3 and piped.getvalue().count("BUS ") == 3
