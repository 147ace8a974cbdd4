"""Preemptible dispatches of the mock AMD GPU (issue #14): a dispatch runs in time slices (emu.start), so a kernel
that never ends is bounded by the host's timeout, and destroying its queue (close()) or a Ctrl-C in the host's thread
ends it at once, in the synchronous and the threaded mock; a dispatch resumed slice by slice through PM4 and AQL
gives the results of an unsliced one."""
import os
import signal
import subprocess
import sys
import time

import pytest

import hcq
from hcq.autogen import kfd
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.cowriter import KernelSpec, write_code_object
from hcq.config import Config
from hcq.errors import QueueError
from hcq.mockgpu.amd import gpu as G
from hcq.mockgpu.amd.emu import engine
from mock_kfd_harness import Harness
from test_mock_corpus import launch
from tests.fixtures.opencl.kernels import KERNELS

MODES = pytest.mark.parametrize("threaded", [False, True], ids=["sync", "threaded"])


def endless_code_object() -> bytes:
  """One kernel, no arguments, that branches to itself forever."""
  return write_code_object([KernelSpec("spin", assemble("loop:\n  s_branch loop\n  s_endpgm"))])


@MODES
def test_an_endless_kernel_is_bounded_by_the_timeout_and_close_is_prompt(threaded):
  dev = hcq.open("MOCK+AMD", Config(timeout_s=1.0, mock_threaded=threaded))
  try:
    spin = dev.load(endless_code_object(), "spin")
    with pytest.raises(hcq.Timeout) as e:
      spin(global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
    assert e.value.timeout_s == 1.0           # bounded by the configured timeout, which it names
  finally:
    waits = []
    dev.wait_value = lambda value: waits.append(value)    # a prompt close does not wait for the endless work again
    dev.close()
  assert waits == [] and dev.closed        # counted, not timed


def _spin_submit(h, q):
  """Submit the endless kernel, then a fence (signal value 1); returns the ring position of its DISPATCH_DIRECT."""
  prog = h.load(endless_code_object())
  words = prog.pm4_dispatch([], (1, 1, 1), (1, 1, 1))
  at = q.put + len(words) - 7                  # the DISPATCH_DIRECT (5 dwords) and an EVENT_WRITE (2) end the launch
  assert words[len(words) - 7] >> 8 & 0xFF == 0x15
  h.signals.u64()[0] = 0
  q.submit(words + h.release_signal(h.signals.va, 1))
  return at


def test_the_doorbell_write_returns_after_a_slice_and_the_dispatch_stays_the_queues_work():
  h = Harness(Config(mock_threaded=False, timeout_s=2))
  try:
    q = h.queue("compute")
    mq = h.gpu.queues[q.queue_id]
    at = _spin_submit(h, q)
    assert mq.engine.running[0].slices == 1      # the doorbell write ran one slice, then returned (counted, not timed)
    # the read pointer stays at the DISPATCH_DIRECT: the packets before it are done, the fence after it is not
    assert q.rptr == at and h.signals.u64()[0] == 0
    assert mq.pending and mq.blocked and "DISPATCH_DIRECT" in mq.blocked_on and h.gpu.may_progress
    slices = mq.engine.running[0].slices
    for _ in range(3): h.os.sleep(0)         # the host's ticks resume it, a slice each
    assert mq.engine.running[0].slices >= slices + 3 and q.rptr == at and h.signals.u64()[0] == 0
    memory = h.gpu.ranges

    def pooled(): return [*memory.dispatch_shapes.values(), *memory.dispatch_launches.values()]
    assert not pooled()                        # the dispatch's pooled set-up is its own while it runs
    kfd.AMDKFD_IOC_DESTROY_QUEUE(h.kfd, queue_id=q.queue_id)     # drops the suspended dispatch: runs no more slices
    assert mq.engine.running is None and len(pooled()) == 1     # dropped: its set-up went back
    assert h.gpu.stats["dispatches"] == 0
  finally: h.os.close()


def test_a_ctrl_c_while_a_slice_runs_stops_the_queue_and_leaves_the_mock_usable(monkeypatch):
  """A KeyboardInterrupt raised inside a block of the dispatch (the host's thread runs the synchronous mock): the
  dispatch is dropped, the queue stops with a QueueError reported through a KFD event, the interrupt goes on to the
  host, and the GPU runs other queues as before."""
  h = Harness(Config(mock_threaded=False, timeout_s=2))
  try:
    q = h.queue("compute")
    mq = h.gpu.queues[q.queue_id]
    _spin_submit(h, q)
    assert mq.engine.running is not None
    real_block = engine._block
    calls = []

    def interrupting_block(*args):
      calls.append(1)
      if len(calls) == 10: raise KeyboardInterrupt
      return real_block(*args)
    monkeypatch.setattr(engine, "_block", interrupting_block)
    with pytest.raises(KeyboardInterrupt):
      while True: h.os.sleep(0)              # the host waits: ticks resume the dispatch
    monkeypatch.setattr(engine, "_block", real_block)
    assert mq.engine.running is None and isinstance(mq.error, QueueError) and "interrupted" in str(mq.error)
    assert not mq.pending and not h.gpu.may_progress
    result, events = h.wait(timeout_ms=10)
    assert result == kfd.KFD_IOC_WAIT_RESULT_COMPLETE and events[2].hw_exception_data.gpu_id == h.gpu_id
    # another queue of the same GPU works
    k = KERNELS["lds_reduce"]
    data = k.inputs(seed=1)
    k.check(launch(h, k, data, h.queue("compute")), data)
    kfd.AMDKFD_IOC_DESTROY_QUEUE(h.kfd, queue_id=q.queue_id)
  finally: h.os.close()


@pytest.mark.parametrize("at", [1, 2], ids=["before the polls", "between polls"])
def test_a_ctrl_c_in_a_doorbell_write_outside_the_poll_leaves_the_queue_to_the_next_tick(at, monkeypatch):
  """The interrupt arrives in the doorbell write outside the queue's poll (here: in a check of the other engines,
  before the GPU polls the queue alone or after a poll): the queue, blocked on memory, is still where the host's
  next ticks look for work."""
  from test_mock_doorbell_path import fence, wait_ge
  h = Harness(Config(mock_threaded=False, timeout_s=2))
  try:
    q = h.queue("compute")
    sig = h.signals
    sig.u64()[:] = 0
    q.submit(fence(sig.va + 8, 1))          # past the creation kick: the next doorbell is polled by the GPU alone
    real = type(h.os).others_idle
    calls = []

    def interrupted(self, engine):
      calls.append(1)
      if len(calls) < at: return real(self, engine)
      monkeypatch.setattr(type(h.os), "others_idle", real)
      raise KeyboardInterrupt
    monkeypatch.setattr(type(h.os), "others_idle", interrupted)
    with pytest.raises(KeyboardInterrupt): q.submit(wait_ge(sig.va + 128, 1) + fence(sig.va, 1))
    (queue,) = h.gpu.queues.values()
    assert queue.error is None and queue in h.gpu._to_poll and h.gpu.may_progress
    sig.u32()[32] = 1
    h.os.sleep(0)                            # the host's wait ticks the engines
    assert sig.u64()[0] == 1
  finally: h.os.close()


@MODES
@pytest.mark.parametrize("via", ["pm4", "aql"])
def test_a_dispatch_resumed_after_every_block_gives_the_unsliced_results(threaded, via, monkeypatch):
  h = Harness(Config(mock_threaded=threaded, timeout_s=10))
  try:
    queue = h.queue("compute" if via == "pm4" else "aql")
    resumes = []
    real_resume = G.MockAMDGPU.resume
    monkeypatch.setattr(G.MockAMDGPU, "resume", lambda self, running: resumes.append(1) or real_resume(self, running))
    for name in ("matmul_tiled", "lds_reduce", "divergent_loop"):
      k = KERNELS[name]
      data = k.inputs(seed=2)
      with monkeypatch.context() as m:
        m.setattr(engine, "SLICE_SECONDS", 1e9)      # in one slice, however loaded the machine
        plain = launch(h, k, data, queue, via=via)
      assert not resumes
      with monkeypatch.context() as m:
        m.setattr(engine, "SLICE_SECONDS", 0.0)
        m.setattr(engine, "SLICE_CHECK_BLOCKS", 1)
        sliced = launch(h, k, data, queue, via=via)
      assert len(resumes) >= 3, name
      resumes.clear()
      assert {n: v.tobytes() for n, v in sliced.items()} == {n: v.tobytes() for n, v in plain.items()}, name
      k.check(sliced, data)
  finally: h.os.close()


CHILD = """
import sys
import hcq
from hcq.compiler.isa.amd.asm import assemble
from hcq.compiler.isa.amd.cowriter import KernelSpec, write_code_object
from hcq.config import Config
def endless_code_object():
  return write_code_object([KernelSpec("spin", assemble("loop:\\n  s_branch loop\\n  s_endpgm"))])
dev = hcq.open("MOCK+AMD", Config(timeout_s=60.0, mock_threaded=sys.argv[1] == "1"))
spin = dev.load(endless_code_object(), "spin")
print("waiting", flush=True)
try: spin(global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
except KeyboardInterrupt:
  dev.close()
  print("closed", flush=True)
  sys.exit(0)
print("returned", flush=True)
sys.exit(1)
"""


@MODES
def test_ctrl_c_during_an_endless_kernel_closes_the_device_promptly(threaded):
  proc = subprocess.Popen([sys.executable, "-c", CHILD, "1" if threaded else "0"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  try:
    assert proc.stdout.readline() == "waiting\n", proc.stderr.read()
    time.sleep(0.3)                            # inside the wait: the kernel runs
    os.kill(proc.pid, signal.SIGINT)
    # the child's timeout is 60 s: a Ctrl-C that waited for it would end in TimeoutExpired here (no duration asserted)
    out, err = proc.communicate(timeout=20)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.communicate()
  assert proc.returncode == 0 and out == "closed\n", err


@MODES
def test_a_bug_of_the_queue_model_stops_that_queue_with_the_error_named_and_the_gpu_runs_on(threaded, monkeypatch):
  """An exception that is no queue error (a bug of the model) used to end the threaded worker (every queue of the
  GPU stopped, waits ran into their timeouts) and was reported as an 'interrupt'. Now only that queue stops, with a
  QueueError naming the exception (the model's record), reported to the driver as KFD reports a queue failure: a
  hardware-exception event at its next wait, well within the timeout; the threaded worker lives on."""
  from hcq.mockgpu.amd import queues
  with hcq.open("MOCK+AMD", Config(timeout_s=5.0, mock_threaded=threaded)) as dev:
    spin = dev.load(endless_code_object(), "spin")
    real = queues.PM4Queue._poll
    def broken(self):
      raise RuntimeError("model bug")
    monkeypatch.setattr(queues.PM4Queue, "_poll", broken)
    with pytest.raises(hcq.GPUFault, match="hardware exception"):     # the event, before the wait's Timeout
      spin(global_size=1, local_size=1, wait=True)
    monkeypatch.setattr(queues.PM4Queue, "_poll", real)
    gpu = next(g for d in dev.os.devices for g in getattr(d, "gpus", []))
    errors = [str(q.error) for q in gpu.queues.values() if q.error is not None]
    assert len(errors) == 1 and "RuntimeError: model bug" in errors[0] and "interrupted" not in errors[0]
    if threaded: assert gpu._worker is not None and gpu._worker.is_alive()
