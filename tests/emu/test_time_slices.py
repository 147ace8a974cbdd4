"""Time slices of the emulator (emu.start / engine.SuspendedDispatch): a dispatch run slice by slice, suspended and
resumed between any two blocks, writes exactly what it writes unsliced, faults at the same address and counts the
same wave-instructions against its budget; while suspended it keeps its pooled set-up to itself and the host's
numpy error state untouched."""
import numpy as np
import pytest

from hcq.errors import GPUFault
from hcq.mockgpu.amd import emu
from hcq.mockgpu.amd.emu import GPUMemory, engine
from tests.fixtures.opencl import kernels
from tests.fixtures.opencl.kernels import KERNELS

from . import loader
from .loader import HostBuffers, Kernel

# the corpus kernels that run more than one block (loops, barriers, divergence, LDS): suspended at least once
MULTI_BLOCK = {"atomics_global", "atomics_lds", "branch", "copy_u32", "divergent_loop", "intdiv", "lds_reduce",
               "lds_scan", "math", "matmul_tiled", "saxpy", "uniform_loop"}


@pytest.fixture
def tiny_slices(monkeypatch):
  """Every slice ends after one block: the most suspensions a dispatch can have."""
  monkeypatch.setattr(engine, "SLICE_SECONDS", 0.0)
  monkeypatch.setattr(engine, "SLICE_CHECK_BLOCKS", 1)


def _finish(running, log: list):
  """Resume a started dispatch until it ends; log: slices resumed."""
  slices = 0
  while not isinstance(running, emu.DispatchStats):
    stats = running.resume()
    slices += 1
    if stats is not None: running = stats
  log.append(slices)
  return running


def _run(name: str, monkeypatch, sliced: bool, seed: int = 0, bases: list | None = None, **overrides):
  """Kernel `name` on fresh memory: (stats, {buffer: bytes after the dispatch}, slices resumed). bases: gets the
  address the code object was loaded at."""
  k = KERNELS[name]
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, k.code_object(), k.name)
  if bases is not None: bases.append(prog.base)
  data = k.inputs(seed=seed)
  args, views = [], {}
  for a in k.args:
    if isinstance(a, kernels.Scalar): args.append(data[a.name])
    else:
      addr, views[a.name] = bufs.array(data[a.name])
      args.append(overrides.get(a.name, addr))
  log = []
  if sliced: monkeypatch.setattr(loader, "dispatch", lambda memory, **kw: _finish(emu.start(memory, **kw), log))
  else: monkeypatch.setattr(loader, "dispatch", emu.dispatch)
  stats = prog(*args, grid=k.groups, block=k.local_size, budget=overrides.get("budget", 50_000_000))
  return stats, {n: v.tobytes() for n, v in views.items()}, sum(log)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_dispatch_sliced_after_every_block_writes_what_it_writes_unsliced(name, monkeypatch, tiny_slices):
  plain, plain_out, _ = _run(name, monkeypatch, sliced=False)
  sliced, sliced_out, slices = _run(name, monkeypatch, sliced=True)
  assert slices >= 1 or name not in MULTI_BLOCK
  assert sliced_out == plain_out
  assert (sliced.waves, sliced.wave_instructions) == (plain.waves, plain.wave_instructions)


def test_a_fault_after_many_slices_names_the_unsliced_address(monkeypatch, tiny_slices):
  """divergent_loop stores its result after its loop: into an unmapped page, the same fault sliced or not."""
  bad = 0x7E12_3456_0000
  faults = []
  for sliced in (False, True):
    with pytest.raises(GPUFault) as e: _run("divergent_loop", monkeypatch, sliced=sliced, steps=bad)
    faults.append((e.value.kind, e.value.address))
  assert faults[0] == faults[1] == ("page fault", bad)


def test_the_instruction_budget_counts_across_slices(monkeypatch, tiny_slices):
  faults, bases = [], []
  for sliced in (False, True):
    with pytest.raises(emu.InstructionBudgetExceeded) as e:
      _run("divergent_loop", monkeypatch, sliced=sliced, bases=bases, budget=20_000)
    faults.append((e.value.budget, e.value.address - bases[-1]))     # the same block of the code object
  assert faults[0] == faults[1]


def _launcher():
  """(memory, launch(out) -> what loader.dispatch returns, output buffers, expected output): divergent_loop (32
  waves: a small batch, whose set-up the memory pools) with its `steps` output at `out`."""
  k = KERNELS["divergent_loop"]
  bufs = HostBuffers(GPUMemory())
  prog = Kernel(bufs, k.code_object(), k.name)
  data = k.inputs(seed=5)
  start, _ = bufs.array(data["start"])
  outs = [bufs.array(np.zeros_like(data["steps"])) for _ in range(3)]
  expected = k.expected(data)["steps"]
  return bufs.memory, lambda out: prog(start, out, grid=k.groups, block=k.local_size), outs, expected


def _pooled(memory) -> list:
  return list(memory.dispatch_launches.values()) + list(memory.dispatch_shapes.values())


def test_a_suspended_dispatch_keeps_its_pooled_setup_to_itself(monkeypatch, tiny_slices):
  memory, launch, outs, expected = _launcher()
  monkeypatch.setattr(loader, "dispatch", emu.start)
  (a, a_view), (b, b_view), _ = outs
  monkeypatch.setattr(engine, "SLICE_SECONDS", 1e9)
  assert isinstance(launch(a), emu.DispatchStats)      # unsliced: the shape is now pooled for the fast path
  (shape,) = _pooled(memory)
  a_view[:] = 0
  monkeypatch.setattr(engine, "SLICE_SECONDS", 0.0)
  first = launch(a)
  assert isinstance(first, engine.SuspendedDispatch) and shape not in _pooled(memory)   # taken by `first`
  second = launch(b)                                   # the same shape meanwhile: its own set-up
  assert isinstance(second, engine.SuspendedDispatch) and shape not in _pooled(memory)
  while first.resume() is None:                       # interleaved, slice by slice (the same work: first ends first)
    assert second.resume() is None
  assert shape in _pooled(memory) and not second.done  # given back when its dispatch ended
  assert np.array_equal(a_view, expected)
  while second.resume() is None: pass
  assert np.array_equal(b_view, expected)


def test_a_dropped_dispatch_gives_its_setup_back_and_writes_no_more(monkeypatch, tiny_slices):
  memory, launch, outs, expected = _launcher()
  monkeypatch.setattr(loader, "dispatch", emu.start)
  (a, a_view), (b, b_view), _ = outs
  monkeypatch.setattr(engine, "SLICE_SECONDS", 1e9)
  launch(a)
  (shape,) = _pooled(memory)
  monkeypatch.setattr(engine, "SLICE_SECONDS", 0.0)
  running = launch(b)
  assert shape not in _pooled(memory)
  running.drop()
  assert running.done and shape in _pooled(memory)
  assert not b_view.any()                              # its stores come after its loop: none happened
  with pytest.raises(RuntimeError, match="ended or was dropped"): running.resume()
  monkeypatch.setattr(engine, "SLICE_SECONDS", 1e9)
  assert isinstance(launch(b), emu.DispatchStats) and np.array_equal(b_view, expected)   # the pooled set-up is clean


def test_the_hosts_numpy_error_state_is_its_own_between_slices(monkeypatch, tiny_slices):
  """Blocks compute with numpy's float warnings off (np.errstate): never left so while a dispatch is suspended."""
  memory, launch, outs, _ = _launcher()
  monkeypatch.setattr(loader, "dispatch", emu.start)
  with np.errstate(all="raise"):             # the host's own (not numpy's default, which another test may leave)
    before = np.geterr()
    running = launch(outs[0][0])
    assert isinstance(running, engine.SuspendedDispatch)
    for _ in range(5):
      assert np.geterr() == before
      running.resume()
    running.drop()
    assert np.geterr() == before


def test_a_slice_ends_about_when_its_time_is_up(monkeypatch):
  """An endless loop comes back once its slice's time is up, and again after each resume: on a clock that moves 1 ms
  at each reading, each slice ends within two readings of its deadline (the engine looks at the clock often enough),
  counted on that clock, not timed on the machine's."""
  import types

  from hcq.compiler.isa.amd.asm import assemble
  clock = types.SimpleNamespace(now=0.0)
  def perf_counter():
    clock.now += 0.001
    return clock.now
  monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=perf_counter))
  monkeypatch.setattr(engine, "SLICE_SECONDS", 0.01)
  bufs = HostBuffers(GPUMemory())
  code = assemble("loop:\n  s_branch loop\n  s_endpgm")
  addr, view = bufs.alloc(256, 256)
  view[:len(code)] = np.frombuffer(code, np.uint8)
  start = clock.now
  running = emu.start(bufs.memory, pgm_addr=addr, rsrc1=0, rsrc2=0, user_sgprs=[], grid=(1, 1, 1), block=(1, 1, 1))
  assert isinstance(running, engine.SuspendedDispatch)
  assert 0.01 <= clock.now - start <= 0.01 + 0.003, clock.now - start
  start = clock.now
  assert running.resume() is None
  assert 0.01 <= clock.now - start <= 0.01 + 0.003, clock.now - start
  running.drop()
