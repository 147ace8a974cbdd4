"""Register allocation on the LINEAR form: live ranges that respect loops, then a linear scan.

A value's live range runs from the element that defines it to its last use, stretched to the END of every loop
that a use sits in but the definition does not (the value is read again on the next iteration). A RANGE's counter
lives until its END (the increment reads it). Backends choose which elements need a register (`needs`) and how
many consecutive registers each takes (`width`: 2 for a 64-bit value on a 32-bit register file, aligned to 2).

    ranges = live_ranges(lin)                     # {element: (first, last) positions}
    regs = allocate(lin, 256, needs=..., width=...)  # {element: first register}; CompileError when it can't fit
"""
from __future__ import annotations

from ..ir import CompileError, Ops, PtrDType, UOp
from ..ir.uop import _short


def _loops(lin: UOp) -> list[tuple[int, int]]:
  """(RANGE position, END position) of every loop."""
  at = {u: i for i, u in enumerate(lin.src)}
  return [(at[u.src[0]], i) for i, u in enumerate(lin.src) if u.op is Ops.END]


def produces_value(u: UOp) -> bool:
  """Elements with a result: not stores, control flow or barriers."""
  return u.op not in (Ops.STORE, Ops.END, Ops.IF, Ops.ENDIF, Ops.BARRIER, Ops.SINK, Ops.GROUP) and \
    (isinstance(u.dtype, PtrDType) or u.dtype.itemsize > 0 or u.dtype.is_weak)


def live_ranges(lin: UOp, needs=produces_value) -> dict[UOp, tuple[int, int]]:
  loops = _loops(lin)
  out: dict[UOp, list] = {}
  for i, u in enumerate(lin.src):
    if needs(u): out[u] = [i, i]
    if u.op is Ops.RANGE and u in out:
      out[u][1] = max(out[u][1], next(e for r, e in loops if r == i))
    for s in u.src:
      if s not in out: continue
      d = out[s][0]
      end = i
      for r, e in loops:   # a use inside a loop that doesn't hold the definition: live to that loop's END
        if r < i < e and not r <= d < e: end = max(end, e)
      out[s][1] = max(out[s][1], end)
  return {u: (a, b) for u, (a, b) in out.items()}


def allocate(lin: UOp, nregs: int, needs=produces_value, width=lambda u: 1) -> dict[UOp, int]:
  """Give each needed element its first register; values whose ranges overlap never share one."""
  ranges = live_ranges(lin, needs)
  free = [True] * nregs
  active: list[tuple[int, UOp]] = []   # (last position, element)
  regs: dict[UOp, int] = {}
  for u, (start, last) in sorted(ranges.items(), key=lambda kv: (kv[1][0], kv[1][1])):
    for item in [a for a in active if a[0] < start]:   # ranges that ended before this one starts
      active.remove(item)
      w = width(item[1])
      for k in range(regs[item[1]], regs[item[1]] + w): free[k] = True
    w = width(u)
    base = next((b for b in range(0, nregs - w + 1, w) if all(free[b:b + w])), None)
    if base is None:
      raise CompileError(f"regalloc: more than {nregs} registers live at element {start} ({len(active)} values): "
                         f"{_short(u)}", u)
    for k in range(base, base + w): free[k] = False
    regs[u] = base
    active.append((last, u))
  return regs
