"""Which generated ABI a running nvidia.ko speaks: the driver series (the release's major number) picks the modules
`hcq.autogen.nv.rm_<series>` and `hcq.autogen.nv.uvm_<series>`, generated from NVIDIA's own headers at one tag of
open-gpu-kernel-modules each (manifest.json: packages ogkm<series>) and checked against gcc (tests/autogen).

What differs between the series, as those headers have it (the reason a driver must know its series before it sends
anything but the version query):
  NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS   776 bytes at 550, 1032 from 570 (driverBranch[256], ctrl0000system.h)
  NVA06F_CTRL_GPFIFO_SCHEDULE_PARAMS               2 bytes to 570, 3 from 575 (bSkipEnable, ctrla06fgpfifo.h)
  NV_CHANNEL_ALLOC_PARAMS                          360 bytes at 550, 368 from 570 (tpcConfigID, alloc_channel.h)
  NVOS46_PARAMETERS                                56 bytes to 575, 64 from 580 (flags2, kindOverride; nvos.h)
  NV_VASPACE_ALLOCATION_PARAMETERS                 48 bytes to 575, 56 from 580 (pasid; cl90f1.h)
  UVM_FREE_PARAMS                                  24 bytes to 580, 16 at 590 (no length; uvm_ioctl.h)
RM refuses a control or alloc whose params size is not its own (resControlLookup in rs_resource.c:
NV_ERR_INVALID_PARAM_STRUCT), so a wrong series fails on its first call, or worse, misreads a reply.

The version is learnt before any RM call whose size depends on it: /proc/driver/nvidia/version (the line
"NVRM version: ... Kernel Module ... 580.105.08 ..."), else the NV_ESC_CHECK_VERSION_STR escape (nv-ioctl-numbers.h;
nv_ioctl_rm_api_version_t, whose size is the same in every series here).
"""
from __future__ import annotations

import importlib
import re

from hcq.errors import HCQError

SERIES = ("550", "570", "575", "580", "590")
# the tag each series' modules were generated from (manifest.json ogkm<series>)
TAGS = {"550": "550.163.01", "570": "570.211.01", "575": "575.64.05", "580": "580.105.08", "590": "590.48.01"}


class UnsupportedDriver(HCQError):
  """A driver release whose ABI hcq has no generated, checked layouts for."""


def parse_version(text: str) -> tuple:
  """'580.105.08' -> (580, 105, 8): the first MAJOR.MINOR[.PATCH] of a version string."""
  m = re.search(r"(\d{3,})\.(\d+)(?:\.(\d+))?", text if isinstance(text, str) else "")
  if not m: raise UnsupportedDriver(f"NVIDIA driver version {text!r} holds no MAJOR.MINOR[.PATCH]")
  return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def proc_version(text: str) -> str:
  """The driver version in /proc/driver/nvidia/version's text ("NVRM version: NVIDIA UNIX Open Kernel Module for
  x86_64  580.105.08  Release Build ..."), e.g. '580.105.08'."""
  for line in text.splitlines():
    if line.startswith("NVRM version:"):
      m = re.search(r"\s(\d{3,}\.\d+(?:\.\d+)?)(?:\s|$)", line)
      if m: return m.group(1)
  raise UnsupportedDriver(f"no driver version in the NVRM version line of {text[:200]!r}")


def series_of(version: str) -> str:
  """The series ('580') of a driver version ('580.105.08'); a release of another series is refused, naming it: an
  older one, a newer one (its structs may have changed: 595 is not checked here) or one in between."""
  major = parse_version(version)[0]
  s = str(major)
  if s in SERIES: return s
  when = ("newer than" if major > int(SERIES[-1]) else "older than" if major < int(SERIES[0]) else "between")
  raise UnsupportedDriver(f"NVIDIA driver {version}: series {major} is {when} the ones hcq has checked layouts for "
                          f"({', '.join(SERIES)}; hcq.autogen.nv.series): refusing to guess its RM structs")


def rm(series: str):
  """The generated RM module of a series (hcq.autogen.nv.rm_<series>)."""
  if series not in SERIES: raise UnsupportedDriver(f"no RM layouts for series {series!r} ({', '.join(SERIES)})")
  return importlib.import_module(f"hcq.autogen.nv.rm_{series}")


def uvm(series: str):
  """The generated UVM module of a series (hcq.autogen.nv.uvm_<series>)."""
  if series not in SERIES: raise UnsupportedDriver(f"no UVM layouts for series {series!r} ({', '.join(SERIES)})")
  return importlib.import_module(f"hcq.autogen.nv.uvm_{series}")


def drf(module, field: str, value: str) -> int:
  """NVIDIA's DRF_DEF(field, _value): the value `<field>_<value>` placed at the field's `hi:lo` range (both from the
  generated module: its RANGES and its constant), e.g. drf(m, "NVOS46_FLAGS_PAGE_SIZE", "4KB") == 1 << 8."""
  hi, lo = module.RANGES[field]
  v = getattr(module, f"{field}_{value}")
  if not 0 <= v < (1 << (hi - lo + 1)): raise ValueError(f"{field}_{value} = {v:#x} does not fit {field} {hi}:{lo}")
  return v << lo


def drf_get(module, field: str, word: int) -> int:
  """NVIDIA's DRF_VAL: the `hi:lo` field `field` of `word`."""
  hi, lo = module.RANGES[field]
  return (word >> lo) & ((1 << (hi - lo + 1)) - 1)
