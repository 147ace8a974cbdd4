"""hcq-smi: hand GPUs and NICs between kernel drivers and hcq (see `hcq-smi --help`)."""
from __future__ import annotations


def main(argv: list[str] | None = None, host=None) -> int:
  from .cli import main as cli_main
  return cli_main(argv, host=host)
