"""Queue programs (hcq.compiler.queue) turned into Adreno CP packets by a pattern matcher (as drivers/amd/packets.py
does for PM4 and SDMA); the engine encodes them into command buffers built once and patched at submit.

  wait      -> CP_WAIT_REG_MEM (WRITE_GE, polling memory)
  store     -> CP_WAIT_FOR_IDLE, CP_EVENT_WRITE(CACHE_FLUSH_TS) of the low dword, then of the high dword: timestamp
               events write in order once the work before them is done and the caches are flushed, so the host
               sees the low word change first; as values only grow, a 64-bit read between the two writes is below
               the new value, never above it (writing the high word first would show 0x1_FFFFFFFF while
               0x0_FFFFFFFF -> 0x1_00000000, a value not reached yet)
  timestamp -> CP_WAIT_FOR_IDLE, CP_REG_TO_MEM of CP_ALWAYS_ON_COUNTER (64-bit, 19.2 MHz) to signal + 8
  barrier   -> CP_WAIT_FOR_IDLE, CP_EVENT_WRITE(CACHE_FLUSH_TS) (dirty lines written back), CP_WAIT_MEM_WRITES,
               CP_EVENT_WRITE(CACHE_INVALIDATE) (later reads come from memory): written back before invalidated,
               as tinygrad's memory_barrier() / _cache_flush() do
  call      -> the program's dispatch (QCOMProgram.dispatch_words: registers, CP_LOAD_STATE6, CP_EXEC_CS)
  copy      -> not on this engine: KGSL memory is mapped for the CPU, which copies (drivers/qcom/device.py)"""
from __future__ import annotations

from ...compiler.ir import PatternMatcher
from ...compiler.queue import QPat
from ...errors import DeviceError
from ..hcq.cmdbuf import Sym
from ..hcq.engine import FIRST_VENDOR_SLOT, packets, unsupported, value_of
from . import cp

COMPUTE = "compute"
ALWAYS_ON_COUNTER = 0x980          # REG_A6XX_CP_ALWAYS_ON_COUNTER (checked against the a6xx table in the tests)
TICKS_PER_US = 19.2                # the always-on counter's clock (XO, 19.2 MHz)
V_SCRATCH = ("param", FIRST_VENDOR_SLOT)   # a dword cache-flush timestamp events write (device.py links it)


def _pm4():
  from ...autogen.qcom import adreno_pm4
  return adreno_pm4


def _store(ctx, dst, value):
  d, v = value_of(dst), value_of(value)
  p = _pm4()
  return packets(COMPUTE, cp.wait_for_idle() + cp.event_write(p.CACHE_FLUSH_TS, d, cp.lo(v)) +
                 cp.event_write(p.CACHE_FLUSH_TS, d + 4, cp.hi(v)))


def _barrier(ctx, ins):
  p = _pm4()
  # the flush's timestamp goes to the device's scratch dword (a timestamp event needs an address)
  return packets(COMPUTE, cp.wait_for_idle() + cp.event_write(p.CACHE_FLUSH_TS, Sym(V_SCRATCH), 0) +
                 cp.wait_mem_writes() + cp.event_write(p.CACHE_INVALIDATE))


def _call(ctx, prog, call):
  pa = prog.arg
  if pa.handle is None: raise DeviceError(f"queue program to packets: program {pa.name} has no loaded code")
  return packets(COMPUTE, pa.handle.dispatch_words(pa.global_size, pa.local_size))


pm_cp = PatternMatcher([
  (QPat.wait("sig", "value"), lambda ctx, sig, value: packets(COMPUTE, cp.wait_reg_mem_ge(value_of(sig), cp.lo(value_of(value))))),
  (QPat.store("dst", "value"), _store),
  (QPat.timestamp("dst"), lambda ctx, dst: packets(COMPUTE, cp.wait_for_idle() +
                                                   cp.reg_to_mem(ALWAYS_ON_COUNTER, value_of(dst) + 8))),
  (QPat.barrier("ins"), _barrier),
  (QPat.call("prog", "call"), _call),
  (QPat.copy("dst", "src", "nbytes"), lambda ctx, dst, src, nbytes: unsupported("a copy", COMPUTE)),
])
