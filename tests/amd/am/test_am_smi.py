"""hcq-smi against a GPU the AM driver holds, in one process: MOCKPCI+AMD opened through hcq.open, then hcq-smi's entry
point run over the same MockOS (its lock files, /proc/locks and fds show the holder as Linux shows them)."""
import json
import re
import time

import pytest

import hcq
from hcq.autogen.amd import smu_v13_0_0 as S
from hcq.config import Config
from hcq.drivers.amd.am import state as statemod
from hcq.smi import main as smi

ADDR = "0000:03:00.0"


@pytest.fixture
def held(fw_dir, tmp_path):
  """(device, its MockOS, the mock GPU): MOCKPCI+AMD booted and held by this process."""
  dev = hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir, lock_dir=str(tmp_path)))
  os = dev.owned_os
  (gpu,) = [d for d in os.devices if getattr(d, "addr", None) == ADDR]
  yield dev, os, gpu
  dev.close()


def run(os, capsys, *argv):
  rc = smi(["amd", *argv], host=os)
  out = capsys.readouterr()
  return rc, out.out, out.err


def top_json(os, capsys):
  rc, out, err = run(os, capsys, "top", "--json")
  (row,) = [r for r in json.loads(out)["devices"] if r["address"] == ADDR]
  return rc, row, err


def test_list_shows_the_am_holder(held, capsys):
  import os as host
  _dev, os, _gpu = held
  rc, out, _ = run(os, capsys, "list", "--json")
  assert rc == 0
  (fn,) = [f for f in json.loads(out)["devices"] if f["address"] == ADDR]
  assert [(h["pid"], h["kind"]) for h in fn["holders"]] == [(host.getpid(), "am")]
  assert fn["holders"][0]["lock"].endswith(f"am_{ADDR}.lock")
  rc, out, _ = run(os, capsys, "list")
  assert f"holder: {host.getpid()} (python)" in out


def test_top_json_shows_the_smus_metrics(held, capsys):
  import os as host
  dev, os, gpu = held
  before = gpu.smu.metrics_count
  rc, row, err = top_json(os, capsys)
  assert rc == 0, err
  assert gpu.smu.metrics_count == before + 1            # hcq-smi asked the SMU for a fresh table
  m = gpu.smu.last_metrics.SmuMetrics                   # what the mock SMU wrote, field by field
  smu = row["smu"]
  assert row["source"] == "smu" and smu["holder_pid"] == host.getpid()
  assert (smu["gfx_clock_mhz"], smu["soc_clock_mhz"], smu["mem_clock_mhz"]) == \
    (m.CurrClock[S.PPCLK_GFXCLK], m.CurrClock[S.PPCLK_SOCCLK], m.CurrClock[S.PPCLK_UCLK])
  assert (smu["temperature_edge_c"], smu["temperature_hotspot_c"], smu["power_w"], smu["gfx_activity_percent"]) == \
    (m.AvgTemperature[S.TEMP_EDGE], m.AvgTemperature[S.TEMP_HOTSPOT], m.AverageSocketPower, m.AverageGfxActivity)
  assert smu["metrics_counter"] == m.MetricsCounter and row["temperature_c"] == m.AvgTemperature[S.TEMP_EDGE]
  assert smu["gfx_clock_mhz"] == 500                   # idle: the lowest GFX DPM level
  # the text table shows the same
  rc, out, _ = run(os, capsys, "top", "--once")
  assert rc == 0 and f"{host.getpid()}(python)" in out
  m = gpu.smu.last_metrics.SmuMetrics
  assert f"clocks GFX {m.CurrClock[S.PPCLK_GFXCLK]} " in out and f"power {m.AverageSocketPower} W" in out
  # while the engines run, the clock goes up to the DPM level the driver allows and the activity rises
  dev.session.am.smu.set_clock_range(S.PPCLK_GFXCLK, 500, 1500)
  now = time.monotonic()
  gpu.cp.gpu._busy.append((now - 0.5, now))      # the engines' record of a dispatch that ran for the last half second
  rc, row, _ = top_json(os, capsys)
  assert row["smu"]["gfx_clock_mhz"] == 1500 and row["smu"]["gfx_activity_percent"] >= 40
  assert row["smu"]["temperature_edge_c"] > smu["temperature_edge_c"] and row["smu"]["power_w"] > smu["power_w"]


def test_top_after_close_says_not_held(held, capsys):
  dev, os, _gpu = held
  dev.close()
  assert os.read_device_state("am", ADDR) is None          # the state file went with the device
  rc, row, _ = top_json(os, capsys)
  assert rc == 0 and row["holders"] == [] and row["source"] is None and row["smu"] is None
  _, out, _ = run(os, capsys, "top", "--once")
  assert "not held" in out


@pytest.mark.parametrize("change, message", [
  (lambda d: d.update(pid=d["pid"] + 1), "but the lock is held by pid"),
  (lambda d: d["smu"].update(table_offset=d["smu"]["table_offset"] + 0x1000, table_mc=d["smu"]["table_mc"] + 0x1000),
   "did not change over 3 metrics transfers"),
  (lambda d: d["smu"].update(table_offset=1 << 40, table_mc=(1 << 40)), "inside the"),
  (lambda d: d["smu"].update(table_mc=d["smu"]["table_mc"] + 0x1000), "is not the framebuffer base"),
  (lambda d: d["smu"].update(table_offset=True), "not an integer"),
  (lambda d: d.update(bus="0000:04:00.0"), "names device '0000:04:00.0'"),
])
def test_a_hostile_state_file_is_refused(held, capsys, change, message):
  _dev, os, gpu = held
  doc = json.loads(os.read_device_state("am", ADDR))
  change(doc)
  os.write_device_state("am", ADDR, json.dumps(doc).encode())
  before = gpu.smu.metrics_count
  rc, out, err = run(os, capsys, "top", "--json")
  (row,) = [r for r in json.loads(out)["devices"] if r["address"] == ADDR]
  assert rc == 1 and row["smu"] is None and "Traceback" not in err
  assert re.search(message, row["error"]) and ADDR in row["error"]
  # a table the hardware shows misplaced is refused before anything is sent to the SMU
  if "framebuffer" in message or "inside" in message: assert gpu.smu.metrics_count == before
  rc, out, err = run(os, capsys, "top", "--once")
  assert rc == 1 and f"{ADDR}" in out and "error:" in out and "Traceback" not in err


def test_the_state_file_names_the_smu_table(held):
  dev, os, _gpu = held
  st = statemod.read(os, ADDR)
  smu = dev.session.am.smu
  assert (st.pid, st.table_offset, st.table_mc, st.firmware) == (dev.session.am.pci.lock.pid, smu.table.offset, smu.table.mc, smu.version)


def test_smu_messages_wait_for_the_mailbox_lock(held):
  """A message sent while another process holds am-smu_<bus>.lock waits for it, and a lock never given back is an
  SMU error naming the mailbox (the holder's own sends take the lock: the mock's lock shows as held meanwhile)."""
  from hcq.drivers.amd.am.smu import SMUError
  dev, os, _gpu = held
  seen = []
  orig = os.lock_device
  def spy(kind, bus, wait_s=0.0):
    lock = orig(kind, bus, wait_s)
    seen.append((kind, bus, wait_s))
    return lock
  os.lock_device = spy
  dev.session.am.smu.send(S.PPSMC_MSG_GetSmuVersion)
  assert seen == [("am-smu", ADDR, 5)]
  os.lock_device = orig
  other = os.lock_device("am-smu", ADDR)        # "another process" in the middle of its exchange
  dev.session.am.smu.mailbox.timeout_s = 0.05
  with pytest.raises(SMUError, match=r"SMU mailbox stayed taken for 0\.05 s.*am-smu_0000:03:00\.0\.lock"):
    dev.session.am.smu.send(S.PPSMC_MSG_GetSmuVersion)
  other.release()
  assert dev.session.am.smu.send(S.PPSMC_MSG_GetSmuVersion) == dev.session.am.smu.version


def test_a_holder_without_a_state_file_is_shown_without_metrics(held, capsys):
  _dev, os, _gpu = held
  os.remove_device_state("am", ADDR)
  rc, row, err = top_json(os, capsys)
  assert rc == 0 and row["source"] == "hcq" and row["smu"] is None and "published no SMU state" in err


@pytest.mark.parametrize("raw, message", [
  (b"[" * 2000 + b"]" * 2000, "not a JSON document"),                  # deeper than Python's recursion limit
  (b'{"pid": ' + b"9" * 4000 + b"}", "not an AM state file"),          # a huge number
  (b"\xff\xfe", "not a JSON document"),
  (b'{"format": "hcq-am-state/1", "pid": 1e999}', "not an AM state file|names device"),
])
def test_a_state_file_that_is_not_json_is_an_error_naming_it(held, capsys, raw, message):
  """The state file's bytes come from any process: whatever they are, hcq-smi reports the file, never a traceback."""
  _dev, os, _gpu = held
  os.write_device_state("am", ADDR, raw)
  rc, out, err = run(os, capsys, "top", "--json")
  (row,) = [r for r in json.loads(out)["devices"] if r["address"] == ADDR]
  assert rc == 1 and row["smu"] is None and "Traceback" not in err
  assert re.search(message, row["error"]) and f"am-state_{ADDR}.json" in row["error"]


def test_a_state_file_of_another_user_is_refused(held, capsys):
  """The lock dir is world-writable: a state file owned by neither the holder's user nor root (planted before the
  holder published, where the sticky bit then kept the holder from replacing it) is an error naming the file, even
  with every field right; the holder's own file is read."""
  _dev, os, gpu = held
  rc, row, _ = top_json(os, capsys)
  assert rc == 0 and row["smu"] is not None
  node = os.vfs.lookup(f"{os.config.lock_dir}/am-state_{ADDR}.json", follow=False)
  node.uid = 4242
  before = gpu.smu.metrics_count
  rc, row, err = top_json(os, capsys)
  assert rc == 1 and row["smu"] is None and "Traceback" not in err
  assert re.search(rf"am-state_{ADDR}\.json: owned by uid 4242, not by the device holder's user or root", row["error"])
  assert gpu.smu.metrics_count == before                  # nothing asked of the SMU for it


def test_a_mailbox_lock_file_that_cannot_be_opened_is_named_as_such(held):
  """Only contention is 'the mailbox stayed taken'; a lock file that cannot be opened (a planted link, another
  user's mode) is an SMU error saying so, at once."""
  import errno
  from hcq.drivers.amd.am.smu import SMUError
  from hcq.errors import OSCallError
  dev, os, _gpu = held
  def refuse(kind, bus, wait_s=0.0): raise OSCallError("open", f"/tmp/{kind}_{bus}.lock", errno.ELOOP)
  os.lock_device = refuse
  try:
    with pytest.raises(SMUError, match=r"cannot take the SMU mailbox lock: .*am-smu_0000:03:00\.0\.lock") as e:
      dev.session.am.smu.send(S.PPSMC_MSG_GetSmuVersion)
  finally: del os.lock_device
  assert "stayed taken" not in str(e.value)
