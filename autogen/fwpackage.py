"""AMD's firmware as Linux loads it, from Debian's firmware-amd-graphics package: pinned, fetched once, cached.

The package is in bookworm's non-free-firmware component, which a machine's apt sources often leave out: it is
fetched through a private sources list built from the machine's own Debian entry (sources.private_apt_options).
Its 530 files under lib/firmware/amdgpu are what the firmware reader (drivers/amd/am/firmware.py) is proven on.
"""
from __future__ import annotations

import os

from . import sources

PACKAGE = {
  "name": "firmware-amd-graphics",
  "version": "20230210-5",
  "arch": "all",
  "suite": "bookworm",
  "component": "non-free-firmware",
  "sha256": "02ad4ee1facea4eef0902880783a6922a1fb790385d2bf67987623f7f2ae5a16",
  "members": ["lib/firmware/amdgpu"],
}
FILE_COUNT = 530   # files under lib/firmware/amdgpu in this version


def firmware_dir(cache: str, log=print, progress=None) -> str:
  """The package's lib/firmware/amdgpu, unpacked under cache (Config.autogen_cache); fetched on first use (`hcq fw
  fetch`). Raises sources.SourceError naming the package when it cannot be fetched. progress: sources.unpack's."""
  return os.path.join(sources.unpack(PACKAGE, cache, log, progress), "lib", "firmware", "amdgpu")


def fetched_dir(cache: str) -> str | None:
  """The package's firmware folder in cache when an earlier fetch unpacked it there (its stamp is present and
  current), else None. Fetches nothing."""
  dest = sources.unpack_dir(PACKAGE, cache)
  stamp = os.path.join(dest, ".hcq-unpacked")
  try:
    with open(stamp) as f:
      if f.read() != sources.stamp_text(PACKAGE): return None
  except OSError: return None
  folder = os.path.join(dest, "lib", "firmware", "amdgpu")
  return folder if os.path.isdir(folder) else None
