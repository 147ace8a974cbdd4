"""Queue programs (hcq.compiler.queue) lowered to AMD packets by pattern matchers, then encoded into command
buffers that are built once and patched at submit.

  compute queue (PM4):  wait -> WAIT_REG_MEM(>=, memory)       store -> RELEASE_MEM(64-bit value) (+ RELEASE_MEM to
                        the KFD event mailbox with an interrupt)  timestamp -> RELEASE_MEM(GPU clock) to signal+8
                        barrier -> ACQUIRE_MEM(all caches)     call(PROGRAM) -> the kernel's registers, DISPATCH_DIRECT,
                                                                 CS_PARTIAL_FLUSH
  copy queue (SDMA):    wait -> POLL_REGMEM(>=)               store -> FENCE (+ FENCE to the mailbox + TRAP)
                        timestamp -> TIMESTAMP(global)        barrier -> nothing     copy -> COPY_LINEAR chunks

Addresses of signals and buffers are symbolic: PARAM slot N is the key ("param", N), a DEFINE_VAR its name; the
values come with each submit. A lowered element is an INS whose arg is (Packets(engine, words), void)."""
from __future__ import annotations

import dataclasses

from ...compiler.ir import Ops, PatternMatcher, UOp, dtypes
from ...compiler.queue import QPat, lower_queue
from ...errors import DeviceError
from . import pm4, sdma
from .cmdbuf import CommandBuffer, Sym


@dataclasses.dataclass(frozen=True)
class Packets:
  engine: str
  words: tuple


@dataclasses.dataclass(frozen=True)
class LowerCtx:
  """What lowering needs to know about the device: the KFD event its interrupts carry and that event's mailbox, and
  whether a store also interrupts (writes the event id into the mailbox, then interrupts with it). A device that
  asks for interrupts only when the host blocks on a value builds its hot command buffers without them."""
  event_id: int
  mailbox_va: int
  interrupts: bool = True


def value_of(u: UOp):
  """An int for a constant, a Sym for what is known only at submit (a DEFINE_VAR, a PARAM's address)."""
  while u.op is Ops.CAST and u.src[0].op is Ops.CONST: u = u.src[0]  # a literal given a dtype
  if u.op is Ops.CONST: return int(u.arg)
  if u.op is Ops.DEFINE_VAR: return Sym(("var", u.arg.name))
  if u.op is Ops.PARAM: return Sym(("param", u.arg.slot))
  raise DeviceError(f"queue lowering: a value must be a constant, a variable or a buffer address, got {u.op}")


def _ins(engine: str, words: list) -> UOp: return UOp(Ops.INS, (), (Packets(engine, tuple(words)), dtypes.void))


# ---- PM4 (compute queue)
def _pm4_store(ctx: LowerCtx, dst, value):
  words = pm4.release_mem(value_of(dst), value_of(value), pm4.DATA_SEL_64)
  if ctx.interrupts:
    words += pm4.release_mem(ctx.mailbox_va, ctx.event_id, pm4.DATA_SEL_32, pm4.INT_SEL_INT_AFTER_WRITE,
                             ctxid=ctx.event_id, gcr=0)
  return _ins("pm4", words)


def _sdma_store(ctx: LowerCtx, dst, value):
  words = sdma.fence(value_of(dst), value_of(value))
  if ctx.interrupts: words += sdma.fence(ctx.mailbox_va, ctx.event_id) + sdma.trap(ctx.event_id)
  return _ins("sdma", words)


def _pm4_call(ctx: LowerCtx, prog: UOp, call: UOp):
  """The PROGRAM's handle is the loaded program, or (program, kernarg variable, dispatch-packet variable) when one
  command buffer holds several launches, each with its own kernarg address."""
  pa = prog.arg
  if pa.handle is None: raise DeviceError(f"queue lowering: program {pa.name} has no loaded code")
  if isinstance(pa.handle, tuple):
    program, kernarg, dispatch = pa.handle
    return _ins("pm4", program.dispatch_words(pa.global_size, pa.local_size, value_of(kernarg), value_of(dispatch)))
  return _ins("pm4", pa.handle.dispatch_words(pa.global_size, pa.local_size))


pm_pm4 = PatternMatcher([
  (QPat.wait("sig", "value"), lambda ctx, sig, value: _ins("pm4", pm4.wait_reg_mem(value_of(sig), value_of(value)))),
  (QPat.store("dst", "value"), _pm4_store),
  (QPat.timestamp("dst"), lambda ctx, dst: _ins("pm4", pm4.release_mem(value_of(dst) + 8, 0, pm4.DATA_SEL_GPU_CLOCK, gcr=0))),
  (QPat.barrier("ins"), lambda ctx, ins: _ins("pm4", pm4.acquire_mem(pm4.GCR_ALL))),
  (QPat.call("prog", "call"), _pm4_call),
  (QPat.copy("dst", "src", "nbytes"), lambda ctx, dst, src, nbytes: _unsupported("a copy", "the compute queue")),
])


# ---- SDMA (copy queue)
def _sdma_copy(ctx, dst, src, nbytes):
  n = value_of(nbytes)
  if not isinstance(n, int): raise DeviceError("queue lowering: an SDMA copy needs a constant size")
  return _ins("sdma", sdma.copy(value_of(dst), value_of(src), n))


pm_sdma = PatternMatcher([
  (QPat.wait("sig", "value"), lambda ctx, sig, value: _ins("sdma", sdma.poll_regmem(value_of(sig), value_of(value)))),
  (QPat.store("dst", "value"), _sdma_store),
  (QPat.timestamp("dst"), lambda ctx, dst: _ins("sdma", sdma.timestamp(value_of(dst) + 8))),
  (QPat.barrier("ins"), lambda ctx, ins: _ins("sdma", [])),
  (QPat.copy("dst", "src", "nbytes"), _sdma_copy),
  (QPat.call("prog", "call"), lambda ctx, prog, call: _unsupported("a kernel dispatch", "the SDMA queue")),
])


def _unsupported(what: str, where: str):
  raise DeviceError(f"queue lowering: {what} cannot run on {where}")


MATCHERS = {"pm4": pm_pm4, "sdma": pm_sdma}


def lower(program: UOp, engine: str, ctx: LowerCtx) -> UOp:
  return lower_queue(program, MATCHERS[engine], ctx)


def encode(lowered: UOp, engine: str) -> CommandBuffer:
  """Concatenate the packets of a lowered queue program into a command buffer."""
  words: list = []
  for el in lowered.src:
    if el.op is not Ops.INS or not isinstance(el.arg[0], Packets) or el.arg[0].engine != engine:
      raise DeviceError(f"queue lowering: element {el.op} {el.arg} was not lowered to {engine} packets")
    words += el.arg[0].words
  return CommandBuffer(words, engine)


def build(program: UOp, engine: str, ctx: LowerCtx) -> CommandBuffer:
  return encode(lower(program, engine, ctx), engine)
