"""Queue programs (hcq.compiler.queue) executed on the CPU device: one thread per queue, signals in host memory.

This is the CPU's "lowering" of the queue IR: each element is interpreted in order. It makes the cross-queue
ordering that QueueScheduler produces observable: a queue really runs concurrently with the others, and only its
waits hold it back.

  runner = CPUQueueRunner(dev, bind={signal_uop: Buffer, buffer_uop: Buffer, ...}, var_vals={var_uop: int})
  runner.run(sched.programs())      # raises hcq.Timeout naming the signal when a wait never completes
"""
from __future__ import annotations

import ctypes
import threading
import time

from ...compiler.ir import Ops, UOp
from ...compiler.queue import element_kind
from ...errors import DeviceError, QueueError, Timeout
from ..hcq import Buffer


class CPUQueueRunner:
  def __init__(self, device, bind: dict, var_vals: dict | None = None, timeout_s: float | None = None,
               copy_delay_s: float = 0.0):
    self.device, self.bind, self.var_vals = device, dict(bind), dict(var_vals or {})
    self.timeout_s = device.timeout_s if timeout_s is None else timeout_s
    self.copy_delay_s = copy_delay_s   # tests slow copies down to make missing waits visible
    self.log: list[tuple[str, str, float]] = []   # (queue, element kind, time) in completion order
    self._lock = threading.Lock()

  def _buf(self, u: UOp) -> Buffer:
    b = self.bind.get(u)
    if not isinstance(b, Buffer): raise DeviceError(f"{self.device.name}: queue operand {u.tag or u.arg} is not bound to a Buffer")
    return b

  def _value(self, u: UOp) -> int:
    if u.const_value is not None: return int(u.const_value)
    if u in self.var_vals: return int(self.var_vals[u])
    raise DeviceError(f"{self.device.name}: queue value {u.arg!r} has no value (pass it in var_vals)")

  def _exec(self, qname: str, pos: int, el: UOp):
    kind = element_kind(el)
    if kind == "wait":
      sig, want = self._buf(el.src[0]), self._value(el.src[1])
      deadline = time.monotonic() + self.timeout_s
      while (seen := ctypes.c_uint64.from_address(sig.va).value) < want:
        if time.monotonic() > deadline:
          raise Timeout(f"{self.device.name} queue {qname} element {pos}: signal {el.src[0].tag}", want, seen, self.timeout_s)
        time.sleep(0.0002)
    elif kind == "store": ctypes.c_uint64.from_address(self._buf(el.src[0]).va).value = self._value(el.src[1])
    elif kind == "timestamp": ctypes.c_uint64.from_address(self._buf(el.src[0]).va).value = time.perf_counter_ns()
    elif kind == "barrier": pass   # host memory is coherent; the GIL orders the interpreter's stores
    elif kind == "copy":
      dst, src, n = self._buf(el.src[0]), self._buf(el.src[1]), self._value(el.src[2])
      if n > dst.size or n > src.size: raise QueueError(qname, f"element {pos}: copy of {n} bytes overruns {dst} or {src}")
      if self.copy_delay_s: time.sleep(self.copy_delay_s)
      ctypes.memmove(dst.va, src.va, n)
    elif kind == "call":
      prog = el.src[0].arg
      args = [self._buf(s) if s.op is Ops.PARAM else self._value(s) for s in el.src[1:]]
      prog.handle(*args, global_size=prog.global_size, local_size=prog.local_size)
    with self._lock: self.log.append((qname, kind, time.perf_counter()))

  def run(self, programs: dict[str, UOp]) -> None:
    errors: list[BaseException] = []
    def worker(name: str, prog: UOp):
      try:
        for pos, el in enumerate(prog.src): self._exec(name, pos, el)
      except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
        errors.append(e)
    threads = [threading.Thread(target=worker, args=(n, p), name=f"hcq-cpu-queue-{n}") for n, p in programs.items()]
    for t in threads: t.start()
    for t in threads: t.join(self.timeout_s * 2 + 5)
    if any(t.is_alive() for t in threads): raise Timeout(f"{self.device.name}: queue threads to finish", timeout_s=self.timeout_s * 2 + 5)
    if errors: raise errors[0]
