"""What an AM process publishes for tools while it holds a GPU: <lock dir>/am-state_<bus>.json, next to the lock
am_<bus>.lock (drivers/system/locks.py), written through the OS interface after the SMU block's hw_init and removed
at close, before the lock is given back.

hcq-smi is another process: it cannot ask the holder where the SMU's driver table is (the SMU has no message that
answers it), so the holder says it here. The file is input from another process in a world-writable folder: `parse`
checks every field's type and range and that it names the device it was found for; the reader (drivers/amd/am/
monitor.py) checks the rest against the hardware (the table inside VRAM, its MC address against the framebuffer base
the MMHUB reports) and that the pid is the one the kernel shows holding the lock and the file's owner that process's
user or root (smi/listing.py; the lock dir is world-writable: any user may have left a file there).

    {"format": "hcq-am-state/1", "pid": 1234, "bus": "0000:03:00.0",
     "smu": {"table_offset": 8192, "table_mc": 549755822080, "table_size": 16384, "firmware": 5130752,
             "driver_if": 50, "mp1": [13, 0, 0]}}
"""
from __future__ import annotations

import dataclasses
import json

from ....errors import DeviceError, HCQError
from ...system.locks import state_name

FORMAT = "hcq-am-state/1"
KIND = "am"
PID_MAX = 1 << 22      # include/linux/threads.h PID_MAX_LIMIT (64-bit)
U64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class AMState:
  pid: int
  bus: str
  table_offset: int      # the SMU driver table (SetDriverDramAddr): its VRAM offset, MC address and size
  table_mc: int
  table_size: int
  firmware: int          # GetSmuVersion's answer
  driver_if: int         # GetDriverIfVersion's answer
  mp1: tuple[int, int, int]

  def to_bytes(self) -> bytes:
    return json.dumps({"format": FORMAT, "pid": self.pid, "bus": self.bus,
                       "smu": {"table_offset": self.table_offset, "table_mc": self.table_mc,
                               "table_size": self.table_size, "firmware": self.firmware,
                               "driver_if": self.driver_if, "mp1": list(self.mp1)}}, sort_keys=True).encode()


def _int(doc: dict, key: str, where: str, lo: int = 0, hi: int = U64) -> int:
  v = doc.get(key)
  # bool is an int to Python, never to this format
  if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
    raise DeviceError(f"{where}: {key} is {v!r}, not an integer in {lo}..{hi:#x}")
  return v


def parse(data: bytes, bus: str, where: str) -> AMState:
  """The state of the GPU at bus from the file's bytes; anything malformed is a DeviceError naming `where`."""
  # RecursionError: arrays nested deeper than the interpreter's recursion limit (a 4 KiB file holds 2048 levels)
  try: doc = json.loads(data.decode("utf-8"))
  except (UnicodeDecodeError, ValueError, RecursionError) as e:
    raise DeviceError(f"{where}: not a JSON document ({e})") from None
  if not isinstance(doc, dict) or doc.get("format") != FORMAT:
    raise DeviceError(f"{where}: not an AM state file (format {doc.get('format') if isinstance(doc, dict) else None!r}, "
                      f"expected {FORMAT!r})")
  if doc.get("bus") != bus: raise DeviceError(f"{where}: names device {doc.get('bus')!r}, found for {bus}")
  smu = doc.get("smu")
  if not isinstance(smu, dict): raise DeviceError(f"{where}: no smu object")
  mp1 = smu.get("mp1")
  if not (isinstance(mp1, list) and len(mp1) == 3 and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 256
                                                          for x in mp1)):
    raise DeviceError(f"{where}: smu.mp1 is {mp1!r}, not an IP version [major, minor, revision]")
  return AMState(_int(doc, "pid", where, 1, PID_MAX), bus, _int(smu, "table_offset", f"{where}: smu", 0),
                 _int(smu, "table_mc", f"{where}: smu", 0), _int(smu, "table_size", f"{where}: smu", 1, 1 << 20),
                 _int(smu, "firmware", f"{where}: smu", 0, 0xFFFFFFFF), _int(smu, "driver_if", f"{where}: smu", 0, 0xFFFFFFFF),
                 tuple(mp1))


def publish(os, state: AMState) -> str | None:
  """Write the state file; None, or why it could not be written (tools then cannot show the SMU's metrics, the
  driver works on: the file is for them alone)."""
  try: os.write_device_state(KIND, state.bus, state.to_bytes())
  except HCQError as e: return str(e)
  return None


def withdraw(os, bus: str) -> None:
  try: os.remove_device_state(KIND, bus)
  except HCQError: pass       # gone already, or never written: the next holder's publish replaces it


def read(os, bus: str, owners=None) -> AMState | None:
  """The published state of the GPU at bus (None: none published), validated as far as the file alone allows;
  owners: the users whose file is taken (the holder's and root: the lock dir is world-writable)."""
  where = f"{os.config.lock_dir}/{state_name(KIND, bus)}"
  data = os.read_device_state(KIND, bus, owners)
  return None if data is None else parse(data, bus, where)
