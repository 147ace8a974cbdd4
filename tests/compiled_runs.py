"""Running a DSL example (compiler/examples.py) on a device through dev.compile: the shared step of the backend tests
of every target (gfx1200, gfx942, ir3)."""
from __future__ import annotations

import numpy as np


def run_example(dev, ex, outputs) -> dict:
  """{slot: the output buffer's values} after one launch of example `ex` compiled for `dev` (its arrays copied in,
  its scalars passed as they are)."""
  prog = dev.compile(ex.sink)
  bufs = []
  for a in ex.args:
    if isinstance(a, np.ndarray):
      b = dev.alloc(max(a.nbytes, 4))
      dev.copyin(b, a.tobytes())
      bufs.append(b)
    else: bufs.append(a)
  prog(*bufs, global_size=ex.global_size, local_size=ex.local_size, wait=True)
  return {s: np.frombuffer(dev.copyout(bufs[s])[:ex.args[s].nbytes], ex.args[s].dtype) for s in outputs}
