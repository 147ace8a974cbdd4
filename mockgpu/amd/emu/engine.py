"""The dispatch engine: wave start-up state, block translation cache, scheduling (being written)."""
from __future__ import annotations

from ....errors import GPUFault


def run_dispatch(memory, **kw):
  raise GPUFault("the RDNA3 wave emulator is not implemented yet", kind="unimplemented")
