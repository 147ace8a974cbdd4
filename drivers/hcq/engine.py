"""Engines: the hardware queues of a device as the runtime sees them.

An Engine has
  - a name, the one name of that queue everywhere ("compute", "copy"): in queue programs (Q.queue(name, ...)), in
    packets (Packets.engine), in errors;
  - a packet table: a PatternMatcher that rewrites each queue-program element (wait, store, timestamp, barrier,
    call, copy: hcq.compiler.queue) into an INS holding the engine's packets (Packets), with a vendor context;
  - an encoder: the packets of a program concatenated into a CommandBuffer (cmdbuf.py), words that are known
    once the device exists (its own signal addresses: `links`) resolved for good, the rest patched at submit;
  - submit(chunks): how finished words reach the hardware. RingEngine (ring + doorbell) is the default; an engine
    whose kernel wants submissions by ioctl (KGSL) overrides write/commit;
  - cached command buffers for the two things every submission may need: wait for a timeline value (cross-engine
    ordering) and store a timeline value (completion).

The placeholders the runtime's own queue programs use are defined here (TIMELINE, T_START, T_END, the copy buffers)
with the keys their values are given under at submit (V_TIMELINE, V_PREV, P_DST, P_SRC)."""
from __future__ import annotations

import dataclasses
import functools

from ...compiler import queue as Q
from ...compiler.ir import Ops, PatternMatcher, UOp, dtypes
from ...errors import DeviceError
from .cmdbuf import CommandBuffer, Sym, link

# placeholders of the runtime's queue programs: PARAM slots the device links to its signals, variables given at submit
TIMELINE, T_START, T_END = Q.signal(0, "timeline"), Q.signal(1, "launch start"), Q.signal(2, "launch end")
COPY_DST, COPY_SRC = 3, 4
FIRST_VENDOR_SLOT = 5                    # PARAM slots from here on are the vendor's (e.g. an interrupt request signal)
TIMELINE_VALUE = UOp.variable("timeline", 0, 2**32 - 1)
PREVIOUS_VALUE = UOp.variable("prev", 0, 2**32 - 1)
V_TIMELINE, V_PREV = ("var", "timeline"), ("var", "prev")
P_DST, P_SRC = ("param", COPY_DST), ("param", COPY_SRC)


@dataclasses.dataclass(frozen=True)
class Packets:
  """What one queue-program element becomes: words for `engine` (ints, or Patches known at submit)."""
  engine: str
  words: tuple


def value_of(u: UOp):
  """An int for a constant, a Sym for what is known only at submit (a DEFINE_VAR, a PARAM's address)."""
  while u.op is Ops.CAST and u.src[0].op is Ops.CONST: u = u.src[0]  # a literal given a dtype
  if u.op is Ops.CONST: return int(u.arg)
  if u.op is Ops.DEFINE_VAR: return Sym(("var", u.arg.name))
  if u.op is Ops.PARAM: return Sym(("param", u.arg.slot))
  raise DeviceError(f"queue program to packets: a value must be a constant, a variable or a buffer address, got {u.op}")


def packets(engine: str, words) -> UOp:
  """The packet form of an element: an INS whose arg holds the engine's packets."""
  return UOp(Ops.INS, (), (Packets(engine, tuple(words)), dtypes.void))


def unsupported(what: str, engine: str):
  raise DeviceError(f"queue program to packets: {what} cannot run on the {engine} engine")


def encode(packets: UOp, engine: str) -> CommandBuffer:
  """Concatenate the packets of a queue program into a command buffer."""
  words: list = []
  for el in packets.src:
    if el.op is not Ops.INS or not isinstance(el.arg[0], Packets) or el.arg[0].engine != engine:
      raise DeviceError(f"queue program to packets: element {el.op} {el.arg} was not turned into {engine} packets")
    words += el.arg[0].words
  return CommandBuffer(words, engine)


class Engine:
  """A hardware queue: its packet table and context, the device's links, and how words reach it."""

  def __init__(self, name: str, matcher: PatternMatcher, ctx=None, links: dict | None = None):
    self.name, self.matcher, self.ctx, self.links = name, matcher, ctx, dict(links or {})
    # the runtime's two cached command buffers: wait until the timeline holds prev, store a timeline value
    self.wait_cmd = self.build(Q.queue(name, Q.wait(TIMELINE, PREVIOUS_VALUE)))
    self.signal_cmd = self.build(Q.queue(name, Q.store(TIMELINE, TIMELINE_VALUE)))

  def to_packets(self, program: UOp, ctx=None) -> UOp:
    if program.arg.name != self.name:
      raise DeviceError(f"queue program for {program.arg.name!r} given to the {self.name} engine")
    return Q.to_packets(program, self.matcher, self.ctx if ctx is None else ctx)

  def build(self, program: UOp, ctx=None) -> CommandBuffer:
    """Lower and encode a queue program once; the device's own addresses (links) are resolved, the rest is patched
    at submit (CommandBuffer.fill)."""
    return link(encode(self.to_packets(program, ctx), self.name), self.links)

  # ---- submission (overridden by engines that do not use a ring)
  def mark(self):
    """A position to roll back to when a submission is abandoned before commit."""
    return None

  def rollback(self, mark) -> None: pass

  def write(self, words) -> None: raise NotImplementedError

  def write_cmd(self, cmd, values) -> None:
    """Write command buffer cmd patched with values (RingEngine patches it in the ring itself)."""
    self.write(cmd.fill(values))

  def commit(self) -> None: raise NotImplementedError

  def close(self) -> None: pass

  def __repr__(self): return f"{type(self).__name__}({self.name})"


class RingEngine(Engine):
  """An engine fed through a Ring (queue.py): words copied at the write pointer, published with the doorbell."""

  def __init__(self, name: str, matcher: PatternMatcher, ring, ctx=None, links: dict | None = None):
    self.ring = ring
    super().__init__(name, matcher, ctx, links)
    # the ring's own methods (bound once: every launch calls them); mark() reads the ring's write position through a
    # C-level partial (no Python frame)
    self.write, self.commit, self.rollback = ring.write, ring.commit, ring.rollback
    self.write_cmd = ring.write_cmd      # an engine that replaces write replaces this too (AQLEngine)
    self.mark = functools.partial(getattr, ring, "put_dw")
