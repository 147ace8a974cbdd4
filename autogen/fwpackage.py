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
  fetch`). <cache>/firmware is then a link to the unpacked lib/firmware, where config.py looks when HCQ_FIRMWARE_DIR
  is not set (config.FETCHED_FIRMWARE_DIR). Raises sources.SourceError naming the package when it cannot be fetched.
  progress: sources.unpack's."""
  root = sources.unpack(PACKAGE, cache, log, progress)
  _link(os.path.join(cache, "firmware"), os.path.relpath(os.path.join(root, "lib", "firmware"), cache))
  return os.path.join(root, "lib", "firmware", "amdgpu")


def _link(link: str, target: str) -> None:
  """link -> target (relative), replaced atomically when it points elsewhere; anything at link that is not a
  symbolic link is left alone (a folder someone put there is theirs)."""
  try:
    if os.readlink(link) == target: return
  except FileNotFoundError: pass
  except OSError: return        # not a symbolic link
  tmp = f"{link}.{os.getpid()}.tmp"
  if os.path.lexists(tmp): os.unlink(tmp)
  os.symlink(target, tmp)
  os.replace(tmp, link)

