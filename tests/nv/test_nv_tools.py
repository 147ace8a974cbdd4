"""`hcq decode` of NV GPFIFO pushbuffers and `hcq-smi nv` against the mock NV GPU's sysfs."""
import io
import json
import struct

import pytest

from hcq.cli import main
from hcq.config import Config
from hcq.drivers.nv import gpfifo as G
from hcq.drivers.system import LinuxOS
from hcq.mockgpu import mock_nv_os
from hcq.smi import commands, listing
from hcq.smi.backends import backend
from hcq.smi.report import Report


def test_decode_device_names_the_methods_of_each_class(capsys):
  assert main(["decode", "--device", "MOCK+NV"]) == 0
  out = capsys.readouterr().out
  assert "== compute channel pushbuffer" in out and "== copy channel pushbuffer" in out
  for name in ("host.SET_OBJECT", "HOPPER_COMPUTE_A.SEND_PCAS_A", "HOPPER_COMPUTE_A.SEND_SIGNALING_PCAS2_B",
               "host.SEM_EXECUTE", "HOPPER_DMA_COPY_A.LAUNCH_DMA", "HOPPER_DMA_COPY_A.LINE_LENGTH_IN"):
    assert name in out, name


def test_decode_a_pushbuffer_file(tmp_path, capsys):
  words = G.method(G.SUBC_COPY, G.SET_OBJECT, 0xC7B5) + G.method(G.SUBC_COPY, G.COPY_LINE_LENGTH_IN, 64) + \
    G.method(G.SUBC_HOST, G.SEM_ADDR_LO, 0x1000, 0, 7, 0, G.SEM_OP_RELEASE)
  f = tmp_path / "pb.bin"
  f.write_bytes(struct.pack(f"<{len(words)}I", *words))
  assert main(["decode", "--engine", "gpfifo", str(f)]) == 0
  out = capsys.readouterr().out
  assert "AMPERE_DMA_COPY_B.LINE_LENGTH_IN" in out and "= 0x40" in out and "host.SEM_PAYLOAD_LO" in out


def test_decode_stops_at_a_word_that_is_no_method_header(tmp_path, capsys):
  f = tmp_path / "bad.txt"
  f.write_text(f"{G.header(0, G.WFI, 1):#x} 0 0xe0000000")
  assert main(["decode", "--engine", "gpfifo", str(f)]) == 1
  captured = capsys.readouterr()
  assert "host.WFI" in captured.out and "dword 2: 0xe0000000 is not a method header" in captured.err


@pytest.fixture
def nv_host():
  os = mock_nv_os(Config())
  yield os
  os.close()


class MockSysfsHost(LinuxOS):
  """The running system for everything but sysfs, which is the mock NV GPU's (lock files and /proc stay real)."""

  def __init__(self, mock, lock_dir):
    super().__init__(Config(lock_dir=str(lock_dir)))
    self.mock = mock
    for name in ("sysfs_list", "sysfs_read", "sysfs_read_bytes", "sysfs_exists", "sysfs_readlink"):
      setattr(self, name, getattr(mock, name))


def _ctx(os, tmp_path, as_json=True):
  out = io.StringIO()
  host = MockSysfsHost(os, tmp_path)
  return commands.Context(backend("nv"), host, Report(as_json, out=out, err=io.StringIO()), sudoless=True), out


def test_smi_nv_list_and_top_see_the_mock_gpu(nv_host, tmp_path):
  ctx, out = _ctx(nv_host, tmp_path)
  assert listing.list_devices(ctx) == 0
  doc = json.loads(out.getvalue())
  (fn,) = doc["devices"]
  assert (fn["address"], fn["id"], fn["driver"]) == ("0000:40:00.0", "10de:2335", "nvidia")
  ctx, out = _ctx(nv_host, tmp_path)
  assert listing.top(ctx, once=True) == 0
  (row,) = json.loads(out.getvalue())["devices"]
  assert row["id"] == "10de:2335" and row["error"] is None


def test_smi_nv_rmmod_expect_sees_the_loaded_modules(nv_host, tmp_path):
  ctx, out = _ctx(nv_host, tmp_path)
  assert commands.rmmod(ctx, expect=True) == 1
  assert json.loads(out.getvalue())["loaded"] == ["nvidia_modeset", "nvidia_uvm", "nvidia"]   # dependants first


def test_decode_device_reads_a_wrapped_pushbuffer_as_the_ring_holds_it(monkeypatch, capsys):
  from hcq.drivers.nv import device as nv_device
  # the demo writes 39 dwords on the compute channel (set-up, local memory, launch) and 41 on the copy channel: both
  # rings wrap, the compute one with a method's data continued in the next GPFIFO entry (which the mock GPU follows:
  # the demo completes)
  small_dw = 32
  orig = nv_device.NVDevice._host_memory
  def small_pushbuffers(self, size):
    va, cpu = orig(self, size)
    return va, cpu[:4 * small_dw] if size == nv_device.PUSHBUFFER_SIZE else cpu
  monkeypatch.setattr(nv_device.NVDevice, "_host_memory", small_pushbuffers)
  main(["decode", "--device", "MOCK+NV"])
  out = capsys.readouterr().out
  compute_head = next(line for line in out.splitlines() if line.startswith("== compute channel pushbuffer"))
  assert compute_head.startswith(f"== compute channel pushbuffer ({small_dw} dwords; the ring wrapped: ")
  copy_head = next(line for line in out.splitlines() if line.startswith("== copy channel pushbuffer"))
  assert copy_head.startswith(f"== copy channel pushbuffer ({small_dw} dwords; the ring wrapped: 41 dwords")
