"""`hcq trace plot FILE -o timeline.png`: draw a timeline hcq wrote (HCQ_TRACE=FILE, --trace FILE) as an image.

One row per track (each device's host, compute and copy tracks), one bar per event ("X" events of the Chrome trace
event format), time in milliseconds from the first event. Needs matplotlib, an optional extra: pip install 'hcq[plot]'
(or open the file in Perfetto, ui.perfetto.dev, which needs nothing). Exit status 1 when the file cannot be read or
is not a trace."""
from __future__ import annotations

import json
import sys

from . import CommandError


def register(sub) -> None:
  import argparse
  p = sub.add_parser("trace", help="draw a timeline written by HCQ_TRACE / --trace", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="example: hcq demo --trace t.json && hcq trace plot t.json -o timeline.png")
  tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
  q = tsub.add_parser("plot", help="draw FILE as an image")
  q.add_argument("file", metavar="FILE", help="a trace hcq wrote (Chrome trace event JSON)")
  q.add_argument("-o", "--output", metavar="IMAGE", default="timeline.png",
                 help="the image to write (its suffix picks the format: .png, .svg, .pdf; default timeline.png)")
  q.set_defaults(func=run_plot)


def read_trace(path: str) -> list[dict]:
  """The events of a trace file: a JSON object with a traceEvents list, or a bare list (both are the format's)."""
  try:
    with open(path) as f: doc = json.load(f)
  except OSError as e: raise CommandError(f"cannot read {path}: {e.strerror}") from None
  except ValueError as e: raise CommandError(f"{path}: not JSON ({e})") from None
  events = doc.get("traceEvents") if isinstance(doc, dict) else doc
  if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
    raise CommandError(f"{path}: not a trace (no traceEvents list of objects)")
  return events


def tracks(events: list[dict]) -> tuple[list[tuple], dict]:
  """([(pid, tid, label)] in order, {(pid, tid): [(ts, dur, name)]}) of the "X" events; labels from the metadata."""
  procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
  threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
  bars: dict = {}
  for e in events:
    if e.get("ph") == "X": bars.setdefault((e["pid"], e["tid"]), []).append((float(e["ts"]), float(e.get("dur", 0)), e.get("name", "")))
  order = sorted(bars)
  return [(p, t, f"{procs.get(p, p)}: {threads.get((p, t), t)}") for p, t in order], bars


def run_plot(args) -> int:
  events = read_trace(args.file)
  rows, bars = tracks(events)
  if not rows: raise CommandError(f"{args.file}: no events with a duration to draw")
  try:
    import matplotlib
    matplotlib.use("Agg")   # a file, never a window
    import matplotlib.pyplot as plt
  except ImportError:
    raise CommandError("drawing needs matplotlib, an optional extra: pip install 'hcq[plot]' (or open the file in "
                       "Perfetto, ui.perfetto.dev)") from None
  t0 = min(ts for b in bars.values() for ts, _, _ in b)
  fig, ax = plt.subplots(figsize=(12, 0.6 * len(rows) + 1.5))
  colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for i, (p, t, _) in enumerate(rows):
    spans = [((ts - t0) / 1e3, max(dur / 1e3, 1e-4)) for ts, dur, _ in bars[(p, t)]]
    ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=colors[i % len(colors)])
  ax.set_yticks(range(len(rows)), [label for _, _, label in rows])
  ax.invert_yaxis()
  ax.set_xlabel("ms from the first event")
  ax.set_title(f"hcq timeline: {args.file}")
  fig.tight_layout()
  try: fig.savefig(args.output)
  except (OSError, ValueError) as e: raise CommandError(f"cannot write {args.output}: {e}") from None
  finally: plt.close(fig)
  print(f"{args.output}: {sum(len(b) for b in bars.values())} events on {len(rows)} tracks", file=sys.stderr)
  return 0
