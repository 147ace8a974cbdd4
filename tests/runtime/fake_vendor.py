"""A fake vendor on the HCQ runtime, to prove the runtime is generic: its own queue format (tuples of words: opcode,
operands), an in-process engine per queue (a thread that runs the words it is given), kernels that are Python
functions, device memory the CPU cannot see (copies go through the runtime's staging), and faults reported through the
completion hook. Nothing here comes from drivers/amd."""
import ctypes
import struct
import threading
import time

from hcq.compiler.ir import PatternMatcher
from hcq.compiler.queue import QPat
from hcq.drivers.hcq import Buffer, Program
from hcq.drivers.hcq.cmdbuf import Sym, hi, lo
from hcq.drivers.hcq.engine import Engine, packets, value_of
from hcq.drivers.hcq.runtime import HCQDevice
from hcq.errors import DeviceError, GPUFault

WAIT, STORE, STAMP, COPY, CALL = range(1, 6)       # opcode word, then operands; 64-bit operands as lo, hi
SIZES = {WAIT: 5, STORE: 5, STAMP: 3, COPY: 6, CALL: 4}
KERNELS = {}                                        # kernel id -> fn(device, args_address); "the code object"


def _u64(a: int) -> ctypes.c_uint64: return ctypes.c_uint64.from_address(a)


def _packet_table(name):
  op = lambda code, *vals: packets(name, [code] + [w for v in vals for w in (lo(v), hi(v))])
  return PatternMatcher([
    (QPat.wait("sig", "value"), lambda ctx, sig, value: op(WAIT, value_of(sig), value_of(value))),
    (QPat.store("dst", "value"), lambda ctx, dst, value: op(STORE, value_of(dst), value_of(value))),
    (QPat.timestamp("dst"), lambda ctx, dst: op(STAMP, value_of(dst) + 8)),
    (QPat.barrier("ins"), lambda ctx, ins: packets(name, [])),
    (QPat.copy("dst", "src", "n"), lambda ctx, dst, src, n: packets(name, [COPY, lo(value_of(dst)), hi(value_of(dst)),
                                                                          lo(value_of(src)), hi(value_of(src)), value_of(n)])),
    (QPat.call("prog", "call"), lambda ctx, prog, call: packets(name, [CALL, prog.arg.handle, lo(Sym(("var", "args"))),
                                                                       hi(Sym(("var", "args")))])),
  ])


class FakeEngine(Engine):
  """Words go to a list; commit() hands them to the engine's thread, which runs them in order."""
  def __init__(self, name, dev, links):
    self.dev, self.pending, self.queue, self.fault = dev, [], [], None
    self.cond, self.busy, self.stop = threading.Condition(), False, False
    super().__init__(name, _packet_table(name), None, links)
    self.thread = threading.Thread(target=self._run, name=f"fake-{name}", daemon=True)
    self.thread.start()

  def mark(self): return len(self.pending)
  def rollback(self, mark): del self.pending[mark:]
  def write(self, words): self.pending += list(words)

  def commit(self):
    with self.cond:
      self.queue += self.pending
      self.pending = []
      self.cond.notify()

  def _run(self):
    while True:
      with self.cond:
        while not self.queue and not self.stop: self.cond.wait()
        if self.stop: return
        w = self.queue
        n = SIZES[w[0]]
        op, args, self.queue = w[0], w[1:n], w[n:]
      q = lambda i: args[i] | args[i + 1] << 32
      try:
        if op == WAIT:
          while _u64(q(0)).value < q(2) and not self.stop: time.sleep(1e-4)
        elif op == STORE: _u64(q(0)).value = q(2)
        elif op == STAMP: _u64(q(0)).value = time.monotonic_ns() // 10    # a 100 MHz clock
        elif op == COPY: ctypes.memmove(q(0), q(2), args[4])
        elif op == CALL: KERNELS[args[0]](self.dev, q(1))
      except GPUFault as e:                # the engine stops; the host hears of it at its next wait
        self.fault, self.stop = e, True

  def close(self):
    with self.cond: self.stop = True; self.cond.notify()
    self.thread.join(timeout=5)


class FakeLayout:
  """The fake ArgLayout: every argument a Buffer, passed as a u64 address."""
  dynamic_shared = False
  def __init__(self, n): self.segment_size = 8 * n
  def shared_layout(self, args): return [], 0
  def hidden_values(self, grid, block, extra): return b""
  def check_and_pack(self, args, buffer_type, device):
    if len(args) != self.segment_size // 8 or not all(isinstance(a, buffer_type) for a in args):
      raise DeviceError(f"fake kernel takes {self.segment_size // 8} buffers")
    return struct.pack(f"<{len(args)}Q", *(a.va for a in args))


class FakeProgram(Program):
  def launch_handle(self, shape): return self.kid     # the call element carries the kernel id


class FakeDevice(HCQDevice):
  buffer_type = Buffer
  name = label = "FAKE:0"
  ticks_per_us = 100.0                              # STAMP: monotonic_ns // 10

  def __init__(self, os, config):
    super().__init__(os, config)
    self._keep = {}
    self._start_runtime()

  def _raw(self, size):
    raw = (ctypes.c_char * size)()
    self._keep[ctypes.addressof(raw)] = raw
    return ctypes.addressof(raw), memoryview(raw).cast("B")

  def _host_memory(self, size): return self._raw(size)
  def _make_engines(self, links): return {n: FakeEngine(n, self, links) for n in ("compute", "copy")}

  def _alloc(self, nbytes, host=False):
    va, view = self._raw(nbytes)
    return Buffer(self, va, nbytes, cpu_view=view if host else None, kind="host" if host else "device")

  def _free_memory(self, buf): self._keep.pop(buf.va)

  def _load(self, image, name):
    kid, nargs = struct.unpack("<II", image)
    prog = FakeProgram(self, name or f"k{kid}", FakeLayout(nargs), 1024)
    prog.kid = kid
    return prog

  def _launch_words(self, prog, shape, explicit, value):
    va, view = self.launch_data_slot(len(explicit), value)
    view[:] = explicit
    return shape.cmd.fill({("var", "args"): va, ("var", "timeline"): value})

  def _block(self, seconds):
    for e in self.engines.values():
      if e.fault is not None: raise e.fault
    time.sleep(seconds)
