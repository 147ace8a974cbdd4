"""Hostile inputs and large transfers on the BNXT path: the mock NIC carries 64 MiB and survives loss (retry count
restarted by progress, no quadratic work, nothing heavy inside the doorbell write), buffers and `hcq rdma` refuse what
they cannot use with an hcq error (exit 2 for usage, 1 for failures, never a traceback), and the CLI reaches the
device only through public paths."""
import ast
import collections
import json
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from hcq.cli import main
from hcq.config import Config, from_env
from hcq.drivers.bnxt.poll import poll_until
from hcq.drivers.bnxt.qp import BNXTQP
from hcq.errors import ConfigError, DeviceError, Timeout
from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import read_pcap

from .harness import open_dev

HCQ = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"]




def loopback_write(os, nic, size, pmtu=1024, timeout_s=60, **qp_kw):
  """One RDMA WRITE of size random bytes through PHY loopback, checked; returns {thread name: frames it transmitted}
  (the NIC model's threads, and the driver's for the first batch its SQ doorbell write sends)."""
  dev = open_dev(os, nic)
  a, b = BNXTQP(dev, pmtu=pmtu, **qp_kw), BNXTQP(dev, pmtu=pmtu, **qp_kw)
  a.connect(b.qpn, dev.gid, dev.mac)
  b.connect(a.qpn, dev.gid, dev.mac)
  dev.set_loopback(True)
  src, dst = dev.alloc(size), dev.alloc(size)
  lk, rk = dev.register_mr(src), dev.register_mr(dst)
  data = bytes(range(256)) * (size // 256) + bytes(size % 256)
  src.write(0, data)
  senders = collections.Counter()
  orig = nic.phy.transmit
  def transmit(frame):
    senders[threading.current_thread().name] += 1
    orig(frame)
  nic.phy.transmit = transmit
  a.rdma_write(dst.va, rk, src.va, lk, size, timeout_s=timeout_s)
  assert dst.read(0, size) == data
  assert nic.errors == []
  return senders


def _lines_of_a_write(mock, size, seed) -> int:
  """Python lines every thread (the driver's, the NIC's) executes for one loopback write of size bytes."""
  count = [0]
  def local(frame, event, arg):
    if event == "line": count[0] += 1
    return local
  def start(frame, event, arg): return local
  threading.settrace(start)       # the NIC's threads, started by mock()
  sys.settrace(start)
  try:
    os, nic = mock(seed=seed)
    loopback_write(os, nic, size)
  finally:
    sys.settrace(None)
    threading.settrace(None)
  return count[0]


# ---------------------------------------------------------------- item 1: size, loss, linear time
def test_1mib_through_1pct_loss_restarts_the_retry_count_on_progress(mock):
  """More frames are lost than the QP has retries: the write completes only because each ACK that advances
  restarts the count (before, the count ran over the whole message and TRANSPORT_RETRY_CNT_ERR ended it)."""
  os, nic = mock(seed=41, faults="p_drop=0.01,seed=17")
  loopback_write(os, nic, 1 << 20, retry_cnt=7)
  assert nic.phy.stats["fault_dropped"] > 7 * 1.5
  assert not any("exhausted" in m for m in nic.messages)


def test_large_writes_complete_and_the_doorbell_write_sends_a_bounded_batch(mock):
  """4 MiB and 8 MiB (both failed before: the mock outran its own ACK timer) arrive whole, and the driver's SQ
  doorbell write sends at most the engine's first batch (TX_BATCH frames) whatever the size: the NIC model's threads
  send the rest. Counted, not timed."""
  from hcq.mockgpu.bnxt.engine import TX_BATCH
  for size, seed in ((4 << 20, 50), (8 << 20, 60)):
    os, nic = mock(seed=seed)
    senders = loopback_write(os, nic, size)
    in_doorbell = senders[threading.main_thread().name]
    assert in_doorbell <= TX_BATCH and sum(senders.values()) - in_doorbell >= size // 1024 - TX_BATCH, senders


def test_the_work_of_a_write_is_linear_in_its_size(mock):
  """Twice the bytes, at most about twice the Python lines executed by every thread (a quadratic copy or rescan
  would make it four times). Counted, not timed: bench/rdma.py measures the speed."""
  small, large = _lines_of_a_write(mock, 256 << 10, 70), _lines_of_a_write(mock, 512 << 10, 71)
  assert large <= 2.6 * small, (small, large, large / small)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["loopback", "connect"])
def test_64mib_mock(mode):
  """The advertised maximum, in one process and between two, within the default --timeout."""
  t = time.perf_counter()
  r = subprocess.run(HCQ + ["rdma", mode, "--mock", "--size", "64M", "--timeout", "30"], capture_output=True,
                     text=True, timeout=300)
  assert r.returncode == 0 and "verified" in r.stdout, r.stderr
  print(f"{mode} 64 MiB: {time.perf_counter() - t:.1f} s wall")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["loopback", "connect"])
def test_16mib_through_1pct_loss(mode):
  r = subprocess.run(HCQ + ["rdma", mode, "--mock", "--size", "16M", "--faults", "p_drop=0.01,seed=7",
                            "--timeout", "60"], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and "verified" in r.stdout, r.stderr


# ---------------------------------------------------------------- item 2: buffers
def test_buffers_refuse_sizes_and_accesses_outside_them(mock):
  os, nic = mock(seed=43)
  dev = open_dev(os, nic)
  for bad in (0, -1, 1.5, True, "4096"):
    with pytest.raises(DeviceError, match=f"buffer of {bad!r} bytes: size {bad!r} is not a positive"): dev.alloc(bad)
  buf = dev.alloc(100)
  assert buf.size == 4096 and buf.read(4000, 96) == bytes(96)
  for off, n in ((4000, 97), (4096, 1), (-1, 1), (0, -1), (1 << 40, 1)):
    with pytest.raises(DeviceError, match=rf"read of {n} bytes at offset {off} is outside the buffer \[0, 4096\)"):
      buf.read(off, n)
  with pytest.raises(DeviceError, match="write of 2 bytes at offset 4095 is outside"): buf.write(4095, b"ab")
  with pytest.raises(DeviceError, match="read offset 1.0 is not an integer"): buf.read(1.0, 1)
  assert buf.read(0, 4096) == bytes(4096)      # the failed write wrote nothing


# ---------------------------------------------------------------- item 3: what a peer can make serve do
def _serve(stdin_bytes: bytes, timeout=60):
  p = subprocess.Popen(HCQ + ["rdma", "serve", "--mock", "--timeout", "20"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  t = time.perf_counter()
  out, err = p.communicate(stdin_bytes, timeout=timeout)
  return p.returncode, out.decode(), err.decode(), time.perf_counter() - t


ENDPOINT = json.dumps({"qpn": 0x123, "mac": "020000000001", "gid": (bytes(10) + b"\xff\xff" + bytes([10, 0, 200, 5])).hex(),
                       "wire": {"udp_port": 9}}) + "\n"


@pytest.mark.parametrize("size", [1 << 30, -1, 0, "64", True, (64 << 20) + 1])
def test_serve_refuses_a_size_it_would_not_allocate(size):
  rc, out, err, _ = _serve((ENDPOINT + json.dumps({"size": size}) + "\n").encode())
  last = json.loads(out.splitlines()[-1])
  assert rc == 1 and "size=" in last["error"] and "1 .. 67108864 bytes" in last["error"], (out, err)
  assert "Traceback" not in err


def test_serve_refuses_an_endless_line_quickly():
  """8 MiB without a newline: refused once 64 KiB are buffered (before: kept and rescanned with every read)."""
  rc, out, err, _ = _serve(b"x" * (8 << 20))     # bounded by _serve's timeout (TimeoutExpired fails the test)
  assert rc == 1 and "line of more than 65536 bytes" in json.loads(out.splitlines()[-1])["error"], err
  assert "Traceback" not in err


@pytest.mark.parametrize("peer,match", [
  ({"qpn": "1", "mac": "020000000001", "gid": "00" * 16}, "qpn=\"1\", which is not a QP number"),
  ({"qpn": 1, "mac": "0200", "gid": "00" * 16}, "mac=\"0200\", which is not a MAC"),
  ({"qpn": 1, "mac": "020000000001"}, "sent no 'gid'"),
  ({"qpn": 1, "mac": "020000000001", "gid": "00" * 16, "wire": {"udp_port": 70000}}, "udp_port=N"),
])
def test_serve_names_a_bad_endpoint(peer, match):
  rc, out, err, _ = _serve((json.dumps(peer) + "\n").encode())
  assert rc == 1 and match in json.loads(out.splitlines()[-1])["error"], (out, err)
  assert "Traceback" not in err


# ---------------------------------------------------------------- item 4: hcq rdma bad inputs
def run_main(argv, monkeypatch, capsys, env=()):
  """main() in this process: exit status and all output. An exception other than SystemExit fails the test (it would
  have been a traceback)."""
  for k, v in env: monkeypatch.setenv(k, v)
  try: rc = main(argv)
  except SystemExit as e: rc = e.code
  got = capsys.readouterr()
  return rc, got.out + got.err


BAD_INPUTS = [
  # (argv after `hcq rdma`, environment, exit status, text the message must hold)
  (["loopback", "--faults", "drop=abc"], [], 2, "argument --faults: fault spec 'drop=abc': drop='abc' is not frame"),
  (["loopback", "--faults", "p_drop=2"], [], 2, "p_drop='2' is not a probability 0..1"),
  (["loopback", "--faults", "p_drop=nan"], [], 2, "p_drop='nan' is not a probability 0..1"),
  (["loopback", "--faults", "p_drop=-0.1"], [], 2, "is not a probability 0..1"),
  (["loopback", "--faults", "explode=1"], [], 2, "unknown fault 'explode'"),
  (["loopback", "--faults", "drop=1,drop=2"], [], 2, "drop is given twice"),
  (["loopback", "--faults", "seed=x"], [], 2, "seed='x' is not an integer"),
  (["loopback", "--pcap", "/nonexistent-hcq/x.pcap"], [], 2, "the folder /nonexistent-hcq does not exist"),
  (["loopback", "--pcap", "/proc/x.pcap"], [], 2, "cannot write '/proc/x.pcap'"),
  (["loopback", "--pcap", "/"], [], 2, "cannot write '/': it is a folder"),
  (["loopback", "--size", "0"], [], 2, "size 0 is outside 1 B .. 64 MiB"),
  (["loopback", "--size", "65M"], [], 2, "size 65M is outside"),
  (["loopback", "--size", "lots"], [], 2, "'lots' is not a size"),
  (["loopback", "--timeout", "nan"], [], 2, "'nan' is not a number of seconds > 0"),
  (["loopback", "--timeout", "-1"], [], 2, "'-1' is not a number of seconds > 0"),
  (["loopback", "--ip", "10.0.0.300"], [], 2, "'10.0.0.300' is not an IPv4 address"),
  (["loopback", "--mock-port", "70000"], [], 2, "70000 is not a UDP port"),
  (["loopback", "--mock-mac", "02:00"], [], 2, "'02:00' is not a MAC address"),
  (["loopback", "--pmtu", "1000"], [], 2, "invalid choice"),
  (["loopback"], [("HCQ_BNXT_MOCK_FAULTS", "drop=abc")], 2, "environment variable HCQ_BNXT_MOCK_FAULTS: fault spec"),
  (["loopback"], [("HCQ_BNXT_MOCK_FAULTS", "p_drop=nan")], 2, "HCQ_BNXT_MOCK_FAULTS: fault spec 'p_drop=nan'"),
  (["loopback"], [("HCQ_BNXT_MOCK_PORT", "abc")], 2, "environment variable HCQ_BNXT_MOCK_PORT='abc' is not an integer"),
  (["loopback"], [("HCQ_BNXT_MOCK_PORT", "70000")], 2, "HCQ_BNXT_MOCK_PORT='70000' is out of range"),
  (["loopback"], [("HCQ_BNXT_MOCK_PEER", "-1")], 2, "HCQ_BNXT_MOCK_PEER='-1' is out of range"),
  (["loopback"], [("HCQ_BNXT_MOCK_MAC", "xyz")], 2, "HCQ_BNXT_MOCK_MAC: 'xyz' is not a MAC address"),
  (["loopback"], [("HCQ_BNXT_MOCK_PCAP", "/nonexistent-hcq/a.pcap")], 2,
   "environment variable HCQ_BNXT_MOCK_PCAP: cannot write '/nonexistent-hcq/a.pcap'"),
  (["loopback", "--pci", "0000:ff:1f.7", "--ip", "10.1.1.1", "--faults", "drop=1"], [], 2,
   "--faults: only for the mock wire (--mock)"),
  (["loopback", "--pci", "0000:ff:1f.7"], [], 2, "--ip is required with --pci"),
  (["connect", "--pci", "0000:ff:1f.7", "--ip", "10.1.1.1"], [], 2, "connect --pci needs --remote-cmd"),
  (["connect", "--pci", "0000:ff:1f.7", "--ip", "10.1.1.1", "--remote-cmd", "ssh 'x"], [], 2,
   "--remote-cmd \"ssh 'x\": No closing quotation"),
  (["loopback", "--pci", "0000:ff:1f.7", "--ip", "10.1.1.1"], [], 1, "0000:ff:1f.7"),
]


@pytest.mark.parametrize("argv,env,status,text", BAD_INPUTS, ids=[" ".join(a) + "".join(f" {k}={v}" for k, v in e)
                                                                  for a, e, _, _ in BAD_INPUTS])
def test_rdma_bad_inputs(argv, env, status, text, monkeypatch, capsys):
  rc, out = run_main(["rdma"] + argv, monkeypatch, capsys, env)
  assert rc == status and text in out and "Traceback" not in out, out


def test_rdma_bad_inputs_in_a_subprocess_leave_no_traceback(tmp_path):
  import os
  env = {**os.environ, "HCQ_BNXT_MOCK_FAULTS": "p_drop=2"}
  r = subprocess.run(HCQ + ["rdma", "connect", "--mock"], capture_output=True, text=True, timeout=60, env=env)
  assert r.returncode == 2 and "HCQ_BNXT_MOCK_FAULTS" in r.stderr and "Traceback" not in r.stderr
  r = subprocess.run(HCQ + ["rdma", "connect", "--mock", "--pcap", str(tmp_path / "no" / "c.pcap")], capture_output=True,
                     text=True, timeout=60)
  assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def test_config_checks_values_wherever_they_come_from():
  with pytest.raises(ConfigError, match="HCQ_BNXT_MOCK_FAULTS"): from_env({"HCQ_BNXT_MOCK_FAULTS": "p_drop=inf"})
  with pytest.raises(ConfigError, match="Config.bnxt_mock_faults"): Config(bnxt_mock_faults="corrupt=0")
  with pytest.raises(ConfigError, match="Config.bnxt_mock_port"): Config().replace(bnxt_mock_port=-5)
  assert from_env({"HCQ_BNXT_MOCK_FAULTS": "drop=1+3,p_drop=0.5,seed=0x10"}).bnxt_mock_faults == "drop=1+3,p_drop=0.5,seed=0x10"


def test_rdma_takes_its_mock_options_from_the_environment(tmp_path, monkeypatch, capsys):
  """HCQ_BNXT_MOCK_PCAP, _FAULTS and _MAC reach `hcq rdma` as the defaults of --pcap, --faults and --mock-mac (they
  were overridden by empty flags before); a flag still wins."""
  pcap = tmp_path / "env.pcap"
  env = [("HCQ_BNXT_MOCK_PCAP", str(pcap)), ("HCQ_BNXT_MOCK_FAULTS", "drop=1"), ("HCQ_BNXT_MOCK_MAC", "02aabbccddee")]
  rc, out = run_main(["rdma", "loopback", "--mock", "--size", "4K"], monkeypatch, capsys, env)
  assert rc == 0 and "verified" in out, out
  frames = [fr.parse(f) for f in read_pcap(str(pcap))]
  assert frames[0].psn == 1                                       # PSN 0 was the dropped frame 1
  assert all(f.src_mac == bytes.fromhex("02aabbccddee") for f in frames)
  rc, out = run_main(["rdma", "loopback", "--mock", "--size", "4K", "--faults", "", "--pcap", str(tmp_path / "f.pcap")],
                     monkeypatch, capsys, env)
  assert rc == 0 and [fr.parse(f).psn for f in read_pcap(str(tmp_path / "f.pcap"))][:4] == [0, 1, 2, 3]


def test_mock_port_and_peer_come_from_the_environment(monkeypatch):
  import socket
  from hcq.cli.rdma import open_nic, register
  import argparse
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  monkeypatch.setenv("HCQ_BNXT_MOCK_PORT", str(port))
  monkeypatch.setenv("HCQ_BNXT_MOCK_PEER", "40001")
  parser = argparse.ArgumentParser()
  register(parser.add_subparsers())
  dev = open_nic(parser.parse_args(["rdma", "serve", "--mock"]))
  try:
    assert dev.wire_endpoint() == {"udp_port": str(port)}
    assert dev.os.pci_functions[dev.pci.addr].phy.peer == ("127.0.0.1", 40001)
  finally:
    dev.close()


# ---------------------------------------------------------------- item 5: one wait loop; no reaching into the mock
class Clock:
  def __init__(self): self.t = 0.0
  def monotonic(self): return self.t
  def sleep(self, s): self.t += max(s, 0.001)


def test_poll_until_names_what_it_waited_for_and_checks_once_more_at_the_deadline():
  clock = Clock()
  with pytest.raises(Timeout, match=r"waiting for CQ 3 to reach toggle 1 \(last seen toggle 0\) after 0.05 s"):
    poll_until(clock, lambda: (False, "toggle 0"), 0.05, "CQ 3", "toggle 1")
  calls = []
  def late():   # true only on the poll after the deadline passed
    calls.append(clock.t)
    return (clock.t > 0.05, "x")
  clock.t = 0.0
  assert poll_until(clock, late, 0.05, "late", "x") == "x"


def test_the_cli_reaches_no_device_model():
  """cli/rdma.py uses the device's public methods only: no getattr/hasattr probing of objects, no .devices,
  .phy or .errors of a model."""
  tree = ast.parse((pathlib.Path(__file__).parents[2] / "cli" / "rdma.py").read_text())
  probes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("getattr", "hasattr")]
  assert all(isinstance(n.args[0], ast.Name) and n.args[0].id == "args" for n in probes)   # argparse's namespace only
  attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
  assert not attrs & {"devices", "phy", "errors", "pci_functions", "engine", "fw"}


def test_device_errors_reach_the_cli_through_the_device(mock, capsys):
  from hcq.cli.rdma import report_device_errors
  from hcq.drivers.bnxt.doorbell import SQ
  os, nic = mock(seed=44)
  dev = open_dev(os, nic)
  assert dev.device_errors() == [] and report_device_errors(dev, "test")
  dev.ring_db(0x7777, SQ, 0, 0)
  assert dev.device_errors() == ["SQ doorbell for unknown QP 0x7777"]
  assert not report_device_errors(dev, "test")
  assert "the device reports a driver bug: SQ doorbell for unknown QP 0x7777" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["\u00b2", "9" * 5000, "0", "65536"])
def test_the_mock_wire_refuses_a_port_it_cannot_use_with_an_os_error(mock, port):
  """sysfs `wire` of the mock NIC: a port that is no ASCII number of at most 5 digits is EINVAL (it used to end in a
  ValueError from int())."""
  from hcq.errors import OSCallError
  os, nic = mock(seed=31)
  with pytest.raises(OSCallError, match="expected udp_port=N"): nic._wire_write(f"udp_port={port}".encode())
