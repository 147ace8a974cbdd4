"""cat0: flow control. run(F, D) sets the pcs of the selected fibers itself (the lowest-pc rule reconverges them)."""
from __future__ import annotations

import numpy as np

from .values import P0


# cat0: flow. run(F, D) sets the pcs of the selected fibers itself.
def _target(d, pc): return pc + d.fields["IMMED"]


def _pred(F, comp, inv):
  p = F.R[P0 + comp] != 0
  return ~p if inv else p


def _flow_br(d, pc):
  f, t = d.fields, _target(d, pc)
  def run(F, D):
    taken = _pred(F, f["COMP1"], f["INV1"])
    if d.name == "brao": taken = taken | _pred(F, f["COMP2"], f["INV2"])
    if d.name == "braa": taken = taken & _pred(F, f["COMP2"], f["INV2"])
    D.branch(F, taken, t)
  return run


def _flow_any_all(d, pc):
  """bany/ball: a branch taken by every fiber of a wave when any/all of the wave's live fibers have p0.x (the
  wave's vote; waves of 64 or 128 fibers, SP_CS_CTRL_REG0.THREADSIZE), not the emulator's batch."""
  t = _target(d, pc)
  def run(F, D):
    sel = F.alive if F.sel is None else F.sel
    p = (F.R[P0] != 0) & sel
    nw = int(F.wave_of.max()) + 1
    if d.name == "bany": vote = np.bincount(F.wave_of, weights=p, minlength=nw) > 0
    else: vote = np.bincount(F.wave_of, weights=sel & ~p, minlength=nw) == 0
    D.branch(F, vote[F.wave_of], t)
  return run


def _flow_jump(d, pc):
  t = _target(d, pc)
  return lambda F, D: D.branch(F, np.ones(F.n, bool), t)


def _flow_nop(d, pc):
  return lambda F, D: D.branch(F, np.zeros(F.n, bool), 0)


def _flow_end(d, pc):
  def run(F, D):
    if F.sel is None: F.alive[:] = False
    else: F.alive &= ~F.sel
  return run


def _flow_shps(d, pc):
  t = _target(d, pc)
  return lambda F, D: D.branch(F, np.full(F.n, D.preamble_done), t)


def _flow_getone(d, pc):
  """getone: in each wave, one fiber (the first selected) runs the block; the others go to the target."""
  t = _target(d, pc)
  def run(F, D):
    ix = F.idx()
    taken = np.ones(F.n, bool)
    if len(ix):
      _, first = np.unique(F.wave_of[ix], return_index=True)
      taken[ix[first]] = False
    D.branch(F, taken, t)
  return run


def _flow_shpe(d, pc):
  def run(F, D):
    D.preamble_done = True
    D.branch(F, np.zeros(F.n, bool), 0)
  return run


CAT0 = {"br": _flow_br, "brao": _flow_br, "braa": _flow_br, "bany": _flow_any_all, "ball": _flow_any_all,
        "jump": _flow_jump, "nop": _flow_nop, "end": _flow_end, "shps": _flow_shps, "getone": _flow_getone,
        "shpe": _flow_shpe}
