"""hcq-smi rmmod / insmod / reset against a fake sysfs tree, with fake modprobe, sudo and nvidia-smi on PATH that
record their argv."""
import json
import os
import pathlib
import shutil
import sys
import tempfile

import pytest

from fake_sysfs import add_module, add_pci_function
from smi_helpers import as_nobody, fake_tool, read_log, run_smi, run_smi_json, smi_env, smi_in_child

NV_MODULES = ["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"]


@pytest.fixture
def world(tmp_path):
  """A fake sysfs root, an empty lock dir, and a bin dir with recording modprobe/sudo/nvidia-smi/tee."""
  sysfs, locks, bin_dir, log = tmp_path / "sys", tmp_path / "locks", tmp_path / "bin", tmp_path / "argv.log"
  (sysfs / "module").mkdir(parents=True)
  (sysfs / "bus/pci/devices").mkdir(parents=True)
  locks.mkdir()
  for tool in ("modprobe", "sudo", "nvidia-smi"): fake_tool(bin_dir, tool, log)
  env = smi_env(sysfs=sysfs, lock_dir=locks, path_dir=bin_dir)
  return type("World", (), dict(sysfs=sysfs, locks=locks, bin=bin_dir, log=log, env=env))


def test_amd_rmmod_expect_names_the_loaded_module(world):
  add_module(world.sysfs, "amdgpu")
  res = run_smi("amd", "rmmod", "--expect", env=world.env)
  assert res.returncode == 1, res
  assert "Kernel modules are loaded" in res.stdout and "amdgpu" in res.stdout
  assert read_log(world.log) == []  # --expect changes nothing


def test_amd_rmmod_expect_when_not_loaded(world):
  add_module(world.sysfs, "nvidia")  # another backend's module does not count
  res = run_smi("AMD", "rmmod", "--expect", env=world.env)  # backend names are case-insensitive
  assert res.returncode == 0, res
  assert res.stdout.strip() == "Kernel modules are not loaded"
  assert read_log(world.log) == []


def test_nv_rmmod_expect_never_lists_ast(world):
  for m in NV_MODULES + ["ast"]: add_module(world.sysfs, m)
  res, doc = run_smi_json("nv", "rmmod", "--expect", env=world.env)
  assert res.returncode == 1 and doc["loaded"] == NV_MODULES and doc["exit"] == 1
  text = run_smi("nv", "rmmod", "--expect", env=world.env)
  assert text.returncode == 1 and "ast" not in text.stdout.replace("Kernel modules", "")
  shutil.rmtree(world.sysfs / "module")
  add_module(world.sysfs, "ast")
  res = run_smi("nv", "rmmod", "--expect", env=world.env)
  assert res.returncode == 0 and "not loaded" in res.stdout


def test_rmmod_runs_modprobe_exactly_as_root(world):
  if os.geteuid() != 0: pytest.skip("as a non-root user modprobe goes through sudo (tested below)")
  add_module(world.sysfs, "amdgpu")
  res = run_smi("amd", "rmmod", env=world.env)
  assert res.returncode == 0, res
  assert read_log(world.log) == [["modprobe", "-r", "amdgpu"]]
  assert "amdgpu" in res.stdout


def test_nv_rmmod_removes_only_loaded_modules_in_order(world):
  if os.geteuid() != 0: pytest.skip("root path")
  for m in ("nvidia", "nvidia_drm", "nvidia_modeset", "ast"): add_module(world.sysfs, m)
  res = run_smi("nv", "rmmod", env=world.env)
  assert res.returncode == 0, res
  assert read_log(world.log) == [["modprobe", "-r", "nvidia_drm", "nvidia_modeset", "nvidia"]]


def test_bnxt_rmmod(world):
  if os.geteuid() != 0: pytest.skip("root path")
  for m in ("bnxt_en", "bnxt_re"): add_module(world.sysfs, m)
  assert run_smi("bnxt", "rmmod", env=world.env).returncode == 0
  assert read_log(world.log) == [["modprobe", "-r", "bnxt_re", "bnxt_en"]]


def test_rmmod_nothing_loaded_runs_nothing(world):
  res = run_smi("amd", "rmmod", env=world.env)
  assert res.returncode == 0 and "not loaded" in res.stdout and read_log(world.log) == []


def test_rmmod_failure_exits_with_modprobes_code(world):
  add_module(world.sysfs, "amdgpu")
  for tool in ("modprobe", "sudo"): fake_tool(world.bin, tool, world.log, exit_code=3)
  res = run_smi("amd", "rmmod", env=world.env)
  assert res.returncode == 3
  assert "may be in use" in res.stderr


def test_rmmod_without_modprobe_is_127(world, tmp_path):
  add_module(world.sysfs, "amdgpu")
  env = dict(world.env, PATH=str(tmp_path / "empty-bin"))
  res = run_smi("amd", "rmmod", "--sudoless", env=env)
  assert res.returncode == 127 and "modprobe: command not found" in res.stderr


@pytest.fixture
def public_world():
  """Like `world`, in a folder that uid nobody can use (pytest's tmp_path is private to root)."""
  base = pathlib.Path(tempfile.mkdtemp(prefix="hcq-smi-test-"))
  base.chmod(0o755)
  sysfs, locks, bin_dir, log = base / "sys", base / "locks", base / "bin", base / "argv.log"
  (sysfs / "module").mkdir(parents=True)
  locks.mkdir()
  locks.chmod(0o1777)
  for tool in ("modprobe", "sudo"): fake_tool(bin_dir, tool, log)
  log.write_text("")
  log.chmod(0o666)
  yield type("World", (), dict(sysfs=sysfs, locks=locks, bin=bin_dir, log=log, base=base))
  shutil.rmtree(base)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_rmmod_as_a_user_goes_through_sudo_unless_sudoless(public_world):
  import hcq.smi.cli, hcq.smi.commands, hcq.smi.listing, hcq.smi.report  # noqa: F401  (loaded before dropping root)
  add_module(public_world.sysfs, "amdgpu")
  out = public_world.base / "out.txt"
  out.write_text("")
  out.chmod(0o666)
  env = dict(HCQ_SYSFS_ROOT=public_world.sysfs, HCQ_LOCK_DIR=public_world.locks,
             PATH=f"{public_world.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}")
  assert as_nobody(smi_in_child(["amd", "rmmod"], env, out)) == 0, out.read_text()
  assert read_log(public_world.log) == [["sudo", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "modprobe", "-r", "amdgpu"]]
  public_world.log.write_text("")
  assert as_nobody(smi_in_child(["amd", "rmmod", "--sudoless"], env, out)) == 0, out.read_text()
  assert read_log(public_world.log) == [["modprobe", "-r", "amdgpu"]]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_reset_as_a_user_uses_no_sudo_on_a_sysfs_tree_of_its_own(public_world):
  """uid nobody may not write the reset file. With --sudoless nothing calls sudo and the failure names the device
  and exits 1; without, sudo is not used either: the sysfs tree is the caller's (HCQ_SYSFS_ROOT), and sudo acts
  only on the real /sys (test_smi_hardening: sudo tee on /sys)."""
  import hcq.smi.cli, hcq.smi.commands, hcq.smi.listing, hcq.smi.report  # noqa: F401  (loaded before dropping root)
  bus = "0000:03:00.0"
  add_pci_function(public_world.sysfs, bus, 0x1002, 0x744c, 0x030000)  # files 0644, owned by root
  (public_world.locks / f"am_{bus}.lock").write_text("")
  out = public_world.base / "out.txt"
  out.write_text("")
  out.chmod(0o666)
  env = dict(HCQ_SYSFS_ROOT=public_world.sysfs, HCQ_LOCK_DIR=public_world.locks,
             PATH=f"{public_world.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}")
  assert as_nobody(smi_in_child(["amd", "reset", "--sudoless", "--json"], env, out)) == 1, out.read_text()
  assert read_log(public_world.log) == [] and json.loads(out.read_text())["failed"] == [bus]
  assert as_nobody(smi_in_child(["amd", "reset", "--json"], env, out)) == 1, out.read_text()
  assert read_log(public_world.log) == [] and json.loads(out.read_text())["failed"] == [bus]


def test_reset_writes_the_reset_file_of_locked_devices(world):
  for bus in ("0000:03:00.0", "0000:04:00.0"):
    add_pci_function(world.sysfs, bus, 0x1002, 0x744c, 0x030000)
    (world.locks / f"am_{bus}.lock").write_text("")
  add_pci_function(world.sysfs, "0000:05:00.0", 0x1002, 0x744c, 0x030000)  # not locked: not hcq's, untouched
  (world.locks / "nv_0000:05:00.0.lock").write_text("")                      # another backend's lock
  res, doc = run_smi_json("amd", "reset", "--pci_bus", "0000:03", env=world.env)
  assert res.returncode == 0 and doc["reset"] == ["0000:03:00.0"]
  reset_of = lambda bus: (world.sysfs / f"bus/pci/devices/{bus}/reset").read_text()
  assert (reset_of("0000:03:00.0"), reset_of("0000:04:00.0"), reset_of("0000:05:00.0")) == ("1", "", "")
  res = run_smi("amd", "reset", env=world.env)
  assert res.returncode == 0 and reset_of("0000:04:00.0") == "1" and reset_of("0000:05:00.0") == ""


def test_reset_of_a_device_without_reset_file_fails(world):
  add_pci_function(world.sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, with_reset=False)
  (world.locks / "am_0000:03:00.0.lock").write_text("")
  res = run_smi("amd", "reset", "--sudoless", env=world.env)
  assert res.returncode == 1 and "0000:03:00.0" in res.stderr and "no reset file" in res.stderr


@pytest.mark.parametrize("backend,load", [("amd", ["modprobe", "amdgpu"]), ("bnxt", ["modprobe", "bnxt_en"]),
                                          ("nv", ["nvidia-smi"])])
def test_insmod_unloads_resets_and_loads(world, backend, load):
  if os.geteuid() != 0: pytest.skip("root path")
  first = {"amd": "amdgpu", "bnxt": "bnxt_en", "nv": "nvidia"}[backend]
  kind = {"amd": "am", "bnxt": "bnxt", "nv": "nv"}[backend]
  add_module(world.sysfs, first)
  add_pci_function(world.sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000)
  (world.locks / f"{kind}_0000:03:00.0.lock").write_text("")
  res, doc = run_smi_json(backend, "insmod", env=world.env)  # one JSON document, rmmod's part inside
  assert res.returncode == 0, res
  assert read_log(world.log) == [["modprobe", "-r", first], load]
  assert doc["rmmod"]["removed"] == [first] and doc["reset"] == ["0000:03:00.0"] and doc["load"] == load
  assert (world.sysfs / "bus/pci/devices/0000:03:00.0/reset").read_text() == "1"


def test_every_command_takes_json(world):
  for cmd in (["rmmod", "--expect"], ["reset"], ["pids"], ["kill_pids", "--sudoless"], ["list"], ["top", "--once"]):
    res = run_smi("amd", *cmd, "--json", env=world.env)
    assert res.returncode == 0, (cmd, res)
    assert json.loads(res.stdout)["exit"] == 0


def test_help_documents_exit_codes():
  res = run_smi("--help")
  assert res.returncode == 0 and "exit codes:" in res.stdout and "127" in res.stdout
  res = run_smi("amd", "kill_pids", "--help")
  assert "exit codes:" in res.stdout and "--sudoless" in res.stdout and "--pci_bus" in res.stdout
  assert run_smi("intel", "list").returncode == 2
  for bad in ("-1", "0", "nan", "x"):
    res = run_smi("amd", "top", "--interval", bad)
    assert res.returncode == 2 and "--interval" in res.stderr and "Traceback" not in res.stderr, (bad, res.stderr)


def test_a_command_that_hangs_is_killed_after_the_timeout(tmp_path):
  import io
  from hcq.config import Config
  from hcq.drivers.system import LinuxOS
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  report = Report(False, out=io.StringIO(), err=io.StringIO())
  ctx = commands.Context(backend("amd"), LinuxOS(Config()), report, sudoless=True, command_timeout_s=0.3)
  assert ctx.run([sys.executable, "-c", "import time; time.sleep(30)"]) == 124      # killed, not waited for
  assert "still running after 0.3 s, killed" in report.err.getvalue()
  assert "124" in run_smi("--help").stdout
