"""Output of hcq-smi: human text on stdout, or (--json) one JSON document on stdout; warnings always on stderr."""
from __future__ import annotations

import json
import sys


def printable(text: str) -> str:
  """text with every character but newlines that is not printable escaped as Python writes it (\\x1b, \\udcff):
  names from sysfs, procfs and lock dirs reach the output, and must neither drive the terminal (escape sequences)
  nor stop the output (a name that is not UTF-8 cannot be encoded)."""
  return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in text)


class Report:
  def __init__(self, as_json: bool, out=None, err=None):
    self.as_json = as_json
    self.out = out or sys.stdout
    self.err = err or sys.stderr

  def say(self, text: str) -> None:
    """A line of the human-readable output (suppressed under --json, where the data goes into the document)."""
    if not self.as_json: print(printable(text), file=self.out, flush=True)

  def warn(self, text: str) -> None:
    print(f"hcq-smi: warning: {printable(text)}", file=self.err, flush=True)

  def error(self, text: str) -> None:
    print(f"hcq-smi: error: {printable(text)}", file=self.err, flush=True)

  def document(self, obj) -> None:
    if self.as_json: print(json.dumps(obj, indent=2, sort_keys=True), file=self.out, flush=True)
