"""The launch path's kept state on MOCK+NV against doing the work afresh (docs/perf.md, P6): the mock's decoded method
runs (GPU._sequence, _plan) against the general pushbuffer loop, re-decoded when an entry of the same length has other
headers; the mapped ranges kept per mapping generation (a release after an unmap still faults); the driver's
per-shape launch data image (NVDevice._launch_image) against the shape's QMD and dims, made again when they change;
the doorbell still follows a fence after GPPut without the Ring's own fence."""
import ctypes
from array import array

import pytest

import hcq
from hcq.config import Config
from hcq.drivers.hcq.runtime import Submission
from hcq.drivers.nv import gpfifo as G, open_device, qmd
from hcq.mockgpu import mock_nv_os

RELEASE64 = G.SEM_OP_RELEASE | G.SEM_PAYLOAD_64
OP_IMMD = 4


def _open(gpu="H200", **kw):
  os = mock_nv_os(Config(**kw), gpu=gpu)
  dev = open_device("RM", 0, os, os.config, label="MOCK+NV:0")
  dev.owned_os = os
  return dev


def _gpu_channel(dev):
  gpu = dev.owned_os.devices[0].gpus[0]
  return gpu, next(c for c in gpu.channels if c.handle == dev.compute.channel.handle)


def _submit(dev, words) -> None:
  with Submission(dev, dev.compute, "test words") as sub: sub.add(array("I", words))
  dev.synchronize()


def _immd(subc: int, method: int, data: int) -> int: return G.header(subc, method, data, OP_IMMD)


def _mixed_words(addr: int, payload: int) -> list:
  """Host stores, an IMMD and a NON_INC compute method, then a 64-bit release: steps of every kind."""
  return (G.method(G.SUBC_COMPUTE, G.INVALIDATE_SHADER_CACHES_NO_WFI, 0x11) +
          [_immd(G.SUBC_COMPUTE, G.INVALIDATE_SHADER_CACHES_NO_WFI, 0x1001)] +
          [G.header(G.SUBC_COMPUTE, G.INVALIDATE_SHADER_CACHES_NO_WFI, 2, G.OP_NON_INC), 0x10, 0x1010] +
          G.method(G.SUBC_HOST, G.SEM_ADDR_LO, addr & 0xFFFFFFFF, addr >> 32, payload & 0xFFFFFFFF, payload >> 32,
                   RELEASE64))


def _general(gpu, monkeypatch):
  """Make the GPU run every entry through the general pushbuffer loop (no decoded method runs)."""
  monkeypatch.setattr(gpu, "_sequence", lambda words, length: None)
  gpu._sequences.clear()


@pytest.mark.parametrize("planned", [True, False], ids=["decoded-run", "general-loop"])
def test_a_decoded_method_run_stores_and_applies_what_the_general_loop_does(planned, monkeypatch):
  with _open() as dev:
    gpu, ch = _gpu_channel(dev)
    if not planned: _general(gpu, monkeypatch)
    buf = dev.alloc(64, host=True)
    for payload in (0x1122334455667788, 0x0A0B0C0D0E0F1011):     # the second run of the same headers is the kept one
      _submit(dev, _mixed_words(buf.va, payload))
      assert ctypes.c_uint64.from_address(buf.va).value == payload
      # the method's last value: NON_INC's last dword, after the INC's and IMMD's (the submission's timeline store
      # that follows sets the host methods again)
      assert ch.state[(G.SUBC_COMPUTE, G.INVALIDATE_SHADER_CACHES_NO_WFI)] == 0x1010
    assert bool(gpu._sequences) == planned


def test_an_entry_of_the_same_length_with_other_headers_is_decoded_again():
  with _open() as dev:
    gpu, ch = _gpu_channel(dev)
    buf = dev.alloc(64, host=True)
    a = G.method(G.SUBC_HOST, G.SEM_ADDR_LO, buf.va & 0xFFFFFFFF, buf.va >> 32, 0x55, 0x66, RELEASE64)
    # six dwords too: address, then the payload, then a 32-bit release as IMMD data
    b = (G.method(G.SUBC_HOST, G.SEM_ADDR_LO, (buf.va + 8) & 0xFFFFFFFF, buf.va >> 32) +
         G.method(G.SUBC_HOST, 0x64, 0x77) + [_immd(G.SUBC_HOST, G.SEM_EXECUTE, G.SEM_OP_RELEASE)])
    assert len(a) == len(b)
    _submit(dev, a)
    _submit(dev, b)
    assert ctypes.c_uint64.from_address(buf.va).value == (0x66 << 32) | 0x55
    assert ctypes.c_uint32.from_address(buf.va + 8).value == 0x77
    _submit(dev, a[:3] + [0x99, 0, RELEASE64])          # the first headers again, other data
    assert ctypes.c_uint64.from_address(buf.va).value == 0x99


@pytest.mark.parametrize("planned", [True, False], ids=["decoded-run", "general-loop"])
def test_a_method_on_a_subchannel_without_an_object_is_refused_by_name_either_way(planned, monkeypatch):
  with _open(timeout_s=5) as dev:
    gpu, ch = _gpu_channel(dev)
    if not planned: _general(gpu, monkeypatch)
    buf = dev.alloc(64, host=True)
    words = (G.method(G.SUBC_HOST, G.SEM_ADDR_LO, buf.va & 0xFFFFFFFF, buf.va >> 32, 1, 0, RELEASE64) +
             G.method(2, G.INVALIDATE_SHADER_CACHES_NO_WFI, 0x11))       # subchannel 2: no SET_OBJECT
    with pytest.raises(hcq.QueueError, match="graphics engine exception"): _submit(dev, words)
    assert "method 0x1698 on subchannel 2, which has no object" in str(ch.last_error)
    assert ctypes.c_uint64.from_address(buf.va).value == 1      # the release before it was applied


def test_a_release_into_memory_freed_since_the_last_one_faults_with_its_address():
  # the range of the last 64-bit release is kept for the mappings' generation: an unmap must end that (the host
  # class's SEM_EXECUTE applied directly: a submission's own timeline release would be the last one kept)
  with _open(timeout_s=5) as dev:
    gpu, ch = _gpu_channel(dev)
    buf = dev.alloc(0x1000, host=True)
    va = buf.va
    with gpu.lock:
      for method, value in ((0x5C, va & 0xFFFFFFFF), (0x60, va >> 32), (0x64, 7), (0x68, 0)): ch.state[(0, method)] = value
      assert gpu._host_method(ch, 0, G.SEM_EXECUTE, RELEASE64)
      assert gpu._sem_range[1] <= va < gpu._sem_range[2]
      ch.state[(0, 0x64)] = 8
      assert gpu._host_method(ch, 0, G.SEM_EXECUTE, RELEASE64)       # through the kept range
      assert ctypes.c_uint64.from_address(va).value == 8
    dev.free(buf)
    with gpu.lock:
      with pytest.raises(hcq.GPUFault, match="semaphore release") as e: gpu._host_method(ch, 0, G.SEM_EXECUTE, RELEASE64)
    assert e.value.address == va


def _newest_launch_data(dev, shape):
  """(constant buffer 0 and the QMD of the compute channel's last launch, constant buffer 0's address): the QMD at
  the address its SEND_PCAS_A gave the mock GPU."""
  gpu, ch = _gpu_channel(dev)
  qmd_va = ch.state[(G.SUBC_COMPUTE, G.SEND_PCAS_A)] << 8
  cb = (shape.cb_size + 255) // 256 * 256
  return ctypes.string_at(qmd_va - cb, cb + dev.qmd_size), qmd_va - cb


@pytest.mark.parametrize("gpu", ["H200", "AD102", "B200"])
def test_the_launch_data_is_the_shapes_cb0_and_qmd_with_the_address_patched(gpu):
  from hcq.drivers.nv.qmd import set_field
  from hcq.drivers.nv.sm import CB0_DIMS_END
  with _open(gpu) as dev:
    prog = dev.load(b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p, .param .u32 n)\n"
                    b"{\n  ret;\n}\n")
    buf = dev.alloc(256)
    layout = dev.qmd_layout
    lower = "CONSTANT_BUFFER_ADDR_LOWER_0" if dev.qmd_major == 3 else "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6_0"
    upper = "CONSTANT_BUFFER_ADDR_UPPER_0" if dev.qmd_major == 3 else "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6_0"
    shift = 0 if dev.qmd_major == 3 else 6
    for n in (5, 6):
      prog(buf, n, global_size=(3, 2), local_size=(32, 2))
      dev.synchronize()
      shape = prog.shape((3, 2), (32, 2), False)
      data, va = _newest_launch_data(dev, shape)
      cb = (shape.cb_size + 255) // 256 * 256
      # constant buffer 0: dims, the driver's words, the parameters
      assert data[:CB0_DIMS_END] == shape.dims
      d = dev._cb0_driver_offset
      assert data[d:d + len(dev._cb0_driver)] == dev._cb0_driver
      assert data[prog.param_base:prog.param_base + 12] == buf.va.to_bytes(8, "little") + n.to_bytes(4, "little")
      # the QMD: the template's fields, constant buffer 0's address its own
      got, want = qmd.decode(layout, data[cb:cb + dev.qmd_size]), qmd.decode(layout, bytes(shape.qmd))
      assert (got[upper] << 32 | got[lower]) << shift == va
      assert {k: v for k, v in got.items() if k not in (lower, upper)} == {k: v for k, v in want.items() if k not in (lower, upper)}
    dev.synchronize()
    # a changed template (a field other than the address) is in the next launch's data
    set_field(shape.qmd, layout, "BARRIER_COUNT", 2)
    prog(buf, 7, global_size=(3, 2), local_size=(32, 2))
    dev.synchronize()
    data, va = _newest_launch_data(dev, shape)
    assert qmd.decode(layout, data[cb:cb + dev.qmd_size])["BARRIER_COUNT"] == 2
    dev.synchronize()


def test_the_doorbell_store_follows_a_fence_after_the_entries_and_gpput():
  with _open() as dev:
    prog = dev.load(b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry e()\n{\n  ret;\n}\n")
    prog()
    dev.synchronize()
    eng, os = dev.compute, dev.owned_os
    gpu, ch = _gpu_channel(dev)
    seen, barrier = [], os.memory_barrier

    def recording_barrier():
      seen.append((eng.userd_u32[G.USERD_GP_PUT // 4], gpu.doorbell_cell.value))
      barrier()
    os.memory_barrier = recording_barrier
    try:
      before = eng.gp_put
      prog()
    finally: os.memory_barrier = barrier
    dev.synchronize()
    put = (before + 1) % eng.entries
    from hcq.mockgpu.nv.gpu import NO_TOKEN
    # a fence with GPPut published and the doorbell not yet written, then one with the token in the doorbell word
    i = seen.index((put, NO_TOKEN))
    assert (put, eng.token) in seen[i + 1:]


@pytest.mark.parametrize("timed", [False, True], ids=["plain", "timed"])
def test_the_launch_words_are_the_command_buffers_fill(timed):
  from hcq.drivers.hcq.engine import V_TIMELINE
  from hcq.drivers.nv import packets
  with _open() as dev:
    prog = dev.load(b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry e()\n{\n  ret;\n}\n")
    prog(wait=timed)
    shape = prog.shape(1, 1, timed)
    value = dev.timeline.value + (1 << 32) + 5        # a value with a high dword
    with dev.lock: words = dev._launch_words(prog, shape, b"", value)
    _, _, qmd_pos, _, _ = shape.launch_image[6]
    qmd_va = words[qmd_pos] << 8
    assert list(words) == list(shape.cmd.fill({packets.V_QMD: qmd_va, V_TIMELINE: value}))
    assert ctypes.string_at(qmd_va, dev.qmd_size)[:64] == bytes(shape.qmd[:64])     # the QMD is at that address
    assert shape.launch_image[6][0] is shape.cmd          # the positions were taken from this command buffer


STORE = (b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry st(.param .u64 p, .param .u32 n)\n{\n"
         b"  .reg .b64 %rd<2>;\n  .reg .b32 %r<2>;\n  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [n];\n"
         b"  st.global.u32 [%rd1], %r1;\n  ret;\n}\n")


def _qmd_address(dev) -> int: return _gpu_channel(dev)[1].state[(G.SUBC_COMPUTE, G.SEND_PCAS_A)] << 8


def test_a_shape_keeps_its_launch_data_for_the_same_parameters_and_rewrites_it_when_idle():
  with _open() as dev:
    prog = dev.load(STORE)
    a, b = dev.alloc(4096, host=True), dev.alloc(4096, host=True)
    addresses = []
    for buf, n in ((a, 1), (a, 1), (b, 2), (b, 2)):
      prog(buf, n)
      dev.synchronize()
      addresses.append(_qmd_address(dev))
      assert ctypes.c_uint32.from_address(buf.va).value == n
    # the same parameters: the same launch data; others once the launches before are done: the same memory again
    assert len(set(addresses)) == 1
    assert prog.shape(1, 1, False).kept_launch[1] == b.va.to_bytes(8, "little") + (2).to_bytes(4, "little")


def test_launch_data_a_launch_in_flight_reads_is_not_written_over():
  # the compute channel waits on a semaphore the CPU sets later: the launches queue behind it, in flight together
  with _open(timeout_s=10) as dev:
    prog = dev.load(STORE)
    sem, a, b = dev.alloc(4096, host=True), dev.alloc(4096, host=True), dev.alloc(4096, host=True)
    ctypes.memset(sem.va, 0, 8)
    prog(a, 7)
    dev.synchronize()                                  # the shape keeps launch data for (a, 7)
    with Submission(dev, dev.compute, "a wait for the CPU") as sub:
      sub.add(array("I", G.method(G.SUBC_HOST, G.SEM_ADDR_LO, sem.va & 0xFFFFFFFF, sem.va >> 32, 1, 0,
                                  G.SEM_OP_ACQUIRE)))
    prog(a, 1)         # other parameters while the kept data's last launch is done: written over
    kept = _qmd_address(dev)
    prog(b, 2)         # other parameters while (a, 1) waits: its own launch data
    prog(a, 1)         # (a, 1) again: the kept data, still unchanged
    ctypes.c_uint32.from_address(sem.va).value = 1
    dev.synchronize()
    assert ctypes.c_uint32.from_address(a.va).value == 1
    assert ctypes.c_uint32.from_address(b.va).value == 2
    assert prog.shape(1, 1, False).kept_launch[2] == kept - ((prog.shape(1, 1, False).cb_size + 255) // 256 * 256)


def test_the_mock_sees_a_changed_field_of_a_qmd_it_ran_before():
  # the mock keeps the last QMD's decoded launch (compared in place) and others by their bytes: a field that changed
  # since (here the grid width, in the part before constant buffer 0's address) is decoded afresh
  from hcq.drivers.nv.qmd import set_field
  counter = (b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry cnt(.param .u64 p)\n{\n"
             b"  .reg .b64 %rd<2>;\n  .reg .b32 %r<2>;\n  ld.param.u64 %rd1, [p];\n"
             b"  atom.global.add.u32 %r1, [%rd1], 1;\n  ret;\n}\n")
  with _open() as dev:
    prog = dev.load(counter)
    buf = dev.alloc(4096, host=True)
    ctypes.memset(buf.va, 0, 4)
    for _ in range(2): prog(buf, global_size=2, local_size=1)
    dev.synchronize()
    assert ctypes.c_uint32.from_address(buf.va).value == 4
    set_field(prog.shape(2, 1, False).qmd, dev.qmd_layout, "GRID_WIDTH", 5)
    for _ in range(2): prog(buf, global_size=2, local_size=1)
    dev.synchronize()
    assert ctypes.c_uint32.from_address(buf.va).value == 4 + 10
