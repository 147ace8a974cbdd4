"""Queue programs (hcq.compiler.queue) turned into AMD packets by pattern matchers, then encoded into command
buffers that are built once and patched at submit.

  compute engine (PM4; on an AQL queue the same PM4 runs from indirect buffers, and a call is a dispatch packet: aql.py;
  gfx9 takes soc15d.h's RELEASE_MEM / ACQUIRE_MEM cache-control forms):
                        wait -> WAIT_REG_MEM(>=, memory)       store -> RELEASE_MEM(64-bit value) (+ RELEASE_MEM to
                        the KFD event mailbox with an interrupt)  timestamp -> RELEASE_MEM(GPU clock) to signal+8
                        barrier -> ACQUIRE_MEM(all caches)     call(PROGRAM) -> the kernel's registers, DISPATCH_DIRECT,
                                                                 CS_PARTIAL_FLUSH
                        mem_write -> WRITE_DATA(memory, confirm)  mem_store64 -> COPY_DATA(64-bit immediate)
                        mem_wait_eq -> WAIT_REG_MEM(==, mask)  mem_wait_ge -> WAIT_REG_MEM(>=)
                        (drivers/hcq/memops.py: a GPU queue driving a NIC; SDMA: mem_write -> WRITE_LINEAR, the waits
                        -> POLL_REGMEM == / >=, mem_store64 refused: no single 64-bit store)
  copy engine (SDMA):    wait -> POLL_REGMEM(>=)               store -> FENCE (+ FENCE to the mailbox + TRAP)
                        timestamp -> TIMESTAMP(global)        barrier -> nothing     copy -> COPY_LINEAR chunks

Addresses of signals and buffers are symbolic: PARAM slot N is the key ("param", N), a DEFINE_VAR its name; the
values come with each submit. A packet element is an INS whose arg is (Packets(engine, words), void)."""
from __future__ import annotations

import dataclasses

from ...compiler.ir import PatternMatcher, UOp
from ...compiler.queue import QPat
from ...errors import DeviceError
from ..hcq.engine import packets, unsupported, value_of
from ..hcq.memops import MPat
from . import pm4, sdma

COMPUTE, COPY = "compute", "copy"    # the engines: the PM4 compute queue and the SDMA copy queue


@dataclasses.dataclass(frozen=True)
class PacketCtx:
  """What turning queue programs into packets needs to know about the device: the event its interrupts carry and that event's mailbox, and
  whether a store also interrupts (writes the event id into the mailbox, then interrupts with it). A device that
  asks for interrupts only when the host blocks on a value builds its hot command buffers without them."""
  event_id: int
  mailbox_va: int
  interrupts: bool = True
  soc15: bool = False        # gfx9: soc15d.h RELEASE_MEM / ACQUIRE_MEM cache-control forms (pm4.py)
  sdma: sdma.SDMAVersion = sdma.SDMA_VERSIONS[6]    # the SDMA engine's packet differences (sdma.py)


# ---- PM4 (compute queue)
def _release(ctx: PacketCtx, addr, data, data_sel: int, int_sel: int = pm4.INT_SEL_NONE, ctxid: int = 0,
             flush: bool = True) -> list:
  """RELEASE_MEM in the GC version's form; flush: write back and invalidate the caches first."""
  if ctx.soc15: return pm4.release_mem_soc15(addr, data, data_sel, int_sel, ctxid, flush)
  return pm4.release_mem(addr, data, data_sel, int_sel, ctxid, pm4.REL_FLUSH_ALL if flush else 0)


def _pm4_store(ctx: PacketCtx, dst, value):
  words = _release(ctx, value_of(dst), value_of(value), pm4.DATA_SEL_64)
  if ctx.interrupts:
    words += _release(ctx, ctx.mailbox_va, ctx.event_id, pm4.DATA_SEL_32, pm4.INT_SEL_INT_AFTER_WRITE,
                      ctxid=ctx.event_id, flush=False)
  return packets(COMPUTE, words)


def _sdma_store(ctx: PacketCtx, dst, value):
  mtype = ctx.sdma.fence_mtype
  words = sdma.fence(value_of(dst), value_of(value), mtype)
  if ctx.interrupts: words += sdma.fence(ctx.mailbox_va, ctx.event_id, mtype) + sdma.trap(ctx.event_id)
  return packets(COPY, words)


def _pm4_call(ctx: PacketCtx, prog: UOp, call: UOp):
  """The PROGRAM's handle is the loaded program, or (program, kernarg variable, dispatch-packet variable) when one
  command buffer holds several launches, each with its own kernarg address."""
  pa = prog.arg
  if pa.handle is None: raise DeviceError(f"queue program to packets: program {pa.name} has no loaded code")
  if isinstance(pa.handle, tuple):
    program, kernarg, dispatch = pa.handle
    return packets(COMPUTE, program.dispatch_words(pa.global_size, pa.local_size, value_of(kernarg), value_of(dispatch)))
  return packets(COMPUTE, pa.handle.dispatch_words(pa.global_size, pa.local_size))


pm_pm4 = PatternMatcher([
  (QPat.wait("sig", "value"), lambda ctx, sig, value: packets(COMPUTE, pm4.wait_reg_mem(value_of(sig), value_of(value)))),
  (QPat.store("dst", "value"), _pm4_store),
  (QPat.timestamp("dst"), lambda ctx, dst: packets(COMPUTE, _release(ctx, value_of(dst) + 8, 0, pm4.DATA_SEL_GPU_CLOCK,
                                                                     flush=False))),
  (QPat.barrier("ins"), lambda ctx, ins: packets(COMPUTE, pm4.acquire_mem_soc15() if ctx.soc15 else pm4.acquire_mem(pm4.GCR_ALL))),
  (QPat.call("prog", "call"), _pm4_call),
  (QPat.copy("dst", "src", "nbytes"), lambda ctx, dst, src, nbytes: unsupported("a copy", COMPUTE)),
  # driving a peer through memory (drivers/hcq/memops.py): a NIC's work-queue entry, its doorbell, its completion
  (MPat.write(), lambda ctx, ins, addr: packets(COMPUTE, pm4.write_data(value_of(addr), [value_of(w) for w in ins.src[1:]]))),
  (MPat.store64(), lambda ctx, addr, value: packets(COMPUTE, pm4.store64(value_of(addr), value_of(value)))),
  (MPat.wait_eq(), lambda ctx, addr, ref, mask: packets(COMPUTE, pm4.wait_reg_mem(value_of(addr), value_of(ref), value_of(mask),
                                                                                  pm4.WAIT_EQ))),
  (MPat.wait_ge(), lambda ctx, addr, ref: packets(COMPUTE, pm4.wait_reg_mem(value_of(addr), value_of(ref)))),
])


# ---- SDMA (copy queue)
def _sdma_copy(ctx, dst, src, nbytes):
  n = value_of(nbytes)
  if not isinstance(n, int): raise DeviceError("queue program to packets: an SDMA copy needs a constant size")
  return packets(COPY, sdma.copy(value_of(dst), value_of(src), n, ctx.sdma.max_copy))


pm_sdma = PatternMatcher([
  (QPat.wait("sig", "value"), lambda ctx, sig, value: packets(COPY, sdma.poll_regmem(value_of(sig), value_of(value)))),
  (QPat.store("dst", "value"), _sdma_store),
  (QPat.timestamp("dst"), lambda ctx, dst: packets(COPY, sdma.timestamp(value_of(dst) + 8))),
  (QPat.barrier("ins"), lambda ctx, ins: packets(COPY, [])),
  (QPat.copy("dst", "src", "nbytes"), _sdma_copy),
  (QPat.call("prog", "call"), lambda ctx, prog, call: unsupported("a kernel dispatch", COPY)),
  (MPat.write(), lambda ctx, ins, addr: packets(COPY, sdma.write_linear(value_of(addr), [value_of(w) for w in ins.src[1:]]))),
  # a doorbell is one 64-bit store: SDMA's WRITE_LINEAR is a burst, not a guaranteed single 8-byte write
  (MPat.store64(), lambda ctx, addr, value: unsupported("a single 64-bit store (a doorbell)", COPY)),
  (MPat.wait_eq(), lambda ctx, addr, ref, mask: packets(COPY, sdma.poll_regmem(value_of(addr), value_of(ref), value_of(mask),
                                                                               sdma.POLL_FUNC_EQ))),
  (MPat.wait_ge(), lambda ctx, addr, ref: packets(COPY, sdma.poll_regmem(value_of(addr), value_of(ref)))),
])

MATCHERS = {COMPUTE: pm_pm4, COPY: pm_sdma}
