"""Queue programs as UOps, and the dependency tracker that orders work across queues.

A queue program is `UOp(Ops.LINEAR, src=(element, ...), arg=QueueArg(name))`; its elements run in order on one
hardware queue (a compute ring, an SDMA engine, a GPFIFO ...). The elements:

  wait(signal, value)       INS arg ("wait", void)       src (signal, value): wait until *signal >= value
  store(dst, value)         INS arg ("store", void)      src (dst, value): write value (after prior work completes)
  timestamp(dst)            INS arg ("timestamp", void)  src (dst,): write the engine's clock
  barrier()                 INS arg ("barrier", void)    src (): memory barrier / cache flush between work items
  call(program, *buffers)   CALL src (PROGRAM, *buffers): a kernel dispatch; the PROGRAM's arg is whatever the
                                                          driver uses to find the code (hashable), plus launch dims
  copy(dst, src[, nbytes])  COPY src (dst, src, nbytes): a DMA copy (nbytes defaults to the smaller buffer's size)

Signals and buffers are PARAM placeholders (BufferArg), told apart by their tag: ("signal", name) for a signal
(u64 value at +0, u64 timestamp at +8), ("buffer", name) for memory. Values are UOps: a constant, or a DEFINE_VAR
for a value patched at submit time (an address, a timeline value).

Lowering to packets belongs to each driver: a PatternMatcher over these elements, e.g. (AMD PM4)

    pm4 = PatternMatcher([(QPat.wait("sig", "value"), lambda sig, value: <WAIT_REG_MEM INS UOp>), ...])
    packets = to_packets(program, pm4)        # the LINEAR with every element rewritten

Ordering across queues is the runtime's (drivers/hcq/runtime.py): every submission ends by storing its number in
the device's timeline, and a submission on one engine that follows work on another first waits for that number.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import BufferArg, Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite
from ..ir.dtypes import AddrSpace


@dataclass(frozen=True)
class QueueArg:
  """The queue a queue program runs on, by name."""
  name: str                 # "COMPUTE:0", "COPY:0", ...


@dataclass(frozen=True)
class ProgramArg:
  """A kernel a queue program calls: the driver's program object and its launch dimensions."""
  name: str
  handle: object = None     # the driver's program object (hashable by identity)
  global_size: tuple = (1, 1, 1)
  local_size: tuple = (1, 1, 1)


def _v(x) -> UOp: return x if isinstance(x, UOp) else UOp.const(x, dtypes.uint64)


def signal(slot: int, name: str = "") -> UOp:
  """A signal placeholder: 16 bytes, u64 value then u64 timestamp."""
  return UOp(Ops.PARAM, (), BufferArg(slot, dtypes.uint64, 2, AddrSpace.GLOBAL), tag=("signal", name))


def buffer(slot: int, nbytes: int, name: str = "") -> UOp:
  return UOp(Ops.PARAM, (), BufferArg(slot, dtypes.uint8, nbytes, AddrSpace.GLOBAL), tag=("buffer", name))


def wait(sig: UOp, value) -> UOp: return UOp(Ops.INS, (sig, _v(value)), ("wait", dtypes.void))
def store(dst: UOp, value) -> UOp: return UOp(Ops.INS, (dst, _v(value)), ("store", dtypes.void))
def timestamp(dst: UOp) -> UOp: return UOp(Ops.INS, (dst,), ("timestamp", dtypes.void))
def barrier() -> UOp: return UOp(Ops.INS, (), ("barrier", dtypes.void))


def program(name: str, handle=None, global_size=(1, 1, 1), local_size=(1, 1, 1)) -> UOp:
  return UOp(Ops.PROGRAM, (), ProgramArg(name, handle, tuple(global_size), tuple(local_size)))


def call(prog: UOp, *buffers: UOp) -> UOp:
  if prog.op is not Ops.PROGRAM: raise ValueError(f"call() needs a PROGRAM, got {prog.op}")
  return UOp(Ops.CALL, (prog, *buffers))


def copy(dst: UOp, src: UOp, nbytes: int | UOp | None = None) -> UOp:
  if nbytes is None: nbytes = min(b.arg.size * b.arg.dtype.itemsize for b in (dst, src))
  return UOp(Ops.COPY, (dst, src, _v(nbytes)))


def queue(name: str, *elements: UOp) -> UOp: return UOp(Ops.LINEAR, tuple(elements), QueueArg(name))


class QPat:
  """UPats for the queue elements, with capture names of your choice."""
  @staticmethod
  def wait(sig="sig", value="value"): return UPat(Ops.INS, arg=("wait", dtypes.void), src=(UPat.var(sig), UPat.var(value)))
  @staticmethod
  def store(dst="dst", value="value"): return UPat(Ops.INS, arg=("store", dtypes.void), src=(UPat.var(dst), UPat.var(value)))
  @staticmethod
  def timestamp(dst="dst"): return UPat(Ops.INS, arg=("timestamp", dtypes.void), src=(UPat.var(dst),))
  @staticmethod
  def barrier(name="ins"): return UPat(Ops.INS, arg=("barrier", dtypes.void), src=(), name=name)
  @staticmethod
  def call(prog="prog", name="call"): return UPat(Ops.CALL, src=(UPat(Ops.PROGRAM, name=prog),), allow_any_len=True, name=name)
  @staticmethod
  def copy(dst="dst", src="src", nbytes="nbytes"):
    return UPat(Ops.COPY, src=(UPat.var(dst), UPat.var(src), UPat.var(nbytes)))


def element_kind(u: UOp) -> str:
  """'wait', 'store', 'timestamp', 'barrier', 'call' or 'copy'."""
  if u.op is Ops.INS: return u.arg[0]
  if u.op is Ops.CALL: return "call"
  if u.op is Ops.COPY: return "copy"
  raise ValueError(f"not a queue element: {u.op}")


def to_packets(prog: UOp, pm: PatternMatcher, ctx=None) -> UOp:
  """Rewrite each element of a queue program with a driver's PatternMatcher (element by element, in order).
  The LINEAR itself is kept; an element may become a GROUP of packets."""
  if prog.op is not Ops.LINEAR: raise ValueError(f"to_packets takes a LINEAR queue program, got {prog.op}")
  return UOp(Ops.LINEAR, tuple(graph_rewrite(e, pm, ctx, name="to_packets") for e in prog.src), prog.arg, prog.tag)
