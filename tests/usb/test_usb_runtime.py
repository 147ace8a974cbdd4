"""hcq.open("MOCKUSB+AMD") (issue 18): the runtime device on the AM driver behind the mock ASM24xx bridge, the real
firmware booted through TLPs, kernels run by the mock Navi 31's engines on memory they reach through the GPU page
tables (VRAM), every host access a USB transfer counted by the mock bridge."""

import numpy as np
import pytest

import hcq
from hcq.config import Config
from hcq.errors import HCQError, Timeout
from tests.amd.am.test_am_corpus import NAMES, run
from tests.fixtures.opencl.kernels import KERNELS
from test_am_usb import fw_dir  # noqa: F401  (the pinned firmware package, a module fixture)


def _bridge(dev):
  return dev.os.devices[0].bridge


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "threaded"])
def dev(request, fw_dir):  # noqa: F811
  d = hcq.open("MOCKUSB+AMD", Config(mock_threaded=request.param, timeout_s=30, firmware_dir=fw_dir))
  yield d
  d.close()


@pytest.fixture
def usbdev(fw_dir, request):  # noqa: F811
  """A fresh MOCKUSB+AMD device; request.param: config overrides."""
  opts = dict(timeout_s=5, firmware_dir=fw_dir)
  opts.update(getattr(request, "param", {}))
  d = hcq.open("MOCKUSB+AMD", Config(**opts))
  yield d
  d.close()


@pytest.mark.parametrize("name", [n if n in NAMES else pytest.param(n, marks=pytest.mark.slow) for n in sorted(KERNELS)])
def test_corpus_on_mockusb(dev, name):
  k = KERNELS[name]
  data = k.inputs(seed=11)
  k.check(run(dev, k, data), data)


def test_mockusb_is_registered_and_every_host_access_goes_over_the_bridge(usbdev):
  assert usbdev.label.startswith("MOCKUSB+AMD:0 (ASM24 bridge") and usbdev.arch == "gfx1100"
  fw = _bridge(usbdev).fw
  before = fw.counts["tlps"]
  buf = usbdev.alloc(64)
  usbdev.copyin(buf, bytes(range(64)))
  assert usbdev.copyout(buf) == bytes(range(64))
  assert fw.counts["tlps"] > before       # no CPU mapping: the copies were TLPs


# 64 MiB: the SRAM path's GPU work in more than one submission (128 chunks each); through the BAR it is 16 streaming
# requests where 16 MiB is 4 (the same behaviour: -m slow runs it)
@pytest.mark.parametrize("path,size,offset", [(path, size, offset) for path in ("sram", "bar") for size, offset in
                                              [(1, 0), (1, 3), ((1 << 20) + 1, 5), ((16 << 20) - 5, 3)]] +
                                             [("sram", (64 << 20) - 5, 7),
                                              pytest.param("bar", (64 << 20) - 5, 7, marks=pytest.mark.slow)])
def test_copies_are_byte_exact_both_ways_at_odd_offsets(usbdev, size, offset, path):
  """Through the bridge's SRAM (SRAMStaging: double-buffered 128 KiB chunks, SDMA copies, a fence in the a000
  window), the default, and streamed through the VRAM BAR."""
  usbdev.copy_path = path
  fw = _bridge(usbdev).fw
  arms = fw.counts["dma_arms"]
  rng = np.random.default_rng(size)
  data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
  buf = usbdev.alloc(size + offset + 3)
  usbdev.copyin(buf, b"\xAA" * (size + offset + 3))
  usbdev.copyin(buf, data, offset=offset)
  assert usbdev.copyout(buf, size=size, offset=offset) == data
  # the bytes around it are untouched
  whole = usbdev.copyout(buf)
  assert whole[:offset] == b"\xAA" * offset and whole[offset + size:] == b"\xAA" * 3 and whole[offset:offset + size] == data
  assert (fw.counts["dma_arms"] > arms) == (path == "sram")       # the path taken: the SRAM's DMA engine or not


def test_copies_queue_the_gpu_work_once_and_wait_for_sentinels_and_releases(usbdev):
  """The sentinel scheme: one submission for the whole copy-in (a doorbell), then per 256 KiB chunk one DMA-engine
  write (arm + bulk: data, then the chunk's sentinel in its half's last dword) and the fence reads it waits for;
  copy-out the same way round, the GPU waiting for the host's release of each half."""
  usbdev.copy_path = "sram"          # this scheme's path, not the measured cheaper one (test_usb_copy_path.py)
  fw = _bridge(usbdev).fw
  buf = usbdev.alloc(4 << 20)
  usbdev.copyin(buf, b"x")
  flushes, arms = usbdev.os.devices[0].nbio.hdp_flushes, fw.counts["dma_arms"]
  _bridge(usbdev).arm_faults("")
  data = bytes(range(256)) * (16 << 10)
  usbdev.copyin(buf, data)
  chunks = -(-len(data) // ((256 << 10) - 512))
  assert usbdev.os.devices[0].nbio.hdp_flushes == flushes + 1 and fw.counts["dma_arms"] == arms + chunks
  # submit 5; per chunk 2 + the fence reads (the one that ends a wait read twice: XDATA reads can be torn)
  assert _bridge(usbdev).transfer_number <= 5 + 4 * chunks + 3
  # copy-out: one submission too; per chunk a fence read, the half's read (arm + bulk), the release counted up
  _bridge(usbdev).arm_faults("")
  assert usbdev.copyout(buf, size=len(data)) == data
  assert usbdev.os.devices[0].nbio.hdp_flushes == flushes + 2 and _bridge(usbdev).transfer_number <= 5 + 6 * chunks + 2


def test_what_the_sram_held_never_releases_a_copy_in_chunk_early(fw_dir):  # noqa: F811
  """Sentinels compare >=: bytes in the SRAM from before (a copy-out's data, power-on contents) must never be taken
  for a chunk's sentinel: copy-out chunks leave the halves' last sector alone and the sentinels are cleared at open."""
  from hcq.drivers.amd import open_device
  from hcq.mockgpu import mock_navi31_usb_os
  os = mock_navi31_usb_os(Config(timeout_s=5, firmware_dir=fw_dir))
  os.devices[0].bridge.fw.sram()[:] = b"\xff" * (512 << 10)          # what the SRAM held before
  d = open_device("USB", 0, os, os.config, "MOCKUSB+AMD:0")
  try:
    buf = d.alloc(2 << 20)
    d.copyin(buf, b"\xff" * (2 << 20))
    assert d.copyout(buf) == b"\xff" * (2 << 20)                     # the GPU filled the halves with 0xff
    data = bytes(range(251)) * 8000
    d.copyin(buf, data)
    d.copy_path = "bar"                                                # read back another way
    assert d.copyout(buf, size=len(data)) == data
  finally:
    d.close()
    os.close()


@pytest.mark.parametrize("threaded", [False, True], ids=["sync", "threaded"])
def test_copy_counters_left_in_the_window_near_2_32_do_not_wrap(fw_dir, threaded):  # noqa: F811
  """The GPU compares the copy fence and the release counter unsigned (>=): counters taken over from what the a000
  window held (an earlier run's count, power-on contents) near 2^32 wrapped and released chunks early. They start
  at 0 at open."""
  from hcq.drivers.amd import open_device
  from hcq.mockgpu import mock_navi31_usb_os
  os = mock_navi31_usb_os(Config(timeout_s=5, firmware_dir=fw_dir, mock_threaded=threaded))
  a000 = os.devices[0].bridge.fw.windows["a000"][2]
  a000[0:4], a000[0x10:0x14] = (0xFFFFFFFE).to_bytes(4, "little"), (0xFFFFFFFF).to_bytes(4, "little")
  d = open_device("USB", 0, os, os.config, "MOCKUSB+AMD:0")
  try:
    buf = d.alloc(2 << 20)
    data = bytes(range(251)) * 8000
    d.copyin(buf, data)
    assert d.copyout(buf, size=len(data)) == data
    d.copy_path = "bar"                                                # read back another way
    assert d.copyout(buf, size=len(data)) == data
  finally:
    d.close()
    os.close()


def test_a_copy_after_a_failed_copy_out_waits_for_the_gpu_work_it_left_queued(fw_dir):  # noqa: F811
  """A copy-out that fails (here its fence wait times out: the copy engine waits behind a compute queue blocked on
  a gate) leaves its GPU work queued and released. The next copy-in must not write the halves before that work is
  done: it would copy the old buffer's bytes over the new chunks, whose sentinels then release them (wrong data)."""
  import threading
  from hcq.compiler import queue as Q
  from hcq.drivers.amd.am.usb import P_SENTINEL, SENTINEL, SEQ, V_SEQ
  from hcq.drivers.amd.packets import COMPUTE
  from hcq.drivers.hcq.runtime import Submission
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=0.5, firmware_dir=fw_dir)) as d:
    d.copy_path = "sram"                                             # the staging's queued work is the subject
    old, new = b"\x11" * (300 << 10), b"\x22" * (300 << 10)         # two chunks: no release waits either way
    buf = d.alloc(len(old))
    d.copyin(buf, old)
    gate = d.signals.alloc(0, name="gate")
    cb = d.compute.build(Q.queue(COMPUTE, Q.wait(SENTINEL, SEQ)))
    with Submission(d, d.compute, "the gate") as sub: sub.add(cb.fill({P_SENTINEL: gate.va, V_SEQ: 1}))
    with pytest.raises(Timeout, match=r"copy-out of 307200 bytes .* failed after 0 bytes"):
      d.copyout(buf)
    vram, off = d.os.devices[0].vram, d.session._offset(gate.va, 8)
    opener = threading.Timer(0.2, lambda: vram.__setitem__(slice(off, off + 8), (1).to_bytes(8, "little")))
    opener.start()                                # the gate opens while the next copy-in runs
    try: d.copyin(buf, new)
    finally: opener.join()
    d.copy_path = "bar"                           # read back another way
    assert d.copyout(buf) == new


@pytest.mark.parametrize("direction,in_flight,name", [("in", 1, "sram_write"), ("in", 2, "sram_arm_request"),
                                                      ("out", 2, "sram_read")])
def test_a_copy_interrupted_by_ctrl_c_releases_the_gpu_work_it_queued(fw_dir, direction, in_flight, name):  # noqa: F811
  """Ctrl-C in the middle of a copy (here at its second SRAM transfer; with bulk transfers in flight, at the second
  chunk's arm, while the first chunk's data is in flight): the GPU's chunks still waiting for their sentinels
  (copy-in) or the host's release (copy-out) are released as after an error, so that the copy engine, and the launch
  after it (which waits for it), do not stay blocked until a timeout."""
  from hcq.drivers.amd.kernels import demo_code_object
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=1, firmware_dir=fw_dir)) as d:
    d.copy_path = "sram"                                             # the staging's queued work is the subject
    vadd = d.load(demo_code_object(), "vadd")
    a, b, c = (d.alloc(256) for _ in range(3))
    d.copyin(a, np.arange(64, dtype=np.int32).tobytes())
    d.copyin(b, np.full(64, 5, dtype=np.int32).tobytes())
    buf = d.alloc(1 << 20)
    bridge = d.session.usb.bridge
    bridge.in_flight = in_flight
    inner, calls = getattr(bridge, name), []
    def interrupted(*args):
      calls.append(args)
      if len(calls) == 2: raise KeyboardInterrupt
      return inner(*args)
    setattr(bridge, name, interrupted)
    with pytest.raises(KeyboardInterrupt):
      if direction == "in": d.copyin(buf, bytes(1 << 20))
      else: d.copyout(buf)
    delattr(bridge, name)
    vadd(a, b, c, 64, global_size=(1,), local_size=(64,), wait=True)   # after the copy on the copy engine: no Timeout
    assert np.array_equal(np.frombuffer(d.copyout(c), np.int32), np.arange(64) + 5)
    d.copyin(buf, bytes(range(256)) * 4096)
    assert d.copyout(buf) == bytes(range(256)) * 4096


def test_signals_are_read_through_the_device_and_a_wait_times_out_naming_signal_expected_and_last(usbdev):
  sig = usbdev.signals.alloc(0, name="test signal")
  gpu = usbdev.os.devices[0]
  off = usbdev.session._offset(sig.va, 8)
  gpu.vram[off:off + 8] = (3).to_bytes(8, "little")     # the GPU's store, behind the host's back
  assert sig.value == 3                                   # read over the bridge, not from the CPU shadow
  with pytest.raises(Timeout, match=r"test signal at 0x[0-9a-f]+ to reach 9 \(last seen 3\) after 0.05 s") as e:
    sig.wait(9, 0.05, usbdev.os.monotonic, usbdev.os.sleep)
  assert (e.value.expected, e.value.last_seen) == (9, 3)
  sig.value = 11                                          # a store goes through at once
  assert bytes(gpu.vram[off:off + 8]) == (11).to_bytes(8, "little")
  sig.free()


def _polls_of_a_timed_out_wait(dev) -> tuple[int, int]:
  sig = dev.signals.alloc(0, name="never")
  fw = _bridge(dev).fw
  before = fw.counts["tlps"]
  with pytest.raises(Timeout): sig.wait(1, 0.05, dev.os.monotonic, dev.os.sleep)
  return sig.polls, fw.counts["tlps"] - before


@pytest.mark.parametrize("poll_us", [0, 5000])
def test_AMD_USB_POLL_US_sets_the_polls_per_wait_not_the_results(fw_dir, poll_us):  # noqa: F811
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=5, firmware_dir=fw_dir, amd_usb_poll_us=poll_us)) as d:
    polls, tlps = _polls_of_a_timed_out_wait(d)
    assert polls == tlps                       # one MRd per poll, as the bridge saw them 
    # counts the pace can bound whatever the load: a 5 ms pace allows at most 50 ms / 5 ms plus the first and the last
    # polls (a loaded machine only makes fewer); without a pace the wait polls more often than any 5 ms pace could
    if poll_us: assert 2 <= polls <= 12
    else: assert polls > 12
    k = KERNELS["vadd"]
    data = k.inputs(seed=3)
    k.check(run(d, k, data), data)


@pytest.mark.parametrize("poll_us", [0, 5000])
def test_the_timeline_is_polled_in_the_bridge_window_one_xdata_read_per_poll(fw_dir, poll_us):  # noqa: F811
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=0.1, firmware_dir=fw_dir, amd_usb_poll_us=poll_us)) as d:
    sig, fw = d.timeline.signal, _bridge(d).fw
    assert sig.va == d.session.windows["a000"][0] + 0x100        # the GPU's RELEASE_MEM lands in the bridge's XDATA
    at = 0xA000 + 0x100
    before, polls = fw.xdata_reads[at], sig.polls
    with pytest.raises(Timeout, match=r"timeline signal at 0x[0-9a-f]+ to reach 1 \(last seen 0\) after 0.1 s"):
      d.wait_value(1)                                           # nothing was submitted: it never comes
    assert fw.xdata_reads[at] - before == sig.polls - polls
    if poll_us: assert 2 <= sig.polls - polls <= 22            # 0.1 s / 5 ms plus the first and the last, at most
    else: assert sig.polls - polls > 22                          # unpaced: more than any 5 ms pace allows


def test_a_launch_costs_few_usb_transfers(usbdev):
  k = KERNELS["vadd"]
  data = k.inputs(seed=1)
  run(usbdev, k, data)                          # loaded, shapes built
  prog = usbdev.load(k.code_object())
  bufs = [usbdev.alloc(b.nbytes) for b in k.buffers]
  args = [bufs[0], bufs[1], bufs[2]] + [data[a.name].item() for a in k.args[3:]]
  bridge = _bridge(usbdev)
  prog(*args, global_size=k.groups, local_size=k.local_size, wait=True)
  bridge.arm_faults("")                          # the mock bridge counts transfers from here
  flushes = usbdev.os.devices[0].nbio.hdp_flushes
  prog(*args, global_size=k.groups, local_size=k.local_size)
  # kernel arguments (control + bulk), the ring's span (control + bulk), the HDP flush (one posted MWr: the BAR
  # writes reach VRAM before the engine reads them), the doorbell (control + bulk)
  assert bridge.transfer_number == 7 and usbdev.os.devices[0].nbio.hdp_flushes == flushes + 1
  usbdev.synchronize()
  # the sync mock ran it at the doorbell: one poll of the timeline signal in the bridge's a000 window (an XDATA read)
  # and the read that confirms it (the controller reads its XDATA byte by byte: a read may be torn)
  assert bridge.transfer_number == 9


def test_a_gpu_fault_over_usb_arrives_through_the_ih_ring_not_as_a_timeout(fw_dir):  # noqa: F811
  from hcq.drivers.amd.kernels import demo_code_object
  from hcq.drivers.hcq import Buffer
  from hcq.errors import GPUFault
  with hcq.open("MOCKUSB+AMD", Config(timeout_s=5, firmware_dir=fw_dir)) as d:
    vadd = d.load(demo_code_object(), "vadd")
    good = d.alloc(4096)
    bad = Buffer(d, 0x2100_0000_0000, 4096)      # in AM's VA range, mapped by no page table
    with pytest.raises(GPUFault, match=r"UTCL2 \(GC hub\) page fault") as e:     # the fault, not a Timeout
      vadd(good, bad, good, 64, global_size=(1,), local_size=(64,), wait=True)
    assert 0x2100_0000_0000 <= e.value.address < 0x2100_0000_1000


FAULTS = ["stall", "timeout", "late", "unplug", "transport", "ur", "ca"]


@pytest.mark.parametrize("kind", FAULTS)
@pytest.mark.parametrize("at", [8] + [pytest.param(n, marks=pytest.mark.slow) for n in (1, 3, 5, 12, 16, 20, 30)])
def test_transport_faults_during_a_launch_and_copies_give_errors_or_right_data(fw_dir, kind, at, tmp_path):  # noqa: F811
  d = hcq.open("MOCKUSB+AMD", Config(timeout_s=2, firmware_dir=fw_dir, lock_dir=str(tmp_path)))
  try:
    k = KERNELS["vadd"]
    data = k.inputs(seed=5)
    run(d, k, data)                              # warm: the next run's transfers are the launch's and copies'
    plug = _bridge(d)
    plug.arm_faults("")
    k.check(run(d, k, data), data)
    clean = plug.transfer_number                 # the transfers of one clean run
    plug.arm_faults(f"{kind}={at}")
    try: out = run(d, k, data)
    except HCQError as e:
      assert str(e)                              # an hcq error with a message, not a traceback of pyusb
    else: k.check(out, data)                    # retried: the data is right
    # bounded: a few retries, no endless loop of transfers (counted: no test asserts a duration)
    assert plug.transfer_number <= 2 * clean + 64, (plug.transfer_number, clean)
  finally:
    try: d.close()
    except HCQError: pass             # the bridge may be gone: close says so, and still lets go of everything
    assert d.closed and d.os.held_locks() == []


def test_bench_usb_counts_the_transactions_of_a_launch(fw_dir, capsys):  # noqa: F811
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "usb.py"
  spec = importlib.util.spec_from_file_location("bench_usb", path)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  r = bench.launch_transfers(fw_dir, launches=3)
  assert (r["launch"], r["launch_tlps"], r["wait"], r["polls"]) == (7, 4, 2, 1)
  assert r["launch"] < 8                       # the reference lineage's 8 (derived in the script's docstring)
  assert bench.main(["--launch", "--launches", "2", "--copy-mib", "1", "--firmware-dir", fw_dir]) == 0
  out = capsys.readouterr().out
  assert "7.0 USB transactions (4.0 TLPs) to submit" in out
  assert "the path measured cheaper, measured: in bar {'sram': 9, 'bar': 4}, out bar" in out   # usbcopypath.py's pick
