"""What a dispatch returns or raises: DispatchStats and InstructionBudgetExceeded (the package re-exports both; the
engine builds them without importing the package, which imports the engine)."""
from __future__ import annotations

from typing import NamedTuple

from ....errors import GPUFault


class InstructionBudgetExceeded(GPUFault):
  """The dispatch executed more wave-instructions than its budget (a kernel that never ends)."""

  def __init__(self, budget: int, pc: int | None = None):
    self.budget = budget
    super().__init__(f"dispatch exceeded its instruction budget of {budget} wave-instructions "
                     f"(a kernel that never ends?)", address=pc, kind="instruction budget")


class DispatchStats(NamedTuple):
  """What a dispatch did (a NamedTuple: built on every launch, it must be cheap)."""
  waves: int                  # waves launched
  wave_instructions: int      # instructions executed, counted once per wave that executed them
  seconds: float              # wall-clock time of the dispatch
