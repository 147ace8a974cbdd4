"""hcq-smi: hand GPUs and NICs between kernel drivers and hcq."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
  from .cli import main as cli_main
  return cli_main(argv)
