"""One device used from several threads (DESIGN.md §8: submissions serialized per device): each thread launches and
copies on its own buffers, with wait=True and wait=False, and every result equals numpy's."""
import threading

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.amd.kernels import demo_code_object

THREADS, ROUNDS, N = 4, 12, 1024


@pytest.mark.parametrize("threaded", [False, True], ids=["synchronous", "threaded"])
def test_threads_share_a_device_and_each_gets_numpys_results(threaded):
  with hcq.open("MOCK+AMD", Config(timeout_s=20.0, mock_threaded=threaded)) as dev:
    vadd = dev.load(demo_code_object(), "vadd")
    errors, start = [], threading.Barrier(THREADS)

    def work(t: int):
      rng = np.random.default_rng(t)
      a, b, c = (dev.alloc(4 * N) for _ in range(3))
      h = dev.alloc(4 * N, host=True)                     # host memory too: written by the CPU once the device is done
      try:
        start.wait()
        for r in range(ROUNDS):
          x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
          dev.copyin(a, x)
          dev.copyin(b, y)
          wait = r % 2 == 0
          vadd(a, b, c, N, global_size=(N // 256,), local_size=(256,), wait=wait)
          vadd(c, b, h, N, global_size=(N // 256,), local_size=(256,), wait=not wait)
          np.testing.assert_array_equal(np.frombuffer(dev.copyout(c), np.float32), x + y)
          np.testing.assert_array_equal(np.frombuffer(dev.copyout(h), np.float32), (x + y) + y)
      except BaseException as e:   # noqa: BLE001 - reported by the main thread
        errors.append(f"thread {t}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(t,), name=f"user-{t}") for t in range(THREADS)]
    for th in threads: th.start()
    for th in threads: th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    assert not errors, "\n".join(errors)


def test_a_device_closed_by_another_thread_refuses_work_cleanly():
  dev = hcq.open("MOCK+AMD", Config(timeout_s=5.0))
  vadd = dev.load(demo_code_object(), "vadd")
  a = dev.alloc(4 * N)
  closer = threading.Thread(target=dev.close)
  closer.start()
  closer.join(timeout=30)
  with pytest.raises(hcq.DeviceError, match="closed"): vadd(a, a, a, N, global_size=(N // 256,), local_size=(256,))


@pytest.mark.parametrize("threaded", [False, True], ids=["synchronous", "threaded"])
def test_work_racing_a_close_from_another_thread_is_refused_never_run_on_freed_memory(threaded):
  """Threads keep launching and copying while another closes the device: each call either completes or raises
  'closed'; nothing touches the device's memory after close (a view kept by the caller raises instead)."""
  dev = hcq.open("MOCK+AMD", Config(timeout_s=10.0, mock_threaded=threaded))
  vadd = dev.load(demo_code_object(), "vadd")
  timeline_signal = dev.timeline.signal
  errors, go = [], threading.Event()

  def user(t):
    a = dev.alloc(4 * N)
    x = np.full(N, t, np.float32)
    go.wait()
    try:
      while True:
        dev.copyin(a, x)
        vadd(a, a, a, N, global_size=(N // 256,), local_size=(256,))
        np.testing.assert_array_equal(np.frombuffer(dev.copyout(a), np.float32), 2 * x)
    except hcq.DeviceError as e:
      if "closed" not in str(e): errors.append(f"thread {t}: {e}")
    except BaseException as e:   # noqa: BLE001
      errors.append(f"thread {t}: {type(e).__name__}: {e}")

  threads = [threading.Thread(target=user, args=(t,)) for t in range(3)]
  for th in threads: th.start()
  go.set()
  import time
  time.sleep(0.2)
  dev.close()
  for th in threads: th.join(timeout=60)
  assert not any(th.is_alive() for th in threads) and not errors, errors
  with pytest.raises(ValueError): timeline_signal.value     # released with the device's memory


def test_a_timed_launch_reads_its_own_timestamps_not_those_of_another_threads_launch():
  """The timer signals are shared by every timed launch: another thread's timed launch, which clears them, must wait
  until this one has read them (here it comes right after this launch's wait, its kernel held behind a gate: a
  read after its clear saw zeros and gave the host's time instead of the kernel's)."""
  from hcq.compiler import queue as Q
  from hcq.drivers.amd.packets import COMPUTE
  from hcq.drivers.hcq.engine import FIRST_VENDOR_SLOT
  from hcq.drivers.hcq.runtime import Submission
  from hcq.compiler.ir import UOp
  gate_slot = FIRST_VENDOR_SLOT + 5
  with hcq.open("MOCK+AMD", Config(timeout_s=5.0)) as dev:
    empty = dev.load(demo_code_object(), "empty")
    gate = dev.signals.alloc(0, name="gate")
    closed = dev.compute.build(Q.queue(COMPUTE, Q.wait(Q.signal(gate_slot, "gate"), UOp.variable("open", 0, 2**32 - 1))))
    real_wait, own, others = dev.wait_value, [], []

    def wait_then_another_thread_launches(value):
      real_wait(value)
      dev.wait_value = real_wait
      own.append((dev.timer_start.timestamp, dev.timer_end.timestamp))
      with Submission(dev, dev.compute, "the gate") as sub: sub.add(closed.fill({("param", gate_slot): gate.va, ("var", "open"): 1}))
      th = threading.Thread(target=lambda: empty(global_size=(1,), local_size=(1,), wait=True))
      th.start()
      th.join(0.3)
      others.append(th)

    dev.wait_value = wait_then_another_thread_launches
    seconds = empty(global_size=(1,), local_size=(1,), wait=True)
    gate.value = 1
    others[0].join(10)
    start, end = own[0]
    assert start and end >= start and seconds == (end - start) / (dev.ticks_per_us * 1e6)
