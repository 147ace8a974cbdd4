"""Where the time of a launch on MOCK+AMD goes: a per-stage breakdown of bench/launch.py's loop (N asynchronous
launches of the s_endpgm-only kernel `empty`, one work-group of one thread, then one synchronize), and of a fresh
process that imports hcq, opens MOCK+AMD, loads a code object and checks a 64-float vector add.

    .venv/bin/python bench/mock_launch_profile.py [--launches 200] [--repeat 5] [--fresh 3] [--no-fresh | --fresh-only]

Launch breakdown: the functions of each stage are wrapped (in this process only) by timers that keep exclusive
time on a stack, so that a stage is charged only what it does itself, not what the stages it calls do. Each
wrapper costs ~0.3 us, so the sum is a little above bench/launch.py's figure; the best of --repeat runs is kept
per stage. Stages:
  driver *        drivers/hcq + drivers/amd: argument packing, kernargs, command patching, ring write, commit
  mock doorbell   the doorbell page write, the KFD model's queue lookup, gpu.ring_doorbell
  mock tick/poll  MockOS.tick/tick_kicked and the engines' poll loops (the queues that may progress)
  mock PM4        the PM4 processor's packet loop and its packet handlers other than those below
  mock dispatch   DISPATCH_DIRECT: registers -> emulator arguments (mockgpu/amd/gpu.py)
  emu setup       mockgpu/amd/emu dispatch(): register files, wave ids, LDS/scratch, scheduler set-up
  emu blocks      the translated basic blocks themselves (block lookup and code check included)
  mock signal     RELEASE_MEM (fence write) and the KFD interrupt -> event model
  sync wait       dev.synchronize(): the timeline wait (the work already ran inside the doorbell writes)

Fresh process: one child per run (bytecode caches warm, as after an installation) prints the time of each step;
the best of --fresh runs is shown. The machine this runs on may be loaded: compare figures of one run only.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

_clock = time.perf_counter


class StageTimer:
  """Exclusive time per stage: a wrapped call charges its own stage, minus the time of wrapped calls inside it."""

  def __init__(self):
    self.totals: dict[str, float] = {}
    self.calls: dict[str, int] = {}
    self._stack: list[list] = []     # [stage, start, time of wrapped children]
    self._patched: list[tuple] = []   # (owner, name, original) to undo

  def reset(self) -> None:
    self.totals.clear()
    self.calls.clear()

  def wrap(self, stage: str, fn):
    stack, totals, calls = self._stack, self.totals, self.calls

    def timed(*args, **kw):
      frame = [stage, _clock(), 0.0]
      stack.append(frame)
      try: return fn(*args, **kw)
      finally:
        stack.pop()
        spent = _clock() - frame[1]
        totals[stage] = totals.get(stage, 0.0) + spent - frame[2]
        calls[stage] = calls.get(stage, 0) + 1
        if stack: stack[-1][2] += spent
    timed.__wrapped__ = fn
    return timed

  def patch(self, owner, name: str, stage: str) -> None:
    original = vars(owner)[name] if isinstance(owner, type) and name in vars(owner) else getattr(owner, name)
    self._patched.append((owner, name, original))
    setattr(owner, name, self.wrap(stage, getattr(owner, name)))

  def undo(self) -> None:
    for owner, name, original in reversed(self._patched): setattr(owner, name, original)
    self._patched.clear()


STAGES = ["driver launch", "driver args", "driver kernargs", "driver patch", "driver ring write", "driver commit",
          "mock doorbell", "mock tick/poll", "mock PM4", "mock dispatch", "emu setup", "emu blocks", "mock signal",
          "sync wait"]


def instrument(dev, prog, timer: StageTimer) -> None:
  """Wrap the functions of each stage (classes for the mock, instances for the driver's objects)."""
  from hcq.drivers.hcq import program as hprog
  from hcq.drivers.hcq import ring as hring
  from hcq.mockgpu import mmio, mockos
  from hcq.mockgpu.amd import emu, gpu, kfd, pm4, queues
  from hcq.mockgpu.amd.emu import engine
  P = timer.patch
  P(hprog.Program, "__call__", "driver launch")
  P(type(dev), "launch", "driver launch")
  from hcq.drivers.hcq import cmdbuf
  P(type(prog.layout), "check_and_pack", "driver args")
  P(type(dev.launch_data), "alloc", "driver kernargs")
  P(cmdbuf.CommandBuffer, "fill", "driver patch")
  P(hring.Ring, "write", "driver ring write")
  P(hring.Ring, "commit", "driver commit")
  P(mmio.DoorbellMMIO, "write64", "mock doorbell")
  P(mmio.DoorbellMMIO, "write32", "mock doorbell")
  P(_kfd_class(kfd), "_ring", "mock doorbell")
  P(gpu.MockAMDGPU, "ring_doorbell", "mock doorbell")
  P(mockos.MockOS, "tick", "mock tick/poll")
  if hasattr(mockos.MockOS, "tick_kicked"): P(mockos.MockOS, "tick_kicked", "mock tick/poll")
  P(gpu.MockAMDGPU, "poll", "mock tick/poll")
  for cls in (queues.PM4Queue, queues.SDMAQueue, queues.AQLQueue): P(cls, "_poll", "mock tick/poll")
  P(pm4.PM4Engine, "run", "mock PM4")
  P(gpu.MockAMDGPU, "dispatch_direct", "mock dispatch")
  P(emu, "dispatch", "emu setup")
  P(engine, "_block", "emu blocks")
  timer._patched.append((pm4.PM4Engine, "HANDLERS", pm4.PM4Engine.HANDLERS))
  handlers = dict(pm4.PM4Engine.HANDLERS)
  release = pm4.PM4Engine._release_mem
  for op, fn in handlers.items():
    if fn is release: handlers[op] = timer.wrap("mock signal", fn)
  pm4.PM4Engine.HANDLERS = handlers
  P(_kfd_class(kfd), "interrupt", "mock signal")
  P(type(dev), "_synchronize", "sync wait")
  # the translated blocks: charge blk.fn to "emu blocks" by wrapping what _block returns
  inner_block = engine._block.__wrapped__
  wrapped_fns: dict = {}

  def block_with_timed_fn(*args, **kw):
    blk = inner_block(*args, **kw)
    if id(blk) not in wrapped_fns:
      fn = blk.fn
      timer._patched.append((blk, "fn", fn))
      blk.fn = timer.wrap("emu blocks", fn)
      wrapped_fns[id(blk)] = blk
    return blk
  engine._block = timer.wrap("emu blocks", block_with_timed_fn)


def _kfd_class(kfd_module):
  for value in vars(kfd_module).values():
    if isinstance(value, type) and "_ring" in vars(value) and "interrupt" in vars(value): return value
  raise RuntimeError("no KFD model class with _ring/interrupt in mockgpu.amd.kfd")


def launch_breakdown(launches: int, repeat: int, emulator: bool = True) -> None:
  import hcq
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("MOCK+AMD") as dev:
    prog = dev.load(demo_code_object(), "empty")
    from hcq.mockgpu.amd import emu
    real_dispatch = emu.dispatch
    gpus = [g for d in dev.os.devices for g in getattr(d, "gpus", ())]
    real_emus = [g._emu for g in gpus]
    if not emulator:     # the "without the emulator" run: a dispatch returns at once (no wave runs)
      emu.dispatch = lambda memory, **kw: emu.DispatchStats(waves=1, wave_instructions=1, seconds=0.0)

      class NoWaves:     # the GPU's emulator object (MockAMDGPU._emu), whose start() it calls for DISPATCH_DIRECT
        ScratchSetup = emu.ScratchSetup
        @staticmethod
        def start(memory, **kw): return emu.DispatchStats(waves=1, wave_instructions=1, seconds=0.0)
      for g in gpus: g._emu = NoWaves

    bound = dev.bind(prog, global_size=(1,), local_size=(1,))

    def loop(launch=lambda: prog(global_size=(1,), local_size=(1,)), clock=_clock):
      t0 = clock()
      for _ in range(launches): launch()
      dev.synchronize()
      return (clock() - t0) / launches

    def cpu_loop(launch=lambda: prog(global_size=(1,), local_size=(1,))): return loop(launch, time.process_time)

    for _ in range(10): prog(global_size=(1,), local_size=(1,))
    dev.synchronize()
    plain = min(loop() for _ in range(repeat))
    plain_cpu = min(cpu_loop() for _ in range(repeat))
    bound_wall = min(loop(bound) for _ in range(repeat))
    bound_cpu = min(cpu_loop(bound) for _ in range(repeat))
    timer = StageTimer()
    instrument(dev, prog, timer)
    best: dict[str, float] = {}
    walls = []
    for _ in range(repeat):
      timer.reset()
      walls.append(loop())
      for stage, t in timer.totals.items(): best[stage] = min(best.get(stage, t), t)
    what = "" if emulator else ", WITHOUT the emulator (dispatch() stubbed: driver + mock only)"
    print(f"{dev.name}: {launches} async launches of an empty kernel (1 work-group of 1 thread) + 1 synchronize{what}")
    print(f"  uninstrumented: {plain * 1e6:7.1f} us per launch wall, {plain_cpu * 1e6:7.1f} us CPU time "
          f"(best of {repeat} each)")
    print(f"  bound (IB):     {bound_wall * 1e6:7.1f} us per launch wall, {bound_cpu * 1e6:7.1f} us CPU time")
    print(f"  instrumented:   {min(walls) * 1e6:7.1f} us per launch; exclusive time per stage (best of {repeat}):")
    total = 0.0
    timer.undo()
    emu.dispatch = real_dispatch
    for g, e in zip(gpus, real_emus): g._emu = e
    for stage in STAGES + sorted(set(best) - set(STAGES)):
      if stage not in best: continue
      us = best[stage] / launches * 1e6
      total += us
      print(f"    {stage:<18} {us:7.1f} us   ({timer.calls.get(stage, 0) / launches:.1f} calls per launch)")
    print(f"    {'sum':<18} {total:7.1f} us")


FRESH = r"""
import sys; sys.dont_write_bytecode = False   # the caches are written even under PYTHONDONTWRITEBYTECODE
import time
t = [time.perf_counter()]
import numpy as np; t.append(time.perf_counter())
import hcq; t.append(time.perf_counter())
from hcq.drivers.amd.kernels import demo_code_object
dev = hcq.open("MOCK+AMD"); t.append(time.perf_counter())
p = dev.load(demo_code_object(), "vadd"); t.append(time.perf_counter())
a = np.arange(64, dtype=np.float32); b = np.ones(64, np.float32)
da, db, dc = dev.alloc(256), dev.alloc(256), dev.alloc(256)
dev.copyin(da, a); dev.copyin(db, b); t.append(time.perf_counter())
p(da, db, dc, 64, global_size=(1,), local_size=(64,)); t.append(time.perf_counter())
assert np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b); t.append(time.perf_counter())
dev.close(); t.append(time.perf_counter())
print(" ".join(f"{b - a:.6f}" for a, b in zip(t, t[1:])))
"""
FRESH_STEPS = ["import numpy", "import hcq", "hcq.open(MOCK+AMD)", "dev.load(vadd)", "alloc + copyin",
               "launch (first dispatch)", "copyout + check", "close"]


def fresh_breakdown(runs: int) -> None:
  # the child inherits this environment (it opens MOCK+AMD by name and writes bytecode caches whatever
  # PYTHONDONTWRITEBYTECODE says): a bench script reads no environment variable itself
  cmd = [sys.executable, "-c", FRESH]
  subprocess.run(cmd, capture_output=True, cwd="/", check=True)    # writes the bytecode caches
  rows = []
  for _ in range(runs):
    t0 = _clock()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd="/", check=True)
    wall = _clock() - t0
    rows.append((wall, [float(x) for x in r.stdout.split()]))
  wall, steps = min(rows)
  print(f"fresh process (import hcq, open MOCK+AMD, load, 64-float vector add checked): best of {runs} "
        f"{wall * 1e3:.0f} ms wall (all: {', '.join(f'{w * 1e3:.0f}' for w, _ in rows)} ms)")
  for name, s in zip(FRESH_STEPS, steps): print(f"    {name:<24} {s * 1e3:7.1f} ms")
  print(f"    {'interpreter start + exit':<24} {(wall - sum(steps)) * 1e3:7.1f} ms")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--launches", type=int, default=200)
  ap.add_argument("--repeat", type=int, default=7)
  ap.add_argument("--fresh", type=int, default=3, help="fresh-process runs")
  ap.add_argument("--no-fresh", action="store_true")
  ap.add_argument("--fresh-only", action="store_true", help="only the fresh-process breakdown")
  args = ap.parse_args(argv)
  load = os.getloadavg()[0]
  print(f"load average {load:.1f} on {os.cpu_count()} CPUs{' (loaded: figures are noisy)' if load > os.cpu_count() else ''}")
  if not args.fresh_only:
    launch_breakdown(args.launches, args.repeat)
    launch_breakdown(args.launches, args.repeat, emulator=False)
  if not args.no_fresh: fresh_breakdown(args.fresh)
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
