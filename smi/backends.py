"""What hcq-smi knows about each backend: lock-file kind, PCI vendor, kernel modules, how to load the driver."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Backend:
  name: str                     # command-line name
  lock_kind: str                # lock files <lock dir>/<lock_kind>_<pcibus>.lock (drivers/system/locks.py)
  vendor: int                   # PCI vendor id
  modules: tuple[str, ...]      # removed by rmmod, in this order (dependants first)
  load: tuple[str, ...]         # insmod's command that loads the kernel driver again
  load_needs_root: bool         # run `load` through sudo unless root or --sudoless
  kfd_driver: str | None = None  # kernel driver whose devices expose utilisation in sysfs (top)


BACKENDS = {
  # amdgpu: one module. The AM driver (hcq's own) takes am_<bus>.lock.
  "amd": Backend("amd", "am", 0x1002, ("amdgpu",), ("modprobe", "amdgpu"), True, kfd_driver="amdgpu"),
  # nvidia: dependants first (nvidia_drm uses nvidia_modeset uses nvidia; nvidia_uvm uses nvidia). Never ast (the
  # BMC's display). nvidia-smi loads the driver itself through nvidia-modprobe (setuid), so no sudo.
  "nv": Backend("nv", "nv", 0x10de, ("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"), ("nvidia-smi",), False),
  # Broadcom NetXtreme-E: the RoCE driver sits on the Ethernet driver.
  "bnxt": Backend("bnxt", "bnxt", 0x14e4, ("bnxt_re", "bnxt_en"), ("modprobe", "bnxt_en"), True),
}

# `list` shows every function of these vendors (AMD, NVIDIA, Broadcom)
LIST_VENDORS = {b.vendor for b in BACKENDS.values()}


def backend(name: str) -> Backend:
  key = name.lower()
  if key not in BACKENDS: raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
  return BACKENDS[key]
