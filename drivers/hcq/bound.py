"""Bound launches: launches recorded once (arguments checked and packed, command buffers built, kernel arguments in
device memory) and replayed with one small submission each run. Nothing recorded changes between runs, so a run
never waits for the previous one."""
from __future__ import annotations

from ...errors import DeviceError
from .device import Buffer
from .engine import V_TIMELINE


class BoundLaunch:
  """launches: [(program, args, global_size, local_size), ...], run in order (each after the previous one finished).
  The device records them (HCQDevice._record) and gives the words of a run (HCQDevice._replay_words)."""

  def __init__(self, dev, launches):
    if not launches: raise DeviceError(f"{dev.name}: nothing to bind")
    dev._check_open()
    self.dev = dev
    planned = []
    for prog, args, global_size, local_size in launches:   # check everything before the device records anything
      gs = tuple(global_size) if not isinstance(global_size, int) else (global_size,)
      ls = tuple(local_size) if not isinstance(local_size, int) else (local_size,)
      explicit = prog.layout.check_and_pack(args, dev.buffer_type, dev)
      shape = prog.shape(gs, ls, False, prog.layout.shared_layout(args)[1] if prog.layout.dynamic_shared else None)
      planned.append((prog, shape, explicit))
    self._keep = [a for _, args, _, _ in launches for a in args if isinstance(a, Buffer)]   # alive while bound
    self.kernels = [prog.name for prog, *_ in launches]
    with dev.lock: self.recording = dev._record(planned)
    self.runs = 0

  def __call__(self, wait: bool = False) -> int:
    """Run the bound launches; returns the timeline value of the run (waits for it when wait=True)."""
    dev = self.dev
    engine = dev.compute
    value, mark = dev._begin(engine)       # the runtime's submission sequence (see Submission)
    try:
      engine.write(dev._replay_words(self.recording) + engine.signal_cmd.fill({V_TIMELINE: value}))
      dev._replayed(self.recording)
    except BaseException:
      dev._abandon(engine, value, mark)
      raise
    self.runs += 1
    dev._commit(engine, value, mark, True, self)
    if wait: dev.wait_value(value)
    return value

  def __str__(self): return f"bound launches of {', '.join(self.kernels)}"
