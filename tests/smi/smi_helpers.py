"""Running hcq-smi as a real command, with fake trees and fake tools, and reading lspci for comparison."""
from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[2]


def smi_env(sysfs=None, lock_dir=None, path_dir=None, proc=None) -> dict:
  env = dict(os.environ)
  for name, value in (("HCQ_SYSFS_ROOT", sysfs), ("HCQ_LOCK_DIR", lock_dir), ("HCQ_PROC_ROOT", proc)):
    if value is not None: env[name] = str(value)
    else: env.pop(name, None)
  if path_dir is not None: env["PATH"] = f"{path_dir}:{env.get('PATH', '/usr/bin:/bin')}"
  return env


def run_smi(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
  """`hcq-smi ARGS` as a separate process (python -m hcq.smi, the console script's target)."""
  return subprocess.run([sys.executable, "-m", "hcq.smi", *map(str, args)], capture_output=True, text=True,
                        env=env, timeout=timeout)


def run_smi_json(*args, env=None):
  res = run_smi(*args, "--json", env=env)
  return res, json.loads(res.stdout)


def fake_tool(bin_dir, name: str, log, exit_code: int = 0) -> None:
  """An executable `name` that appends its argv (as one JSON list a line) to log and exits exit_code."""
  bin_dir = pathlib.Path(bin_dir)
  bin_dir.mkdir(parents=True, exist_ok=True)
  script = bin_dir / name
  script.write_text(textwrap.dedent(f"""\
    #!/bin/sh
    printf '%s' '["{name}"' >> '{log}'
    for a in "$@"; do printf ', "%s"' "$a" >> '{log}'; done
    printf ']\\n' >> '{log}'
    exit {exit_code}
    """))
  script.chmod(0o755)


def read_log(log) -> list[list[str]]:
  p = pathlib.Path(log)
  return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
if sys.argv[2] == "lock": fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("ready", flush=True)
time.sleep(600)
"""


def spawn_holder(lock_path, lock: bool = True) -> subprocess.Popen:
  """A child process that opens lock_path and (lock=True) holds flock(LOCK_EX) on it; returns once it is ready."""
  p = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_path), "lock" if lock else "open"],
                       stdout=subprocess.PIPE, text=True)
  assert p.stdout.readline().strip() == "ready"
  return p


def spawn_sleeper() -> subprocess.Popen:
  return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def lspci_records(sysfs_root=None, numeric=True) -> dict[str, dict]:
  """{slot: {field: value}} from `lspci -D -vmm -k` (machine-readable; -n for numbers), optionally over a sysfs tree."""
  argv = ["lspci", "-D", "-vmm", "-k"] + (["-n"] if numeric else [])
  if sysfs_root is not None: argv += ["-A", "linux-sysfs", "-O", f"sysfs.path={sysfs_root}/bus/pci"]
  out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
  records = {}
  for block in out.strip().split("\n\n"):
    if not block.strip(): continue
    rec = dict(line.split(":\t", 1) for line in block.splitlines() if ":\t" in line)
    records[rec["Slot"]] = rec
  return records


def as_nobody(fn) -> int:
  """Run fn() in a forked child that dropped to uid/gid nobody (65534); returns the child's exit code (fn's return
  value; 98 when it returned no exit code, 99 when it raised: the traceback goes to stderr)."""
  pid = os.fork()
  if pid == 0:
    code = 99
    try:
      os.setgid(65534)
      os.setuid(65534)
      ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self belongs to us again
      code = fn()
    except BaseException:  # report anything to the parent through the exit code
      import traceback
      traceback.print_exc()
    finally: os._exit(code if isinstance(code, int) and 0 <= code < 256 else 98)
  _, status = os.waitpid(pid, 0)
  return os.waitstatus_to_exitcode(status)


def smi_in_child(argv, env: dict, out_path, drop_env=()):
  """A function for as_nobody: hcq-smi ARGV in this process with env applied, its output into out_path (a file
  nobody may write; stderr stays where it was). Load hcq.smi's modules before forking: nobody may not read them."""
  def run():
    from hcq.smi import main
    os.environ.update({k: str(v) for k, v in env.items()})
    for k in drop_env: os.environ.pop(k, None)
    fd = os.open(out_path, os.O_WRONLY | os.O_TRUNC)
    sys.stdout = os.fdopen(fd, "w")  # pytest's capture replaced it in this (forked) process
    try: return main(argv)
    finally: sys.stdout.flush()
  return run
