"""QMD (queue meta data: the descriptor of a compute launch) layouts as data, from the nvbind helper's cited table
(autogen/nv/tables/qmd.py: open-gpu-doc clc9c0qmd.h V03_00, clcbc0qmd.h V04_00, clcdc0qmd.h V05_00), and the per-launch
field update of a QMD template."""
from __future__ import annotations

from ...autogen.nv.tables.qmd import LAYOUTS, VALUES, Layout, QMDError, decode, encode, for_major, get, update  # noqa: F401


def set_field(data: bytearray, layout: dict, name: str, value: int) -> None:
  """Set one field of `data` in place, touching only the bytes it spans (the launch path: a template copy gets its
  constant buffer address)."""
  hi, lo = layout[name]
  first, last = lo // 8, hi // 8 + 1
  chunk = int.from_bytes(data[first:last], "little")
  shift, mask = lo - 8 * first, (1 << (hi - lo + 1)) - 1
  data[first:last] = ((chunk & ~(mask << shift)) | ((value & mask) << shift)).to_bytes(last - first, "little")
