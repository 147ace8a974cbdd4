"""hcq-smi list / top rows as nvidia-smi and amd-smi users read them: `--format table|csv|json`, `--query FIELD,...`.

Each row is flattened to named fields (FIELDS: the same names as the JSON keys; holders become "pid(name)" joined
by spaces in a table or CSV, a list in JSON). --query picks and orders fields; a table without --query is the
command's own layout (listing.py). CSV follows RFC 4180 (a header line, then one line per device; Python's csv
module quotes what needs it)."""
from __future__ import annotations

import csv
import io
import json

FORMATS = ("table", "csv", "json")
FIELDS = {
  "list": ("address", "id", "vendor", "device", "class", "vendor_name", "device_name", "driver", "holders", "error"),
  "top": ("address", "id", "driver", "holders", "source", "busy_percent", "vram_used", "vram_total", "temperature_c",
          "power_w", "error"),
}


class QueryError(ValueError):
  pass


def parse_query(command: str, text: str | None) -> tuple[str, ...] | None:
  """The fields --query names, in its order; an unknown one is a QueryError naming the fields there are."""
  if text is None: return None
  names = tuple(n.strip() for n in text.split(",") if n.strip())
  known = FIELDS[command]
  bad = [n for n in names if n not in known]
  if bad or not names:
    raise QueryError(f"--query {text!r}: {'unknown field ' + ', '.join(map(repr, bad)) if bad else 'no field'} "
                     f"(fields of {command}: {','.join(known)})")
  return names


def _text(field: str, value) -> str:
  if value is None: return ""
  if field == "holders": return " ".join(f"{h['pid']}({h['name']})" for h in value)
  return str(value)


def select(rows: list[dict], fields) -> list[dict]:
  return [{f: r.get(f) for f in fields} for r in rows]


def render(rows: list[dict], fields, fmt: str, header: bool = True) -> str:
  """rows as fmt ("table" or "csv"; JSON is the command's document) over fields; no trailing newline."""
  cells = [[_text(f, r.get(f)) for f in fields] for r in rows]
  if fmt == "csv":
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header: w.writerow(fields)
    w.writerows(cells)
    return buf.getvalue().rstrip("\n")
  widths = [max([len(f)] + [len(c[i]) for c in cells]) for i, f in enumerate(fields)]
  lines = ["  ".join(f.upper().ljust(w) for f, w in zip(fields, widths)).rstrip()] if header else []
  lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
  return "\n".join(lines)


def json_line(doc: dict) -> str:
  """One JSON document on one line (JSON Lines): a loop appends one per round."""
  return json.dumps(doc, sort_keys=True)
