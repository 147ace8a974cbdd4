"""Pushbuffer methods and GPFIFO channels (NVIDIA open-gpu-doc manuals/ampere/ga100/dev_ram.ref.txt;
open-gpu-kernel-modules clc86f.h).

A pushbuffer is a stream of method headers, each followed by its data dwords: bits 11:0 = method byte offset / 4,
15:13 subchannel, 28:16 data count, 31:29 opcode (1 INC_METHOD: consecutive methods, 3 NON_INC_METHOD, 4 IMMD_DATA:
the count field is the data). Subchannel 0 takes the host class's methods (semaphores: any channel), 1 the compute
object, 4 the copy object (bound by SET_OBJECT).

A channel (GPFifoEngine): its words go into a pushbuffer ring in host memory (hcq's Ring, "split" crossing); a
commit turns the words written since the last one into GPFIFO entries (one, or two where the ring wrapped: an entry
is a contiguous range), publishes GPPut in USERD and writes the channel's work-submit token to the usermode
doorbell, followed by a store fence (the doorbell page is write-combined). The pushbuffer space the GPU has consumed
is known from GPGet: each entry remembers where its words end."""
from __future__ import annotations

from array import array

from ...errors import DeviceError, Timeout
from ..hcq.engine import Engine
from ..hcq.ring import Ring

OP_INC, OP_NON_INC, OP_IMMD = 1, 3, 4
SUBC_HOST, SUBC_COMPUTE, SUBC_COPY = 0, 1, 4
USERD_GP_GET, USERD_GP_PUT = 0x88, 0x8C
DOORBELL_OFFSET = 0x90                 # usermode class NOTIFY_CHANNEL_PENDING

# host class methods (clc56f.h NVC56F_*; the same offsets in clc86f.h)
SET_OBJECT, NON_STALL_INTERRUPT, WFI = 0x0, 0x20, 0x78
SEM_ADDR_LO, SEM_EXECUTE = 0x5C, 0x6C
SEM_OP_ACQUIRE, SEM_OP_RELEASE, SEM_OP_ACQ_STRICT_GEQ, SEM_OP_ACQ_CIRC_GEQ, SEM_OP_ACQ_AND, SEM_OP_ACQ_NOR = range(6)
SEM_RELEASE_WFI, SEM_PAYLOAD_64, SEM_RELEASE_TIMESTAMP = 1 << 20, 1 << 24, 1 << 25
# compute class methods (clc7c0.h / clc9c0.h / clcbc0.h NV*C0_*: the same offsets in the three)
SET_SHADER_SHARED_MEMORY_WINDOW_A, SEND_PCAS_A, SEND_SIGNALING_PCAS2_B = 0x2A0, 0x2B4, 0x2C0
SET_SHADER_LOCAL_MEMORY_WINDOW_A, INVALIDATE_SHADER_CACHES_NO_WFI = 0x7B0, 0x1698
SET_SHADER_LOCAL_MEMORY_A, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x790, 0x2E4
PCAS2_ACTION_INVALIDATE_COPY_SCHEDULE = 9
INVALIDATE_INSTRUCTION, INVALIDATE_GLOBAL_DATA, INVALIDATE_CONSTANT = 1 << 0, 1 << 4, 1 << 12
# copy class methods (clc6b5.h / clc7b5.h / clc8b5.h NV*B5_*)
COPY_LAUNCH_DMA, COPY_OFFSET_IN_UPPER, COPY_LINE_LENGTH_IN = 0x300, 0x400, 0x418
LAUNCH_DMA_NON_PIPELINED, LAUNCH_DMA_SRC_PITCH, LAUNCH_DMA_DST_PITCH = 2, 1 << 7, 1 << 8
# the copy engine's own semaphore release (clc7b5.h/clc8b5.h): SET_SEMAPHORE_A/B (address upper/lower),
# SET_SEMAPHORE_PAYLOAD/_UPPER; LAUNCH_DMA FLUSH_ENABLE (bit 2: the copies' writes are flushed before the release),
# SEMAPHORE_TYPE (4:3: 1 release, 2 release with a timestamp at +8), SEMAPHORE_PAYLOAD_SIZE (27: 1 = 64-bit)
COPY_SET_SEMAPHORE_A = 0x240
LAUNCH_DMA_FLUSH_ENABLE, LAUNCH_DMA_SEM_RELEASE, LAUNCH_DMA_SEM_RELEASE_TIMESTAMP = 1 << 2, 1 << 3, 2 << 3
LAUNCH_DMA_SEM_PAYLOAD_64 = 1 << 27
COPY_CHUNK = 1 << 30                   # LINE_LENGTH_IN is 32-bit; copies are split well below it

METHOD_NAMES = {
  "host": {SET_OBJECT: "SET_OBJECT", NON_STALL_INTERRUPT: "NON_STALL_INTERRUPT", 0x5C: "SEM_ADDR_LO",
           0x60: "SEM_ADDR_HI", 0x64: "SEM_PAYLOAD_LO", 0x68: "SEM_PAYLOAD_HI", SEM_EXECUTE: "SEM_EXECUTE", WFI: "WFI"},
  "compute": {SET_SHADER_SHARED_MEMORY_WINDOW_A: "SET_SHADER_SHARED_MEMORY_WINDOW_A", 0x2A4: "SET_SHADER_SHARED_MEMORY_WINDOW_B",
              SEND_PCAS_A: "SEND_PCAS_A", SEND_SIGNALING_PCAS2_B: "SEND_SIGNALING_PCAS2_B",
              SET_SHADER_LOCAL_MEMORY_WINDOW_A: "SET_SHADER_LOCAL_MEMORY_WINDOW_A", 0x7B4: "SET_SHADER_LOCAL_MEMORY_WINDOW_B",
              INVALIDATE_SHADER_CACHES_NO_WFI: "INVALIDATE_SHADER_CACHES_NO_WFI"},
  "copy": {COPY_LAUNCH_DMA: "LAUNCH_DMA", 0x240: "SET_SEMAPHORE_A", 0x244: "SET_SEMAPHORE_B",
           0x248: "SET_SEMAPHORE_PAYLOAD", 0x24C: "SET_SEMAPHORE_PAYLOAD_UPPER", COPY_OFFSET_IN_UPPER: "OFFSET_IN_UPPER", 0x404: "OFFSET_IN_LOWER",
           0x408: "OFFSET_OUT_UPPER", 0x40C: "OFFSET_OUT_LOWER", COPY_LINE_LENGTH_IN: "LINE_LENGTH_IN"},
}


def header(subc: int, method: int, count: int, op: int = OP_INC) -> int:
  return (op << 29) | (count << 16) | (subc << 13) | (method >> 2)


def method(subc: int, meth: int, *data) -> list:
  """One INC_METHOD header and its data (ints, or Patches known at submit)."""
  return [header(subc, meth, len(data))] + list(data)


def gpfifo_entry(va: int, dwords: int) -> int:
  """A GPFIFO entry: the pushbuffer address (bits 39:2), LEVEL=subroutine (bit 41), the length in dwords (62:42)."""
  return (va & 0xFFFFFFFFFC) | (1 << 41) | (dwords << 42)


class DecodeError(DeviceError):
  """A pushbuffer dword that is not a method header (or data that runs past the end); .packets holds the methods
  decoded before it."""

  def __init__(self, message: str, packets: list):
    super().__init__(message)
    self.packets = packets


def _method_names(family: str) -> dict[int, str]:
  if family == "compute":
    from ...autogen.nv.tables.classes import compute_method_names
    return {**compute_method_names(), **METHOD_NAMES["compute"]}
  return METHOD_NAMES.get(family, {})


def decode_pushbuffer(words) -> list[tuple[int, str, list[str]]]:
  """[(dword offset, "CLASS.METHOD" or "subcN.METHOD", ["= value"])] for every method a pushbuffer writes. Methods
  below 0x100 are the host class's; a SET_OBJECT names the class of its subchannel from then on (before it,
  subchannel 1 is taken as the compute class and 4 as the copy class)."""
  from ...autogen.nv.rm_abi import CLASS_NAMES, COMPUTE_CLASSES, COPY_CLASSES
  bound = {SUBC_COMPUTE: ("compute", "compute"), SUBC_COPY: ("copy", "copy")}
  out, pos, n = [], 0, len(words)
  names = {f: _method_names(f) for f in ("host", "compute", "copy")}
  while pos < n:
    h = words[pos]
    op, count, subc, meth = h >> 29, (h >> 16) & 0x1FFF, (h >> 13) & 7, (h & 0xFFF) << 2
    if op == OP_IMMD: data, step = [count], 1
    elif op in (OP_INC, OP_NON_INC, 5) and count:
      if pos + 1 + count > n:
        raise DecodeError(f"dword {pos}: header {h:#010x} has {count} data dwords, {n - pos - 1} follow", out)
      data, step = list(words[pos + 1:pos + 1 + count]), 1 + count
    else: raise DecodeError(f"dword {pos}: {h:#010x} is not a method header (opcode {op}, count {count})", out)
    for i, v in enumerate(data):
      m = meth + 4 * i if op == OP_INC else meth if op in (OP_NON_INC, OP_IMMD) else meth + (4 if i else 0)
      if m < 0x100:
        who, family = "host", "host"
        if m == SET_OBJECT:
          fam = "compute" if v in COMPUTE_CLASSES else "copy" if v in COPY_CLASSES else "?"
          bound[subc] = (CLASS_NAMES.get(v, f"class {v:#x}"), fam)
      else: who, family = bound.get(subc, (f"subc{subc}", "?"))
      out.append((pos, f"{who}.{names.get(family, {}).get(m, f'method {m:#x}')}", [f"subc {subc}", f"= {v:#x}"]))
    pos += step
  return out


def _no_fence() -> None: pass


class _Consumed:
  """The pushbuffer position (dwords since creation) the GPU has read, from GPGet: Ring's read pointer."""
  __slots__ = ("engine",)
  def __init__(self, engine): self.engine = engine

  def __getitem__(self, i: int) -> int:
    e = self.engine
    pending = (e.gp_put - e.userd_u32[USERD_GP_GET // 4]) % e.entries
    done = e.submitted - pending
    return e.ends[(done - 1) % e.entries] if done > 0 else 0


class GPFifoEngine(Engine):
  """A GPFIFO channel as an hcq engine: a pushbuffer Ring, GPFIFO entries and the doorbell on commit."""

  def __init__(self, name: str, matcher, ctx, links: dict, channel, pushbuffer_va: int, pushbuffer: memoryview, os,
               timeout_s: float, idle=None):
    self.channel, self.os, self.timeout_s = channel, os, timeout_s
    self._idle = idle or os.sleep     # the device's hook: raises a stopped channel's error, else sleeps
    self.pb_va, self.entries = pushbuffer_va, channel.entries
    self.gpfifo = channel.ring_cpu.cast("Q")
    self.userd_u32 = channel.userd_cpu.cast("I")
    self.doorbell_u32, self.token = channel.doorbell, channel.token
    self.gp_put = self.submitted = 0
    self.ends = array("Q", [0] * self.entries)      # pushbuffer position at the end of each entry's words
    self._wptr = memoryview(array("Q", [0]))
    # the Ring's own fence before its doorbell function is not needed here: _submit writes the GPFIFO entries and
    # GPPut, then fences before the doorbell store, and that one full fence orders the pushbuffer words written
    # before it as well (the ring's write pointer is this engine's bookkeeping, which the GPU never reads)
    self.ring = Ring(f"{name} channel (token {channel.token})", pushbuffer.cast("I"), self._wptr, _Consumed(self),
                     self._submit, 4, "split", _no_fence, os.monotonic, os.sleep, timeout_s, idle=idle)
    self._published = 0
    super().__init__(name, matcher, ctx, links)
    self.write, self.rollback = self.ring.write, self.ring.rollback
    self.commit = self.ring.commit

  def mark(self): return self.ring.put_dw

  def _submit(self, put_dw: int) -> None:
    """Ring's doorbell: the words [published, put_dw) become GPFIFO entries, then GPPut and the doorbell."""
    start, size = self._published, self.ring.size_dw
    if put_dw == start: return
    pos = start % size
    userd, entries, gp_put = self.userd_u32, self.entries, self.gp_put
    if put_dw - start <= size - pos and (gp_put + 1) % entries != userd[USERD_GP_GET // 4]:
      # the common case: the words do not wrap and a GPFIFO entry is free (as _wait_entry finds at once);
      # gpfifo_entry() inline
      self.gpfifo[gp_put] = ((self.pb_va + 4 * pos) & 0xFFFFFFFFFC) | (1 << 41) | ((put_dw - start) << 42)
      self.ends[gp_put] = put_dw
      self.gp_put = gp_put = (gp_put + 1) % entries
      self.submitted += 1
    else:
      pieces = []
      while start < put_dw:
        pos = start % size
        n = min(put_dw - start, size - pos)
        pieces.append((pos, n, start + n))
        start += n
      for pos, n, end in pieces:
        self._wait_entry()
        self.gpfifo[self.gp_put] = gpfifo_entry(self.pb_va + 4 * pos, n)
        self.ends[self.gp_put] = end
        self.gp_put = (self.gp_put + 1) % self.entries
        self.submitted += 1
    self._published = put_dw
    userd[USERD_GP_PUT // 4] = self.gp_put
    self.os.memory_barrier()              # the entries and GPPut before the doorbell
    self.doorbell_u32[0] = self.token
    self.os.memory_barrier()              # push the doorbell store out of the write-combining buffer

  def _wait_entry(self) -> None:
    """Room for one more GPFIFO entry (the ring holds entries - 1), bounded by the timeout. The pause is the idle
    hook: a channel that stopped never frees an entry, and the hook raises its error at once."""
    if (self.gp_put + 1) % self.entries != self.userd_u32[USERD_GP_GET // 4]: return
    start = self.os.monotonic()
    while (self.gp_put + 1) % self.entries == self.userd_u32[USERD_GP_GET // 4]:
      if self.os.monotonic() - start > self.timeout_s:
        raise Timeout(f"{self.ring.name}: a free GPFIFO entry (GPPut {self.gp_put})",
                      last_seen=self.userd_u32[USERD_GP_GET // 4], timeout_s=self.timeout_s)
      self._idle(20e-6)

  def close(self) -> None: pass
