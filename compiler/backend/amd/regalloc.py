"""Linear-scan register allocation of the selected machine code (virtual VGPRs and SGPRs -> physical registers).

Live intervals are [first position, last position] of each virtual register in the instruction list. A register
live across a loop boundary (defined before a loop and read in it, or defined in it and read after) is kept for
the whole loop, so that the value survives the back edge. Registers pinned by the kernel entry state (kernarg
pointer s[0:1], work-group ids, v0) keep their physical register from the start of the kernel to their last use.
Intervals are assigned in order of their start to the lowest free physical register (SGPR pairs even-aligned);
a register becomes free only after the position where its interval ends (no reuse within one instruction).

No spilling: a kernel that needs more than the target's registers (256 VGPRs, 106 SGPRs on gfx1100 wave32) is a
RegisterPressureError naming the kernel, the class and the number of values live at that point.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import CompileError
from .isel_mir import MInst, VReg

LIMITS = {"v": 256, "s": 106}   # gfx11 wave32: VGPRs per lane (AMDGPUUsage), addressable SGPRs s0..s105


class RegisterPressureError(CompileError):
  """The kernel needs more registers than the target has (and the backend does not spill)."""


@dataclass
class Allocation:
  vgprs: int     # registers used (highest + 1)
  sgprs: int


def live_intervals(code: list[MInst], loops: list[tuple[str, str]]) -> dict[VReg, list[int]]:
  iv: dict[VReg, list[int]] = {}
  for i, m in enumerate(code):
    for r in list(m.defs.values()) + list(m.uses.values()):
      if not isinstance(r, VReg): continue
      if r in iv:
        iv[r][1] = i
      else:
        iv[r] = [0 if r.fixed is not None else i, i]
  where = {m.label: i for i, m in enumerate(code) if m.name == "LABEL"}
  spans = [(where[h], where[e]) for h, e in loops if h in where and e in where]
  changed = True
  while changed:
    changed = False
    for h, e in spans:
      for r, (s, t) in iv.items():
        if (s < h <= t) or (s <= e < t):
          ns, nt = min(s, h), max(t, e)
          if (ns, nt) != (s, t):
            iv[r] = [ns, nt]
            changed = True
  return iv


def allocate(code: list[MInst], loops: list, name: str = "kernel") -> Allocation:
  iv = live_intervals(code, loops)
  free_after = {"v": [-1] * LIMITS["v"], "s": [-1] * LIMITS["s"]}
  used = {"v": 0, "s": 0}
  for r, (s, t) in iv.items():
    if r.fixed is not None:
      for k in range(r.n): free_after[r.cls][r.fixed + k] = max(free_after[r.cls][r.fixed + k], t)
      used[r.cls] = max(used[r.cls], r.fixed + r.n)
  for r, (s, t) in sorted(((r, st) for r, st in iv.items() if r.fixed is None), key=lambda p: (p[1][0], -p[0].n)):
    fa = free_after[r.cls]
    step = 2 if r.n == 2 else 1
    for base in range(0, LIMITS[r.cls] - r.n + 1, step):
      if all(fa[base + k] < s for k in range(r.n)): break
    else:
      live = sum(1 for q, (a, b) in iv.items() if q.cls == r.cls and a <= s <= b)
      raise RegisterPressureError(
        f"gfx1100: kernel {name} needs more than {LIMITS[r.cls]} {'VGPRs' if r.cls == 'v' else 'SGPRs'} "
        f"({live} values live at instruction {s}: {code[s]!r}); the backend does not spill to scratch")
    r.phys = base
    for k in range(r.n): fa[base + k] = t
    used[r.cls] = max(used[r.cls], base + r.n)
  return Allocation(used["v"], used["s"])
