"""Run a PTX kernel through the mock NV GPU's interpreter directly (no driver): buffers in host memory registered
with a GPUMemory (GPU VA == host VA), the parameter block packed by the kernel's own .param layout (the CUDA ABI)."""
from __future__ import annotations

import numpy as np

from hcq.mockgpu.gpumem import GPUMemory
from hcq.mockgpu.nv.ptx import parse, run


class HostMemory:
  """Host allocations registered with one GPUMemory; kept alive by this object."""

  def __init__(self):
    self.mem = GPUMemory()
    self.keep = []

  def array(self, arr: np.ndarray, align: int = 256) -> tuple[int, np.ndarray]:
    arr = np.ascontiguousarray(arr)
    raw = np.zeros(arr.nbytes + align + 64, np.uint8)
    pad = (-raw.ctypes.data) % align
    view = raw[pad:pad + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    view[...] = arr
    self.mem.add_range(raw.ctypes.data + pad, max(arr.nbytes, 1))
    self.keep.append(raw)
    return raw.ctypes.data + pad, view


def pack_params(kernel, values: list) -> bytes:
  """values in .param order: ints/floats as numpy scalars of the parameter's type, addresses as ints."""
  if len(values) != len(kernel.params):
    raise ValueError(f"{kernel.name} takes {len(kernel.params)} parameters, got {len(values)}")
  blob = bytearray(kernel.param_bytes)
  for p, v in zip(kernel.params, values):
    if isinstance(v, (bytes, bytearray)): raw = bytes(v)[:p.size]   # a struct by value
    else: raw = (np.uint64(v).tobytes() if isinstance(v, int) else np.asarray(v).tobytes())[:p.size]
    blob[p.offset:p.offset + len(raw)] = raw
  return bytes(blob)


def run_corpus_kernel(spec, seed: int = 0, ptx: str | None = None):
  """Launch corpus kernel `spec` (tests/fixtures/cuda/kernels.py) on fresh inputs; returns (outputs, inputs, stats)."""
  mod = parse(ptx if ptx is not None else spec.ptx())
  k = mod.kernels[spec.name]
  data = spec.inputs(seed)
  hm = HostMemory()
  views, values = {}, []
  for a in spec.args:
    if hasattr(a, "count"):
      addr, view = hm.array(data[a.name])
      views[a.name] = view
      values.append(addr)
    else: values.append(data[a.name])
  stats = run(k, spec.grid, spec.block, pack_params(k, values), hm.mem, dynamic_shared=spec.dynamic_shared)
  return {name: v.copy() for name, v in views.items()}, data, stats
