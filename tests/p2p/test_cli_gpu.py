"""`hcq rdma gpu --mock [--connect]`: kernel -> GPU-posted RDMA WRITE -> kernel, in one process (loopback) and in two
processes on the mock UDP wire, the output checked against numpy by the command, the capture decoded by tshark."""
import re
import subprocess
import sys

import pytest

from hcq.cli import main
from hcq.mockgpu.bnxt import frames as fr
from hcq.mockgpu.bnxt.pcap import read_pcap

from tests.bnxt.oracles import tshark_rows

HCQ = [sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))"]


VENDOR = {"KFD": "AMD", "PCI": "AMD", "RM": "NV"}


@pytest.mark.parametrize("size,pmtu,iface", [("4K", "1024", "KFD"), ("12K", "4096", "KFD"), ("12K", "4096", "RM")])
def test_gpu_loopback_mock(size, pmtu, iface, capsys):
  assert main(["rdma", "gpu", "--mock", "--gpu-iface", iface, "--size", size, "--pmtu", pmtu, "--timeout", "60"]) == 0
  out = capsys.readouterr().out
  assert "posted and completed by the GPU queue" in out and "verified against numpy" in out
  assert f"on {iface}+{VENDOR[iface]}:0" in out and f"on {iface}+{VENDOR[iface]}:1" in out


def test_gpu_size_must_hold_float32s(capsys):
  assert main(["rdma", "gpu", "--mock", "--size", "4097"]) == 2
  assert "multiple of 4" in capsys.readouterr().err


@pytest.fixture(scope="module")
def fw_env():
  """The environment with HCQ_FIRMWARE_DIR set to the pinned AMD firmware package (for MOCKPCI+AMD children)."""
  import os
  from hcq.autogen import fwpackage, sources
  from hcq.config import from_env
  try: fw = fwpackage.firmware_dir(from_env().autogen_cache, log=lambda *a: None)
  except sources.SourceError as e: pytest.skip(f"no AMD firmware package: {e}")
  return {**os.environ, "HCQ_FIRMWARE_DIR": str(fw)}


@pytest.mark.tools("tshark")
@pytest.mark.parametrize("iface,remote", [("KFD", "KFD"), ("PCI", "PCI"), ("KFD", "PCI"), ("RM", "KFD")])
def test_gpu_connect_two_processes_pcap_with_tshark(tmp_path, iface, remote, fw_env):
  """Two processes, each a mock GPU (MOCK+AMD over KFD, MOCKPCI+AMD through AM, or MOCK+NV over RM) and a mock Thor2
  on the UDP wire; KFD on the sending side with AM receiving too, and an NV GPU's GPFIFO channel sending to AMD."""
  size, pmtu = 5000 * 4, 1024
  pcap = str(tmp_path / "gpu.pcap")
  r = subprocess.run(HCQ + ["rdma", "gpu", "--mock", "--connect", "--gpu-iface", iface, "--remote-gpu-iface", remote,
                            "--size", str(size), "--pmtu", str(pmtu), "--pcap", pcap, "--timeout", "60"],
                     capture_output=True, text=True, timeout=180, env=fw_env)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "the remote kernel's output: verified against numpy" in r.stdout
  assert (f"on {iface}+{VENDOR[iface]}:0" in r.stdout) and "posted and completed by the GPU queue" in r.stdout
  assert f"on {remote}+{VENDOR[remote]}:0" in r.stderr      # the remote end's own line (its stderr is inherited)
  m = re.search(r"remote QP (0x[0-9a-f]+), \d+ bytes at PMTU \d+ into (0x[0-9a-f]+) \(rkey (0x[0-9a-f]+)\)", r.stdout)
  rqpn, va, rkey = (int(x, 16) for x in m.groups())
  rows = tshark_rows(pcap)
  writes = [row for row in rows if row["bth.opcode"] in (6, 7, 8, 10)]
  npkts = -(-size // pmtu)
  # the payload (FIRST, MIDDLE..., LAST), then the arrival flag (ONLY, 8 bytes) to another address, PSNs in order
  assert [w["bth.opcode"] for w in writes] == [6] + [7] * (npkts - 2) + [8] + [10]
  assert [w["bth.psn"] for w in writes] == list(range(npkts + 1))
  assert all(w["bth.destqp"] == rqpn for w in writes)
  assert (writes[0]["reth.va"], writes[0]["reth.r_key"], writes[0]["reth.dmalen"]) == (va, rkey, size)
  assert writes[-1]["reth.dmalen"] == 8 and writes[-1]["reth.va"] != va
  acks = [row for row in rows if row["bth.opcode"] == 17]
  assert acks and acks[-1]["bth.psn"] == npkts and acks[-1]["aeth.syndrome"] == 0x1f
  frames = read_pcap(pcap)
  assert len(frames) == len(rows) and all(fr.check_icrc(f) for f in frames)
