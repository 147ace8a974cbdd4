"""`hcq rdma loopback|connect --mock`: exit status, byte-exact delivery, and the two-process pcap read by tshark."""
import re
import subprocess
import sys

import pytest

from hcq.cli import main
from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import read_pcap
from hcq.mockgpu.bnxt.wire import corrupt_frame

from .oracles import tshark_rows

HCQ = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"]


def hcq(*args, timeout=120):
  return subprocess.run(HCQ + list(args), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("size,pmtu", [("1", "1024"), ("4K", "1024"), ("4K", "4096"), ("1M", "1024"), ("1M", "4096")])
def test_loopback_mock(size, pmtu, capsys):
  assert main(["rdma", "loopback", "--mock", "--size", size, "--pmtu", pmtu, "--timeout", "60"]) == 0
  out = capsys.readouterr().out
  assert "verified" in out and f"at PMTU {pmtu}" in out


@pytest.mark.parametrize("size,pmtu", [("1", "1024"), ("4K", "1024"), ("4K", "4096"), ("1M", "1024"), ("1M", "4096")])
def test_connect_mock_two_processes(size, pmtu):
  r = hcq("rdma", "connect", "--mock", "--size", size, "--pmtu", pmtu, "--timeout", "60")
  assert r.returncode == 0, r.stderr
  assert "verified by the remote end" in r.stdout


def test_concurrent_connects_pick_their_own_ports():
  """Each mock PHY binds UDP port 0 and reports the port it got in the handshake: two connects at once (four NICs)
  can't take each other's port."""
  procs = [subprocess.Popen(HCQ + ["rdma", "connect", "--mock", "--size", "64K", "--timeout", "60"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
  outs = [p.communicate(timeout=120) for p in procs]
  assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
  assert all("verified by the remote end" in o[0] for o in outs)


def test_endpoint_reports_the_bound_udp_port():
  """The handshake's wire endpoint is the device's own (BNXTDev.wire_endpoint: the sysfs `wire` attribute of the
  mock function), and wire_connect points the PHY at a peer; bad values are refused by the device."""
  from hcq.cli.rdma import _endpoint
  from hcq.drivers.bnxt import BNXTQP
  from hcq.errors import DeviceError, OSCallError
  from hcq import open as hcq_open
  dev = hcq_open("MOCK+BNXT")
  try:
    dev.set_ip("10.0.200.5")
    qp = BNXTQP(dev)
    ep = _endpoint(dev, qp)
    phy = dev.os.pci_functions[dev.pci.addr].phy     # the model, seen only by this test
    assert ep["wire"] == {"udp_port": str(phy.sock.getsockname()[1])} and phy.address[1] != 0 and ep["qpn"] == qp.qpn
    dev.wire_connect({"udp_port": "40000"})
    assert phy.peer == ("127.0.0.1", 40000)
    with pytest.raises(OSCallError, match="udp_port=N"): dev.wire_connect({"udp_port": "70000"})
    with pytest.raises(OSCallError, match="udp_port=N"): dev.wire_connect({"port": "4"})
    with pytest.raises(DeviceError, match="not a key=value word"): dev.wire_connect({"udp_port": "1 2"})
    assert phy.peer == ("127.0.0.1", 40000)
  finally:
    dev.close(); dev.os.close()


def _connect_with_pcap(tmp_path, size, pmtu, *extra):
  pcap = str(tmp_path / "c.pcap")
  r = hcq("rdma", "connect", "--mock", "--size", str(size), "--pmtu", str(pmtu), "--pcap", pcap, "--timeout", "60",
          *extra)
  assert r.returncode == 0, r.stderr
  m = re.search(r"remote QP (0x[0-9a-f]+).* into (0x[0-9a-f]+) \(rkey (0x[0-9a-f]+)\)", r.stdout)
  mine = re.search(r"connect: QP (0x[0-9a-f]+)", r.stdout)
  return pcap, int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), int(mine.group(1), 16)


@pytest.mark.tools("tshark")
@pytest.mark.parametrize("size,pmtu", [(4096 + 1000, 1024), (25, 4096)])
def test_two_process_pcap_with_tshark(tmp_path, size, pmtu):
  pcap, rqpn, va, rkey, lqpn = _connect_with_pcap(tmp_path, size, pmtu)
  rows = tshark_rows(pcap)
  writes = [r for r in rows if r["bth.opcode"] in (6, 7, 8, 10)]
  acks = [r for r in rows if r["bth.opcode"] == 17]
  npkts = -(-size // pmtu)
  want_ops = [10] if npkts == 1 else [6] + [7] * (npkts - 2) + [8]
  assert [r["bth.opcode"] for r in writes] == want_ops
  assert all(r["bth.destqp"] == rqpn for r in writes)
  assert [r["bth.psn"] for r in writes] == list(range(npkts))          # sq_psn 0 at RTS
  assert [r["bth.a"] for r in writes] == [0] * (npkts - 1) + [1]
  assert (writes[0]["reth.va"], writes[0]["reth.r_key"], writes[0]["reth.dmalen"]) == (va, rkey, size)
  assert all(r["reth.va"] is None for r in writes[1:])
  assert writes[-1]["bth.padcnt"] == -(size - (npkts - 1) * pmtu) % 4
  assert len(acks) == 1 and acks[0]["bth.destqp"] == lqpn and acks[0]["bth.psn"] == npkts - 1
  assert acks[0]["aeth.syndrome"] == 0x1f and acks[0]["aeth.msn"] == 1
  assert all(r["ip.src"] == "10.0.200.5" for r in writes) and acks[0]["ip.src"] == "10.0.200.6"
  # hcq's ICRC check passes on every frame of the capture, and fails on a corrupted copy
  frames = read_pcap(pcap)
  assert len(frames) == len(rows) and all(fr.check_icrc(f) for f in frames)
  assert not fr.check_icrc(corrupt_frame(frames[0]))


def test_connect_survives_a_dropped_frame(tmp_path):
  pcap, rqpn, va, rkey, lqpn = _connect_with_pcap(tmp_path, 8192, 1024, "--faults", "drop=3")
  frames = [fr.parse(f) for f in read_pcap(pcap)]
  psns = [f.psn for f in frames if f.opcode != fr.RC_ACKNOWLEDGE]
  assert psns.count(2) == 1 and len(psns) > 8        # frame 3 (PSN 2) never left; a retransmission followed
  assert any(f.opcode == fr.RC_ACKNOWLEDGE and f.aeth.syndrome == fr.AETH_NAK_PSN_SEQ for f in frames)



def test_pci_address_that_does_not_exist_is_named():
  r = hcq("rdma", "loopback", "--pci", "0000:ff:1f.7", "--ip", "10.1.1.1", timeout=60)
  assert r.returncode == 1 and "0000:ff:1f.7" in r.stderr


def _thor2_on_this_machine():
  from hcq.config import from_env
  from hcq.drivers.bnxt import find_devices
  from hcq.drivers.system import LinuxOS
  from hcq.errors import DeviceError
  try: return [d.addr for d in find_devices(LinuxOS(from_env()))]
  except (DeviceError, OSError): return []   # no PCI sysfs here: no Thor2 either


@pytest.mark.hardware
def test_loopback_on_a_real_thor2():
  found = _thor2_on_this_machine()
  if not found: pytest.skip("no Broadcom Thor2 (14e4:1760) on this machine")
  r = hcq("rdma", "loopback", "--pci", found[0], "--ip", "10.200.0.1", "--size", "4K", timeout=120)
  assert r.returncode == 0 and "verified" in r.stdout, r.stderr


def test_remote_channel_splits_lines_and_names_bad_ones():
  from hcq.cli.rdma import Remote
  from hcq.errors import DeviceError
  two = Remote([sys.executable, "-c", "print('{\"a\": 1}\\n{\"b\": 2}\\nnot json', flush=True)"], timeout=30)
  try:
    assert two.recv("first") == {"a": 1} and two.recv("second") == {"b": 2}   # one read, two lines
    with pytest.raises(DeviceError, match="where its third .* was expected"): two.recv("third")
  finally:
    two.close()
  gone = Remote([sys.executable, "-c", "pass"], timeout=30)
  gone.proc.wait(timeout=30)
  with pytest.raises(DeviceError, match="remote end exited"):
    for _ in range(64): gone.send({"pad": "x" * 4096})   # fills no pipe: the reader is gone
  gone.close()


def test_serve_answers_two_requests_that_arrive_in_one_read():
  """Both ends read lines with os.read + select: a line already read past is answered, not waited for."""
  import json
  gid = (bytes(10) + b"\xff\xff" + bytes([10, 0, 200, 5])).hex()
  reqs = json.dumps({"qpn": 0x123, "mac": "020000000001", "gid": gid, "wire": {"udp_port": 9}}) + "\n" + \
    json.dumps({"size": 64})
  from hcq.cli.rdma import LineReader
  p = subprocess.Popen(HCQ + ["rdma", "serve", "--mock", "--timeout", "30"], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  try:
    p.stdin.write((reqs + "\n").encode()); p.stdin.flush()          # stdin stays open: no EOF wakes the server
    replies = LineReader(p.stdout.fileno(), "serve", timeout=10)
    first, second = replies.recv("endpoint"), replies.recv("buffer")   # the second within 10 s, not after 30
  finally:
    p.stdin.close()
    p.wait(timeout=60)
    err = p.stderr.read().decode(errors="replace")
    p.stdout.close(); p.stderr.close()
  assert p.returncode == 0, err
  assert sorted(first) == ["gid", "mac", "qpn", "wire"] and sorted(second) == ["addr", "rkey", "size"]
