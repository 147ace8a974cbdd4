"""Run a code object directly on the wave emulator (mockgpu.amd.emu.dispatch), without the KFD/PM4 path: load the
PT_LOAD segments into emulator-visible host memory, read the descriptor (hcq's code-object reader), lay out the
explicit kernargs from the metadata, and build the user SGPRs from kernel_code_properties."""
from __future__ import annotations

import struct

import numpy as np

from hcq.compiler.isa.amd.codeobject import CodeObject
from hcq.mockgpu.amd.emu import GPUMemory, ScratchSetup, dispatch


class Host:
  def __init__(self):
    self.memory = GPUMemory()
    self.keep = []

  def alloc(self, nbytes: int, align: int = 256):
    raw = np.zeros(nbytes + align + 64, np.uint8)
    addr = raw.ctypes.data
    pad = (-addr) % align
    self.memory.add_range(addr + pad, max(nbytes, 1))
    self.keep.append(raw)
    return addr + pad, raw[pad:pad + nbytes]

  def array(self, arr: np.ndarray):
    arr = np.ascontiguousarray(arr)
    addr, view = self.alloc(max(arr.nbytes, 4))
    out = view[:arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return addr, out


def run(blob: bytes, args: list, grid, block, host: Host | None = None, budget: int = 50_000_000, arch: str = "gfx1100"):
  """args: per explicit argument an ndarray (copied into a buffer; the buffer view is returned) or an int.
  Returns (outputs: list of ndarray views or None, DispatchStats)."""
  host = host or Host()
  co = CodeObject.parse(blob)
  (k,) = co.kernels.values()
  base, img = host.alloc(len(co.image), 4096)
  img[:] = np.frombuffer(co.image, np.uint8)
  kd = k.descriptor
  explicit = k.explicit_args
  if len(explicit) != len(args): raise TypeError(f"{k.name} takes {len(explicit)} arguments, got {len(args)}")
  ka_addr, ka = host.alloc(max(k.kernarg_segment_size, 8), 64)
  views = []
  for a, v in zip(explicit, args):
    if isinstance(v, np.ndarray):
      addr, view = host.array(v)
      raw, views = struct.pack("<Q", addr), views + [view]
    else:
      raw, views = int(v).to_bytes(a.size, "little", signed=int(v) < 0), views + [None]
    ka[a.offset:a.offset + a.size] = np.frombuffer(raw[:a.size], np.uint8)
  layout = kd.user_sgpr_layout()
  user = [0] * kd.user_sgpr_count
  if "kernarg_segment_ptr" in layout:
    p = layout["kernarg_segment_ptr"]
    user[p:p + 2] = [ka_addr & 0xFFFFFFFF, ka_addr >> 32]
  stats = dispatch(host.memory, pgm_addr=base + k.entry_address, rsrc1=kd.compute_pgm_rsrc1, rsrc2=kd.compute_pgm_rsrc2,
                   rsrc3=kd.compute_pgm_rsrc3, user_sgprs=user, grid=tuple(grid), block=tuple(block),
                   lds_bytes=k.group_segment_fixed_size, scratch=ScratchSetup(None, k.private_segment_fixed_size), instruction_budget=budget,
                   arch=arch)
  return views, stats
