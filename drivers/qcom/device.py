"""QCOMDevice: Adreno 6xx on the HCQ runtime over KGSL (kgsl.py).

KGSL is the first engine that takes its words by ioctl, not through a ring and a doorbell: KGSLEngine gathers a
submission's CP packets, copies them into an indirect buffer (a wrapping ring in GPU memory that keeps each
submission's words until the timeline passes it) and submits that buffer with IOCTL_KGSL_GPU_COMMAND, which returns
the context's timestamp for it. The timeline signal is still written by the stream itself (CP_EVENT_WRITE with a
timestamp, packets.py); a wait that is not done after its busy polls blocks in IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID
for the submission's timestamp, which also reports a faulted context (GPUFault naming the context and timestamp).

Memory: every buffer is a KGSL memory object mapped for the CPU (Adreno shares the system's memory), so copies are
CPU copies after the device is idle, as the runtime does for host buffers; there is no copy engine (the runtime's
"copy" name refers to the compute engine, whose packet table refuses copies)."""
from __future__ import annotations

import bisect
from array import array
from collections import deque

from ...compiler import queue as Q
from ...errors import DeviceError, GPUFault, Timeout
from ..hcq import Buffer
from ..hcq.alloc import LaunchRing
from ..hcq.engine import Engine
from ..hcq.runtime import HCQDevice, Submission
from . import packets
from .packets import COMPUTE
from .program import V_CONSTS, V_IBOS, QCOMProgram, parse

IB_RING_SIZE = 4 << 20
V_TIMELINE = ("var", "timeline")


class KGSLEngine(Engine):
  """An engine whose submit is an ioctl: write() gathers words, commit() puts them in the indirect-buffer ring and
  calls IOCTL_KGSL_GPU_COMMAND; the (timeline value, KGSL timestamp) pairs let a wait block on the right timestamp."""

  def __init__(self, dev: "QCOMDevice", links: dict):
    self.dev, self.pending = dev, array("I")      # the words gathered (u32: what commit() copies into the ring)
    self.submitted: deque[tuple[int, int]] = deque(maxlen=4096)   # (timeline value, KGSL timestamp)
    super().__init__(COMPUTE, packets.pm_cp, None, links)

  def mark(self): return len(self.pending)
  def rollback(self, mark) -> None: del self.pending[mark:]
  def write(self, words) -> None: self.pending.extend(words)

  def commit(self) -> None:
    if not self.pending: return
    dev, words = self.dev, self.pending
    self.pending = array("I")
    value = dev.timeline.value              # the submission being committed (the device lock is held)
    va = dev.ib_ring.alloc(len(words) * 4, value)
    off = va - dev.ib_ring.va
    dev.ib_view[off:off + len(words) * 4] = words.tobytes()
    try: ts = dev.session.submit(va, len(words) * 4)
    except BaseException as e:
      # nothing reached the GPU: the timeline value and the space are given back (no later wait waits for them);
      # a context KGSL reports faulted is the device's fault from now on
      dev.ib_ring.cancel(value)
      dev._abandon(self, value, 0, release=False)
      if isinstance(e, GPUFault): dev._remember_fault(e)
      raise
    self.submitted.append((value, ts))

  def timestamp_for(self, value: int) -> int | None:
    """The KGSL timestamp of the first submission at or after timeline value `value`."""
    subs = self.submitted
    # a value older than the oldest kept pair (4096 submissions ago) has no known timestamp: None lets the wait poll
    # rather than block on a newer submission than the one it needs
    if not subs or value < subs[0][0]: return None
    i = bisect.bisect_left(subs, (value, -1))
    return subs[i][1] if i < len(subs) else None


class QCOMDevice(HCQDevice):
  buffer_type = Buffer
  ticks_per_us = packets.TICKS_PER_US

  def __init__(self, session, os, config):
    super().__init__(os, config)
    self.session, self.arch, self.label = session, session.arch, session.label
    self.name = f"{self.arch} on {session.label}"
    self._mems = []
    self._set_up(session, self._setup)     # a failure closes the session (the KGSL context, /dev/kgsl-3d0)

  def _setup(self) -> None:
    from ...compiler.isa.ir3.isa import ISA
    self.isa = ISA(self.session.gpu_id)
    ib = self._kgsl(IB_RING_SIZE)
    self.ib_view = ib.cpu
    self.scratch = self._kgsl(4096)         # barrier flushes write their timestamp here (packets.V_SCRATCH)
    self._pvt: dict[int, object] = {}       # private-memory buffers by size (program.py)
    self._start_runtime()
    self.ib_ring = LaunchRing(ib.va, IB_RING_SIZE, self.wait_value, name=f"{self.name} indirect buffers")

  def _kgsl(self, size: int):
    mem = self.session.alloc(size)
    self._mems.append(mem)
    return mem

  # ---- the runtime's hooks
  def _host_memory(self, size: int):
    mem = self._kgsl(size)
    return mem.va, mem.cpu

  def _vendor_links(self) -> dict: return {packets.V_SCRATCH: self.scratch.va}

  def _make_engines(self, links: dict):
    engine = KGSLEngine(self, links)
    return {COMPUTE: engine, "copy": engine}

  def _block(self, seconds: float) -> None:
    """Block in KGSL until the awaited submission's timestamp retires (or `seconds` pass); a faulted context
    raises GPUFault there."""
    ts = self.compute.timestamp_for(self._awaited) if self._awaited is not None else None
    if ts is None:
      self.os.sleep(seconds)
      return
    self.session.wait(ts, max(int(seconds * 1000), 1))

  def wait_value(self, value: int) -> None:
    try: super().wait_value(value)
    except Timeout as e:
      ts = self.compute.timestamp_for(value)
      if ts is not None:
        e.args = (f"{e.args[0]}; KGSL context {self.session.ctx} has not retired timestamp {ts} "
                  f"(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID)",)
      raise

  # ---- launches
  def _launch_words(self, prog: QCOMProgram, shape, explicit: bytes, value: int):
    # the shape's constants and IBO descriptors, built once (QCOMProgram.shape_data); the buffers' addresses patched in
    va, view = self.launch_data_slot(shape.data_size, value)
    view[:] = shape.data
    if explicit: prog.patch_addresses(view, explicit)
    return shape.cmd.fill({V_CONSTS: va, V_IBOS: va + prog.constlen * 16, V_TIMELINE: value})

  # ---- bound launches: the launches' constants and IBO descriptors kept in their own memory, the words built once
  def _record(self, planned):
    datas = [prog.launch_data(explicit, shape.grid) for prog, shape, explicit in planned]
    offsets, size = [], 0
    for d in datas:
      offsets.append(size)
      size = (size + len(d) + 63) & ~63
    mem = self._kgsl(size)
    words = []
    for (prog, shape, _), data, off in zip(planned, datas, offsets):
      mem.cpu[off:off + len(data)] = data
      cmd = self.compute.build(Q.queue(COMPUTE, Q.barrier(), Q.call(Q.program(prog.name, prog, shape.grid, shape.block))))
      words += cmd.fill({V_CONSTS: mem.va + off, V_IBOS: mem.va + off + prog.constlen * 16})
    return array("I", words)

  def _replay_words(self, recording): return recording

  def submit_cp(self, words) -> int:
    """Run raw CP packets, then signal the timeline. Returns the timeline value."""
    with self._open_lock():
      with Submission(self, self.compute, "raw CP packets") as sub: sub.add(array("I", list(words)))
    return sub.value

  # ---- memory
  def _alloc(self, nbytes: int, host: bool = False, cpu_access: bool = False) -> Buffer:
    with self._open_lock(): mem = self.session.alloc(nbytes)
    return Buffer(self, mem.va, nbytes, handle=mem, cpu_view=mem.cpu[:nbytes], kind="host")

  def _free_memory(self, buf: Buffer) -> None: self.session.free(buf.handle)

  # ---- programs
  def _load(self, image: bytes, name: str | None):
    """A computerator program (headers + ir3 assembly, as text)."""
    try: text = image.decode()
    except UnicodeDecodeError: raise DeviceError(f"{self.name}: load() takes an ir3 program as text (computerator's format)") from None
    name = name or "main"
    kernel, asm = parse(text, name)
    try: from ...compiler.isa.ir3.asm import Assembler
    except ImportError as e: raise DeviceError(f"{self.name}: the ir3 assembler is not available ({e})") from None
    try: code = bytes(Assembler(self.session.gpu_id).assemble(asm))
    except DeviceError: raise
    except Exception as e: raise DeviceError(f"{self.name}: {name}: {e}") from None
    return self.load_code(kernel, code, name)

  def load_code(self, kernel, code: bytes, name: str) -> QCOMProgram:
    """A program from its headers (program.Kernel) and its instruction words (64-bit each, little-endian)."""
    if not code or len(code) % 8: raise DeviceError(f"{self.name}: {name}: {len(code)} bytes of code is not a whole number of instructions")
    loaded = self._upload(code, name)
    words = list(array("Q", code))
    pvt = self._pvt_memory(kernel.pvtmem) if kernel.pvtmem else None
    return QCOMProgram(self, name, kernel, loaded[0], loaded[1], words, pvt)

  def _upload(self, code: bytes, name: str) -> tuple[int, int]:
    """(address, bytes) of the instruction words in GPU memory: uploaded once per distinct image."""
    if not code or len(code) % 8: raise DeviceError(f"{self.name}: {name}: {len(code)} bytes of code is not a whole number of instructions")
    def upload():
      mem = self._kgsl(len(code) + 128)        # the shader is fetched in 128-byte groups
      mem.cpu[:len(code)] = code
      return mem.va, len(code)
    return self._loaded_image(bytes(code), upload)

  def _compile(self, sink):
    """A kernel sink through hcq's ir3 backend (compiler/backend/ir3), its dispatch state from the compiled
    program's metadata (compiled.py)."""
    from ...compiler.backend.ir3 import compile_ir3
    from .compiled import CompiledProgram
    compiled = compile_ir3(sink, self.session.gpu_id)
    va, size = self._upload(compiled.code, compiled.name)
    return CompiledProgram(self, compiled, va, size, list(array("Q", compiled.code)))

  def _pvt_memory(self, pvtmem: int) -> int:
    """The private memory of programs with `pvtmem` bytes per fiber: one buffer per size, per_sp_size for each SP
    core (computerator's cs_program_emit), kept until close."""
    from .program import SP_CORES, pvtmem_sizes
    total = pvtmem_sizes(pvtmem)[1] * SP_CORES
    with self._open_lock():
      va = self._pvt.get(total)
      if va is None: va = self._pvt[total] = self._kgsl(total).va
    return va

  def _release_hardware(self) -> None:
    self.session.close()

  def __repr__(self): return f"QCOMDevice({self.name})"


__all__ = ["QCOMDevice", "KGSLEngine"]
