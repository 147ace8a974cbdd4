"""Partial boot of the AM driver (drivers/amd/am/reuse.py) and its mode-1 reset (reset.py), on the mock Navi 31
with AMD's real firmware, across "processes" of one MockOS: exit_process() ends one as SIGKILL does (its locks
released, its memory unmapped, no close()), while the mock GPU keeps its state for the next one."""
import os as _os
import time

import numpy as np
import pytest

from hcq.cli import main as hcq_main
from hcq.drivers.amd import pm4
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.session import open_am
from hcq.errors import DeviceError, Timeout
from hcq.mockgpu.amd.am.discovery import GC_HWID
from tests.amd.am.test_am_corpus import run
from tests.fixtures.opencl.kernels import KERNELS

ADDR = "0000:03:00.0"
CORPUS = ["vadd", "saxpy", "lds_reduce", "private_array"]


@pytest.fixture(params=[False, True], ids=["sync", "threaded"])
def navi_modes(request, fw_dir, tmp_path):
  """(os, gpu) as navi_fw, the device models synchronous or in their own threads."""
  from hcq.config import Config
  from hcq.mockgpu import MockOS
  from hcq.mockgpu.amd.am.gpu import add_navi31
  os = MockOS(Config(timeout_s=2, lock_dir=str(tmp_path), firmware_dir=fw_dir, mock_threaded=request.param))
  gpu = add_navi31(os, ADDR)
  yield os, gpu
  os.close()


def steps_of(dev, block="am"):
  return [s for b, s, _t in dev.session.am.steps if b == block]


def run_corpus(dev, names=CORPUS):
  for name in names:
    k = KERNELS[name]
    data = k.inputs(seed=5)
    k.check(run(dev, k, data), data)


def vadd_once(dev):
  a = np.arange(256, dtype=np.float32)
  bufs = [dev.alloc(1024) for _ in range(3)]
  dev.copyin(bufs[0], a)
  dev.copyin(bufs[1], a)
  prog = dev.load(KERNELS["vadd"].code_object())
  prog(*bufs, global_size=(4,), local_size=(64,), wait=True)
  assert np.array_equal(np.frombuffer(dev.copyout(bufs[2]), np.float32)[:256], 2 * a)


def settle(gpu):
  """Until the engines ran everything rung (threaded models finish the packets after a fence on their own time): a
  process killed now is killed between kernels."""
  deadline = time.monotonic() + 2
  while any(q.pending for q in gpu.cp.queues.values()) and time.monotonic() < deadline: time.sleep(0.001)


def scratch7(gpu):
  return gpu.regs.addr(GC_HWID, "gc_11_0_0", "SCRATCH_REG7")


def test_a_killed_process_leaves_a_gpu_the_next_one_reuses(navi_modes):
  os, gpu = navi_modes
  first = os.pid
  dev = open_am(os, 0, os.config)
  vadd_once(dev)
  assert any(s.startswith("full boot: a cold GPU") for s in steps_of(dev))
  loads, bl, psp = len(gpu.psp.loaded_fw), list(gpu.psp.bl_loaded), gpu.psp
  assert loads == 21 and gpu.regs.read(scratch7(gpu)) != 0
  settle(gpu)
  dead = list(os._process_memory[first].items())
  os.exit_process()                        # SIGKILL: no close(); the lock goes, the memory is unmapped
  assert os.pid != first and os.held_locks() == [] and first not in os._process_memory
  # the engines reach none of the dead process's memory (VRAM its page tables map stays: it is the GPU's)
  assert not [(va, n) for va, n in gpu.cp.mapped for a, size in dead if a < va + n and va < a + size]
  dev2 = open_am(os, 0, os.config)
  try:
    reused = [s for s in steps_of(dev2) if s.startswith("reused: ")]
    assert reused and "the firmware load is skipped" in reused[0], steps_of(dev2)
    assert any("stopped the idle compute and sdma queue(s)" in s for s in steps_of(dev2))
    assert gpu.psp is psp and len(gpu.psp.loaded_fw) == loads and gpu.psp.bl_loaded == bl   # no firmware loaded
    assert gpu.reset.count == 0 and not any(b == "psp" and "LOAD_IP_FW" in s for b, s, _t in dev2.session.am.steps)
    run_corpus(dev2)
  finally: dev2.close()


def test_a_process_killed_mid_work_leaves_a_gpu_that_is_reset_and_booted(navi_modes):
  os, gpu = navi_modes
  dev = open_am(os, 0, os.config)
  flag = dev.alloc(4096)                   # never written: the packet below waits for ever
  dev.submit_pm4(pm4.wait_reg_mem(flag.va, 1, func=pm4.WAIT_EQ))
  q = gpu.cp.queues[("compute", 1, 0, 0)]
  deadline = time.monotonic() + 2
  while not q.blocked and time.monotonic() < deadline: time.sleep(0.001)
  assert q.blocked
  os.exit_process()
  os.tick()                                # the engine polls the memory that is gone: a fault, not a crash
  while q.error is None and time.monotonic() < deadline: time.sleep(0.001)
  assert q.error is not None and "page fault" in str(q.error.kind)
  dev2 = open_am(os, 0, os.config)
  try:
    why = [s for s in steps_of(dev2) if s.startswith("full boot after a mode-1 reset: ")]
    assert why and "compute HQD 1.0.0 is active with work left" in why[0], steps_of(dev2)
    assert gpu.reset.count == 1 and gpu.reset.requests == ["SMU PPSMC_MSG_Mode1Reset"]
    assert any("asked the SMU (PPSMC_MSG_Mode1Reset)" in s for s in steps_of(dev2, "reset"))
    assert len(gpu.psp.loaded_fw) == 21 and gpu.psp.bl_loaded == [0x80000, 0x10000000, 0x10000, 0x20000]
    run_corpus(dev2)
  finally: dev2.close()
  dev3 = open_am(os, 0, os.config)         # and that boot signed: the next one reuses
  try: assert any(s.startswith("reused: ") for s in steps_of(dev3)) and gpu.reset.count == 1
  finally: dev3.close()


def test_a_process_killed_mid_kernel_leaves_a_gpu_that_is_reset_and_booted(navi_modes):
  """An endless kernel in flight when its process dies: its waves' memory goes, the dispatch ends with a fault (no
  crash), the queue keeps its work, and the next open resets the GPU."""
  from hcq.compiler.isa.amd.asm import assemble
  from hcq.compiler.isa.amd.cowriter import KernelSpec, write_code_object
  os, gpu = navi_modes
  dev = open_am(os, 0, os.config)
  spin = dev.load(write_code_object([KernelSpec("spin", assemble("loop:\n  s_branch loop\n  s_endpgm"))]), "spin")
  spin(global_size=(1, 1, 1), local_size=(1, 1, 1), wait=False)
  q = gpu.cp.queues[("compute", 1, 0, 0)]
  deadline = time.monotonic() + 2
  while q.engine.running is None and time.monotonic() < deadline: time.sleep(0.001)
  assert q.engine.running is not None            # the dispatch is in flight, slice after slice
  os.exit_process()
  assert q.engine.running is None and "its process ended" in str(q.error)
  dev2 = open_am(os, 0, os.config)
  try:
    why = [s for s in steps_of(dev2) if s.startswith("full boot after a mode-1 reset: ")]
    assert why and "compute HQD 1.0.0 is active with work left" in why[0], steps_of(dev2)
    assert gpu.reset.count == 1
    run_corpus(dev2, ["vadd"])
  finally: dev2.close()


def test_a_clean_close_then_open_reuses(navi_fw):
  os, gpu = navi_fw
  dev = open_am(os, 0, os.config)
  vadd_once(dev)
  dev.close()
  dev = open_am(os, 0, os.config)
  try:
    assert any(s.startswith("reused: ") for s in steps_of(dev)) and not any("stopped the idle" in s for s in steps_of(dev))
    assert len(gpu.psp.loaded_fw) == 21 and gpu.reset.count == 0
    vadd_once(dev)
  finally: dev.close()


def _corrupt_signature(os, gpu): gpu.regs.poke(scratch7(gpu), 0x1234)
def _sos_gone(os, gpu): gpu.regs.poke(gpu.psp.r[81], 0)
def _sos_busy(os, gpu): gpu.regs.poke(gpu.psp.r[64], 0)      # a ring command of the killed process never answered
def _firmware_changed(os, gpu):
  path = _os.path.join(os.config.firmware_dir, "gc_11_0_0_mec.bin")
  with open(path, "rb") as f: data = bytearray(f.read())
  data[-1] ^= 0xFF                           # past the image the PSP checks: the PSP still takes it
  os.vfs.add_file(path, bytes(data), replace=True)


@pytest.mark.parametrize("corrupt, why", [
  (_corrupt_signature, r"GC SCRATCH_REG7 holds 0x00001234, the boot record's CRC32 is 0x[0-9a-f]{8}"),
  (_sos_gone, r"the PSP is in its bootloader \(MP0_SMN_C2PMSG_81 = 0\)"),
  (_sos_busy, r"the PSP's sOS is not ready for ring commands \(MP0_SMN_C2PMSG_64 = 0x0, bit 31 clear\)"),
  (_firmware_changed, r"the firmware files changed since the GPU was booted \(SHA-256 [0-9a-f]{12}, now [0-9a-f]{12}")])
def test_a_gpu_whose_state_does_not_check_out_is_reset_and_booted_in_full(navi_fw, corrupt, why):
  import re
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  corrupt(os, gpu)
  with AMDev(os, ADDR, os.config) as d:
    plan = [s for b, s, _t in d.steps if b == "am" and "boot" in s][0]
    assert plan.startswith("full boot after a mode-1 reset: ") and re.search(why, plan), plan
    assert d.stage == "gfx" and gpu.reset.count == 1 and len(gpu.psp.loaded_fw) == 21 and gpu.psp.refused == []
  with AMDev(os, ADDR, os.config) as d:      # the full boot signed again
    assert any(s.startswith("reused: ") for _b, s, _t in d.steps)


def test_kill_of_the_lock_holder_frees_the_gpu_for_the_next_process(navi_fw):
  """What `hcq-smi amd kill_pids --sudoless` does to a holder, on MockOS: kill(pid) ends that process."""
  os, gpu = navi_fw
  holder = os.pid
  dev = open_am(os, 0, os.config)
  vadd_once(dev)
  os.new_process()                         # a second program, while the first still holds the GPU
  with pytest.raises(DeviceError, match=rf"0000:03:00.0 is in use: held by pid {holder} "):
    open_am(os, 0, os.config)
  assert os.lock_holders() and set(os.lock_holders().values()) == {holder}
  os.kill(holder)
  assert os.held_locks() == []
  dev2 = open_am(os, 0, os.config)
  try:
    assert any(s.startswith("reused: ") for s in steps_of(dev2))
    vadd_once(dev2)
  finally: dev2.close()
  with pytest.raises(DeviceError, match="no process 12345"): os.kill(12345)


def test_hcq_smi_kill_pids_frees_the_gpu_and_the_next_open_reuses_it(navi_fw):
  """`hcq-smi amd pids` / `kill_pids --sudoless` (smi/commands.py) with the MockOS as the host: they find the mock
  process holding am_0000:03:00.0.lock through its procfs entries and SIGKILL it (exit_process)."""
  import io
  import json
  from hcq.smi import commands
  from hcq.smi.backends import backend
  from hcq.smi.report import Report
  os, gpu = navi_fw
  holder = os.new_process()                # a program of its own (kill_pids never signals the pid it runs as)
  dev = open_am(os, 0, os.config)
  vadd_once(dev)
  os.new_process()
  out = io.StringIO()
  ctx = commands.Context(backend("amd"), os, Report(False, out=out, err=io.StringIO()), sudoless=True)
  assert commands.pids(ctx) == 0 and out.getvalue() == f"0000:03:00.0: {holder} (python)\n"
  out = io.StringIO()
  ctx = commands.Context(backend("amd"), os, Report(True, out=out, err=io.StringIO()), sudoless=True)
  assert commands.kill_pids(ctx, prefix="0000:03", sleep=lambda s: None) == 0
  doc = json.loads(out.getvalue())
  assert [k["pid"] for k in doc["killed"]] == [holder] and doc["remaining"] == {}
  assert os.held_locks() == [] and holder not in os._process_memory
  dev2 = open_am(os, 0, os.config)
  try:
    assert any(s.startswith("reused: ") for s in steps_of(dev2))
    vadd_once(dev2)
  finally: dev2.close()


def test_mode1_reset_returns_the_gpu_to_its_bootloader(navi_fw):
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  config = gpu.function.config_read(0, 64)
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    d.mode1_reset()
    resets = [s for b, s, _t in d.steps if b == "reset"]
  assert resets[0] == "mode-1 reset: asked" and resets[-1].startswith("GPU back in ")
  assert gpu.reset.count == 1 and not gpu.psp.sos_alive and not gpu.smu.running and gpu.regs.read(scratch7(gpu)) == 0
  assert gpu.function.config_read(0x10, 0x18) == config[0x10:0x28]     # the BARs restored
  with AMDev(os, ADDR, os.config) as d:
    assert any(b == "am" and s.startswith("full boot: a cold GPU") for b, s, _t in d.steps)
    assert d.stage == "gfx" and len(gpu.psp.loaded_fw) == 21


@pytest.mark.parametrize("fail, match", [
  ("ignored", r"NBIO RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE \(the function leaving the bus for the reset\) to reach "
              r"0xffffffff \(last seen 0x200\)"),
  ("gone", r"PCI config dword 0 \(vendor and device id: the function back from the reset\) to reach not 0xffffffff "
           r"\(last seen 0xffffffff\)"),
  ("bootloader", r"MP0 MP0_SMN_C2PMSG_35 & 0x80000000 to reach 0x80000000 \(last seen 0x0\)")])
def test_mode1_reset_timeouts_name_the_register(navi_fw, fail, match):
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  gpu.reset.fail = fail
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    with pytest.raises(Timeout, match=match): d.mode1_reset()


def test_a_cold_gpu_has_nothing_to_reset_and_says_so(navi_fw):
  """issue 29 item 13: a GPU on which no firmware runs (from power-on, or after a reset) with its PSP bootloader ready
  is already as a mode-1 reset leaves it: the reset says so instead of failing on the SMU's silence."""
  os, gpu = navi_fw
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    d.mode1_reset()
    assert [s for b, s, _t in d.steps if b == "reset"][-1].startswith("nothing to reset: no firmware runs")
  assert gpu.reset.count == 0 and gpu.reset.requests == []


def test_a_gpu_that_cannot_be_reset_says_why(navi_fw):
  """Nothing runs and the PSP bootloader is not ready either: no one can reset it, and the error names the registers."""
  os, gpu = navi_fw
  gpu.regs.poke(gpu.psp.r[35], 0)
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    with pytest.raises(DeviceError, match=r"cannot reset the GPU: the SMU does not answer PPSMC_MSG_TestMessage .*"
                                          r"MP0_SMN_C2PMSG_81 = 0.*MP0_SMN_C2PMSG_35 = 0x0, bit 31 clear"):
      d.mode1_reset()


def test_hcq_am_reset_cli(fw_dir, capsys, monkeypatch, tmp_path):
  """`hcq am reset --mock` (a README command): the embedded mock is booted first, then reset by the SMU; without a
  firmware folder it is reset as it is (nothing runs: nothing to reset). Both exit 0."""
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", fw_dir)
  monkeypatch.setenv("HCQ_TIMEOUT", "0.3")
  assert hcq_main(["am", "reset", "--mock"]) == 0
  assert "mode-1 reset done" in capsys.readouterr().out
  assert hcq_main(["am", "reset", "--mock", "--trace"]) == 0
  assert "asked the SMU (PPSMC_MSG_Mode1Reset)" in capsys.readouterr().out
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path / "none"))
  assert hcq_main(["am", "reset", "--mock"]) == 0
  out, err = capsys.readouterr()
  assert "nothing to reset" in out and "not booted first" in err and "firmware folder does not exist" in err
  assert hcq_main(["am", "reset", "--pci", "3:0.0"]) == 2


def test_the_boot_probe_and_reset_messages_hold_the_mailbox_lock(navi_fw):
  """hcq-smi shares the SMU mailbox through am-smu_<bus>.lock (smu.py): the boot's messages, the reuse probe's
  PPSMC_MSG_TestMessage and the reset's PPSMC_MSG_Mode1Reset are all written to C2PMSG_66 while that lock is held."""
  from hcq.autogen.amd import smu_v13_0_0 as S
  from hcq.mockgpu.amd.am.discovery import MP1_HWID
  os, gpu = navi_fw
  seen = []
  def guard(msg):
    seen.append((msg, any(p.endswith(f"am-smu_{ADDR}.lock") for p in os.held_locks())))
    return True
  gpu.regs.guard(gpu.regs.addr(MP1_HWID, "mp_13_0_0", "MP1_SMN_C2PMSG_66"), write=guard)
  AMDev(os, ADDR, os.config).close()                        # a full boot
  AMDev(os, ADDR, os.config).close()                        # reused: probed with PPSMC_MSG_TestMessage
  with AMDev(os, ADDR, os.config, until="discovery") as d: d.mode1_reset()
  msgs = [m for m, _locked in seen]
  assert S.PPSMC_MSG_TestMessage in msgs and msgs[-1] == S.PPSMC_MSG_Mode1Reset
  assert [m for m, locked in seen if not locked] == []


# ---- a boot record that a previous process left is input: whatever it holds gives a full boot (after a reset), with
# the trace saying what was wrong, never an exception or a TMR kept where the record says without checking it
def _forge(gpu, body: bytes) -> None:
  """Write body as the boot record's JSON at VRAM 0 and sign it (a matching CRC32 in SCRATCH_REG7), as a corrupt or
  hostile previous process could."""
  import struct
  import zlib
  from hcq.drivers.amd.am import reuse
  raw = reuse.MAGIC + struct.pack("<I", len(body)) + body
  gpu.vram[0:len(raw)] = raw
  gpu.regs.poke(scratch7(gpu), zlib.crc32(raw) or 1)


def _record(gpu) -> dict:
  import json
  import struct
  n = struct.unpack_from("<I", gpu.vram, 8)[0]
  return json.loads(bytes(gpu.vram[12:12 + n]))


def _with(gpu, **fields) -> bytes:
  import json
  return json.dumps({**_record(gpu), **fields}).encode()


VRAM_END = (512 << 20) - (256 << 10)     # the mock's 512 MiB less the discovery reservation (an upper bound)


@pytest.mark.parametrize("body, why", [
  (lambda g: b"[1, 2]", r"the boot record is a JSON list, not an object"),
  (lambda g: b"[" * 2000 + b"]" * 2000, r"the boot record is not readable"),
  (lambda g: _with(g, sos="x"), r"the boot record's 'sos' is 'x': not an int"),
  (lambda g: _with(g, firmware=None), r"the boot record's 'firmware' is None: not a str"),
  (lambda g: _with(g, tmr=5), r"the boot record's 'tmr' is 5: not \[offset, size\]"),
  (lambda g: _with(g, tmr=[1.5, 2]), r"the boot record's 'tmr' is \[1.5, 2\]: not \[offset, size\]"),
  (lambda g: _with(g, tmr=[_record(g)["tmr"][0], 0]), r"the boot record's TMR .* is not a 1 MiB-aligned range of whole pages"),
  (lambda g: _with(g, tmr=[_record(g)["tmr"][0] + 0x1000, _record(g)["tmr"][1]]), r"not a 1 MiB-aligned"),
  (lambda g: _with(g, tmr=[VRAM_END & ~0xFFFFF, 4 << 20]), r"the boot record's TMR at VRAM 0x[0-9a-f]+\+0x400000 is not "
                                                          r"free VRAM \(this boot's allocations reach 0x[0-9a-f]+, usable VRAM ends at"),
  (lambda g: _with(g, tmr=[1 << 70, 1 << 20]), r"is not free VRAM")])
def test_a_forged_boot_record_gives_a_reset_and_a_full_boot(navi_fw, body, why):
  import re
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  _forge(gpu, body(gpu))
  with AMDev(os, ADDR, os.config) as d:
    plan = [s for b, s, _t in d.steps if b == "am" and "boot" in s][0]
    assert plan.startswith("full boot after a mode-1 reset: ") and re.search(why, plan), plan
    assert d.stage == "gfx" and gpu.reset.count == 1 and len(gpu.psp.loaded_fw) == 21
    assert not [b for b in d.vram.allocs if b.what == "PSP TMR (kept)"]
  with AMDev(os, ADDR, os.config) as d:      # the full boot signed a good record again
    assert any(s.startswith("reused: ") for _b, s, _t in d.steps)


def test_every_smu_message_is_sent_under_the_mailbox_lock(navi_fw, monkeypatch):
  """The SMU mailbox is shared with hcq-smi (another process) through am-smu_<bus>.lock: the reuse probe
  (PPSMC_MSG_TestMessage) and the reset request (PPSMC_MSG_Mode1Reset) take it as every other message does."""
  from hcq.autogen.amd import smu_v13_0_0 as S
  from hcq.mockgpu.amd.am.blocks import SMUModel
  os, gpu = navi_fw
  sent, original = [], SMUModel._message
  def spy(self, msg):
    sent.append((msg, any(p.endswith(f"am-smu_{ADDR}.lock") for p in os.held_locks())))
    return original(self, msg)
  monkeypatch.setattr(SMUModel, "_message", spy)          # the models a reset builds again
  gpu.regs.hook(gpu.smu.msg, write=lambda v: spy(gpu.smu, v))
  AMDev(os, ADDR, os.config).close()
  AMDev(os, ADDR, os.config).close()                       # reused: probed
  _corrupt_signature(os, gpu)
  AMDev(os, ADDR, os.config).close()                       # probed, reset through the SMU, booted
  with AMDev(os, ADDR, os.config, until="discovery") as d: d.mode1_reset()
  msgs = [m for m, _locked in sent]
  assert msgs.count(S.PPSMC_MSG_TestMessage) >= 3 and msgs.count(S.PPSMC_MSG_Mode1Reset) == 2
  assert [m for m, locked in sent if not locked] == []


def test_a_booted_instance_refuses_a_mode1_reset_under_its_blocks(navi_fw):
  """Its IH ring, page tables and (with a runtime device) queues and their threads run on the GPU: a reset would pull
  the firmware from under them. Only an instance opened until="discovery" (`hcq am reset`) resets."""
  os, gpu = navi_fw
  with AMDev(os, ADDR, os.config) as d:
    with pytest.raises(DeviceError, match=r"0000:03:00.0: no mode-1 reset under this instance's blocks \(booted up "
                                          r"to gfx\): open the GPU with until='discovery' to reset it"):
      d.mode1_reset()
    assert gpu.reset.count == 0 and d.stage == "gfx"


def test_hcq_am_reset_of_a_gpu_another_process_holds_is_refused_naming_it(navi_fw):
  os, gpu = navi_fw
  holder = os.pid
  dev = open_am(os, 0, os.config)
  os.new_process()
  with pytest.raises(DeviceError, match=rf"0000:03:00.0 is in use: held by pid {holder} "):
    AMDev(os, ADDR, os.config, until="discovery")
  assert gpu.reset.count == 0
  os.exit_process(holder)
  del dev


def test_a_reset_lets_go_of_every_mapping_of_the_engines(navi_fw):
  """A killed process's VRAM buffers stay reachable for the engines (the GPU's page tables map them) until the reset
  turns the hubs off: then the MMU lets go of its views of VRAM and of every range, as the next walk would."""
  os, gpu = navi_fw
  dev = open_am(os, 0, os.config)
  vadd_once(dev)
  settle(gpu)
  os.exit_process()
  mine = lambda: [page for page, v in os.memory._views.items() if ("", id(gpu.cp)) in v[2]]
  vas = list(gpu.cp.mapped)
  assert mine() and vas
  with AMDev(os, ADDR, os.config, until="discovery") as d: d.mode1_reset()
  assert mine() == [] and gpu.cp.mapped == [] and gpu.cp.vram_views == set()
  assert not [va for va, n in vas if gpu.cp.gpu.mem.mapped(va, 4)]
  del dev


def test_a_reusing_boot_that_fails_leaves_no_signature(navi_fw, monkeypatch):
  """The signature says the GPU is as a completed boot left it: a reusing boot clears it too and signs again when it
  completes, so that one failing (or killed) half-way makes the next open reset and boot in full, not reuse again."""
  from hcq.drivers.amd.am.gfx import GFX
  os, gpu = navi_fw
  AMDev(os, ADDR, os.config).close()
  def fail(self): raise DeviceError("injected gfx failure")
  monkeypatch.setattr(GFX, "hw_init", fail)
  with pytest.raises(DeviceError, match="injected gfx failure"): AMDev(os, ADDR, os.config)
  assert gpu.regs.read(scratch7(gpu)) == 0
  monkeypatch.undo()
  with AMDev(os, ADDR, os.config) as d:
    plan = [s for b, s, _t in d.steps if b == "am" and "boot" in s][0]
    assert plan.startswith("full boot after a mode-1 reset: firmware runs but GC SCRATCH_REG7 holds no hcq boot"), plan
  with AMDev(os, ADDR, os.config) as d:      # a reusing boot signs again when it completes
    assert any(s.startswith("reused: ") for _b, s, _t in d.steps) and gpu.regs.read(scratch7(gpu)) != 0
  with AMDev(os, ADDR, os.config) as d:
    assert any(s.startswith("reused: ") for _b, s, _t in d.steps)


def test_mode1_reset_restores_the_pcie_device_control_and_the_resizable_bar_size(navi_fw):
  """A reset returns them to power-on (128-byte payloads, a 256 MiB BAR0): restored as Linux restores them, or the
  VRAM BAR would no longer decode the whole VRAM AM needs."""
  from hcq.autogen import pci as pr
  os, gpu = navi_fw
  fn, ctrl = gpu.function, gpu.REBAR_OFFSET + pr.PCI_REBAR_CTRL
  devctl = lambda: int.from_bytes(fn.config_read(gpu.pcie + pr.PCI_EXP_DEVCTL, 2), "little")
  rebar = lambda: int.from_bytes(fn.config_read(ctrl, 4), "little") & pr.PCI_REBAR_CTRL_BAR_SIZE
  before = devctl(), rebar()
  assert before == (gpu.DEVCTL_FIRMWARE, 9 << pr.PCI_REBAR_CTRL_BAR_SHIFT)       # 512 MiB: the whole VRAM
  AMDev(os, ADDR, os.config).close()
  with AMDev(os, ADDR, os.config, until="discovery") as d:
    d.mode1_reset()
    restored = [s for b, s, _t in d.steps if b == "reset" and s.startswith("GPU back")]
  assert gpu.reset.count == 1 and (devctl(), rebar()) == before
  assert "PCI Express control, Resizable BAR sizes" in restored[0], restored
