"""hcq-smi pids / kill_pids with real processes holding real flocks, found through procfs."""
import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from hcq.config import Config
from hcq.drivers.system import LinuxOS
from hcq.smi.holders import find_holders, parse_lock_lines
from smi_helpers import as_nobody, read_log, run_smi, run_smi_json, smi_env, smi_in_child, spawn_holder, spawn_sleeper

BUS = "0000:03:00.0"


def wait_dead(p, timeout=10):
  try: return p.wait(timeout)
  except subprocess.TimeoutExpired: return None


def test_find_holders_is_exact(locks, procs):
  lock = locks / f"am_{BUS}.lock"
  holder = spawn_holder(lock)
  opener = spawn_holder(lock, lock=False)  # has the file open, holds no lock
  procs += [holder, opener]
  assert find_holders(LinuxOS(Config(lock_dir=str(locks))), str(lock)) == [holder.pid]
  assert find_holders(LinuxOS(Config()), str(locks / "am_0000:09:00.0.lock")) == []  # no such file


def test_parse_proc_locks_lines():
  text = ("1: FLOCK  ADVISORY  WRITE 4242 fe:00:2149778 0 EOF\n"
          "1: -> FLOCK  ADVISORY  WRITE 4343 fe:00:2149778 0 EOF\n"
          "2: POSIX  ADVISORY  READ 17 08:11:99 0 EOF\n"
          "lock:\t3: FLOCK  ADVISORY  WRITE -1 00:1f:5 0 EOF\n")
  entries = parse_lock_lines(text)
  assert [(e.kind, e.pid, e.key.major, e.key.minor, e.key.inode, e.waiting) for e in entries] == [
    ("FLOCK", 4242, 0xfe, 0, 2149778, False), ("FLOCK", 4343, 0xfe, 0, 2149778, True),
    ("POSIX", 17, 8, 0x11, 99, False), ("FLOCK", -1, 0, 0x1f, 5, False)]


def test_pids_prints_the_holder_only(locks, procs):
  holder = spawn_holder(locks / f"am_{BUS}.lock")
  opener = spawn_holder(locks / f"am_{BUS}.lock", lock=False)
  other = spawn_holder(locks / "am_0000:04:00.0.lock")
  procs += [holder, opener, other]
  env = smi_env(lock_dir=locks)
  res = run_smi("amd", "pids", "--pci_bus", "0000:03", env=env)
  assert res.returncode == 0, res
  assert f"{BUS}: {holder.pid} (python" in res.stdout
  assert str(opener.pid) not in res.stdout and str(other.pid) not in res.stdout and "0000:04" not in res.stdout
  res, doc = run_smi_json("amd", "pids", env=env)
  assert {d["bus"]: [h["pid"] for h in d["holders"]] for d in doc["devices"]} == {BUS: [holder.pid], "0000:04:00.0": [other.pid]}


def test_pids_without_holder(locks):
  (locks / f"am_{BUS}.lock").write_text("")
  res = run_smi("amd", "pids", env=smi_env(lock_dir=locks))
  assert res.returncode == 0 and f"{BUS}: No processes found" in res.stdout


def test_kill_pids_kills_only_the_holder(locks, procs):
  holder = spawn_holder(locks / f"am_{BUS}.lock")
  opener = spawn_holder(locks / f"am_{BUS}.lock", lock=False)
  unrelated = spawn_sleeper()
  procs += [holder, opener, unrelated]
  env = smi_env(lock_dir=locks)

  res = run_smi("amd", "kill_pids", "--sudoless", "--pci_bus", "0000:04", env=env)
  assert res.returncode == 0, res
  assert holder.poll() is None and "killed" not in res.stdout  # another bus: nothing killed

  res = run_smi("amd", "kill_pids", "--sudoless", "--pci_bus", "0000:03", env=env)
  assert res.returncode == 0, res
  assert f"killed {holder.pid}" in res.stdout
  assert wait_dead(holder) == -signal.SIGKILL
  assert opener.poll() is None and unrelated.poll() is None  # they did not hold the lock: alive
  assert str(opener.pid) not in res.stdout and str(unrelated.pid) not in res.stdout
  res = run_smi("amd", "pids", env=env)
  assert "No processes found" in res.stdout


def test_kill_pids_kills_every_process_sharing_the_lock(locks, procs):
  """A holder's forked child shares the locked file description: it holds the lock too, and is killed too."""
  script = ("import fcntl, os, subprocess, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], pass_fds=[fd])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(600)\n")
  parent = subprocess.Popen([sys.executable, "-c", script, str(locks / f"am_{BUS}.lock")], stdout=subprocess.PIPE, text=True)
  procs.append(parent)
  child_pid = int(parent.stdout.readline())
  try:
    res, doc = run_smi_json("amd", "kill_pids", "--sudoless", env=smi_env(lock_dir=locks))
    assert res.returncode == 0, res
    assert sorted(k["pid"] for k in doc["killed"]) == sorted([parent.pid, child_pid])
    assert wait_dead(parent) == -signal.SIGKILL
  finally:
    try: os.kill(child_pid, signal.SIGKILL)
    except ProcessLookupError: pass


@pytest.fixture
def public():
  """A lock dir, a bin dir with a fake sudo (records its argv, runs nothing) and an output file that uid nobody can
  use (pytest's tmp_path is private to root)."""
  from smi_helpers import fake_tool
  base = pathlib.Path(tempfile.mkdtemp(prefix="hcq-smi-test-"))
  base.chmod(0o755)
  world = type("Public", (), dict(locks=base / "locks", bin=base / "bin", out=base / "out.json", sudo_log=base / "sudo.log"))
  world.locks.mkdir()
  fake_tool(world.bin, "sudo", world.sudo_log)
  for f in (world.out, world.sudo_log):
    f.write_text("")
    f.chmod(0o666)
  import hcq.smi.cli, hcq.smi.commands, hcq.smi.listing, hcq.smi.report  # noqa: F401  (loaded before dropping root)
  yield world
  shutil.rmtree(base)


def _kill_pids_as_nobody(public, *args):
  env = dict(HCQ_LOCK_DIR=public.locks, PATH=f"{public.bin}:/usr/bin:/bin")
  code = as_nobody(smi_in_child(["amd", "kill_pids", "--json", *args], env, public.out,
                                drop_env=("HCQ_PROC_ROOT", "HCQ_SYSFS_ROOT")))
  return code, json.loads(public.out.read_text())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the holder as another user")
def test_kill_pids_sudoless_reports_a_holder_it_cannot_signal(procs, public):
  """kill_pids as uid nobody, the holder a root process: nobody cannot read root's fds, /proc/locks names the
  holder, it is not signalled; --sudoless reports it and exits non-zero, and never calls sudo."""
  holder = spawn_holder(public.locks / f"am_{BUS}.lock")
  procs.append(holder)
  code, doc = _kill_pids_as_nobody(public, "--sudoless")
  assert code == 1, doc
  assert [f["pid"] for f in doc["failed"]] == [holder.pid] and doc["killed"] == []
  assert holder.poll() is None
  assert read_log(public.sudo_log) == []


MALICIOUS = ["am_0000:03:00.0;reboot.lock", "am_$(touch pwned).lock", "am_0000:03:00.0 .lock", "am_ 0000:03:00.0.lock",
             "am_0000:03:00.0`id`.lock", "am_..lock", "am_0000:03:00.0\n.lock", "am_0000:03:00.0|sh.lock",
             "am_..%2fetc%2fpasswd.lock", "am_0000:03:00.0.LOCK"]


def test_malicious_lock_names_are_ignored_with_a_warning(locks, procs, tmp_path):
  held = []
  for name in MALICIOUS:
    held.append(spawn_holder(locks / name))
  (locks / "am_0000:03:00.0").mkdir()  # what a name with '/' would look like: a folder, no .lock file
  (locks / "am_0000:03:00.0" / "x.lock").write_text("")
  (locks / "am_0000:07:00.0.lock").mkdir()  # a well-formed name that is not a regular file
  os.symlink("/etc/hostname", locks / "am_0000:08:00.0.lock")
  (tmp_path / "some.lock").write_text("")
  held.append(spawn_holder(tmp_path / "some.lock"))  # holds another file's lock, reached through a hard link
  os.link(tmp_path / "some.lock", locks / "am_0000:09:00.0.lock")
  procs += held
  env = smi_env(lock_dir=locks)
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  for cmd in (["pids"], ["kill_pids", "--sudoless"], ["reset", "--sudoless"]):
    res = subprocess.run([sys.executable, "-m", "hcq.smi", "amd", *cmd], capture_output=True, text=True, env=env, cwd=cwd)
    assert res.returncode == 0, (cmd, res)
    for name in MALICIOUS + ["am_0000:03:00.0"]:
      assert f"ignoring lock file {name!r}" in res.stderr, (cmd, name, res.stderr)
    assert "'am_0000:07:00.0.lock'" in res.stderr and "'am_0000:08:00.0.lock'" in res.stderr
    assert "'am_0000:09:00.0.lock' in " + str(locks) + ": a hard link" in res.stderr, res.stderr
    assert "killed" not in res.stdout and "reset 0000" not in res.stdout
  assert all(p.poll() is None for p in held)  # nobody killed
  assert list(cwd.iterdir()) == [] and not (locks / "pwned").exists()


def test_lock_of_another_backend_is_not_touched(locks, procs):
  nv = spawn_holder(locks / f"nv_{BUS}.lock")
  procs.append(nv)
  res = run_smi("amd", "kill_pids", "--sudoless", env=smi_env(lock_dir=locks))
  assert res.returncode == 0 and nv.poll() is None
  res = run_smi("nv", "kill_pids", "--sudoless", env=smi_env(lock_dir=locks))
  assert res.returncode == 0 and wait_dead(nv) == -signal.SIGKILL


def test_holders_from_a_fake_proc_tree(locks, tmp_path):
  """HCQ_PROC_ROOT: holders come from <proc>/<pid>/fd links plus the fdinfo lock lines, and from <proc>/locks for
  processes whose fds cannot be read. Pids here are fake, so only `pids` (which signals nothing) runs."""
  lock = locks / f"am_{BUS}.lock"
  lock.write_text("")
  st = lock.stat()
  key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
  proc = tmp_path / "proc"
  def process(pid, fdinfo, target=lock):
    (proc / str(pid) / "fd").mkdir(parents=True)
    (proc / str(pid) / "fdinfo").mkdir()
    os.symlink(target, proc / str(pid) / "fd" / "5")
    (proc / str(pid) / "fdinfo" / "5").write_text("pos:\t0\nflags:\t02100002\nmnt_id:\t27\n" + fdinfo)
    (proc / str(pid) / "comm").write_text(f"worker{pid}\n")
  process(700, f"lock:\t1: FLOCK  ADVISORY  WRITE 700 {key} 0 EOF\n")   # holds it
  process(701, "")                                                        # only has it open
  process(702, f"lock:\t2: FLOCK  ADVISORY  WRITE 702 {key} 0 EOF\n", target=tmp_path / "elsewhere.lock")
  process(703, f"lock:\t1: FLOCK  ADVISORY  WRITE 700 {key} 0 EOF\n")   # a forked sharer of 700's lock
  (proc / "self").mkdir()
  (proc / "locks").write_text(f"1: FLOCK  ADVISORY  WRITE 700 {key} 0 EOF\n"
                              f"1: -> FLOCK  ADVISORY  WRITE 701 {key} 0 EOF\n")
  res, doc = run_smi_json("amd", "pids", env=smi_env(lock_dir=locks, proc=proc))
  assert res.returncode == 0, res
  assert doc["devices"] == [{"bus": BUS, "lock": str(lock), "holders": [{"pid": 700, "name": "worker700", "checked": True},
                                                                       {"pid": 703, "name": "worker703", "checked": True}]}]


# ---- kill_pids never signals a process it has not seen holding the lock (in-process, over a fake proc tree whose
# pids are real processes, so that a wrong signal would really kill one)

class FakeProcOS(LinuxOS):
  """LinuxOS over a fake proc tree; `unreadable` pids answer EACCES for their fd folder (as another user's would),
  `before_open` runs just before a process is pinned (to play a pid being reused after the scan)."""

  def __init__(self, config, unreadable=(), before_open=None):
    super().__init__(config)
    self.unreadable, self.before_open = set(unreadable), before_open

  def proc_list(self, path=""):
    if path.split("/")[0] in {str(p) for p in self.unreadable} and path.endswith("/fd"):
      from hcq.errors import OSCallError
      raise OSCallError("listdir", path, errno.EACCES)
    return super().proc_list(path)

  def open_process(self, pid):
    if self.before_open: self.before_open(pid)
    return super().open_process(pid)


def _fake_proc(tmp_path, lock, pid, holds=True):
  tmp_path.mkdir(parents=True, exist_ok=True)
  st = lock.stat()
  key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
  proc = tmp_path / "proc"
  (proc / str(pid) / "fd").mkdir(parents=True)
  (proc / str(pid) / "fdinfo").mkdir()
  (proc / str(pid) / "comm").write_text("victim\n")
  if holds:
    os.symlink(lock, proc / str(pid) / "fd" / "5")
    (proc / str(pid) / "fdinfo" / "5").write_text(f"pos:\t0\nlock:\t1: FLOCK  ADVISORY  WRITE {pid} {key} 0 EOF\n")
  (proc / "locks").write_text(f"1: FLOCK  ADVISORY  WRITE {pid} {key} 0 EOF\n")
  return proc


def _kill_in_process(host):
  import io
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  report = Report(True, out=io.StringIO(), err=io.StringIO())
  rc = commands.kill_pids(commands.Context(backend("amd"), host, report, sudoless=True), sleep=lambda s: None)
  return rc, json.loads(report.out.getvalue()), report.err.getvalue()


def test_a_pid_named_only_by_proc_locks_is_never_signalled(locks, procs, tmp_path):
  """<proc>/locks keeps the pid of the process that took the flock even after it exited (the lock lives on in
  a child that inherited it): that pid may now be another user's unrelated process. Unchecked: not signalled."""
  lock = locks / f"am_{BUS}.lock"
  lock.write_text("")
  victim = spawn_sleeper()
  procs.append(victim)
  proc = _fake_proc(tmp_path, lock, victim.pid, holds=False)
  host = FakeProcOS(Config(lock_dir=str(locks), proc_root=str(proc)), unreadable=[victim.pid])
  rc, doc, err = _kill_in_process(host)
  assert rc == 1 and doc["killed"] == [] and [f["pid"] for f in doc["failed"]] == [victim.pid]
  assert "cannot be checked" in err and f"cannot kill {victim.pid}" in err
  assert wait_dead(victim, timeout=0.5) is None  # alive


def test_a_pid_reused_after_the_scan_is_not_signalled(locks, procs, tmp_path):
  """The holder exits between the scan and the kill, and its pid names another process: the check made after
  pinning the process (pidfd) sees that it holds nothing, and it is not signalled."""
  lock = locks / f"am_{BUS}.lock"
  lock.write_text("")
  victim = spawn_sleeper()
  procs.append(victim)
  proc = _fake_proc(tmp_path, lock, victim.pid, holds=True)
  def holder_exits_and_pid_is_reused(pid):
    (proc / str(pid) / "fd" / "5").unlink()
    (proc / "locks").write_text("")
  host = FakeProcOS(Config(lock_dir=str(locks), proc_root=str(proc)), before_open=holder_exits_and_pid_is_reused)
  rc, doc, err = _kill_in_process(host)
  assert rc == 0 and doc["killed"] == [] and doc["failed"] == [], err
  assert wait_dead(victim, timeout=0.5) is None  # alive
  # the same tree naming a process that really holds the lock: it is killed (the test above fails for the right
  # reason; test_smi_hardening shows that a tree naming a process that holds nothing cannot get it killed)
  holder = spawn_holder(lock)
  procs.append(holder)
  proc = _fake_proc(tmp_path / "again", lock, holder.pid, holds=True)
  rc, doc, err = _kill_in_process(FakeProcOS(Config(lock_dir=str(locks), proc_root=str(proc))))
  assert [k["pid"] for k in doc["killed"]] == [holder.pid], err  # (the fake tree goes on showing it: rc 1)
  assert wait_dead(holder) == -signal.SIGKILL and wait_dead(victim, timeout=0.1) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the holder as another user")
def test_kill_pids_as_a_user_does_not_use_sudo_for_a_lock_dir_of_its_own(procs, public):
  """As uid nobody (no --sudoless), a root process holding the lock cannot be checked. The lock dir is the
  caller's own (HCQ_LOCK_DIR), not the system's: sudo is not used for it (root would act on the caller's tree), the
  holder is reported with the reason and lives."""
  holder = spawn_holder(public.locks / f"am_{BUS}.lock")
  procs.append(holder)
  code, doc = _kill_pids_as_nobody(public)
  assert code == 1, doc
  assert read_log(public.sudo_log) == []
  assert [f["pid"] for f in doc["failed"]] == [holder.pid] and doc["killed"] == []
  assert f"not using sudo with HCQ_LOCK_DIR={public.locks}" in doc["failed"][0]["reason"]
  assert holder.poll() is None


@pytest.fixture
def system_locks():
  """Lock files in the system's lock dir (Config().lock_dir), for the root helper that sees only that one: two
  addresses in domain fffe, which no machine this runs on has; removed afterwards."""
  d = pathlib.Path(Config().lock_dir)
  made = [d / f"am_fffe:{i:02x}:1f.7.lock" for i in (1, 2)]
  for p in made: assert not p.exists(), p
  yield made
  for p in made: p.unlink(missing_ok=True)


def test_holders_it_cannot_check_are_killed_by_hcq_smi_run_as_root(system_locks, procs, tmp_path):
  """The whole way through the root helper: this process may not read the holder's fds (played by FakeProcOS),
  `sudo` (here: a script that records its argv and runs it, as root already) runs `hcq-smi amd kill_pids --sudoless`
  for the device with a clean command line and an empty environment; it checks the holder through the real /proc
  and kills it; it is reported as killed as root."""
  bus = system_locks[0].name[len("am_"):-len(".lock")]
  holder = spawn_holder(system_locks[0])
  bystander = spawn_holder(system_locks[1])  # another device: the helper is limited to one
  procs += [holder, bystander]
  bin_dir, log = tmp_path / "bin", tmp_path / "sudo.log"
  bin_dir.mkdir()
  (bin_dir / "sudo").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec "$@"\n')
  (bin_dir / "sudo").chmod(0o755)
  import io
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  host = FakeProcOS(Config(exec_path=f"{bin_dir}:/usr/bin:/bin"), unreadable=[holder.pid, bystander.pid])
  report = Report(True, out=io.StringIO(), err=io.StringIO())
  ctx = commands.Context(backend("amd"), host, report)
  ctx.use_sudo = True  # as a user with sudo
  rc = commands.kill_pids(ctx, bus, sleep=lambda s: None)
  doc = json.loads(report.out.getvalue())
  assert rc == 0, (doc, report.err.getvalue())
  assert log.read_text().splitlines() == [f"env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin {sys.executable} -I -m hcq.smi "
                                          f"amd kill_pids --sudoless --pci_bus {bus}"]
  assert [(k["pid"], k["bus"], k.get("as_root")) for k in doc["killed"]] == [(holder.pid, bus, True)]
  assert wait_dead(holder) == -signal.SIGKILL and bystander.poll() is None


def test_pids_marks_a_holder_it_could_not_check(locks, tmp_path):
  import io
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  lock = locks / f"am_{BUS}.lock"
  lock.write_text("")
  proc = _fake_proc(tmp_path, lock, 4242, holds=False)
  host = FakeProcOS(Config(lock_dir=str(locks), proc_root=str(proc)), unreadable=[4242])
  text = Report(False, out=io.StringIO(), err=io.StringIO())
  assert commands.pids(commands.Context(backend("amd"), host, text)) == 0
  assert f"{BUS}: 4242 (victim) [named by /proc/locks; its fds cannot be read by this user]" in text.out.getvalue()
  doc = Report(True, out=io.StringIO(), err=io.StringIO())
  commands.pids(commands.Context(backend("amd"), host, doc))
  assert json.loads(doc.out.getvalue())["devices"][0]["holders"] == [{"pid": 4242, "name": "victim", "checked": False}]
