"""The compute queue's register state (AMDDevice._registers): a launch whose shape left its static registers on the
queue sends only the registers that change per launch; anything that may have changed them (another kernel or
shape, raw PM4, a bound command buffer) makes the next launch send the full set. Checked through the packets on the
ring and through the mock GPU's register state at each dispatch, and by results against numpy."""
import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.drivers.amd import pm4
from hcq.drivers.amd.kernels import demo_code_object


@pytest.fixture
def dev():
  d = hcq.open("MOCK+AMD", Config(timeout_s=2.0))
  yield d
  d.close()


def _submitted(dev, launch) -> list[tuple[str, list[str]]]:
  """Run launch() and return the packets it wrote to the compute ring (decoded)."""
  ring = dev.compute.ring
  start = ring.put_dw
  launch()
  words = [ring.ring[i % ring.size_dw] for i in range(start, ring.put_dw)]
  return [(name, fields) for _, name, fields in pm4.decode(words)]


def _set_registers(packets) -> set[str]:
  return {f.split("=")[0] for name, fields in packets if name == "SET_SH_REG" for f in fields}


# sent with every launch (drivers/amd/program.py _EVERY_LAUNCH): where an interrupted dispatch would resume
RESTART = {"COMPUTE_RESTART_X", "COMPUTE_RESTART_Y", "COMPUTE_RESTART_Z"}


def _expected_static(prog, grid, block) -> dict[int, int]:
  """The registers of the shape's static packets (register_state), by SH offset."""
  out = {}
  for packet in prog.register_state(grid, block):
    for i, v in enumerate(packet[2:]): out[packet[1] + i] = v
  return out


def test_a_repeat_launch_sends_only_the_registers_that_change(dev):
  vadd = dev.load(demo_code_object(), "vadd")
  x = np.arange(64, dtype=np.float32)
  a, b, c = dev.alloc(256), dev.alloc(256), dev.alloc(256)
  dev.copyin(a, x)
  dev.copyin(b, 2 * x)
  first = _submitted(dev, lambda: vadd(a, b, c, 64, global_size=(1,), local_size=(64,)))
  again = _submitted(dev, lambda: vadd(c, b, a, 64, global_size=(1,), local_size=(64,)))
  dev.synchronize()
  assert {"COMPUTE_PGM_LO", "COMPUTE_PGM_RSRC1", "COMPUTE_NUM_THREAD_X", "COMPUTE_USER_DATA_0"} <= _set_registers(first)
  # the kernarg pointer (user data) is all that changes from one launch of this shape to the next
  user = _set_registers(again) - RESTART
  assert RESTART <= _set_registers(again)
  assert user == {f"COMPUTE_USER_DATA_{i}" for i in range(len(user))} and "COMPUTE_USER_DATA_0" in user
  assert [n for n, _ in again if n != "SET_SH_REG"] == [n for n, _ in first if n != "SET_SH_REG"]
  assert sum(len(f) + 1 for _, f in again) < sum(len(f) + 1 for _, f in first)
  # c = a + b, then a = c + b
  assert np.array_equal(np.frombuffer(dev.copyout(a), np.float32), 5 * x)


def test_another_kernel_or_shape_sends_the_full_set_and_every_dispatch_sees_its_registers(dev):
  from hcq.mockgpu.amd.gpu import MockAMDGPU
  co = demo_code_object()
  vadd, empty = dev.load(co, "vadd"), dev.load(co, "empty")
  gpus = [g for g in _all_mock_gpus(dev) if isinstance(g, MockAMDGPU)]
  assert gpus
  seen = []
  for g in gpus: g.dispatch_observers.append(lambda q, launch: seen.append(dict(launch["sh"])))
  x = np.arange(256, dtype=np.float32)
  a, out = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
  dev.copyin(a, x)
  plan = [(vadd, (1,), (64,)), (vadd, (1,), (64,)), (empty, (1,), (1,)), (vadd, (1,), (64,)), (vadd, (4,), (64,)),
          (vadd, (2,), (128,)), (vadd, (2,), (128,)), (empty, (1,), (1,)), (empty, (1,), (1,)), (vadd, (4,), (64,))]
  full = []
  for prog, grid, block in plan:
    args = (a, a, out, 256) if prog is vadd else ()
    full.append(bool({"COMPUTE_PGM_LO", "COMPUTE_NUM_THREAD_X"} & _set_registers(
      _submitted(dev, lambda: prog(*args, global_size=grid, local_size=block)))))
  dev.synchronize()
  # a new grid alone needs no register (it is in DISPATCH_DIRECT); a new block or kernel does
  assert full == [True, False, True, True, False, True, False, True, False, True]
  assert len(seen) == len(plan)
  for sh, (prog, grid, block) in zip(seen, plan):
    for reg, value in _expected_static(prog, grid, block).items(): assert sh.get(reg) == value, (prog.name, grid, block, hex(reg))
  assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), 2 * x)


def _all_mock_gpus(dev):
  for model in dev.os.devices:
    for g in getattr(model, "gpus", []): yield g


def test_raw_pm4_that_changes_registers_makes_the_next_launch_send_them_again(dev):
  vadd = dev.load(demo_code_object(), "vadd")
  x = np.arange(64, dtype=np.float32)
  a, out = dev.alloc(256), dev.alloc(256)
  dev.copyin(a, x)
  vadd(a, a, out, 64, global_size=(1,), local_size=(64,))
  # point the queue's program registers somewhere else (a zero address: dispatching there would fault)
  dev.submit_pm4(pm4.set_sh_reg(pm4.COMPUTE_PGM_LO, 0, 0) + pm4.set_sh_reg(pm4.COMPUTE_NUM_THREAD_X, 3, 3, 3))
  again = _submitted(dev, lambda: vadd(out, a, out, 64, global_size=(1,), local_size=(64,)))
  dev.synchronize()
  assert {"COMPUTE_PGM_LO", "COMPUTE_NUM_THREAD_X"} <= _set_registers(again)
  assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), 3 * x)


def test_a_bound_buffer_leaves_its_last_launch_registers(dev):
  co = demo_code_object()
  vadd, empty = dev.load(co, "vadd"), dev.load(co, "empty")
  x = np.arange(64, dtype=np.float32)
  a, out = dev.alloc(256), dev.alloc(256)
  dev.copyin(a, x)
  dev.copyin(out, bytes(256))
  vadd(a, a, out, 64, global_size=(1,), local_size=(64,))
  bound = dev.bind_many([(vadd, (a, out, out, 64), (1,), (64,)), (empty, (), (1,), (1,))])
  bound()
  after_empty = _submitted(dev, lambda: empty(global_size=(1,), local_size=(1,)))     # the IB ended with empty
  after_vadd = _submitted(dev, lambda: vadd(a, out, out, 64, global_size=(1,), local_size=(64,)))
  dev.synchronize()
  assert _set_registers(after_empty) == RESTART
  assert {"COMPUTE_PGM_LO", "COMPUTE_NUM_THREAD_X"} <= _set_registers(after_vadd)
  assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), 4 * x)


def test_a_bound_buffer_sends_registers_only_where_they_change(dev):
  co = demo_code_object()
  vadd, empty = dev.load(co, "vadd"), dev.load(co, "empty")
  gpus = list(_all_mock_gpus(dev))
  seen = []
  for g in gpus: g.dispatch_observers.append(lambda q, launch: seen.append(dict(launch["sh"])))
  x = np.arange(64, dtype=np.float32)
  a, out = dev.alloc(256), dev.alloc(256)
  dev.copyin(a, x)
  dev.copyin(out, bytes(256))
  plan = [(vadd, (a, out, out, 64), (1,), (64,)), (vadd, (a, out, out, 64), (1,), (64,)), (empty, (), (1,), (1,)),
          (vadd, (a, out, out, 64), (1,), (64,))]
  bound = dev.bind_many(plan)

  def ib_packets(ib_words):
    addr, size = ib_words[1] | ib_words[2] << 32, ib_words[3] & 0xFFFFF
    words = list(bound.recording.ib.cpu.cast("I")[(addr - bound.recording.ib.va) // 4:(addr - bound.recording.ib.va) // 4 + size])
    out, current = [], None
    for _, name, fields in pm4.decode(words):     # the registers each DISPATCH_DIRECT follows
      if name == "ACQUIRE_MEM": current = set()
      if name == "SET_SH_REG": current |= {f.split("=")[0] for f in fields}
      if name == "DISPATCH_DIRECT": out.append(bool({"COMPUTE_PGM_LO", "COMPUTE_NUM_THREAD_X"} & current))
    return out
  assert ib_packets(bound.recording.ib_words) == [True, False, True, True]
  assert ib_packets(bound.recording.ib_repeat_words) == [False, False, True, True]
  first = _submitted(dev, bound)               # the queue holds nothing known: the full buffer
  again = _submitted(dev, bound)               # it holds the last launch's (vadd) registers: the shorter one
  dev.synchronize()
  ib_of = lambda packets: next(f for n, f in packets if n == "INDIRECT_BUFFER")
  assert ib_of(first)[0] == f"ib_addr={bound.recording.ib_words[1] | bound.recording.ib_words[2] << 32:#x}"
  assert ib_of(again)[0] == f"ib_addr={bound.recording.ib_repeat_words[1] | bound.recording.ib_repeat_words[2] << 32:#x}"
  assert len(seen) == 8
  for sh, (prog, _, grid, block) in zip(seen, plan * 2):
    for reg, value in _expected_static(prog, grid, block).items(): assert sh.get(reg) == value, (prog.name, hex(reg))
  assert np.array_equal(np.frombuffer(dev.copyout(out), np.float32), 6 * x)     # out += x, three times a run
