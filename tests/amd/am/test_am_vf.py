"""AM on an SR-IOV virtual function (issue 15, "am: vf"): the mock GPU presented as a VF (a Radeon PRO V710) of a GPU the host already
booted (mockgpu/amd/am/virt.py); the driver detects it by RCC_IOV_FUNC_IDENTIFIER and boots it without PSP, SMU or
firmware, under exclusive init access asked for through the PF<->VF mailbox (drivers/amd/am/virt.py, after Linux
mxgpu_nv.c), then runs the OpenCL corpus through it."""
import pathlib

import pytest

import hcq
from hcq.config import Config, from_env
from hcq.drivers.amd.am.device import AMDev
from hcq.drivers.amd.am.virt import VirtError
from hcq.errors import ConfigError, DeviceError
from hcq.mockgpu import MockOS
from hcq.mockgpu.amd.am.gpu import add_navi31
from tests.fixtures.opencl.kernels import KERNELS

from tests.amd.am.test_am_corpus import NAMES, run

ADDR = "0000:03:00.0"
BOOT = ["IDH_REQ_GPU_INIT_DATA", "IDH_REQ_GPU_INIT_DATA_READY", "IDH_REQ_GPU_INIT_ACCESS", "IDH_READY_TO_ACCESS_GPU"]


def vf_os(tmp_path, host="ready", timeout_s=0.5):
  """A MockOS with one mock VF (a V710); the firmware folder is empty: a VF must not need any file of it."""
  empty = tmp_path / "no-firmware"
  empty.mkdir(exist_ok=True)
  os = MockOS(Config(timeout_s=timeout_s, lock_dir=str(tmp_path), firmware_dir=str(empty)))
  return os, add_navi31(os, ADDR, vf=True, vf_host=host)


@pytest.fixture
def vf(tmp_path):
  os, gpu = vf_os(tmp_path)
  yield os, gpu
  os.close()


def test_vf_boots_without_loading_any_firmware(vf):
  os, gpu = vf
  with AMDev(os, ADDR, os.config) as d:
    assert d.vf and d.stage == "gfx" and d.psp is None and d.smu is None
    assert [b for b, *_ in d.steps if b in ("psp", "smu")] == []
    # the mock PSP saw nothing from the VF: no bootloader component, no ring, no firmware, no refusal
    assert gpu.psp.bl_loaded == [] and gpu.psp.loaded_fw == [] and gpu.psp.ring is None and gpu.psp.refused == []
    assert gpu.smu.messages == []
    assert gpu.virt.refused == []            # no host-owned register written, nothing enabled without access
    assert any("the host's RLC autoload complete" in w for b, w, _ in d.steps if b == "gfx")


def test_pf2vf_is_read_and_left_alone(vf):
  """The host's pf2vf block (64 KiB into the VF's VRAM, checksummed) is read after init access; nothing the VF
  allocates lands on it."""
  from hcq.mockgpu.amd.am.virt import PF2VF_FCN, PF2VF_FEATURES, PF2VF_UUID
  os, gpu = vf
  with AMDev(os, ADDR, os.config) as d:
    assert d.pf2vf == {"size": 1024, "version": 2, "feature_flags": PF2VF_FEATURES, "vf2pf_update_interval_ms": 2000,
                       "uuid": PF2VF_UUID, "fcn_idx": PF2VF_FCN, "reg_access_flags": 0}
    assert min(a.offset for a in d.vram.allocs) >= 2 << 20
    assert gpu.virt.pf2vf_intact()


def test_a_damaged_pf2vf_is_noted_and_the_boot_goes_on(vf):
  """As Linux does (amdgpu_virt_read_pf2vf_data logs and returns): the step names the checksum."""
  os, gpu = vf
  gpu.vram[0x10000 + 40] ^= 0xFF
  with AMDev(os, ADDR, os.config) as d:
    assert d.stage == "gfx" and d.pf2vf is None
    assert any("pf2vf region at VRAM 0x10000 unusable: checksum" in w for _, w, _ in d.steps)


def test_handshake_order_as_mxgpu_nv(vf):
  """Init data, then init access before discovery; released at end_init (after the queues), fini access around the
  teardown: the order the host's side of the mailbox saw."""
  os, gpu = vf
  d = AMDev(os, ADDR, os.config)
  try:
    assert [m for _, m in gpu.virt.log] == BOOT and gpu.virt.exclusive == "init"
    assert [s for _, s, _ in d.steps].index("mailbox: IDH_READY_TO_ACCESS_GPU") < \
      [b for b, _, _ in d.steps].index("discovery")
    assert [who for who, _ in gpu.virt.log] == ["vf", "pf", "vf", "pf"]
    d.end_init()
    assert gpu.virt.log[-1] == ("vf", "IDH_REL_GPU_INIT_ACCESS") and gpu.virt.exclusive is None
    d.begin_fini()
    assert gpu.virt.exclusive == "fini"
  finally: d.close()
  assert [m for _, m in gpu.virt.log][len(BOOT) + 1:] == ["IDH_REQ_GPU_FINI_ACCESS", "IDH_READY_TO_ACCESS_GPU",
                                                         "IDH_REL_GPU_FINI_ACCESS"]
  assert gpu.virt.exclusive is None


def test_a_pf_that_never_answers_is_a_bounded_error_naming_the_register(tmp_path):
  os, gpu = vf_os(tmp_path, host="silent", timeout_s=0.3)
  try:
    with pytest.raises(VirtError) as e: AMDev(os, ADDR, os.config)      # an error, not an endless wait
    msg = str(e.value)
    assert "BIF_BX_DEV0_EPF0_VF0_MAILBOX_CONTROL" in msg and "TRN_MSG_ACK" in msg and "IDH_REQ_GPU_INIT_DATA" in msg
    assert isinstance(e.value, DeviceError)
  finally: os.close()


def test_a_pf_that_acknowledges_but_never_grants_access_names_the_answer_awaited(tmp_path):
  os, gpu = vf_os(tmp_path, host="mute", timeout_s=0.3)
  try:
    with pytest.raises(VirtError) as e: AMDev(os, ADDR, os.config)
    msg = str(e.value)
    assert "did not answer IDH_REQ_GPU_INIT_ACCESS" in msg and "MSGBUF_RCV_DW0" in msg
    assert "IDH_READY_TO_ACCESS_GPU" in msg and "last seen" in msg
    # a host without the init-data handshake is not an error (Linux takes version 0); the access request is
    assert [m for _, m in gpu.virt.log] == ["IDH_REQ_GPU_INIT_DATA", "IDH_REQ_GPU_INIT_ACCESS"]
  finally: os.close()


def test_a_refused_access_request_is_named(tmp_path):
  os, gpu = vf_os(tmp_path, host="fail")
  try:
    with pytest.raises(VirtError, match="PF refused IDH_REQ_GPU_INIT_ACCESS.*IDH_FAIL"): AMDev(os, ADDR, os.config)
  finally: os.close()


def test_the_mock_vf_refuses_psp_access_and_bring_up_without_access(vf):
  """The mock's protections the driver relies on not tripping: PSP/SMU registers are the host's (a DeviceError that
  says so), and enabling a queue while not holding exclusive access is dropped."""
  os, gpu = vf
  rf = gpu.regs
  with pytest.raises(DeviceError, match="MP0_SMN_C2PMSG_35 written by the VF.*belong to the host"):
    rf.write(gpu.psp.r[35], 0x20000)
  with pytest.raises(DeviceError, match="MP1_SMN_C2PMSG_90 read by the VF"): rf.read(gpu.smu.resp)
  active = gpu.cp.hqd["CP_HQD_ACTIVE"]
  rf.write(active, 1)
  assert rf.read(active) == 0 and "CP_HQD_ACTIVE enabled without exclusive access" in gpu.virt.refused[-1]


def test_the_vf_poses_as_a_part_that_has_sr_iov(vf):
  """A Radeon PRO V710 MxGPU (Navi 32), not a 7900 XTX (no SR-IOV): PCI 1002:7461 rev 00, and a discovery table of
  GC 11.0.3, SDMA 6.0.3, MP0/MP1 13.0.10 (mockgpu/amd/am/discovery.py V710_IPS, each cited); the driver takes its
  behaviour from those versions: GC 11.0.3's ISA target is gfx1101, as KFD reports it."""
  os, gpu = vf
  fn = os.pci_functions[ADDR]
  assert (fn.vendor, fn.device, fn.revision) == (0x1002, 0x7461, 0x00)
  with AMDev(os, ADDR, os.config) as d:
    assert d.vf and d.pci.device_id == 0x7461 and "V710" in d.pci.product
    assert [d.discovery.version_of(ip) for ip in ("GC", "SDMA0", "MP0", "MP1")] == \
      [(11, 0, 3), (6, 0, 3), (13, 0, 10), (13, 0, 10)]


def test_gc_versions_name_the_isa_target_kfd_names():
  from hcq.drivers.amd.am.session import gfx_target_version
  assert gfx_target_version((11, 0, 0)) == 110000 and gfx_target_version((12, 0, 0)) == 120000
  assert gfx_target_version((11, 0, 3)) == 110001          # "Compiler version is 11.0.1 while HW version is 11.0.3"
  assert gfx_target_version((11, 0, 1)) == gfx_target_version((11, 0, 4)) == 110003


def test_the_vf_runs_gfx1101_code_objects_and_refuses_gfx1100_ones(vf_dev):
  from hcq.compiler.isa.amd.codeobject import CodeObject
  from hcq.errors import DeviceError as DE
  k = KERNELS["vadd"]
  assert vf_dev.arch == "gfx1101" and CodeObject.parse(k.code_object("gfx1101")).mach == "gfx1101"
  with pytest.raises(DE, match="the code object is for gfx1100, this device is gfx1101"): vf_dev.load(k.code_object())


def test_a_bare_metal_function_is_not_taken_for_a_vf(tmp_path):
  os = MockOS(Config(timeout_s=0.5, lock_dir=str(tmp_path)))
  gpu = add_navi31(os, ADDR)
  try:
    assert gpu.virt is None
    from hcq.drivers.amd.am.regs import RegAccess
    from hcq.drivers.amd.am.pci import AMPCI
    from hcq.drivers.amd.am.virt import read_iov
    with AMPCI(os, ADDR) as p: assert read_iov(RegAccess(p.mmio, os, 0.5, "t"), 0xD20) == (False, False)
  finally: os.close()


def test_hcq_smi_sends_a_vfs_smu_nothing_even_with_a_state_file_naming_a_table(tmp_path, capsys):
  """No AM holder of a VF publishes SMU state (the SMU is the host's); a state file that names a table that checks
  out against the hardware anyway (planted by any process in the lock dir) must not make hcq-smi top write the VF's
  MP1 mailbox: the monitor refuses a VF before touching anything but the identifier register."""
  import json
  from hcq.autogen.amd import smu_v13_0_0 as S
  from hcq.smi import main as smi
  dev = hcq.open("MOCKPCI+AMD", Config(mock_am_vf=True, timeout_s=0.5, firmware_dir=str(tmp_path / "none"),
                                       lock_dir=str(tmp_path)))
  try:
    os, am = dev.owned_os, dev.session.am
    (gpu,) = [g for g in os.devices if getattr(g, "addr", None) == ADDR]
    assert os.read_device_state("am", ADDR) is None          # nothing published for a VF
    off = 4 << 20
    doc = {"format": "hcq-am-state/1", "pid": am.pci.lock.pid, "bus": ADDR,
           "smu": {"table_offset": off, "table_mc": gpu.fb_base + off, "table_size": 0x4000, "firmware": 1,
                   "driver_if": S.SMU13_0_0_DRIVER_IF_VERSION, "mp1": list(am.discovery.version_of("MP1"))}}
    os.write_device_state("am", ADDR, json.dumps(doc).encode())
    rc = smi(["amd", "top", "--json"], host=os)
    out = capsys.readouterr()
    (row,) = [r for r in json.loads(out.out)["devices"] if r["address"] == ADDR]
    assert rc == 1 and row["smu"] is None and "Traceback" not in out.err
    assert "SR-IOV VF" in row["error"] and "SMU belongs to the host" in row["error"], row["error"]
    assert gpu.virt.refused == []
  finally: dev.close()


def test_the_config_option_is_read_and_documented():
  assert Config().mock_am_vf is False and from_env({}).mock_am_vf is False
  assert from_env({"HCQ_MOCK_AM_VF": "1"}).mock_am_vf is True
  with pytest.raises(ConfigError, match="HCQ_MOCK_AM_VF"): from_env({"HCQ_MOCK_AM_VF": "2"})
  readme = (pathlib.Path(__file__).resolve().parents[3] / "README.md").read_text()
  assert "`HCQ_MOCK_AM_VF`" in readme


@pytest.fixture(scope="module", params=[False, True], ids=["sync", "threaded"])
def vf_dev(request, tmp_path_factory):
  """hcq.open("MOCKPCI+AMD") with Config.mock_am_vf: no firmware folder at all."""
  tmp = tmp_path_factory.mktemp("vf")
  d = hcq.open("MOCKPCI+AMD", Config(mock_am_vf=True, mock_threaded=request.param, timeout_s=30,
                                     firmware_dir=str(tmp / "none"), lock_dir=str(tmp)))
  yield d
  d.close()


# the default suite runs test_am_corpus's default kernels; -m slow runs every kernel of the corpus
@pytest.mark.parametrize("name", [n if n in NAMES else pytest.param(n, marks=pytest.mark.slow) for n in sorted(KERNELS)])
def test_corpus_through_the_vf(vf_dev, name):
  am = vf_dev.session.am
  assert am.vf and am.mailbox.held is None and am.mailbox.log[-1] == "IDH_REL_GPU_INIT_ACCESS"
  gpu, = vf_dev.os.devices
  # the queues were enabled while the VF held init access (the mock drops a bring-up without it), no firmware loaded
  assert gpu.virt.refused == [] and gpu.virt.exclusive is None and gpu.psp.loaded_fw == []
  k = KERNELS[name]
  data = k.inputs(seed=11)
  k.check(run(vf_dev, k, data), data)


# ---------------------------------------------------------------------------------------------------- the compiler
def test_the_compilers_examples_run_on_the_vf_through_dev_compile(vf_dev):
  """dev.compile on the VF compiles for its gfx1101 (no shipped code object involved), and every acceptance kernel
  (hcq.compiler.examples: `hcq kernels`) gives numpy's results."""
  import numpy as np

  from hcq.compiler import compile as hcq_compile
  from hcq.compiler import examples
  from hcq.compiler.isa.amd.codeobject import CodeObject
  assert CodeObject.parse(hcq_compile(examples.elementwise_add().sink, vf_dev.arch)).mach == "gfx1101"
  for make in examples.ALL:
    ex = make()
    bufs = []
    for a in ex.args:
      if isinstance(a, np.ndarray):
        b = vf_dev.alloc(max(a.nbytes, 1))
        vf_dev.copyin(b, a)
        bufs.append(b)
      else: bufs.append(a)
    vf_dev.compile(ex.sink)(*bufs, global_size=ex.global_size, local_size=ex.local_size, wait=True)
    for slot, want in ex.expected.items():
      got = np.frombuffer(vf_dev.copyout(bufs[slot]), want.dtype).reshape(want.shape)
      if want.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=make.__name__)
      else: np.testing.assert_array_equal(got, want, err_msg=make.__name__)


def test_hcq_demo_on_the_vf_compiles_its_kernels(monkeypatch, capsys, tmp_path):
  """`hcq demo` on the VF: no gfx1101 demo code object ships, so vadd and matmul come from the DSL through the
  compiler (cli/demo.py), checked against numpy by the demo itself (odd sizes: partial work-groups)."""
  import argparse

  from hcq.cli import demo
  (tmp_path / "none").mkdir()
  env = {"HCQ_MOCK_AM_VF": "1", "HCQ_LOCK_DIR": str(tmp_path), "HCQ_FIRMWARE_DIR": str(tmp_path / "none")}
  for k, v in env.items(): monkeypatch.setenv(k, v)
  assert demo.run(argparse.Namespace(device="MOCKPCI+AMD", n=1000, m=37)) == 0
  out = capsys.readouterr().out
  assert "gfx1101 on MOCKPCI+AMD" in out and out.count(" ok ") == 2, out


# ---------------------------------------------------------------------------------------------------- the V710's CUs
def test_the_v710_has_54_of_navi_32s_60_cus(vf):
  """The discovery table describes the Navi 32 die (3 SEs x 2 SAs x 5 WGPs, mockgpu/amd/am/discovery.py
  V710_GC_INFO); 3 WGPs are fused off (CC_GC_SHADER_ARRAY_CONFIG), and the driver counts the 54 active CUs per shader
  array as Linux gfx_v11_0_get_cu_info does, leaving GRBM_GFX_INDEX broadcasting."""
  os, gpu = vf
  with AMDev(os, ADDR, os.config) as d:
    gc = d.discovery.gc_info
    assert (gc["gc_num_se"], gc["gc_num_sa_per_se"], gc["gc_num_wgp0_per_sa"] + gc["gc_num_wgp1_per_sa"]) == (3, 2, 5)
    assert d.gfx.active_cus == 54
    assert d.gfx.active_wgps == {(se, sa): 0b01111 if sa == 1 else 0b11111 for se in range(3) for sa in range(2)}
    index = gpu.regs.fields("gc_11_0_0", "GRBM_GFX_INDEX", gpu.regs.values[gpu.shader_arrays.index])
    assert index["SE_BROADCAST_WRITES"] == index["SA_BROADCAST_WRITES"] == index["INSTANCE_BROADCAST_WRITES"] == 1
    assert gpu.virt.refused == []


def test_wgps_a_driver_turned_off_are_not_counted(vf):
  """GC_USER_SHADER_ARRAY_CONFIG.INACTIVE_WGPS is or'd with the fuses (gfx_v11_0_get_wgp_active_bitmap_per_sh)."""
  os, gpu = vf
  gpu.shader_arrays.user_off[(0, 0)] = 0b11
  with AMDev(os, ADDR, os.config) as d:
    assert d.gfx.active_cus == 50 and d.gfx.active_wgps[(0, 0)] == 0b11100


def test_the_runtime_device_reports_the_active_cus(vf_dev):
  assert vf_dev.props["simd_count"] == 54 * 2 and vf_dev.props["cu_per_simd_array"] == 10


# ---------------------------------------------------------------------------------------------------- GC 11.0.3's hub
def test_the_gc_hub_is_programmed_at_gc_11_0_3s_offsets(vf):
  """GC 11.0.3's GCVM_*/GCMC_* registers are not where gc 11.0.0 has them (Linux gfxhub_v3_0_3.c on
  gc_11_0_3_offset.h): the VF's driver enables context 0 and its page table at GC 11.0.3's addresses."""
  from hcq.mockgpu.amd.am.discovery import GC_HWID
  os, gpu = vf
  rf = gpu.regs
  new, old = (rf.addr(GC_HWID, m, "GCVM_CONTEXT0_CNTL") for m in ("gc_11_0_3_gfxhub", "gc_11_0_0"))
  assert new != old and gpu.gchub.module == "gc_11_0_3_gfxhub"
  with AMDev(os, ADDR, os.config) as d:
    assert d.gfxhub_regs.module.__name__.endswith("gc_11_0_3_gfxhub")
    assert rf.values.get(new, 0) & 1 and rf.values.get(rf.addr(GC_HWID, "gc_11_0_3_gfxhub",
                                                               "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"), 0)


def test_a_driver_programming_gc_11_0_0s_hub_offsets_on_the_vf_is_refused(tmp_path, monkeypatch):
  """Mutation: the GC hub programmed at gc 11.0.0's offsets leaves GC 11.0.3's hub off: the first queue's MQD is
  not mapped for the CP, and the mock says so."""
  from hcq.drivers.amd.am import regs
  monkeypatch.setattr(regs, "GFXHUB_MODULES", {})
  (tmp_path / "none").mkdir()
  with pytest.raises(DeviceError, match="MQD at 0x[0-9a-f]+ is not mapped"):
    hcq.open("MOCKPCI+AMD", Config(mock_am_vf=True, timeout_s=2, firmware_dir=str(tmp_path / "none"),
                                   lock_dir=str(tmp_path))).close()
