"""`hcq rdma loopback --iters/--sweep/--json` (perftest's table) and `hcq rdma devinfo` (ibv_devinfo's fields) on the
mock Thor2."""
import json

import pytest

from hcq.cli import main
from hcq.cli import _rdmaperf as perf
from hcq.cli.rdma import iboe_mtu


def test_the_sweep_is_ib_write_bw_a_range():
  sizes = perf.sweep_sizes()
  assert sizes[0] == 2 and sizes[-1] == 64 << 20 and len(sizes) == 26
  assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
  assert perf.sweep_sizes(4096) == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def test_measure_computes_perftests_figures_from_the_times():
  ticks = iter([0.0, 1e-6, 1.0, 1.0 + 3e-6, 2.0, 2.0 + 2e-6])   # three writes of 1, 3 and 2 us
  row = perf.measure(lambda: None, 1000, 3, clock=lambda: next(ticks))
  assert row["iterations"] == 3 and row["bytes"] == 1000
  assert row["lat_min_us"] == pytest.approx(1.0) and row["lat_avg_us"] == pytest.approx(2.0)
  assert row["lat_p99_us"] == pytest.approx(3.0)
  assert row["bw_gbps"] == pytest.approx(1000 * 8 * 3 / 6e-6 / 1e9) and row["msg_rate_mpps"] == pytest.approx(0.5)
  assert perf.percentile(sorted(range(1, 101)), 99) == 99 and perf.percentile([5.0], 99) == 5.0


def test_loopback_sweep_json_has_a_verified_row_per_size(capsys):
  assert main(["rdma", "loopback", "--mock", "--sweep", "--size", "64K", "--iters", "2", "--pmtu", "4096", "--json"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert doc["verified"] and [r["bytes"] for r in doc["rows"]] == perf.sweep_sizes(64 << 10)
  for r in doc["rows"]:
    assert r["iterations"] == 2 and r["verified"] and r["bw_gbps"] > 0 and r["msg_rate_mpps"] > 0
    assert r["lat_min_us"] <= r["lat_avg_us"] and r["lat_min_us"] <= r["lat_p99_us"]


def test_loopback_iters_prints_the_table(capsys):
  assert main(["rdma", "loopback", "--mock", "--iters", "3", "--size", "8K"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].split() == ["#bytes", "#iterations", "BW", "average[Gb/s]", "MsgRate[Mpps]", "t_min[usec]",
                              "t_avg[usec]", "t_p99[usec]"]
  assert lines[1].split()[:2] == ["8192", "3"] and lines[-1].endswith("1 sizes x 3 writes: verified")


def test_iters_out_of_range_is_a_usage_error(capsys):
  assert main(["rdma", "loopback", "--mock", "--iters", "0"]) == 2
  assert "--iters 0: must be 1 .. 1000000" in capsys.readouterr().err


def test_iboe_mtu_is_linuxs():
  # include/rdma/ib_addr.h iboe_get_mtu: 96 bytes of RoCE headers off the netdev MTU, then the largest IB MTU
  assert [iboe_mtu(m) for m in (9000, 4192, 4191, 1500, 1120, 352, 351)] == [4096, 4096, 2048, 1024, 1024, 256, 0]


def test_devinfo_on_the_mock(capsys):
  assert main(["rdma", "devinfo", "--mock", "--json", "--mock-mac", "02000000000a"]) == 0
  info = json.loads(capsys.readouterr().out)
  assert info["fw_ver"] == "230.2.49" and info["mac"] == "02:00:00:00:00:0a" and info["node_guid"] == "0000:00ff:fe00:000a"
  (port,) = info["ports"]
  assert (port["port"], port["state"], port["link_speed_gbps"], port["max_mtu"], port["active_mtu"]) == \
    (1, "PORT_ACTIVE", 400.0, 4096, 4096)
  assert port["gids"] == [{"index": 0, "gid": "0000:0000:0000:0000:0000:ffff:0a00:c805", "ip": "10.0.200.5",
                           "type": "RoCE v2"}] and port["loopback"] is False
  assert main(["rdma", "devinfo", "--mock"]) == 0
  text = capsys.readouterr().out
  assert "\tfw_ver:         230.2.49" in text and "state:          PORT_ACTIVE" in text


def test_the_mock_port_reports_its_loopback():
  import hcq
  with hcq.open("MOCK+BNXT") as dev:
    assert dev.hwrm.call("port_phy_qcfg", port_id=dev.port_id).lpbk == 0
    dev.set_loopback(True)
    assert dev.hwrm.call("port_phy_qcfg", port_id=dev.port_id).lpbk == 1
    from hcq.drivers.bnxt.hwrm import HWRMError
    with pytest.raises(HWRMError, match="HWRM port_phy_qcfg failed"):
      dev.hwrm.call("port_phy_qcfg", port_id=dev.port_id + 5)
    assert any("port_phy_qcfg" in e for e in dev.device_errors())


def test_connect_iters_json_is_verified_by_the_remote_end():
  import subprocess
  import sys
  r = subprocess.run([sys.executable, "-c", "import sys; from hcq.cli import main; sys.exit(main(sys.argv[1:]))",
                      "rdma", "connect", "--mock", "--iters", "3", "--size", "16K", "--json"],
                     capture_output=True, text=True, timeout=120)
  assert r.returncode == 0, r.stderr
  doc = json.loads(r.stdout)
  (row,) = doc["rows"]
  assert doc["mode"] == "connect" and doc["verified"] and (row["bytes"], row["iterations"]) == (16384, 3)
