"""What a lowering target can do: launch limits and the ALU ops it renders natively."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.ops import GroupOp, Ops


@dataclass(frozen=True)
class Target:
  name: str
  max_global: tuple = (2**31 - 1, 65535, 65535)   # work-groups per dimension
  max_local: tuple = (1024, 1024, 64)             # work-items per dimension
  max_local_threads: int = 1024
  local_memory_bytes: int = 65536
  native_ops: frozenset = field(default_factory=lambda: frozenset(GroupOp.ALU - {Ops.FLOORDIV, Ops.FLOORMOD}))
  shifts_for_pow2: bool = False                    # rewrite unsigned-range // and % by 2**k into >> and &


C_TARGET = Target("c")
TARGETS = {"c": C_TARGET}
