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
    packets = lower_queue(program, pm4)        # the LINEAR with every element rewritten

QueueScheduler turns buffer hazards across queues (read-after-write, write-after-read, write-after-write) into
waits and signal stores; work on one queue is FIFO-ordered and needs nothing. For each new element it keeps only
the latest dependency per other queue, and skips a wait that an earlier wait on the same queue already covers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import BufferArg, Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite
from ..ir.dtypes import AddrSpace


@dataclass(frozen=True)
class QueueArg:
  name: str                 # "COMPUTE:0", "COPY:0", ...


@dataclass(frozen=True)
class ProgramArg:
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


def lower_queue(prog: UOp, pm: PatternMatcher, ctx=None) -> UOp:
  """Rewrite each element of a queue program with a driver's PatternMatcher (element by element, in order).
  The LINEAR itself is kept; an element may become a GROUP of packets."""
  if prog.op is not Ops.LINEAR: raise ValueError(f"lower_queue takes a LINEAR queue program, got {prog.op}")
  return UOp(Ops.LINEAR, tuple(graph_rewrite(e, pm, ctx, name="lower_queue") for e in prog.src), prog.arg, prog.tag)


def _default_access(el: UOp) -> tuple[tuple, tuple]:
  """(reads, writes) of an element when the caller gives none: a CALL reads and writes all its buffers; a COPY
  reads src and writes dst."""
  if el.op is Ops.COPY: return (el.src[1],), (el.src[0],)
  if el.op is Ops.CALL: return tuple(el.src[1:]), tuple(el.src[1:])
  return (), ()


@dataclass
class _Queue:
  name: str
  signal: UOp
  items: list = field(default_factory=list)     # [element UOp] (signal stores inserted after the fact)
  seq_pos: dict = field(default_factory=dict)   # seq -> index in items of that element
  seq: int = 0
  signaled: set = field(default_factory=set)    # seqs followed by a signal store
  waited: dict = field(default_factory=dict)    # other queue name -> highest value already waited for


class QueueScheduler:
  """Builds one queue program per queue from work submitted in program order.

      sched = QueueScheduler({"COMPUTE:0": signal(0, "compute"), "COPY:0": signal(1, "copy")})
      sched.submit("COPY:0", copy(a, host, n))
      sched.submit("COMPUTE:0", call(prog, a, b), reads=(a,), writes=(b,))   # waits for the copy
      programs = sched.programs()   # {"COPY:0": LINEAR(copy, store(sig_copy, 1)), "COMPUTE:0": LINEAR(wait, call)}

  Element n (1-based) of a queue is complete when that queue's signal holds >= n; the stores that say so are added
  only after elements some other queue waits for.
  """
  def __init__(self, signals: dict[str, UOp]):
    self.queues = {name: _Queue(name, sig) for name, sig in signals.items()}
    self.last_write: dict[UOp, tuple[str, int]] = {}
    self.reads: dict[UOp, dict[str, int]] = {}

  def submit(self, queue_name: str, el: UOp, reads=None, writes=None) -> int:
    """Append el to queue_name, after waits for what it depends on in other queues. Returns its sequence number."""
    if queue_name not in self.queues: raise KeyError(f"unknown queue {queue_name!r} (known: {', '.join(self.queues)})")
    q = self.queues[queue_name]
    d_reads, d_writes = _default_access(el)
    reads = d_reads if reads is None else tuple(reads)
    writes = d_writes if writes is None else tuple(writes)
    deps: dict[str, int] = {}
    def need(other: str, seq: int):
      if other != queue_name and seq > deps.get(other, 0): deps[other] = seq
    for b in reads:
      if b in self.last_write: need(*self.last_write[b])
    for b in writes:
      if b in self.last_write: need(*self.last_write[b])
      for other, seq in self.reads.get(b, {}).items(): need(other, seq)
    for other, seq in sorted(deps.items()):
      if q.waited.get(other, 0) >= seq: continue
      self._signal_after(self.queues[other], seq)
      q.items.append(wait(self.queues[other].signal, seq))
      q.waited[other] = seq
    q.seq += 1
    q.seq_pos[q.seq] = len(q.items)
    q.items.append(el)
    for b in reads: self.reads.setdefault(b, {})[queue_name] = q.seq
    for b in writes:
      self.last_write[b] = (queue_name, q.seq)
      self.reads[b] = {}
    return q.seq

  def _signal_after(self, q: _Queue, seq: int):
    if seq in q.signaled: return
    pos = q.seq_pos[seq] + 1
    q.items.insert(pos, store(q.signal, seq))
    for s, p in q.seq_pos.items():
      if p >= pos: q.seq_pos[s] = p + 1
    q.signaled.add(seq)

  def signal_all(self):
    """Make each queue's last element signal (e.g. before the host waits for everything)."""
    for q in self.queues.values():
      if q.seq: self._signal_after(q, q.seq)

  def programs(self) -> dict[str, UOp]:
    return {name: queue(name, *q.items) for name, q in self.queues.items() if q.items}
