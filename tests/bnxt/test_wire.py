"""RoCEv2 frames, pcap and the UDP wire, checked against tshark (layout) and scapy (ICRC)."""
import threading
import time

import pytest

from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import PcapWriter, read_pcap
from hcq.mockgpu.bnxt.wire import FaultPlan, Phy, corrupt_frame

from .oracles import scapy_available, scapy_icrc, tshark_rows

MAC_A, MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP_A, IP_B = bytes([10, 0, 200, 5]), bytes([10, 0, 200, 6])


def sample_frames():
  """WRITE ONLY (25 B, pad 3), a 2501-byte write at PMTU 1024 (FIRST/MIDDLE/LAST), its ACK and a NAK 0x62."""
  out = [fr.build(fr.RoceFrame(MAC_B, MAC_A, IP_A, IP_B, fr.RC_RDMA_WRITE_ONLY, 0x12, 0, ackreq=True,
                               reth=fr.Reth(0x7f0000001000, 0x1234, 25), payload=bytes(range(25))))]
  data = bytes((i * 7) & 0xFF for i in range(2501))
  for i, (op, off, size) in enumerate(fr.segment(len(data), 1024)):
    reth = fr.Reth(0x7f0000002000, 0xab000005, len(data)) if op in fr.WITH_RETH else None
    out.append(fr.build(fr.RoceFrame(MAC_B, MAC_A, IP_A, IP_B, op, 0x12, 1 + i, ackreq=op == fr.RC_RDMA_WRITE_LAST,
                                     reth=reth, payload=data[off:off + size])))
  out.append(fr.build(fr.RoceFrame(MAC_A, MAC_B, IP_B, IP_A, fr.RC_ACKNOWLEDGE, 0x11, 3, aeth=fr.Aeth(fr.AETH_ACK, 2))))
  out.append(fr.build(fr.RoceFrame(MAC_A, MAC_B, IP_B, IP_A, fr.RC_ACKNOWLEDGE, 0x11, 4,
                                   aeth=fr.Aeth(fr.AETH_NAK_REMOTE_ACCESS, 2))))
  return out


def test_segment_sizes():
  assert fr.segment(0, 1024) == [(fr.RC_RDMA_WRITE_ONLY, 0, 0)]
  assert fr.segment(1024, 1024) == [(fr.RC_RDMA_WRITE_ONLY, 0, 1024)]
  assert [op for op, _, _ in fr.segment(4096, 1024)] == [6, 7, 7, 8]
  assert [s for _, _, s in fr.segment(2501, 1024)] == [1024, 1024, 453]
  assert len(fr.segment(1 << 20, 4096)) == 256


def test_parse_roundtrip_and_icrc():
  for frame in sample_frames():
    assert fr.check_icrc(frame)
    f = fr.parse(frame)
    assert fr.build(f) == frame
  bad = corrupt_frame(sample_frames()[0])
  assert not fr.check_icrc(bad)
  with pytest.raises(fr.FrameError) as e: fr.parse(bad)
  assert e.value.reason == "bad_icrc"


@pytest.mark.skipif(not scapy_available(), reason="python3-scapy is not installed (/usr/bin/python3)")
def test_icrc_matches_scapy():
  frames = sample_frames()
  frames.append(corrupt_frame(frames[0]))
  pairs = scapy_icrc(frames)
  assert len(pairs) == len(frames)
  for ours_ok, (theirs, wire) in zip([True] * (len(frames) - 1) + [False], pairs):
    assert (theirs == wire) == ours_ok


@pytest.mark.tools("tshark")
def test_tshark_reads_our_frames(tmp_path):
  path = str(tmp_path / "f.pcap")
  w = PcapWriter(path)
  frames = sample_frames()
  for f in frames: w.write(f)
  w.close()
  assert read_pcap(path) == frames
  rows = tshark_rows(path)
  assert [r["bth.opcode"] for r in rows] == [10, 6, 7, 8, 17, 17]
  assert [r["bth.psn"] for r in rows] == [0, 1, 2, 3, 3, 4]
  assert [r["bth.destqp"] for r in rows] == [0x12] * 4 + [0x11] * 2
  assert [r["bth.a"] for r in rows[:4]] == [1, 0, 0, 1]
  assert rows[0]["bth.padcnt"] == 3 and rows[3]["bth.padcnt"] == 3   # 25 and 453 bytes
  assert (rows[0]["reth.va"], rows[0]["reth.r_key"], rows[0]["reth.dmalen"]) == (0x7f0000001000, 0x1234, 25)
  assert (rows[1]["reth.va"], rows[1]["reth.r_key"], rows[1]["reth.dmalen"]) == (0x7f0000002000, 0xab000005, 2501)
  assert rows[2]["reth.va"] is None
  assert (rows[4]["aeth.syndrome"], rows[4]["aeth.msn"]) == (0x1f, 2)
  assert rows[5]["aeth.syndrome"] == 0x62
  assert rows[0]["ip.src"] == "10.0.200.5" and rows[4]["ip.src"] == "10.0.200.6"
  # tshark shows the 4 ICRC wire bytes read big-endian (as tshark's infiniband dissector prints it)
  assert [r["invariant.crc"] for r in rows] == [int.from_bytes(f[-4:], "big") for f in frames]


def _collect(phy, n, timeout=5.0):
  got, done = [], threading.Event()
  def handler(frame):
    got.append(frame)
    if len(got) >= n: done.set()
  phy.rx_handler = handler
  return got, done


def test_udp_wire_loopback_and_peer(tmp_path):
  a = Phy("a", pcap=str(tmp_path / "a.pcap"))
  b = Phy("b", peer_port=a.address[1])
  a.peer = ("127.0.0.1", b.address[1])
  try:
    frames = sample_frames()
    got_b, done_b = _collect(b, 2)
    a.transmit(frames[0]); a.transmit(frames[1])
    assert done_b.wait(5) and got_b == frames[:2]
    got_a, done_a = _collect(a, 2)
    b.transmit(frames[4])
    a.loopback = True
    a.transmit(frames[2])
    assert done_a.wait(5) and sorted(got_a) == sorted([frames[4], frames[2]])
    assert a.stats["tx"] == 3
    a.loopback, a.peer = False, None
    a.transmit(frames[3])
    assert a.stats["tx_dropped_no_link"] == 1
  finally:
    a.close(); b.close()
  # a's pcap: its 4 transmitted frames and the one received from b; the looped-back frame appears once
  assert sorted(read_pcap(str(tmp_path / "a.pcap"))) == sorted([frames[0], frames[1], frames[4], frames[2], frames[3]])


def test_fault_injection_drop_corrupt_reorder():
  plan = FaultPlan.parse("drop=2,corrupt=3,reorder=4")
  a, b = Phy("a", faults=plan), Phy("b")
  a.peer = ("127.0.0.1", b.address[1])
  try:
    frames = sample_frames()[:5]
    got, done = _collect(b, 4)
    for f in frames: a.transmit(f)
    assert done.wait(5)
    time.sleep(0.1)
    assert len(got) == 4
    assert frames[1] not in got
    assert got[0] == frames[0] and not fr.check_icrc(got[1]) and got[2] == frames[4] and got[3] == frames[3]
    assert (a.stats["fault_dropped"], a.stats["fault_corrupted"], a.stats["fault_reordered"]) == (1, 1, 1)
  finally:
    a.close(); b.close()


def test_fault_spec_errors():
  with pytest.raises(ValueError, match="unknown fault"): FaultPlan.parse("explode=1")
  assert FaultPlan.parse("").empty
  assert FaultPlan.parse("p_drop=0.5").p_drop == 0.5


def test_wire_refuses_other_addresses():
  a = Phy("a")
  try:
    a.peer = ("10.0.0.1", 4791)
    with pytest.raises(ValueError, match="127.0.0.1 only"): a.transmit(sample_frames()[0])
  finally:
    a.close()


def test_a_failing_socket_is_reported_not_ignored():
  errors = []
  a = Phy("a", error=errors.append)
  a.sock.close()                       # the socket fails under the receive thread (not a close() of the PHY)
  a._thread.join(timeout=5)
  assert not a._thread.is_alive() and errors and "socket failed" in errors[0]
  a._stop.set()


def test_a_failing_late_send_is_reported():
  errors = []
  a = Phy("a", faults=FaultPlan.parse("reorder=1"), error=errors.append)
  try:
    a.peer = ("10.0.0.1", 4791)          # refused when the held frame goes out from the timer thread
    a.transmit(sample_frames()[0])
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline: time.sleep(0.01)
    assert errors and "reordered frame failed" in errors[0] and "127.0.0.1 only" in errors[0]
  finally:
    a.close()
