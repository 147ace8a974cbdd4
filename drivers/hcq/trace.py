"""A timeline of what a device did, in the Chrome trace event format that Perfetto and chrome://tracing open.

Format: "Trace Event Format" (Google, the document Perfetto's importer follows): a JSON object {"traceEvents": [...],
"displayTimeUnit": "ms"}; each event has name, ph (phase), ts (microseconds), pid and tid; "X" (complete) events carry
dur (microseconds, >= 0); "M" (metadata) events name processes and threads (process_name / thread_name, args.name).

What is recorded (HCQ_TRACE=FILE, or --trace FILE on hcq run, demo and kernels): one process per device, one track
(thread) per engine, and the host's track:
  - each launch on the compute track from the GPU's own start and end timestamps (the launch's timer signals, in the
    device's clock: ticks_per_us), placed on the host's time axis at its first launch (the offset is in each event's
    args); with tracing on, every launch is a timed one, so launches run one after another, as under a profiler;
  - each copy on the copy track, from its submission to the first time the host saw the timeline past it (at its
    next submission or wait; the copy engine writes no timestamp of its own here: args.clock says "host");
  - each host submission ("submit", an "X" of the time the host spent writing and ringing it) and each wait ("wait",
    from its start to its end) on the host track;
  - a NIC's RDMA WRITEs (`hcq rdma loopback`) on its NIC track, from the post to the completion the host polled.
The file is written when the device closes (and again at each later close in the same process: several devices
share one file).
"""
from __future__ import annotations

import atexit
import os
import threading
import time


_LOCK = threading.Lock()
_TRACES: dict[str, "TraceFile"] = {}
_DEFAULT_PATH: str | None = None    # --trace FILE of a command (set_path), else Config.trace (HCQ_TRACE)


def set_path(path: str | None) -> None:
  """The trace file of this process's devices from now on (the commands' --trace FILE); None: Config.trace."""
  global _DEFAULT_PATH
  _DEFAULT_PATH = path or None


def now_us() -> float:
  return time.perf_counter_ns() / 1e3


class TraceFile:
  """The events of every device traced into one file."""

  def __init__(self, path: str):
    self.path, self.events, self.pids = path, [], 0
    self.lock = threading.Lock()

  def add(self, event: dict) -> None:
    with self.lock: self.events.append(event)

  def new_pid(self) -> int:
    with self.lock:
      self.pids += 1
      return self.pids

  def write(self) -> None:
    """The whole file, replaced atomically (a reader never sees half of it)."""
    import json                                     # here, not at import: a process that traces nothing never loads them
    from ...safefiles import atomic_writer          # (issue 33 P3: tempfile, shutil, random, json are ~4 ms cold)
    with self.lock: doc = {"traceEvents": list(self.events), "displayTimeUnit": "ms"}
    with atomic_writer(self.path, text=True, perm=0o644) as f: json.dump(doc, f)


def _file(path: str) -> TraceFile:
  with _LOCK:
    t = _TRACES.get(path)
    if t is None:
      t = _TRACES[path] = TraceFile(path)
      atexit.register(_write_quietly, t)
    return t


def _write_quietly(t: TraceFile) -> None:
  try: t.write()
  except OSError: pass   # at exit there is nobody left to tell; each device close already wrote it


def for_device(device, config) -> "DeviceTrace | None":
  """The tracer of a device being opened, None when tracing is off."""
  path = _DEFAULT_PATH or getattr(config, "trace", "")
  if not path: return None
  return DeviceTrace(_file(os.path.abspath(path)), device)


TRACKS = {"host": 1, "compute": 2, "copy": 3, "NIC": 4}


class DeviceTrace:
  """One device's tracks in a TraceFile."""

  def __init__(self, file: TraceFile, device):
    self.file, self.device = file, device
    self.pid = file.new_pid()
    self.gpu_offset_us: float | None = None   # host us - device us, fixed at the first launch with timestamps
    self.copies: list = []                    # (timeline value, submit us, bytes, destination) not yet seen done
    self.named: set = set()
    file.add({"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0, "ts": 0,
              "args": {"name": getattr(device, "name", "device")}})

  def _track(self, name: str) -> int:
    tid = TRACKS.setdefault(name, len(TRACKS) + 1)
    if name not in self.named:
      self.named.add(name)
      label = "host (submissions, waits)" if name == "host" else f"{name} engine"
      self.file.add({"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid, "ts": 0, "args": {"name": label}})
      self.file.add({"name": "thread_sort_index", "ph": "M", "pid": self.pid, "tid": tid, "ts": 0,
                     "args": {"sort_index": tid}})
    return tid

  def _complete(self, track: str, name: str, ts: float, dur: float, args: dict) -> None:
    self.file.add({"name": name, "cat": track, "ph": "X", "pid": self.pid, "tid": self._track(track), "ts": ts,
                   "dur": max(0.0, dur), "args": args})

  def submit(self, what: str, t0: float, t1: float, value: int) -> None:
    self._complete("host", f"submit {what}", t0, t1 - t0, {"timeline_value": value})

  def launch(self, prog, value: int, submit_us: float, done_us: float, start_ticks: int, end_ticks: int,
             ticks_per_us: float, shape=None) -> None:
    args = {"timeline_value": value, "kernel": prog.name}
    if shape is not None: args["shape"] = str(shape)
    if start_ticks and end_ticks >= start_ticks:
      start, end = start_ticks / ticks_per_us, end_ticks / ticks_per_us
      if self.gpu_offset_us is None: self.gpu_offset_us = submit_us - start
      args.update(clock="gpu", gpu_start_ticks=start_ticks, gpu_end_ticks=end_ticks, ticks_per_us=ticks_per_us,
                  gpu_to_host_offset_us=self.gpu_offset_us)
      self._complete("compute", prog.name, start + self.gpu_offset_us, end - start, args)
    else:   # a device without a clock: the host's view, from the submission to the wait that saw it done
      args["clock"] = "host"
      self._complete("compute", prog.name, submit_us, done_us - submit_us, args)

  def copy(self, value: int, submit_us: float, nbytes: int, dst: int) -> None:
    self.copies.append((value, submit_us, nbytes, dst))

  def wait(self, value: int, t0: float, t1: float) -> None:
    self._complete("host", f"wait timeline >= {value}", t0, t1 - t0, {"timeline_value": value})
    self.seen(value, t1)

  def seen(self, value: int, t: float) -> None:
    """The host saw the timeline at value at time t: the copies it covers end there (at the latest)."""
    if not self.copies: return
    done = [c for c in self.copies if c[0] <= value]
    self.copies = [c for c in self.copies if c[0] > value]
    for v, ts, nbytes, dst in done:
      self._complete("copy", f"copy {nbytes} B", ts, t - ts, {"timeline_value": v, "bytes": nbytes,
                                                               "dst": f"{dst:#x}", "clock": "host"})

  def span(self, track: str, name: str, t0: float, t1: float, **args) -> None:
    """An operation the host timed itself (a NIC's RDMA WRITE from its post to its completion): args.clock "host"."""
    self._complete(track, name, t0, t1 - t0, dict(args, clock="host"))

  def close(self) -> None:
    self.file.write()
