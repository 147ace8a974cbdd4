"""hcq-smi list and top: what PCI functions there are, who drives them, and (top) how busy they are.

Each function is read on its own: one that cannot be read (unreadable attributes, removed meanwhile) is shown
with its address and the error ("error" in JSON, null for the others), every other one as usual, and the exit
code is 1 (0 when every function could be read). Only a sysfs whose PCI device folder cannot be listed at all
fails the whole command."""
from __future__ import annotations

import json
import time

from ..drivers.system.pci import PCIDevice
from ..drivers.system.pciaddr import validate_prefix
from ..errors import DeviceError, HCQError
from .backends import LIST_VENDORS
from .holders import find_holders, process_name, process_uid
from .lockfiles import lock_for
from . import pciids
from .report import printable

EXIT_OK, EXIT_FAIL = 0, 1


def _holders(ctx, bus: str) -> list[dict]:
  out = []
  for lf in lock_for(ctx.host, bus):
    for pid in find_holders(ctx.host, lf.path):
      out.append({"pid": pid, "name": process_name(ctx.host, pid), "lock": lf.path, "kind": lf.kind})
  return out


def _pci_ids(ctx, vendors):
  try: return pciids.load(ctx.host, vendors)
  except HCQError as e:  # names are a nicety: list without them
    ctx.report.warn(f"PCI ID database unreadable, no names shown: {e}")
    return pciids.PciIds({}, {}, None)


def _function(ctx, d: PCIDevice, ids, all_vendors: bool) -> dict | None:
  """One function's entry (None: not a vendor `list` shows); what cannot be read ends it with "error"."""
  f = {"address": d.addr, "vendor": None, "device": None, "id": None, "class": None, "vendor_name": None,
       "device_name": None, "driver": None, "holders": [], "error": None}
  try:
    if not all_vendors and d.vendor not in LIST_VENDORS: return None
    f.update(vendor=f"{d.vendor:04x}", device=f"{d.device:04x}", id=f"{d.vendor:04x}:{d.device:04x}",
             vendor_name=ids.vendor_name(d.vendor), device_name=ids.device_name(d.vendor, d.device))
    f["class"] = f"{d.class_code:06x}"
    f["driver"] = d.driver
    f["holders"] = _holders(ctx, d.addr)
  except HCQError as e: f["error"] = str(e)
  return f


def functions(ctx, all_vendors: bool = False) -> list[dict]:
  ids = _pci_ids(ctx, None if all_vendors else LIST_VENDORS)
  out = [_function(ctx, d, ids, all_vendors) for d in PCIDevice.enumerate(ctx.host)]
  return [f for f in out if f is not None]


def _name(f: dict) -> str:
  vendor = f["vendor_name"] or f"Vendor {f['vendor']}"
  return f"{vendor} {f['device_name'] or 'Device ' + f['device']}"


def list_devices(ctx, all_vendors: bool = False, fmt: str | None = None, fields=None, loop: float | None = None,
                 rounds: int | None = None, sleep=None) -> int:
  """`list`: once, or (loop) every `loop` seconds, appending (rounds: how many, None = until interrupted)."""
  fmt = fmt or ("json" if ctx.report.as_json else "table")
  def one(n: int) -> int:
    funcs = functions(ctx, all_vendors)
    rc = EXIT_FAIL if any(f["error"] for f in funcs) else EXIT_OK
    if fmt == "table" and fields is None: _list_table(ctx, funcs, all_vendors)
    else: _emit(ctx, "list", funcs, {"command": "list", "exit": rc}, fmt, fields, n, loop is not None)
    return rc
  return _repeat(one, loop, rounds, sleep)


def _list_table(ctx, funcs, all_vendors) -> None:
  out = ctx.report.out
  if not funcs: print("No AMD, NVIDIA or Broadcom PCI functions found" if not all_vendors else "No PCI functions found", file=out)
  for f in funcs:
    if f["error"]:
      print(printable(f"{f['address']}  error: {f['error']}"), file=out)
      continue
    holder = ", ".join(f"{h['pid']} ({h['name']})" for h in f["holders"]) or "-"
    print(printable(f"{f['address']}  [{f['id']}]  {_name(f)}  driver: {f['driver'] or '-'}  holder: {holder}"), file=out)
  out.flush()


def _emit(ctx, command: str, rows: list[dict], doc: dict, fmt: str, fields, n: int, looping: bool) -> None:
  """rows in fmt (output.py) over fields (None: every field); JSON is doc with the rows as "devices" (one line
  per round when looping); a CSV's header comes once."""
  from . import output
  out = ctx.report.out
  shown = output.select(rows, fields) if fields is not None else rows
  if fmt == "json":
    d = dict(doc, devices=shown)
    print(output.json_line(d) if looping else json.dumps(d, indent=2, sort_keys=True), file=out, flush=True)
    return
  text = output.render(rows, fields or output.FIELDS[command], fmt, header=n == 0 or fmt == "table")
  if looping and fmt == "table": print(time.strftime("%Y-%m-%d %H:%M:%S"), file=out)
  print(printable(text), file=out, flush=True)


def _repeat(one, loop: float | None, rounds: int | None, sleep) -> int:
  """one(0) when loop is None; else one(n) every loop seconds until rounds are done or Ctrl-C (exit 0 then: the
  user ended it). The exit status is the last round's."""
  if loop is None: return one(0)
  sleep = sleep or time.sleep
  rc, n = EXIT_OK, 0
  try:
    while rounds is None or n < rounds:
      rc = one(n)
      n += 1
      if rounds is None or n < rounds: sleep(loop)
  except KeyboardInterrupt: return EXIT_OK
  return rc


# ---- top

def _read_int(dev: PCIDevice, name: str) -> int | None:
  try: return int(dev.attr(name))
  except (DeviceError, ValueError): return None


def _hwmon(dev: PCIDevice, host) -> tuple[float | None, float | None]:
  """(temperature in °C, power in W) from the device's first hwmon (Documentation/hwmon/sysfs-interface.rst:
  temp1_input in millidegrees Celsius, power1_average / power1_input in microwatts)."""
  base = f"bus/pci/devices/{dev.addr}/hwmon"
  if not host.sysfs_exists(base): return None, None
  for hw in host.sysfs_list(base):
    if not hw.startswith("hwmon"): continue
    temp = _read_int(dev, f"hwmon/{hw}/temp1_input")
    power = _read_int(dev, f"hwmon/{hw}/power1_average")
    if power is None: power = _read_int(dev, f"hwmon/{hw}/power1_input")
    return (temp / 1000 if temp is not None else None), (power / 1e6 if power is not None else None)
  return None, None


def _row(addr: str) -> dict:
  return {"address": addr, "id": None, "driver": None, "holders": [], "source": None, "busy_percent": None,
          "vram_used": None, "vram_total": None, "temperature_c": None, "power_w": None, "smu": None, "error": None}


def _smu(ctx, row: dict, addr: str, pids: list[int]) -> None:
  """The SMU's metrics of a GPU the AM driver (pids) holds: read through the registers and VRAM BARs and the SMU
  mailbox, where the holder's state file says its driver table is (drivers/amd/am/monitor.py)."""
  from ..drivers.amd.am.monitor import read_metrics
  row["source"] = "smu"
  owners = {0} | {uid for uid in (process_uid(ctx.host, pid) for pid in pids) if uid is not None}
  st, m = read_metrics(ctx.host, addr, pids, owners)
  if st is None:
    row["source"] = "hcq"
    ctx.report.warn(f"{addr}: held by AM (pid {', '.join(map(str, pids))}), which published no SMU state: no metrics")
    return
  row["smu"] = dict(m, holder_pid=st.pid, firmware=f"{st.firmware >> 16}.{(st.firmware >> 8) & 0xFF}.{st.firmware & 0xFF}")
  row["busy_percent"], row["temperature_c"], row["power_w"] = m["gfx_activity_percent"], m["temperature_edge_c"], m["power_w"]


def _sample_one(ctx, dev: PCIDevice) -> dict:
  row = _row(dev.addr)
  try:
    row.update(id=f"{dev.vendor:04x}:{dev.device:04x}", driver=dev.driver)
    row["holders"] = _holders(ctx, dev.addr)
    if ctx.backend.kfd_driver and dev.driver == ctx.backend.kfd_driver:
      # amdgpu's sysfs (Documentation/gpu/amdgpu/driver-misc.rst, thermal.rst): percent busy, VRAM bytes
      row["source"] = "sysfs"
      row["busy_percent"] = _read_int(dev, "gpu_busy_percent")
      row["vram_used"] = _read_int(dev, "mem_info_vram_used")
      row["vram_total"] = _read_int(dev, "mem_info_vram_total")
      row["temperature_c"], row["power_w"] = _hwmon(dev, ctx.host)
    elif ctx.backend.name == "amd" and any(h["kind"] == "am" for h in row["holders"]):
      _smu(ctx, row, dev.addr, [h["pid"] for h in row["holders"] if h["kind"] == "am"])
    elif row["holders"]:
      row["source"] = "hcq"  # held by another hcq driver, which publishes no metrics
  except HCQError as e: row["error"] = str(e)
  return row


def sample(ctx, prefix: str | None = None) -> list[dict]:
  """A row for each function of the backend's vendor whose address starts with prefix (None: every one), and
  one with "error" for each function whose vendor could not be read (it may be one)."""
  if prefix is not None: validate_prefix(prefix)
  wanted = lambda addr: prefix is None or addr.startswith(prefix)
  rows = []
  def unreadable(addr, e):
    if wanted(addr): rows.append(dict(_row(addr), error=str(e)))
  for dev in PCIDevice.enumerate(ctx.host, vendor=ctx.backend.vendor, on_error=unreadable):
    if wanted(dev.addr): rows.append(_sample_one(ctx, dev))
  return sorted(rows, key=lambda r: r["address"])


def _fmt(v, unit="", scale=1.0, digits=0) -> str:
  return "n/a" if v is None else f"{v / scale:.{digits}f}{unit}"


def table(rows: list[dict]) -> str:
  head = f"{'BUS':<13} {'ID':<10} {'DRIVER':<10} {'HOLDER':<16} {'BUSY':>5} {'VRAM USED/TOTAL':>19} {'TEMP':>7} {'POWER':>8}"
  lines = [head]
  for r in rows:
    if r["error"]:
      lines.append(f"{r['address']:<13} error: {r['error']}")
      continue
    holder = ",".join(f"{h['pid']}({h['name']})" for h in r["holders"]) or "not held"
    vram = "n/a" if r["vram_total"] is None else f"{_fmt(r['vram_used'], '', 2**20)}/{_fmt(r['vram_total'], ' MiB', 2**20)}"
    lines.append(f"{r['address']:<13} {r['id']:<10} {(r['driver'] or '-'):<10} {holder:<16} {_fmt(r['busy_percent'], '%'):>5} "
                 f"{vram:>19} {_fmt(r['temperature_c'], ' C', digits=1):>7} {_fmt(r['power_w'], ' W', digits=1):>8}")
    if r["smu"]: lines.append(_smu_line(r["smu"]))
  if not rows: lines.append("(no devices)")
  return "\n".join(lines)


def _smu_line(m: dict) -> str:
  return (f"{'':<13} AM holder {m['holder_pid']}, SMU {m['firmware']}: clocks GFX {m['gfx_clock_mhz']} (avg "
          f"{m['gfx_clock_avg_mhz']}) SOC {m['soc_clock_mhz']} MEM {m['mem_clock_mhz']} MHz; temperatures edge "
          f"{m['temperature_edge_c']} hotspot {m['temperature_hotspot_c']} mem {m['temperature_mem_c']} C; power "
          f"{m['power_w']} W; activity GFX {m['gfx_activity_percent']}% MEM {m['mem_activity_percent']}%")


def top(ctx, prefix: str | None = None, once: bool = False, interval: float = 1.0, rounds: int | None = None,
        sleep=None, fmt: str | None = None, fields=None, loop: float | None = None) -> int:
  """`top`: once (--once, or --format json without --loop), else every `interval` (or `loop`) seconds. On a terminal
  the table is redrawn in place; when stdout is not a terminal (a pipe, a file) each round is appended."""
  fmt = fmt or ("json" if ctx.report.as_json else "table")
  if loop is not None: interval = loop
  def doc(rows, rc): return {"command": "top", "backend": ctx.backend.name, "exit": rc}
  if once or (fmt == "json" and loop is None):
    rows = sample(ctx, prefix)
    rc = EXIT_FAIL if any(r["error"] for r in rows) else EXIT_OK
    if fmt == "table" and fields is None: print(printable(table(rows)), file=ctx.report.out, flush=True)
    else: _emit(ctx, "top", rows, doc(rows, rc), fmt, fields, 0, False)
    return rc
  out = ctx.report.out
  redraw = fmt == "table" and fields is None and getattr(out, "isatty", lambda: False)()
  def one(n: int) -> int:
    rows = sample(ctx, prefix)
    rc = EXIT_FAIL if any(r["error"] for r in rows) else EXIT_OK
    if redraw:   # ANSI: cursor home, clear screen (ECMA-48 CUP and ED)
      out.write("\x1b[H\x1b[2J" + printable(table(rows)) + "\n")
      out.flush()
    elif fmt == "table" and fields is None:
      print(time.strftime("%Y-%m-%d %H:%M:%S"), file=out)
      print(printable(table(rows)), file=out, flush=True)
    else: _emit(ctx, "top", rows, doc(rows, rc), fmt, fields, n, True)
    return rc
  rc = _repeat(one, interval, rounds, sleep)
  return EXIT_OK if rounds is None else rc
