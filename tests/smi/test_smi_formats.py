"""hcq-smi list / top as nvidia-smi and amd-smi users expect: --format table|csv|json, --query, -l/--loop (appending
when stdout is not a terminal), --pci (old spellings as aliases), exit codes documented once, a quiet broken pipe."""
import csv
import io
import json
import subprocess
import sys

import pytest

from fake_sysfs import add_pci_function
from smi_helpers import run_smi, smi_env


@pytest.fixture
def fake(tmp_path):
  sysfs, locks = tmp_path / "sys", tmp_path / "locks"
  locks.mkdir()
  add_pci_function(sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, driver="amdgpu", extra={
    "gpu_busy_percent": "37\n", "mem_info_vram_used": str(3 * 2**30) + "\n", "mem_info_vram_total": str(24 * 2**30) + "\n",
    "hwmon/hwmon4/temp1_input": "54000\n", "hwmon/hwmon4/power1_average": "215000000\n"})
  add_pci_function(sysfs, "0000:04:00.0", 0x1002, 0x7550, 0x030000)
  add_pci_function(sysfs, "0001:c1:00.0", 0x14e4, 0x1750, 0x020000, driver="bnxt_en")
  return type("Fake", (), dict(sysfs=sysfs, locks=locks, env=smi_env(sysfs=sysfs, lock_dir=locks)))


def test_list_as_csv_with_a_query(fake):
  res = run_smi("amd", "list", "--format", "csv", "--query", "address,id,driver", env=fake.env)
  assert res.returncode == 0, res
  assert list(csv.reader(io.StringIO(res.stdout))) == [
    ["address", "id", "driver"], ["0000:03:00.0", "1002:744c", "amdgpu"], ["0000:04:00.0", "1002:7550", ""],
    ["0001:c1:00.0", "14e4:1750", "bnxt_en"]]


def test_top_as_csv_table_and_json_with_a_query(fake):
  q = ("--query", "address,busy_percent,temperature_c,power_w")
  res = run_smi("amd", "top", "--once", "--format", "csv", *q, env=fake.env)
  assert res.stdout.splitlines() == ["address,busy_percent,temperature_c,power_w", "0000:03:00.0,37,54.0,215.0",
                                     "0000:04:00.0,,,"], res
  table = run_smi("amd", "top", "--once", *q, env=fake.env).stdout.splitlines()
  assert table[0].split() == ["ADDRESS", "BUSY_PERCENT", "TEMPERATURE_C", "POWER_W"]
  assert table[1].split() == ["0000:03:00.0", "37", "54.0", "215.0"]
  doc = json.loads(run_smi("amd", "top", "--format", "json", *q, env=fake.env).stdout)
  assert doc["devices"][0] == {"address": "0000:03:00.0", "busy_percent": 37, "temperature_c": 54.0, "power_w": 215.0}
  assert doc["exit"] == 0 and doc["command"] == "top"


def test_an_unknown_field_or_conflicting_format_is_a_usage_error_naming_the_fields(fake):
  res = run_smi("amd", "list", "--query", "address,bogus", env=fake.env)
  assert res.returncode == 2 and "unknown field 'bogus'" in res.stderr and "address,id,vendor" in res.stderr
  res = run_smi("amd", "list", "--json", "--format", "csv", env=fake.env)
  assert res.returncode == 2 and "--json and --format csv disagree" in res.stderr


def _ctx(fake, out):
  from hcq.config import Config
  from hcq.drivers.system import LinuxOS
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  return commands.Context(backend("amd"), LinuxOS(Config(sysfs_root=str(fake.sysfs), lock_dir=str(fake.locks))),
                          Report(False, out))


def test_a_csv_loop_appends_rows_under_one_header(fake):
  from hcq.smi import listing
  out, slept = io.StringIO(), []
  assert listing.list_devices(_ctx(fake, out), fmt="csv", fields=("address", "driver"), loop=2.0, rounds=3,
                              sleep=slept.append) == 0
  lines = out.getvalue().splitlines()
  assert slept == [2.0, 2.0] and lines[0] == "address,driver" and lines.count("address,driver") == 1
  assert lines[1:] == ["0000:03:00.0,amdgpu", "0000:04:00.0,", "0001:c1:00.0,bnxt_en"] * 3


def test_a_json_loop_writes_one_document_a_line(fake):
  from hcq.smi import listing
  out = io.StringIO()
  assert listing.top(_ctx(fake, out), fmt="json", fields=("address", "busy_percent"), loop=1.0, rounds=2,
                     sleep=lambda s: None) == 0
  docs = [json.loads(line) for line in out.getvalue().splitlines()]
  assert len(docs) == 2 and all(d["devices"][0] == {"address": "0000:03:00.0", "busy_percent": 37} for d in docs)


def test_pci_is_the_one_name_and_the_old_spellings_are_aliases(fake):
  want = run_smi("amd", "top", "--once", "--format", "csv", "--query", "address", "--pci", "0000:04", env=fake.env)
  assert want.stdout.splitlines() == ["address", "0000:04:00.0"]
  old = run_smi("amd", "top", "--once", "--format", "csv", "--query", "address", "--dev", "0000:04", env=fake.env)
  assert old.stdout == want.stdout
  for flag in ("--pci", "--pci_bus", "--pci-bus"):
    res = run_smi("amd", "pids", flag, "0000:03", "--json", env=fake.env)
    assert res.returncode == 0 and json.loads(res.stdout)["exit"] == 0, (flag, res)
  assert "--pci PREFIX, --pci_bus PREFIX, --pci-bus PREFIX" in run_smi("amd", "kill_pids", "--help").stdout


def test_exit_codes_are_documented_once():
  top = run_smi("--help").stdout
  assert top.count("exit codes:") == 1 and "127" in top
  sub = run_smi("amd", "list", "--help").stdout
  assert "exit codes: see `hcq-smi --help`" in sub and "127" not in sub


def test_a_reader_that_goes_away_ends_a_loop_quietly(fake):
  p = subprocess.Popen([sys.executable, "-m", "hcq.smi", "amd", "list", "--format", "csv", "-l", "0.05"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=fake.env)
  try:
    assert p.stdout.readline() == b"address,id,vendor,device,class,vendor_name,device_name,driver,holders,error\n"
    p.stdout.close()
    _, err = p.communicate(timeout=60)
  finally:
    if p.poll() is None: p.kill()
  assert p.returncode == 0 and err == b"", err
