"""Queue programs (hcq.compiler.queue) turned into NV pushbuffer methods by pattern matchers.

  both channels (host class, subchannel 0):
    wait -> SEM_ADDR/PAYLOAD + SEM_EXECUTE(ACQ_CIRC_GEQ, 64-bit)
    store -> SEM_EXECUTE(RELEASE, WFI, 64-bit): the value is written once the channel's earlier work is done
    timestamp -> SEM_EXECUTE(RELEASE, WFI, 64-bit, RELEASE_TIMESTAMP) of payload 0 to the signal: the GPU writes its
                 nanosecond clock at signal + 8
  compute channel (subchannel 1):
    barrier -> INVALIDATE_SHADER_CACHES_NO_WFI (instruction, global data, constant caches)
    call(PROGRAM) -> SEND_PCAS_A = QMD address >> 8, SEND_SIGNALING_PCAS2_B = INVALIDATE_COPY_SCHEDULE; the QMD is
                     written per launch into launch data (its address is the submit-time variable "qmd")
  copy channel (subchannel 4):
    copy -> OFFSET_IN/OUT, LINE_LENGTH_IN, LAUNCH_DMA(NON_PIPELINED, pitch source and destination), per 1 GiB
    store/timestamp -> SET_SEMAPHORE_A/B/PAYLOAD/_UPPER + LAUNCH_DMA(FLUSH_ENABLE, semaphore release (with a
                       timestamp at +8), 64-bit payload): the copy engine's release after its copies are flushed
    barrier -> nothing (the copy engine runs its methods in order)
  memory elements (drivers/hcq/memops.py: a GPU queue driving a NIC), host class semaphores on either channel
  (NVIDIA open-gpu-doc manuals/ampere/ga100/dev_pbdma.ref.txt, SEM_EXECUTE; operations of clc56f.h/clc86f.h):
    mem_write -> a RELEASE with WFI per dword, 64-bit where two dwords start 8-byte aligned: the stores reach memory
                 in order, after the channel's earlier work is done
    mem_store64 -> one RELEASE with a 64-bit payload (a doorbell)
    mem_wait_eq -> a 32-bit ACQUIRE (semaphore == payload) when the mask is the whole word; for a one-bit mask
                   ACQ_AND (bit set: "semaphore AND payload is not zero") or ACQ_NOR with the other bits (bit clear:
                   "semaphore NOR payload is not zero"); a mask of several bits has no acquire and is refused
    mem_wait_ge -> a 32-bit ACQ_STRICT_GEQ (unsigned semaphore >= payload)
  An acquire that never succeeds ends in the PBDMA's acquire timeout on hardware (NV_PBDMA_ACQUIRE_TIMEOUT) and
  in the device timeout of the host's wait for the submission."""
from __future__ import annotations

from ...compiler.ir import PatternMatcher
from ...compiler.queue import QPat
from ...errors import DeviceError
from ..hcq.cmdbuf import Patch, hi, lo
from ..hcq.engine import packets, unsupported, value_of
from ..hcq.memops import MPat
from . import gpfifo as G

COMPUTE, COPY = "compute", "copy"
V_QMD = ("var", "qmd")


def _sem(engine: str, addr, payload, flags: int):
  """SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE in one INC_METHOD."""
  return packets(engine, G.method(G.SUBC_HOST, G.SEM_ADDR_LO, lo(addr), hi(addr), lo(payload), hi(payload), flags))


def _wait(engine):
  return lambda ctx, sig, value: _sem(engine, value_of(sig), value_of(value), G.SEM_OP_ACQ_CIRC_GEQ | G.SEM_PAYLOAD_64)


def _store(engine):
  return lambda ctx, dst, value: _sem(engine, value_of(dst), value_of(value),
                                      G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI | G.SEM_PAYLOAD_64)


def _timestamp(engine):
  return lambda ctx, dst: _sem(engine, value_of(dst), 0, G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI | G.SEM_PAYLOAD_64 |
                               G.SEM_RELEASE_TIMESTAMP)


def _call(ctx, prog, call):
  if prog.arg.handle is None: raise DeviceError(f"queue program to packets: program {prog.arg.name} has no loaded code")
  return packets(COMPUTE, G.method(G.SUBC_COMPUTE, G.SEND_PCAS_A, Patch(V_QMD, 8)) +
                 G.method(G.SUBC_COMPUTE, G.SEND_SIGNALING_PCAS2_B, G.PCAS2_ACTION_INVALIDATE_COPY_SCHEDULE))


def _copy_release(timestamp: bool):
  """The copy channel's store/timestamp: the copy engine's own semaphore release, with FLUSH_ENABLE so that the
  copies before it are visible first (what tinygrad 0.14's NV copy queue signals with on hardware), 64-bit payload;
  a timestamp release writes the engine's clock at +8."""
  kind = G.LAUNCH_DMA_SEM_RELEASE_TIMESTAMP if timestamp else G.LAUNCH_DMA_SEM_RELEASE
  def store_(ctx, dst, value=0):
    a, v = value_of(dst), value_of(value)
    return packets(COPY, G.method(G.SUBC_COPY, G.COPY_SET_SEMAPHORE_A, hi(a), lo(a), lo(v), hi(v)) +
                   G.method(G.SUBC_COPY, G.COPY_LAUNCH_DMA, G.LAUNCH_DMA_FLUSH_ENABLE | kind | G.LAUNCH_DMA_SEM_PAYLOAD_64))
  return store_


def copy_words(dst, src, n: int) -> list:
  words = []
  for off in range(0, n, G.COPY_CHUNK):
    chunk = min(G.COPY_CHUNK, n - off)
    d, s = dst + off if off else dst, src + off if off else src
    words += G.method(G.SUBC_COPY, G.COPY_OFFSET_IN_UPPER, hi(s), lo(s), hi(d), lo(d))
    words += G.method(G.SUBC_COPY, G.COPY_LINE_LENGTH_IN, chunk)
    words += G.method(G.SUBC_COPY, G.COPY_LAUNCH_DMA, G.LAUNCH_DMA_NON_PIPELINED | G.LAUNCH_DMA_SRC_PITCH |
                      G.LAUNCH_DMA_DST_PITCH)
  return words


def _copy(ctx, dst, src, nbytes):
  n = value_of(nbytes)
  if not isinstance(n, int): raise DeviceError("queue program to packets: a copy needs a constant size")
  return packets(COPY, copy_words(value_of(dst), value_of(src), n))


def _mem_write(engine):
  def lower_(ctx, ins, addr):
    base, words = value_of(addr), [value_of(w) for w in ins.src[1:]]
    if not isinstance(base, int) or not all(isinstance(w, int) for w in words):
      raise DeviceError("queue lowering: a memory write needs a constant address and data")
    out, i = [], 0
    while i < len(words):
      a = base + 4 * i
      if a % 8 == 0 and i + 1 < len(words):     # two dwords as one 64-bit release (dev_pbdma: 8-byte aligned)
        out += G.method(G.SUBC_HOST, G.SEM_ADDR_LO, lo(a), hi(a), words[i], words[i + 1],
                        G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI | G.SEM_PAYLOAD_64)
        i += 2
      else:
        out += G.method(G.SUBC_HOST, G.SEM_ADDR_LO, lo(a), hi(a), words[i], 0, G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI)
        i += 1
    return packets(engine, out)
  return lower_


def _mem_wait_eq(engine):
  def lower_(ctx, addr, ref, mask):
    r, m = value_of(ref), value_of(mask)
    if m == 0xFFFFFFFF: return _sem(engine, value_of(addr), r, G.SEM_OP_ACQUIRE)
    if isinstance(m, int) and isinstance(r, int) and m and m & (m - 1) == 0:
      if r & m: return _sem(engine, value_of(addr), m, G.SEM_OP_ACQ_AND)
      return _sem(engine, value_of(addr), ~m & 0xFFFFFFFF, G.SEM_OP_ACQ_NOR)
    hx = lambda v: f"{v:#x}" if isinstance(v, int) else str(v)
    raise DeviceError(f"queue lowering: a wait until (mem & {hx(m)}) == {hx(r)} has no semaphore acquire on the "
                      f"{engine} channel: ACQUIRE compares the whole word, ACQ_AND/ACQ_NOR test single constant bits")
  return lower_


def _memops(engine) -> list:
  return [
    (MPat.write(), _mem_write(engine)),
    (MPat.store64(), lambda ctx, addr, value: _sem(engine, value_of(addr), value_of(value),
                                                   G.SEM_OP_RELEASE | G.SEM_RELEASE_WFI | G.SEM_PAYLOAD_64)),
    (MPat.wait_eq(), _mem_wait_eq(engine)),
    (MPat.wait_ge(), lambda ctx, addr, ref: _sem(engine, value_of(addr), value_of(ref), G.SEM_OP_ACQ_STRICT_GEQ)),
  ]


INVALIDATE = G.INVALIDATE_INSTRUCTION | G.INVALIDATE_GLOBAL_DATA | G.INVALIDATE_CONSTANT

pm_compute = PatternMatcher([
  (QPat.wait("sig", "value"), _wait(COMPUTE)),
  (QPat.store("dst", "value"), _store(COMPUTE)),
  (QPat.timestamp("dst"), _timestamp(COMPUTE)),
  (QPat.barrier("ins"), lambda ctx, ins: packets(COMPUTE, G.method(G.SUBC_COMPUTE, G.INVALIDATE_SHADER_CACHES_NO_WFI,
                                                                   INVALIDATE))),
  (QPat.call("prog", "call"), _call),
  (QPat.copy("dst", "src", "nbytes"), lambda ctx, dst, src, nbytes: unsupported("a copy", COMPUTE)),
  *_memops(COMPUTE),
])

pm_copy = PatternMatcher([
  (QPat.wait("sig", "value"), _wait(COPY)),
  (QPat.store("dst", "value"), _copy_release(False)),
  (QPat.timestamp("dst"), _copy_release(True)),
  (QPat.barrier("ins"), lambda ctx, ins: packets(COPY, [])),
  (QPat.copy("dst", "src", "nbytes"), _copy),
  (QPat.call("prog", "call"), lambda ctx, prog, call: unsupported("a kernel launch", COPY)),
  *_memops(COPY),
])

MATCHERS = {COMPUTE: pm_compute, COPY: pm_copy}
