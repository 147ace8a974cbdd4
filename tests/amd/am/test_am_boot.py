"""The AM boot of the mock Navi 31 with AMD's real firmware (Debian's firmware-amd-graphics 20230210-5, fetched
pinned; skipped when it cannot be): PSP bootloader and firmware loading checked by the mock PSP, SMU messages and
metrics, RLC autoload; refusals of damaged firmware name the file; `hcq am boot --trace`."""
import ctypes
import json
import os as _os
import struct

import pytest

from hcq.autogen.amd import psp_gfx_if as PG
from hcq.autogen.amd import smu_v13_0_0 as S
from hcq.cli import main as hcq_main
from hcq.drivers.amd.am import firmware
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.psp import PSPError
from hcq.drivers.amd.am.smu import SMUError
from hcq.errors import DeviceError, Timeout
from hcq.mockgpu.amd.am.psp import SOS_VERSION, SMU_VERSION, check_image

ADDR = "0000:03:00.0"


def boot(navi_fw, **kw):
  os, _ = navi_fw
  return AMDev(os, ADDR, os.config, **kw)


def replace_file(navi_fw, name, data):
  os, _ = navi_fw
  os.vfs.add_file(_os.path.join(os.config.firmware_dir, name), data, replace=True)


def read_fw(fw_dir, name):
  with open(_os.path.join(fw_dir, name), "rb") as f: return bytearray(f.read())


def test_full_boot_loads_every_firmware_in_order(navi_fw):
  _, gpu = navi_fw
  with boot(navi_fw) as d:
    assert d.stage == "gfx" and gpu.psp.refused == []
    assert gpu.psp.bl_loaded == [0x80000, 0x10000000, 0x10000, 0x20000]       # KDB, SPL, SYS_DRV, SOS
    assert gpu.psp.sos_alive and gpu.psp.toc_loaded and gpu.psp.tmr[1] == 0x1300000 and gpu.psp.autoloaded
    loaded = gpu.psp.loaded_fw
    assert loaded[0] == PG.GFX_FW_TYPE_SMU and len(loaded) == len(set(loaded)) == 21
    assert {PG.GFX_FW_TYPE_RLC_G, PG.GFX_FW_TYPE_RS64_MEC, PG.GFX_FW_TYPE_SDMA_UCODE_TH0, PG.GFX_FW_TYPE_IMU_I} <= set(loaded)
    assert d.steps[-1][0] == "am" and "boot reached gfx" in d.steps[-1][1]
    assert gpu.regs.read(gpu.rlc.status) & 0x80000000


def test_every_gfx11_image_is_a_signed_image_the_psp_accepts(fw_dir):
  from hcq.drivers.amd.am.psp import image, ip_firmware
  for name, region, _t in ip_firmware("11_0_0", "6_0_0", "13_0_0"):
    blob = image(firmware.parse(name, bytes(read_fw(fw_dir, name))), region)
    assert check_image(blob, len(blob)) is None, name
    need = struct.unpack_from("<I", blob, 0x14)[0] + 512     # header, body, signature (data regions are padded)
    assert "shorter than its header says" in check_image(blob[:need - 4], need - 4)


def test_smu_messages_and_metrics(navi_fw):
  _, gpu = navi_fw
  with boot(navi_fw) as d:
    assert d.smu.version == SMU_VERSION and d.smu.features == (1 << 64) - 1
    assert d.smu.dpm_levels(S.PPCLK_GFXCLK) == [500, 1500, 2500]
    d.smu.set_clock_range(S.PPCLK_GFXCLK, 1500, 2500)
    m = d.smu.metrics()
    # idle engines: the GFX clock at the soft minimum the driver set, the GPU at the mock's ambient temperature
    assert m.CurrClock[S.PPCLK_GFXCLK] == 1500 and m.MetricsCounter == 1 and m.AvgTemperature[S.TEMP_EDGE] == 35
    assert m.AverageGfxActivity == 0 and m.AverageSocketPower == 25
    assert d.smu.metrics().MetricsCounter == 2
    with pytest.raises(SMUError, match=r"SMU answered message 0x7f \(argument 0x0\) with PPSMC_Result_UnknownCmd"):
      d.smu.send(0x7F)
    with pytest.raises(SMUError, match="PPSMC_MSG_GetDpmFreqByIndex .* PPSMC_Result_Failed"):
      d.smu.send(S.PPSMC_MSG_GetDpmFreqByIndex, (99 << 16) | 0xFF)


def test_smu_without_firmware_times_out_naming_the_register(navi_fw):
  with boot(navi_fw, until="ih") as d:
    d.smu.sw_init()
    with pytest.raises(Timeout, match=r"MP1 MP1_SMN_C2PMSG_90 \(response to PPSMC_MSG_GetSmuVersion\).*last seen 0x0"):
      d.smu.send(S.PPSMC_MSG_GetSmuVersion)


def test_a_truncated_sos_file_is_refused_naming_the_file(navi_fw, fw_dir):
  data = read_fw(fw_dir, "psp_13_0_0_sos.bin")
  replace_file(navi_fw, "psp_13_0_0_sos.bin", bytes(data[:-1000]))
  with pytest.raises(DeviceError, match=r"psp_13_0_0_sos.bin.*size_bytes says 268304 bytes but the file has 267304"):
    boot(navi_fw)
  assert navi_fw[0].held_locks() == []      # a failed boot gives the device back


def test_a_truncated_sos_component_is_refused_by_the_psp(navi_fw, fw_dir):
  """The container stays well formed, but its SOS component lost its signature: the PSP refuses it, the sOS never
  starts, and the driver's error names the file."""
  data = read_fw(fw_dir, "psp_13_0_0_sos.bin")
  fw = firmware.parse("psp_13_0_0_sos.bin", bytes(data))
  table = ctypes.sizeof(firmware.U.struct_psp_firmware_header_v2_0)
  desc = ctypes.sizeof(firmware.U.struct_psp_fw_bin_desc)
  i = [c["name"] for c in fw.components].index("PSP_FW_TYPE_PSP_SOS")
  size_at = table + i * desc + firmware.U.struct_psp_fw_bin_desc.size_bytes.offset
  struct.pack_into("<I", data, size_at, fw.components[i]["size"] - 256)
  replace_file(navi_fw, "psp_13_0_0_sos.bin", bytes(data))
  _, gpu = navi_fw
  with pytest.raises(PSPError, match=r"the PSP bootloader refused the SOS component of psp_13_0_0_sos.bin \(98944 bytes\): status 0x0005"):
    boot(navi_fw)
  assert gpu.psp.refused == ["bootloader SOS: the signature is blank"]


def test_a_flipped_header_byte_is_refused_naming_the_file(navi_fw, fw_dir):
  data = read_fw(fw_dir, "smu_13_0_0.bin")
  data[256 + 0x10] ^= 0x01                     # the $PS1 magic of the SMU image
  replace_file(navi_fw, "smu_13_0_0.bin", bytes(data))
  _, gpu = navi_fw
  with pytest.raises(PSPError, match=r"PSP refused LOAD_IP_FW SMU from smu_13_0_0.bin: status 0xffff0005"):
    boot(navi_fw)
  assert gpu.psp.refused[0].startswith("LOAD_IP_FW type 18: no $PS1 header magic")


def test_psp_demands_the_command_order(navi_fw):
  with boot(navi_fw) as d:
    gpu = navi_fw[1]
    gpu.psp.tmr, gpu.psp.loaded_fw = None, []
    with pytest.raises(PSPError, match="PSP refused AUTOLOAD_RLC: status 0xffff0006"):
      d.psp.submit(PG.struct_psp_gfx_cmd_resp(cmd_id=PG.GFX_CMD_ID_AUTOLOAD_RLC), "AUTOLOAD_RLC")


def test_a_missing_firmware_file_names_it_and_the_package(navi_fw):
  os, _ = navi_fw
  os.vfs.remove(_os.path.join(os.config.firmware_dir, "gc_11_0_0_mec.bin"))
  with pytest.raises(DeviceError, match=r"gc_11_0_0_mec.bin: no such firmware file .*firmware-amd-graphics"):
    boot(navi_fw)


def test_a_booted_gpu_is_reused_not_bootloaded_again(navi_fw):
  _, gpu = navi_fw
  boot(navi_fw).close()
  with boot(navi_fw) as d:
    assert any(b == "am" and s.startswith("reused: booted by hcq") for b, s, _t in d.steps), d.steps
    assert gpu.psp.bl_loaded == [0x80000, 0x10000000, 0x10000, 0x20000] and gpu.regs.read(gpu.psp.r[81]) == SOS_VERSION
    assert len(gpu.psp.loaded_fw) == 21 and d.stage == "gfx"


def test_hcq_am_boot_trace(fw_dir, capsys, monkeypatch):
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", fw_dir)
  assert hcq_main(["am", "boot", "--mock", "--trace"]) == 0
  lines = capsys.readouterr().out.splitlines()
  blocks = [line.split()[2] for line in lines]
  assert blocks[0] == "pci" and blocks[1] == "discovery" and blocks[-1] == "am"
  text = "\n".join(lines)
  assert "LOAD_IP_FW RS64_MEC (267552 bytes of gc_11_0_0_mec.bin)" in text
  # issue 26's steps, in Linux's order: HDP remap, MMHUB only in gmc, TOC -> SMU -> TMR, GC hub after the autoload,
  # MEC started, GC doorbells routed
  order = ["HDP flush registers remapped", "MMHUB gart_enable", "TOC loaded", "LOAD_IP_FW SMU", "SETUP_TMR at MC",
           "RLC autoload complete", "MEC start address", "GC hub gart_enable", "SH_MEM_CONFIG", "GC doorbells routed",
           "MEC un-halted"]
  at = [text.index(s) for s in order]
  assert at == sorted(at)
  assert all(line.split()[1] == "ms" for line in lines)
  assert hcq_main(["am", "boot", "--mock", "--until", "psp", "--json"]) == 0
  doc = json.loads(capsys.readouterr().out)
  assert doc["stage"] == "psp" and doc["steps"][0]["block"] == "pci"


def test_hcq_am_boot_errors(capsys, monkeypatch, tmp_path):
  monkeypatch.setenv("HCQ_FIRMWARE_DIR", str(tmp_path))
  assert hcq_main(["am", "boot", "--mock"]) == 1
  assert "psp_13_0_0_sos.bin: no such firmware file" in capsys.readouterr().err
  assert hcq_main(["am", "boot", "--pci", "03:00.0"]) == 2
  assert hcq_main(["am", "boot", "--mock", "--until", "ih"]) == 0
  assert "boot reached ih" in capsys.readouterr().out


def demo():
  path = _os.path.join(_os.path.dirname(__file__), "..", "..", "..", "drivers", "amd", "kernels", "demo.hsaco")
  with open(path, "rb") as f: return f.read()


def test_mockpci_runs_kernels_and_copies(fw_dir):
  import numpy as np
  import hcq
  from hcq.config import Config
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as dev:
    assert dev.arch == "gfx1100" and dev.props["simd_count"] == 192 and "0000:03:00.0" in dev.name
    gpu = dev.owned_os.devices[0]
    assert set(gpu.cp.queues) == {("compute", 1, 0, 0), ("sdma", 0, 0, 0)}
    vadd, matmul = dev.load(demo(), "vadd"), dev.load(demo(), "matmul")
    a, b = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, np.float32)
    da, db, dc = dev.alloc(4000), dev.alloc(4000), dev.alloc(4000)
    dev.copyin(da, a)
    dev.copyin(db, b)
    assert vadd(da, db, dc, 1000, global_size=(4,), local_size=(256,), wait=True) > 0
    assert np.array_equal(np.frombuffer(dev.copyout(dc), np.float32), a + b)
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    dx, dz = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    dev.copyin(dx, x)
    matmul(dx, dx, dz, 32, 32, 32, global_size=(2, 2), local_size=(16, 16), wait=True)
    assert np.allclose(np.frombuffer(dev.copyout(dz), np.float32).reshape(32, 32), x @ x, rtol=1e-4, atol=1e-4)
    assert gpu.psp.refused == []


def test_mockpci_fault_arrives_through_the_ih_ring(fw_dir):
  import hcq
  from hcq.config import Config
  from hcq.drivers.hcq import Buffer
  from hcq.errors import GPUFault
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=5, firmware_dir=fw_dir)) as dev:
    vadd = dev.load(demo(), "vadd")
    good = dev.alloc(4096)
    bad = Buffer(dev, 0x2100_0000_0000, 4096)      # in AM's VA range, mapped by no page table
    with pytest.raises(GPUFault, match=r"UTCL2 \(GC hub\) page fault") as e:
      vadd(good, bad, good, 64, global_size=(1,), local_size=(64,), wait=True)
    assert 0x2100_0000_0000 <= e.value.address < 0x2100_0000_1000


def test_a_second_open_names_the_holder(fw_dir, navi_fw):
  from hcq.drivers.amd import open_device
  os, _ = navi_fw
  dev = open_device("PCI", 0, os, os.config)
  try:
    with pytest.raises(DeviceError, match=rf"in use: held by pid {_os.getpid()}"): open_device("PCI", 0, os, os.config)
    with pytest.raises(DeviceError, match="no device 1"): open_device("PCI", 1, os, os.config)
  finally: dev.close()
  assert os.held_locks() == []
  open_device("PCI", 0, os, os.config).close()


def test_a_blocked_wait_wakes_on_the_end_of_pipe_interrupt_from_the_ih_ring(fw_dir):
  """A wait that outlasts its busy polls asks for an interrupt (RELEASE_MEM with int_sel) and blocks in
  AMSession.wait_events, which reads the IH ring: the CP's end-of-pipe entry carrying the event id ends it."""
  import threading
  import time
  import hcq
  from hcq.config import Config
  from hcq.drivers.amd import pm4
  with hcq.open("MOCKPCI+AMD", config=Config(timeout_s=10, firmware_dir=fw_dir, mock_threaded=True)) as dev:
    gpu = dev.owned_os.devices[0]
    gate = dev.signals.alloc(0, name="gate")
    value = dev.submit_pm4(pm4.wait_reg_mem(gate.va, 1))
    threading.Timer(0.5, lambda: dev.os.memview(gate.va, 8).cast("Q").__setitem__(0, 1)).start()
    dev.wait_value(value)
    # it returned once the gate opened (the timer's write), woken by the end-of-pipe interrupt through the IH ring
    assert dev.os.memview(gate.va, 8).cast("Q")[0] == 1 and gpu.ih.posted >= 1
