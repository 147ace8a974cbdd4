"""Implicit barriers for LOCAL memory.

Read after write: `local.after(stores)` means "these values, once every work-item has stored them", so an AFTER on
a LOCAL buffer whose dependencies hold no BARRIER gets one: AFTER(buf, BARRIER(*deps)).
Write after read: a store into a LOCAL buffer inside a loop must not overwrite what other work-items still read
from the previous iteration, so it is ordered after a BARRIER at the top of its innermost loop.
"""
from __future__ import annotations

from ..ir import AddrSpace, Ops, PatternMatcher, UOp, UPat


def _is_local(buf: UOp) -> bool:
  b = buf.buffer
  return b.op is Ops.BUFFER and b.arg.addrspace is AddrSpace.LOCAL


def raw_barrier(a: UOp):
  deps = a.src[1:]
  if not deps or not _is_local(a.src[0]) or any(d.op is Ops.BARRIER for d in deps): return None
  return UOp(Ops.AFTER, (a.src[0], UOp(Ops.BARRIER, deps)))


def war_barrier(ctx: set, st: UOp):
  idx = st.src[0]
  base = idx.src[0]
  if not _is_local(base) or base.buffer not in ctx: return None
  loops = [r for r in st.ranges]
  if not loops: return None
  inner = max(loops, key=lambda r: (len(r.ranges), r.arg[0]))
  # already ordered after a barrier inside this loop?
  if base.op is Ops.AFTER and any(d.op is Ops.BARRIER and inner in d.ranges for d in base.src[1:]): return None
  new_base = UOp(Ops.AFTER, (base, UOp(Ops.BARRIER, (inner,))))
  return st.replace(src=(UOp(Ops.INDEX, (new_base, *idx.src[1:])), *st.src[1:]))


def loaded_local_buffers(sink: UOp) -> set:
  return {u.src[0].buffer for u in sink.by_op().get(Ops.LOAD, ()) if _is_local(u.src[0].src[0])}


pm_barriers = PatternMatcher([
  (UPat(Ops.AFTER, name="a"), raw_barrier),
  (UPat(Ops.STORE, name="st"), war_barrier),
], name="barriers")
