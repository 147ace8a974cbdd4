"""sysfs of the mock AMD GPUs: the KFD topology, the DRM render nodes with IP discovery, and the PCI functions.

KFD topology (drivers/gpu/drm/amd/amdkfd/kfd_topology.c, linux 6.12): /sys/devices/virtual/kfd/kfd/topology/
{generation_id, system_properties, nodes/N/{gpu_id, name, properties, mem_banks/, caches/, io_links/}}; node 0 is
the CPU (gpu_id 0), GPU nodes follow. `properties` is "key value" lines in the order node_show() prints them.
IP discovery (amdgpu_discovery.c sysfs): /sys/class/drm/renderD<minor>/device/ip_discovery/die/0/<HWID>/0/
{major,minor,revision,harvest,num_base_addresses,base_addr} (base_addr for GC only: the one IP whose
register bases the mock models); hardware ids from soc15_hw_ip.h (GC_HWID 11, SDMA0_HWID 42, NBIO_HWID 108).
"""
from __future__ import annotations

import struct

from ...autogen import pci
from ..mmio import DoorbellMMIO, RegisterMMIO
from ..pci import PCIFunction
from .cwsr import cwsr_sizes

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"
HWIDS = {"GC": 11, "SDMA0": 42, "NBIO": 108}      # soc15_hw_ip.h
IP_BASES = {"GC": "gc_base_segments"}              # the register segment bases the mock knows (GPUProperties)
RENDER_MINOR_BASE = 128


def node_properties(gpu, node: int) -> list[tuple[str, int]]:
  p = gpu.props
  cwsr = cwsr_sizes(p)
  dom, bus, dev, fn = 0, 3 + gpu.index, 0, 0
  return [
    ("cpu_cores_count", 0), ("simd_count", p.simd_count), ("mem_banks_count", 1), ("caches_count", 0),
    ("io_links_count", 1), ("p2p_links_count", 0), ("cpu_core_id_base", 0), ("simd_id_base", 0x80000000 + 0x100 * node),
    ("max_waves_per_simd", p.max_waves_per_simd), ("lds_size_in_kb", p.lds_size_in_kb), ("gds_size_in_kb", 0),
    ("num_gws", 64), ("wave_front_size", p.wave_front_size), ("array_count", p.array_count),
    ("simd_arrays_per_engine", p.simd_arrays_per_engine), ("cu_per_simd_array", p.cu_per_simd_array),
    ("simd_per_cu", p.simd_per_cu), ("max_slots_scratch_cu", p.max_slots_scratch_cu),
    ("gfx_target_version", p.gfx_target_version), ("vendor_id", p.vendor_id), ("device_id", p.device_id),
    ("location_id", (bus << 8) | (dev << 3) | fn), ("domain", dom), ("drm_render_minor", RENDER_MINOR_BASE + gpu.index),
    ("hive_id", 0), ("num_sdma_engines", 2), ("num_sdma_xgmi_engines", 0), ("num_sdma_queues_per_engine", 6),
    ("num_cp_queues", 8), ("cwsr_size", cwsr["cwsr_size"]), ("ctl_stack_size", cwsr["ctl_stack_size"]), ("max_engine_clk_fcompute", p.max_engine_clk_fcompute),
    ("local_mem_size", p.local_mem_size), ("fw_version", 2290), ("capability", 0x28203A80), ("debug_prop", 0x4A7),
    ("sdma_fw_version", 21), ("unique_id", 0x5D2A6E4C0B1F0000 + gpu.index), ("num_xcc", p.num_xcc),
    ("max_engine_clk_ccompute", 4800),
  ]


def cpu_properties() -> list[tuple[str, int]]:
  return [("cpu_cores_count", 2), ("simd_count", 0), ("mem_banks_count", 1), ("caches_count", 0),
          ("io_links_count", 0), ("p2p_links_count", 0), ("cpu_core_id_base", 0), ("simd_id_base", 0),
          ("max_waves_per_simd", 0), ("lds_size_in_kb", 0), ("gds_size_in_kb", 0), ("num_gws", 0),
          ("wave_front_size", 0), ("array_count", 0), ("simd_arrays_per_engine", 0), ("cu_per_simd_array", 0),
          ("simd_per_cu", 0), ("max_slots_scratch_cu", 0), ("gfx_target_version", 0), ("vendor_id", 0),
          ("device_id", 0), ("location_id", 0), ("domain", 0), ("drm_render_minor", 0), ("hive_id", 0),
          ("num_sdma_engines", 0), ("num_sdma_xgmi_engines", 0), ("num_sdma_queues_per_engine", 0),
          ("num_cp_queues", 0), ("max_engine_clk_fcompute", 0), ("local_mem_size", 0), ("fw_version", 0),
          ("capability", 0), ("debug_prop", 0), ("sdma_fw_version", 0), ("unique_id", 0), ("num_xcc", 0),
          ("max_engine_clk_ccompute", 3000)]


def render(props: list[tuple[str, int]]) -> str:
  return "".join(f"{k} {v}\n" for k, v in props)


def pci_address(gpu) -> str: return f"0000:{3 + gpu.index:02x}:00.0"


class GPUPCIFunction(PCIFunction):
  """The GPU's PCI function: ids and BARs as a Navi 31 shows them (BAR0 VRAM aperture, BAR2 doorbells, BAR5
  registers). The mock drives the GPU through KFD; the BARs hold registers only."""

  def __init__(self, gpu):
    p = gpu.props
    super().__init__(pci_address(gpu), p.vendor_id, p.device_id, 0x030000, revision=p.revision,
                     subsystem_vendor=0x1002, subsystem_device=0x0E3B, driver="amdgpu")
    self.add_bar(0, RegisterMMIO(f"{gpu.name} BAR0", 256 << 20), is_64=True, prefetchable=True)
    self.add_bar(2, DoorbellMMIO(f"{gpu.name} BAR2", 2 << 20, lambda off, v: None), is_64=True, prefetchable=True)
    self.add_bar(5, RegisterMMIO(f"{gpu.name} BAR5", 1 << 20), is_64=False)
    # PCI Express capability (pci_regs.h, through hcq.autogen.pci): version 2, endpoint; link capable of and
    # running at 16 GT/s x16. add_capability takes the body after the id and next bytes (offsets here are - 2).
    link = pci.PCI_EXP_LNKSTA_CLS_16_0GB | 16 << pci.PCI_EXP_LNKSTA_NLW_SHIFT     # LNKCAP has the same layout here
    pcie = bytearray(pci.PCI_CAP_EXP_ENDPOINT_SIZEOF_V2 - 2)
    struct.pack_into("<H", pcie, pci.PCI_EXP_FLAGS - 2, 2 | pci.PCI_EXP_TYPE_ENDPOINT << 4)
    struct.pack_into("<I", pcie, pci.PCI_EXP_LNKCAP - 2, link)
    struct.pack_into("<H", pcie, pci.PCI_EXP_LNKSTA - 2, link)
    self.add_capability(pci.PCI_CAP_ID_EXP, bytes(pcie))
    self.add_capability(pci.PCI_CAP_ID_MSI, bytes(12))


def publish(os, gpus: list) -> None:
  """Create the topology, render-node and PCI sysfs entries of `gpus` (node 0 = CPU)."""
  vfs = os.vfs
  vfs.add_file(f"{TOPOLOGY}/generation_id", "1\n", replace=True)
  vfs.add_file(f"{TOPOLOGY}/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n", replace=True)
  vfs.add_file(f"{TOPOLOGY}/nodes/0/gpu_id", "0\n", replace=True)
  vfs.add_file(f"{TOPOLOGY}/nodes/0/name", "\n", replace=True)
  vfs.add_file(f"{TOPOLOGY}/nodes/0/properties", render(cpu_properties()), replace=True)
  for gpu in gpus:
    node = gpu.index + 1
    base = f"{TOPOLOGY}/nodes/{node}"
    vfs.add_file(f"{base}/gpu_id", f"{gpu.gpu_id}\n")
    vfs.add_file(f"{base}/name", f"{gpu.props.target}\n")
    vfs.add_file(f"{base}/properties", read=lambda gpu=gpu, node=node: render(node_properties(gpu, node)))
    vfs.add_file(f"{base}/mem_banks/0/properties",
                 f"heap_type 1\nsize_in_bytes {gpu.props.local_mem_size}\nflags 0\nwidth 384\nmem_clk_max 1250\n")
    vfs.add_file(f"{base}/io_links/0/properties", f"type 2\nversion_major 0\nversion_minor 0\nnode_from {node}\n"
                                                  f"node_to 0\nweight 20\nmin_latency 0\nmax_latency 0\n")
    fn = os.add_pci_function(GPUPCIFunction(gpu))
    minor = RENDER_MINOR_BASE + gpu.index
    vfs.add_symlink(f"/sys/class/drm/renderD{minor}", f"../../devices/pci{fn.domain_bus}/{fn.addr}/drm/renderD{minor}")
    vfs.add_symlink(f"{fn.sysfs_dir}/drm/renderD{minor}/device", "../../../" + fn.addr)
    vfs.add_file(f"{fn.sysfs_dir}/drm/renderD{minor}/dev", f"226:{minor}\n")
    for ip, (major, minor_v, rev) in gpu.props.ip_versions.items():
      d = f"{fn.sysfs_dir}/ip_discovery/die/0/{HWIDS[ip]}/0"
      vfs.add_file(f"{d}/major", f"{major}\n")
      vfs.add_file(f"{d}/minor", f"{minor_v}\n")
      vfs.add_file(f"{d}/revision", f"{rev}\n")
      vfs.add_file(f"{d}/harvest", "0x0\n")
      if ip in IP_BASES:        # base_addr_show: one "0x%08X" line a segment
        bases = getattr(gpu.props, IP_BASES[ip])
        vfs.add_file(f"{d}/num_base_addresses", f"{len(bases)}\n")
        vfs.add_file(f"{d}/base_addr", "".join(f"0x{b:08X}\n" for b in bases))
    vfs.add_symlink(f"{fn.sysfs_dir}/ip_discovery/die/0/GC", str(HWIDS["GC"]))
    # amdgpu's device attributes (Documentation/gpu/amdgpu/driver-core.rst, thermal.rst) and its hwmon
    d = fn.sysfs_dir
    vfs.add_file(f"{d}/mem_info_vram_total", f"{gpu.props.vram_size}\n")
    vfs.add_file(f"{d}/mem_info_vram_used", read=lambda gpu=gpu: f"{gpu.vram_used()}\n")
    vfs.add_file(f"{d}/gpu_busy_percent", read=lambda gpu=gpu: f"{gpu.busy_percent()}\n")
    vfs.add_file(f"{d}/hwmon/hwmon{gpu.index}/name", "amdgpu\n")
    vfs.add_file(f"{d}/hwmon/hwmon{gpu.index}/temp1_input", "45000\n")          # millidegrees Celsius
    vfs.add_file(f"{d}/hwmon/hwmon{gpu.index}/power1_average", "35000000\n")    # microwatts
