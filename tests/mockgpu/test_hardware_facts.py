"""Hardware facts that both the driver (drivers/amd, drivers/bnxt) and the mock need come from one place: the generated
bindings (hcq.autogen) where a header has them. The few that no header has are written once in the driver and once
in the mock (neither may import the other), and are held equal here, each also against what the mock device reports
(IP discovery, AMDGPU_INFO, KFD clock counters, a timed launch) so that a change on one side shows."""
import ast
import ctypes
import pathlib
import time

import numpy as np
import pytest

import hcq
from hcq.autogen import amdgpu_drm, kfd
from hcq.autogen import pci as pci_regs
from hcq.autogen.amd import gc_11_0_0_compute as gc
from hcq.config import Config
from hcq.drivers.amd import kfd as driver_kfd
from hcq.drivers.amd import pm4
from hcq.drivers.amd.kernels import demo_code_object
from hcq.mockgpu import mock_amd_os
from hcq.mockgpu.amd import kfd as mock_kfd
from hcq.mockgpu.amd import regs as R
from hcq.mockgpu.amd.gpu import GPUProperties
from mock_kfd_harness import Harness

ROOT = pathlib.Path(hcq.__file__).parent
GENERATED = {**{k: v for k, v in vars(pci_regs).items() if k.startswith("PCI_") and isinstance(v, int)},
             **{k: v for k, v in vars(gc).items() if isinstance(v, int)}}


def _int(node) -> bool:
  return isinstance(node, ast.Constant) and type(node.value) is int


def written_out_facts(tree) -> list[str]:
  """Module-level integers whose name is a generated constant (PCI_COMMAND = 0x04), and dict entries that spell one
  ({"COMPUTE_PGM_LO": 0x1bac}, the register offset regCOMPUTE_PGM_LO): facts a module writes again instead of taking
  them from hcq.autogen."""
  found = []
  for node in tree.body:
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None: continue
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for t in targets:
      pairs = [(t, node.value)]
      if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
        pairs = list(zip(t.elts, node.value.elts))
      found += [f"{node.lineno}: {n.id}" for n, v in pairs if isinstance(n, ast.Name) and n.id in GENERATED and _int(v)]
    if isinstance(node.value, ast.Dict):
      for k, v in zip(node.value.keys, node.value.values):
        if isinstance(k, ast.Constant) and isinstance(k.value, str) and _int(v) and \
            (k.value in GENERATED or "reg" + k.value in GENERATED):
          found.append(f"{node.lineno}: {k.value!r}")
  return found


def test_no_module_writes_out_a_pci_or_gc_compute_fact_the_generated_bindings_hold():
  bad = []
  for pkg in ("drivers", "mockgpu", "smi", "cli"):
    for path in sorted((ROOT / pkg).rglob("*.py")):
      bad += [f"{path.relative_to(ROOT)}:{f}" for f in written_out_facts(ast.parse(path.read_text()))]
  assert not bad, "take these from hcq.autogen.pci / hcq.autogen.amd.gc_11_0_0_compute:\n" + "\n".join(bad)


def test_the_written_out_check_finds_what_it_is_meant_to():
  tree = ast.parse("PCI_COMMAND = 0x04\nA, PCI_STATUS = 1, 6\nREGS = {'COMPUTE_PGM_LO': 0x1bac, 'x': 1}\n"
                   "PCI_COMMAND_MASTER = regs.PCI_COMMAND_MASTER\n")
  assert written_out_facts(tree) == ["1: PCI_COMMAND", "2: PCI_STATUS", "3: 'COMPUTE_PGM_LO'"]


# ---- the GC register segment base: in no gfx11 header; the mock publishes it as amdgpu's IP discovery does
def test_gc_segment_base_agrees_between_driver_mock_and_the_mocks_ip_discovery():
  os_ = mock_amd_os()
  try:
    ip = "class/drm/renderD128/device/ip_discovery/die/0/11/0"     # GC_HWID 11
    bases = [int(line, 16) for line in os_.sysfs_read(f"{ip}/base_addr").split()]
    assert int(os_.sysfs_read(f"{ip}/num_base_addresses")) == len(bases) >= 1
  finally: os_.close()
  assert pm4.GC_SEG0_BASE == R.GC_BASE_SEG0 == bases[0] == 0x1260
  # and the SET_SH_REG offsets both derive from it name the same registers
  assert (pm4.COMPUTE_PGM_LO, pm4.COMPUTE_USER_DATA_0, pm4.COMPUTE_TMPRING_SIZE) == \
    (R.COMPUTE_PGM_LO, R.COMPUTE_USER_DATA_0, R.COMPUTE_TMPRING_SIZE)


# ---- the GPU clock: 100 MHz on gfx11 dGPUs, in no header
def test_gpu_clock_frequency_agrees_between_driver_and_mock():
  assert pm4.GPU_CLOCK_HZ == R.GPU_CLOCK_HZ
  assert pm4.TICKS_PER_US == R.GPU_CLOCK_HZ / 1e6


def test_mock_reports_the_clock_it_runs(monkeypatch):
  """AMDGPU_INFO gpu_counter_freq (kHz) and the KFD clock counters follow the mock's one clock constant."""
  monkeypatch.setattr(R, "GPU_CLOCK_HZ", 50_000_000)    # a different clock must show everywhere the mock reports it
  h = Harness(gpus=1)
  try:
    info = amdgpu_drm.struct_drm_amdgpu_info_device()
    amdgpu_drm.DRM_IOCTL_AMDGPU_INFO(h.drm, return_pointer=ctypes.addressof(info), return_size=ctypes.sizeof(info),
                                     query=amdgpu_drm.AMDGPU_INFO_DEV_INFO)
    assert info.gpu_counter_freq * 1000 == 50_000_000
    a = kfd.AMDKFD_IOC_GET_CLOCK_COUNTERS(h.kfd, gpu_id=h.gpu_id)
    time.sleep(0.2)
    b = kfd.AMDKFD_IOC_GET_CLOCK_COUNTERS(h.kfd, gpu_id=h.gpu_id)
  finally: h.os.close()
  seconds = (b.system_clock_counter - a.system_clock_counter) / a.system_clock_freq
  hz = (b.gpu_clock_counter - a.gpu_clock_counter) / seconds
  assert hz == pytest.approx(50_000_000, rel=0.02)


def test_timed_launch_on_the_mock_measures_host_seconds():
  """The driver converts the mock's RELEASE_MEM GPU-clock timestamps to seconds with its own figure: a timed launch
  must take about as long as the host saw it take (a clock off by any factor would not)."""
  dev = hcq.open("MOCK+AMD", Config(timeout_s=30.0))
  try:
    assert dev.ticks_per_us == pm4.TICKS_PER_US
    matmul = dev.load(demo_code_object(), "matmul")
    m = 64
    x = np.ones((m, m), np.float32)
    dx, dz = dev.alloc(x.nbytes), dev.alloc(x.nbytes)
    dev.copyin(dx, x)
    args = (dx, dx, dz, m, m, m)
    kw = dict(global_size=(m // 16, m // 16), local_size=(16, 16), wait=True)
    matmul(*args, **kw)                                      # first launch: the emulator's caches
    runs = []
    for _ in range(5):
      t0 = time.perf_counter()
      device_s = matmul(*args, **kw)
      host_s = time.perf_counter() - t0
      start, end = dev.timer_start.timestamp, dev.timer_end.timestamp   # the GPU clock, as the mock wrote it
      assert start > 0 and device_s == (end - start) / (pm4.TICKS_PER_US * 1e6)    # not the host-clock fallback
      runs.append((device_s, host_s))
  finally: dev.close()
  assert min(h for _, h in runs) > 0.002, f"launches of {runs} s: too short to compare clocks"
  # the device's window lies inside the host's: never longer; and, in the run the host disturbed least, most of it
  assert all(d <= h * 1.01 for d, h in runs), runs
  assert max(d / h for d, h in runs) >= 0.5, runs


# ---- the context-save-area sizes: the driver's fallback for kernels without them in the topology, and the mock's
# numbers for the topology it publishes (linux 6.12's kfd_queue_ctx_save_restore_size)
GFX_VERSIONS = (90000, 90008, 90010, 90402, 100100, 100300, 100302, 110000, 110003, 110501, 120001)


@pytest.mark.parametrize("gfxv", GFX_VERSIONS)
@pytest.mark.parametrize("cus,arrays,per_engine", [(2, 1, 1), (12, 2, 2), (40, 4, 2), (80, 8, 2), (96, 12, 2),
                                                   (304, 32, 1)])
def test_cwsr_sizes_of_driver_and_mock_agree(gfxv, cus, arrays, per_engine):
  props = GPUProperties(gfx_target_version=gfxv, simd_count=cus * 2, simd_per_cu=2, array_count=arrays,
                        simd_arrays_per_engine=per_engine, num_xcc=1)
  mock = mock_kfd.cwsr_sizes(props)
  topology = {"gfx_target_version": gfxv, "simd_count": cus * 2, "simd_per_cu": 2, "array_count": arrays,
              "simd_arrays_per_engine": per_engine, "num_xcc": 1}
  assert driver_kfd.cwsr_sizes(topology) == (mock["cwsr_size"], mock["ctl_stack_size"], mock["debug_memory_size"])


def test_the_driver_takes_the_sizes_the_topology_publishes():
  published = {"gfx_target_version": 110000, "simd_count": 192, "simd_per_cu": 2, "cwsr_size": 0x123000,
               "ctl_stack_size": 0x5000}
  assert driver_kfd.cwsr_sizes(published)[:2] == (0x123000, 0x5000)
