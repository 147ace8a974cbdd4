"""`hcq selfcheck`: a short check that the install works: config, the OS interface on this machine."""
from __future__ import annotations

import struct


def run(args) -> int:
  from .. import __version__
  from ..config import from_env
  from ..drivers.system import LinuxOS
  cfg = from_env()
  osi = LinuxOS(cfg)
  checks = []
  addr = osi.alloc_anon(1 << 16)
  try:
    view = osi.memview(addr, 1 << 16)
    view[:8] = struct.pack("<Q", 0x1234_5678_9ABC_DEF0)
    checks.append(("anonymous memory", struct.unpack("<Q", bytes(view[:8]))[0] == 0x1234_5678_9ABC_DEF0))
  finally:
    osi.free_anon(addr, 1 << 16)
  ev = osi.eventfd(0)
  try:
    ev.signal(3)
    checks.append(("eventfd", ev.wait_value() == 3))
  finally:
    ev.close()
  osi.memory_barrier()
  checks.append(("memory barrier", True))
  print(f"hcq {__version__}: sysfs={cfg.sysfs_root} proc={cfg.proc_root} locks={cfg.lock_dir}")
  for name, ok in checks: print(f"  {'ok  ' if ok else 'FAIL'} {name}")
  return 0 if all(ok for _, ok in checks) else 1


def register(sub) -> None:
  p = sub.add_parser("selfcheck", help="check that hcq is installed and can use this machine's OS interface")
  p.set_defaults(func=run)
