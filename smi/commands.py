"""hcq-smi's driver hand-over commands: rmmod, insmod, reset, pids, kill_pids.

Commands run by subprocess get argument lists, never a shell: modprobe, sudo, nvidia-smi. Processes are signalled
through a pidfd (LinuxOS.open_process) after checking again that they hold the lock. Everything else (sysfs,
procfs, lock files) goes through the OS interface object `host` (LinuxOS).
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

from ..drivers.system.pci import PCIDevice
from ..errors import DeviceError, OSCallError
from .backends import Backend
from .holders import classify_holders, find_holders, holds, lock_target, process_name
from .lockfiles import discover

KILL_ROUNDS, KILL_PAUSE_S = 128, 0.2
# the longest a command hcq-smi runs may take (loading amdgpu or nvidia initialises every GPU: tens of seconds)
COMMAND_TIMEOUT_S = 600.0
EXIT_OK, EXIT_FAIL, EXIT_TIMEOUT, EXIT_NOT_FOUND = 0, 1, 124, 127


class Context:
  """What every command gets: the backend, the OS object, the report, and whether sudo may be used."""

  def __init__(self, backend: Backend, host, report, sudoless: bool = False, command_timeout_s: float = COMMAND_TIMEOUT_S):
    self.backend, self.host, self.report = backend, host, report
    self.use_sudo = not sudoless and os.geteuid() != 0
    self.command_timeout_s = command_timeout_s

  def run(self, argv: list[str], root: bool = False, stdin: bytes | None = None) -> int:
    """Run argv (through sudo when root is needed and we are not root, unless --sudoless); its exit code."""
    if root and self.use_sudo: argv = ["sudo", *argv]
    self.report.say(f"running: {' '.join(argv)}")
    # the tool's own output goes to stderr under --json, so that stdout stays one JSON document
    out = subprocess.DEVNULL if stdin is not None else (2 if self.report.as_json else None)
    try: return subprocess.run(argv, input=stdin, stdout=out, check=False, timeout=self.command_timeout_s).returncode
    except FileNotFoundError:
      self.report.error(f"{argv[0]}: command not found")
      return EXIT_NOT_FOUND
    except subprocess.TimeoutExpired:  # subprocess.run killed it
      self.report.error(f"{' '.join(argv)}: still running after {self.command_timeout_s:g} s, killed")
      return EXIT_TIMEOUT

  def locks(self, prefix: str = ""):
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
  doc.update(argv=(["sudo"] if ctx.use_sudo else []) + argv, removed=loaded if rc == 0 else [], exit=rc)
  if rc: ctx.report.error(f"modprobe -r {' '.join(loaded)} failed (exit {rc}): the modules may be in use "
                          f"(see `hcq-smi {ctx.backend.name} pids` and `lsmod`)")
  return doc


def rmmod(ctx: Context, expect: bool = False) -> int:
  doc = _rmmod(ctx, expect)
  ctx.report.document(doc)
  return doc["exit"]


# ---- reset

def reset_devices(ctx: Context, prefix: str = "") -> tuple[list[str], list[str]]:
  """Function-level reset (sysfs `reset`) of every locked device matching prefix: (reset, failed) addresses."""
  done, failed = [], []
  for lf in ctx.locks(prefix):
    dev = PCIDevice(ctx.host, lf.bus)
    try:
      dev.reset()
      done.append(lf.bus)
    except OSCallError as e:
      if e.errno in (errno.EACCES, errno.EPERM) and ctx.use_sudo:
        # lf.bus is a validated PCI address: the path holds no shell or path syntax; tee gets an argument list
        path = f"{ctx.host.config.sysfs_root}/bus/pci/devices/{lf.bus}/reset"
        if ctx.run(["tee", path], root=True, stdin=b"1") == 0:
          done.append(lf.bus)
          continue
      ctx.report.error(f"reset of {lf.bus} failed: {e}")
      failed.append(lf.bus)
    except DeviceError as e:
      ctx.report.error(f"reset of {lf.bus} failed: {e}")
      failed.append(lf.bus)
    else: ctx.report.say(f"reset {lf.bus}")
  return done, failed


def reset(ctx: Context, prefix: str = "") -> int:
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


def pids(ctx: Context, prefix: str = "") -> int:
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
  """SIGKILL pid if it still holds lf's lock: ("killed" | "gone" | "denied" | "failed", why).

  The process is pinned with a pidfd first, then checked again through procfs: a pid that was reused after the
  scan names another process, which fails the check and is never signalled."""
  target = lock_target(ctx.host, lf.path)
  if target is None: return "gone", "the lock file is gone"
  try: proc = ctx.host.open_process(pid)
  except OSCallError as e:
    return ("gone", "") if e.errno == errno.ESRCH else ("failed", str(e))
  try:
    if holds(ctx.host, pid, *target) is not True: return "gone", "no longer holds the lock"
    proc.signal(signal.SIGKILL)
    return "killed", ""
  except OSCallError as e:
    if e.errno == errno.ESRCH: return "gone", ""
    if e.errno == errno.EPERM: return "denied", os.strerror(e.errno)
    return "failed", str(e)
  finally: proc.close()


def _kill_as_root(ctx: Context, lf) -> int:
  """Run kill_pids for this one device as root (sudo): root may read every process's fds, so it kills exactly
  the holders this user could not check. The same hcq-smi, with this user's lock/sysfs/proc roots."""
  cfg = ctx.host.config
  argv = ["env", f"HCQ_LOCK_DIR={cfg.lock_dir}", f"HCQ_PROC_ROOT={cfg.proc_root}", f"HCQ_SYSFS_ROOT={cfg.sysfs_root}",
          sys.executable, "-m", "hcq.smi", ctx.backend.name, "kill_pids", "--sudoless", "--pci_bus", lf.bus]
  return ctx.run(argv, root=True)


def _kill_device(ctx: Context, lf, killed: list, failed: dict, sleep) -> list[int]:
  """Kill the holders of one lock file, round after round; returns the pids that still hold it."""
  need_root: dict[int, str] = {}
  for _ in range(KILL_ROUNDS):
    found = classify_holders(ctx.host, lf.path)
    for pid in found.unverified:
      need_root.setdefault(pid, "its file descriptors cannot be read by this user, so it cannot be checked that it "
                                "holds the lock; not signalled")
    todo = [p for p in found.verified if p != os.getpid() and p not in failed and p not in need_root]
    if not todo: break
    for pid in todo:
      name = process_name(ctx.host, pid)
      outcome, why = _kill(ctx, pid, lf)
      if outcome == "killed":
        if pid not in (k["pid"] for k in killed):
          killed.append({"pid": pid, "name": name, "bus": lf.bus})
          ctx.report.say(f"killed {pid} ({name}) holding {lf.path}")
      elif outcome == "denied": need_root[pid] = why
      elif outcome == "failed":
        failed[pid] = {"pid": pid, "name": name, "bus": lf.bus, "reason": why}
        ctx.report.error(f"cannot kill {pid} ({name}) holding {lf.path}: {why}")
    sleep(KILL_PAUSE_S)
  still = set(find_holders(ctx.host, lf.path))
  need_root = {p: why for p, why in need_root.items() if p in still}
  if need_root and ctx.use_sudo:
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


def kill_pids(ctx: Context, prefix: str = "", sleep=None) -> int:
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
