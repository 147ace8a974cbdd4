"""issue 33 P1: an untimed launch has its command buffer patched in the ring (Ring.write_cmd, Engine.write_cmd,
HCQDevice._launch_cmd) instead of filling an array and copying it. What it leaves in the ring and its write pointer are
write(cmd.fill(values))'s, at any ring position (the end of the ring: the general path, split or padded), with or
without room; a failed look-up moves nothing. On MOCK+AMD the ring after a mixed run of launches is the same word for
word with the direct path and the general one, and a subclass that overrides only _launch_words (the AM USB device)
keeps the general path, so that its override runs."""
from array import array

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hcq.drivers.hcq.cmdbuf import CommandBuffer, Patch, Sym, hi, lo
from hcq.drivers.hcq.ring import Ring
from hcq.errors import DeviceError, Timeout

KEYS = ["a", ("var", "timeline")]


def make_ring(size_dw: int, put: int, read: int, cross: str) -> Ring:
  ring = array("I", range(0x1000, 0x1000 + size_dw))     # old contents, so that an unwritten word shows
  wptr, rptr = array("Q", [put]), array("Q", [read])
  t = [0.0]
  def clock():
    t[0] += 1.0
    return t[0]
  r = Ring("test", memoryview(ring), memoryview(wptr), memoryview(rptr), lambda v: None, 4, cross, lambda: None,
           clock, lambda s: None, timeout_s=0.5)
  r.put_dw = r.published_dw = put
  return r


@st.composite
def cases(draw):
  words = []
  for _ in range(draw(st.integers(1, 10))):
    kind = draw(st.sampled_from(["int", "pair", "lo", "hi", "shift"]))
    sym = Sym(draw(st.sampled_from(KEYS)), draw(st.integers(0, 1 << 40)))
    if kind == "int": words.append(draw(st.integers(0, 0xFFFFFFFF)))
    elif kind == "pair": words += [lo(sym), hi(sym)]
    elif kind == "lo": words.append(lo(sym))
    elif kind == "hi": words.append(hi(sym))
    else: words.append(Patch(sym.key, draw(st.integers(0, 40)), sym.add))
  values = {k: draw(st.integers(0, (1 << 64) - 1)) for k in KEYS}
  size = draw(st.sampled_from([16, 32, 64]))
  put = draw(st.integers(0, 3 * size))
  read = draw(st.integers(max(0, put - size), put))       # what the engine has read (room: size - (put - read))
  return words, values, size, put, read, draw(st.sampled_from(["split", "pad"]))


def outcome(ring: Ring, how):
  try: how()
  except Timeout as e: return ("timeout", str(e), ring.put_dw)
  except DeviceError as e: return ("refused", str(e), ring.put_dw)     # a command longer than the whole ring
  return ("ok", list(ring.ring), ring.put_dw)


@settings(max_examples=400, deadline=None)
@given(cases())
def test_write_cmd_leaves_what_write_of_fill_leaves(case):
  words, values, size, put, read, cross = case
  cb = CommandBuffer(words, "compute")
  direct, general = (make_ring(size, put, read, cross) for _ in range(2))
  assert outcome(direct, lambda: direct.write_cmd(cb, values)) == \
         outcome(general, lambda: general.write(cb.fill(values)))


def test_a_missing_value_moves_nothing_and_the_words_are_patched_in_place():
  t = Sym(("var", "timeline"))
  cb = CommandBuffer([0xC0DE, lo(t), hi(t), Patch("a", 8)], "compute")
  ring = make_ring(16, 14, 14, "split")                    # 2 dwords to the end: the general path
  with pytest.raises(KeyError): ring.write_cmd(cb, {("var", "timeline"): 1})
  assert ring.put_dw == 14
  ring = make_ring(16, 5, 5, "split")
  ring.write_cmd(cb, {("var", "timeline"): 0x1_0000_0002, "a": 0x300})
  assert list(ring.ring[5:9]) == [0xC0DE, 2, 1, 3] and ring.put_dw == 9 and ring.published_dw == 5
  assert list(cb.template) == [0xC0DE, 0, 0, 0]


def run_launches(direct: bool):
  import hcq
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("MOCK+AMD") as dev:
    assert type(dev)._launch_direct       # the AMD driver defines _launch_cmd
    dev._launch_direct = direct
    code = demo_code_object()
    empty, vadd = dev.load(code, "empty"), dev.load(code, "vadd")
    a, b, c = (dev.alloc(256) for _ in range(3))
    dev.copyin(a, np.arange(64, dtype=np.float32))
    dev.copyin(b, np.full(64, 2, np.float32))
    ring = dev.compute.ring
    checked = [0]
    if direct:   # each command patched in the ring holds the words the general path writes (cb.fill), on this device
      write_cmd = dev.compute.write_cmd
      def compare(cb, values):
        start = ring.put_dw
        write_cmd(cb, values)
        words = [int(w) for w in cb.fill(values)]
        if ring.put_dw - start == len(words):      # (a command that would cross the ring's end goes the general way)
          assert [int(ring.ring[(start + i) % ring.size_dw]) for i in range(len(words))] == words, f"at {start}"
          checked[0] += 1
      dev.compute.write_cmd = compare
    def mixed():            # repeats, alternating shapes, arguments, the timed path in between
      for i in range(30):
        empty(global_size=(1,), local_size=(1 + i % 3,))
        vadd(a, b, c, 64, global_size=(2,), local_size=(32,))
        if i % 7 == 0: empty(global_size=(1,), local_size=(1,), wait=True)
    mixed()
    while ring.put_dw < ring.size_dw - 500: empty(global_size=(1,), local_size=(1,))   # ~10,000 cheap launches
    mixed()                 # across the ring's end
    dev.synchronize()
    assert ring.put_dw > ring.size_dw      # the run crossed the ring's end
    assert not direct or checked[0] > 5_000     # (launches the direct path wrote: the many cheap ones at least)
    return ring.put_dw, dev.timeline.value, dev.timeline.signal.value, bytes(dev.copyout(c))


def test_the_direct_launch_path_writes_the_general_paths_words():
  """Every command the direct path patches in the ring is word for word what the general path writes (compared launch
  by launch on one device: two devices' rings differ in the addresses of their allocations), and both paths make the
  same submissions, ring positions and results."""
  direct, general = run_launches(True), run_launches(False)
  assert direct == general
  assert np.array_equal(np.frombuffer(direct[3], np.float32), np.arange(64, dtype=np.float32) + 2)


def test_a_subclass_that_overrides_only_launch_words_keeps_the_general_path():
  from hcq.drivers.amd.am.usb import USBAMDDevice
  from hcq.drivers.amd.device import AMDDevice
  assert AMDDevice._launch_direct and not USBAMDDevice._launch_direct

  class Wrapped(AMDDevice):
    def _launch_words(self, prog, shape, explicit, value): return super()._launch_words(prog, shape, explicit, value)

  class Both(Wrapped):
    def _launch_cmd(self, prog, shape, explicit, value): return super()._launch_cmd(prog, shape, explicit, value)

  assert not Wrapped._launch_direct and Both._launch_direct


def test_an_aql_engine_translates_what_write_cmd_gets():
  from hcq.drivers.amd.aql import AQLEngine
  written = []
  engine = AQLEngine.__new__(AQLEngine)
  engine._write = written.append          # its translation (tested in tests/amd) is what write_cmd must reach
  engine.write_cmd = engine._write_cmd
  t = Sym(("var", "timeline"))
  cb = CommandBuffer([0xC0DE, lo(t), hi(t)], "compute")
  engine.write_cmd(cb, {("var", "timeline"): 5})
  assert [list(w) for w in written] == [[0xC0DE, 5, 0]]


def test_a_kernel_without_arguments_packs_nothing_and_still_counts_them():
  import hcq
  from hcq.drivers.amd.kernels import demo_code_object
  from hcq.errors import DeviceError
  with hcq.open("MOCK+AMD") as dev:
    code = demo_code_object()
    empty, vadd = dev.load(code, "empty"), dev.load(code, "vadd")
    assert empty.layout.check_and_pack((), dev.buffer_type, dev) == b""
    with pytest.raises(DeviceError, match="kernel empty takes 0 arguments"): empty(1, global_size=(1,))
    with pytest.raises(DeviceError, match="kernel vadd takes 4 arguments"): vadd(global_size=(1,))
