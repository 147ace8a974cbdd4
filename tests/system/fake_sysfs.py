"""A fake sysfs tree in a temporary folder, laid out like the kernel's (Documentation/ABI/testing/sysfs-bus-pci),
for tests that point Config.sysfs_root at it. Shared with tests/smi (its conftest puts this folder on sys.path)."""
from __future__ import annotations

import os
import pathlib


def add_pci_function(root, addr: str, vendor: int, device: int, cls: int, revision: int = 0, driver: str | None = None,
                     config: bytes | None = None, bars: dict[int, tuple[int, int, int]] | None = None,
                     with_reset: bool = True, extra: dict[str, str] | None = None) -> pathlib.Path:
  """Create <root>/bus/pci/devices/<addr>/ with the usual attributes. bars: {index: (start, size, flags)}; a
  memory BAR also gets a resourceN file of its size (sparse) so that it can be mmapped."""
  root = pathlib.Path(root)
  d = root / "bus/pci/devices" / addr
  d.mkdir(parents=True)
  for name, value in (("vendor", f"{vendor:#06x}"), ("device", f"{device:#06x}"), ("class", f"{cls:#08x}"),
                      ("revision", f"{revision:#04x}"), ("subsystem_vendor", f"{vendor:#06x}"),
                      ("subsystem_device", "0x0000"), ("enable", "0"), ("power_state", "D0")):
    (d / name).write_text(value + "\n")
  if config is None:
    config = bytearray(256)
    config[0:2] = vendor.to_bytes(2, "little")
    config[2:4] = device.to_bytes(2, "little")
    config[8] = revision
    config[9:12] = cls.to_bytes(3, "little")
  (d / "config").write_bytes(bytes(config))
  lines = []
  for i in range(13):
    start, size, flags = (bars or {}).get(i, (0, 0, 0))
    end = start + size - 1 if size else 0
    lines.append(f"0x{start:016x} 0x{end:016x} 0x{flags:016x}")
    if size and flags & 0x200 and i < 6:
      with open(d / f"resource{i}", "wb") as f: f.truncate(size)
  (d / "resource").write_text("\n".join(lines) + "\n")
  if with_reset: (d / "reset").write_text("")
  for name, value in (extra or {}).items():
    p = d / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(value)
  if driver is not None:
    drv = add_driver(root, driver)
    os.symlink(os.path.relpath(drv, d), d / "driver")
  return d


def add_driver(root, name: str) -> pathlib.Path:
  drv = pathlib.Path(root) / "bus/pci/drivers" / name
  drv.mkdir(parents=True, exist_ok=True)
  for f in ("bind", "unbind"):
    if not (drv / f).exists(): (drv / f).write_text("")
  return drv


def add_module(root, name: str) -> pathlib.Path:
  m = pathlib.Path(root) / "module" / name
  m.mkdir(parents=True, exist_ok=True)
  return m
