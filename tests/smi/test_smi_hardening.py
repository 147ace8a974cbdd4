"""hcq-smi against a hostile user (issue #14): empty or malformed PCI prefixes, fake procfs trees naming real
processes, caller trees passed through sudo, unreadable PCI functions, unusable PATH folders, the README's
commands, and a table of bad inputs that must give exit 2 (usage) or 1 (failure), never a traceback."""
import contextlib
import io
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import traceback

import pytest

from fake_sysfs import add_module, add_pci_function
from hcq.config import Config
from hcq.drivers.system import LinuxOS
from hcq.errors import DeviceError, OSCallError
from smi_helpers import REPO, as_nobody, fake_tool, read_log, run_smi_json, smi_env, smi_in_child, spawn_holder, spawn_sleeper

BUS = "0000:03:00.0"
SUDO_ENV = ["sudo", "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]


def wait_dead(p, timeout=10):
  try: return p.wait(timeout)
  except subprocess.TimeoutExpired: return None


def smi_main(argv, env=None, timeout_s=30):
  """hcq-smi's main(argv) in this process, HCQ_* variables exactly env: (exit code, stdout, stderr). stdout encodes
  strictly as a UTF-8 terminal's does, stderr as Python's own (backslashreplace). An exception other than
  argparse's SystemExit is returned as the text 'Traceback ...' instead of a code."""
  from hcq.smi import main
  out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
  err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
  saved = dict(os.environ)
  try:
    for k in [k for k in os.environ if k.startswith("HCQ_")]: del os.environ[k]
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    def hung(*_): raise TimeoutError(f"hcq-smi {argv} still running after {timeout_s} s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(timeout_s)  # e.g. `top` refreshing for ever where a usage error was due
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      try: code = main(argv)
      except SystemExit as e: code = e.code
      except BaseException: code = "Traceback (in-process):\n" + traceback.format_exc()
      finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
  finally:
    os.environ.clear()
    os.environ.update(saved)
  out.flush()
  err.flush()
  return code, out.buffer.getvalue().decode(errors="replace"), err.buffer.getvalue().decode(errors="replace")


def in_process_ctx(host, as_json=True, use_sudo=None):
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  ctx = commands.Context(backend("amd"), host, Report(as_json, out=io.StringIO(), err=io.StringIO()), sudoless=True)
  if use_sudo is not None: ctx.use_sudo = use_sudo  # as a user with sudo
  return ctx


def lock_key(lock) -> str:
  st = pathlib.Path(lock).stat()
  return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def fake_proc_tree(root, lock, pid):
  """A procfs tree in which process `pid` holds the flock on lock (fd 5 links to it, its fdinfo has the lock)."""
  d = pathlib.Path(root) / str(pid)
  (d / "fd").mkdir(parents=True)
  (d / "fdinfo").mkdir()
  os.symlink(lock, d / "fd" / "5")
  (d / "fdinfo" / "5").write_text(f"pos:\t0\nflags:\t02\nlock:\t1: FLOCK  ADVISORY  WRITE {pid} {lock_key(lock)} 0 EOF\n")
  (d / "comm").write_text("listed\n")
  with open(pathlib.Path(root) / "locks", "a") as f: f.write(f"1: FLOCK  ADVISORY  WRITE {pid} {lock_key(lock)} 0 EOF\n")
  return pathlib.Path(root)


# ---- 1. an empty or malformed PCI address prefix is a usage error, never "every device"

BAD_PREFIXES = ["", " ", "0:03", "0000:3:", "0000:03:2", "0000:03:00.8", "0000:03:00.0:", "000000000", "zz",
                "0000:03:00.0;reboot", "0000:03\n", "\u0660\u0660\u0660\u0660", "0000:03:00.00", "0000::", "*"]


@pytest.mark.parametrize("cmd", [["reset", "--sudoless", "--pci_bus"], ["pids", "--pci_bus"],
                                 ["kill_pids", "--sudoless", "--pci_bus"], ["top", "--once", "--dev"]])
def test_an_empty_or_malformed_pci_prefix_is_a_usage_error(cmd, locks, procs):
  holder = spawn_holder(locks / f"am_{BUS}.lock")  # what kill_pids would kill if a bad prefix matched every device
  procs.append(holder)
  for bad in BAD_PREFIXES:
    code, out, err = smi_main(["amd", *cmd, bad], {"HCQ_LOCK_DIR": locks})
    assert code == 2, (cmd, bad, code, out, err)
    assert f"{bad.lower()!r} is not a PCI address prefix" in err, (cmd, bad, err)
  assert holder.poll() is None


def test_pci_prefixes_that_can_start_an_address_are_accepted_and_nothing_else_means_every_device(locks):
  from hcq.drivers.system.pciaddr import validate_prefix
  from hcq.smi import listing
  from hcq.smi.lockfiles import discover
  for good in ("0", "0000", "0000:", "0000:03", "0000:03:", "0000:03:0", "0000:03:1f", "0000:03:00.", BUS, "10000:00"):
    assert validate_prefix(good) == good
  # below the command line too: an empty prefix is an error, no prefix (None) is every device
  (locks / f"am_{BUS}.lock").write_text("")
  host = LinuxOS(Config(lock_dir=str(locks)))
  with pytest.raises(DeviceError, match="'' is not a PCI address prefix"): discover(host, "am", "")
  with pytest.raises(DeviceError, match="'' is not a PCI address prefix"): listing.sample(in_process_ctx(host), "")
  assert [lf.bus for lf in discover(host, "am")] == [BUS]


# ---- 2. a process is signalled only when the running kernel shows it holding the lock

def test_a_fake_proc_tree_cannot_get_a_real_process_killed_that_holds_nothing(locks, procs, tmp_path):
  """HCQ_PROC_ROOT lists real processes as holders: one that holds nothing, one that holds another device's lock.
  The kernel's /proc disagrees: neither is signalled, both are reported as failures with the reason."""
  lock = locks / f"am_{BUS}.lock"
  lock.write_text("")
  sleeper = spawn_sleeper()
  other = spawn_holder(locks / "am_0000:04:00.0.lock")
  procs += [sleeper, other]
  proc = fake_proc_tree(tmp_path / "proc", lock, sleeper.pid)
  fake_proc_tree(proc, lock, other.pid)
  res, doc = run_smi_json("amd", "kill_pids", "--sudoless", "--pci_bus", "0000:03", env=smi_env(lock_dir=locks, proc=proc))
  assert res.returncode == 1 and doc["killed"] == [], res
  assert sorted(f["pid"] for f in doc["failed"]) == sorted([sleeper.pid, other.pid])
  assert all("running kernel's /proc shows it not holding the lock" in f["reason"] for f in doc["failed"])
  assert wait_dead(sleeper, 0.5) is None and other.poll() is None
  assert "Traceback" not in res.stderr


def test_a_real_holder_listed_by_a_fake_proc_tree_is_killed(locks, procs, tmp_path):
  """The kill path still works with a listing from a fake tree: the kernel confirms that the holder holds it."""
  lock = locks / f"am_{BUS}.lock"
  holder = spawn_holder(lock)
  bystander = spawn_holder(lock, lock=False)  # has the file open, no lock
  procs += [holder, bystander]
  proc = fake_proc_tree(tmp_path / "proc", lock, holder.pid)
  res, doc = run_smi_json("amd", "kill_pids", "--sudoless", env=smi_env(lock_dir=locks, proc=proc))
  assert [k["pid"] for k in doc["killed"]] == [holder.pid], res
  assert wait_dead(holder) == -signal.SIGKILL and bystander.poll() is None


def test_process_handle_signals_only_a_holder_the_kernel_shows(locks, procs):
  lock = locks / f"am_{BUS}.lock"
  holder, opener, sleeper = spawn_holder(lock), spawn_holder(lock, lock=False), spawn_sleeper()
  procs += [holder, opener, sleeper]
  host = LinuxOS(Config(proc_root="/nonexistent"))  # the configured tree plays no part
  for p in (opener, sleeper):
    with host.open_process(p.pid) as h: assert h.signal_lock_holder(str(lock), signal.SIGKILL) is False
  with host.open_process(holder.pid) as h: assert h.signal_lock_holder(str(locks / "missing.lock"), signal.SIGKILL) is False
  assert wait_dead(opener, 0.2) is None and wait_dead(sleeper, 0.2) is None and holder.poll() is None
  with host.open_process(holder.pid) as h: assert h.signal_lock_holder(str(lock), signal.SIGKILL) is True
  assert wait_dead(holder) == -signal.SIGKILL
  for bad in (0, -1, True, 1 << 40, "1"):
    with pytest.raises(DeviceError, match="is not a process id"): host.open_process(bad)


# ---- 3. sudo gets a clean command: an empty environment, and never a tree of the caller's

def test_commands_run_through_sudo_get_an_empty_environment(tmp_path):
  sysfs, bin_dir, log = tmp_path / "sys", tmp_path / "bin", tmp_path / "argv.log"
  add_module(sysfs, "amdgpu")
  (sysfs / "bus/pci/devices").mkdir(parents=True)
  for tool in ("sudo", "modprobe"): fake_tool(bin_dir, tool, log)
  cfg = Config(sysfs_root=str(sysfs), proc_root=str(tmp_path / "proc"), dev_root=str(tmp_path / "dev"),
               lock_dir=str(tmp_path / "locks"), exec_path=str(bin_dir))
  from hcq.smi import commands
  ctx = in_process_ctx(LinuxOS(cfg), use_sudo=True)
  assert commands.insmod(ctx) == 0, ctx.report.err.getvalue()
  assert read_log(log) == [SUDO_ENV + ["modprobe", "-r", "amdgpu"], SUDO_ENV + ["modprobe", "amdgpu"]]
  assert json.loads(ctx.report.out.getvalue())["rmmod"]["argv"] == SUDO_ENV + ["modprobe", "-r", "amdgpu"]


class UnwritableSysfs(LinuxOS):
  """Every sysfs write is refused (EACCES), as for a user; sysfs_exists answers True: nothing real is touched."""
  def sysfs_write(self, path, data): raise OSCallError("write", path, 13)
  def sysfs_exists(self, path): return True


def test_reset_uses_sudo_only_on_the_real_sysfs(tmp_path, locks):
  (locks / f"am_{BUS}.lock").write_text("")
  bin_dir, log = tmp_path / "bin", tmp_path / "argv.log"
  fake_tool(bin_dir, "sudo", log)  # records, writes nothing
  from hcq.smi import commands
  ctx = in_process_ctx(UnwritableSysfs(Config(sysfs_root=str(tmp_path / "sys"), lock_dir=str(locks), exec_path=str(bin_dir))),
                       use_sudo=True)
  assert commands.reset(ctx) == 1
  assert read_log(log) == []
  assert f"not using sudo with HCQ_SYSFS_ROOT={tmp_path / 'sys'}" in ctx.report.err.getvalue()
  ctx = in_process_ctx(UnwritableSysfs(Config(lock_dir=str(locks), exec_path=str(bin_dir))), use_sudo=True)
  assert commands.reset(ctx) == 0, ctx.report.err.getvalue()
  assert read_log(log) == [SUDO_ENV + ["tee", f"/sys/bus/pci/devices/{BUS}/reset"]]


class UnreadableFds(LinuxOS):
  """The holder's fds cannot be read (as another user's): only <proc>/locks names it."""
  def __init__(self, config, pid):
    super().__init__(config)
    self.pid = pid

  def proc_list(self, path=""):
    if path == f"{self.pid}/fd": raise OSCallError("listdir", path, 13)
    return super().proc_list(path)


@pytest.fixture
def system_lock():
  """A lock file in the system's lock dir (the only one the root helper sees), for an address in domain fffe."""
  p = pathlib.Path(Config().lock_dir) / "am_fffe:03:1f.7.lock"
  assert not p.exists(), p
  yield p
  p.unlink(missing_ok=True)


@pytest.mark.parametrize("tree", ["lock_dir", "proc_root"])
def test_kill_pids_does_not_ask_root_to_act_on_a_tree_of_the_callers(tree, locks, procs, tmp_path, system_lock):
  """A holder whose fds this user cannot read would be killed by hcq-smi run as root; not when the lock dir or the
  procfs tree is the caller's own: the root helper would see other files (sudo passes none of HCQ_*)."""
  lock = locks / f"am_{BUS}.lock" if tree == "lock_dir" else system_lock
  holder = spawn_holder(lock)
  procs.append(holder)
  proc = tmp_path / "proc"  # a tree of the caller's that shows the same as the real one
  proc.mkdir()
  os.symlink("/proc/locks", proc / "locks")
  os.symlink(f"/proc/{holder.pid}", proc / str(holder.pid))
  bin_dir, log = tmp_path / "bin", tmp_path / "argv.log"
  fake_tool(bin_dir, "sudo", log)
  cfg = Config(lock_dir=str(locks), exec_path=str(bin_dir)) if tree == "lock_dir" else \
        Config(proc_root=str(proc), exec_path=str(bin_dir))
  from hcq.smi import commands
  ctx = in_process_ctx(UnreadableFds(cfg, holder.pid), use_sudo=True)
  assert commands.kill_pids(ctx, sleep=lambda s: None) == 1
  doc = json.loads(ctx.report.out.getvalue())
  assert read_log(log) == [] and doc["killed"] == [] and [f["pid"] for f in doc["failed"]] == [holder.pid]
  var = {"lock_dir": "HCQ_LOCK_DIR", "proc_root": "HCQ_PROC_ROOT"}[tree]
  assert f"not using sudo with {var}=" in doc["failed"][0]["reason"]
  assert holder.poll() is None


# ---- 4. one unreadable or vanished PCI function does not stop list or top

@pytest.fixture
def broken_sysfs(tmp_path):
  sysfs = tmp_path / "sys"
  add_pci_function(sysfs, "0000:03:00.0", 0x1002, 0x744c, 0x030000, driver="amdgpu")
  d = add_pci_function(sysfs, "0000:04:00.0", 0x1002, 0x7550, 0x030000)
  (d / "vendor").unlink()
  (d / "vendor").mkdir()  # reading it fails (EISDIR), even as root
  os.symlink("../../../devices/pci0000:00/0000:05:00.0", sysfs / "bus/pci/devices/0000:05:00.0")  # removed meanwhile
  d = add_pci_function(sysfs, "0000:06:00.0", 0x1002, 0x7550, 0x030000)
  (d / "class").write_text("not hex\n")
  add_pci_function(sysfs, "0000:41:00.0", 0x10de, 0x2684, 0x030000)
  return sysfs


def test_list_shows_an_unreadable_function_with_its_error_and_the_others(broken_sysfs, locks):
  env = {"HCQ_SYSFS_ROOT": broken_sysfs, "HCQ_LOCK_DIR": locks}
  code, out, err = smi_main(["amd", "list", "--json"], env)
  assert code == 1, (code, err)
  devs = {d["address"]: d for d in json.loads(out)["devices"]}
  assert sorted(devs) == ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:41:00.0"]
  assert devs["0000:03:00.0"]["error"] is None and devs["0000:03:00.0"]["driver"] == "amdgpu"
  assert devs["0000:41:00.0"]["error"] is None and devs["0000:41:00.0"]["id"] == "10de:2684"
  assert "0000:04:00.0/vendor" in devs["0000:04:00.0"]["error"] and "0000:05:00.0/vendor" in devs["0000:05:00.0"]["error"]
  assert devs["0000:06:00.0"]["vendor"] == "1002" and "0000:06:00.0: class reads 'not hex'" in devs["0000:06:00.0"]["error"]
  code, out, err = smi_main(["amd", "list"], env)
  assert code == 1 and "Traceback" not in err
  assert "0000:04:00.0  error: read on" in out and "0000:41:00.0  [10de:2684]" in out and "0000:03:00.0  [1002:744c]" in out


def test_top_shows_an_unreadable_function_with_its_error_and_the_others(broken_sysfs, locks):
  code, out, err = smi_main(["amd", "top", "--json"], {"HCQ_SYSFS_ROOT": broken_sysfs, "HCQ_LOCK_DIR": locks})
  assert code == 1, (code, err)
  rows = {r["address"]: r for r in json.loads(out)["devices"]}
  assert sorted(rows) == ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:06:00.0"]  # not NVIDIA's
  assert rows["0000:03:00.0"]["error"] is None and rows["0000:03:00.0"]["source"] == "sysfs"
  assert all(rows[a]["error"] for a in ("0000:04:00.0", "0000:05:00.0"))
  code, out, err = smi_main(["amd", "top", "--once"], {"HCQ_SYSFS_ROOT": broken_sysfs, "HCQ_LOCK_DIR": locks})
  assert code == 1 and "0000:05:00.0 " in out and "error: read on" in out and "0000:03:00.0 " in out


# ---- 5. PATH: unreadable, relative and unusable entries are skipped

def test_unusable_path_entries_are_skipped(tmp_path, monkeypatch):
  sysfs, log = tmp_path / "sys", tmp_path / "argv.log"
  add_module(sysfs, "amdgpu")
  noexec, good, cwd = tmp_path / "noexec", tmp_path / "good", tmp_path / "cwd"
  noexec.mkdir()
  (noexec / "modprobe").write_text("#!/bin/sh\nexit 0\n")  # no x bit: execve fails even for root
  fake_tool(good, "modprobe", log)
  fake_tool(cwd, "modprobe", tmp_path / "cwd.log")  # reached only through a relative PATH entry: never run
  monkeypatch.chdir(cwd)
  env = {"HCQ_SYSFS_ROOT": sysfs}
  for path, want in ((f"{noexec}::.:{tmp_path / 'missing'}:{good}", 0), (f"{noexec}:.:cwd", 127)):
    monkeypatch.setenv("PATH", path)
    code, out, err = smi_main(["amd", "rmmod", "--sudoless"], env)
    assert code == want, (path, code, err)
  assert read_log(log) == [["modprobe", "-r", "amdgpu"]] and read_log(tmp_path / "cwd.log") == []
  assert "modprobe: command not found" in err
  host = LinuxOS(Config(exec_path=f"{good}"))
  assert host.find_program("modprobe") == f"{good}/modprobe"
  for bad in ("", "modprobe\x00", "../good/modprobe", "nonexistent"): assert host.find_program(bad) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a user who cannot read a PATH folder")
def test_an_unreadable_path_folder_is_skipped(tmp_path):
  import tempfile
  base = pathlib.Path(tempfile.mkdtemp(prefix="hcq-smi-test-"))
  try:
    base.chmod(0o755)
    sysfs, private, out = base / "sys", base / "private", base / "out.txt"
    add_module(sysfs, "amdgpu")
    private.mkdir(mode=0o700)  # root's: uid nobody may not search it
    out.write_text("")
    out.chmod(0o666)
    import hcq.smi.cli, hcq.smi.commands, hcq.smi.listing, hcq.smi.report  # noqa: F401  (loaded before dropping root)
    env = dict(HCQ_SYSFS_ROOT=sysfs, PATH=f"{private}:{base / 'empty'}")
    assert as_nobody(smi_in_child(["amd", "rmmod", "--sudoless"], env, out)) == 127
  finally:
    import shutil
    shutil.rmtree(base)


# ---- 6. the README's hcq-smi commands are valid, one a line

def test_readme_hcq_smi_commands_are_valid_one_a_line():
  from hcq.smi.cli import build_parser
  text = (REPO / "README.md").read_text()
  lines = [l for l in text.splitlines() if l.startswith("hcq-smi")]
  assert len(lines) >= 3
  for line in lines:
    cmd = re.split(r"\s+#\s", line, maxsplit=1)[0]
    assert not set("|;&<>`$") & set(cmd), f"{line!r}: one command a line, no shell syntax"
    try: build_parser().parse_args(shlex.split(cmd)[1:])
    except SystemExit: pytest.fail(f"README: {cmd!r} is not a valid hcq-smi command")


# ---- 7. a table of bad inputs: exit 2 for usage errors, 1 for failures, never a traceback

def bad_trees(tmp_path):
  """Fake trees with hostile content: a proc tree with odd pid names and lock lines and a process whose name is a
  terminal escape; a sysfs whose driver link is not UTF-8; lock and pci trees that are files."""
  w = type("W", (), {})()
  w.locks = tmp_path / "locks"
  w.locks.mkdir()
  lock = w.locks / f"am_{BUS}.lock"
  lock.write_text("")
  (w.locks / "am_\udcff.lock").write_text("")  # a name that is not UTF-8
  w.proc = tmp_path / "proc"
  for name in ("\u00b2", "\u0663", "99999999999999999999", "-1", "0", "007", "self", "4194305"):
    (w.proc / name / "fd").mkdir(parents=True)
    os.symlink(lock, w.proc / name / "fd" / "5")
    (w.proc / name / "fdinfo").mkdir()
    (w.proc / name / "fdinfo" / "5").write_text(f"lock:\t1: FLOCK  ADVISORY  WRITE 1 {lock_key(lock)} 0 EOF\n")
  fake_proc_tree(w.proc, lock, 4242)
  (w.proc / "4242" / "comm").write_bytes(b"\x1b[2J\x1b]0;pwned\x07evil\xff\n")
  with open(w.proc / "locks", "a") as f:
    f.write(f"1: FLOCK  ADVISORY  WRITE \u0663 {lock_key(lock)} 0 EOF\n2: FLOCK ADVISORY WRITE 99999999999999999999 "
            f"{lock_key(lock)} 0 EOF\ngarbage\n3: FLOCK\n")
  w.sysfs = tmp_path / "sys"
  d = add_pci_function(w.sysfs, BUS, 0x1002, 0x744c, 0x030000)
  os.symlink(b"../../../bus/pci/drivers/\xffdrv", bytes(d / "driver"))
  w.file = tmp_path / "a-file"
  w.file.write_text("")
  return w


def test_bad_inputs_give_usage_or_failure_codes_never_a_traceback(tmp_path):
  w = bad_trees(tmp_path)
  L = {"HCQ_LOCK_DIR": w.locks}
  table = [
    ([], {}, 2), (["amd"], {}, 2), (["amd", "frob"], {}, 2), (["intel", "list"], {}, 2), (["amd\x00", "list"], {}, 2),
    (["\udcff", "list"], {}, 2), (["amd", "list", "--bogus"], {}, 2), (["amd", "list", "--pci_bus", BUS], {}, 2),
    (["amd", "pids", "--pci_bus"], {}, 2), (["amd", "pids", "--pci_bus", ""], L, 2),
    (["amd", "kill_pids", "--pci_bus", "0000:03:00.0;reboot"], L, 2), (["amd", "reset", "--pci_bus", "\udcff"], L, 2),
    (["amd", "top", "--dev", ""], {}, 2), (["amd", "top", "--interval", "inf"], {}, 2),
    (["amd", "top", "--interval", "1e999"], {}, 2), (["amd", "top", "--interval", "nan"], {}, 2),
    (["amd", "rmmod", "--expect", "extra"], {}, 2), (["amd", "kill_pids", "--sudoless=1"], L, 2),
    (["amd", "pids"], dict(L, HCQ_TIMEOUT="soon"), 2), (["amd", "list"], {"HCQ_DEBUG": "x"}, 2),
    (["amd", "pids"], dict(L, HCQ_MOCK_BUDGET="1.5"), 2),
    (["amd", "list"], {"HCQ_SYSFS_ROOT": tmp_path / "missing"}, 1), (["amd", "list"], {"HCQ_SYSFS_ROOT": w.file}, 1),
    (["amd", "top", "--once"], {"HCQ_SYSFS_ROOT": w.file}, 1),
    (["amd", "pids"], dict(L, HCQ_PROC_ROOT=tmp_path / "missing"), 1),
    (["amd", "kill_pids", "--sudoless"], dict(L, HCQ_PROC_ROOT=w.file), 1),
    (["amd", "pids"], {"HCQ_LOCK_DIR": w.file}, 1), (["amd", "reset", "--sudoless"], {"HCQ_LOCK_DIR": w.file}, 1),
    (["amd", "pids"], {"HCQ_LOCK_DIR": tmp_path / "missing"}, 0),  # no lock dir yet: nothing is locked
    (["amd", "pids"], dict(L, HCQ_PROC_ROOT=w.proc), 0), (["amd", "pids", "--json"], dict(L, HCQ_PROC_ROOT=w.proc), 0),
    (["amd", "list"], dict(L, HCQ_SYSFS_ROOT=w.sysfs, HCQ_PROC_ROOT=w.proc), 0),
    (["amd", "top", "--once"], dict(L, HCQ_SYSFS_ROOT=w.sysfs, HCQ_PROC_ROOT=w.proc), 0),
  ]
  wrong = []
  for argv, env, want in table:
    code, out, err = smi_main(argv, env)
    if code != want or "Traceback" in out + err + str(code): wrong.append(f"{argv} {env}: exit {code}, want {want}\n{err}")
  assert not wrong, "\n\n".join(wrong)
  # what the hostile names became: escaped, never terminal control sequences; no odd pid name taken for a pid
  code, out, err = smi_main(["amd", "pids"], dict(L, HCQ_PROC_ROOT=w.proc))
  assert f"{BUS}: 4242 (\\x1b[2J\\x1b]0;pwned\\x07evil\ufffd)" in out and "\x1b" not in out + err
  code, out, err = smi_main(["amd", "pids", "--json"], dict(L, HCQ_PROC_ROOT=w.proc))
  assert [h["pid"] for h in json.loads(out)["devices"][0]["holders"]] == [4242]
  code, out, err = smi_main(["amd", "list"], {"HCQ_SYSFS_ROOT": w.sysfs})
  assert "driver: \\udcffdrv" in out


def test_the_console_script_on_bad_inputs():
  script = pathlib.Path(sys.executable).parent / "hcq-smi"
  if not script.exists(): pytest.skip("no console script next to this python")
  env = smi_env()
  for argv, extra, want in ((["amd", "frob"], {}, 2), (["amd", "kill_pids", "--pci_bus", ""], {}, 2),
                            (["amd", "pids"], {"HCQ_TIMEOUT": "soon"}, 2), (["amd", "list"], {"HCQ_SYSFS_ROOT": "/nonexistent"}, 1)):
    res = subprocess.run([str(script), *argv], capture_output=True, text=True, env=dict(env, **extra), timeout=60)
    assert res.returncode == want and "Traceback" not in res.stdout + res.stderr, (argv, res)
