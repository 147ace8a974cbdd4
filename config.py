"""hcq's options. This module is the ONE place that reads environment variables.

Every other module receives its options explicitly (a Config, or one of its fields) from its caller.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import os
import re
from typing import Mapping

from .errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Config:
  """Every option hcq reads from the environment, read once (from_env) and passed explicitly from there on."""
  # device spec used by hcq.open() without an argument, e.g. "MOCK+AMD" ("" = autodetect)
  dev: str = ""
  # roots of the kernel's pseudo file systems; tests point them at fake trees
  sysfs_root: str = "/sys"
  proc_root: str = "/proc"
  dev_root: str = "/dev"
  # folder holding the per-device lock files {am,nv,bnxt}_<pcibus>.lock: the system temp dir /tmp, the same for every
  # user and under sudo (not tempfile.gettempdir(), which follows each user's TMPDIR: two users with different TMPDIRs
  # would each get a lock on the same device)
  lock_dir: str = "/tmp"
  # default timeout of every wait, in seconds
  timeout_s: float = 10.0
  # hcq's cache folder (compiled C kernels in <cache_dir>/c): HCQ_CACHE_DIR, else $XDG_CACHE_HOME/hcq, else
  # ~/.cache/hcq. It must be this user's alone (safefiles.private_dir: a cached shared object is loaded and run), so
  # never a shared temp folder that another user could create first
  cache_dir: str = os.path.join(os.path.expanduser("~"), ".cache", "hcq")
  # where the autogen generator caches downloaded Debian packages: HCQ_AUTOGEN_CACHE, else <cache_dir>/autogen
  autogen_cache: str = os.path.join(os.path.expanduser("~"), ".cache", "hcq", "autogen")
  # local git mirrors the generator may read pinned commits from (manifest packages with "git": NVIDIA's
  # open-gpu-kernel-modules): HCQ_AUTOGEN_GIT, a ':'-separated list of git directories ("" = none; the modules of those
  # packages are then regenerated only from headers already unpacked in autogen_cache, and skipped otherwise)
  autogen_git: str = ""
  # where AMD firmware files are read from (as the kernel's amdgpu loads them): HCQ_FIRMWARE_DIR, else
  # /lib/firmware/amdgpu (Debian's firmware-amd-graphics package puts them there), else what `hcq fw fetch` put in
  # the cache (from_env: default_firmware_dir)
  firmware_dir: str = "/lib/firmware/amdgpu"
  # mock device behaviour
  mock_threaded: bool = False
  mock_instruction_budget: int = 50_000_000
  # the GPU the mock AMD device poses as (HCQ_MOCK_GPU, one of MOCK_GPUS): its KFD topology, IP versions and ISA
  mock_gpu: str = "gfx1100"
  # MOCKPCI+AMD presents each mock Navi 31 as an SR-IOV virtual function of a GPU the host already booted
  # (HCQ_MOCK_AM_VF=1; mockgpu/amd/am/virt.py): the AM driver boots it the VF way (drivers/amd/am/virt.py). Off: a
  # bare-metal function the driver boots with its own firmware
  mock_am_vf: bool = False
  # how the AM driver gives the GPU system memory (HCQ_AM_DMA; drivers/system/vfio.py): "auto" (the default) decides
  # from the function's IOMMU group (none or identity: pagemap physical addresses; DMA/DMA-FQ: VFIO IOVAs), "pagemap"
  # or "vfio" force a path
  am_dma: str = "auto"
  # the IOMMU of MOCKPCI+AMD's mock Navi 31s (HCQ_MOCK_AM_IOMMU): "" none, "identity" (passthrough) or "dma"
  # (translated: only VFIO's IOVA mappings reach host memory; the function is bound to vfio-pci)
  mock_am_iommu: str = ""
  # mock BNXT NIC: its UDP "PHY" port on 127.0.0.1 (0 = any), the peer NIC's port (0 = none), a pcap of its wire,
  # wire faults ("drop=3,corrupt=1,reorder=2,p_drop=0.1"), its MAC (12 hex digits; "" = 02:00:00:00:00:<index+1>)
  bnxt_mock_port: int = 0
  bnxt_mock_peer: int = 0
  bnxt_mock_pcap: str = ""
  bnxt_mock_faults: str = ""
  bnxt_mock_mac: str = ""
  # mock NV GPU: which GPU MOCK+NV models ("H200": GH100 with driver 580, the default; "AD102": an Ada RTX 4090;
  # "B200": a Blackwell GB100)
  nv_mock_gpu: str = "H200"
  # the nvidia.ko release the mock NV GPU's RM claims (HCQ_NV_MOCK_DRIVER): a supported series, "550", "570", "575",
  # "580" (the default) or "590"; its control and alloc params have that series' sizes (hcq.autogen.nv.series)
  nv_mock_driver: str = "580"
  # microseconds between two polls of a signal over USB (USB+AMD: each poll is a USB round trip of ~100 us that
  # holds the bus; waiting between polls leaves it to copies and launches at a latency cost of at most this much).
  # 0 = spin (poll back to back, as the reference lineage did before AMD_USB_POLL_US). Default 100: about one round trip
  amd_usb_poll_us: int = 100
  # mock USB bridge faults (mockgpu/usb): "stall=3+5,timeout=7,unplug=40,transport=2-30,ur=4,crs=1,ca=9"; see
  # parse_usb_faults for what each counts
  usb_mock_faults: str = ""
  debug: int = 0
  # HCQ_TRACE: a file the devices of this process write their timeline to, in the Chrome trace event format
  # (drivers/hcq/trace.py); "" = none
  trace: str = ""
  # folders searched for the commands tools run (hcq-smi: modprobe, sudo, nvidia-smi), PATH's format
  exec_path: str = os.defpath

  def __post_init__(self):
    for field, check in CHECKS.items():
      try: check(getattr(self, field))
      except ValueError as e: raise ConfigError(f"Config.{field}: {e}") from None

  def replace(self, **kw) -> "Config":
    return dataclasses.replace(self, **kw)


# ---- values with a grammar: each check raises ValueError saying what is wrong with the value
FAULT_SETS = ("drop", "corrupt", "reorder")     # frame numbers, counted from 1
FAULT_RATES = ("p_drop", "p_corrupt")           # probabilities per frame


def parse_faults(spec: str) -> dict:
  """A mock wire fault spec, e.g. "drop=3,corrupt=1+4,reorder=2,p_drop=0.01,seed=7" -> {"drop": frozenset({3}),
  "corrupt": frozenset({1, 4}), ...}: drop/corrupt/reorder take frame numbers (from 1) joined by '+', p_drop and
  p_corrupt a probability 0..1, seed an integer. Raises ValueError naming the item that is wrong."""
  out: dict = {}
  for item in spec.split(",") if spec.strip() else []:
    key, eq, value = (part.strip() for part in item.partition("="))
    if not eq: raise ValueError(f"fault spec {spec!r}: {item.strip()!r} is not key=value")
    if key in out: raise ValueError(f"fault spec {spec!r}: {key} is given twice")
    if key in FAULT_SETS:
      frames = value.split("+")
      if not all(f.isdigit() and int(f) > 0 for f in frames):
        raise ValueError(f"fault spec {spec!r}: {key}={value!r} is not frame numbers (1, 2, ...) joined by '+'")
      out[key] = frozenset(int(f) for f in frames)
    elif key in FAULT_RATES:
      try: p = float(value)
      except ValueError: p = math.nan
      if not 0.0 <= p <= 1.0: raise ValueError(f"fault spec {spec!r}: {key}={value!r} is not a probability 0..1")
      out[key] = p
    elif key == "seed":
      try: out[key] = int(value, 0)
      except ValueError: raise ValueError(f"fault spec {spec!r}: seed={value!r} is not an integer") from None
    else:
      raise ValueError(f"fault spec {spec!r}: unknown fault {key!r} ({', '.join(FAULT_SETS + FAULT_RATES)}, seed)")
  return out


USB_TRANSFER_FAULTS = ("stall", "timeout", "unplug", "late")   # USB transfers, counted from 1
USB_TLP_FAULTS = ("transport", "ur", "crs", "ca")         # TLP completions (0xF0 IN), counted from 1


class NumberRanges:
  """A set of positive integers kept as sorted, merged [lo, hi] ranges: `n in ranges` is a binary search, and its
  size is the number of ranges written, never the count of numbers in them (transport=1-1000000000000 is one range,
  not 10^12 numbers)."""
  __slots__ = ("_los", "_his")

  def __init__(self, ranges=()):
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
      if merged and lo <= merged[-1][1] + 1: merged[-1][1] = max(merged[-1][1], hi)
      else: merged.append([lo, hi])
    self._los = tuple(r[0] for r in merged)
    self._his = tuple(r[1] for r in merged)

  def __contains__(self, n) -> bool:
    i = bisect.bisect_right(self._los, n) - 1
    return i >= 0 and n <= self._his[i]

  def __bool__(self) -> bool: return bool(self._los)

  def __eq__(self, other) -> bool:
    if isinstance(other, NumberRanges): return (self._los, self._his) == (other._los, other._his)
    if isinstance(other, (set, frozenset)):
      count = sum(hi - lo + 1 for lo, hi in zip(self._los, self._his))
      return len(other) == count and all(n in self for n in other)
    return NotImplemented

  __hash__ = None

  def __repr__(self) -> str:
    return "NumberRanges(" + "+".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in zip(self._los, self._his)) + ")"


_FAULT_NUMBER = re.compile(r"[0-9]{1,18}", re.ASCII)    # ASCII digits, and far below 2^63


def parse_usb_faults(spec: str) -> dict:
  """A mock USB bridge fault spec -> {kind: NumberRanges}. Numbers are single (3), joined by '+' (3+5) or
  ranges (2-30). stall / timeout: that USB transfer (control or bulk, counted from 1 from the open) is answered with
  STALL / never completes (the host's timeout); late: that transfer is carried out but its status is lost (the host
  times out all the same); unplug: the bridge is gone from that transfer on. transport / ur /
  crs / ca: that TLP's completion reports a transport error (byte 7: the firmware failed to send it, retry) /
  unsupported request / config request retry status / completer abort. Raises ValueError naming the bad item.
  A range is kept as a range (NumberRanges): its size costs nothing, whatever its length."""
  out: dict = {}
  for item in spec.split(",") if spec.strip() else []:
    key, eq, value = (part.strip() for part in item.partition("="))
    if not eq: raise ValueError(f"USB fault spec {spec!r}: {item.strip()!r} is not key=value")
    if key not in USB_TRANSFER_FAULTS + USB_TLP_FAULTS:
      raise ValueError(f"USB fault spec {spec!r}: unknown fault {key!r} ({', '.join(USB_TRANSFER_FAULTS + USB_TLP_FAULTS)})")
    if key in out: raise ValueError(f"USB fault spec {spec!r}: {key} is given twice")
    ranges = []
    for part in value.split("+"):
      lo, dash, hi = part.partition("-")
      if not (_FAULT_NUMBER.fullmatch(lo) and int(lo) > 0 and
              (not dash or (_FAULT_NUMBER.fullmatch(hi) and int(hi) >= int(lo)))):
        raise ValueError(f"USB fault spec {spec!r}: {key}={value!r} is not numbers from 1 to 18 digits (3, 3+5, 2-30)")
      ranges.append((int(lo), int(hi if dash else lo)))
    out[key] = NumberRanges(ranges)
  return out


def check_usb_faults(value) -> None:
  if not isinstance(value, str): raise ValueError(f"{value!r} is not a USB fault spec")
  parse_usb_faults(value)


def check_poll_us(value) -> None:
  if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
    raise ValueError(f"{value!r} is not a poll interval in microseconds (0..1000000, 0 = spin)")


def check_udp_port(value) -> None:
  if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
    raise ValueError(f"{value!r} is not a UDP port (0..65535, 0 = any)")


def check_mac(value) -> None:
  if not isinstance(value, str) or (value and not re.fullmatch(r"[0-9a-fA-F]{12}", value)):
    raise ValueError(f"{value!r} is not a MAC address (12 hex digits, e.g. 020000000001)")


# the targets the mock AMD GPU can pose as: RDNA3 (Navi 31), RDNA4 (Navi 44), CDNA3 (MI300X, wave64)
MOCK_GPUS = ("gfx1100", "gfx1200", "gfx942")


def check_mock_gpu(value) -> None:
  if value not in MOCK_GPUS: raise ValueError(f"{value!r} is not a mock GPU target (one of {', '.join(MOCK_GPUS)})")


def check_nv_mock_gpu(value) -> None:
  if value not in ("H200", "AD102", "B200"): raise ValueError(f"{value!r} is not a mock NV GPU (H200, AD102 or B200)")


NV_MOCK_DRIVERS = ("550", "570", "575", "580", "590")


def check_nv_mock_driver(value) -> None:
  if value not in NV_MOCK_DRIVERS:
    raise ValueError(f"{value!r} is not an nvidia.ko series the mock models (one of {', '.join(NV_MOCK_DRIVERS)})")


def check_am_dma(value) -> None:
  if value not in ("auto", "pagemap", "vfio"): raise ValueError(f"{value!r} is not a DMA mode (auto, pagemap or vfio)")


def check_mock_am_iommu(value) -> None:
  if value not in ("", "identity", "dma"): raise ValueError(f"{value!r} is not a mock IOMMU mode ('', identity or dma)")


def check_faults(value) -> None:
  if not isinstance(value, str): raise ValueError(f"{value!r} is not a fault spec")
  parse_faults(value)


# Config fields whose values are checked whenever a Config is made, and the variable each comes from
CHECKS = {"bnxt_mock_port": check_udp_port, "bnxt_mock_peer": check_udp_port, "bnxt_mock_mac": check_mac,
          "bnxt_mock_faults": check_faults, "mock_gpu": check_mock_gpu, "nv_mock_gpu": check_nv_mock_gpu,
          "usb_mock_faults": check_usb_faults, "amd_usb_poll_us": check_poll_us}
CHECKS.update(am_dma=check_am_dma, mock_am_iommu=check_mock_am_iommu, nv_mock_driver=check_nv_mock_driver)
ENV_NAMES = {"bnxt_mock_port": "HCQ_BNXT_MOCK_PORT", "bnxt_mock_peer": "HCQ_BNXT_MOCK_PEER",
             "bnxt_mock_mac": "HCQ_BNXT_MOCK_MAC", "bnxt_mock_faults": "HCQ_BNXT_MOCK_FAULTS", "mock_gpu": "HCQ_MOCK_GPU",
             "nv_mock_gpu": "HCQ_NV_MOCK_GPU", "usb_mock_faults": "HCQ_USB_MOCK_FAULTS", "amd_usb_poll_us": "AMD_USB_POLL_US"}
ENV_NAMES.update(am_dma="HCQ_AM_DMA", mock_am_iommu="HCQ_MOCK_AM_IOMMU", nv_mock_driver="HCQ_NV_MOCK_DRIVER")


def _raw(env: Mapping[str, str], name: str) -> str | None:
  raw = env.get(name)
  return None if raw is None or raw.strip() == "" else raw


def _int(env: Mapping[str, str], name: str, default: int, lo: int = 0, hi: int | None = None) -> int:
  """An integer in [lo, hi] (decimal, or 0x/0o/0b prefixed); out of range is an error, never clamped."""
  raw = _raw(env, name)
  if raw is None: return default
  try: v = int(raw.strip(), 0)
  except ValueError: raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None
  if v < lo or (hi is not None and v > hi):
    want = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
    raise ConfigError(f"environment variable {name}={raw!r} is out of range (must be {want})")
  return v


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
  """A positive, finite number of seconds (0, negative, nan and inf are refused: a wait needs a real bound)."""
  raw = _raw(env, name)
  if raw is None: return default
  try: v = float(raw)
  except ValueError: raise ConfigError(f"environment variable {name}={raw!r} is not a number of seconds") from None
  if not (math.isfinite(v) and v > 0):
    raise ConfigError(f"environment variable {name}={raw!r} must be a positive, finite number of seconds")
  return v


def _xdg_cache(env: Mapping[str, str]) -> str:
  """$XDG_CACHE_HOME/hcq; "" when unset or relative (the XDG base directory spec says to ignore a relative one)."""
  xdg = env.get("XDG_CACHE_HOME", "")
  return os.path.join(xdg, "hcq") if os.path.isabs(xdg) else ""


SYSTEM_FIRMWARE_DIR = "/lib/firmware/amdgpu"
# where in the autogen cache `hcq fw fetch` leaves the firmware: a link to the unpacked package's lib/firmware
# (autogen/fwpackage.py firmware_dir)
FETCHED_FIRMWARE_DIR = os.path.join("firmware", "amdgpu")


def default_firmware_dir(autogen_cache: str) -> str:
  """The firmware folder when HCQ_FIRMWARE_DIR is not set: the machine's own (/lib/firmware/amdgpu, where Debian's
  firmware-amd-graphics puts it) when it is there, else the pinned package `hcq fw fetch` unpacked into the cache
  (autogen/fwpackage.py), else the machine's own all the same (the driver's error then names `hcq fw fetch`)."""
  if os.path.isdir(SYSTEM_FIRMWARE_DIR): return SYSTEM_FIRMWARE_DIR
  fetched = os.path.join(autogen_cache, FETCHED_FIRMWARE_DIR)
  return fetched if os.path.isdir(fetched) else SYSTEM_FIRMWARE_DIR


def from_env(env: Mapping[str, str] | None = None) -> Config:
  """Build a Config from the environment (os.environ unless another mapping is given)."""
  env = os.environ if env is None else env
  d = Config()
  cache_dir = env.get("HCQ_CACHE_DIR") or _xdg_cache(env) or d.cache_dir
  fields = dict(
    dev=env.get("HCQ_DEV", d.dev),
    sysfs_root=env.get("HCQ_SYSFS_ROOT") or d.sysfs_root,
    proc_root=env.get("HCQ_PROC_ROOT") or d.proc_root,
    dev_root=env.get("HCQ_DEV_ROOT") or d.dev_root,
    lock_dir=env.get("HCQ_LOCK_DIR") or d.lock_dir,
    timeout_s=_seconds(env, "HCQ_TIMEOUT", d.timeout_s),
    cache_dir=cache_dir,
    autogen_cache=env.get("HCQ_AUTOGEN_CACHE") or os.path.join(cache_dir, "autogen"),
    autogen_git=env.get("HCQ_AUTOGEN_GIT", d.autogen_git),
    firmware_dir=env.get("HCQ_FIRMWARE_DIR") or default_firmware_dir(env.get("HCQ_AUTOGEN_CACHE") or os.path.join(cache_dir, "autogen")),
    mock_threaded=bool(_int(env, "HCQ_MOCK_THREADED", 0, hi=1)),
    mock_instruction_budget=_int(env, "HCQ_MOCK_BUDGET", d.mock_instruction_budget, lo=1),
    mock_gpu=(_raw(env, "HCQ_MOCK_GPU") or d.mock_gpu).strip(),
    mock_am_vf=bool(_int(env, "HCQ_MOCK_AM_VF", 0, hi=1)),
    am_dma=(_raw(env, "HCQ_AM_DMA") or d.am_dma).strip(),
    mock_am_iommu=(env.get("HCQ_MOCK_AM_IOMMU") or "").strip(),
    bnxt_mock_port=_int(env, "HCQ_BNXT_MOCK_PORT", 0, hi=65535),
    bnxt_mock_peer=_int(env, "HCQ_BNXT_MOCK_PEER", 0, hi=65535),
    bnxt_mock_pcap=env.get("HCQ_BNXT_MOCK_PCAP", ""),
    bnxt_mock_faults=env.get("HCQ_BNXT_MOCK_FAULTS", ""),
    bnxt_mock_mac=env.get("HCQ_BNXT_MOCK_MAC", ""),
    nv_mock_gpu=(env.get("HCQ_NV_MOCK_GPU") or d.nv_mock_gpu).upper(),
    nv_mock_driver=(_raw(env, "HCQ_NV_MOCK_DRIVER") or d.nv_mock_driver).strip(),
    amd_usb_poll_us=_int(env, "AMD_USB_POLL_US", d.amd_usb_poll_us, hi=1_000_000),
    usb_mock_faults=env.get("HCQ_USB_MOCK_FAULTS", ""),
    debug=_int(env, "HCQ_DEBUG", 0),
    trace=env.get("HCQ_TRACE", ""),
    exec_path=env.get("PATH", d.exec_path),
  )
  for field, check in CHECKS.items():   # named by the variable the value came from
    try: check(fields[field])
    except ValueError as e: raise ConfigError(f"environment variable {ENV_NAMES[field]}: {e}") from None
  return Config(**fields)
