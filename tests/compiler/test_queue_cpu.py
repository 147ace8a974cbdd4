"""Queue programs built by QueueScheduler, executed on the CPU device with one thread per queue: the waits it
inserts are exactly what makes the result right (stripping them breaks it)."""
import numpy as np
import pytest

import hcq
from hcq.compiler import KernelInfo, Ops, UOp, dtypes
from hcq.compiler.queue import QueueScheduler, buffer, call, copy, program, signal, wait
from hcq.drivers.cpu.queue import CPUQueueRunner

pytestmark = pytest.mark.tools("cc")
N = 256


def double_kernel():
  src, dst = UOp.param(0, dtypes.float32, N, readonly=True), UOp.param(1, dtypes.float32, N)
  i = UOp.special(N, "gidx0")
  return dst.index(i).store(src.index(i).load() * 2.0).sink(arg=KernelInfo("double"))


def build(dev):
  prog = dev.compile(double_kernel())
  k = program("double", prog, (N, 1, 1), (1, 1, 1))
  names = ["a", "b", "c", "h", "h2", "h3"]
  uops = {n: buffer(10 + i, N * 4, n) for i, n in enumerate(names)}
  bufs = {n: dev.alloc(N * 4) for n in names}
  sigs = {"COMPUTE": signal(0, "compute"), "COPY": signal(1, "copy")}
  bind = {uops[n]: bufs[n] for n in names} | {s: dev.alloc(16) for s in sigs.values()}
  h, h3 = np.arange(N, dtype=np.float32), np.arange(N, dtype=np.float32) * -3
  dev.copyin(bufs["h"], h); dev.copyin(bufs["h3"], h3)
  s = QueueScheduler(sigs)
  a, b, c = uops["a"], uops["b"], uops["c"]
  s.submit("COPY", copy(a, uops["h"], N * 4))                      # writes a
  s.submit("COMPUTE", call(k, a, b), reads=(a,), writes=(b,))      # RAW on a
  s.submit("COPY", copy(uops["h2"], b))                            # RAW on b (size: the buffers')
  s.submit("COPY", copy(a, uops["h3"], N * 4))                     # WAR on a (the kernel read it)
  s.submit("COMPUTE", call(k, a, c), reads=(a,), writes=(c,))      # RAW on a again
  return s.programs(), bind, bufs, h, h3


def out(dev, buf): return np.frombuffer(dev.copyout(buf), np.float32)


def test_scheduled_queues_run_concurrently_and_correctly():
  with hcq.open("CPU") as dev:
    progs, bind, bufs, h, h3 = build(dev)
    assert sum(e.op is Ops.INS and e.arg[0] == "wait" for p in progs.values() for e in p.src) == 3
    runner = CPUQueueRunner(dev, bind, timeout_s=5, copy_delay_s=0.03)
    runner.run(progs)
    np.testing.assert_array_equal(out(dev, bufs["h2"]), h * 2)
    np.testing.assert_array_equal(out(dev, bufs["c"]), h3 * 2)


def test_without_the_waits_the_result_is_wrong():
  with hcq.open("CPU") as dev:
    progs, bind, bufs, h, h3 = build(dev)
    stripped = {n: UOp(Ops.LINEAR, tuple(e for e in p.src if not (e.op is Ops.INS and e.arg[0] == "wait")), p.arg)
                for n, p in progs.items()}
    CPUQueueRunner(dev, bind, timeout_s=5, copy_delay_s=0.2).run(stripped)
    assert not np.array_equal(out(dev, bufs["h2"]), h * 2)


def test_a_wait_that_never_completes_times_out_naming_the_signal():
  with hcq.open("CPU") as dev:
    sig = signal(0, "never")
    prog = UOp(Ops.LINEAR, (wait(sig, 5),))
    with pytest.raises(hcq.Timeout, match="signal \\('signal', 'never'\\) to reach 5 \\(last seen 0\\)"):
      CPUQueueRunner(dev, {sig: dev.alloc(16)}, timeout_s=0.2).run({"COMPUTE": prog})


def test_an_unbound_kernel_buffer_is_named():
  from hcq.errors import DeviceError
  with hcq.open("CPU") as dev:
    progs, bind, bufs, h, h3 = build(dev)
    del bind[next(u for u in bind if u.tag == ("buffer", "c"))]    # the second kernel's output
    with pytest.raises(DeviceError, match="not bound to a Buffer"):
      CPUQueueRunner(dev, bind, timeout_s=5).run(progs)
