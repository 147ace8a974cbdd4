"""hcq-smi's driver hand-over commands: rmmod, insmod, reset, pids, kill_pids.

Commands run by subprocess get argument lists, never a shell: modprobe, sudo, nvidia-smi, found by
LinuxOS.find_program. Commands run as root are `sudo env -i PATH=<ROOT_PATH> CMD ARGS`: an empty environment but a
fixed PATH, so nothing of the caller's environment (HCQ_SYSFS_ROOT, HCQ_PROC_ROOT, HCQ_DEV_ROOT, HCQ_LOCK_DIR,
MODPROBE_OPTIONS, PYTHONPATH...) reaches them, whatever sudo's env_keep says; their arguments are module names, the
real /sys path of a validated PCI address, or hcq-smi's own kill_pids for one validated address. sudo acts only on
the real system: when the lock dir, procfs or sysfs root is a tree of the caller's (Context.fake_roots), a command
that would act on it as root is not run, and the failure says why.

Processes are signalled through a pidfd (LinuxOS.open_process) and only when the running kernel's /proc shows that
they hold the lock (ProcessHandle.signal_lock_holder), whatever the configured procfs tree listed. Everything else
(sysfs, procfs, lock files) goes through the OS interface object `host` (LinuxOS).
"""
from __future__ import annotations

import errno
import os
import posixpath
import signal
import subprocess
import sys

from ..config import Config
from ..drivers.system.pci import PCIDevice
from ..drivers.system.pciaddr import validate
from ..errors import DeviceError, OSCallError
from .backends import Backend
from .holders import classify_holders, find_holders, process_name
from .lockfiles import discover

KILL_ROUNDS, KILL_PAUSE_S = 128, 0.2
# the longest a command hcq-smi runs may take (loading amdgpu or nvidia initialises every GPU: tens of seconds)
COMMAND_TIMEOUT_S = 600.0
EXIT_OK, EXIT_FAIL, EXIT_TIMEOUT, EXIT_CANNOT_RUN, EXIT_NOT_FOUND = 0, 1, 124, 126, 127
# the whole environment of a command run through sudo
ROOT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
SUDO = ("sudo", "env", "-i", f"PATH={ROOT_PATH}")
# the running system's trees, the only ones sudo acts on: (Config field, real value, the variable that moves it)
REAL_SYSFS = "/sys"
REAL_ROOTS = (("sysfs_root", REAL_SYSFS, "HCQ_SYSFS_ROOT"), ("proc_root", "/proc", "HCQ_PROC_ROOT"),
              ("lock_dir", Config().lock_dir, "HCQ_LOCK_DIR"), ("dev_root", "/dev", "HCQ_DEV_ROOT"))


class Context:
  """What every command gets: the backend, the OS object, the report, and whether sudo may be used."""

  def __init__(self, backend: Backend, host, report, sudoless: bool = False, command_timeout_s: float = COMMAND_TIMEOUT_S):
    self.backend, self.host, self.report = backend, host, report
    self.use_sudo = not sudoless and os.geteuid() != 0
    self.command_timeout_s = command_timeout_s

  def fake_roots(self, *fields: str) -> list[str]:
    """The trees among fields (Config field names) that are not the running system's: 'VARIABLE=value' each."""
    cfg = self.host.config
    return [f"{var}={getattr(cfg, field)}" for field, real, var in REAL_ROOTS
            if field in fields and posixpath.normpath(getattr(cfg, field)) != real]

  def no_sudo_for(self, *fields: str) -> str | None:
    """Why sudo must not act for a command that depends on these trees (they are the caller's own), else None."""
    fake = self.fake_roots(*fields)
    if not fake: return None
    return f"not using sudo with {', '.join(fake)}: sudo acts only on the running system's trees"

  def command(self, argv: list[str], root: bool = False) -> list[str]:
    """argv as it is run: through sudo (with an empty environment) when root is needed and we are not root."""
    return [*SUDO, *argv] if root and self.use_sudo else list(argv)

  def run(self, argv: list[str], root: bool = False, stdin: bytes | None = None) -> int:
    """Run argv (through sudo when root is needed and we are not root, unless --sudoless); its exit code."""
    argv = self.command(argv, root)
    self.report.say(f"running: {' '.join(argv)}")
    program = self.host.find_program(argv[0])
    if program is None:
      self.report.error(f"{argv[0]}: command not found (in the absolute, readable folders of PATH)")
      return EXIT_NOT_FOUND
    # the tool's own output goes to stderr under --json, so that stdout stays one JSON document
    out = subprocess.DEVNULL if stdin is not None else (2 if self.report.as_json else None)
    try:
      return subprocess.run(argv, executable=program, input=stdin, stdout=out, check=False,
                            timeout=self.command_timeout_s).returncode
    except subprocess.TimeoutExpired:  # subprocess.run killed it
      self.report.error(f"{' '.join(argv)}: still running after {self.command_timeout_s:g} s, killed")
      return EXIT_TIMEOUT
    except OSError as e:  # removed or made non-executable since the lookup, or not a program (ENOEXEC)
      self.report.error(f"{argv[0]} ({program}): cannot be run: {e.strerror}")
      return EXIT_CANNOT_RUN

  def locks(self, prefix: str | None = None):
    return discover(self.host, self.backend.lock_kind, prefix, warn=self.report.warn)


# ---- kernel modules

def loaded_modules(ctx: Context) -> list[str]:
  """The backend's modules that are loaded: <sysfs>/module/<name> exists."""
  return [m for m in ctx.backend.modules if ctx.host.sysfs_exists(f"module/{m}")]


def _rmmod(ctx: Context, expect: bool) -> dict:
  loaded = loaded_modules(ctx)
  doc = {"command": "rmmod", "backend": ctx.backend.name, "loaded": loaded, "expect": expect}
  if expect or not loaded:
    ctx.report.say(f"Kernel modules are loaded: {loaded}" if loaded else "Kernel modules are not loaded")
    doc["exit"] = EXIT_FAIL if loaded else EXIT_OK
    return doc
  ctx.report.say(f"Removing kernel modules: {' '.join(loaded)}")
  argv = ["modprobe", "-r", *loaded]
  rc = ctx.run(argv, root=True)
  doc.update(argv=ctx.command(argv, root=True), removed=loaded if rc == 0 else [], exit=rc)
  if rc: ctx.report.error(f"modprobe -r {' '.join(loaded)} failed (exit {rc}): the modules may be in use "
                          f"(see `hcq-smi {ctx.backend.name} pids` and `lsmod`)")
  return doc


def rmmod(ctx: Context, expect: bool = False) -> int:
  doc = _rmmod(ctx, expect)
  ctx.report.document(doc)
  return doc["exit"]


# ---- reset

def reset_devices(ctx: Context, prefix: str | None = None) -> tuple[list[str], list[str]]:
  """Function-level reset (sysfs `reset`) of every locked device matching prefix (None: every one): (reset,
  failed) addresses."""
  done, failed = [], []
  for lf in ctx.locks(prefix):
    dev = PCIDevice(ctx.host, lf.bus)
    try:
      dev.reset()
      done.append(lf.bus)
    except OSCallError as e:
      why = ""
      if e.errno in (errno.EACCES, errno.EPERM) and ctx.use_sudo:
        why = ctx.no_sudo_for("sysfs_root")
        if not why:
          # the real /sys path of a validated PCI address: no shell or path syntax; tee gets an argument list
          path = f"{REAL_SYSFS}/bus/pci/devices/{validate(lf.bus)}/reset"
          if ctx.run(["tee", path], root=True, stdin=b"1") == 0:
            done.append(lf.bus)
            continue
      ctx.report.error(f"reset of {lf.bus} failed: {e}" + (f" ({why})" if why else ""))
      failed.append(lf.bus)
    except DeviceError as e:
      ctx.report.error(f"reset of {lf.bus} failed: {e}")
      failed.append(lf.bus)
    else: ctx.report.say(f"reset {lf.bus}")
  return done, failed


def reset(ctx: Context, prefix: str | None = None) -> int:
  done, failed = reset_devices(ctx, prefix)
  if not done and not failed: ctx.report.say("No devices found")
  rc = EXIT_FAIL if failed else EXIT_OK
  ctx.report.document({"command": "reset", "backend": ctx.backend.name, "reset": done, "failed": failed, "exit": rc})
  return rc


# ---- insmod

def insmod(ctx: Context) -> int:
  doc = {"command": "insmod", "backend": ctx.backend.name, "rmmod": None, "reset": [], "failed": [], "load": None}
  rc = EXIT_OK
  if loaded_modules(ctx):
    doc["rmmod"] = _rmmod(ctx, False)
    rc = doc["rmmod"]["exit"]
  if rc == EXIT_OK:
    doc["reset"], doc["failed"] = reset_devices(ctx)
    if doc["failed"]: rc = EXIT_FAIL
  if rc == EXIT_OK:
    ctx.report.say(f"Loading the kernel driver: {' '.join(ctx.backend.load)}")
    doc["load"] = list(ctx.backend.load)
    rc = ctx.run(list(ctx.backend.load), root=ctx.backend.load_needs_root)
    if rc: ctx.report.error(f"{' '.join(ctx.backend.load)} failed (exit {rc})")
  doc["exit"] = rc
  ctx.report.document(doc)
  return rc


# ---- holders

UNCHECKED = " [named by /proc/locks; its fds cannot be read by this user]"


def _holder_doc(ctx, found) -> list[dict]:
  """checked: its fds show it holds the lock; else only <proc>/locks names it (this user may not read its fds)."""
  return [{"pid": p, "name": process_name(ctx.host, p), "checked": p in found.verified} for p in found.all]


def pids(ctx: Context, prefix: str | None = None) -> int:
  devices = []
  locks = ctx.locks(prefix)
  for lf in locks:
    holders = _holder_doc(ctx, classify_holders(ctx.host, lf.path))
    devices.append({"bus": lf.bus, "lock": lf.path, "holders": holders})
    text = " ".join(f"{h['pid']} ({h['name']})" + ("" if h["checked"] else UNCHECKED) for h in holders)
    ctx.report.say(f"{lf.bus}: {text or 'No processes found'}")
  if not locks: ctx.report.say(f"No devices found (no {ctx.backend.lock_kind}_*.lock in {ctx.host.config.lock_dir})")
  ctx.report.document({"command": "pids", "backend": ctx.backend.name, "devices": devices, "exit": EXIT_OK})
  return EXIT_OK


def _kill(ctx: Context, pid: int, lf) -> tuple[str, str]:
  """SIGKILL pid if the running kernel shows it holding lf's lock: ("killed" | "gone" | "refused" | "denied" |
  "failed", why).

  The process is pinned with a pidfd, then the kernel's own /proc (not the configured tree the pid was listed
  from) must show one of its fds holding the flock on lf's file: a pid reused after the scan, or a pid a fake
  HCQ_PROC_ROOT names, is "refused" and never signalled."""
  try: proc = ctx.host.open_process(pid)
  except OSCallError as e: return ("gone", "") if e.errno == errno.ESRCH else ("failed", str(e))
  except DeviceError as e: return "failed", str(e)  # not a process id
  try: sent = proc.signal_lock_holder(lf.path, signal.SIGKILL)
  except OSCallError as e:
    if e.errno == errno.ESRCH: return "gone", ""
    if e.errno == errno.EPERM: return "denied", os.strerror(e.errno)
    return "failed", str(e)
  finally: proc.close()
  if sent: return "killed", ""
  if sent is None: return "denied", "its file descriptors cannot be read by this user"
  return "refused", "the running kernel's /proc shows it not holding the lock"


def _kill_as_root(ctx: Context, lf) -> int:
  """Run kill_pids for this one device as root (sudo): root may read every process's fds, so it kills exactly the
  holders this user could not check. The command is built here, from nothing but the backend and the validated
  address: python -I (no PYTHON* variables, no user site, and not the current folder on sys.path, which would let
  a folder of the user's give root a module), and sudo's env -i leaves the helper the real /proc and lock dir
  (the caller checks, with no_sudo_for, that these are the ones this process uses)."""
  argv = [sys.executable, "-I", "-m", "hcq.smi", ctx.backend.name, "kill_pids", "--sudoless", "--pci_bus", validate(lf.bus)]
  return ctx.run(argv, root=True)


def _kill_device(ctx: Context, lf, killed: list, failed: dict, sleep) -> list[int]:
  """Kill the holders of one lock file, round after round; returns the pids that still hold it."""
  need_root: dict[int, str] = {}
  refused: dict[int, str] = {}  # listed as holders, but the kernel shows otherwise: never tried again
  for _ in range(KILL_ROUNDS):
    found = classify_holders(ctx.host, lf.path)
    for pid in found.unverified:
      need_root.setdefault(pid, "its file descriptors cannot be read by this user, so it cannot be checked that it "
                                "holds the lock; not signalled")
    todo = [p for p in found.verified if p != os.getpid() and p not in failed and p not in need_root and p not in refused]
    if not todo: break
    for pid in todo:
      name = process_name(ctx.host, pid)
      outcome, why = _kill(ctx, pid, lf)
      if outcome == "killed":
        if pid not in (k["pid"] for k in killed):
          killed.append({"pid": pid, "name": name, "bus": lf.bus})
          ctx.report.say(f"killed {pid} ({name}) holding {lf.path}")
      elif outcome == "denied": need_root[pid] = why
      elif outcome == "refused": refused[pid] = why
      elif outcome == "failed":
        failed[pid] = {"pid": pid, "name": name, "bus": lf.bus, "reason": why}
        ctx.report.error(f"cannot kill {pid} ({name}) holding {lf.path}: {why}")
    sleep(KILL_PAUSE_S)
  still = set(find_holders(ctx.host, lf.path))
  for pid in sorted(refused.keys() & still):  # a tree (HCQ_PROC_ROOT) that lists it still, against the kernel
    failed[pid] = {"pid": pid, "name": process_name(ctx.host, pid), "bus": lf.bus,
                   "reason": f"{ctx.host.config.proc_root} lists it holding the lock, but {refused[pid]}; not signalled"}
    ctx.report.error(f"cannot kill {pid} ({failed[pid]['name']}) holding {lf.path}: {failed[pid]['reason']}")
  need_root = {p: why for p, why in need_root.items() if p in still}
  no_sudo = ctx.no_sudo_for("proc_root", "lock_dir") if need_root and ctx.use_sudo else None
  if no_sudo: need_root = {p: f"{why} ({no_sudo})" for p, why in need_root.items()}
  elif need_root and ctx.use_sudo:
    names = {p: process_name(ctx.host, p) for p in need_root}
    rc = _kill_as_root(ctx, lf)
    still = set(find_holders(ctx.host, lf.path))
    for pid in need_root:
      if pid not in still: killed.append({"pid": pid, "name": names[pid], "bus": lf.bus, "as_root": True})
    need_root = {p: f"still holds the lock after running kill_pids as root (exit {rc})" for p in need_root if p in still}
  sudoless = not ctx.use_sudo and os.geteuid() != 0
  for pid, why in need_root.items():
    failed[pid] = {"pid": pid, "name": process_name(ctx.host, pid), "bus": lf.bus,
                   "reason": why + (" (--sudoless: not using sudo)" if sudoless else "")}
    ctx.report.error(f"cannot kill {pid} ({failed[pid]['name']}) holding {lf.path}: {failed[pid]['reason']}")
  return [p for p in find_holders(ctx.host, lf.path) if p not in failed]


def kill_pids(ctx: Context, prefix: str | None = None, sleep=None) -> int:
  """SIGKILL every holder of each matching device's lock, round after round (at most KILL_ROUNDS, KILL_PAUSE_S
  apart) until none is left. Only processes found holding the lock are signalled, never this process."""
  import time
  sleep = sleep or time.sleep
  killed, failed, remaining = [], {}, {}
  locks = ctx.locks(prefix)
  for lf in locks:
    left = _kill_device(ctx, lf, killed, failed, sleep)
    if os.getpid() in left: ctx.report.error(f"{lf.bus}: this process holds {lf.path} itself")
    elif left: ctx.report.error(f"{lf.bus}: still held by {left} after {KILL_ROUNDS} rounds")
    if left: remaining[lf.bus] = left
  if not locks: ctx.report.say(f"No devices found (no {ctx.backend.lock_kind}_*.lock in {ctx.host.config.lock_dir})")
  elif not killed and not failed and not remaining: ctx.report.say("No processes found")
  rc = EXIT_FAIL if failed or remaining else EXIT_OK
  ctx.report.document({"command": "kill_pids", "backend": ctx.backend.name, "killed": killed, "failed": list(failed.values()),
                       "remaining": remaining, "exit": rc})
  return rc
