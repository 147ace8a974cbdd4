"""The launch contract every vendor's programs share.

ArgLayout: how a kernel's arguments become the bytes its launch reads. Each vendor implements it for its code objects
(AMD: code object v5 kernargs, drivers/amd/kernargs.py; NV: the CUDA parameter bank). The runtime and Program use only
this protocol.

check_launch: global_size (work-groups) and local_size (threads per work-group) normalized and checked, before
anything is submitted."""
from __future__ import annotations

from typing import Protocol

from ...errors import DeviceError


class ArgLayout(Protocol):
  segment_size: int        # bytes of argument data a launch needs (before any vendor extras)
  dynamic_shared: bool        # whether launches give sizes of group-shared memory blocks among their arguments

  def check_and_pack(self, args: tuple, buffer_type: type, device) -> bytes:
    """The explicit arguments checked against the kernel's signature (raising hcq.DeviceError naming the argument)
    and packed; buffers become device addresses."""

  def shared_layout(self, args: tuple) -> tuple[list[int], int]:
    """(offsets of the group-shared memory blocks the arguments ask for, the total the launch needs)."""

  def hidden_values(self, grid: tuple[int, int, int], block: tuple[int, int, int], extra: dict[str, int]) -> bytes:
    """The bytes after the explicit arguments that depend on the launch shape."""


def is_integer(v) -> bool:
  """An int or a numpy integer (not a bool)."""
  if isinstance(v, bool): return False
  if isinstance(v, int): return True
  try:
    import numpy as np
  except ImportError: return False
  return isinstance(v, np.integer)


def check_launch(kernel: str, global_size, local_size, max_group: int,
                 required: tuple[int, int, int] | None = None) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
  """Normalize (work-group counts, threads per work-group) to 3-tuples and check them against the kernel's maximum
  work-group size and, when it has one, the work-group size it was compiled for; raises DeviceError before anything
  is submitted."""
  def norm(what, v):
    if isinstance(v, int): v = (v,)
    try: v = tuple(v)
    except TypeError: raise DeviceError(f"kernel {kernel}: {what} must be up to 3 integers, got {v!r}") from None
    if not 1 <= len(v) <= 3 or not all(isinstance(x, int) or is_integer(x) for x in v):
      raise DeviceError(f"kernel {kernel}: {what} must be 1 to 3 integers, got {v!r}")
    v = tuple(int(x) for x in v) + (1,) * (3 - len(v))
    if any(x <= 0 for x in v): raise DeviceError(f"kernel {kernel}: {what} {v} has a zero or negative dimension")
    return v
  grid, block = norm("global_size (work-groups)", global_size), norm("local_size (threads per work-group)", local_size)
  if required is not None and block != required:
    raise DeviceError(f"kernel {kernel}: compiled for a work-group size of {required} (reqd_work_group_size), "
                      f"launched with local_size {block}")
  threads = block[0] * block[1] * block[2]
  if threads > max_group:
    raise DeviceError(f"kernel {kernel}: local_size {block} is {threads} threads, more than the kernel's maximum of {max_group}")
  if any(g * b >= 2**32 for g, b in zip(grid, block)):
    raise DeviceError(f"kernel {kernel}: grid {grid} x {block} exceeds 2^32 threads in a dimension")
  if any(b > 1024 for b in block): raise DeviceError(f"kernel {kernel}: local_size {block} exceeds 1024 in a dimension")
  return grid, block
