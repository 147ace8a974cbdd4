"""Linearization: the kernel graph becomes LINEAR(src=(element, ...)), one instruction list in execution order.

A priority toposort that respects range nesting:
  * a node is placed only when all its sources are;
  * a node inside ranges R (its `.ranges`) is placed only while exactly... at least R is open, and nodes are placed
    before any further range opens (loop-invariant code stays outside);
  * a RANGE opens only when the open ranges are those of its END (where the loop lives), choosing first the loop
    whose END comes first in a plain toposort (a loop whose results a later loop reads runs first);
  * an END closes its range only when that range is the innermost open one.
Then the elements are put in their linear form (see compiler/lower/__init__.py): AFTER disappears (the order is
the list), END(range), BARRIER() with a sequence arg, gated stores become IF(gate) / STORE / ENDIF(IF).
"""
from __future__ import annotations

import heapq

from ..ir import CompileError, UOp
from ..ir.uop import _short
from ..ir.ops import O

_SKIP = (O.SINK, O.GROUP, O.AFTER, O.NOOP)
# the ops linearize() treats apart; every other node is placed with its sources mapped
_SPECIAL = frozenset(_SKIP) | {O.INDEX, O.END, O.BARRIER, O.LOAD, O.STORE}
# the ops whose element linearize() makes anew (or drops while its users keep a source mapped elsewhere)
_REWRITTEN = frozenset({O.AFTER, O.END, O.BARRIER, O.RANGE, O.GROUP, O.NOOP})


def _order(sink: UOp) -> list[UOp]:
  nodes = sink.toposort()
  by_op = sink.by_op()
  ends: dict[UOp, UOp] = {}
  for u in by_op.get(O.END, ()):
    for r in u.src[1:]:
      if r in ends: raise CompileError(f"RANGE ended twice: {_short(r)}", r)
      ends[r] = u
  for u in by_op.get(O.RANGE, ()):
    if u not in ends: raise CompileError(f"RANGE is never ended: {_short(u)}", u)
  if not ends:
    # no loop: every node is of kind 0 and ranked by its toposort position, so the heap below would hand them out in
    # exactly that order (the next node of the toposort is always ready, and always the lowest ranked)
    return nodes
  pos = {u: i for i, u in enumerate(nodes)}
  users: dict[UOp, list] = {u: [] for u in nodes}
  missing = {}
  for u in nodes:
    missing[u] = len(set(u.src))
    for s in set(u.src): users[s].append(u)

  def kind(u: UOp) -> int: return 1 if u.op is O.END else 2 if u.op is O.RANGE else 0
  # a RANGE is ranked by where its END sits in the plain toposort: the loop that others depend on opens first
  prio = {u: pos[ends[u]] if u.op is O.RANGE else pos[u] for u in nodes}

  ready: list = []   # (kind, priority, node)
  for u in nodes:
    if missing[u] == 0: heapq.heappush(ready, (kind(u), prio[u], pos[u], u))
  out: list[UOp] = []
  open_stack: list[UOp] = []
  open_set: frozenset = frozenset()
  blocked: list = []
  while ready or blocked:
    placed = None
    while ready:
      item = heapq.heappop(ready)
      k, _, _, u = item
      if k == 0: ok = u.ranges <= open_set
      elif k == 1: ok = bool(open_stack) and open_stack[-1] is u.src[1]
      else: ok = ends[u].ranges == open_set
      if ok: placed = u; break
      blocked.append(item)
    if placed is None:
      left = [b[3] for b in blocked]
      raise CompileError(f"linearize: can't place {len(left)} nodes with ranges {sorted(r.arg[0] for r in open_set)} "
                         f"open; first: {_short(left[0])}", left[0])
    out.append(placed)
    if placed.op is O.RANGE:
      open_stack.append(placed); open_set = open_set | {placed}
    elif placed.op is O.END:
      open_stack.pop(); open_set = open_set - {placed.src[1]}
    if placed.op in (O.RANGE, O.END):   # only opening or closing a range can unblock a node
      for b in blocked: heapq.heappush(ready, b)
      blocked = []
    for v in users[placed]:
      missing[v] -= 1
      if missing[v] == 0: heapq.heappush(ready, (kind(v), prio[v], pos[v], v))
  return out


def linearize(sink: UOp) -> UOp:
  """The LINEAR form of a lowered kernel sink (see the module docstring). Its arg is the SINK's arg.

  Every element is a distinct UOp: two graph nodes that become equal once AFTER is gone (a LOAD of the same address
  before and after a store, say) are told apart by a tag (previous tag, position), so that a consumer always names
  its own source."""
  order = _order(sink)
  by_op = sink.by_op()
  # a gated INDEX only stores go through is replaced by IF + an ungated INDEX: it needs no element of its own
  # (a kernel without a gated INDEX, most of them, needs no walk for it)
  gated = any(len(i.src) == 3 for i in by_op.get(O.INDEX, ()))
  if not gated and by_op.keys().isdisjoint(_REWRITTEN) and \
     all(len(u.src) == 1 and u.tag is None for u in by_op.get(O.LOAD, ())):
    # nothing the loop below rewrites (no loop, barrier, AFTER or gated access; every LOAD is LOAD(INDEX) as placed):
    # every element is its node as it is, all distinct (no tag needed), in the order, less the SINK/GROUP/NOOPs
    return UOp(O.LINEAR, tuple([u for u in order if u.op not in _SKIP]), sink.arg)
  load_gated = {u.src[0] for u in order if u.op is not O.STORE and u.src and u.src[0].op is O.INDEX} if gated else ()
  m: dict[UOp, UOp] = {}
  out: list[UOp] = []
  placed: set[UOp] = set()
  seq = 0
  m_get = m.__getitem__

  def place(new: UOp) -> UOp:
    if new in placed: new = new.replace(tag=(new.tag, len(out)))
    placed.add(new)
    out.append(new)
    return new

  for u in order:
    op = u.op
    if op not in _SPECIAL:   # an ALU node, a CAST, a CONST...: its sources mapped (most nodes: their own)
      if u.src:
        src = tuple(map(m_get, u.src))
        new = u if src == u.src else UOp(op, src, u.arg, u.tag)
      else: new = u
      if new in placed: new = new.replace(tag=(new.tag, len(out)))   # place(), inlined
      placed.add(new)
      out.append(new)
      m[u] = new
      continue
    if u.op in _SKIP:
      if u.op is O.AFTER: m[u] = m[u.src[0]]
      continue
    if u.op is O.INDEX and len(u.src) == 3 and u not in load_gated:
      m[u] = u   # never an operand: its STORE is rewritten below
      continue
    if u.op is O.END: new = UOp(O.END, (m[u.src[1]],))
    elif u.op is O.BARRIER:
      new = UOp(O.BARRIER, (), seq); seq += 1
    elif u.op is O.LOAD: new = UOp(O.LOAD, (m[u.src[0]],), u.arg)
    elif u.op is O.STORE and len(u.src[0].src) == 3:
      idx = u.src[0]
      gate = place(UOp(O.IF, (m[idx.src[2]],), seq)); seq += 1
      plain = place(UOp(O.INDEX, (m[idx.src[0]], m[idx.src[1]])))
      m[u] = place(UOp(O.STORE, (plain, m[u.src[1]]), u.arg))
      place(UOp(O.ENDIF, (gate,)))
      continue
    elif u.src:
      src = tuple([m[s] for s in u.src])
      new = u if src == u.src else UOp(u.op, src, u.arg, u.tag)   # most nodes: their sources are their own
    else: new = u
    m[u] = place(new)
  return UOp(O.LINEAR, tuple(out), sink.arg)
