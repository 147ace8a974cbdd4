"""HCQ_TRACE / --trace FILE: the devices' timeline in the Chrome trace event format (drivers/hcq/trace.py), checked
against the format's rules, and `hcq trace plot`."""
import json
import pathlib

import numpy as np
import pytest

import hcq
from hcq.cli import main
from hcq.config import Config
from hcq.drivers.hcq import trace

ROOT = pathlib.Path(__file__).resolve().parents[2]
VADD = (ROOT / "tests" / "fixtures" / "opencl" / "hsaco" / "vadd.hsaco").read_bytes()
PHASES = set("BEXIiCbnesftPOND") | {"M"}


def check_trace_format(doc) -> list[dict]:
  """The Trace Event Format's rules for what hcq writes: the JSON object form ({"traceEvents": [...]}, optional
  displayTimeUnit "ms" or "ns"); every event has a name, a phase, a timestamp in microseconds, a pid and a tid; a
  complete event ("X") has a duration >= 0; metadata events ("M") name processes and threads in args; instant
  events have a scope g, p or t. Every track an event is on is named."""
  assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
  assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
  events = doc["traceEvents"]
  for e in events:
    assert isinstance(e["name"], str) and e["ph"] in PHASES, e
    assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    if e["ph"] == "X": assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    if e["ph"] == "i": assert e.get("s", "t") in ("g", "p", "t"), e
    if e["ph"] == "M":
      assert e["name"] in ("process_name", "thread_name", "thread_sort_index", "process_sort_index"), e
      assert ("name" in e["args"]) if e["name"].endswith("_name") else ("sort_index" in e["args"]), e
    if "args" in e: json.dumps(e["args"])
  named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
  named_procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
  for e in events:
    if e["ph"] != "M": assert (e["pid"], e["tid"]) in named_threads and e["pid"] in named_procs, e
  return events


def _tracks(events):
  names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
  out = {}
  for e in events:
    if e["ph"] == "X": out.setdefault(names[(e["pid"], e["tid"])], []).append(e)
  return out


def test_a_traced_device_writes_launches_copies_and_waits(tmp_path):
  path = tmp_path / "t.json"
  with hcq.open("MOCK+AMD", config=Config(trace=str(path), timeout_s=10)) as dev:
    a = dev.alloc(4096)
    dev.copyin(a, np.arange(1024, dtype=np.float32))
    prog = dev.load(VADD)
    assert prog(a, a, a, global_size=16, local_size=64) is None     # untimed: still returns nothing
    assert (dev.copyout(a, dtype=np.float32) == 2 * np.arange(1024)).all()
  events = check_trace_format(json.loads(path.read_text()))
  tracks = _tracks(events)
  assert set(tracks) == {"host (submissions, waits)", "compute engine", "copy engine"}
  (launch,) = tracks["compute engine"]
  g = launch["args"]
  assert launch["name"] == "vadd" and g["clock"] == "gpu" and g["gpu_end_ticks"] > g["gpu_start_ticks"] > 0
  assert launch["dur"] == pytest.approx((g["gpu_end_ticks"] - g["gpu_start_ticks"]) / g["ticks_per_us"])
  submit = next(e for e in tracks["host (submissions, waits)"] if e["name"] == "submit launch vadd")
  assert launch["ts"] == pytest.approx(submit["ts"]) and submit["args"]["timeline_value"] == g["timeline_value"]
  copies = tracks["copy engine"]
  # copyin, the code object's upload (whole pages), copyout
  assert len(copies) == 3 and copies[0]["args"]["bytes"] == copies[2]["args"]["bytes"] == 4096
  assert copies[1]["args"]["bytes"] % 4096 == 0 and all(c["args"]["clock"] == "host" for c in copies)
  assert copies[0]["ts"] < launch["ts"] < copies[2]["ts"]
  assert any(e["name"].startswith("wait timeline >= ") for e in tracks["host (submissions, waits)"])


def test_two_devices_share_one_file_as_two_processes(tmp_path):
  path = tmp_path / "two.json"
  cfg = Config(trace=str(path), timeout_s=10)
  with hcq.open("MOCK+AMD", config=cfg) as d1, hcq.open("MOCK+NV", config=cfg) as d2:
    for d in (d1, d2): d.copyin(d.alloc(64), bytes(64))
  events = check_trace_format(json.loads(path.read_text()))
  procs = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"]
  assert len(procs) == 2 and len({e["pid"] for e in events}) == 2


def test_an_unwritable_trace_is_an_error_naming_the_file(tmp_path):
  path = tmp_path / "no-such-folder" / "t.json"
  dev = hcq.open("MOCK+AMD", config=Config(trace=str(path)))
  with pytest.raises(hcq.DeviceError, match=f"cannot write the trace {path}"):
    dev.close()
  assert dev.closed


def test_hcq_demo_trace_and_hcq_trace_plot(tmp_path, capsys):
  path, png = tmp_path / "demo.json", tmp_path / "timeline.png"
  assert main(["demo", "--trace", str(path)]) == 0
  assert trace._DEFAULT_PATH is None      # the option ends with the command
  events = check_trace_format(json.loads(path.read_text()))
  assert {e["name"] for e in _tracks(events)["compute engine"]} >= {"vadd", "matmul"}
  pytest.importorskip("matplotlib")
  assert main(["trace", "plot", str(path), "-o", str(png)]) == 0
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "events on 3 tracks" in capsys.readouterr().err


def test_trace_plot_names_what_is_wrong(tmp_path, capsys, monkeypatch):
  bad = tmp_path / "bad.json"
  bad.write_text('{"events": []}')
  assert main(["trace", "plot", str(bad)]) == 1
  assert "not a trace (no traceEvents list of objects)" in capsys.readouterr().err
  good = tmp_path / "good.json"
  good.write_text(json.dumps({"traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "d"}},
    {"name": "k", "ph": "X", "pid": 1, "tid": 2, "ts": 5, "dur": 3}]}))
  monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)   # the optional extra is not installed
  assert main(["trace", "plot", str(good), "-o", str(tmp_path / "x.png")]) == 1
  assert "pip install 'hcq[plot]'" in capsys.readouterr().err


def test_a_nics_rdma_writes_are_on_its_nic_track(tmp_path, monkeypatch, capsys):
  path = tmp_path / "nic.json"
  monkeypatch.setenv("HCQ_TRACE", str(path))
  assert main(["rdma", "loopback", "--mock", "--iters", "3", "--size", "4K"]) == 0
  events = check_trace_format(json.loads(path.read_text()))
  (nic,) = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == "NIC engine"]
  writes = [e for e in events if e["ph"] == "X" and e["tid"] == nic["tid"]]
  assert [w["name"] for w in writes] == ["RDMA WRITE 4096 B"] * 3 and all(w["args"]["clock"] == "host" for w in writes)
