"""The mock Navi 31 PCI function (7900 XTX: vendor 0x1002, device 0x744c, class 0x030000) for the AM driver.

BARs, as the hardware lays them out: BAR0 (64-bit prefetchable) VRAM, a memory file (memfd) mapped shared, so that a
window of it mapped at another address (MockOS.map_pci_resource, the MMU's views for the engines) shows the same
bytes; BAR2 (64-bit prefetchable)
the doorbells; BAR5 (32-bit) the register aperture, whose accesses reach the block models (regfile.py, blocks.py,
psp.py), and a mode-1 reset (reset.py). The IP discovery binary (discovery.py) sits DISCOVERY_OFFSET below the end of VRAM as the board firmware
leaves it. VRAM is reached by the GPU at MC addresses fb_base + offset (MMMC_VM_FB_LOCATION_BASE).

    os = MockOS(config); gpu = add_navi31(os)      # then the AM driver opens PCI function gpu.addr
    gpu = add_navi31_usb(os)                       # the same GPU behind a mock USB bridge (mockgpu/usb) instead of
                                                   # in sysfs: the driver reaches it with USBPCIDevice.open(os)
    gpu = add_navi31(os, vf=True)                  # an SR-IOV VF of a GPU the host booted (virt.py; gpu.virt is
                                                   # the host's side of its mailbox); vf_host: how the host answers
"""
from __future__ import annotations

import errno
import stat as st
import struct

from ....autogen import pci as pr
from ...memory import HostMemory  # noqa: F401  (the VRAM is registered with the OS's HostMemory)
from ...mmio import DoorbellMMIO, FileMemoryMMIO
from ...pci import PCIFunction
from ...vfs import DataFile, DeviceNode
from ....errors import OSCallError
from . import discovery as disc
from .blocks import IH, NBIO, RLC, Hub, SMUModel, guard_gc_hub
from .cp import CommandProcessors
from .discovery import GC_HWID, MMHUB_HWID
from .psp import PSPModel
from .regfile import RegFile
from .shader_arrays import ShaderArrays
from .reset import Mode1Reset

VENDOR, DEVICE, CLASS = 0x1002, 0x744C, 0x030000
# the VF's ids: libdrm's data/amdgpu.ids (mesa/drm upstream) "7461, 00, AMD Radeon Pro V710 MxGPU" (the PF is 0x7460);
# its IP versions: discovery.V710_IPS
VF_DEVICE, VF_REVISION = 0x7461, 0x00
DOORBELL_SIZE = 2 << 20
FB_BASE = 0x80_0000_0000


class MockNavi31:
  def __init__(self, addr: str = "0000:03:00.0", vram_size: int = 512 << 20, discovery: bytes | None = None,
               plug=None, vf: bool = False, vf_host: str = "ready", iommu: str | None = None):
    """plug(os, function): where the PCI function goes (default os.add_pci_function: sysfs). vf: the function is an
    SR-IOV VF (virt.py; vram_size is then its share of the frame buffer); vf_host: virt.PF_MODES. iommu: None (no
    IOMMU), "identity" or "dma" (mockgpu/vfio.py: an IOMMU group; "dma" translates, the function bound to vfio-pci)."""
    self.addr, self.vram_size, self.fb_base = addr, vram_size, FB_BASE
    # the physical address of VRAM's first byte (MC_VM_FB_OFFSET << 24): 0 on a single GPU, no XGMI hive
    # (amdgpu_gmc_vram_mc2pa: pa = mc - fb_start + vram_base_offset)
    self.fb_offset = 0
    self.plug = plug
    self.vf, self.vf_host, self.virt = vf, vf_host, None
    self.iommu, self.iommu_group = iommu, None
    self.ips = disc.V710_IPS if vf else disc.NAVI31_IPS
    self.gc_info, self.fused_off_wgps = (disc.V710_GC_INFO, disc.V710_FUSED_OFF_WGPS) if vf else \
      (disc.NAVI31_GC_INFO, {})
    self.discovery = disc.build(self.ips, gc_info=self.gc_info) if discovery is None else discovery
    self.os = self.vram_addr = None
    self.doorbells: list[tuple[int, int]] = []
    self.dropped_doorbells: list[tuple[int, int, str]] = []   # (offset, value, why) of doorbells no engine took
    self.mec_start = None       # the MEC firmware's start address, once the PSP loaded it (psp.py)

  # ---- VRAM as the GPU sees it (MC addresses)
  def _vram_offset(self, mc: int, size: int) -> int:
    off = mc - self.fb_base
    if off < 0 or off + size > self.vram_size:
      from ....errors import GPUFault
      raise GPUFault(f"MC address {mc:#x}+{size:#x} is outside VRAM", address=mc)
    return off

  def read_mc(self, mc: int, size: int) -> bytes:
    off = self._vram_offset(mc, min(size, self.vram_size - max(0, mc - self.fb_base)))
    return bytes(self.vram[off:off + size])

  def write_mc(self, mc: int, data: bytes) -> None:
    off = self._vram_offset(mc, len(data))
    self.vram[off:off + len(data)] = data

  def read_mc64(self, mc: int) -> int: return int.from_bytes(self.read_mc(mc, 8), "little")

  # ---- VRAM as the VM walker sees it (physical addresses)
  def is_pa(self, pa: int, size: int) -> bool: return self.fb_offset <= pa and pa + size <= self.fb_offset + self.vram_size

  def read_pa(self, pa: int, size: int, what: str = "page table") -> bytes:
    """Bytes at physical VRAM address pa; an address outside VRAM (an MC address given as physical) is refused."""
    if not self.is_pa(pa, size):
      from ....errors import DeviceError
      raise DeviceError(f"mock Navi 31 {self.addr}: {what} at {pa:#x} is not a physical VRAM address "
                        f"({self.fb_offset:#x}..{self.fb_offset + self.vram_size:#x}; the VM walker takes physical "
                        f"addresses: amdgpu_gmc_vram_mc2pa, MC addresses start at {self.fb_base:#x})")
    off = pa - self.fb_offset
    return bytes(self.vram[off:off + size])

  def read_pa64(self, pa: int, what: str = "page table") -> int: return int.from_bytes(self.read_pa(pa, 8, what), "little")

  def _vram_dword(self, off: int, value=None):
    if value is None: return int.from_bytes(self.vram[off:off + 4], "little")
    self.vram[off:off + 4] = value.to_bytes(4, "little")

  # ---- building
  def _publish_firmware(self, os) -> None:
    """The machine's firmware folder (config.firmware_dir) as the mock OS shows it: each file read from the host
    when the driver reads it. A test may replace a file in os.vfs (a damaged blob) without touching the host's.
    What is not a folder of regular files is shown as what it is (links followed), so that the driver's checks
    meet it: a firmware folder that is a file, an entry that is a folder, a device or a FIFO (a node that the mock
    never opens on the host)."""
    import os as host

    def published(path):
      def read():
        with open(path, "rb") as f: return f.read()
      return read

    def special(path, mode):
      def opener(_p, _flags): raise OSCallError("open", path, errno.EACCES, "mock: a host special file is not opened")
      node = DeviceNode(opener)
      node.file_type = st.S_IFMT(mode)
      return node

    folder = os.config.firmware_dir
    try: mode = host.stat(folder).st_mode
    except OSError: return
    if not st.S_ISDIR(mode):
      if not os.vfs.exists(folder):
        os.vfs.add(folder, DataFile(read=published(folder)) if st.S_ISREG(mode) else special(folder, mode))
      return
    # the folder's and files' permission bits as the host has them (a world-writable folder is what it is)
    os.vfs.mkdir(folder).mode = st.S_IMODE(mode)
    for name in sorted(host.listdir(folder)):
      path = host.path.join(folder, name)
      if os.vfs.exists(path): continue
      try: mode = host.stat(path).st_mode
      except OSError: continue           # a dangling link: nothing there
      if st.S_ISREG(mode): os.vfs.add_file(path, read=published(path), mode=st.S_IMODE(mode))
      elif st.S_ISDIR(mode): os.vfs.mkdir(path)
      else: os.vfs.add(path, special(path, mode))

  def attach(self, os) -> None:
    self.os = os
    self._publish_firmware(os)
    # VRAM is a memory file: the BAR view, the driver's fixed mappings of BAR windows (MockOS.map_pci_resource) and
    # the MMU's views for the engines (cp.py) are all mappings of the same bytes
    self.vram_addr, self.vram_fd = os.memory.alloc_file(self.vram_size, what=f"mock Navi 31 {self.addr} VRAM")
    self.vram = os.memview(self.vram_addr, self.vram_size)
    top = self.vram_size - disc.DISCOVERY_OFFSET
    self.vram[top:top + len(self.discovery)] = self.discovery
    ips = {hw: bases for hw, inst, _v, bases in self.ips if inst == 0}
    self.regs = RegFile(f"{self.addr} BAR5 (registers)", ips, lambda off: self._vram_dword(off),
                        lambda off, v: self._vram_dword(off, v))
    self._build_blocks()
    self.cp = CommandProcessors(self)
    self.gchub.on_invalidate = self.cp.remap
    if self.vf:
      from .virt import VFModel
      self.virt = VFModel(self, self.vf_host)
    self.reset = Mode1Reset(self)
    device, revision = (VF_DEVICE, VF_REVISION) if self.vf else (DEVICE, 0xC8)
    fn = self.function = PCIFunction(self.addr, VENDOR, device, CLASS, revision=revision, subsystem_vendor=VENDOR,
                                     subsystem_device=0x0E3B)
    fn.add_bar(0, FileMemoryMMIO(f"{self.addr} BAR0 (VRAM)", self.vram_addr, self.vram_size, self.vram_fd), is_64=True,
               prefetchable=True)
    self.doorbell_view = DoorbellMMIO(f"{self.addr} BAR2 (doorbells)", DOORBELL_SIZE, self._doorbell)
    fn.add_bar(2, self.doorbell_view, is_64=True, prefetchable=True)
    fn.add_bar(5, self.regs.mmio, is_64=False)
    if self.plug is None:
      self._add_capabilities(fn)
      if self.iommu == "dma": fn.driver = "vfio-pci"      # as a user of VFIO set it up
      os.add_pci_function(fn)
      if self.iommu is not None:
        from ...vfio import add_iommu_group
        self.iommu_group = add_iommu_group(os, fn, self.iommu)
        self.iommu_group.on_unmap.append(lambda ranges: self.cp.forget(ranges))
    else: self.plug(os, fn)

  def bus_pages(self):
    """{bus page: host page} the GPU's DMA reaches: through its IOMMU group (mockgpu/vfio.py), else host memory at
    the physical addresses pagemap handed out."""
    if self.iommu_group is not None: return self.iommu_group.bus_pages()
    return self.os.memory._phys_page

  # the PCI Express device control as the board firmware left it (256-byte payloads, 512-byte reads, relaxed ordering
  # and no-snoop), and at power-on (a mode-1 reset: 128-byte payloads); likewise BAR0's Resizable BAR size: the whole
  # VRAM as the firmware sized it (resizable BAR on), 256 MiB at power-on
  DEVCTL_FIRMWARE, DEVCTL_RESET = 0x2830, 0x2810
  REBAR_OFFSET, REBAR_RESET_SIZE = 0x100, 256 << 20

  def _add_capabilities(self, fn) -> None:
    """PCI Express (endpoint, v2) and Resizable BAR (BAR0, 256 MiB up to the VRAM size): the configuration a mode-1
    reset returns to power-on and the driver restores (reset.py)."""
    body = bytearray(pr.PCI_CAP_EXP_ENDPOINT_SIZEOF_V2 - 2)      # add_capability takes what follows id and next
    struct.pack_into("<H", body, pr.PCI_EXP_FLAGS - 2, 2 | pr.PCI_EXP_TYPE_ENDPOINT << 4)
    self.pcie = fn.add_capability(pr.PCI_CAP_ID_EXP, bytes(body))
    sizes = sum(1 << (n - 16) for n in range(28, self.vram_size.bit_length()))    # bit 4 = 1 MiB: 256 MiB..VRAM
    struct.pack_into("<III", fn.config, self.REBAR_OFFSET, pr.PCI_EXT_CAP_ID_REBAR | 1 << 16, sizes,
                     1 << pr.PCI_REBAR_CTRL_NBAR_SHIFT)
    self.power_on_config(fn, firmware=True)

  def power_on_config(self, fn, firmware: bool = False) -> None:
    """The capabilities' control registers at power-on (a reset), or as the board firmware set them."""
    if getattr(self, "pcie", None) is None: return
    struct.pack_into("<H", fn.config, self.pcie + pr.PCI_EXP_DEVCTL, self.DEVCTL_FIRMWARE if firmware else self.DEVCTL_RESET)
    size = self.vram_size if firmware else self.REBAR_RESET_SIZE
    ctrl = self.REBAR_OFFSET + pr.PCI_REBAR_CTRL
    value = struct.unpack_from("<I", fn.config, ctrl)[0] & ~pr.PCI_REBAR_CTRL_BAR_SIZE
    struct.pack_into("<I", fn.config, ctrl, value | (size.bit_length() - 21) << pr.PCI_REBAR_CTRL_BAR_SHIFT)

  def _build_blocks(self) -> None:
    """The block models in their power-on state (at attach, and again after a mode-1 reset)."""
    self.mec_start = None
    self.nbio = NBIO(self)
    self.mmhub = Hub(self, MMHUB_HWID, "mmhub_3_0_0", "MMVM", "MMMC")
    self.gchub = Hub(self, GC_HWID, self.gfxhub_module(), "GCVM", "GCMC")
    self.ih = IH(self)
    self.rlc = RLC(self)
    self.shader_arrays = ShaderArrays(self, self.gc_info["gc_num_se"], self.gc_info["gc_num_sa_per_se"],
                                      self.fused_off_wgps)
    self.smu = SMUModel(self)
    self.psp = PSPModel(self)
    guard_gc_hub(self)

  # the register module of the GC hub per GC version: GC 11.0.3's GCVM_*/GCMC_* registers sit at other offsets than
  # gc 11.0.0's (Linux gc_11_0_3_offset.h, used by gfxhub_v3_0_3.c, which gmc_v11_0_set_gfxhub_funcs picks for GC
  # 11.0.3); every other GC register keeps gc 11.0.0's place
  GFXHUB_MODULES = {(11, 0, 3): "gc_11_0_3_gfxhub"}

  def gfxhub_module(self) -> str:
    gc = next(ver for hw, inst, ver, _b in self.ips if hw == GC_HWID and inst == 0)
    return self.GFXHUB_MODULES.get(tuple(gc), "gc_11_0_0")

  def mode1_reset(self, by: str) -> None:
    """A mode-1 reset asked through `by` (the SMU's message or the PSP's command): see reset.py."""
    self.reset.start(by)

  def host_memory_freed(self, addr: int, size: int) -> bool:
    """MockOS.free_anon: host memory goes; the engines stop reaching it first (cp.forget), so that a driver that
    frees memory its page tables still map gets GPU faults, never a crash of the process. Nothing is kept alive."""
    if getattr(self, "cp", None) is not None: self.cp.forget([(addr, size)])
    return False

  def process_exiting(self, pid: int, ranges) -> None:
    """MockOS: a process ends and its host memory goes; the engines stop reaching it (cp.process_exiting)."""
    self.cp.process_exiting(ranges)

  def _doorbell(self, offset: int, value: int) -> None:
    self.doorbells.append((offset, value))   # a doorbell no queue listens to (queues route theirs: cp.py)

  def close(self) -> None:
    if getattr(self, "cp", None) is not None: self.cp.close()
    if self.vram_addr is not None:
      self.vram.release()
      self.os.memory.free_file(self.vram_addr)
      self.vram_addr = None


def add_navi31(os, addr: str = "0000:03:00.0", **kw) -> MockNavi31:
  """A mock Navi 31 PCI function on MockOS `os` (os.add_device: closed with the OS)."""
  return os.add_device(MockNavi31(addr, **kw))


def add_navi31_usb(os, faults: str | None = None, **kw) -> MockNavi31:
  """A mock Navi 31 as the endpoint (bus 4) of a mock ASM24xx bridge plugged into MockOS `os` (mockgpu/usb): config
  requests, BAR reads and writes reach it as TLPs. `gpu.bridge` is the bridge device (its .fw counts requests)."""
  from ...usb import mock_usb_bridge
  def plug(os, fn):
    gpu.bridge = mock_usb_bridge(os, endpoint=fn, faults=faults)
  gpu = MockNavi31("0000:04:00.0", plug=plug, **kw)
  return os.add_device(gpu)
