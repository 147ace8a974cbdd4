"""hcq-smi command line (being built: see issue [hcq-smi])."""
from __future__ import annotations

import argparse


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="hcq-smi", description="Hand GPUs and NICs between kernel drivers and hcq.")
  parser.parse_args(argv)
  parser.print_help()
  return 2
